"""Tests for parsers.ray_cluster: Ray's records of a lost node, a memory-monitor kill and a dead worker, each with the
host the record names (not the reporter's), the exit detail read across a hard-wrapped notice."""

from __future__ import annotations

from parsers import ray_cluster as ray
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext


def run(text: str) -> Extraction:
    return ray.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="driver.log"))


def rows(ex: Extraction) -> list[tuple]:
    return [(e["line_no"], e["kind"], e["code"], e["host"]) for e in ex.events.to_dicts()]


def test_node_lost_every_gcs_wording_names_the_lost_node_not_the_reporter() -> None:
    ex = run(
        "(BackendExecutor pid=5126, ip=10.128.0.32) loss: 1.9\n"
        "2022-02-15 16:53:52,096\tWARNING worker.py:1462 -- The node with node id: 8f20 and ip: 10.128.0.103 has been "
        "marked dead because the detector has missed too many heartbeats from it.\n"
        "(raylet, ip=10.0.0.1) The node with node id: c118 and address: 10.0.3.192 and node name: 10.0.3.192 has been "
        "marked dead because the detector has missed too many heartbeats from it. This can happen when a \n"
        "The node with client ID 5816 has been marked dead because the monitor has missed too many heartbeats from it.\n"
        "Task failed because the node it was running on is dead or unavailable. Node IP: 10.0.0.9, node ID: e55b.\n"
        "The actor is dead because its node has died. Node Id: 56b9\n")
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert rows(ex) == [(2, "ray_node_lost", "NODE_DIED", "10.128.0.103"), (3, "ray_node_lost", "NODE_DIED", "10.0.3.192"),
                        (4, "ray_node_lost", "NODE_DIED", None), (5, "ray_node_lost", "NODE_DIED", "10.0.0.9"),
                        (6, "ray_node_lost", "NODE_DIED", None)]
    assert ex.events["ts"][0].isoformat() == "2022-02-15T16:53:52.096000+00:00"


def test_memory_monitor_kills_host_from_the_record_and_zero_kills_are_none() -> None:
    ex = run(
        "(raylet) [2024-08-25 19:21:02,241 E 1 1] (raylet) node_manager.cc:3064: 12 Workers (tasks / actors) killed due "
        "to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: b8aa, IP: 172.31.105.218) over "
        "the last time period.\n"
        "0 Workers (tasks / actors) killed due to memory pressure (OOM), 2 Workers crashed due to other reasons at node "
        "(ID: ab37, IP: 172.28.0.12)\n"
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 192.168.0.107, ID: fc2b) where the task (actor ID: f9cc, pid=4331) was running\n"
        "(raylet) node_manager.cc:2963: System memory low at node with IP 172.17.0.2. Used memory (23.63GB)\n")
    assert rows(ex) == [(1, "ray_oom_kill", "NODE_OUT_OF_MEMORY", "172.31.105.218"),
                        (3, "ray_oom_kill", "NODE_OUT_OF_MEMORY", "192.168.0.107"),
                        (5, "ray_oom_kill", "NODE_OUT_OF_MEMORY", "172.17.0.2")]
    assert ex.claimed.to_list() == [1, 2, 3, 4, 5]  # the zero-kill summary and the memory detail are read


def test_terminal_wrapped_summary_takes_the_ip_from_its_next_line() -> None:
    ex = run("(raylet) [2025-12-07 09:57:19,206 E 3 3] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) killed "
             "due to memory pressure (OOM), 0 Workers crashed due to other reasons at \n"
             "node (ID: 8289, IP: 172.24.0.226) over the last time period. To see more information about the Workers\n")
    assert rows(ex) == [(1, "ray_oom_kill", "NODE_OUT_OF_MEMORY", "172.24.0.226")]
    assert ex.claimed.to_list() == [1, 2]


def test_worker_died_code_is_the_exit_detail_across_a_wrapped_notice() -> None:
    eof = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
           "the problem, check the logs for the dead worker. RayTask ID: ff Worker ID: 0e Node ID: 84 Worker IP address: "
           "172.19.24.110 Worker port: 10185 Worker PID: 90738 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
           "unexpectedly exits with a connection error code 2. End of file.\n")
    sigterm = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. RayTask ID: ff\n"
               "1bbc Worker ID: 9d Node ID: 5c Worker IP address: 159.226.47\n"
               ".239 Worker port: 38191 Worker PID: 870287 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
               "exits unexpectedly by a signal. SystemExit is raised (sys.exit is called). Exit code: 1. \n"
               "The process receives a SIGTERM. \n")
    bare = ("2022-07-07 19:05:41,609 WARNING worker.py:1404 -- A worker died or was killed\n"
            "while executing a task by an unexpected system error. To troubleshoot the\n")
    actor = ("The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY Worker exit "
             "detail: Task was killed due to the node running low on memory.\n")
    ex = run(eof + sigterm + bare + actor)
    # the SIGTERM notice's IP is cut by the wrap: no host rather than a wrong one
    assert rows(ex) == [(1, "ray_worker_died", "CONNECTION_EOF", "172.19.24.110"), (2, "ray_worker_died", "SIGTERM", None),
                        (6, "ray_worker_died", "UNKNOWN", None), (8, "ray_oom_kill", "NODE_OUT_OF_MEMORY", None)]
    assert ex.claimed.to_list() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert ex.events.filter(ex.events["code"] == "SIGTERM")["severity"].to_list() == ["warning"]


def test_unrelated_lines_give_nothing() -> None:
    ex = run("Worker exited normally\nThe actor is dead because all references to the actor were removed.\nloss: 0.1\n")
    assert ex.events.is_empty()


def test_raylet_graceful_shutdown_code_is_its_node_death_reason() -> None:
    ex = run(
        "[2025-02-11 20:08:00,117 I 4121 4121] main.cc:483: received SIGTERM. Existing local drain request = None\n"
        "[2025-02-11 20:08:00,117 I 4121 4121] main.cc:284: Raylet graceful shutdown triggered, reason = "
        "EXPECTED_TERMINATION, reason message = received SIGTERM\n"
        "[2025-02-11 20:08:01,000 I 1 1] main.cc:284: Raylet graceful shutdown triggered, reason = "
        "AUTOSCALER_DRAIN_PREEMPTED, reason message = preempted\n"
        "[2025-02-11 20:08:02,000 I 1 1] main.cc:284: Raylet graceful shutdown triggered, reason = "
        "UNEXPECTED_TERMINATION, reason message = agent died\n"
        "[2025-02-11 20:08:03,000 I 1 1] main.cc:284: Raylet graceful shutdown triggered, reason = "
        "AUTOSCALER_DRAIN_IDLE, reason message = idle\n"
        "[2026-07-21 10:00:00,000 I 1 1] main.cc:300: Raylet graceful shutdown triggered with death info: \n")
    assert [r[:3] for r in rows(ex)] == [
        (2, "ray_raylet_shutdown", "EXPECTED_TERMINATION"), (3, "ray_raylet_shutdown", "AUTOSCALER_DRAIN_PREEMPTED"),
        (4, "ray_raylet_shutdown", "UNEXPECTED_TERMINATION"), (5, "ray_raylet_shutdown", "AUTOSCALER_DRAIN_IDLE"),
        (6, "ray_raylet_shutdown", "UNSPECIFIED")]
    assert ex.events["severity"].to_list() == ["info", "warning", "error", "info", "info"]
    assert ex.events["ts"][0].isoformat() == "2025-02-11T20:08:00.117000+00:00"

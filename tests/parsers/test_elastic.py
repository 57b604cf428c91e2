"""Tests for parsers.elastic (pytorch_dist.md §6: agent lines, ChildFailedError tables, error files)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import elastic
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "elastic"
REAL = ROOT.parent / "shared" / "real-samples"


def run(text: str, **ctx):
    ctx.setdefault("ref_year", 2025)
    lines = with_body(decode_lines(text.encode()).lines)
    return elastic.parse(lines, ParseContext(path="agent.log", **ctx))


def fixture(name: str, **ctx):
    return run((FIX / name).read_text(), **ctx)


def real(case: str, name: str) -> str:
    hits = sorted(REAL.glob(f"{case}-*/{name}")) if REAL.exists() else []
    if not hits:
        pytest.skip("../shared/real-samples not available")
    return hits[0].read_text()


def check_accounting(ex, n_lines: int) -> None:
    c, i = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not c & i
    assert c | i <= set(range(1, n_lines + 1))
    assert set(ex.events["line_no"].to_list()) <= c
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]


def test_agent_lines_three_eras():
    ex = fixture("agent_lines.log")
    rows = ex.events.select("line_no", "kind", "code", "local_rank", "pid").rows()
    assert rows == [
        (1, "worker_failed", "-6", 0, 2380846),
        (2, "worker_failed", "1", 2, 5939),
        (3, "worker_failed", "-9", 5, 2630),
        (4, "teardown_signal", "SIGTERM", None, 147865),
        (5, "teardown_signal", "SIGTERM", None, None),
        (6, "teardown_signal", "SIGTERM", None, 147800),
        (7, "restart", "3", None, None),
    ]
    ts = ex.events["ts"].to_list()
    assert ts[0] is None
    assert ts[1] == datetime(2024, 5, 8, 8, 47, 31, 877000, tzinfo=UTC)
    assert ts[2] == datetime(2025, 3, 25, 20, 57, 27, 620000, tzinfo=UTC)  # glog MMDD + ref_year


def test_elastic_table_full():
    ex = fixture("child_failed_table.log")
    e = ex.events.filter(pl.col("kind") == "elastic_failure")
    assert e.select("line_no", "code", "host", "rank", "local_rank", "pid").rows() == [
        (10, "-6", "node-07.cluster", 1, 1, 2385923), (19, "1", "node-07.cluster", 0, 0, 2385922)]
    assert e["ts"].to_list() == [datetime(2023, 6, 14, 22, 36, 10, tzinfo=UTC),
                                 datetime(2023, 6, 14, 22, 36, 9, tzinfo=UTC)]
    exits = ex.tables["exits"]
    assert exits.select("exitcode", "signal", "first_observed", "origin", "error_file", "message").rows() == [
        (-6, "SIGABRT", False, "elastic", None, "Signal 6 (SIGABRT) received by PID 2385923"),
        (1, None, True, "elastic", "/tmp/torchelastic_x/none_ab/attempt_0/0/error.json", "KeyError: 'k'")]
    assert ex.claimed.to_list() == list(range(1, 26))  # including the traceback inside the entry


def test_elastic_table_local_time_zone():
    from zoneinfo import ZoneInfo
    ex = fixture("child_failed_table.log", tz=ZoneInfo("Europe/Paris"))
    assert ex.events["ts"][0] == datetime(2023, 6, 14, 20, 36, 10, tzinfo=UTC)


def test_elastic_table_mid_entry_start():
    ex = fixture("table_mid_entry.log")
    exits = ex.tables["exits"]
    assert exits.select("line_no", "rank", "pid", "exitcode", "signal", "first_observed").rows() == [
        (1, None, 3437, -6, "SIGABRT", False),  # the cut entry keeps what it has
        (8, 7, 3438, -6, "SIGABRT", False),
        (17, 0, 3431, -6, "SIGABRT", True)]


def test_deepspeed_launcher():
    """The exit notice's `--local_rank=1` is not the failed worker's: launch.py logs `cmd`, the spawn loop's
    variable (the last worker started), so the notice names no local rank."""
    ex = fixture("deepspeed_launcher.log")
    assert ex.events.select("line_no", "kind", "code", "local_rank", "pid").rows() == [
        (1, "teardown_signal", "SIGKILL", None, 748089), (2, "launcher_exit", "-6", None, None)]
    assert ex.tables["exits"].select("origin", "exitcode", "signal", "local_rank").rows() == [
        ("deepspeed", -6, "SIGABRT", None)]


DS_BANNER = (
    "[2023-04-14 16:42:18,341] [WARNING] [runner.py:190:fetch_hostfile] Unable to find hostfile, will proceed with "
    "training with local resources only.\n"
    "Detected CUDA_VISIBLE_DEVICES=0: setting --include=localhost:0\n"
    "[2023-04-14 16:42:18,350] [INFO] [runner.py:540:main] cmd = /opt/conda/bin/python -u -m deepspeed.launcher.launch "
    "--world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 --master_port=29500 main.py\n"
    "[2021-01-31 23:07:46,791] [INFO] [launch.py:71:main] 0 NCCL_DEBUG INFO\n"
    "[2023-04-14 16:42:21,769] [INFO] [launch.py:229:main] WORLD INFO DICT: {'localhost': [0]}\n"
    "[2023-04-14 16:42:21,769] [INFO] [launch.py:235:main] nnodes=1, num_local_procs=1, node_rank=0\n"
    "[2023-04-14 16:42:21,769] [INFO] [launch.py:246:main] global_rank_mapping=defaultdict(<class 'list'>, "
    "{'localhost': [0]})\n"
    "[2023-04-14 16:42:21,769] [INFO] [launch.py:247:main] dist_world_size=1\n"
    "[2023-04-14 16:42:21,769] [INFO] [launch.py:249:main] Setting CUDA_VISIBLE_DEVICES=0\n"
    "[2023-04-14 16:42:21,770] [INFO] [launch.py:258:main] process 1234 spawned with command: ['/opt/conda/bin/python', "
    "'-u', 'main.py', '--local_rank=0']\n"
    "[2023-04-14 17:00:00,000] [INFO] [launch.py:350:main] Process 1234 exits successfully.\n"
    "[2023-04-14 17:00:00,000] [INFO] [runner.py:540:main] cmd = pdsh -S -f 1024 -w worker-0,worker-1 export "
    "PYTHONPATH=/w; cd /w; /usr/bin/python -u -m deepspeed.launcher.launch --world_info=e30= --node_rank=%n train.py\n")


def test_deepspeed_banner_claimed_one_launch():
    """runner.py / launch.py progress of a normal run: every line claimed, one `launch` (WORLD INFO DICT)."""
    ex = run(DS_BANNER)
    assert ex.events.select("line_no", "kind", "severity").rows() == [(5, "launch", "info")]
    assert ex.claimed.to_list() == list(range(1, 13))


def test_deepspeed_main_process_signalled():
    ex = run("[2024-05-01 12:00:01,000] [INFO] [launch.py:328:sigkill_handler] Main process received SIGINT, exiting\n"
             "[2024-05-01 12:00:01,000] [INFO] [launch.py:328:sigkill_handler] Main process received SIGTERM, exiting\n")
    assert ex.events.select("line_no", "kind", "code").rows() == [
        (1, "teardown_signal", "SIGINT"), (2, "teardown_signal", "SIGTERM")]


@pytest.mark.parametrize(("line", "code", "local_rank", "origin"), [
    ("subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with <Signals.SIGSEGV: 11>.",
     "-11", None, "subprocess"),
    ("subprocess.CalledProcessError: Command '['python', '-u', 'x.py']' died with unknown signal 40.",
     "-40", None, "subprocess"),
    # a paste cut before the final period (and before the repr's end: no event, below)
    ("subprocess.CalledProcessError: Command '['accelerate', 'launch', 'x.py']' died with <Signals.SIGKILL: 9>",
     "-9", None, "subprocess"),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGKILL",
     "-9", 3, "spawn"),
])
def test_python_parent_reports_signal_exit(line: str, code: str, local_rank: int | None, origin: str):
    ex = run(line + "\n")
    assert ex.events.select("kind", "code", "local_rank").rows() == [("launcher_exit", code, local_rank)]
    assert ex.tables["exits"].select("origin", "exitcode").rows() == [(origin, int(code))]


@pytest.mark.parametrize("line", [
    "subprocess.CalledProcessError: Command '['/usr/bin/gcc', 'main.c']' returned non-zero exit status 1.",
    "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1",
    # cut inside the signal's number or repr: which signal is not known
    "subprocess.CalledProcessError: Command '['python', 'x.py']' died with unknown signal 4",
    "subprocess.CalledProcessError: Command '['python', 'x.py']' died with <Signals.SIGSEGV: 1",
])
def test_python_parent_positive_status_no_event(line: str):
    """A plain non-zero status names no cause (the child's own lines do), and a line cut before the signal is
    whole names none: no launcher_exit."""
    assert run(line + "\n").events.filter(pl.col("kind") == "launcher_exit").is_empty()


def test_error_json_dict_form():
    text = (FIX / "error_file.json").read_text()
    assert elastic.sniff_error_json(text)
    ex = elastic.parse_error_json(text, ParseContext(path="node1/attempt_0/3/error.json", rank_hint=11))
    row = ex.events.row(0, named=True)
    assert (row["kind"], row["code"], row["local_rank"], row["rank"]) == ("exception", "RuntimeError", 3, 11)
    assert row["ts"] == datetime.fromtimestamp(1718000000, tz=UTC) and row["ts_quality"] == "exact"
    assert "illegal memory access" in row["message"]
    assert ex.claimed.to_list() == [1]


def test_error_json_plain_string():
    text = (FIX / "error_file_plain.json").read_text()
    assert elastic.sniff_error_json(text)
    ex = elastic.parse_error_json(text, ParseContext(path="error.json"))
    assert ex.events.select("code", "ts_quality").rows() == [("ValueError", "missing")]


def test_error_json_invalid():
    ex = elastic.parse_error_json('{"message": ', ParseContext(path="error.json"))
    assert ex.events.is_empty() and ex.warnings


def test_real_033_table_mid_entry():
    ex = run(real("033", "traceback.txt"))
    e = ex.events.filter(pl.col("kind") == "elastic_failure")
    assert e["line_no"].to_list() == [1, 8, 17]
    assert len(e) == 3
    exits = ex.tables["exits"]
    assert exits.filter(pl.col("first_observed"))["rank"].to_list() == [0]
    assert exits["exitcode"].to_list() == [-6, -6, -6]
    assert exits["host"].to_list() == [None, "472a4389fceb", "472a4389fceb"]
    assert ex.claimed.to_list() == list(range(1, 21))


def test_real_042_sigkill_no_other_failures():
    ex = run(real("042", "traceback.txt"))
    assert ex.events.select("line_no", "kind", "code", "rank", "pid").rows() == [
        (22, "elastic_failure", "-9", 0, 14750)]
    assert ex.tables["exits"].select("signal", "first_observed").rows() == [("SIGKILL", True)]
    assert ex.claimed.to_list() == list(range(10, 26))


def test_sniff():
    assert elastic.sniff((FIX / "child_failed_table.log").read_text()) >= 0.9
    assert elastic.sniff((FIX / "agent_lines.log").read_text()) >= 0.9
    assert elastic.sniff("nothing here\n") == 0.0
    assert not elastic.sniff_error_json("Traceback ...")


LINES = [ln for p in sorted(FIX.glob("*.log")) for ln in p.read_text().splitlines()]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=100), st.sampled_from(LINES)), max_size=40), st.randoms())
def test_property_never_raises_and_accounting(chunks, rnd):
    mutated = []
    for c in chunks:
        if c and rnd.random() < 0.3:
            i = rnd.randrange(len(c))
            c = c[:i] + rnd.choice(["", "(", ":", " ", "-", "[0]:", "=" * 12]) + c[i + 1:]
        mutated.append(c.replace("\n", " ").replace("\r", " "))
    text = "\n".join(mutated) + "\n"
    check_accounting(run(text), len(decode_lines(text.encode()).lines))


@given(st.text(max_size=200))
@settings(max_examples=100, deadline=None)
def test_error_json_never_raises(text):
    elastic.sniff_error_json(text)
    elastic.parse_error_json(text, ParseContext(path="error.json"))


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.log")))
def test_fixture_accounting(name):
    text = (FIX / name).read_text()
    check_accounting(run(text), len(decode_lines(text.encode()).lines))


def test_rule_lines_without_a_table_are_not_claimed():
    # NCCL RAS output underlines its headings with '=====': not a ChildFailedError table
    ex = run("Job summary\n===========\n\nErrors\n======\n")
    assert ex.claimed.is_empty() and ex.events.is_empty()


def test_agent_progress_lines_are_claimed_without_an_event():
    """The agent's normal-run messages (agent/server/api.py, local_elastic_agent.py, multiprocessing/api.py),
    in the logging, bracketed and glog prefix eras and under TorchX's empty role `[]`, are read as progress:
    claimed, no event; a failure among them still is one."""
    text = (
        "INFO:torch.distributed.elastic.agent.server.local_elastic_agent:log directory set to: /tmp/torchelastic_a\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] starting workers for entrypoint: python\n"
        "INFO:torch.distributed.elastic.agent.server.api:[] Rendezvous'ing worker group\n"
        "INFO:torch.distributed.elastic.agent.server.api:[] Rendezvous complete for workers. Result:\n"
        "  restart_count=0\n"
        "  master_addr=tristanr-arch2\n"
        "  local_ranks=[0, 1]\n"
        "  global_world_sizes=[2, 2]\n"
        "INFO:torch.distributed.elastic.multiprocessing:Setting worker0 reply file to: /tmp/t/attempt_0/0/error.json\n"
        "[2024-05-08 08:47:31,877] torch.distributed.elastic.agent.server.api: [INFO] [trainer] Starting worker group\n"
        "I0325 20:57:27.620000 2606 torch/distributed/elastic/agent/server/api.py:873] [default] worker group "
        "successfully finished. Waiting 300 seconds for other agents to finish.\n"
        "INFO:torch.distributed.elastic.agent.server.api:Local worker group finished (SUCCEEDED). Waiting 300 seconds "
        "for other agents to finish\n"
        "INFO:torch.distributed.elastic.agent.server.api:Done waiting for other agents. Elapsed: 0.0004 seconds\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Stopping worker group\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 1168) of "
        "binary: /opt/conda/bin/python\n"
        "  some_setting=3\n")
    ex = run(text)
    assert ex.events["kind"].to_list() == ["worker_failed"]
    assert set(ex.claimed.to_list()) == set(range(1, 16))


STATUS = ('{{"name": "torchelastic.worker.status.{state}", "source": "WORKER", "timestamp": {ts}, "metadata": '
          '{{"run_id": "none", "global_rank": {rank}, "group_rank": 0, "worker_id": "2315811", "role": "default", '
          '"hostname": "{host}", "state": "{state}", "total_run_time": 115375, "rdzv_backend": "static", '
          '"raw_error": {raw}, "metadata": "{{\\"group_world_size\\": 1, \\"entry_point\\": \\"python\\", '
          '\\"local_rank\\": [{rank}], \\"role_rank\\": [{rank}], \\"role_world_size\\": [8]}}", '
          '"agent_restarts": 0}}}}')


def status(state: str, rank: int, host: str = "f1638f8a8d30", ts: int = 0, raw: str = "null") -> str:
    return STATUS.format(state=state, rank=rank, host=host, ts=ts, raw=raw)


def test_worker_status_events_succeeded_and_failed():
    """torchelastic's metrics events (events/api.py Event.serialize, agent/server/api.py _construct_event): a
    SUCCEEDED worker is a train_end of its rank and host, a FAILED one the exception of its raw_error (the error
    file it wrote, JSON in a string) or, with none, a worker_failed coded FAILED; the other WorkerStates and a
    line cut before its end are claimed with no event."""
    failed_raw = json.dumps(json.dumps({"message": {"message": "RuntimeError: CUDA error: an illegal memory access "
                                                    "was encountered", "extraInfo": {"timestamp": "1700000000"}}}))
    text = "\n".join([
        status("SUCCEEDED", 0),
        status("SUCCEEDED", 1, host="node-7", ts=1700000000),
        status("FAILED", 5, host="node-3", raw=failed_raw),
        status("HEALTHY", 2),
        status("SUCCEEDED", 3)[:120],
        status("FAILED", 6, host="node-3"),
        status("FAILED", 7, host="node-3", raw='"KeyError: \'labels\'"'),
    ]) + "\n"
    ex = run(text)
    got = ex.events.select("line_no", "kind", "code", "rank", "local_rank", "host").rows()
    assert got == [(1, "train_end", "worker_succeeded", 0, 0, "f1638f8a8d30"),
                   (2, "train_end", "worker_succeeded", 1, 1, "node-7"),
                   (3, "exception", "RuntimeError", 5, 5, "node-3"),
                   (6, "worker_failed", "FAILED", 6, 6, "node-3"),
                   (7, "exception", "KeyError", 7, 7, "node-3")]
    assert ex.events["ts"][1] == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC) and ex.events["ts"][0] is None
    assert ex.events["message"][2] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert ex.events["message"][4] == "KeyError: 'labels'"
    check_accounting(ex, 7)
    assert set(ex.claimed.to_list()) == set(range(1, 8))


def test_worker_status_events_are_sniffed():
    assert elastic.sniff(status("SUCCEEDED", 0) + "\n") > 0.5

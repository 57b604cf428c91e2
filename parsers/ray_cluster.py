"""Ray's own records of a lost node, a worker killed for memory, and a worker process that died, as the
driver, the raylet and the GCS print them (ray-project/ray: src/ray/gcs/gcs_server/gcs_node_manager.cc,
src/ray/raylet/node_manager.cc, src/ray/raylet/worker_killing_policy*.cc, python/ray/exceptions.py,
python/ray/_raylet.pyx). Each names the node it is about by IP; that IP is the event's host (the line's
wrapper, `(raylet, ip=..)` / `(RayTrainWorker pid=.., ip=..)`, is the reporter, not the subject):

- `ray_node_lost` (code NODE_DIED): the GCS's `The node with node id: <id> and ip: <ip> has been marked dead
  because the detector has missed too many heartbeats from it` (`and address: <ip> and node name: <n>` in
  Ray >= 1.13; `The node with node id <id> ...`, and Ray <= 0.8's `The node with client ID <id> has been
  marked dead because the monitor has missed too many heartbeats`, name no IP); a task's NODE_DIED error
  `Task failed because the node it was running on is dead or unavailable. Node IP: <ip>`; an actor's
  `The actor is dead because its node has died.` / `The actor died because its node has died.`; the raylet
  of the dead node itself: `This node has beem marked as dead.` (sic) and `Exiting because this node manager
  has mistakenly been marked as dead by the GCS` (host: the line's own).
- `ray_oom_kill` (code NODE_OUT_OF_MEMORY): the memory monitor's kills: the raylet's periodic summary
  `N Workers (tasks / actors) killed due to memory pressure (OOM), M Workers crashed due to other reasons at
  node (ID: <id>, IP: <ip>)` (N >= 1; `0 Workers ... killed` is no kill), Ray 2.0's `System memory low at node
  with IP <ip>. Used memory ... exceeds threshold`, the task's `ray.exceptions.OutOfMemoryError: Task was killed
  due to the node running low on memory.` (its `Memory on the node (IP: <ip>, ...` line, within the next
  lines, gives the host and is claimed with it), and `Worker exit type: NODE_OUT_OF_MEMORY`.
- `ray_worker_died`: the raylet's / core worker's `A worker died or was killed while executing a task by an
  unexpected system error. ... Worker IP address: <ip> ... Worker exit type: <T> Worker exit detail: <D>` and
  the actor's `The actor is dead because its worker process has died. Worker exit type: <T> Worker exit
  detail: <D>` (ActorDiedError). The code is what the exit detail says, read on the notice's line and the few
  lines after it (a terminal hard-wraps the notice): CONNECTION_EOF (`Worker unexpectedly exits with a
  connection error code 2. End of file`: the process vanished: SIGKILL by the OOM killer, `ray stop --force`
  or a SIGSEGV, Ray's own list), SIGTERM (`The process receives a SIGTERM`: terminated, as at shutdown),
  SYSTEM_EXIT (`SystemExit is raised`, no signal named), UNKNOWN (no detail: Ray <= 1.x printed none).
  A detail line of a wrapped notice is claimed with it.
- `ray_raylet_shutdown`: the raylet's own `Raylet graceful shutdown triggered, reason = <R>, reason message = <M>`
  (src/ray/raylet/main.cc, Ray >= 2.10; `... triggered with death info: reason: <R> ...` when the death info is
  printed on one line). The code is the reason, a `NodeDeathInfo.Reason` of src/ray/protobuf/common.proto:
  EXPECTED_TERMINATION (SIGTERM, `ray stop`, a shutdown RPC), UNEXPECTED_TERMINATION (the raylet's agent died, it
  fate-shares), AUTOSCALER_DRAIN_PREEMPTED (the node is preempted), AUTOSCALER_DRAIN_IDLE (scaled down idle),
  UNSPECIFIED (none named, also the multi-line death-info form whose reason is on the next line); host: the line's.

Times: the raylet's `[2023-04-19 16:22:19,798 E 329 329]` and the driver's `2022-02-15 16:53:52,096\tWARNING`.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, events_frame, line_host
from parsers.spec import ParserSpec
from parsers.timestamps import iso

_IP = r"(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]*:[0-9A-Fa-f:]+|[A-Za-z0-9][\w.-]*)"
NODE_MARKED_RE = (r"The node with (?:node id:? \S+|client ID \S+)(?: and (?:ip|address): (?P<ip>" + _IP + r"))?"
                  r"(?: and node name: \S+)? has been marked dead because the (?:detector|monitor) has missed too many heartbeats")
NODE_TASK_RE = r"Task failed because the node it was running on is dead or unavailable\.(?: Node IP: (?P<ip>" + _IP + r"))?"
NODE_ACTOR_RE = r"The actor (?:is dead|died) because its node has died"
NODE_SELF_RE = r"This node has beem? marked as dead|Exiting because this node manager has mistakenly been marked as dead by the GCS"
OOM_SUMMARY_RE = (r"\b(?P<n>\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\), \d+ Workers crashed due to"
                  r" other reasons at(?:\s+node \(ID: \w+, IP: (?P<ip>" + _IP + r")\))?")
OOM_LOW_RE = r"System memory low at node with IP (?P<ip>" + _IP + r")\."
OOM_TASK_RE = r"Task was killed due to the node running low on memory|ray\.exceptions\.OutOfMemoryError\b|Worker exit type: NODE_OUT_OF_MEMORY"
OOM_NODE_RE = r"^Memory on the node \(IP: (?P<ip>" + _IP + r"), ID: \w+\) where the task"
# a hard-wrapped summary's second line: `node (ID: <id>, IP: <ip>) over the last time period`
NODE_ID_IP_RE = r"\(ID: \w+, IP: (?P<ip>" + _IP + r")\) over the last time period"
DIED_RE = r"A worker died or was killed\b|The actor is dead because its worker process has died|^Worker exit type: \w+ Worker exit detail:"
WORKER_IP_RE = r"Worker IP address: (?P<ip>" + _IP + r") Worker port:"  # the next field: a wrapped IP is cut
# what the exit detail says, in order: the first that matches (on the notice and the lines after it) wins
DETAIL_CODES = (
    (r"NODE_OUT_OF_MEMORY|killed due to the node running low on memory", "NODE_OUT_OF_MEMORY"),
    (r"The process receives a SIGTERM", "SIGTERM"),
    (r"connection error code 2\. End of file|exits with a connection error code", "CONNECTION_EOF"),
    (r"SystemExit is raised", "SYSTEM_EXIT"),
)
# a hard-wrapped notice's tail: the worker's ids, IP, port, pid and exit type/detail, or Ray's list of causes
TAIL_RE = (r"Worker (?:ID|IP address|port|PID|exit type|exit detail):|RayTask ID:|Lease ID:|Node ID:|SystemExit is raised"
           r"|The process receives a SIGTERM|connection error code|potential root causes|common causes include"
           r"|check the logs for the dead worker|while executing a task by an unexpected system error|over the last time period")
SHUTDOWN_RE = r"Raylet graceful shutdown triggered(?:, reason = (?P<r1>[A-Z_]+)| with death info:(?:\s*reason: (?P<r2>[A-Z_]+))?)"
SHUTDOWN_REASONS = ("EXPECTED_TERMINATION", "UNEXPECTED_TERMINATION", "AUTOSCALER_DRAIN_PREEMPTED", "AUTOSCALER_DRAIN_IDLE",
                    "UNSPECIFIED")
_LOOKAHEAD = 4  # a wrapped notice's detail arrives within a few lines
_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[,.](\d{1,6}))?"

CANDIDATES = ("marked dead", "marked as dead", "node it was running on is dead", "because its node has died",
              "killed due to memory pressure", "System memory low at node", "running low on memory",
              "OutOfMemoryError", "NODE_OUT_OF_MEMORY", "Memory on the node", "A worker died or was killed",
              "because its worker process has died", "Worker IP address", "Worker exit", "RayTask ID", "Lease ID",
              "Node ID:", "SystemExit is raised", "receives a SIGTERM", "connection error code", "root causes",
              "common causes", "logs for the dead worker", "unexpected system error", "over the last time period",
              "graceful shutdown triggered")


def sniff(head: str) -> float:
    any_re = re.sub(r"\?P<\w+>", "", "|".join((NODE_MARKED_RE, NODE_TASK_RE, NODE_ACTOR_RE, NODE_SELF_RE,
                                               OOM_SUMMARY_RE, OOM_LOW_RE, OOM_TASK_RE, DIED_RE, SHUTDOWN_RE)))
    n = len(re.findall(any_re, head))
    return 0.0 if n == 0 else min(0.4 + 0.1 * n, 0.6)


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    df = lines.sort("line_no").filter(b.str.contains_any(list(CANDIDATES)))
    if df.is_empty():
        return Extraction(events=empty_events())
    ln = pl.col("line_no")
    df = df.with_columns(
        b.str.extract_groups(ascii_classes(NODE_MARKED_RE)).alias("_nm"), b.str.extract_groups(ascii_classes(NODE_TASK_RE)).alias("_nt"),
        b.str.contains(ascii_classes(NODE_ACTOR_RE)).alias("_na"), b.str.contains(ascii_classes(NODE_SELF_RE)).alias("_ns"),
        b.str.extract_groups(ascii_classes(OOM_SUMMARY_RE)).alias("_os"), b.str.extract(ascii_classes(OOM_LOW_RE), 1).alias("_ol"),
        b.str.contains(ascii_classes(OOM_TASK_RE)).alias("_ot"), pl.coalesce(b.str.extract(ascii_classes(OOM_NODE_RE), 1), b.str.extract(ascii_classes(NODE_ID_IP_RE), 1)).alias("_on"),
        b.str.contains(ascii_classes(DIED_RE)).alias("_died"), b.str.extract(ascii_classes(WORKER_IP_RE), 1).alias("_wip"),
        b.str.contains(ascii_classes(TAIL_RE)).alias("_tail"), b.str.extract_groups(ascii_classes(SHUTDOWN_RE)).alias("_gs"),
    )
    nm, nt, os_ = pl.col("_nm"), pl.col("_nt"), pl.col("_os")
    is_marked = nm.struct.field("ip").is_not_null() | b.str.contains(ascii_classes(NODE_MARKED_RE))
    is_node_task = b.str.contains(ascii_classes(NODE_TASK_RE))
    is_node = is_marked | is_node_task | pl.col("_na") | pl.col("_ns")
    is_summary = (os_.struct.field("n").cast(pl.Int64, strict=False) >= 1).fill_null(False)
    is_zero = (os_.struct.field("n").cast(pl.Int64, strict=False) == 0).fill_null(False)
    is_oom = is_summary | pl.col("_ol").is_not_null() | (pl.col("_ot") & ~pl.col("_died"))
    is_died = pl.col("_died")
    gs = pl.col("_gs")
    is_shutdown = b.str.contains(ascii_classes(SHUTDOWN_RE))
    reason = pl.coalesce(gs.struct.field("r1"), gs.struct.field("r2"))
    code_shutdown = pl.when(reason.is_in(list(SHUTDOWN_REASONS))).then(reason).otherwise(pl.lit("UNSPECIFIED"))
    # a notice and the run of tail lines right after it (each within a few lines of the one before, up to the
    # next notice): a hard-wrapped notice, the memory detail of an OOM error. The run's text gives the exit
    # detail, its first named IP the host where the notice's own line names none.
    notice = (is_node | is_summary.fill_null(False) | pl.col("_ol").is_not_null() | pl.col("_ot") | is_died
              | is_shutdown).fill_null(False)
    tail = ~notice & (pl.col("_tail") | pl.col("_on").is_not_null()).fill_null(False)
    df = df.with_columns((~tail | (ln - ln.shift(1) > _LOOKAHEAD).fill_null(True)).cum_sum().alias("_run"))
    df = df.with_columns(b.str.join(" ").over("_run").alias("_text"),
                         pl.col("_wip").drop_nulls().first().over("_run").alias("_run_wip"),
                         pl.col("_on").drop_nulls().first().over("_run").alias("_run_on"))
    near_ip, mem_ip = pl.col("_run_wip"), pl.col("_run_on")
    code_died = pl.lit("UNKNOWN")
    for pattern, name in reversed(DETAIL_CODES):
        code_died = pl.when(pl.col("_text").str.contains(ascii_classes(pattern))).then(pl.lit(name)).otherwise(code_died)
    df = df.with_columns(code_died.alias("_cd"))
    died_oom = is_died & (pl.col("_cd") == "NODE_OUT_OF_MEMORY")
    kind = (pl.when(is_node).then(pl.lit("ray_node_lost"))
            .when(is_oom | died_oom).then(pl.lit("ray_oom_kill"))
            .when(is_died).then(pl.lit("ray_worker_died"))
            .when(is_shutdown).then(pl.lit("ray_raylet_shutdown")))
    code = (pl.when(is_node).then(pl.lit("NODE_DIED")).when(is_oom | died_oom).then(pl.lit("NODE_OUT_OF_MEMORY"))
            .when(is_died).then(pl.col("_cd"))
            .when(is_shutdown).then(code_shutdown))
    host = (pl.when(is_node).then(pl.coalesce(nm.struct.field("ip"), nt.struct.field("ip"),
                                              pl.when(pl.col("_ns")).then(line_host(ctx))))
            .when(is_oom | died_oom).then(pl.coalesce(os_.struct.field("ip"), pl.col("_ol"), pl.col("_wip"), near_ip, mem_ip))
            .when(is_died).then(pl.coalesce(pl.col("_wip"), near_ip))
            .when(is_shutdown).then(line_host(ctx)))
    severity = (pl.when(is_node).then(pl.lit("critical"))
                .when(is_died & pl.col("_cd").is_in(["SIGTERM", "SYSTEM_EXIT"])).then(pl.lit("warning"))
                .when(is_shutdown & ~is_died & ~is_oom & (code_shutdown == "UNEXPECTED_TERMINATION")).then(pl.lit("error"))
                .when(is_shutdown & ~is_died & ~is_oom & (code_shutdown == "AUTOSCALER_DRAIN_PREEMPTED")).then(pl.lit("warning"))
                .when(is_shutdown & ~is_died & ~is_oom).then(pl.lit("info"))
                .otherwise(pl.lit("error")))
    g = b.str.extract_groups(ascii_classes(_STAMP))
    stamp = pl.concat_str([g.struct.field("1"), pl.lit("."), g.struct.field("2").fill_null("0")])
    df = df.with_columns(kind.alias("kind"), code.alias("code"), host.alias("host"), severity.alias("severity"),
                         pl.when(g.struct.field("1").is_not_null()).then(stamp).alias("ts_raw"))
    df = df.with_columns(iso(pl.col("ts_raw"), ctx.tz).alias("ts"))
    ev = df.filter(pl.col("kind").is_not_null())
    # lines claimed with a notice: a wrapped notice's tail, the memory detail after an OOM error
    owned = pl.col("kind").first().over("_run").is_not_null()
    tail = pl.col("kind").is_null() & (pl.col("_tail") | pl.col("_on").is_not_null())
    rest = df.filter(pl.col("kind").is_null() & (is_zero | (tail & owned)))
    claimed = pl.concat([ev["line_no"], rest["line_no"]]).unique().sort()
    if ev.is_empty():
        return Extraction(events=empty_events(), claimed=claimed)
    events = events_frame(ev.select(
        "line_no", pl.lit(SPEC.name).alias("source"), "kind", "ts", "ts_raw",
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        "host", "severity", "code", b.alias("message")))
    return Extraction(events=events, claimed=claimed)


SPEC = ParserSpec(
    name="ray_cluster",
    scope="job",
    description="Ray's records of a lost node, a memory-monitor kill, a dead worker and a raylet shutdown (GCS, raylet, driver), host from the IP they name",
    formats=("GCS 'The node with node id: .. has been marked dead because the detector has missed too many heartbeats'",
             "raylet 'N Workers (tasks / actors) killed due to memory pressure (OOM)' and ray.exceptions.OutOfMemoryError",
             "raylet / driver 'A worker died or was killed while executing a task by an unexpected system error' "
             "with its exit type and detail",
             "raylet 'Raylet graceful shutdown triggered, reason = <NodeDeathInfo reason>, reason message = ..'"),
    kinds=("ray_node_lost", "ray_oom_kill", "ray_worker_died", "ray_raylet_shutdown"),
    trigger=CANDIDATES,
)

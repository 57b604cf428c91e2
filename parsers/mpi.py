"""Open MPI launcher (mpirun / mpiexec / orterun, ORTE <= 4.x; prterun / PRRTE 5.x) reports about the
job's processes and daemons, from its help texts (orte/tools/orterun/help-orterun.txt,
orte/mca/errmgr/base/help-errmgr-base.txt, prrte src/mca/errmgr and src/prted help files):

- `mpirun noticed that process rank N with PID P on node H exited on signal S (Name).`
  ([orterun:proc-aborted-signal]; `mpiexec`, `orterun`, `prterun`, or a wrapped/renamed binary such as
  `mpirun.real` (Horovod, MPI Operator images) or `mpirun.openmpi` (Debian), as the launcher calls itself) is an
  `mpi_proc_exit` event: host H, rank N, pid P, code the signal's name (`SIGKILL`, `SIGSEGV`, ...).
  `... exited on signal S.` without a name (some builds), and `mpirun noticed that process rank N with PID P
  on node H exited with status N` likewise (code `EXIT_<n>`).
- The first failing process of `mpirun detected that one or more processes exited with non-zero status`
  ([orterun:proc-exit-no-sync] family): its `Process name: [[J,V],N]` line names rank N, the `Exit code: C`
  line after it is the `mpi_proc_exit` event (code `EXIT_<C>`); `Process name:` / `Exit code:` lines claimed.
- `MPI_ABORT was invoked on rank N in communicator C` ([mpi-abort]) is `mpi_abort`, rank N, code
  `MPI_ABORT`; its `with errorcode E.` line is claimed.
- The daemon-loss notices ([node-died]): `ORTE has lost communication with its daemon located on node:`
  followed by `hostname:  H`; `ORTE has lost communication with a remote daemon.` followed by `HNP daemon :
  [[J,0],0] on node A` / `Remote daemon: [[J,0],K] on node B` (PRRTE: `PRTE has lost communication ...`)
  are `mpi_daemon_lost` events on the notice's line, host the lost node (H, B); code `NODE_DIED`. The detail
  lines are claimed with it. `An ORTE daemon has unexpectedly failed after launch and before communicating
  back to mpirun` ([failed-daemon-launch]) is `mpi_daemon_lost` code `DAEMON_LAUNCH_FAILED`, no host.

MVAPICH2's launcher (mpirun_rsh / mpispawn, src/pm/mpirun/mpispawn.c `child_handler` and `wait_for_errors`) prints
through PRINT_ERROR with the prefix `[<hostname>:mpispawn_<id>][<function>] `:

- `MPI process (rank: N, pid: P) terminated with signal S -> abort job` and `MPI process (rank: N, pid: P) exited
  with status S` are `mpi_proc_exit` events: host the prefix's hostname (the node the process ran on), rank N,
  pid P, code the signal's name or `EXIT_<S>`, as for Open MPI's notice. (`Process with pid P ...`, a child
  that is no MPI rank, and `stopped with signal` / `continued` are no process exit and are left alone.)
- `Abort signaled by rank N: '<message>'` is `mpi_abort`, rank N, code `MPI_ABORT`.

The help texts' other explanation lines ("This is usually due to either a failure of the TCP network ...")
are claimed when they follow a notice, so they do not become error lines of their own.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import (
    UTC_DT,
    Extraction,
    ParseContext,
    empty_events,
    empty_table,
    events_frame,
    line_host,
    rank_hint,
    table_frame,
)
from parsers.spec import ParserSpec

# The launcher names itself by its argv[0] basename (orte_basename / prte_tool_basename), so a renamed or
# alternatives-installed binary prints its own name: Horovod and the MPI Operator's images wrap Open MPI as
# `mpirun.real`, Debian/Ubuntu install `mpirun.openmpi` / `orterun.openmpi`.
_LAUNCHER = r"(?:mpirun|mpiexec|orterun|prterun|prun|oshrun)(?:\.[A-Za-z0-9_-]+)?"
NOTICED_RE = (_LAUNCHER + r" noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node (?P<host>\S+?)"
              r" exited (?:on signal (?P<sig>\d+)(?: \((?P<name>[^)]+)\))?|with status (?P<status>-?\d+))")
PROC_NAME_RE = r"^\s*Process name:\s*\[\[\d+,\d+\],(?P<rank>\d+)\]"
EXIT_CODE_RE = r"^\s*Exit code:\s*(?P<code>-?\d+)\s*$"
ABORT_RE = r"MPI_ABORT was invoked on rank (?P<rank>\d+) in communicator"
LOST_ITS_RE = r"\b(?:ORTE|PRTE|PRRTE) has lost communication with its daemon located on node"
LOST_REMOTE_RE = r"\b(?:ORTE|PRTE|PRRTE) has lost communication with a remote daemon"
HOSTNAME_RE = r"^\s*hostname:\s*(?P<host>\S+)\s*$"
REMOTE_RE = r"^\s*Remote daemon\s*:\s*\[\[\d+,\d+\],\d+\] on node (?P<host>\S+)\s*$"
DETAIL_RE = (r"^\s*(?:HNP daemon\s*:|Remote daemon\s*:|hostname:|This is usually due to either a failure of the TCP network"
             r"|connection to the node, or possibly an internal failure of|the daemon itself\. We cannot recover"
             r"|therefore will terminate the job\.|with errorcode -?\d+\.|Local host:|Local PID:|Primary job\s+terminated"
             r"|process returned\s*$|a non-zero exit code\.|Per user-direction, the job has been aborted\.)")
DAEMON_FAILED_RE = r"An (?:ORTE|PRTE|PRRTE) daemon has unexpectedly failed after launch"
MV_PREFIX = r"^\[(?P<host>[^:\]\s]+):mpispawn_\d+\]\[\w+\]\s*"
MV_EXIT_RE = (MV_PREFIX + r"MPI process \(rank: (?P<rank>\d+), pid: (?P<pid>\d+)\) (?:terminated with signal (?P<sig>\d+)"
              r"|exited with status (?P<status>-?\d+))")
MV_ABORT_RE = MV_PREFIX + r"Abort signaled by rank (?P<rank>\d+):"
DETECTED_RE = _LAUNCHER + r" detected that one or more processes exited with non-zero status"

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}
_LOOKAHEAD = 4  # the detail line naming the lost node follows its notice within a few lines (a blank between)

CANDIDATES = ("noticed that process rank", "Process name:", "Exit code:", "MPI_ABORT was invoked", "lost communication",
              "hostname:", "Remote daemon", "HNP daemon", "daemon has unexpectedly failed", "detected that one or more",
              "usually due to", "connection to the node", "daemon itself", "terminate the job", "errorcode",
              "Primary job", "process returned", "non-zero exit code", "Per user-direction", "Local host:",
              "Local PID:", "MPI process (rank:", "Abort signaled by rank")


def sniff(head: str) -> float:
    any_re = re.sub(r"\?P<\w+>", "", "|".join((NOTICED_RE, LOST_ITS_RE, LOST_REMOTE_RE, ABORT_RE, DETECTED_RE,
                                               DAEMON_FAILED_RE, MV_EXIT_RE, MV_ABORT_RE)))
    any_re = any_re.replace("|^", "|(?m:^)")
    n = len(re.findall(any_re, head))
    return 0.0 if n == 0 else min(0.5 + 0.1 * n, 0.7)


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    df = lines.sort("line_no").filter(b.str.contains_any(list(CANDIDATES)))
    if df.is_empty():
        return Extraction(events=empty_events())
    df = df.with_columns(
        b.str.extract_groups(ascii_classes(NOTICED_RE)).alias("_n"),
        b.str.extract_groups(ascii_classes(MV_EXIT_RE)).alias("_mv"),
        b.str.extract_groups(ascii_classes(MV_ABORT_RE)).alias("_mva"),
        b.str.extract(ascii_classes(PROC_NAME_RE), 1).cast(pl.Int64, strict=False).alias("_pn"),
        b.str.extract(ascii_classes(EXIT_CODE_RE), 1).alias("_ec"),
        b.str.extract(ascii_classes(ABORT_RE), 1).cast(pl.Int64, strict=False).alias("_ab"),
        b.str.contains(ascii_classes(LOST_ITS_RE)).alias("_lost_its"),
        b.str.contains(ascii_classes(LOST_REMOTE_RE)).alias("_lost_rem"),
        b.str.contains(ascii_classes(DAEMON_FAILED_RE)).alias("_dfail"),
        b.str.extract(ascii_classes(HOSTNAME_RE), 1).alias("_hn"),
        b.str.extract(ascii_classes(REMOTE_RE), 1).alias("_rd"),
        b.str.contains(ascii_classes(DETAIL_RE)).alias("_detail"),
    )
    # the lost node: the first `hostname:` / `Remote daemon:` line within a few lines after the notice
    ln = pl.col("line_no")
    nxt_host = pl.lit(None, dtype=pl.Utf8)
    for k in range(_LOOKAHEAD, 0, -1):
        near = ln.shift(-k) - ln <= _LOOKAHEAD + 1
        nxt_host = pl.when(near & pl.col("_hn").shift(-k).is_not_null() & pl.col("_lost_its")).then(pl.col("_hn").shift(-k)) \
            .when(near & pl.col("_rd").shift(-k).is_not_null() & pl.col("_lost_rem")).then(pl.col("_rd").shift(-k)) \
            .otherwise(nxt_host)
    # `Exit code:` takes the rank of the `Process name:` line just before it
    prev_rank = pl.when((ln - ln.shift(1) <= 2) & pl.col("_pn").shift(1).is_not_null()).then(pl.col("_pn").shift(1))
    n, mv = pl.col("_n"), pl.col("_mv")
    # an Open MPI notice or an MVAPICH2 mpispawn child report: the same fields (rank, pid, host, signal, status)

    def field(name: str) -> pl.Expr:
        return pl.coalesce(n.struct.field(name), mv.struct.field(name))
    is_noticed = field("rank").is_not_null()
    is_exit = pl.col("_ec").is_not_null() & prev_rank.is_not_null()
    sig = field("sig").cast(pl.Int64, strict=False)
    sig_code = sig.replace_strict(SIGNALS, default=None, return_dtype=pl.Utf8)
    noticed_code = pl.coalesce(sig_code, pl.concat_str([pl.lit("SIGNAL_"), sig.cast(pl.Utf8)]),
                               pl.concat_str([pl.lit("EXIT_"), field("status")]))
    mv_abort = pl.col("_mva").struct.field("rank").cast(pl.Int64, strict=False)
    abort_rank = pl.coalesce(pl.col("_ab"), mv_abort)
    kind = (pl.when(is_noticed | is_exit).then(pl.lit("mpi_proc_exit"))
            .when(abort_rank.is_not_null()).then(pl.lit("mpi_abort"))
            .when(pl.col("_lost_its") | pl.col("_lost_rem") | pl.col("_dfail")).then(pl.lit("mpi_daemon_lost")))
    code = (pl.when(is_noticed).then(noticed_code)
            .when(is_exit).then(pl.concat_str([pl.lit("EXIT_"), pl.col("_ec")]))
            .when(abort_rank.is_not_null()).then(pl.lit("MPI_ABORT"))
            .when(pl.col("_dfail")).then(pl.lit("DAEMON_LAUNCH_FAILED"))
            .when(pl.col("_lost_its") | pl.col("_lost_rem")).then(pl.lit("NODE_DIED")))
    host = (pl.when(is_noticed).then(field("host"))
            .when(mv_abort.is_not_null()).then(pl.col("_mva").struct.field("host"))
            .when(pl.col("_lost_its") | pl.col("_lost_rem")).then(nxt_host)
            .otherwise(line_host(ctx)))
    rank = pl.coalesce(field("rank").cast(pl.Int64, strict=False),
                       pl.when(is_exit).then(prev_rank), abort_rank,
                       pl.when(pl.col("_lost_its") | pl.col("_lost_rem")).then(pl.lit(None, dtype=pl.Int64))
                       .otherwise(rank_hint(ctx)))
    severity = pl.when(abort_rank.is_not_null() | (is_noticed & (sig == 15))).then(pl.lit("warning")) \
        .when(pl.col("_lost_its") | pl.col("_lost_rem")).then(pl.lit("critical")).otherwise(pl.lit("error"))
    df = df.with_columns(kind.alias("kind"), code.alias("code"), host.alias("host"), rank.alias("rank"),
                         severity.alias("severity"),
                         field("pid").cast(pl.Int64, strict=False).alias("pid"))
    ev = df.filter(pl.col("kind").is_not_null())
    claimed = pl.concat([ev["line_no"], df.filter(pl.col("kind").is_null() & (
        pl.col("_detail") | pl.col("_pn").is_not_null() | pl.col("_ec").is_not_null() | b.str.contains(ascii_classes(DETECTED_RE))
    ))["line_no"]]).unique().sort()
    if ev.is_empty():
        return Extraction(events=empty_events(), tables={"exits": empty_table("exits")}, claimed=claimed)
    events = events_frame(ev.select(
        "line_no", pl.lit(SPEC.name).alias("source"), "kind", pl.lit(None, dtype=UTC_DT).alias("ts"),
        pl.lit(None, dtype=pl.Utf8).alias("ts_raw"), pl.lit("missing").alias("ts_quality"), "host", "rank", "pid",
        "severity", "code", b.alias("message")))
    # the process exits also as `exits` rows (origin mpi): what the launcher saw end, by signal or status
    ex = ev.filter(pl.col("kind") == "mpi_proc_exit").select(
        "line_no", pl.lit(None, dtype=UTC_DT).alias("ts"), "host", "rank", pl.lit(None, dtype=pl.Int64).alias("local_rank"),
        "pid", pl.col("code").str.extract(ascii_classes(r"^EXIT_(-?\d+)$"), 1).cast(pl.Int64, strict=False).alias("exitcode"),
        pl.when(pl.col("code").str.starts_with("SIG")).then(pl.col("code")).alias("signal"),
        pl.lit("mpi").alias("origin"), pl.lit(None, dtype=pl.Boolean).alias("first_observed"),
        pl.lit(None, dtype=pl.Utf8).alias("error_file"), b.alias("message"))
    return Extraction(events=events, tables={"exits": table_frame("exits", ex)}, claimed=claimed)


SPEC = ParserSpec(
    name="mpi",
    scope="job",
    description="Open MPI launcher reports: a process's exit by signal or status, MPI_ABORT, lost daemons (ORTE/PRRTE)",
    formats=("mpirun/mpiexec 'noticed that process rank N ... exited on signal' and exit-status notices",
             "ORTE/PRTE 'has lost communication with ... daemon' help texts", "MPI_ABORT notices"),
    kinds=("mpi_proc_exit", "mpi_abort", "mpi_daemon_lost"),
    tables=("exits",),
    trigger=CANDIDATES,
)

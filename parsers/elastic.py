"""torchelastic (torchrun) agent output, ChildFailedError summary tables, DeepSpeed launcher exits,
and torchelastic error files (`error.json`).

Reference: `../shared/reference/pytorch_dist.md` §6. Agent lines are read in all three prefix eras
(`ERROR:torch.distributed...:`, `[2024-05-08 08:47:31,877] ... [ERROR]`, glog `E0325 20:57:27.620000 ...]`).

Events: worker_failed, teardown_signal (code = signal name), restart (code = attempts left),
launch (a launcher start: torchrun's OMP_NUM_THREADS banner, `Starting elastic_operator with launch
configs`, a `SLURM_RESTART_COUNT=N` banner, DeepSpeed launch.py's `WORLD INFO DICT: {...}`; code = N when printed),
teardown_signal also for DeepSpeed's launcher told to stop (`Main process received SIGTERM, exiting`; code = the signal),
elastic_failure (one per complete table entry; code = exitcode), launcher_exit (DeepSpeed; code =
return code), and from torchelastic's metrics events (`{"name": "torchelastic.worker.status.<state>", ...}`
JSON lines) train_end (code = worker_succeeded) for a worker that SUCCEEDED, and for one that FAILED an
exception (code = exception type) from its raw_error (the error file it wrote), or worker_failed (code = FAILED)
when it carries none. Table: exits (one row per table entry / launcher exit).

Error files: `parse_error_json(text, ctx)` reads the JSON written by `@record`. It is not routed
through `parse`: discovery calls it when `sniff_error_json(head)` is true (the module stays
exclusive=False because the agent log is interleaved with other output). It yields one `exception`
event (code = exception type, ts from extraInfo.timestamp).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import (
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
from parsers.timestamps import iso, mmdd_time

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM",
           15: "SIGTERM"}

# DeepSpeed's per-node launcher (deepspeed/launcher/launch.py main: `logger.info(f"WORLD INFO DICT: {world_info}")`,
# once per node per launch, like torchrun's OMP_NUM_THREADS banner) opens an attempt too.
LAUNCH_RE = (r"Setting OMP_NUM_THREADS environment variable for each process|Starting elastic_operator with launch configs"
             r"|SLURM_RESTART_COUNT\s*[=:]\s*\d+|WORLD INFO DICT: \{")
# DeepSpeed's launcher told to stop from outside (launch.py sigkill_handler, the handler of SIGINT/SIGTERM:
# `logger.info(f"Main process received {sig_names[signum]}, exiting")`, sig_names = {2: "SIGINT", 15: "SIGTERM"})
DS_SIGNALLED_RE = r"Main process received (SIG(?:INT|TERM)), exiting"
# A worker killed by a signal as a Python parent reports it: subprocess.CalledProcessError.__str__ (Lib/subprocess.py:
# `"Command '%s' died with %r." % (cmd, signal.Signals(-returncode))`, else `died with unknown signal %d.`), raised by
# accelerate's launchers (accelerate/commands/launch.py simple_launcher / deepspeed_launcher / tpu: `raise
# subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)`) and DeepSpeed's launch.py before 0.6;
# and torch.multiprocessing.spawn's ProcessExitedException (`process %d terminated with signal %s`, the process
# index being the local rank), how mp.spawn (Lightning's ddp_spawn, fairseq, detectron2 ...) reports it. Read as
# launcher_exit with code -N, as torchelastic and DeepSpeed give a signal. A positive status (`returned non-zero
# exit status %d`, `terminated with exit code %d`) names no cause (the child's own lines do): no event. The
# Signals repr ends at its `>` (a line cut before the final period still names the signal); an unknown signal's
# number only at the period (a cut inside the digits would name another).
CPE_SIGNAL_RE = r"died with (?:<Signals\.SIG[A-Z0-9]+: (\d+)>|unknown signal (\d+)\.)"
SPAWN_SIGNAL_RE = r"ProcessExitedException: process (\d+) terminated with signal (SIG[A-Z0-9]+)"
AGENT_RE = (r"failed \(exitcode: |closing signal|death signal|SignalException|Worker group FAILED|sigkill_handler|"
            + DS_SIGNALLED_RE + "|" + CPE_SIGNAL_RE + "|" + SPAWN_SIGNAL_RE + "|" + LAUNCH_RE)
# the agent's progress messages of a normal run, claimed without an event (they are not faults; the word
# `error` in a reply-file path made them error lines): torch/distributed/elastic/agent/server/api.py
# (_initialize_workers `[%s] Rendezvous'ing worker group` / `[%s] Starting worker group`, _restart_workers
# `[%s] Stopping worker group`, _invoke_run `[%s] starting workers for entrypoint: %s` / `[%s] worker group
# successfully finished. Waiting %s seconds for other agents to finish.`, _exit_barrier `Local worker group
# finished (%s). Waiting %s seconds for other agents to finish` / `Done waiting for other agents. Elapsed: %s
# seconds`, _rendezvous `[%s] Rendezvous complete for workers. Result:` and its `  key=value` lines),
# local_elastic_agent.py (`log directory set to: %s`), multiprocessing/api.py _get_logs_dest (`Setting worker%s
# reply file to: %s`). The role is `default` unless set, empty under TorchX (`[]`).
# DeepSpeed's launcher progress of a normal run, claimed without an event: deepspeed/launcher/runner.py main
# (`Unable to find hostfile, will proceed with training with local resources only.`, `Detected
# CUDA_VISIBLE_DEVICES=%s: setting --include=%s`, `cmd = %s` of the per-node launch or the multinode runner's
# pdsh / mpirun / srun / mpiexec line) and launch.py main (`{node_rank} {NCCL_*}={value}` for each NCCL variable set,
# `nnodes=%d, num_local_procs=%d, node_rank=%d`, `global_rank_mapping=%s`, `dist_world_size=%d`, `Setting
# {CUDA|HIP|ASCEND_RT|...}_VISIBLE_DEVICES=%s`, `launcher pid: %d`, `process %d spawned with command: %s`, and
# `Process %d exits successfully.` for a worker that returned 0).
DS_PROGRESS = (r"Unable to find hostfile, will proceed with training with local resources only"
               r"|Detected [A-Z_]*VISIBLE_DEVICES=\S*: setting --include="
               r"|\] cmd = \S+ (?:-u -m deepspeed\.launcher\.launch|-S -f \d+ -w )|\] cmd = (?:\S*/)?(?:mpirun|srun|mpiexec)\b"
               r"|\[launch\.py:\d+:main\] \d+ NCCL_\w+[= ]"
               r"|nnodes=\d+, num_local_procs=\d+, node_rank=\d+|global_rank_mapping=defaultdict\(|dist_world_size=\d+"
               r"|\[launch\.py:\d+:main\] Setting [A-Z_]*VISIBLE_DEVICES=|launcher pid: \d+"
               r"|process \d+ spawned with command: \[|Process \d+ exits successfully\.")
AGENT_PROGRESS = (r"\[[^\]]*\] (?:Rendezvous'ing worker group|Rendezvous complete for workers\. Result:"
                  r"|Starting worker group|Stopping worker group|starting workers for entrypoint: "
                  r"|worker group successfully finished\. Waiting \d+ seconds for other agents to finish)"
                  r"|Local worker group finished \([\w.]+\)\. Waiting \d+ seconds for other agents to finish"
                  r"|Done waiting for other agents\. Elapsed: |Setting worker\d+ reply file to: |log directory set to: "
                  + "|" + DS_PROGRESS)
RDZV_RESULT = (r"^\s+(?:restart_count|master_addr|master_port|group_rank|group_world_size|local_ranks|role_ranks"
               r"|global_ranks|role_world_sizes|global_world_sizes)=.*$")
# the anchors: the alternatives holding a literal, and those that read a whole line (`^`); looked for
# as two patterns (the first is found by its literals, the second fails at a line's first characters:
# together they read a large frame faster than one alternation, which has no literal to look for)
ANCHOR_WORDS = (LAUNCH_RE + r"|\{\"name\": \"torchelastic\.worker\.status\.|failed \(exitcode: |closing signal|death signal|SignalException|Worker group FAILED"
                r"|sigkill_handler|ChildFailedError|Root Cause \(first observed failure\)|<NO_OTHER_FAILURES>| FAILED\s*$"
                r"|died with <Signals\.|died with unknown signal|ProcessExitedException: process "
                r"|" + AGENT_PROGRESS)
ANCHOR_LINES = (r"^\s*\[\d+\]:\s*$|^\s+(?:time|host|rank|exitcode|error_file|traceback)\s*:|^\s*Failures:\s*$"
                r"|^[=-]{10,}\s*$|" + RDZV_RESULT)
ANCHORS = ANCHOR_WORDS + "|" + ANCHOR_LINES
FAILED_RE = r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)"
# torchelastic's metrics events, one JSON object a line from the `console` handler
# (torch/distributed/elastic/events/api.py Event.serialize: json.dumps of {"name", "source", "timestamp",
# "metadata"}; torchelastic < 0.2.2 the same under torchelastic/events). The agent records one
# `torchelastic.worker.status.<WorkerState>` event per worker when its group ends or fails
# (torch/distributed/elastic/agent/server/api.py _record_worker_events / _construct_event: metadata run_id,
# global_rank, group_rank, worker_id, role, hostname, state, total_run_time, rdzv_backend, raw_error, a JSON
# string `metadata` (local_rank, ...), agent_restarts). WorkerState: UNKNOWN INIT HEALTHY UNHEALTHY STOPPED
# SUCCEEDED FAILED.
STATUS_EVENT = r'^\s*\{"name": "torchelastic\.worker\.status\.(\w+)"'
PYLOG_TS = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)?)\]"
GLOG_TS = r"^[IWEF](\d{4}) (\d\d:\d\d:\d\d(?:\.\d+)?) \d+ "
FIELD_RE = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
ENTRY_RE = re.compile(r"^\s*\[(\d+)\]:\s*$")
RULE_RE = re.compile(r"^\s*[=-]{10,}\s*$")


def sniff(head: str) -> float:
    if "ChildFailedError" in head or re.search(r"failed \(exitcode: -?\d+\) local_rank", head):
        return 0.9
    if re.search(r"Root Cause \(first observed failure\)|sigkill_handler|torch\.distributed\.elastic|WORLD INFO DICT: \{"
                 r"|died with <Signals\.SIG|ProcessExitedException: process \d+ terminated with signal"
                 r'|\{"name": "torchelastic\.worker\.status\.', head):
        return 0.7
    return 0.0


ERROR_JSON_NEEDS = ('"message"', False)  # a head `sniff_error_json` says True of holds it ((text, caseless))


def sniff_error_json(head: str) -> bool:
    """True for a torchelastic error file (`{"message": ...}` as written by `@record`)."""
    h = head.lstrip()
    if not h.startswith("{") or '"message"' not in h:
        return False
    try:
        obj = json.loads(h)
    except ValueError:
        return "extraInfo" in h or "py_callstack" in h
    return isinstance(obj, dict) and "message" in obj


def _int(s: str | None) -> int | None:
    """int of a digit string, None when absent or outside Int64."""
    if s is None:
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def _launcher_exits(events: pl.DataFrame, origin: pl.Expr) -> pl.DataFrame:
    """`launcher_exit` events as `exits` rows: the exit code from the event's code (negative: a signal),
    the launcher that reported it (`origin`), the signal's name."""
    code = pl.col("code").cast(pl.Int64, strict=False)
    return events.with_columns(code.alias("exitcode"), origin.alias("origin"),
                               code.map_elements(_signal_name, return_dtype=pl.Utf8).alias("signal"))


def _signal_name(exitcode: int | None, text: str | None = None) -> str | None:
    if text:
        m = re.search(r"Signal \d+ \((SIG\w+)\)", text)
        if m:
            return m.group(1)
    if exitcode is not None and exitcode < 0:
        return SIGNALS.get(-exitcode, f"signal {-exitcode}")
    return None


def _line_ts(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    b = pl.col("body")
    py = b.str.extract(ascii_classes(PYLOG_TS), 1)
    g = b.str.extract_groups(ascii_classes(GLOG_TS))
    ts = pl.coalesce(iso(py, ctx.tz), mmdd_time(g.struct.field("1"), g.struct.field("2"), ctx.ref_year, ctx.tz),
                     iso(pl.col("prefix_ts"), ctx.tz))
    raw = pl.coalesce(py, pl.concat_str([g.struct.field("1"), g.struct.field("2")], separator=" "),
                      pl.col("prefix_ts"))
    return df.with_columns(ts.alias("ts"), raw.alias("ts_raw")).with_columns(
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.col("body").alias("message"),
        pl.coalesce(pl.col("prefix_rank"), rank_hint(ctx)).alias("rank"),
        line_host(ctx).alias("host"),
    )


def _tables(lines: pl.DataFrame, anchors: list[int], ctx: ParseContext
            ) -> tuple[list[dict], list[int], list[int]]:
    """Parse ChildFailedError tables around the anchor lines (a loop over table lines only)."""
    entries: list[dict] = []
    claimed: list[int] = []
    ignored: list[int] = []
    # group anchors into blocks (a traceback inside an entry may leave gaps between anchors)
    blocks: list[tuple[int, int]] = []
    for a in sorted(anchors):
        if blocks and a - blocks[-1][1] <= 200:
            blocks[-1] = (blocks[-1][0], a)
        else:
            blocks.append((a, a))
    nos = lines["line_no"].to_numpy()
    ascending = nos.size < 2 or bool((nos[1:] > nos[:-1]).all())  # (a batch's frame: each block a slice)
    for lo, hi in blocks:
        if ascending:
            a, z = int(np.searchsorted(nos, lo, side="left")), int(np.searchsorted(nos, hi, side="right"))
            seg = lines.slice(a, z - a)
        else:
            seg = lines.filter(pl.col("line_no").is_between(lo, hi)).sort("line_no")
        cur: dict | None = None
        partial: dict | None = {"lines": [], "fields": {}}  # fields seen before any `[i]:`
        root_next = False
        in_tb = False
        rules: list[int] = []  # rule lines: claimed only when the block holds a table
        n_claimed, n_entries = len(claimed), len(entries)

        def flush_partial(partial: dict | None) -> None:
            # an entry cut at the top of an excerpt: kept when it still names an exit code
            if partial is None:
                return
            if "exitcode" in partial["fields"]:
                entries.append({"index": None, "header": partial["lines"][0], "lines": partial["lines"],
                                "fields": partial["fields"], "first_observed": False,
                                "tb_lines": partial.get("tb_lines", [])})
                claimed.extend(partial["lines"])
            else:
                ignored.extend(partial["lines"])

        def close() -> None:
            nonlocal cur
            if cur is not None:
                entries.append(cur)
                claimed.extend(cur["lines"])
            cur = None

        for ln, body in seg.select("line_no", "body").iter_rows():
            if RULE_RE.match(body):
                close()
                flush_partial(partial)
                partial = None
                in_tb = False
                rules.append(ln)
                continue
            em = ENTRY_RE.match(body)
            if em:
                close()
                flush_partial(partial)
                partial = None
                cur = {"index": int(em.group(1)), "header": ln, "lines": [ln], "fields": {},
                       "first_observed": root_next, "tb_lines": []}
                root_next = False
                in_tb = False
                continue
            s = body.strip()
            if s.startswith("Root Cause (first observed failure)"):
                close()
                root_next = True
                claimed.append(ln)
                continue
            if s in ("Failures:", "<NO_OTHER_FAILURES>") or s.endswith("ChildFailedError:") or \
                    (s.endswith(" FAILED") and cur is None):
                close()
                claimed.append(ln)
                continue
            fm = FIELD_RE.match(body)
            target = cur if cur is not None else partial
            if fm and target is not None and fm.group(1) not in target["fields"]:
                target["fields"][fm.group(1)] = (ln, fm.group(2).strip())
                target["lines"].append(ln)
                in_tb = fm.group(1) == "traceback"
                continue
            if in_tb and target is not None and s:
                target["lines"].append(ln)
                target.setdefault("tb_lines", []).append(s)
                continue
            # anything else ends the table region
            close()
            in_tb = False
        close()
        flush_partial(partial)
        if len(claimed) > n_claimed or len(entries) > n_entries:
            claimed.extend(rules)
    return entries, claimed, ignored


def _raw_error_message(raw: object) -> str | None:
    """The exception text of a worker-status event's raw_error: the error file's message.message (or message),
    or the raw text itself when it is no error-file JSON; None when empty."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return raw.strip()
    msg = obj.get("message") if isinstance(obj, dict) else None
    if isinstance(msg, dict):
        msg = msg.get("message")
    return msg.strip() if isinstance(msg, str) and msg.strip() else None


def _status_events(cand: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The worker-status metrics events (STATUS_EVENT): SUCCEEDED -> train_end, FAILED -> worker_failed;
    a line that is no whole JSON object (cut) or another state is claimed with no event."""
    rows = []
    for ln, body, prefix_rank in cand.select("line_no", "body", "prefix_rank").iter_rows():
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        md = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(md, dict):
            continue
        state = str(md.get("state") or obj["name"].rsplit(".", 1)[-1])
        if state not in ("SUCCEEDED", "FAILED"):
            continue
        try:
            inner = json.loads(md.get("metadata") or "{}")
        except (TypeError, ValueError):
            inner = {}
        lr = inner.get("local_rank") if isinstance(inner, dict) else None
        lr = lr[0] if isinstance(lr, list) and len(lr) == 1 else lr
        stamp = obj.get("timestamp")
        ts = (datetime.fromtimestamp(int(stamp), tz=UTC)
              if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp > 0 else None)
        raw = md.get("raw_error")
        gr = md.get("global_rank")
        # a FAILED worker's raw_error is its error file's text (the `@record` JSON, parse_error_json's input) or
        # a bare message: its exception, for the error-file signatures; with none, a worker_failed (code FAILED)
        kind, code, message = "train_end", "worker_succeeded", body
        if state == "FAILED":
            kind, code, message = "worker_failed", "FAILED", body
            exc = _raw_error_message(raw)
            if exc:
                em = re.match(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*): ", exc.strip().splitlines()[0])
                kind, code, message = "exception", em.group(1) if em else None, exc
        rows.append({
            "line_no": ln, "ts": ts, "ts_raw": None if ts is None else str(stamp),
            "ts_quality": "exact" if ts is not None else "missing",
            "host": md.get("hostname") or ctx.host_hint,
            "rank": gr if isinstance(gr, int) else prefix_rank,
            "local_rank": lr if isinstance(lr, int) else None,
            "kind": kind, "code": code, "severity": "info" if state == "SUCCEEDED" else "error",
            "message": message,
        })
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows, schema={
        "line_no": pl.Int64, "ts": pl.Datetime("us", "UTC"), "ts_raw": pl.Utf8, "ts_quality": pl.Utf8,
        "host": pl.Utf8, "rank": pl.Int64, "local_rank": pl.Int64, "kind": pl.Utf8, "code": pl.Utf8,
        "severity": pl.Utf8, "message": pl.Utf8})


def _entry_rows(entries: list[dict]) -> list[dict]:
    rows = []
    for e in entries:
        f = e["fields"]
        time_s = f.get("time", (None, None))[1]
        rank_m = re.match(r"(-?\d+)(?: \(local_rank: (-?\d+)\))?", f.get("rank", (None, ""))[1] or "")
        ex_m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", f.get("exitcode", (None, ""))[1] or "")
        exitcode = _int(ex_m.group(1)) if ex_m else None
        tb = f.get("traceback", (None, None))[1]
        tb_lines = e.get("tb_lines", [])
        efile = f.get("error_file", (None, None))[1]
        msg = tb_lines[-1] if tb_lines else tb
        rows.append({
            "line_no": f["exitcode"][0] if "exitcode" in f else e["header"],
            "ts_raw": time_s,
            "_time": time_s.replace("_", " ") if time_s else None,
            "host": f.get("host", (None, None))[1],
            "rank": _int(rank_m.group(1)) if rank_m else None,
            "local_rank": _int(rank_m.group(2)) if rank_m else None,
            "pid": _int(ex_m.group(2)) if ex_m else None,
            "exitcode": exitcode,
            "signal": _signal_name(exitcode, tb),
            "first_observed": e["first_observed"],
            "error_file": None if not efile or efile.startswith("<N/A") else efile,
            "tb_message": msg,
        })
    return rows


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    cand = lines.filter(pl.col("body").str.contains(ascii_classes(ANCHOR_WORDS)) | pl.col("body").str.contains(ascii_classes(ANCHOR_LINES)))
    if cand.is_empty():
        return Extraction(empty_events(), tables={"exits": empty_table("exits")})
    b = pl.col("body")
    parts: list[pl.DataFrame] = []
    exits_parts: list[pl.DataFrame] = []
    claimed: list[int] = []

    agent = _line_ts(cand.filter(b.str.contains(ascii_classes(AGENT_RE))), ctx)
    wf = agent.filter(b.str.contains(ascii_classes(FAILED_RE))).with_columns(
        b.str.extract(ascii_classes(FAILED_RE), 1).alias("code"),
        b.str.extract(ascii_classes(FAILED_RE), 2).cast(pl.Int64, strict=False).alias("local_rank"),
        b.str.extract(ascii_classes(FAILED_RE), 3).cast(pl.Int64, strict=False).alias("pid"),
        pl.lit("worker_failed").alias("kind"), pl.lit("error").alias("severity"))
    parts.append(wf)
    sig_num = b.str.extract(ascii_classes(r"got signal: (\d+)"), 1).cast(pl.Int64, strict=False)
    td = agent.filter(b.str.contains(ascii_classes(r"closing signal|death signal|SignalException: Process \d+ got signal"))
                      | b.str.contains(ascii_classes(r"Killing subprocess \d+")) | b.str.contains(ascii_classes(DS_SIGNALLED_RE))).with_columns(
        pl.coalesce(b.str.extract(ascii_classes(r"closing signal (SIG\w+)"), 1), b.str.extract(ascii_classes(DS_SIGNALLED_RE), 1),
                    b.str.extract(ascii_classes(r"(?:Signals\.)?(SIG\w+) death signal"), 1),
                    sig_num.replace_strict({k: v for k, v in SIGNALS.items()}, default=None, return_dtype=pl.Utf8),
                    pl.when(b.str.contains("Killing subprocess", literal=True)).then(pl.lit("SIGKILL")))
        .alias("code"),
        pl.coalesce(b.str.extract(ascii_classes(r"Sending process (\d+)"), 1), b.str.extract(ascii_classes(r"Process (\d+) got signal"), 1),
                    b.str.extract(ascii_classes(r"Killing subprocess (\d+)"), 1)).cast(pl.Int64, strict=False).alias("pid"),
        pl.lit("teardown_signal").alias("kind"), pl.lit("warning").alias("severity"))
    parts.append(td)
    rs = agent.filter(b.str.contains(r"Worker group FAILED")).with_columns(
        b.str.extract(ascii_classes(r"(\d+)/\d+ attempts left"), 1).alias("code"),
        pl.lit("restart").alias("kind"), pl.lit("warning").alias("severity"))
    parts.append(rs)
    parts.append(agent.filter(b.str.contains(ascii_classes(LAUNCH_RE))).with_columns(
        b.str.extract(ascii_classes(r"SLURM_RESTART_COUNT\s*[=:]\s*(\d+)"), 1).alias("code"),
        pl.lit("launch").alias("kind"), pl.lit("info").alias("severity")))
    ds_re = r"exits with return code = (-?\d+)"
    # no local rank from the notice: launch.py logs `f"{cmd} exits with return code = {last_return_code}"`, and
    # `cmd` is the spawn loop's variable, the command of the LAST worker it started (its `--local_rank=N` is the
    # node's highest local rank whichever worker failed); the failed worker is not named
    ds = agent.filter(b.str.contains(ascii_classes(ds_re))).with_columns(
        b.str.extract(ascii_classes(ds_re), 1).alias("code"),
        pl.lit(None, dtype=pl.Int64).alias("local_rank"),
        pl.lit("launcher_exit").alias("kind"), pl.lit("error").alias("severity"))
    parts.append(ds)
    num = {v: k for k, v in SIGNALS.items()}
    py = agent.filter(b.str.contains(ascii_classes(CPE_SIGNAL_RE)) | b.str.contains(ascii_classes(SPAWN_SIGNAL_RE))).with_columns(
        pl.concat_str([pl.lit("-"), pl.coalesce(
            b.str.extract(ascii_classes(CPE_SIGNAL_RE), 1), b.str.extract(ascii_classes(CPE_SIGNAL_RE), 2),
            b.str.extract(ascii_classes(SPAWN_SIGNAL_RE), 2).replace_strict(num, default=None, return_dtype=pl.Int64).cast(pl.Utf8))])
        .alias("code"),
        b.str.extract(ascii_classes(SPAWN_SIGNAL_RE), 1).cast(pl.Int64, strict=False).alias("local_rank"),
        pl.lit("launcher_exit").alias("kind"), pl.lit("error").alias("severity"))
    py = py.filter(pl.col("code").is_not_null())
    parts.append(py)
    if not py.is_empty():
        exits_parts.append(_launcher_exits(py, pl.when(b.str.contains("ProcessExitedException", literal=True))
                                           .then(pl.lit("spawn")).otherwise(pl.lit("subprocess"))))
    if not ds.is_empty():
        exits_parts.append(_launcher_exits(ds, pl.lit("deepspeed")))

    progress = cand.filter(~b.str.contains(ascii_classes(AGENT_RE)) & (b.str.contains(ascii_classes(AGENT_PROGRESS)) | b.str.contains(ascii_classes(RDZV_RESULT))))
    claimed.extend(progress["line_no"].to_list())
    status = cand.filter(b.str.contains(ascii_classes(STATUS_EVENT)))
    if not status.is_empty():
        claimed.extend(status["line_no"].to_list())
        parts.append(_status_events(status, ctx))
        progress = pl.concat([progress.select("line_no"), status.select("line_no")])

    # ChildFailedError tables
    table_anchor = cand.filter(~b.str.contains(ascii_classes(AGENT_RE))).join(progress.select("line_no"), on="line_no", how="anti")
    ignored: list[int] = []
    if not table_anchor.is_empty():
        entries, t_claimed, t_ignored = _tables(lines, table_anchor["line_no"].to_list(), ctx)
        claimed.extend(t_claimed)
        ignored.extend(t_ignored)
        rows = _entry_rows(entries)
        if rows:
            ent = pl.DataFrame(rows, schema={
                "line_no": pl.Int64, "ts_raw": pl.Utf8, "_time": pl.Utf8, "host": pl.Utf8, "rank": pl.Int64,
                "local_rank": pl.Int64, "pid": pl.Int64, "exitcode": pl.Int64, "signal": pl.Utf8,
                "first_observed": pl.Boolean, "error_file": pl.Utf8, "tb_message": pl.Utf8})
            ent = ent.with_columns(iso(pl.col("_time"), ctx.tz).alias("ts")).join(
                lines.select("line_no", pl.col("body").alias("message")), on="line_no", how="left")
            parts.append(ent.with_columns(
                pl.col("exitcode").cast(pl.Utf8).alias("code"), pl.lit("elastic_failure").alias("kind"),
                pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing"))
                .alias("ts_quality"),
                pl.lit("error").alias("severity"),
                pl.coalesce(pl.col("host"), pl.lit(ctx.host_hint, dtype=pl.Utf8)).alias("host")))
            exits_parts.append(ent.with_columns(pl.lit("elastic").alias("origin"),
                                                pl.col("tb_message").alias("message")))

    parts = [p for p in parts if not p.is_empty()]
    events = events_frame(pl.concat(parts, how="diagonal_relaxed").with_columns(pl.lit(SPEC.name).alias("source"))) \
        if parts else empty_events()
    events = events.sort("line_no", maintain_order=True)
    exits = table_frame("exits", pl.concat(exits_parts, how="diagonal_relaxed").sort("line_no")) \
        if exits_parts else empty_table("exits")
    claimed_s = pl.concat([pl.Series("line_no", claimed, dtype=pl.Int64), events["line_no"]]).unique().sort()
    ignored_s = pl.Series("line_no", sorted(set(ignored) - set(claimed_s.to_list())), dtype=pl.Int64)
    return Extraction(events=events, tables={"exits": exits}, claimed=claimed_s, ignored=ignored_s)


def parse_error_json(text: str, ctx: ParseContext) -> Extraction:
    """A torchelastic error file: one `exception` event (line 1), all lines claimed."""
    n_lines = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    claimed = pl.Series("line_no", list(range(1, n_lines + 1)), dtype=pl.Int64)
    warnings: list[str] = []
    try:
        obj = json.loads(text)
    except ValueError as e:
        return Extraction(empty_events(), claimed=pl.Series("line_no", [], dtype=pl.Int64),
                          warnings=[f"error file is not valid JSON: {e}"])
    msg_obj = obj.get("message") if isinstance(obj, dict) else None
    message: str | None
    ts = None
    if isinstance(msg_obj, dict):
        message = msg_obj.get("message")
        extra = msg_obj.get("extraInfo") or {}
        stamp = extra.get("timestamp") if isinstance(extra, dict) else None
        try:
            ts = datetime.fromtimestamp(int(float(stamp)), tz=UTC) if stamp is not None else None
        except (TypeError, ValueError):
            warnings.append(f"unreadable timestamp {stamp!r}")
    else:
        message = msg_obj if isinstance(msg_obj, str) else None
        stamp = None
    if message is None:
        return Extraction(empty_events(), claimed=claimed, warnings=warnings + ["no message in error file"])
    first = message.strip().splitlines()[0] if message.strip() else ""
    em = re.match(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*): ", first)
    local = re.search(r"(?:^|/)(\d+)/[^/]*error[^/]*\.json$", ctx.path)
    ev = pl.DataFrame({
        "line_no": [1], "source": [SPEC.name], "kind": ["exception"], "ts": [ts],
        "ts_raw": [None if stamp is None else str(stamp)],
        "ts_quality": ["exact" if ts is not None else "missing"],
        "host": [ctx.host_hint], "rank": [ctx.rank_hint],
        "local_rank": [_int(local.group(1)) if local else None],
        "severity": ["error"], "code": [em.group(1) if em else None], "message": [message],
    })
    return Extraction(events_frame(ev), claimed=claimed, warnings=warnings)


SPEC = ParserSpec(
    name="elastic",
    scope="process",
    description="torchelastic agent lines, ChildFailedError tables, DeepSpeed launcher exits, error.json files",
    formats=("torchelastic_log", "childfailederror_table", "deepspeed_launcher", "torchelastic_error_json",
             "torchelastic_events"),
    kinds=("worker_failed", "elastic_failure", "teardown_signal", "launcher_exit", "restart", "exception", "train_end"),
    tables=("exits",),
    batch=True,
    roles=("launcher",),
)

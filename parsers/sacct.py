"""Slurm accounting: `sacct -P` (`|`-separated), `sacct -p` (trailing `|`), the default
fixed-width output (header + `----------` rule line, columns cut on the rule's dash runs) and
`sacct --json` (data_parser plugins of every version: `state.current` as a string or a list,
numbers plain or wrapped as `{"set", "infinite", "number"}`, `signal.id` or `signal_id`; one record
per job and per step, at the line of its `job_id` / step `id`); and `scontrol show job` (`-o` one line
per job or the default multi-line record, as slurm's src/api/job_info.c `slurm_sprint_job_info`
prints it: `JobId=N [ArrayJobId=N ArrayTaskId=N] JobName=...`, `JobState=S Reason=R`,
`Restarts=N ... ExitCode=E:S`, `StartTime=... EndTime=...`, `NodeList=...`, `BatchHost=...`; a
record is a block of `Key=value` lines up to a blank line or the next `JobId=`, so an excerpt cut
after its `JobId=` line is still read, with a null job id).

Rows -> `sched_records`; one `sched_state` event per record (code = state, ts = End else Start).
Columns are found by name in the header, in any order; missing columns stay null.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, empty_table, events_frame, table_frame
from parsers.spec import ParserSpec
from parsers.timestamps import iso

STATE_SEVERITY = {
    "COMPLETED": "info", "RUNNING": "info", "PENDING": "info", "COMPLETING": "info",
    "CONFIGURING": "info", "RESIZING": "info",
    "PREEMPTED": "warning", "REQUEUED": "warning", "TIMEOUT": "warning", "CANCELLED": "warning",
    "DEADLINE": "warning", "SUSPENDED": "warning", "REVOKED": "warning", "REQUEUE_HOLD": "warning",
    "REQUEUE_FED": "warning", "SPECIAL_EXIT": "warning", "STOPPED": "warning",
    "FAILED": "error", "NODE_FAIL": "error", "OUT_OF_MEMORY": "error", "BOOT_FAIL": "error",
}

_HEADER_RE = re.compile(r"^\s*JobID(?:Raw)?\b", re.IGNORECASE)
# A `--format` / `--fields` that leaves JobID out (or puts it later) still prints a header of field names: sacct's
# field list (src/sacct/sacct.c fields[], `sacct --helpformat`), lower-cased. A fixed-width header cuts a name to its
# column's width (`TimelimitR` of TimelimitRaw), so a cell of 4+ characters may be a name's prefix. A header is a line
# of 2+ such cells, one of them `State`, before a dash rule (or `|`-separated); rows are read by name as before.
SACCT_FIELDS = (
    "account", "admincomment", "alloccpus", "allocnodes", "alloctres", "associd", "avecpu", "avecpufreq",
    "avediskread", "avediskwrite", "avepages", "averss", "avevmsize", "blockid", "cluster", "comment", "constraints",
    "consumedenergy", "consumedenergyraw", "container", "cputime", "cputimeraw", "dbindex", "derivedexitcode",
    "elapsed", "elapsedraw", "eligible", "end", "exitcode", "extra", "failednode", "flags", "gid", "group", "jobid",
    "jobidraw", "jobname", "layout", "licenses", "maxdiskread", "maxdiskreadnode", "maxdiskreadtask", "maxdiskwrite",
    "maxdiskwritenode", "maxdiskwritetask", "maxpages", "maxpagesnode", "maxpagestask", "maxrss", "maxrssnode",
    "maxrsstask", "maxvmsize", "maxvmsizenode", "maxvmsizetask", "mcslabel", "mincpu", "mincpunode", "mincputask",
    "ncpus", "nnodes", "nodelist", "ntasks", "partition", "planned", "plannedcpu", "plannedcpuraw", "priority", "qos",
    "qosraw", "qosreq", "reason", "reqcpufreq", "reqcpufreqgov", "reqcpufreqmax", "reqcpufreqmin", "reqcpus", "reqmem",
    "reqnodes", "reqtres", "reservation", "reservationid", "restarts", "sluid", "start", "state", "stdin", "stdout",
    "stderr", "submit", "submitline", "suspended", "systemcomment", "systemcpu", "timelimit", "timelimitraw",
    "totalcpu", "tresusageinave", "tresusageinmax", "tresusageintot", "tresusageoutave", "tresusageoutmax",
    "tresusageouttot", "uid", "user", "usercpu", "wckey", "wckeyid", "workdir",
)


def _is_field(cell: str) -> bool:
    c = cell.lower()
    return c in SACCT_FIELDS or (len(c) >= 4 and any(f.startswith(c) for f in SACCT_FIELDS))


def _named_header(line: str) -> bool:
    """A header of sacct field names with a `State` cell, whatever its first column."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")] if "|" in line else line.split()
    return (len(cells) >= 2 and "state" in (c.lower() for c in cells) and all(c and _is_field(c) for c in cells))
_RULE_RE = re.compile(r"^\s*-{3,}(?:\s+-{3,})*\s*$")
_NULL_WORDS = ["", "Unknown", "None", "N/A", "(null)", "None assigned"]


_SCONTROL_STATE = re.compile(r"(?m)(?:^|\s)JobState=[A-Z_]+\b")
_SCONTROL_MORE = re.compile(r"(?m)(?:^|\s)(?:JobId=\d+|ExitCode=\d+:\d+|Requeue=\d+ Restarts=\d+)")


# Every head `sniff` scores above 0 holds one of these ((text, ASCII-caseless) pairs; ingest skips
# the sniff on a head without any): "JobState=" (scontrol), '"jobs"' (JSON), "jobid" (any case: the
# tables' header, found in `head.lower()`, which no non-ASCII letter can make hold it), "state" (a header of field
# names without JobID: _named_header)
SNIFF_NEEDS = (("JobState=", False), ('"jobs"', False), ("jobid", True), ("state", True))


def sniff(head: str) -> float:
    # (literal gates first: `(?:^|\s)` is tried at every position by Python's `re`, 2 ms on a 64 KiB head)
    if "JobState=" in head and _SCONTROL_STATE.search(head) and _SCONTROL_MORE.search(head):
        return 0.9
    h = head.lstrip()
    if h.startswith("{") and re.search(r'"jobs"\s*:', head) and re.search(r'"(?:job_id|exit_code|state)"\s*:', head):
        return 0.95
    low = head.lower()
    if "jobid" not in low and "state" not in low:  # what _HEADER_RE / _named_header need, anywhere (a cheap gate)
        return 0.0
    lines = [ln for ln in head.splitlines() if ln.strip()]
    for i, ln in enumerate(lines[:20]):
        if "state" in ln.lower() and not _HEADER_RE.match(ln) and _named_header(ln):
            if "|" in ln or (i + 1 < len(lines) and _RULE_RE.match(lines[i + 1])):
                return 0.95
            continue
        if _HEADER_RE.match(ln):
            if "|" in ln:
                return 0.95
            if i + 1 < len(lines) and _RULE_RE.match(lines[i + 1]):
                return 0.95
            if re.search(r"\bState\b", ln):
                return 0.6
    return 0.0


def _fields(df: pl.DataFrame) -> dict[str, str]:
    return {c.strip().lower(): c for c in df.columns}


def _split_pipe(rows: pl.DataFrame, header: str) -> pl.DataFrame:
    names = [h.strip() for h in header.rstrip().rstrip("|").split("|")]
    parts = pl.col("text").str.split("|")
    return rows.select("line_no", "text", *[parts.list.get(i, null_on_oob=True).alias(n) for i, n in enumerate(names)])


def _split_fixed(rows: pl.DataFrame, header: str, rule: str) -> pl.DataFrame:
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    names = [header[a:b].strip() or f"col{i}" for i, (a, b) in enumerate(spans)]
    cols = []
    for i, (a, _b) in enumerate(spans):
        end = spans[i + 1][0] if i + 1 < len(spans) else None
        cols.append(pl.col("text").str.slice(a, None if end is None else end - a).alias(names[i]))
    return rows.select("line_no", "text", *cols)


def _empty() -> Extraction:
    return Extraction(events=empty_events(),
                      tables={"sched_records": empty_table("sched_records")})


def _num(v: Any) -> int | None:
    """Plain numbers, or the newer `{"set": true, "infinite": false, "number": N}` wrapper."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if isinstance(v, bool) or v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _first(v: Any) -> str | None:
    if isinstance(v, list):
        v = v[0] if v else None
    return str(v) if v not in (None, "") else None


def _epoch(v: Any) -> datetime | None:
    n = _num(v)
    return datetime.fromtimestamp(n, tz=UTC) if n else None


_TS = pl.coalesce(pl.col("end"), pl.col("start"))  # a record's time: when it ended, else began


def _state_events(rec: pl.DataFrame, ctx: ParseContext, *extra: pl.Expr) -> pl.DataFrame:
    """One `sched_state` event per record with a state (text and --json output alike); the host is
    the failed node, else a single-node node list, else the path's."""
    return events_frame(rec.filter(pl.col("state").is_not_null()).with_columns(
        pl.lit(SPEC.name).alias("source"), pl.lit("sched_state").alias("kind"), _TS.alias("ts"),
        pl.when(_TS.is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.coalesce(pl.col("failed_node"),
                    pl.when(~pl.col("node_list").str.contains(r"[\[,]")).then(pl.col("node_list")),
                    pl.lit(ctx.host_hint, dtype=pl.Utf8)).alias("host"),
        pl.col("state").replace_strict(STATE_SEVERITY, default="warning", return_dtype=pl.Utf8).alias("severity"),
        pl.col("state").alias("code"), *extra,
    ))


def _json_record(obj: dict, job_id: str | None, step_id: str | None, name: Any, line_no: int) -> dict:
    state = obj.get("state")
    if isinstance(state, dict):
        cur, reason = _first(state.get("current")), state.get("reason")
    else:
        cur, reason = _first(state), None
    ec = obj.get("exit_code") or {}
    if isinstance(ec, dict):
        rc = _num(ec.get("return_code"))
        sig = ec.get("signal") or {}
        signal = _num(sig.get("id", sig.get("signal_id"))) if isinstance(sig, dict) else _num(sig)
    else:
        rc, signal = _num(ec), None
    tm = obj.get("time") or {}
    nodes = obj.get("nodes")
    if isinstance(nodes, dict):
        nodes = nodes.get("range") or nodes.get("list")
    if isinstance(nodes, list):
        nodes = ",".join(map(str, nodes))
    if isinstance(reason, str) and reason in _NULL_WORDS:
        reason = None
    return {
        "line_no": line_no, "job_id": job_id, "step_id": step_id, "name": _first(name),
        "state": cur.split()[0] if cur else None, "exit_code": rc, "signal": signal,
        "start": _epoch(tm.get("start")), "end": _epoch(tm.get("end")),
        "node_list": nodes or None, "failed_node": obj.get("failed_node") or None,
        "restarts": _num(obj.get("restart_cnt")), "reason": reason,
    }


def _parse_json(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    try:
        doc = json.loads("\n".join(lines["text"].to_list()))
    except ValueError as e:
        return Extraction(events=empty_events(), tables={"sched_records": empty_table("sched_records")},
                          warnings=[f"sacct JSON could not be read: {e}"])
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        return Extraction(events=empty_events(), tables={"sched_records": empty_table("sched_records")},
                          warnings=["sacct JSON without a jobs list"])
    # line of each `"job_id": N` and step `"id": "N.x"` (in order) for the evidence line numbers
    texts = lines["text"].to_list()
    nos = lines["line_no"].to_list()
    cursor = 0

    def find(pattern: str) -> int:
        nonlocal cursor
        rx = re.compile(pattern)
        for i in range(cursor, len(texts)):
            if rx.search(texts[i]):
                cursor = i + 1
                return int(nos[i])
        return int(nos[0]) if len(texts) == 1 else 0

    recs = []
    for job in jobs:
        if not isinstance(job, dict):
            continue
        jid = _first(job.get("job_id"))
        ln = find(rf'"job_id"\s*:\s*{re.escape(str(jid))}\b') if jid else 0
        recs.append(_json_record(job, jid, None, job.get("name"), ln))
        for st in job.get("steps") or []:
            if not isinstance(st, dict):
                continue
            sinfo = st.get("step") or {}
            sid = sinfo.get("id") if isinstance(sinfo, dict) else None
            if isinstance(sid, dict):  # {"job_id": 1, "step_id": "batch"} in some versions
                sid = f"{sid.get('job_id')}.{sid.get('step_id')}"
            sid = str(sid) if sid is not None else None
            sln = find(rf'"{re.escape(sid)}"') if sid else 0
            rec = _json_record(st, jid, sid.split(".", 1)[1] if sid and "." in sid else sid,
                               sinfo.get("name") if isinstance(sinfo, dict) else None, sln)
            recs.append(rec)
    schema = {k: v for k, v in empty_table("sched_records").schema.items()}
    rec = pl.DataFrame(recs, schema=schema) if recs else empty_table("sched_records")
    events = _state_events(rec, ctx, _TS.dt.strftime("%Y-%m-%dT%H:%M:%SZ").alias("ts_raw"), pl.concat_str(
        [pl.lit("sacct --json "), pl.col("job_id"), pl.lit("."), pl.col("step_id").fill_null(""),
         pl.lit(" "), pl.col("state")]).str.replace(r"\. ", " ").alias("message"))
    # the whole document is one structured record set: every line belongs to it
    return Extraction(events=events, tables={"sched_records": rec}, claimed=lines["line_no"].sort(),
                      ignored=pl.Series("line_no", [], dtype=pl.Int64))


# scontrol keys read (each `Key=value`, the value up to the next blank; JobName up to the next key)
_SC_KEYS = {"job_id": "JobId", "array_job": "ArrayJobId", "array_task": "ArrayTaskId", "state": "JobState",
            "reason": "Reason", "restarts": "Restarts", "exit": "ExitCode", "start": "StartTime",
            "end": "EndTime", "node_list": "NodeList", "batch_host": "BatchHost"}
_SC_KV = r"^\s*[A-Za-z][\w:/]*=\S*"  # a line of the record: it starts with Key=


def _sc(key: str) -> pl.Expr:
    return pl.col("text").str.extract(rf"(?:^|\s){key}=(\S*)", 1)


def _parse_scontrol(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    t = pl.col("text")
    blank = t.str.strip_chars() == ""
    kv = t.str.contains(ascii_classes(_SC_KV))
    head = t.str.contains(ascii_classes(r"^\s*JobId=\d+"))
    df = lines.select("line_no", "text").with_columns(
        # a new record at each JobId= line and at the first Key= line after a blank or a non-record line
        (head | (kv & ~kv.shift(1).fill_null(False))).cum_sum().alias("_rec"), kv.alias("_kv"), blank.alias("_blank"))
    rows = df.filter(pl.col("_kv")).with_columns(
        *[_sc(k).alias(c) for c, k in _SC_KEYS.items()],
        t.str.extract(ascii_classes(r"(?:^|\s)JobName=(.*?)(?:\s+[A-Z][\w:/]*=|\s*$)"), 1).alias("name"),
        pl.when(t.str.contains(r"(?:^|\s)JobState=")).then(pl.col("line_no")).alias("_state_no"))
    cols = [*_SC_KEYS, "name"]
    rec = rows.group_by("_rec", maintain_order=True).agg(
        *[pl.col(c).drop_nulls().first() for c in cols], pl.col("_state_no").drop_nulls().first(),
        pl.col("line_no").first().alias("_first_no"))
    msg = rows.filter(pl.col("_state_no").is_not_null()).select("_rec", pl.col("text").str.strip_chars().alias("message"))
    rec = rec.join(msg.unique("_rec", keep="first", maintain_order=True), on="_rec", how="left")
    null = pl.lit(None, dtype=pl.Utf8)

    def val(c: str) -> pl.Expr:
        return pl.when(pl.col(c).is_in(_NULL_WORDS)).then(null).otherwise(pl.col(c))

    exitc = pl.col("exit").str.extract_groups(ascii_classes(r"^(\d+):(\d+)$"))
    stamp = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)$"
    out = rec.select(
        pl.coalesce("_state_no", "_first_no").alias("line_no"), pl.col("message"),
        val("job_id").alias("job_id"), null.alias("step_id"), val("name").alias("name"),
        pl.col("state").str.extract(r"^([A-Z_]+)", 1).alias("state"),
        exitc.struct.field("1").cast(pl.Int64, strict=False).alias("exit_code"),
        exitc.struct.field("2").cast(pl.Int64, strict=False).alias("signal"),
        iso(pl.col("start").str.extract(ascii_classes(stamp), 1), ctx.tz).alias("start"),
        iso(pl.col("end").str.extract(ascii_classes(stamp), 1), ctx.tz).alias("end"),
        val("node_list").alias("node_list"), null.alias("failed_node"),
        pl.col("restarts").cast(pl.Int64, strict=False).alias("restarts"),
        val("reason").alias("reason"),
        pl.coalesce(pl.col("end").str.extract(ascii_classes(stamp), 1), pl.col("start").str.extract(ascii_classes(stamp), 1)).alias("ts_raw"),
    )
    events = _state_events(out, ctx)
    return Extraction(
        events=events,
        tables={"sched_records": table_frame("sched_records", out)},
        claimed=df.filter(pl.col("_kv"))["line_no"].sort(),
        ignored=df.filter(pl.col("_blank"))["line_no"].sort(),
    )


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return _empty()
    if lines.head(200)["text"].str.contains(ascii_classes(_SCONTROL_STATE.pattern)).any():
        return _parse_scontrol(lines, ctx)
    first = lines.filter(pl.col("text").str.strip_chars() != "").head(1)["text"]
    if first.len() and first[0].lstrip().startswith("{"):
        return _parse_json(lines, ctx)
    t = pl.col("text")
    df = lines.select("line_no", "text").with_columns(t.str.strip_chars_end().alias("text"))
    named = [n for n, x in df.filter(t.str.to_lowercase().str.contains("state", literal=True)).select("line_no", "text").iter_rows()
             if _named_header(x)]
    is_hdr = t.str.contains(r"(?i)^\s*JobID(?:Raw)?(?:\s|\||$)") | pl.col("line_no").is_in(named)
    is_rule = t.str.contains(r"^\s*-{3,}(?:\s+-{3,})*\s*$")
    df = df.with_columns(
        pl.when(is_hdr).then(t).forward_fill().alias("_hdr"),
        pl.when(is_hdr).then(pl.col("line_no")).forward_fill().alias("_hdr_no"),
        is_hdr.alias("_is_hdr"), is_rule.alias("_is_rule"),
    )
    rules = df.filter(pl.col("_is_rule")).select(pl.col("line_no").alias("_rule_no"), pl.col("text").alias("_rule"))
    rows_all = df.filter(pl.col("_hdr").is_not_null() & ~pl.col("_is_hdr") & ~pl.col("_is_rule")
                         & (t.str.strip_chars() != ""))
    warnings: list[str] = []
    parts: list[pl.DataFrame] = []
    for hdr, hdr_no in rows_all.select("_hdr", "_hdr_no").unique(maintain_order=True).iter_rows():
        sub = rows_all.filter(pl.col("_hdr_no") == hdr_no)
        if "|" in hdr:
            parts.append(_split_pipe(sub, hdr))
        else:
            rule = rules.filter(pl.col("_rule_no") == hdr_no + 1)
            if rule.is_empty():
                warnings.append(f"sacct header on line {hdr_no} has no rule line: block skipped")
                continue
            parts.append(_split_fixed(sub, hdr, rule["_rule"][0]))
    if not parts:
        return _empty()
    wide = pl.concat(parts, how="diagonal_relaxed")
    f = _fields(wide)

    def col(*names: str) -> pl.Expr:
        for n in names:
            if n.lower() in f:
                c = pl.col(f[n.lower()]).str.strip_chars()
                return pl.when(c.is_in(_NULL_WORDS)).then(pl.lit(None, dtype=pl.Utf8)).otherwise(c)
        return pl.lit(None, dtype=pl.Utf8)

    jobid = col("JobID", "JobIDRaw")
    state_full = col("State").str.strip_chars_end("+")  # fixed-width truncation marks
    state = state_full.str.extract(r"^([A-Z_]+)", 1)
    state_rest = state_full.str.extract(r"^[A-Z_]+\s+(.+)$", 1)
    reason_col = col("Reason")
    exitc = col("ExitCode").str.extract_groups(ascii_classes(r"^(\d+):(\d+)$"))
    start = iso(col("Start").str.extract(ascii_classes(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)$"), 1), ctx.tz)
    end = iso(col("End").str.extract(ascii_classes(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)$"), 1), ctx.tz)
    rec = wide.select(
        "line_no", pl.col("text").alias("message"),
        jobid.str.extract(r"^([^.]+)", 1).alias("job_id"),
        jobid.str.extract(r"^[^.]+\.(.+)$", 1).alias("step_id"),
        col("JobName", "Name").alias("name"),
        state.alias("state"),
        exitc.struct.field("1").cast(pl.Int64, strict=False).alias("exit_code"),
        exitc.struct.field("2").cast(pl.Int64, strict=False).alias("signal"),
        start.alias("start"), end.alias("end"),
        col("NodeList").alias("node_list"),
        col("FailedNode").alias("failed_node"),
        col("Restarts").cast(pl.Int64, strict=False).alias("restarts"),
        pl.when(state_rest.is_not_null() & reason_col.is_not_null())
        .then(pl.concat_str([state_rest, reason_col], separator="; "))
        .otherwise(pl.coalesce(state_rest, reason_col)).alias("reason"),
        pl.coalesce(col("End"), col("Start")).alias("ts_raw"),
    )
    events = _state_events(rec, ctx)
    no_state = rec.filter(pl.col("state").is_null()).height
    if no_state:
        warnings.append(f"{no_state} sacct row(s) without a State column value")
    claimed = rec["line_no"]
    ignored = df.filter(pl.col("_is_hdr") | pl.col("_is_rule") | (t.str.strip_chars() == ""))["line_no"]
    return Extraction(
        events=events,
        tables={"sched_records": table_frame("sched_records", rec)},
        claimed=claimed.sort().alias("line_no"),
        ignored=ignored.sort().alias("line_no"),
        warnings=warnings,
    )


SPEC = ParserSpec(
    name="sacct",
    scope="job",
    description="Slurm sacct output (-P, -p, fixed-width, --json) and scontrol show job: job/step states, exit codes, nodes",
    formats=("sacct -P / --parsable2", "sacct -p / --parsable", "sacct fixed-width (default)", "sacct --json",
             "scontrol show job (multi-line and -o)"),
    kinds=("sched_state",),
    tables=("sched_records",),
    exclusive=True,
    roles=("scheduler",),
    evidence="scheduler records (sacct)",
)

"""NCCL debug log (`NCCL_DEBUG=INFO/WARN/TRACE`), NCCL 2.10 - 2.30 and master.

Reference: `../shared/reference/nccl_log.md`. Hot path: a file of millions of INFO lines is read
with one literal pre-filter, one `extract_groups` for the prefix and cheap literal `contains`
classification; only WARN lines, init/abort lines, interface lines, error-propagation lines and
RAS reports go any further. Every other NCCL INFO/TRACE/CALL line is `ignored`.

WARN lines without the `host:pid:tid` prefix (as posted in issues: `include/shm.h:28 NCCL WARN ...`)
are WARN events too, with host / pid / GPU null.

Events: nccl_version, nccl_init, nccl_abort, nccl_warn, nccl_ib_error, nccl_socket_error,
nccl_cuda_error, nccl_ras, nccl_coll (a COLL-trace call whose parameters differ from every other
process's at one opCount; `code` = MISMATCH), nccl_iface (Bootstrap / NET/IB OOB / NET/Socket interface;
`code` = IP).
Tables: nccl_comms (Init START/COMPLETE, Abort, Destroy), nccl_errors (one row per WARN-level error,
`result` folded in from the `-> N` propagation lines that follow it on the same host:pid).
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import (
    Extraction,
    ParseContext,
    empty_events,
    events_frame,
    file_keys,
    host_hint,
    nccl_busid_to_pci,
    rank_hint,
    table_frame,
)
from parsers.spec import ParserSpec
from parsers.timestamps import iso

# Lines that can matter at all (a literal alternation: the regex engine runs it as a fast
# multi-literal search). Bare error texts (no NCCL prefix) appear after PyTorch's `Last error:`.
_TRIGGER = r"NCCL|RCCL version|NET/OFI|NET/IB|socketProgress|Communicators\.\.\.|Job summary"  # no match: nothing to do

PREFIX_RE = (
    r"(?:\[(?P<nts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] )?"
    r"(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d+):(?P<tid>\d+) "
    r"(?:\[(?P<dev>\d+)\] )?"
    r"(?:(?P<ms>\d+\.\d+) (?P<tfunc>\S+):(?P<tline>\d+) )?"
    r"(?:(?P<file>\S+):(?P<fline>\d+) (?:\((?P<func>[^)]+)\) )?)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL)(?: (?P<msg>.*))?$"
)
# NCCL's banner `NCCL version 2.21.5+cuda12.4` (src/init.cc VERSION_STRING); RCCL's is `RCCL version : 2.21.5-HEAD:
# 9a0e6a1` (ROCm/rccl src/init.cc: VERSION_STRING "RCCL version : " major.minor.patch NCCL_SUFFIX, followed by
# `HIP version  : ` / `ROCm version : ` lines).
VERSION_RE = r"^\s*(?:NCCL version|RCCL version :) (\d+\.\d+\.\d+)"
INIT_RE = (
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<crank>-?\d+) nranks (?P<nranks>\d+) cudaDev (?P<cdev>-?\d+)"
    r"(?: nvmlDev (?P<nvml>-?\d+))? busId (?P<bus>[0-9a-fA-F]+)(?P<rest>.*?)"
    r" - (?P<ev>Init START|Init COMPLETE|Abort START|Abort COMPLETE|Destroy COMPLETE)"
)
PREFIX_CHECK = (r"[^\s:\[\]()<>]+:\d+:\d+ (?:\[\d+\] )?(?:\d+\.\d+ \S+:\d+ )?"
                r"NCCL (?:INFO|TRACE|CALL) ")
# INFO lines that may become events; every other INFO line is chatter.
INFO_INTERESTING = (r" - (?:Init|Abort|Destroy)|\w:\d+(?: \(\w+\))? -> -?\d|Using|NCCL version|Connection closed by localRank"
                    r"|\w: opCount [0-9a-fA-F]+ sendbuff ")
# The NCCL_DEBUG_SUBSYS=COLL trace of every call (src/enqueue.cc ncclEnqueueCheck, NCCL 2.2 .. 2.2x:
# `INFO(NCCL_COLL, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p
# [nranks=%d] stream %p", opName, ...)`; RCCL appends ` task %d globalrank %d`). NCCL requires every rank
# of a communicator to issue the same collective with the same count, datatype, op and root at each
# opCount; one process whose call differs from all the others' at the same opCount is the rank that went
# its own way (nccl#147: "the first call to a collective (Broadcast) has mismatch parameters between the
# ranks"). Send / Recv name their peer in `root` and are not compared.
COLL_RE = (
    r"^(?P<coll>[A-Za-z]+): opCount (?P<opc>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+)"
    r" datatype (?P<dtype>-?\d+) op (?P<op>-?\d+) root (?P<root>-?\d+) comm (?P<commp>\S+)"
    r"(?: commHash (?P<chash>\S+))? \[nranks=(?P<cnr>\d+)\]"
    r"(?:.*? globalrank (?P<grank>\d+))?"
)
COLL_P2P = ("Send", "Recv")
ERRTRACE_RE = r"^[\w./+-]+:\d+(?: \([^)]*\))? -> (\d+)"
IFACE_RE = r"(?:Bootstrap ?: Using|OOB|NET/Socket ?: Using \[\d+\]) ?(?:\[\d+\])?([^\s:\[\]]+):([0-9A-Fa-f.:%\w]+?)<\d+>"

# A WARN line without the `host:pid:tid [dev]` prefix (as posted in issues, or re-wrapped by a
# tool that dropped it): `include/shm.h:28 NCCL WARN Call to posix_fallocate failed: ...`,
# `misc/shmutils.cc:88 NCCL WARN Error: failed to extend ...`, `NCCL WARN Cuda failure ...`.
# Host and pid are unknown (null; the file's hints fill host), the source location is kept.
BARE_WARN_RE = (
    r"(?:\[(?P<bnts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] )?"
    r"(?:(?P<bfile>[\w./+-]+\.\w+):(?P<bfline>\d+) (?:\((?P<bfunc>[^)]+)\) )?)?"
    r"NCCL WARN (?P<bmsg>.*)$"
)
# Bare (prefix-less) error texts worth recognising, e.g. the line after PyTorch's `Last error:`.
BARE_RE = (
    r"Got completion from peer|NET/OFI Request .* completed with error|Got async event|async fatal event"
    r"|socketProgress\w*: Connection closed by remote peer|Call to ibv_\w+"
)

IB_TEST = r"Got completion from peer|NET/IB|NET/OFI|IB/GIN|ibv_|async event|async fatal|NET/IBext"
SOCKET_TEST = (
    r"(?i)socket|Connection closed|Connection reset|Connection refused|Connection timed out|Broken pipe"
    r"|message truncated|Service thread|Proxy Call|no interface found|Bootstrap|Call to (?:bind|connect|recv|send|accept|listen)"
)
# RCCL (ROCm/rccl, hipified at build time: `build/.../hipify/src/...`) prints the same checks with HIP's names:
# src/include/checks.h CUCHECK `HIP failure '%s' at %s:%d`, transport/p2p.cc `hipIpcGetMemHandle failed : %s`
CUDA_TEST = r"Cuda failure|Failed to CUDA|CUDA error|cuda failure|cudaMalloc|HIP failure|hipMalloc"
ABORT_TEST = r"is in abort state|commReclaim|ncclCommSetAsyncError"


# Terminal copies (a web console or tmux pane pasted flat): every row padded with spaces to the pane width and
# the line breaks lost, so several NCCL records share one line. NCCL prints one record per line (src/debug.cc
# ncclDebugLog: `host:pid:tid [dev] ...\n`), so a `host:pid:tid [dev] ` head behind a run of spaces inside a line
# starts another record: the line is split there (each part keeps the line's number).
GLUED_RE = r"\s{2,}([^\s:\[\]()<>]+:\d+:\d+ \[\d+\] )"


def sniff(head: str) -> float:
    if "NCCL" not in head:
        return 0.0
    lines = pl.Series(head.split("\n"), dtype=pl.Utf8)  # Rust regex, line by line: linear on hostile heads
    if lines.str.contains(ascii_classes(r"\S+:\d+:\d+ (?:\[\d+\] )?(?:\S+:\d+ (?:\([^)]*\) )?)?NCCL (?:INFO|WARN|TRACE)")).any():
        return 0.9
    if lines.str.contains(ascii_classes(r"^\s*NCCL version \d+\.\d+\.\d+ compiled with CUDA")).any():
        return 0.8
    if lines.str.contains(ascii_classes(r"^\s*NCCL version \d+\.\d+\.\d+")).any() or "NCCL WARN" in head:
        return 0.5
    return 0.0


def chatter(line: pl.Expr, interesting: pl.Expr | None = None) -> pl.Expr:
    """NCCL INFO/TRACE/CALL lines that can never become an event (the bulk of an INFO-level log):
    literal checks first, one prefix regex. forensics/bulk.py drops them before any parser runs
    and counts them as ignored, exactly as `parse` does. `interesting`: whether each line matches
    INFO_INTERESTING, when the caller found that already (bulk's triage engine)."""
    if interesting is None:
        interesting = line.str.contains(ascii_classes(INFO_INTERESTING))
    boring = (
        (line.str.contains(" NCCL INFO ", literal=True) & ~interesting
         & ~line.str.contains("NCCL WARN", literal=True))  # a WARN glued behind INFO (GLUED_RE) is kept
        | line.str.contains(" NCCL TRACE ", literal=True) | line.str.contains(" NCCL CALL ", literal=True)
    )
    return boring & line.str.contains(ascii_classes(PREFIX_CHECK))


def _empty_series() -> pl.Series:
    return pl.Series("line_no", [], dtype=pl.Int64)


def _ts(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    raw = pl.coalesce(pl.col("nts"), pl.col("prefix_ts"))
    return df.with_columns(
        pl.coalesce(iso(pl.col("nts"), ctx.tz), iso(pl.col("prefix_ts"), ctx.tz)).alias("ts"),
        raw.alias("ts_raw"),
    ).with_columns(
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing"))
        .alias("ts_quality")
    )


def _ras_block(bodies: list[str], start: int) -> int:
    """Number of lines from `start` that belong to one ncclras text report."""
    titles = re.compile(
        r"^\s*(?:NCCL version \S+ compiled with CUDA.*|CUDA runtime version.*|Job summary|"
        r"Communicators\.\.\..*|Errors|Warnings|=+|-+|\(total\).*|Group\s+Comms.*|[A-Z][A-Z_,]*|#\d+-\d+.*)\s*$")
    n = 0
    for b in bodies[start:start + 5000]:
        if b.strip() == "" or titles.match(b) or (b[:1] in (" ", "\t") and "NCCL" not in b):
            n += 1
            continue
        break
    # trailing blank lines are not part of it
    while n > 0 and bodies[start + n - 1].strip() == "":
        n -= 1
    return n


# A communicator's operation-count mismatch in a RAS report (src/ras/client_support.cc, the MISMATCH
# block: `#G-C (hash) MISMATCH`, `Communicator ranks have different <Func> operation counts` (2.26+;
# `collective operation counts` before), its groups most frequent first: `N ranks have launched up to
# operation K` / `N ranks have not launched any operations`, and an outlier group's members
# `Rank R -- GPU g managed by process P on node H` or, alone, `Rank R has launched up to operation K --
# GPU g managed by process P on node H` / `Rank R has not launched any operations -- ...` /
# `... -- [process information not found]`). NCCL's RAS guide (docs/userguide/source/troubleshooting/
# ras.rst): one such snapshot "should not be a cause for concern, as long as the counts increase across
# repeated queries"; "if the output does not change across subsequent RAS queries, it may indicate that
# the communicator is stuck". So a later report of the same file that repeats a communicator's mismatch
# with the same counts is an event of its own, code STUCK, naming the lagging group's rank when that
# group is one listed rank (the ranks a report lists may as well be ahead of the others: nccl#1911).
RAS_COMM_RE = re.compile(r"^#\d+-\d+ \(([0-9a-fA-F]+)\) \S*MISMATCH")
RAS_OPS_RE = re.compile(r"^\s+Communicator ranks have different (\w+) operation counts")
RAS_GROUP_RE = re.compile(r"^\s+(\d+) ranks have (?:launched up to operation (\d+)|not launched any operations)")
RAS_MEMBER_RE = re.compile(
    r"^\s+Rank (\d+)(?: has (?:launched up to operation (\d+)|not launched any operations))? -- "
    r"(?:GPU (\d+)\S* managed by process \d+ on node (\S+)|\[process information not found\])")


def _ras_stuck(blocks: list[tuple[int, str, str, list[dict]]], seen: dict) -> list[dict]:
    """STUCK events for the operation-count mismatches a report repeats unchanged (see RAS_COMM_RE)."""
    out = []
    for ln, comm, func, groups in blocks:
        if len(groups) < 2:
            continue
        key = (comm, func, tuple(sorted((g["value"], g["count"]) for g in groups)))
        if key in seen:
            low = min(groups, key=lambda g: g["value"])
            one = low["members"][0] if low["count"] == 1 and len(low["members"]) == 1 else {}
            out.append({"line_no": ln, "severity": "error", "code": "STUCK",
                        "message": f"#{comm} {func} operation counts unchanged since line {seen[key]}: "
                                   + ", ".join(f"{g['count']} rank(s) at {g['value']}" for g in groups),
                        "ras_rank": one.get("rank"), "ras_gpu": one.get("gpu"), "ras_host": one.get("host")})
        else:
            seen[key] = ln
    return out


def _ras_ops_blocks(nos: list[int], bodies: list[str]) -> list[tuple[int, str, str, list[dict]]]:
    """The operation-count mismatches of one report: (line of the `#G-C` head, comm hash, function,
    groups [{value, count, members}])."""
    blocks: list[tuple[int, str, str, list[dict]]] = []
    comm, head = None, 0
    func: str | None = None
    groups: list[dict] = []

    def close() -> None:
        if comm is not None and func is not None and groups:
            blocks.append((head, comm, func, list(groups)))

    for ln, b in zip(nos, bodies, strict=True):
        m = RAS_COMM_RE.match(b)
        if m or not b.startswith((" ", "\t")):
            close()
            comm, head, func, groups = (m.group(1), ln, None, []) if m else (None, 0, None, [])
            continue
        if comm is None:
            continue
        if (o := RAS_OPS_RE.match(b)):
            close()
            func, groups = o.group(1), []
        elif func is None:
            continue
        elif (g := RAS_GROUP_RE.match(b)):
            groups.append({"value": int(g.group(2) or 0), "count": int(g.group(1)), "members": []})
        elif (r := RAS_MEMBER_RE.match(b)):
            member = {"rank": int(r.group(1)), "gpu": int(r.group(3)) if r.group(3) else None, "host": r.group(4)}
            if "has " in b:  # a group of one: its value is on the member line
                groups.append({"value": int(r.group(2) or 0), "count": 1, "members": [member]})
            elif groups:
                groups[-1]["members"].append(member)
    close()
    return blocks


def _parse_ras(lines: pl.DataFrame, anchors: list[int], ctx: ParseContext
               ) -> tuple[list[dict], list[int]]:
    """Parse ncclras reports starting at the anchor line numbers (small Python loop)."""
    events: list[dict] = []
    claimed: list[int] = []
    seen_ops: dict = {}
    row_re = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")
    head_re = re.compile(r"^([A-Z][A-Z_,]*)\s*$")
    done_until = 0
    for a in sorted(anchors):
        if a <= done_until:
            continue
        seg = lines.filter(pl.col("line_no").is_between(a, a + 5000)).sort("line_no")
        nos = seg["line_no"].to_list()
        bodies = seg["body"].to_list()
        n = _ras_block(bodies, 0)
        if n == 0:
            continue
        done_until = nos[n - 1]
        claimed.extend(nos[:n])
        section = ""
        bad = False
        first_row: int | None = None
        for ln, b in zip(nos[:n], bodies[:n], strict=True):
            s = b.strip()
            if s in ("Errors", "Warnings") or s.startswith("Communicators") or s == "Job summary":
                section = s.split(".")[0]
                continue
            m = row_re.match(b)
            if m and section == "Communicators":
                first_row = first_row or ln
                status, errs = m.group(7), m.group(8)
                if status != "RUNNING" or errs != "OK":
                    bad = True
                    events.append({"line_no": ln, "severity": "error", "code": f"{status}/{errs}",
                                   "message": b})
                continue
            h = head_re.match(b)
            if h and section in ("Errors", "Warnings") and not set(s) <= {"="}:
                if section == "Errors":
                    bad = True
                events.append({"line_no": ln, "severity": "error" if section == "Errors" else "warning",
                               "code": h.group(1), "message": b})
        if not bad:
            ln = first_row or a
            events.append({"line_no": ln, "severity": "info", "code": "OK",
                           "message": bodies[nos.index(ln)]})
        events.extend(_ras_stuck(_ras_ops_blocks(nos[:n], bodies[:n]), seen_ops))
    return events, claimed


def _coll_mismatches(coll: pl.DataFrame) -> pl.DataFrame:
    """`nccl_coll` MISMATCH events: at one opCount of communicators of one size (and one commHash where the
    trace prints it), every process but one issued the same collective with the same count, datatype, op
    and root, and that one process did not. Only groups where each process (host, pid) traced one call,
    with at least two processes agreeing, are judged (a process holding several communicators of that
    size traces several calls at one opCount, which would not be comparable); the event is the odd call's
    line, its message the disagreement. Vectorised: a COLL trace holds one line per call."""
    if coll.is_empty():
        return coll.head(0)
    key = ["opc", "cnr", "chash"]
    g = coll.with_columns(pl.col("msg").str.extract_groups(ascii_classes(COLL_RE)).alias("_k")).unnest("_k")
    g = g.filter(pl.col("coll").is_not_null() & ~pl.col("coll").is_in(COLL_P2P) & pl.col("host").is_not_null()
                 & pl.col("pid").is_not_null())
    g = g.with_columns(
        pl.concat_str(["coll", "count", "dtype", "op", "root"], separator=" ").alias("_sig"),
        pl.len().over(key).alias("_n"),
        pl.struct("host", "pid").n_unique().over(key).alias("_np"),
    ).with_columns(
        pl.len().over([*key, "_sig"]).alias("_ns"),
        pl.col("_sig").n_unique().over(key).alias("_nsig"),
    )
    g = g.filter((pl.col("_n") == pl.col("_np")) & (pl.col("_n") >= 3) & (pl.col("_nsig") == 2))
    if g.is_empty():
        return coll.head(0)
    common = g.filter(pl.col("_ns") >= 2).group_by(key).agg(
        pl.col("_sig").first().alias("_common"), pl.col("_ns").first().alias("_ncommon"))
    odd = g.filter(pl.col("_ns") == 1).join(common, on=key, how="inner", nulls_equal=True)
    if odd.is_empty():
        return coll.head(0)
    found = odd.select(
        "line_no",
        pl.lit("MISMATCH").alias("code"),
        pl.format("collective parameters differ across ranks at opCount {} [nranks={}]: this process {}, {} other "
                  "processes {}", "opc", "cnr", pl.col("_sig").str.replace(r"^(\S+) (\S+) (\S+) (\S+) (\S+)$",
                                                                          "$1 count $2 datatype $3 op $4 root $5"),
                  "_ncommon", pl.col("_common").str.replace(r"^(\S+) (\S+) (\S+) (\S+) (\S+)$",
                                                             "$1 count $2 datatype $3 op $4 root $5")).alias("message"),
        pl.col("grank").cast(pl.Int64, strict=False).alias("prefix_rank"),
    )
    base = coll.drop([c for c in ("code", "message", "prefix_rank", "body") if c in coll.columns])
    return base.join(found, on="line_no", how="inner").with_columns(
        pl.lit("nccl_coll").alias("kind"), pl.lit("error").alias("severity"), pl.col("message").alias("body"))


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    warnings: list[str] = []
    cand = lines.filter(pl.col("body").str.contains(ascii_classes(_TRIGGER)))
    if cand.is_empty():
        return Extraction(empty_events())
    if cand["body"].str.contains(ascii_classes(GLUED_RE)).any():
        cand = cand.with_columns(
            pl.col("body").str.replace_all(ascii_classes(GLUED_RE), "\n${1}").str.split("\n")).explode("body")
    # Plain INFO/TRACE/CALL chatter: a cheap prefix check, no capture groups (the hot path).
    cand = cand.with_columns(chatter(pl.col("body")).alias("_boring"))
    ignored_nos = cand.filter(pl.col("_boring"))["line_no"]
    cand = cand.filter(~pl.col("_boring"))
    g = pl.col("body").str.extract_groups(ascii_classes(PREFIX_RE))
    cand = cand.with_columns(g.alias("_g")).unnest("_g").with_columns(
        pl.col("pid").cast(pl.Int64, strict=False), pl.col("dev").cast(pl.Int64, strict=False).alias("gpu"),
        pl.col("msg").fill_null(""),
    )
    pref = cand.filter(pl.col("level").is_not_null())
    bare = cand.filter(pl.col("level").is_null())

    level = pl.col("level")
    msg = pl.col("msg")
    is_info = level == "INFO"
    c_version = msg.str.contains(ascii_classes(VERSION_RE))
    c_comm = is_info & msg.str.contains(" - ", literal=True) & msg.str.contains(
        r" - (?:Init START|Init COMPLETE|Abort START|Abort COMPLETE|Destroy COMPLETE)")
    c_iface = is_info & msg.str.contains("Using", literal=True) & msg.str.contains("<", literal=True) & \
        msg.str.contains(r"Bootstrap ?: Using|OOB|NET/Socket ?: Using")
    c_trace = is_info & msg.str.contains(" -> ", literal=True) & msg.str.contains(ascii_classes(ERRTRACE_RE))
    c_svc = is_info & msg.str.contains("Connection closed by localRank", literal=True)
    c_coll = is_info & msg.str.contains(": opCount ", literal=True) & msg.str.contains(ascii_classes(COLL_RE))
    pref = pref.with_columns(
        pl.when(level == "WARN").then(pl.lit("warn"))
        .when(c_version).then(pl.lit("version"))
        .when(c_comm).then(pl.lit("comm"))
        .when(c_iface).then(pl.lit("iface"))
        .when(c_trace).then(pl.lit("trace"))
        .when(c_svc).then(pl.lit("svc"))
        .when(c_coll).then(pl.lit("coll"))
        .otherwise(pl.lit("ignored")).alias("_cls")
    )
    ignored_nos = pl.concat([ignored_nos, pref.filter(pl.col("_cls") == "ignored")["line_no"]])
    interesting = pref.filter(pl.col("_cls") != "ignored")

    # prefix-less WARN lines: the same WARN path as prefixed ones, host / pid / dev null
    bare_warn = bare.filter(pl.col("body").str.contains("NCCL WARN", literal=True))
    bare = bare.filter(~pl.col("body").str.contains("NCCL WARN", literal=True))
    bw = pl.col("body").str.extract_groups(ascii_classes(BARE_WARN_RE))
    bare_warn = bare_warn.with_columns(bw.alias("_bw")).unnest("_bw").filter(pl.col("bmsg").is_not_null())
    bare_warn = bare_warn.with_columns(
        pl.lit("WARN").alias("level"), pl.col("bnts").alias("nts"), pl.col("bfile").alias("file"),
        pl.col("bfline").alias("fline"), pl.col("bfunc").alias("func"), pl.col("bmsg").alias("msg"),
        pl.lit("warn").alias("_cls"),
    ).drop("bnts", "bfile", "bfline", "bfunc", "bmsg")
    interesting = pl.concat([interesting, bare_warn], how="diagonal_relaxed")

    bodyc = pl.col("body")
    bare = bare.with_columns(
        pl.when(bodyc.str.contains(ascii_classes(VERSION_RE))).then(pl.lit("version"))
        .when(bodyc.str.contains(ascii_classes(BARE_RE))).then(pl.lit("bare"))
        .when(bodyc.str.contains(r"^\s*(?:Job summary\s*$|Communicators\.\.\.)")).then(pl.lit("ras"))
        .otherwise(None).alias("_cls"),
        bodyc.alias("msg"),
    ).filter(pl.col("_cls").is_not_null())

    work = pl.concat([interesting, bare], how="diagonal_relaxed").sort("line_no")
    work = _ts(work, ctx)

    ev_parts: list[pl.DataFrame] = []
    claimed_parts: list[pl.Series] = []
    tables: dict[str, pl.DataFrame] = {}

    # --- RAS reports (their header is a bare `NCCL version X compiled with CUDA` line)
    ras_anchor = work.filter(
        (pl.col("level").is_null())
        & ((pl.col("_cls") == "ras") | pl.col("body").str.contains(r"^\s*NCCL version \S+ compiled with CUDA")))
    ras_claimed: list[int] = []
    if not ras_anchor.is_empty():
        ras_events, ras_claimed = _parse_ras(lines, ras_anchor["line_no"].to_list(), ctx)
        if ras_events:
            ras_df = pl.DataFrame(ras_events, schema={
                "line_no": pl.Int64, "severity": pl.Utf8, "code": pl.Utf8, "message": pl.Utf8,
                "ras_rank": pl.Int64, "ras_gpu": pl.Int64, "ras_host": pl.Utf8,
            }).with_columns(pl.lit("nccl_ras").alias("kind")).join(
                lines.select("line_no", pl.col("body").alias("_body"), "prefix_rank", "prefix_ts"), on="line_no",
                how="left",
            ).with_columns(
                pl.lit(None, dtype=pl.Utf8).alias("nts"),
                # a STUCK event's message is its summary; the others quote their line
                pl.when(pl.col("code") == "STUCK").then(pl.col("message")).otherwise(pl.col("_body")).alias("body"),
                pl.coalesce("ras_rank", "prefix_rank").alias("prefix_rank"),
                pl.col("ras_gpu").alias("gpu"), pl.col("ras_host").alias("host"),
            ).drop("ras_rank", "ras_gpu", "ras_host", "_body")
            ev_parts.append(_ts(ras_df, ctx))
        claimed_parts.append(pl.Series("line_no", ras_claimed, dtype=pl.Int64))
    work = work.filter(pl.col("_cls") != "ras")

    # --- version banner
    ver = work.filter(pl.col("_cls") == "version").with_columns(
        pl.col("msg").str.extract(ascii_classes(VERSION_RE), 1).alias("code"),
        pl.lit("nccl_version").alias("kind"), pl.lit("info").alias("severity"))
    ev_parts.append(ver)

    # --- communicator lifecycle
    comm = work.filter(pl.col("_cls") == "comm")
    cg = pl.col("msg").str.extract_groups(ascii_classes(INIT_RE))
    comm = comm.with_columns(cg.alias("_c")).unnest("_c").filter(pl.col("ev").is_not_null())
    comm = comm.with_columns(
        pl.col("crank").cast(pl.Int64, strict=False), pl.col("nranks").cast(pl.Int64, strict=False),
        pl.col("cdev").cast(pl.Int64, strict=False).alias("cuda_dev"), pl.col("nvml").cast(pl.Int64, strict=False).alias("nvml_dev"),
        pl.col("bus").alias("bus_id"), nccl_busid_to_pci(pl.col("bus")).alias("pci_bus_id"),
        pl.col("rest").str.extract(r"commId (0x[0-9a-fA-F]+)", 1).alias("comm_id"),
        pl.col("ev").replace_strict({
            "Init START": "init_start", "Init COMPLETE": "init_complete", "Abort START": "abort_start",
            "Abort COMPLETE": "abort", "Destroy COMPLETE": "destroy"}, default=None).alias("event"),
        pl.col("comm").alias("comm_ptr"),
    )
    # rank of a process = its rank in the largest communicator it initialised
    rank_map = (
        comm.filter(pl.col("event").is_in(["init_start", "init_complete"]))
        .sort(["nranks", "line_no"], descending=[True, False])
        .group_by(["host", "pid", *file_keys(ctx)], maintain_order=True).first()
        .select("host", "pid", *file_keys(ctx), pl.col("crank").alias("_map_rank"))
    )
    tables["nccl_comms"] = table_frame("nccl_comms", comm.with_columns(pl.col("crank").alias("rank")))
    claimed_parts.append(comm["line_no"])
    ev_parts.append(comm.filter(pl.col("event") == "init_complete").with_columns(
        pl.lit("nccl_init").alias("kind"), pl.lit("info").alias("severity"),
        pl.coalesce(pl.col("comm_id"), pl.col("comm_ptr")).alias("code")))
    ev_parts.append(comm.filter(pl.col("event") == "abort").with_columns(
        pl.lit("nccl_abort").alias("kind"), pl.lit("warning").alias("severity"),
        pl.col("comm_ptr").alias("code")))

    # --- interfaces
    iface = work.filter(pl.col("_cls") == "iface").with_columns(
        pl.col("msg").str.extract(ascii_classes(IFACE_RE), 2).alias("code"),
        pl.lit("nccl_iface").alias("kind"), pl.lit("info").alias("severity"),
    )
    ev_parts.append(iface)

    # --- service-thread connection loss (INFO)
    ev_parts.append(work.filter(pl.col("_cls") == "svc").with_columns(
        pl.lit("nccl_socket_error").alias("kind"), pl.lit("warning").alias("severity"),
        pl.lit("local_rank_closed").alias("code")))

    # --- COLL trace: the call that differs from every other process's at one opCount (COLL_RE)
    coll = work.filter(pl.col("_cls") == "coll")
    claimed_parts.append(coll["line_no"])
    mism = _coll_mismatches(coll)
    if not mism.is_empty():
        ev_parts.append(mism)

    # --- WARN lines and bare error texts
    errs = work.filter(pl.col("_cls").is_in(["warn", "bare"]))
    m = pl.col("msg")
    errs = errs.with_columns(
        pl.when(m.str.contains(ascii_classes(ABORT_TEST))).then(pl.lit("nccl_abort"))
        .when(m.str.contains(ascii_classes(CUDA_TEST))).then(pl.lit("nccl_cuda_error"))
        .when(m.str.contains(r"NET/Socket ?: peer .* message truncated")).then(pl.lit("nccl_socket_error"))
        .when(m.str.contains(ascii_classes(IB_TEST))).then(pl.lit("nccl_ib_error"))
        .when(m.str.contains(ascii_classes(SOCKET_TEST))).then(pl.lit("nccl_socket_error"))
        .otherwise(pl.lit("nccl_warn")).alias("kind"),
        m.str.extract(ascii_classes(r"with (?:error |status=)(?:\w+\()?(\d+)"), 1).cast(pl.Int64, strict=False).alias("_st_ib"),
        m.str.extract(ascii_classes(r"RC: (\d+)"), 1).cast(pl.Int64, strict=False).alias("_st_ofi"),
        m.str.extract(ascii_classes(r"vendor[ _]err[ =]?(\d+)"), 1).cast(pl.Int64, strict=False).alias("_ve_ib"),
        m.str.extract(ascii_classes(r"Error: (\d+) \("), 1).cast(pl.Int64, strict=False).alias("_ve_ofi"),
        m.str.extract_groups(ascii_classes(r"(?:peer|remote peer|from|to|Connect to) (?P<peer_ip>[^\s<>]+)<(?P<peer_port>\d+)>"))
        .alias("_p"),
        pl.coalesce(m.str.extract(ascii_classes(r"\bhca (\S+)"), 1),
                    m.str.extract(ascii_classes(r"NET/IB ?: ?(\w+):\d+ (?:Got non-fatal )?async"), 1)).alias("hca"),
        m.str.extract(ascii_classes(r"\bres=(\d+)"), 1).cast(pl.Int64, strict=False).alias("_res_warn"),
    ).unnest("_p").with_columns(
        pl.coalesce("_st_ib", "_st_ofi").alias("status"),
        pl.coalesce("_ve_ib", "_ve_ofi").alias("vendor_err"),
        pl.col("peer_port").cast(pl.Int64, strict=False),
    )
    sock_code = (
        pl.when(m.str.contains("Connection closed", literal=True)).then(pl.lit("connection_closed"))
        .when(m.str.contains("Connection reset", literal=True)).then(pl.lit("connection_reset"))
        .when(m.str.contains("Connection refused", literal=True)).then(pl.lit("connection_refused"))
        .when(m.str.contains("timed out", literal=True)).then(pl.lit("connection_timed_out"))
        .when(m.str.contains("Broken pipe", literal=True)).then(pl.lit("broken_pipe"))
        .when(m.str.contains("message truncated", literal=True)).then(pl.lit("message_truncated"))
        .when(m.str.contains("Service thread", literal=True)).then(pl.lit("service_thread"))
        .when(m.str.contains("Proxy Call", literal=True)).then(pl.lit("proxy_call_failed"))
        .when(m.str.contains("no socket interface|no interface found")).then(pl.lit("no_interface"))
        .when(m.str.contains("Address already in use", literal=True)).then(pl.lit("address_in_use"))
        .otherwise(m.str.extract(ascii_classes(r"(?:failed|error)\s*:?\s*([A-Za-z][\w ]+)$"), 1))
    )
    ib_code = pl.coalesce(
        pl.col("status").cast(pl.Utf8),
        # `async fatal event on QP (%p)[ qpn=.. rq_psn=..]: %s`, `... on CQ (%p) handle=.. cqe=..: %s`, `... on SRQ,
        # unused for now (%p): %s` (src/transport/net_ib/common.cc:126-150 at NCCL master): the event string
        m.str.extract(ascii_classes(r"async (?:fatal )?event(?: on (?:QP|CQ|SRQ)\b[^:]*)? ?: ?(.+?)\s*(?:\(\d+\))?$"), 1),
        m.str.extract(ascii_classes(r"Call to (ibv_\w+)"), 1),
    )
    cuda_code = pl.coalesce(
        # the cudaGetErrorString text: `Cuda failure 'x'` (checks.h), `Cuda failure 1 'x'` (cudawrap.h),
        # `... CUDA error 401 'x'` (nvls.cc)
        m.str.extract(ascii_classes(r"(?:Cuda failure|CUDA error|HIP failure) (?:\d+ )?'([^']+)'"), 1),
        m.str.extract(ascii_classes(r"Cuda failure (\d+)"), 1),
        pl.when(m.str.contains("Failed to CUDA", literal=True)).then(pl.lit("cuda_alloc_failed")),
    )
    errs = errs.with_columns(
        pl.when(pl.col("kind") == "nccl_ib_error").then(ib_code)
        .when(pl.col("kind") == "nccl_socket_error").then(sock_code)
        .when(pl.col("kind") == "nccl_cuda_error").then(cuda_code)
        .otherwise(pl.col("_res_warn").cast(pl.Utf8)).alias("code"),
        pl.when(pl.col("kind") == "nccl_warn").then(pl.lit("warning"))
        .when(m.str.contains("non-fatal", literal=True)).then(pl.lit("warning"))
        .when(m.str.contains(r"(?i)catastrophic|fatal")).then(pl.lit("critical"))
        .otherwise(pl.lit("error")).alias("severity"),
    )

    # --- error propagation lines `file:line -> N`: fold into the preceding WARN of that host:pid
    trace = work.filter(pl.col("_cls") == "trace").select(
        "line_no", "host", "pid", *file_keys(ctx), pl.col("msg").str.extract(ascii_classes(ERRTRACE_RE), 1).cast(pl.Int64, strict=False).alias("_res"))
    warn_keys = errs.filter(pl.col("host").is_not_null()).select(
        "host", "pid", *file_keys(ctx), pl.col("line_no").alias("_warn_line"), pl.col("line_no").alias("_wl"))
    if not trace.is_empty() and not warn_keys.is_empty():
        joined = trace.sort("line_no").join_asof(
            warn_keys.sort("_wl"), left_on="line_no", right_on="_wl", by=["host", "pid", *file_keys(ctx)],
            strategy="backward", tolerance=500, check_sortedness=False)
    else:
        joined = trace.with_columns(pl.lit(None, dtype=pl.Int64).alias("_warn_line"))
    folded = joined.filter(pl.col("_warn_line").is_not_null())
    claimed_parts.append(folded["line_no"])
    ignored_nos = pl.concat([ignored_nos, joined.filter(pl.col("_warn_line").is_null())["line_no"]])
    first_res = folded.sort("line_no").group_by("_warn_line").first().select(
        pl.col("_warn_line").alias("line_no"), "_res")
    errs = errs.join(first_res, on="line_no", how="left").with_columns(
        pl.coalesce("_res", "_res_warn").alias("result"))
    ev_parts.append(errs)

    events = pl.concat([p for p in ev_parts if not p.is_empty()] or [empty_events()], how="diagonal_relaxed")
    if not events.is_empty():
        for c, dt in (("host", pl.Utf8), ("pid", pl.Int64), ("prefix_rank", pl.Int64), ("gpu", pl.Int64),
                      ("body", pl.Utf8), ("message", pl.Utf8), ("ts_quality", pl.Utf8)):
            if c not in events.columns:
                events = events.with_columns(pl.lit(None, dtype=dt).alias(c))
        events = events.join(rank_map, on=["host", "pid", *file_keys(ctx)], how="left").with_columns(
            pl.coalesce(pl.col("body"), pl.col("message")).alias("message"),
            pl.coalesce(pl.col("host"), host_hint(ctx)).alias("host"),
            pl.coalesce(pl.col("prefix_rank"), pl.col("_map_rank"), rank_hint(ctx)).alias("rank"),
            pl.lit(SPEC.name).alias("source"),
            pl.col("ts_quality").fill_null("missing"),
        )
    events = events_frame(events).sort("line_no", maintain_order=True)

    tables["nccl_errors"] = table_frame("nccl_errors", errs.with_columns(
        pl.col("msg").alias("text")))

    claimed_parts.append(events["line_no"])
    claimed = pl.concat(claimed_parts).unique().sort()
    # the blank line NCCL prints before every WARN
    warn_lines = errs.filter(pl.col("level") == "WARN")["line_no"]
    if not warn_lines.is_empty():
        prev = lines.filter(pl.col("line_no").is_in((warn_lines - 1).implode())
                            & (pl.col("body").str.strip_chars() == ""))["line_no"]
        ignored_nos = pl.concat([ignored_nos, prev])
    ignored = ignored_nos.unique().sort()
    ignored = ignored.filter(~ignored.is_in(claimed.implode()))
    return Extraction(events=events, tables=tables, claimed=claimed.rename("line_no"),
                      ignored=ignored.rename("line_no"), warnings=warnings)


SPEC = ParserSpec(
    name="nccl",
    scope="process",
    description="NCCL debug log: version, communicator init/abort, IB/socket/CUDA WARNs, RAS reports",
    formats=("nccl_log", "nccl_ras"),
    kinds=("nccl_version", "nccl_init", "nccl_abort", "nccl_warn", "nccl_ib_error", "nccl_socket_error",
           "nccl_cuda_error", "nccl_ras", "nccl_iface", "nccl_coll"),
    tables=("nccl_comms", "nccl_errors"),
    batch=True,
    trigger=_TRIGGER,
    roles=("collectives",),
    evidence="NCCL debug output",
)

"""PyTorch distributed (ProcessGroupNCCL) and Python failure output.

Reference: `../shared/reference/pytorch_dist.md` §1-4. Reads the watchdog timeout of every era
(`[E ProcessGroupNCCL.cpp:N]`, `[rankN]:[E ...]`, glog `[E1218 20:27:21.426415540 file:line]`),
the watchdog status lines, heartbeat monitor, desync report, NCCL errors surfacing in PyTorch, CUDA
errors, OOM, segfaults, NaN and Python tracebacks (grouped per rank when ranks interleave).

Events: watchdog_timeout, watchdog_status (code = work seq, `victim`, `dump`, or `lagging:<ranks>`
for desync reports), heartbeat_timeout, dist_error (code = ncclResult name), cuda_error, ecc_error,
oom, exception (code = exception type), segfault, nan.
Table: collective_timeouts (one row per timeout line and per status line).
Claimed without an event: companion lines (`Some NCCL operations have failed...`, `To avoid data
inconsistency...`, dump/FlightRecorder lines, `terminate called...`, `what():` and `Exception raised
from ...` / `frame #N:` C++ stacks, desync report detail, CUDA error hints), traceback frames.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

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
from parsers.timestamps import iso, mmdd_time

NAME = "pytorch"
EXCLUSIVE = False
BATCH = True  # many files' lines may be parsed in one frame (hints and per-file state as columns)
DESCRIPTION = "PyTorch distributed: NCCL watchdog timeouts/status, heartbeat, NCCL/CUDA errors, OOM, tracebacks"
FORMATS = ("pytorch_log", "python_traceback")
EXTRACTS = ("watchdog_timeout", "watchdog_status", "heartbeat_timeout", "dist_error", "cuda_error",
            "ecc_error", "oom", "exception", "segfault", "nan", "collective_timeouts")

ANCHORS = (
    r"ProcessGroupNCCL|[Ww]atchdog|WorkNCCL|NCCL error|NCCL operations|NCCL work|NCCLPG|TORCH_NCCL|Traceback|File \"|Error|error|Exception|CUDA|cuda"
    r"|terminate called|what\(\)|frame #|Segmentation fault|Caught signal|NaN|nan|Heartbeat|heartbeat"
    r"|lagging|collective|ranks|started |finished |CUBLAS|CUDNN|ECC|FlightRecorder|dump|During handling"
    r"|The above exception|Last error"
)

GLOG_RE = r"^\[(?:[IWEF](?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?) (?:\d+ )?|[IWEF] )[^\s\]]+:\d+\] "
PG_TAG_RE = (r"\[(?:PG (?:ID )?(?P<pg>\d+) (?:PG GUID (?P<guid>[^\]]*?) |\((?P<pgdesc>[^)]*)\) )?)?"
             r"Rank (?P<tag_rank>\d+)\]")
WORK_RE = r"WorkNCCL\((?P<kv>(?:[^()]|\([^()]*\))*)\)"

TIMEOUT_MAIN = "Watchdog caught collective operation timeout"
STATUS_SEQ = r"(?:Timeout at NCCL work|detected by watchdog at work|work sequence id): (-?\d+)"
STATUS_ENQ = r"[Ll]ast enqueued (?:NCCL )?work: (-?\d+)"
STATUS_COMP = r"[Ll]ast completed (?:NCCL )?work: (-?\d+)"
VICTIM = r"Received a global timeout from another rank|detected a collective timeout and notified current rank"
HEARTBEAT = r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds"
DESYNC = (
    r"Timeout at collective: |lagging/dead/mismatched ranks|joined but didn't finish collective"
    r"|finished collective #\d+, but didn't join|Snapshot of ranks' latest states|#\d+ (?:started|finished) ranks:"
    r"|^\s*(?:- )?\[[\d, .]+\] (?:started|finished) \w+|are the lagging ranks|Failed to retrieve TORCH_NCCL_DESYNC_DEBUG"
)
LAGGING = (r"\[([\d, .]+)\] joined but didn't finish|\[([\d, .]+)\] finished collective #\d+, but didn't join"
           r"|ranks \[([\d, .]+)\] are the lagging")
NCCL_ERR = r"NCCL error in: |NCCL error: "
NCCL_DETAIL = r"^\s*(?P<res>ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidArgument|ncclInvalidUsage|ncclRemoteError|ncclInProgress|ncclTimeout): "
RESULT_BY_TEXT = [
    ("remote process exited or there was a network error", "ncclRemoteError"),
    ("unhandled system error", "ncclSystemError"),
    ("unhandled cuda error", "ncclUnhandledCudaError"),
    ("internal error", "ncclInternalError"),
    ("invalid argument", "ncclInvalidArgument"),
    ("invalid usage", "ncclInvalidUsage"),
    ("NCCL operation in progress", "ncclInProgress"),
    ("timeout", "ncclTimeout"),
]
CUDA_ERR = r"CUDA error: |cuda runtime error \(\d+\)|CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+|uncorrectable ECC error"
SEGFAULT = r"Segmentation fault|Caught signal 11\b"
NAN = r"found NaN in local forward loss|Unexpected result nan|(?i:loss is nan\b)"
COMPANION = (
    r"Some NCCL operations have failed or timed out|To avoid data inconsistency|To avoid this inconsistency"
    r"|preparing to dump debug info|Finished writing NCCLPG debug info|First PG on this rank"
    r"|Stack trace of the failed collective|FlightRecorder|terminate called|what\(\):"
    r"|Exception raised from .*\(most recent call first\)|^\s*frame #\d+: |watchdog thread terminated with exception"
    r"|CUDA kernel errors might be asynchronously reported|For debugging consider passing CUDA_LAUNCH_BLOCKING"
    r"|Compile with .TORCH_USE_CUDA_DSA|^\s*Last error:\s*$|During handling of the above exception"
    r"|The above exception was the direct cause"
)
EXC_LINE = r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?::.*)?$"
TB_HEADER = "Traceback (most recent call last):"


def sniff(head: str) -> float:
    if "ProcessGroupNCCL" in head or "WorkNCCL(" in head:
        return 0.9
    if TB_HEADER in head or re.search(r"CUDA error: |CUDA out of memory|NCCL error", head):
        return 0.6
    return 0.0


def _prep(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """msg (body without a `[rankN]:` left in it and the space after `[rankN]: `), stream, rank."""
    rb = pl.col("body").str.extract(r"^\s*\[rank(\d+)\]:", 1).cast(pl.Int64, strict=False)
    spaced = pl.col("text").str.contains(r"\[rank\d+\]: ", literal=False)
    msg = pl.col("body").str.replace(r"^\s*\[rank\d+\]:", "")
    msg = pl.when(spaced & msg.str.starts_with(" ")).then(msg.str.slice(1)).otherwise(msg)
    out = df.with_columns(rb.alias("_rb"), msg.alias("msg"))
    r = pl.coalesce(pl.col("prefix_rank"), pl.col("_rb"))
    stream = (pl.when(r.is_not_null()).then(r)
              .when(pl.col("prefix_local_rank").is_not_null()).then(1_000_000 + pl.col("prefix_local_rank"))
              .when(pl.col("prefix_task").is_not_null()).then(2_000_000 + pl.col("prefix_task"))
              .otherwise(-1))
    if ctx.batched:  # the streams of different files never join
        stream = stream + pl.col("hint_file") * 100_000_000
    return out.with_columns(stream.alias("stream"))


def _common(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """ts, host, rank, pg columns for candidate lines."""
    g = pl.col("msg").str.extract_groups(GLOG_RE)
    tag = pl.col("msg").str.extract_groups(PG_TAG_RE)
    df = df.with_columns(g.alias("_g"), tag.alias("_t")).unnest("_g", "_t")
    glog_ts = mmdd_time(pl.col("mmdd"), pl.col("hms"), ctx.ref_year, ctx.tz)
    return df.with_columns(
        pl.coalesce(glog_ts, iso(pl.col("prefix_ts"), ctx.tz)).alias("ts"),
        pl.coalesce(pl.concat_str([pl.col("mmdd"), pl.col("hms")], separator=" "), pl.col("prefix_ts"))
        .alias("ts_raw"),
        pl.coalesce(pl.col("prefix_rank"), pl.col("_rb"), pl.col("tag_rank").cast(pl.Int64, strict=False),
                    rank_hint(ctx)).alias("rank"),
        pl.col("prefix_local_rank").alias("local_rank"),
        line_host(ctx).alias("host"),
        pl.col("body").alias("message"),
        pl.coalesce(pl.col("pg"), pl.col("guid")).alias("pg"),
    ).with_columns(
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality")
    )


def _kv(name: str) -> pl.Expr:
    return pl.col("_kv").str.extract(rf"(?:^|, ){re.escape(name)}=([^,]+)", 1).str.strip_chars()


def _tracebacks(lines: pl.DataFrame, cand: pl.DataFrame, ctx: ParseContext
                ) -> tuple[list[int], list[tuple[int, str]]]:
    """Claimed line numbers of tracebacks and (final_line_no, exception type) per traceback."""
    starts = cand.filter(pl.col("msg").str.contains(TB_HEADER, literal=True)
                         | pl.col("msg").str.contains(r'^\s+File "'))
    if starts.is_empty():
        return [], []
    streams = starts["stream"].unique()
    full = _prep(lines, ctx).filter(pl.col("stream").is_in(streams.implode())).sort(["stream", "line_no"])
    m = pl.col("msg")
    full = full.select(
        "line_no", "stream", "msg",
        m.str.contains(TB_HEADER, literal=True).alias("hdr"),
        m.str.contains(r"^\s+\S").alias("ind"),
        m.str.contains(r'^\s+File "').alias("fil"),
        m.str.contains(EXC_LINE).alias("exc"),
    )
    nos = full["line_no"].to_numpy()
    st = full["stream"].to_numpy()
    hdr = full["hdr"].to_numpy()
    ind = full["ind"].to_numpy()
    fil = full["fil"].to_numpy()
    exc = full["exc"].to_numpy()
    n = len(nos)
    same_prev = np.zeros(n, dtype=bool)
    if n > 1:
        same_prev[1:] = st[1:] == st[:-1]
    prev_tb = np.zeros(n, dtype=bool)
    prev_tb[1:] = (ind[:-1] | hdr[:-1]) & same_prev[1:]
    # a traceback starts at its header, or (excerpt cut mid-traceback, header lost to interleaving)
    # at the first line of an indented run that contains a `File "` frame line
    run_start = ind & ~prev_tb
    run_id = np.cumsum(run_start | ~ind)
    has_file = np.zeros(run_id.max() + 2 if n else 1, dtype=bool)
    has_file[run_id[fil & ind]] = True
    start_idx = np.flatnonzero(hdr | (run_start & has_file[run_id]))
    claimed: list[int] = []
    finals: list[tuple[int, str]] = []
    msgs = full["msg"]
    for i in start_idx:
        j = i + 1 if hdr[i] else i
        while j < n and st[j] == st[i] and ind[j] and not hdr[j]:
            j += 1
        claimed.extend(nos[i:j].tolist())
        if j < n and st[j] == st[i] and exc[j] and j > i + (1 if hdr[i] else 0) and not hdr[j]:
            text = msgs[int(j)].strip()
            finals.append((int(nos[j]), text.split(":", 1)[0].strip()))
            claimed.append(int(nos[j]))
    return claimed, finals


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    cand = lines.filter(pl.col("body").str.contains(ANCHORS))
    if cand.is_empty():
        return Extraction(empty_events())
    cand = _common(_prep(cand, ctx), ctx).sort("line_no")
    m = pl.col("msg")
    parts: list[pl.DataFrame] = []
    claimed: list[pl.Series] = []

    def add(df: pl.DataFrame, kind: str, severity: str, code: pl.Expr | None = None) -> None:
        if df.is_empty():
            return
        df = df.with_columns(pl.lit(kind).alias("kind"), pl.lit(severity).alias("severity"),
                             (code if code is not None else pl.lit(None, dtype=pl.Utf8)).cast(pl.Utf8).alias("code"))
        parts.append(df)
        claimed.append(df["line_no"])

    # --- watchdog timeout main lines
    wrapped = m.str.contains("terminated with exception", literal=True) | m.str.contains("what():", literal=True)
    is_to = (m.str.contains(TIMEOUT_MAIN, literal=True) & ~wrapped) | (
        m.str.contains("timed out in blocking wait", literal=True) & m.str.contains("WorkNCCL", literal=True))
    to = cand.filter(is_to).with_columns(
        m.str.extract(WORK_RE, 1).alias("_kv"),
        m.str.extract(r"ran for (\d+) milliseconds", 1).cast(pl.Int64, strict=False).alias("ran_for_ms"),
    ).with_columns(
        _kv("SeqNum").cast(pl.Int64, strict=False).alias("seq"),
        _kv("OpType").alias("op_type"),
        _kv("NumelIn").cast(pl.Int64, strict=False).alias("numel_in"),
        _kv("NumelOut").cast(pl.Int64, strict=False).alias("numel_out"),
        _kv("Timeout(ms)").cast(pl.Int64, strict=False).alias("timeout_ms"),
    )
    add(to, "watchdog_timeout", "error", pl.col("seq"))

    # --- watchdog status lines
    is_status = m.str.contains(r"[Ll]ast enqueued", literal=False) & m.str.contains(STATUS_ENQ)
    st = cand.filter(is_status & ~is_to).with_columns(
        m.str.extract(STATUS_SEQ, 1).cast(pl.Int64, strict=False).alias("seq"),
        m.str.extract(STATUS_ENQ, 1).cast(pl.Int64, strict=False).alias("last_enqueued"),
        m.str.extract(STATUS_COMP, 1).cast(pl.Int64, strict=False).alias("last_completed"),
    )
    add(st, "watchdog_status", "error",
        pl.when(m.str.contains(VICTIM)).then(pl.lit("victim"))
        .when(pl.col("seq").is_not_null()).then(pl.col("seq").cast(pl.Utf8))
        .when(m.str.contains("dump signal", literal=True)).then(pl.lit("dump")))
    victim = cand.filter(m.str.contains(VICTIM) & ~is_status & ~is_to)
    add(victim, "watchdog_status", "warning", pl.lit("victim"))
    ct = pl.concat([to, st], how="diagonal_relaxed") if not st.is_empty() else to
    collective = table_frame("collective_timeouts", ct.sort("line_no")) if not ct.is_empty() \
        else empty_table("collective_timeouts")

    # --- heartbeat monitor
    hb = cand.filter(m.str.contains(HEARTBEAT))
    add(hb, "heartbeat_timeout", "error", m.str.extract(r"stuck for (\d+) seconds", 1))

    # --- desync report
    ds = cand.filter(m.str.contains(DESYNC))
    lag = ds.with_columns(
        pl.coalesce([m.str.extract(LAGGING, i) for i in (1, 2, 3)]).str.replace_all(r"\s", "").alias("_lag")
    )
    add(lag.filter(pl.col("_lag").is_not_null()), "watchdog_status", "error",
        pl.concat_str([pl.lit("lagging:"), pl.col("_lag")]))
    claimed.append(ds["line_no"])

    # --- NCCL errors through PyTorch
    res_expr = pl.lit(None, dtype=pl.Utf8)
    for text, name in reversed(RESULT_BY_TEXT):
        res_expr = pl.when(m.str.contains(text, literal=True)).then(pl.lit(name)).otherwise(res_expr)
    cand = cand.with_columns(
        m.str.contains(NCCL_ERR).alias("_nerr"),
        m.str.extract(NCCL_DETAIL, 1).alias("_detail"),
    ).with_columns(
        pl.when(pl.col("_nerr")).then(res_expr).otherwise(pl.col("_detail")).alias("_res"),
    ).with_columns(
        (pl.col("_nerr") | pl.col("_detail").is_not_null()).shift(1).over("stream").fill_null(False)
        .alias("_prev_err"),
    )
    derr = cand.filter(pl.col("_nerr") | (pl.col("_detail").is_not_null() & ~pl.col("_prev_err")))
    add(derr, "dist_error", "error", pl.col("_res"))
    claimed.append(cand.filter(pl.col("_detail").is_not_null())["line_no"])
    # `Last error:` + the next line of the same stream (the last NCCL WARN text)
    last = cand.filter(m.str.contains(r"^\s*Last error:\s*$"))
    if not last.is_empty():
        errs_so_far = cand.filter(pl.col("_res").is_not_null()).select("line_no", "stream", "_res")
        nxt_rows = []
        for ln, stream in last.select("line_no", "stream").iter_rows():
            win = _prep(lines.filter(pl.col("line_no").is_between(ln + 1, ln + 64)), ctx)
            win = win.filter(pl.col("stream") == stream).head(1)
            if not win.is_empty():
                nxt_rows.append(win)
        if nxt_rows:
            nxt = _common(pl.concat(nxt_rows), ctx).sort("line_no")
            nxt = nxt.join_asof(errs_so_far.sort("line_no").rename({"line_no": "_el"}), left_on="line_no",
                                right_on="_el", by="stream", strategy="backward", check_sortedness=False)
            add(nxt, "dist_error", "error", pl.col("_res"))
        claimed.append(last["line_no"])

    # --- CUDA errors, ECC, OOM, segfault, NaN
    cu = cand.filter(m.str.contains(CUDA_ERR))
    cuda_code = pl.coalesce(
        m.str.extract(r"(CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+)", 1),
        m.str.extract(r"CUDA error: ([^.\n]+?)\.?\s*$", 1),
        m.str.extract(r"CUDA error: ([^.]+)", 1),
        m.str.extract(r"cuda runtime error \((\d+)\)", 1),
        m.str.extract(r"(CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+)", 1),
        m.str.extract(r"(uncorrectable ECC error encountered)", 1),
    ).str.strip_chars()
    is_ecc = m.str.contains("ECC error", literal=True)
    add(cu.filter(is_ecc), "ecc_error", "critical", cuda_code)
    add(cu.filter(~is_ecc), "cuda_error", "error", cuda_code)
    oom = cand.filter(m.str.contains("CUDA out of memory", literal=True)).with_columns(
        pl.coalesce(m.str.extract(r"GPU (\d+) has a total capacity", 1), m.str.extract(r"GPU (\d+);", 1))
        .cast(pl.Int64, strict=False).alias("gpu"))
    add(oom, "oom", "error", m.str.extract(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)", 1))
    add(cand.filter(m.str.contains(SEGFAULT)), "segfault", "critical", pl.lit("SIGSEGV"))
    add(cand.filter(m.str.contains(NAN)), "nan", "warning", pl.lit("nan"))

    claimed.append(cand.filter(m.str.contains(COMPANION) | (m.str.contains(TIMEOUT_MAIN, literal=True) & wrapped))
                   ["line_no"])

    # --- Python tracebacks (a loop over the few traceback lines only)
    tb_claimed, finals = _tracebacks(lines, cand, ctx)
    if finals:
        fin = pl.DataFrame(finals, schema={"line_no": pl.Int64, "_exc": pl.Utf8}, orient="row")
        ex = _common(_prep(lines.join(fin, on="line_no", how="semi"), ctx), ctx).join(fin, on="line_no")
        add(ex, "exception", "error", pl.col("_exc"))
    claimed.append(pl.Series("line_no", tb_claimed, dtype=pl.Int64))

    events = pl.concat(parts, how="diagonal_relaxed") if parts else empty_events()
    events = events_frame(events.with_columns(pl.lit(NAME).alias("source"))) if parts else events
    events = events.sort("line_no", maintain_order=True)
    all_claimed = pl.concat([c.cast(pl.Int64, strict=False).rename("line_no") for c in claimed]).unique().sort()
    return Extraction(events=events, tables={"collective_timeouts": collective}, claimed=all_claimed)

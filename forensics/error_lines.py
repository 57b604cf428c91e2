"""`error_line` events: lines that look like errors and that no parser claimed (issue 14, item 8).

Ingest keeps each file's unparsed error-like lines (`ingest.ERRORISH`, at most
`ingest.MAX_KEPT_ERRORS` per file; all of them are counted in the coverage table). Here they
become events of source `generic`, kind `error_line`, so that the signatures (a signature of
source `generic`, or `any`) and attribution see them: a real log's key line is often printed by
an emitter no parser knows, or arrives without the header its parser keys on.

A pure stage over frames: unparsed lines (file_id, line_no, text) and the files' host / rank hints
in, events (EVENT_SCHEMA + file_id, path) out. The time is the line's own stamp (`exact`), else
the nearest stamped event of the same file (earlier first, then later; `derived`), else null
(`missing`). Launcher prefixes are peeled as for every parser (`parsers.lines.with_body`): the
message is the body.
"""

from __future__ import annotations

import polars as pl

from forensics.accounting import ERRORISH
from parsers import timestamps as ts
from parsers.ascii_regex import ascii_classes
from parsers.lines import with_body
from parsers.records import EVENT_SCHEMA

SOURCE = "generic"
KIND = "error_line"
# wording that marks a line as an error rather than a warning (the rest of ingest.ERRORISH:
# warn, timeout, killed, ... are kept as warnings; the signatures decide what they mean)
ERROR_WORDS = r"(?i)error|fail|fatal|exception|abort|panic|\bkilled\b|traceback|segmentation fault"
# ... unless the line states its emitter's own level, and that level is below error: its error words
# are then content, not a failure. Informational: NCCL's `NCCL INFO` / `NCCL TRACE` level word (a line
# posted without its `host:pid:tid` prefix, which the NCCL parser does not read: `NCCL INFO
# NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.`), glog `I` lines. Warning: a line that opens
# with a lower-case `warning: ` (gdb / cuda-gdb, which report an intercepted CUDA API error as
# `warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)` and let the call
# return; gcc, ld, nvcc) or Python's warnings module (`file.py:12: UserWarning: ...`).
# TensorFlow / XLA's own C++ logger (tsl/platform/default/logging.cc TFDefaultLogSink::Send: `"%s.%06d: %c%s
# %s:%d] %s"`, the local time `%Y-%m-%d %H:%M:%S`, the level letter of I W E F, a thread id (` %7u`) only with
# TF_CPP_LOG_THREAD_ID=1, then `file:line] `; JAX and TF print it alike) states its level the same way: an `I`
# line is informational whatever words its message holds (`port.cc:113] oneDNN custom operations are on. You
# may see slightly different numerical results due to floating-point round-off errors ...`), a `W` line is a
# warning (below); `E` and `F` keep their error words.
TSL_LEVEL = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}: {level}(?: +\d+)? [^\s\]]+:\d+\] "
INFO_LEVEL = r"\bNCCL (?:INFO|TRACE)\b|^\[?I\d{4} \d\d:\d\d:\d\d|" + TSL_LEVEL.replace("{level}", "I")
# ... and a count of zero failures is no failure: an error word that only labels a counter whose value
# is 0 (a JSON/YAML/logfmt key `"failed": 0`, `errors: 0`, `failures=0`, `error_count: 0`, `"error_code": 0`, a tally
# `0 errors` / `0 failed`), as burn tests, diagnostics' summaries (NVSentinel's preflight `Diagnostic
# summary`, gpu_burn's `errors: 0` progress lines) and test runners print on every healthy run. Such a
# line is `info`: kept, read by the signatures, but not a failure by itself and not sent to the line
# classifier. A line with any other error word (or a non-zero count) keeps its level. (The line classifier's
# `read_at_run_time` estimate cannot tell a zero from other counts: its text is normalised, digits to 0.)
ZERO_COUNT = (r"(?i)[\"']?\b(?:errors?|fail(?:ed|ures?|s)?|faults?|exceptions?|aborts?|fatals?)(?:[_ ]?(?:counts?|codes?))?[\"']?"
              r"\s*[:=]\s*[\"']?0+(?:\.0+)?(?:[\"',;\s)\]}]|$)|\b0+ (?:errors?|failures?|failed|faults?)\b")
WARNING_LEVEL = r"^\s*warning: |^\S+:\d+: [A-Z]\w*Warning:(?: |$)|" + TSL_LEVEL.replace("{level}", "W")
_ISO = r"(\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
_GLOG = r"^\[?[IWEF](\d{4}) (\d\d:\d\d:\d\d(?:\.\d+)?)\s"


def error_line_events(unparsed: pl.DataFrame, paths: dict[int, str], hosts: dict[int, str],
                      ranks: dict[int, int], events: pl.DataFrame, ref_year: int | None = None,
                      tz: object = None) -> pl.DataFrame:
    """One `error_line` event per kept unparsed error-like line. `events` (the parsers' events,
    with file_id) lend their times to lines that print no stamp of their own."""
    schema = {**EVENT_SCHEMA, "file_id": pl.Int32, "path": pl.Utf8}
    if unparsed.is_empty():
        return pl.DataFrame(schema=schema)
    lines = with_body(unparsed.select("file_id", "line_no", "text"))
    g = pl.col("body").str.extract_groups(ascii_classes(_GLOG))
    stamp = pl.coalesce(
        ts.iso(pl.col("body").str.extract(ascii_classes(_ISO), 1).str.replace("_", " "), tz),
        ts.mmdd_time(g.struct.field("1"), g.struct.field("2"), ref_year, tz),
        ts.iso(pl.col("prefix_ts").str.extract(ascii_classes(_ISO), 1), tz),  # a wrapper's stamp (docker, mpirun, ...)
    )
    fid = pl.col("file_id")
    ev = lines.with_columns(
        stamp.alias("ts"),
        pl.coalesce(pl.col("body").str.extract(ascii_classes(_ISO), 1), pl.col("prefix_ts")).alias("ts_raw"),
        pl.coalesce(pl.col("prefix_host"), fid.replace_strict(hosts, default=None, return_dtype=pl.Utf8)).alias("host"),
        pl.coalesce(pl.col("prefix_rank"), fid.replace_strict(ranks, default=None, return_dtype=pl.Int64)).alias("rank"),
        pl.col("prefix_local_rank").alias("local_rank"),
        fid.replace_strict(paths, default=None, return_dtype=pl.Utf8).alias("path"),
        pl.lit(SOURCE).alias("source"),
        pl.lit(KIND).alias("kind"),
        pl.when(pl.col("body").str.contains(ascii_classes(INFO_LEVEL))).then(pl.lit("info"))
        .when(pl.col("body").str.contains(ascii_classes(ZERO_COUNT))
              & ~pl.col("body").str.replace_all(ascii_classes(ZERO_COUNT), "").str.contains(ascii_classes(ERRORISH))).then(pl.lit("info"))
        .when(pl.col("body").str.contains(ascii_classes(WARNING_LEVEL))).then(pl.lit("warning"))
        .when(pl.col("body").str.contains(ascii_classes(ERROR_WORDS))).then(pl.lit("error")).otherwise(pl.lit("warning"))
        .alias("severity"),
        pl.col("body").str.strip_chars().alias("message"),
    )
    ev = ev.with_columns(pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(None).alias("ts_quality"))
    ev = _borrow_times(ev, events)
    for k, v in schema.items():
        if k not in ev.columns:
            ev = ev.with_columns(pl.lit(None, dtype=v).alias(k))
    return ev.select([pl.col(k).cast(v) for k, v in schema.items()]).sort("file_id", "line_no")


def _borrow_times(ev: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Unstamped lines take the time of the nearest stamped event of their file (earlier, else later)."""
    need = ev["ts"].is_null()
    if not need.any() or events.is_empty():
        return ev.with_columns(pl.col("ts_quality").fill_null("missing"))
    stamped = (events.filter(pl.col("ts").is_not_null() & (pl.col("ts_quality") != "relative").fill_null(True))
               .select(pl.col("file_id").cast(pl.Int32), "line_no", pl.col("ts").alias("_ts"))
               .sort("file_id", "line_no"))
    left = ev.with_columns(pl.col("file_id").cast(pl.Int32)).sort("file_id", "line_no")
    back = left.join_asof(stamped, on="line_no", by="file_id", strategy="backward", check_sortedness=False)
    fwd = left.select("file_id", "line_no").join_asof(stamped, on="line_no", by="file_id", strategy="forward", check_sortedness=False)
    borrowed = pl.coalesce(back["_ts"], fwd["_ts"])
    return back.drop("_ts").with_columns(
        pl.when(pl.col("ts").is_null() & borrowed.is_not_null()).then(pl.lit("derived"))
        .when(pl.col("ts").is_null()).then(pl.lit("missing")).otherwise(pl.col("ts_quality")).alias("ts_quality"),
        pl.coalesce(pl.col("ts"), borrowed).alias("ts"),
    )

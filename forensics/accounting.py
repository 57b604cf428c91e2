"""The per-file record of ingest (`FileResult`) and the helpers every read path uses to fill it:
the line span of a process log, the wrapper's host, the unparsed lines that look like errors, and
the check that a file did not change while it was read. Both the file-by-file path
(`forensics.ingest`) and the many-files path (`forensics.bulk`) import it; it imports neither.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from forensics.discovery import SourceFile
from parsers import timestamps as ts
from parsers.ascii_regex import ascii_classes
from parsers.lines import with_body
from parsers.records import EVENT_SCHEMA, ParseContext

SPAN_LINES = 2000
MAX_KEPT_ERRORS = 10_000  # error-like unparsed lines kept per file (all are counted)
MAX_ERROR_CHARS = 2000  # of each kept line
_ISO_ANY = r"(\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
_GLOG = r"^\[?[IWEF](\d{3,4}) (\d\d:\d\d:\d\d(?:\.\d+)?)\s"
# error-like words: any line of an unread file holding one is kept (never only counted). Beyond the
# generic words, the ones error strings carry without them: CUDA's cudaGetErrorString texts ("an
# illegal memory access was encountered", "unspecified launch failure"; signatures/cuda_errors.csv),
# the kernel's and libc's (segfault, "Segmentation fault", MMU/page faults, "core dumped", "Out of
# memory", strerror's ENOSPC / EACCES / ECONNREFUSED / ENETUNREACH / EINTR texts) and Python's traceback head
# ; RDMA completion errors (rdma-core ibv_wc_status_str `transport retry counter exceeded`, UCX's
# `Transport retry count exceeded`, ParaStation's `Infiniband returned the wrong Opcode`) and strerror's EPIPE
ERRORISH = (r"(?i)error|fail|fatal|exception|xid|warn|abort|timeout|timed out|killed|panic|interrupted system call"
            r"|illegal|\bfault|segfault|core dumped|out of memory|no space left|denied|refused|unreachable"
            r"|traceback|retry count(?:er)? exceeded|wrong opcode|broken pipe")


@dataclass
class FileResult:
    rel_path: str
    size: int
    digest: str | None  # of the file's bytes as stored (compressed files: of the compressed bytes)
    parser: str | None
    parsers: str | None
    lines: int = 0
    parsed: int = 0
    ignored: int = 0
    unparsed: int = 0
    events: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EVENT_SCHEMA))
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    unparsed_errors: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"line_no": pl.Int64, "text": pl.Utf8}))
    warnings: list[str] = field(default_factory=list)
    unparsed_error_lines: int = 0  # all error-like unparsed lines; `unparsed_errors` keeps MAX_KEPT_ERRORS
    spilled: dict[str, str] = field(default_factory=dict)  # table -> Parquet file holding it (see SPILL_ROWS)
    first_ts: datetime | None = None  # earliest / latest stamped line among the file's first and
    last_ts: datetime | None = None  # last SPAN_LINES lines (any stamp shape a process log prints)
    digest_algo: str | None = None  # 'blake3', or 'blake2b-256' where the blake3 package is missing


def line_span(lines: pl.DataFrame, ctx: ParseContext) -> tuple[datetime | None, datetime | None]:
    """Earliest and latest time stamp printed on the first / last SPAN_LINES lines: the span a
    process log covers (its first line may be a banner that no parser turns into an event)."""
    if lines.is_empty():
        return None, None
    part = pl.concat([lines.head(SPAN_LINES), lines.tail(SPAN_LINES)]).unique("line_no", maintain_order=True)
    if "body" not in part.columns:
        part = with_body(part)
    t = part.select(stamp_expr(ctx).alias("t"))["t"].drop_nulls()
    if t.is_empty():
        return None, None
    return t.min(), t.max()


def wrapper_hosts(lines: pl.DataFrame) -> pl.DataFrame:
    """line_no, prefix_host of the lines whose wrapper names a host (few or none in most files)."""
    return lines.filter(pl.col("prefix_host").is_not_null()).select("line_no", "prefix_host")


def fill_wrapper_host(events: pl.DataFrame, hosts: pl.DataFrame | None) -> pl.DataFrame:
    """Events whose parser left `host` null take the host their line's wrapper names (before the
    path's hint fills the rest): content first, then the wrapper, then the path."""
    if hosts is None or hosts.is_empty() or events.is_empty():
        return events
    return events.join(hosts, on="line_no", how="left", maintain_order="left").with_columns(
        pl.coalesce("host", "prefix_host").alias("host")).drop("prefix_host")


def stamp_expr(ctx: ParseContext) -> pl.Expr:
    """The time stamp a line prints, in any shape a process log uses (null when none)."""
    return stamp_of_fields(ctx, *stamp_fields())


# the pieces of a line its stamp is read from (text), by name: `stamp_expr` is `stamp_of_fields` of
# them, so a caller may read the pieces, drop repeats, and parse each distinct one once
def stamp_fields() -> list[pl.Expr]:
    """The stamp's pieces of each line (with `body`, `prefix_ts`): an ISO stamp, glog's MMDD and
    time, a wrapper's stamp; named _st_iso, _st_mmdd, _st_hms, _st_prefix."""
    g = pl.col("body").str.extract_groups(ascii_classes(_GLOG))
    return [pl.col("body").str.extract(ascii_classes(_ISO_ANY), 1).str.replace("_", " ").alias("_st_iso"),
            g.struct.field("1").alias("_st_mmdd"), g.struct.field("2").alias("_st_hms"),
            pl.col("prefix_ts").alias("_st_prefix")]


def stamp_of_fields(ctx: ParseContext, iso: pl.Expr, mmdd: pl.Expr, hms: pl.Expr, prefix: pl.Expr) -> pl.Expr:
    """The stamp from its pieces (`stamp_fields`)."""
    return pl.coalesce(
        ts.iso(iso, ctx.tz),
        ts.mmdd_time(mmdd, hms, ctx.ref_year, ctx.tz),
        ts.iso(prefix, ctx.tz),  # a wrapper's stamp (docker, mpirun, web-UI export)
    )


def keep_errors(res: FileResult, rest: pl.DataFrame) -> None:
    """Unparsed lines that look like errors: counted, and the first MAX_KEPT_ERRORS kept (memory)."""
    errs = rest.filter(pl.col("text").str.contains(ascii_classes(ERRORISH)))
    res.unparsed_error_lines += errs.height
    room = MAX_KEPT_ERRORS - res.unparsed_errors.height
    if errs.is_empty() or room <= 0:
        return
    errs = errs.head(room).select("line_no", pl.col("text").str.slice(0, MAX_ERROR_CHARS))
    res.unparsed_errors = pl.concat([res.unparsed_errors, errs])


def check_unchanged(sf: SourceFile, res: FileResult) -> None:
    """A file that grew, shrank, was rewritten or vanished while it was read is analyzed as read,
    with a warning (its digest is of the bytes read, for uncompressed files)."""
    if sf.mtime_ns is None:
        return
    try:
        st = os.stat(sf.real_path)
    except OSError:
        res.warnings.append("file disappeared while it was being analyzed; analyzed as read")
        return
    if st.st_size != sf.size or st.st_mtime_ns != sf.mtime_ns:
        res.warnings.append(f"file changed while it was being analyzed (size {sf.size} -> {st.st_size} bytes); "
                            "analyzed as read")

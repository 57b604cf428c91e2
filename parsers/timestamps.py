"""Vectorized timestamp parsing into UTC for the stamp shapes the log sources print.

Naive stamps (no zone) are read in the job's zone (`ParseContext.tz`, UTC by default).
Stamps without a year (syslog, PyTorch glog) take `ParseContext.ref_year`; when that is
unknown they stay null and the raw text is kept.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import UTC_DT

MONTHS = {m: i + 1 for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"])}


def _localize(naive: pl.Expr, tz: ZoneInfo) -> pl.Expr:
    key = getattr(tz, "key", "UTC") or "UTC"
    return (
        naive.dt.replace_time_zone(key, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .cast(UTC_DT)
    )


def iso(expr: pl.Expr, tz: ZoneInfo) -> pl.Expr:
    """'2026-05-01 12:00:00', '2026-05-01T12:00:00.123456', '...,123' (Python logging ms),
    with optional 'Z' / '+hh:mm' / '+hhmm'. Naive values are in `tz`."""
    s = expr.str.strip_chars().str.replace(",", ".").str.replace("T", " ")
    has_zone = s.str.contains(ascii_classes(r"(?:Z|[+-]\d\d:?\d\d)$"))
    aware = (
        s.str.replace(r"Z$", "+00:00")
        .str.replace(ascii_classes(r"([+-]\d\d)(\d\d)$"), "$1:$2")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
        .cast(UTC_DT)
    )
    naive = _localize(s.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"), tz)
    return pl.when(has_zone).then(aware).otherwise(naive)


def _month_num(mon: pl.Expr) -> pl.Expr:
    return mon.str.slice(0, 3).str.to_titlecase().replace_strict(
        {k: str(v) for k, v in MONTHS.items()}, default=None)


def month_day_time(mon: pl.Expr, day: pl.Expr, hms: pl.Expr, year: int | None | pl.Expr,
                   tz: ZoneInfo) -> pl.Expr:
    """Syslog-style 'Feb 23' + '16:24:18[.ffffff]' with a year from context."""
    if year is None:
        return pl.lit(None, dtype=UTC_DT)
    y = pl.lit(str(year)) if isinstance(year, int) else year.cast(pl.Utf8)
    s = pl.concat_str([y, _month_num(mon).str.pad_start(2, "0"), day.str.strip_chars().str.pad_start(2, "0")],
                      separator="-")
    s = pl.concat_str([s, hms], separator=" ")
    return _localize(s.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"), tz)


def mmdd_time(mmdd: pl.Expr, hms: pl.Expr, year: int | None, tz: ZoneInfo) -> pl.Expr:
    """glog 'E1218 20:27:21.426415540': MMDD plus time (nanoseconds are cut to microseconds)."""
    if year is None:
        return pl.lit(None, dtype=UTC_DT)
    mmdd = mmdd.str.pad_start(4, "0")
    s = pl.concat_str([pl.lit(str(year)), mmdd.str.slice(0, 2), mmdd.str.slice(2, 2)], separator="-")
    hms = hms.str.replace(ascii_classes(r"(\.\d{1,6})\d*$"), "$1")
    s = pl.concat_str([s, hms], separator=" ")
    return _localize(s.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"), tz)


def ctime(expr: pl.Expr, tz: ZoneInfo) -> pl.Expr:
    """dmesg -T 'Sun Feb 23 16:24:18 2025' (local time of the node)."""
    g = expr.str.extract_groups(ascii_classes(r"^\w{3}\s+(\w{3})\s+(\d{1,2})\s+(\d\d:\d\d:\d\d(?:\.\d+)?)\s+(\d{4})$"))
    return month_day_time(g.struct.field("1"), g.struct.field("2"), g.struct.field("3"),
                          g.struct.field("4"), tz)


def epoch_seconds(expr: pl.Expr) -> pl.Expr:
    return (expr.cast(pl.Float64, strict=False) * 1_000_000).cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def derive_missing(events: pl.DataFrame, by: str | None = None) -> pl.DataFrame:
    """Lines without a stamp inherit the nearest earlier stamped line of the same file
    (else the next later one), marked `ts_quality = derived`. `by`: the column that tells the
    files of a batch apart (forensics/bulk.py)."""
    if events.is_empty():
        return events
    ev = events.sort([by, "line_no"] if by else "line_no")
    fwd, bwd = pl.col("ts").forward_fill(), pl.col("ts").backward_fill()
    filled = fwd.over(by).fill_null(bwd.over(by)) if by else fwd.fill_null(bwd)
    # an uptime / `dmesg -H` stamp with no boot time has its own clock: it stays `relative`
    # (ts null, ts_raw kept) rather than borrowing a neighbour's time
    relative = pl.col("ts").is_null() & (pl.col("ts_quality") == "relative").fill_null(False)
    return ev.with_columns(
        pl.when(relative).then(pl.lit("relative"))
        .when(pl.col("ts").is_null() & filled.is_not_null()).then(pl.lit("derived"))
        .when(pl.col("ts").is_null()).then(pl.lit("missing"))
        .otherwise(pl.col("ts_quality")).alias("ts_quality"),
        pl.when(relative).then(pl.col("ts")).otherwise(filled).alias("ts"),
    )

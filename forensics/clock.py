"""One clock across hosts: estimate each host's clock offset from moments that happen at the
same time everywhere, and correct it.

Anchors (each gives, per host, a sample "this host's stamp minus the job's reference"):
- a collective timeout: every rank's watchdog fires on the same collective (same process
  group and sequence number) within a fraction of a second; the reference is the median over
  hosts;
- an attempt's launch: every node's launcher prints its first stamped line when the scheduler
  starts the step; the reference is the median over hosts.
A host's offset is the median of its samples. Offsets under SKEW_THRESHOLD_S are left alone;
larger ones are subtracted from every time stamp of that host and reported as a data-quality
warning. With fewer than three hosts per anchor a median cannot tell which clock is wrong, so
such anchors are not used.
"""

from __future__ import annotations

import polars as pl

from parsers import source_names

SKEW_THRESHOLD_S = 1.0
MIN_HOSTS = 3


def _anchor_samples(groups: pl.DataFrame) -> pl.DataFrame:
    """`groups`: (anchor, host, t). Per anchor with >= MIN_HOSTS hosts: host - median(hosts)."""
    if groups.is_empty():
        return pl.DataFrame(schema={"host": pl.Utf8, "off": pl.Float64})
    per_host = groups.group_by("anchor", "host").agg(pl.col("t").median())
    per_host = per_host.with_columns(
        pl.col("host").n_unique().over("anchor").alias("n"),
        pl.col("t").median().over("anchor").alias("ref"),
    ).filter(pl.col("n") >= MIN_HOSTS)
    return per_host.select("host", ((pl.col("t") - pl.col("ref")) / 1e6).alias("off"))


def estimate_offsets(tables: dict[str, pl.DataFrame], files: pl.DataFrame,
                     file_attempt: dict[int, int]) -> dict[str, float]:
    parts = []
    tmo = tables.get("collective_timeouts")
    if tmo is not None and not tmo.is_empty():
        t = tmo.filter(pl.col("ts").is_not_null() & pl.col("host").is_not_null() & pl.col("seq").is_not_null()
                       & pl.col("timeout_ms").is_not_null())
        parts.append(_anchor_samples(t.select(
            pl.concat_str([pl.lit("tmo:"), pl.col("pg").fill_null(""), pl.lit(":"), pl.col("seq").cast(pl.Utf8)]).alias("anchor"),
            "host", pl.col("ts").dt.epoch("us").cast(pl.Float64).alias("t"))))
    if file_attempt and not files.is_empty() and "host" in files.columns:
        f = files.filter(pl.col("first_ts").is_not_null() & pl.col("host").is_not_null()
                         & ~pl.col("parser").is_in(list(source_names(not_scope="process"))).fill_null(False)).with_columns(
            pl.col("file_id").replace_strict(file_attempt, default=None, return_dtype=pl.Int32).alias("attempt"))
        f = f.filter(pl.col("attempt").is_not_null()).group_by("attempt", "host").agg(pl.col("first_ts").min())
        parts.append(_anchor_samples(f.select(
            pl.concat_str([pl.lit("launch:"), pl.col("attempt").cast(pl.Utf8)]).alias("anchor"), "host",
            pl.col("first_ts").dt.epoch("us").cast(pl.Float64).alias("t"))))
    parts = [p for p in parts if not p.is_empty()]
    if not parts:
        return {}
    s = pl.concat(parts).group_by("host").agg(pl.col("off").median()).sort("host")
    return {h: float(o) for h, o in s.iter_rows() if abs(o) >= SKEW_THRESHOLD_S}


def _shift(df: pl.DataFrame, offsets: dict[str, float], host_col: str, cols: tuple[str, ...]) -> pl.DataFrame:
    """(A LazyFrame, for tables that wait on disk, stays lazy.)"""
    names = df.collect_schema().names() if isinstance(df, pl.LazyFrame) else df.columns
    if host_col not in names or (isinstance(df, pl.DataFrame) and df.is_empty()):
        return df
    off_us = pl.col(host_col).replace_strict({h: int(round(o * 1e6)) for h, o in offsets.items()},
                                             default=0, return_dtype=pl.Int64)
    return df.with_columns([
        (pl.col(c) - pl.duration(microseconds=off_us)).alias(c) for c in cols if c in names
    ])


def correct(events: pl.DataFrame, tables: dict[str, pl.DataFrame], files: pl.DataFrame,
            offsets: dict[str, float]) -> tuple[pl.DataFrame, dict[str, pl.DataFrame], pl.DataFrame]:
    """Subtract each host's offset from every stamp of that host."""
    if not offsets:
        return events, tables, files
    events = _shift(events, offsets, "host", ("ts",))
    tables = {name: _shift(df, offsets, "host", ("ts",)) for name, df in tables.items()}
    files = _shift(files, offsets, "host", ("first_ts", "last_ts"))
    return events, tables, files


def describe(offsets: dict[str, float]) -> list[str]:
    return [f"clock skew: host {h} runs {abs(o):.1f} s {'ahead of' if o > 0 else 'behind'} the other hosts; "
            f"its time stamps were corrected by {-o:+.1f} s" for h, o in sorted(offsets.items())]


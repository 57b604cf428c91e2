"""Restatements (issue 14, item 5): an event that repeats what another source already said stays
attached to it instead of counting as a fault of its own.

The DCGM Xid gauge (`dcgm_xid`) keeps the last Xid of each GPU and is sampled every few seconds to
minutes: the Xid the kernel logged shows up in the gauge one sample later, often after the job has
been restarted. A gauge Xid whose host saw the same Xid in its kernel log at most GAUGE_LAG earlier
restates that line: its hits become context. A gauge Xid with no kernel line behind it (no dmesg
collected, or a different Xid) keeps its role.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

GAUGE_LAG = timedelta(minutes=15)


def demote_restatements(events: pl.DataFrame, hits: pl.DataFrame) -> pl.DataFrame:
    """`hits` with the root/cascade hits of restating gauge Xids turned into context."""
    if hits.is_empty() or events.is_empty():
        return hits
    gauge = events.filter((pl.col("kind") == "dcgm_xid") & pl.col("ts").is_not_null()).select(
        "event_id", "host", "code", "ts")
    kern = events.filter((pl.col("kind") == "xid") & pl.col("ts").is_not_null()).select(
        "host", "code", pl.col("ts").alias("_kts"))
    if gauge.is_empty() or kern.is_empty():
        return hits
    pairs = gauge.join(kern, on=["host", "code"], how="inner").filter(
        (pl.col("_kts") <= pl.col("ts")) & (pl.col("ts") - pl.col("_kts") <= GAUGE_LAG))
    restated = pairs["event_id"].unique().implode()
    return hits.with_columns(
        pl.when(pl.col("event_id").is_in(restated) & pl.col("role").is_in(["root", "cascade"]))
        .then(pl.lit("context")).otherwise(pl.col("role")).alias("role"))

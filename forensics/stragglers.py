"""Slow episodes on the step-time series, and stragglers from per-GPU DCGM telemetry.

A slow episode is a run of at least MIN_EPISODE_LOGS consecutive logged steps whose step time
exceeds the healthy median by SLOW_FACTOR; its excess over the median is the `slowdown` bucket.
A straggler is a GPU whose SM clock stays below PEER_FACTOR of its peers' median at the same
sample time for most samples of the episode (or of the job); the cause comes from its clock
event reason bits, temperature, power and PCIe replay counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

SLOW_FACTOR = 1.08
MIN_EPISODE_LOGS = 3
PEER_FACTOR = 0.9
MIN_LOW_SHARE = 0.6
MIN_SAMPLES = 3

# clock event reason bits (reference/dcgm_formats.md §3)
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, SW_POWER_CAP, HW_POWER_BRAKE = 0x8, 0x20, 0x40, 0x4, 0x80


@dataclass
class Episode:
    attempt: int | None
    start: datetime
    end: datetime
    steps: int
    excess_s: float
    slowdown: float  # mean fractional excess


@dataclass
class Straggler:
    host: str | None
    rank: int | None
    gpu: int | None
    pci_bus_id: str | None
    start: datetime | None
    end: datetime | None
    slowdown: float | None
    cause: str
    evidence: str


def slow_episodes(steps: pl.DataFrame) -> list[Episode]:
    """`steps`: train_steps rows with ts, step, step_time_s and attempt."""
    out: list[Episode] = []
    if steps.is_empty() or "step_time_s" not in steps.columns:
        return out
    for (att,), s in steps.filter(pl.col("step_time_s").is_not_null() & pl.col("ts").is_not_null()).sort(
            "ts").group_by("attempt", maintain_order=True):
        s = s.unique("step", keep="last", maintain_order=True)
        if s.height < 2 * MIN_EPISODE_LOGS:
            continue
        base = float(s["step_time_s"].median())
        if base <= 0:
            continue
        s = s.with_columns(
            (pl.col("step_time_s") > base * SLOW_FACTOR).alias("slow"),
            pl.col("step").diff().fill_null(1).clip(lower_bound=1).alias("n"),
        ).with_columns((pl.col("slow") != pl.col("slow").shift(1)).fill_null(True).cum_sum().alias("run"))
        for _, r in s.filter(pl.col("slow")).group_by("run", maintain_order=True):
            if r.height < MIN_EPISODE_LOGS:
                continue
            excess = float(((r["step_time_s"] - base) * r["n"]).sum())
            nsteps = int(r["n"].sum())
            start = r["ts"][0]
            out.append(Episode(att, start, r["ts"][-1], nsteps, excess,
                               float((r["step_time_s"] / base - 1).mean())))
    return out


def dcgm_stragglers(samples: pl.DataFrame | None, episodes: list[Episode]) -> list[Straggler]:
    if samples is None or samples.is_empty():
        return []
    clk = samples.filter((pl.col("field") == "DCGM_FI_DEV_SM_CLOCK") & pl.col("value").is_not_null()
                         & pl.col("ts").is_not_null())
    if clk.is_empty():
        return []
    # Only samples while the job computes: idle GPUs (clock near 0) are not stragglers.
    clk = clk.with_columns(pl.col("value").median().over("ts").alias("peer"))
    clk = clk.filter(pl.col("peer") > 0).with_columns((pl.col("value") < pl.col("peer") * PEER_FACTOR).alias("low"))
    windows = [(e.start, e.end) for e in episodes] or [(clk["ts"].min(), clk["ts"].max())]
    found: dict[tuple, Straggler] = {}
    for lo, hi in windows:
        w = clk.filter((pl.col("ts") >= lo) & (pl.col("ts") <= hi))
        per = w.group_by("host", "gpu").agg(
            pl.col("low").mean().alias("share"), pl.len().alias("n"),
            pl.col("pci_bus_id").drop_nulls().first(),
            pl.col("ts").filter(pl.col("low")).min().alias("first_low"),
            pl.col("ts").filter(pl.col("low")).max().alias("last_low"),
            (pl.col("value") / pl.col("peer")).filter(pl.col("low")).mean().alias("ratio"),
        ).filter((pl.col("share") >= MIN_LOW_SHARE) & (pl.col("n") >= MIN_SAMPLES)).sort("host", "gpu")
        n_gpus = w.select(pl.struct("host", "gpu").n_unique()).item()
        if per.height == 0 or per.height > max(1, n_gpus // 4):
            continue  # nobody, or a job-wide slowdown rather than a straggler
        for r in per.iter_rows(named=True):
            key = (r["host"], r["gpu"])
            if key in found:
                continue
            cause, why = _cause(samples, r["host"], r["gpu"], r["first_low"], r["last_low"])
            found[key] = Straggler(r["host"], None, r["gpu"], r["pci_bus_id"], r["first_low"], r["last_low"],
                                   round(1 - r["ratio"], 3) if r["ratio"] else None, cause,
                                   f"SM clock below {PEER_FACTOR:.0%} of peers in {r['share']:.0%} of {r['n']} samples; {why}")
    return list(found.values())


def _cause(samples: pl.DataFrame, host: str, gpu: int, lo: datetime, hi: datetime) -> tuple[str, str]:
    g = samples.filter((pl.col("host") == host) & (pl.col("gpu") == gpu) & (pl.col("ts") >= lo) & (pl.col("ts") <= hi))
    reasons = g.filter(pl.col("field") == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")["value"].drop_nulls()
    bits = 0
    for v in reasons.cast(pl.Int64).to_list():
        bits |= v
    if bits & (HW_THERMAL | SW_THERMAL | HW_SLOWDOWN):
        return "thermal", f"clock event reasons 0x{bits:x} (thermal slowdown)"
    if bits & (SW_POWER_CAP | HW_POWER_BRAKE):
        return "power", f"clock event reasons 0x{bits:x} (power cap/brake)"
    replay = g.filter(pl.col("field") == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER").sort("ts")["value"].drop_nulls()
    if replay.len() >= 2 and replay[-1] > replay[0]:
        return "pcie_degraded", f"PCIe replay counter grew by {replay[-1] - replay[0]:.0f}"
    return "clocks_low", "SM clock low without a throttle reason"

"""Slow episodes on the step-time series, and stragglers from per-GPU DCGM telemetry.

A slow episode is a run of at least MIN_EPISODE_LOGS consecutive logged steps whose step time
exceeds the healthy median by SLOW_FACTOR; its excess over the median is the `slowdown` bucket.
A straggler is a GPU whose SM clock stays below PEER_FACTOR of its peers' median at the same
sample time for most samples of the episode (or of the job); the cause comes from its clock
event reason bits, temperature, power and PCIe replay counter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import polars as pl

SLOW_FACTOR = 1.08
MIN_EPISODE_LOGS = 3
MIN_SPIKES = 5  # this many spikes make a recurring pattern (GC, data-loader stalls)
WARMUP_LOGS = 2
BASE_WINDOW = 10
PEER_FACTOR = 0.9
MIN_LOW_SHARE = 0.6
MIN_SAMPLES = 3
# the loop waits on its data loader for this share of the step or more (median over the logged intervals):
# input-bound. Each logged time is the loop's own mean over its interval (mmcv: the logging interval,
# MetricLogger: a 20-iteration window, CenterNet: the epoch so far), so one row already averages many steps
DATA_BOUND_SHARE = 0.5

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
    spike: bool = False


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


def baseline(step_times: pl.Series) -> float | None:
    """Ideal step time: the lowest median over BASE_WINDOW consecutive logged steps (robust to a
    slowdown that lasts most of the job), after the first warm-up logs."""
    st = step_times.drop_nulls()
    if st.len() > WARMUP_LOGS + BASE_WINDOW:
        st = st.slice(WARMUP_LOGS)
    if st.len() == 0:
        return None
    if st.len() < BASE_WINDOW:
        return float(st.median())
    return float(st.rolling_median(BASE_WINDOW).drop_nulls().min())


def _with_step_time(s: pl.DataFrame) -> pl.DataFrame:
    """Logged steps of one attempt, one row per step; the step time is the logged one, else the
    time between consecutive step lines over the steps between them."""
    s = s.filter(pl.col("ts").is_not_null() & pl.col("step").is_not_null()).sort("ts").unique(
        "step", keep="last", maintain_order=True).sort("step")
    derived = (pl.col("ts").diff().dt.total_microseconds() / 1e6) / pl.col("step").diff()
    return s.with_columns(pl.coalesce(pl.col("step_time_s"), derived).alias("step_time_s")).filter(
        pl.col("step_time_s").is_not_null() & (pl.col("step_time_s") > 0))


def slow_episodes(steps: pl.DataFrame, saves: list[tuple] | None = None) -> list[Episode]:
    """Sustained slow runs (>= MIN_EPISODE_LOGS consecutive slow logged steps) and, as episodes
    with `spike=True`, isolated slow logged steps. Logged intervals that hold a checkpoint save
    (`saves`: (start, end) times) are left out: a save is not a slowdown."""
    out: list[Episode] = []
    if steps.is_empty() or "step_time_s" not in steps.columns:
        return out
    for (att,), s in steps.sort("ts").group_by("attempt", maintain_order=True):
        s = _with_step_time(s)
        if saves:
            prev = s["ts"].shift(1)
            hold = [any(p is not None and a <= t and b >= p for a, b in saves) for p, t in
                    zip(prev.to_list(), s["ts"].to_list(), strict=True)]
            s = s.filter(~pl.Series(hold, dtype=pl.Boolean))
        if s.height < 2 * MIN_EPISODE_LOGS:
            continue
        base = baseline(s["step_time_s"])
        if base is None or base <= 0:
            continue
        s = s.with_columns(
            (pl.col("step_time_s") > base * SLOW_FACTOR).alias("slow"),
            pl.col("step").diff().fill_null(1).clip(lower_bound=1).alias("n"),
        ).with_columns((pl.col("slow") != pl.col("slow").shift(1)).fill_null(True).cum_sum().alias("run"))
        for _, r in s.filter(pl.col("slow")).group_by("run", maintain_order=True):
            excess = float(((r["step_time_s"] - base) * r["n"]).sum())
            if r.height >= MIN_EPISODE_LOGS:
                out.append(Episode(att, r["ts"][0], r["ts"][-1], int(r["n"].sum()), excess,
                                   float((r["step_time_s"] / base - 1).mean())))
            else:
                for row in r.iter_rows(named=True):
                    out.append(Episode(att, row["ts"], row["ts"], int(row["n"]),
                                       float((row["step_time_s"] - base) * row["n"]), row["step_time_s"] / base - 1,
                                       spike=True))
    return out


def spike_pattern(spikes: list[Episode]) -> str | None:
    """Recurring spikes: `gc_or_periodic` when they come at a regular period, else
    `storage_or_dataloader` (irregular stalls); None when there are too few to call it a pattern."""
    if len(spikes) < MIN_SPIKES:
        return None
    t = sorted(e.start.timestamp() for e in spikes)
    gaps = [b - a for a, b in zip(t, t[1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    if mean <= 0:
        return None
    sd = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    return "gc_or_periodic" if sd / mean < 0.25 else "storage_or_dataloader"


@dataclass
class DataBound:
    """Logged intervals in which the loop says it waited on its data loader for most of the step."""
    attempt: int | None
    start: datetime | None
    rows: int  # logged intervals counted (each epoch's first one left out when it is the warm-up)
    share: float  # median data wait / step time over them
    data_s: float  # the data wait and step time of the interval cited
    step_s: float
    file_id: int
    line_no: int


def data_bound(steps: pl.DataFrame) -> DataBound | None:
    """The input-bound run the loops that time their data wait show (mmcv `data_time`, MetricLogger `data`,
    CenterNet `Data`): over the logged intervals that print both times, the median share of the step spent
    waiting on the data loader is DATA_BOUND_SHARE or more. The first interval of an epoch holds the loader's
    start (workers forking, a cold page cache): by design slow on data, so it is left out when the log shows it
    is that first interval (its counter is at most the logging interval, read from the counters after it; a
    lone row only when its counter is 0 or 1). None when no interval prints a data time."""
    if steps.is_empty() or "data_time_s" not in steps.columns:
        return None
    s = steps.filter(pl.col("data_time_s").is_not_null() & (pl.col("step_time_s") > 0)
                     & pl.col("step").is_not_null()).sort("file_id", "line_no")
    if s.is_empty():
        return None
    gap = pl.col("step").diff().over("file_id", "epoch")
    s = s.with_columns(
        pl.int_range(pl.len()).over("file_id", "epoch").alias("_k"),
        gap.filter(gap > 0).min().over("file_id", "epoch").alias("_int"))
    warm = (pl.col("_k") == 0) & (pl.col("step") <= pl.coalesce(pl.col("_int"), pl.lit(1)))
    s = s.filter(~warm).with_columns((pl.col("data_time_s") / pl.col("step_time_s")).alias("_share"))
    if s.is_empty():
        return None
    share = float(s["_share"].median())
    if share < DATA_BOUND_SHARE:
        return None
    top = s.sort("_share", descending=True).row(0, named=True)
    att = top.get("attempt")
    return DataBound(att, top["ts"], s.height, share, float(top["data_time_s"]), float(top["step_time_s"]),
                     int(top["file_id"]), int(top["line_no"]))


SAMPLE_COLS = ("ts", "host", "gpu", "pci_bus_id", "field", "value")  # what straggler rules read


def rows(samples: pl.DataFrame | pl.LazyFrame | None, cond: pl.Expr) -> pl.DataFrame:
    """The samples matching `cond` (SAMPLE_COLS only), in memory; samples may wait on disk as a
    LazyFrame: only the matching rows and columns are read."""
    if samples is None:
        return pl.DataFrame()
    names = samples.collect_schema().names() if isinstance(samples, pl.LazyFrame) else samples.columns
    got = samples.filter(cond).select([c for c in SAMPLE_COLS if c in names])
    return got.collect(engine="streaming") if isinstance(got, pl.LazyFrame) else got


def dcgm_stragglers(samples: pl.DataFrame | pl.LazyFrame | None, episodes: list[Episode]) -> list[Straggler]:
    clk = rows(samples, (pl.col("field") == "DCGM_FI_DEV_SM_CLOCK") & pl.col("value").is_not_null()
               & pl.col("ts").is_not_null())
    if clk.is_empty():
        return []
    # Only samples while the job computes: idle GPUs (clock near 0) are not stragglers.
    clk = clk.with_columns(pl.col("value").median().over("ts").alias("peer"))
    clk = clk.filter(pl.col("peer") > 0).with_columns((pl.col("value") < pl.col("peer") * PEER_FACTOR).alias("low"))
    sustained = [e for e in episodes if not e.spike]
    windows = [(e.start, e.end) for e in sustained] or [(clk["ts"].min(), clk["ts"].max())]
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


def _cause(samples: pl.DataFrame | pl.LazyFrame, host: str, gpu: int, lo: datetime, hi: datetime) -> tuple[str, str]:
    g = rows(samples, (pl.col("host") == host) & (pl.col("gpu") == gpu) & (pl.col("ts") >= lo) & (pl.col("ts") <= hi))
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


def pcie_stragglers(samples: pl.DataFrame | pl.LazyFrame | None, episodes: list[Episode]) -> list[Straggler]:
    """A GPU whose PCIe replay counter grows during a slow episode while its peers' stay flat
    (clocks can look normal: the GPU waits on a degraded link)."""
    rep = rows(samples, (pl.col("field") == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER") & pl.col("value").is_not_null()
               & pl.col("ts").is_not_null())
    sustained = [e for e in episodes if not e.spike]
    if rep.is_empty() or not sustained:
        return []
    out: dict[tuple, Straggler] = {}
    for e in sustained:
        w = rep.filter((pl.col("ts") >= e.start) & (pl.col("ts") <= e.end)).sort("ts")
        growth = w.group_by("host", "gpu").agg(
            (pl.col("value").last() - pl.col("value").first()).alias("grew"), pl.len().alias("n"),
            pl.col("pci_bus_id").drop_nulls().first(), pl.col("ts").min().alias("t0"), pl.col("ts").max().alias("t1"),
        ).filter(pl.col("n") >= MIN_SAMPLES).sort("host", "gpu")
        if growth.is_empty():
            continue
        bad = growth.filter(pl.col("grew") > 0)
        if bad.is_empty() or bad.height > max(1, growth.height // 4):
            continue
        for r in bad.iter_rows(named=True):
            key = (r["host"], r["gpu"])
            if key not in out:
                out[key] = Straggler(r["host"], None, r["gpu"], r["pci_bus_id"], e.start, e.end, round(e.slowdown, 3),
                                     "pcie_degraded", f"PCIe replay counter grew by {r['grew']:.0f} during the slow "
                                     f"episode while its peers stayed flat")
    return list(out.values())


# NVRx straggler detection's warning names every flagged rank and its node (parsers/nvrx.py
# `straggler_flagged`; ptl_resiliency/straggler_det_callback.py, docs/nvrx.md)
REPORTED_ID = r"StragglerId\(rank=(\d+), node='([^']*)'\)"


def reported_stragglers(events: pl.DataFrame, paths: dict[int, str]) -> list[Straggler]:
    """The stragglers a job's own detector flagged: one per (host, rank) of every `straggler_flagged`
    line, from its first to its last flagging, citing the first line. The warning prints no score and
    no slowdown, so `slowdown` and `gpu` are null (a rank is not a GPU index)."""
    if events.is_empty() or "kind" not in events.columns:
        return []
    flagged = events.filter(pl.col("kind") == "straggler_flagged").sort("ts", "file_id", "line_no", nulls_last=True)
    found: dict[tuple, Straggler] = {}
    for r in flagged.iter_rows(named=True):
        which = "relative" if r["code"] == "relative" else "individual"
        for rank, node in re.findall(REPORTED_ID, r["message"] or ""):
            key = (node or None, int(rank))
            if key in found:
                s = found[key]
                s.end = r["ts"] or s.end
                continue
            found[key] = Straggler(node or None, int(rank), None, None, r["ts"], r["ts"], None, "reported",
                                   f"NVRx straggler detection flagged it ({which} GPU performance below the "
                                   f"threshold): {paths.get(r['file_id'], '?')}:{r['line_no']}")
    return list(found.values())

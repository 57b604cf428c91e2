"""Advice from the observed interruption rate and checkpoint cost.

- Checkpoint interval (Young/Daly first-order optimum): tau = sqrt(2 * C * MTBI), where C is
  the median blocking save time and MTBI the mean time between interruptions that lose work
  (crashes and hangs) over the job's wall time. The expected cost per unit of wall time of an
  interval tau is C / tau (saving) + tau / (2 * MTBI) (redo after a failure); the advice
  compares that cost at the job's current interval and at tau and turns the difference into
  GPU-hours for this job.
- Collective timeouts: for each hang, the time from the root event to the first watchdog
  timeout is spent waiting; a shorter timeout (SHORTER_TIMEOUT_S, if below the configured one)
  would have cut that wait.
"""

from __future__ import annotations

import math
from datetime import datetime

import polars as pl

SHORTER_TIMEOUT_S = 300.0
LOSES_WORK = ("crash", "hang")


def _median(values: list[float]) -> float | None:
    v = sorted(x for x in values if x is not None and x > 0)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def checkpoint_advice(wall_s: float, interruptions: list[dict], save_durations: list[float],
                      save_times: list[float], gpus: int | None) -> dict:
    n_fail = sum(1 for x in interruptions if x["kind"] in LOSES_WORK)
    cost = _median(save_durations)
    gaps = [b - a for a, b in zip(save_times, save_times[1:], strict=False)]
    current = _median(gaps)
    out: dict = {"save_cost_s": cost, "interruptions": n_fail, "current_interval_s": current,
                 "mtbi_s": None, "optimal_interval_s": None, "gpu_hours_saved": None, "note": None}
    if cost is None:
        out["note"] = "no checkpoint save with a measurable duration was found"
        return out
    if n_fail == 0 or wall_s <= 0:
        out["note"] = "no interruption that lost work: the interruption rate is unknown"
        return out
    mtbi = wall_s / n_fail
    tau = math.sqrt(2 * cost * mtbi)
    out["mtbi_s"], out["optimal_interval_s"] = round(mtbi, 1), round(tau, 1)
    if current is not None and gpus:
        def waste(t: float) -> float:
            return cost / t + t / (2 * mtbi)
        saved = (waste(current) - waste(tau)) * wall_s * gpus / 3600.0
        out["gpu_hours_saved"] = round(max(saved, 0.0), 3)
    else:
        out["note"] = "current interval or GPU count unknown: savings not estimated"
    return out


def timeout_advice(interruptions: list[dict], timeouts: pl.DataFrame | None, gpus: int | None) -> dict:
    out: dict = {"configured_timeout_s": None, "hangs": 0, "waited_s": 0.0, "shorter_timeout_s": SHORTER_TIMEOUT_S,
                 "gpu_hours_saved": None}
    if timeouts is None or timeouts.is_empty():
        return out
    known = timeouts.filter(pl.col("timeout_ms").is_not_null())
    if known.is_empty():
        return out
    configured = float(known["timeout_ms"].median()) / 1000.0
    out["configured_timeout_s"] = configured
    t = known.filter(pl.col("ts").is_not_null())
    waited = 0.0
    hangs = 0
    for x in interruptions:
        if x["kind"] != "hang" or not x.get("time"):
            continue
        root = datetime.fromisoformat(x["time"].replace("Z", "+00:00"))
        fired = t.filter(pl.col("ts") >= root)["ts"].min()
        if fired is None:
            continue
        hangs += 1
        waited += (fired - root).total_seconds()
    out["hangs"], out["waited_s"] = hangs, round(waited, 1)
    if hangs and gpus and configured > SHORTER_TIMEOUT_S:
        cut = min(waited, hangs * (configured - SHORTER_TIMEOUT_S))
        out["gpu_hours_saved"] = round(cut * gpus / 3600.0, 3)
    return out

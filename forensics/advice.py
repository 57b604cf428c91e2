"""Advice from the observed interruption rate and checkpoint cost.

- Checkpoint interval (Young/Daly first-order optimum): tau = sqrt(2 * C * MTBI), where C is
  the median blocking save time and MTBI the mean time between interruptions that lose work
  (crashes and hangs) over the job's wall time. The expected cost per unit of wall time of an
  interval tau is C / tau (saving) + tau / (2 * MTBI) (redo after a failure); the advice
  compares that cost at the job's current interval and at tau and turns the difference into
  GPU-hours for this job.
- Collective timeouts: after each interruption (crash or hang) the surviving ranks wait in their
  collective until the watchdog fires; that wait is measured by the watchdog itself (`ran for N
  milliseconds`) and its timeout is the watchdog's own (`Timeout(ms)`); a shorter timeout
  (SHORTER_TIMEOUT_S, if below the watchdog's) would have cut each wait to it.
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


def _ts(x: dict) -> datetime | None:
    return datetime.fromisoformat(x["time"].replace("Z", "+00:00")) if x.get("time") else None


def timeout_advice(interruptions: list[dict], timeouts: pl.DataFrame | None, gpus: int | None) -> dict:
    """What the collective watchdog cost: after each interruption (a crash as much as a hang) the
    surviving ranks sit in their collective until the watchdog fires. Its timeout is the
    watchdog's own (`Timeout(ms)` of the lines that fired); the wait is what those lines measured
    (`ran for N milliseconds`, median over the ranks), or, without it, from the interruption to
    the first firing. `hangs` counts the interruptions after which ranks waited so."""
    out: dict = {"configured_timeout_s": None, "hangs": 0, "waited_s": 0.0, "shorter_timeout_s": SHORTER_TIMEOUT_S,
                 "gpu_hours_saved": None, "waits": []}
    if timeouts is None or timeouts.is_empty():
        return out
    known = timeouts.filter(pl.col("timeout_ms").is_not_null())
    if known.is_empty():
        return out
    if "ran_for_ms" not in known.columns:
        known = known.with_columns(pl.lit(None, dtype=pl.Int64).alias("ran_for_ms"))
    t = known.filter(pl.col("ts").is_not_null())
    timed = sorted((x for x in interruptions if _ts(x) is not None), key=lambda x: _ts(x))
    fired_timeouts: list[float] = []
    saved = 0.0
    for i, x in enumerate(timed):
        root = _ts(x)
        nxt = _ts(timed[i + 1]) if i + 1 < len(timed) else None
        rows = t.filter(pl.col("ts") >= root)
        if nxt is not None:
            rows = rows.filter(pl.col("ts") < nxt)
        if rows.is_empty():
            continue
        ran = rows["ran_for_ms"].drop_nulls()
        wait = float(ran.median()) / 1000.0 if len(ran) else (rows["ts"].min() - root).total_seconds()
        timeout = float(rows["timeout_ms"].median()) / 1000.0
        fired_timeouts.append(timeout)
        out["waits"].append({"interruption": x.get("id"), "kind": x["kind"], "ranks": rows["rank"].drop_nulls().n_unique() if "rank" in rows.columns else rows.height,
                             "timeout_s": round(timeout, 1), "waited_s": round(wait, 1)})
        saved += max(0.0, wait - SHORTER_TIMEOUT_S) if timeout > SHORTER_TIMEOUT_S else 0.0
    configured = sorted(fired_timeouts)[len(fired_timeouts) // 2] if fired_timeouts else \
        float(known["timeout_ms"].median()) / 1000.0
    out["configured_timeout_s"] = configured
    out["hangs"] = len(out["waits"])
    out["waited_s"] = round(sum(w["waited_s"] for w in out["waits"]), 1)
    if out["hangs"] and gpus and configured > SHORTER_TIMEOUT_S:
        out["gpu_hours_saved"] = round(saved * gpus / 3600.0, 3)
    return out

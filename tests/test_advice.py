"""Checkpoint-interval (Young/Daly) and collective-timeout advice."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from forensics.advice import SHORTER_TIMEOUT_S, checkpoint_advice, timeout_advice


def test_young_daly_interval_and_savings() -> None:
    inters = [{"kind": "crash"}, {"kind": "hang"}, {"kind": "preemption"}, {"kind": "slowdown"}]
    a = checkpoint_advice(wall_s=36000, interruptions=inters, save_durations=[30, 32, 28],
                          save_times=[0, 600, 1200, 1800], gpus=64)
    assert a["interruptions"] == 2 and a["save_cost_s"] == 30 and a["current_interval_s"] == 600
    assert a["mtbi_s"] == 18000
    assert a["optimal_interval_s"] == pytest.approx(math.sqrt(2 * 30 * 18000), abs=0.1)
    tau = math.sqrt(2 * 30 * 18000)
    waste = lambda t: 30 / t + t / (2 * 18000)  # noqa: E731
    assert a["gpu_hours_saved"] == pytest.approx((waste(600) - waste(tau)) * 36000 * 64 / 3600, abs=0.01)


def test_no_failures_no_interval() -> None:
    a = checkpoint_advice(3600, [], [30], [0, 600], 8)
    assert a["optimal_interval_s"] is None and "interruption rate is unknown" in a["note"]
    assert checkpoint_advice(3600, [{"kind": "crash"}], [], [], 8)["note"].startswith("no checkpoint save")


def test_timeout_advice_measures_the_wait() -> None:
    t0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    timeouts = pl.DataFrame({"ts": [t0 + timedelta(seconds=1800), t0 + timedelta(seconds=1801)],
                             "timeout_ms": [1_800_000, 1_800_000]})
    a = timeout_advice([{"kind": "hang", "time": "2026-11-02T09:00:00Z"}, {"kind": "crash", "time": None}],
                       timeouts, gpus=16)
    assert a["configured_timeout_s"] == 1800 and a["hangs"] == 1 and a["waited_s"] == 1800
    assert a["gpu_hours_saved"] == pytest.approx((1800 - SHORTER_TIMEOUT_S) * 16 / 3600, abs=0.001)

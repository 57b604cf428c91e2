"""Checkpoint-interval (Young/Daly) and collective-timeout advice."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from forensics.advice import SHORTER_TIMEOUT_S, checkpoint_advice, timeout_advice
from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate


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


def test_demo_job_timeout_advice_agrees_with_the_timeline(tmp_path: Path) -> None:
    """`make demo`'s job: a GPU fell off the bus, the other ranks sat in their all-reduce until the
    600 s watchdog fired. The advice says so, with the watchdog's own timeout and measured wait."""
    root = Path(__file__).resolve().parents[1]
    case = simulate(load_scenario(root / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"), tmp_path / "case", 7)
    a = analyze(case / "job", tmp_path / "out", html=False)
    to = a.report["advice"]["collective_timeout"]
    # what the watchdog lines in the logs say, read here with a regex of their own
    line = re.compile(r"\[Rank (\d+)\] Watchdog caught collective operation timeout: .*Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds")
    found = [m for p in (case / "job").rglob("*.log") for m in line.finditer(p.read_text(errors="replace"))]
    assert found
    timeouts = sorted(int(m.group(2)) / 1000 for m in found)
    ran = sorted(int(m.group(3)) / 1000 for m in found)
    ranks = {m.group(1) for m in found}
    assert len(ranks) == a.report["job"]["ranks"] - 1  # every rank but the dead GPU's waited
    n = len(ran)
    median = ran[n // 2] if n % 2 else (ran[n // 2 - 1] + ran[n // 2]) / 2
    assert to["configured_timeout_s"] == timeouts[n // 2] == 600
    assert to["hangs"] == 1 and to["waits"][0]["kind"] == "crash" and to["waits"][0]["ranks"] == len(ranks)
    assert to["waited_s"] == pytest.approx(median, abs=0.05) and to["waited_s"] >= 600
    gpus = a.report["job"]["gpus"]
    assert to["gpu_hours_saved"] == pytest.approx((to["waited_s"] - SHORTER_TIMEOUT_S) * gpus / 3600, abs=0.01)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "surviving ranks waited 10 min for the watchdog" in md

"""The plots' second process (forensics.plot_worker): the PNGs it draws are the bytes
plots.render_all draws in-process, a worker that fails costs nothing but the time, and
`forensics analyze` with the HTML report never imports matplotlib in the analysing process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from forensics import plot_worker, plots
from forensics.analysis import Analysis, analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), plot_worker.ENV_VAR: "always"}


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    tmp = tmp_path_factory.mktemp("worker")
    case = simulate(load_scenario(ROOT / "fixtures" / "scenarios" / "thermal_straggler.toml"), tmp / "case", 23)
    return analyze(case / "job", tmp / "out")


def _frames(a: Analysis) -> dict[str, pl.DataFrame | pl.LazyFrame]:
    # the heatmap's samples as a LazyFrame: the worker gets the plan, not the rows
    return {"attempts": a.attempts, "steps": a.steps, "checkpoints": a.sql("SELECT * FROM checkpoints"),
            "dcgm_samples": a.sql("SELECT * FROM dcgm_samples").lazy()}


def test_the_worker_draws_the_same_bytes_as_this_process(straggler: Analysis) -> None:
    here_errors: dict[str, str] = {}
    here = plots.render_all(straggler.report, _frames(straggler), here_errors)
    assert set(here) == set(plots.PLOT_NAMES) and not here_errors
    assert plot_worker.prewarm("always")
    proc = plot_worker._worker
    errors: dict[str, str] = {}
    there = plot_worker.render_all(straggler.report, _frames(straggler), errors)
    assert proc is not None and proc.returncode == 0  # it was the worker that answered, and it exited
    assert plot_worker._worker is None  # one job per worker
    assert there == here and errors == here_errors


def test_a_plot_error_in_the_worker_comes_back_as_an_error(straggler: Analysis) -> None:
    assert plot_worker.prewarm("always")
    broken = {**_frames(straggler), "steps": pl.DataFrame({"ts": [1, 2]})}  # no step_time_s column
    errors: dict[str, str] = {}
    pngs = plot_worker.render_all(straggler.report, broken, errors)
    assert "step_time" not in pngs and "step_time_s" in errors["step_time"]
    assert {"timeline", "straggler_heatmap", "downtime"} <= set(pngs)


def test_a_failed_worker_falls_back_to_drawing_here(straggler: Analysis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plot_worker, "_BOOT", "import sys; sys.exit(3)")
    assert plot_worker.prewarm("always")
    proc = plot_worker._worker
    errors: dict[str, str] = {}
    pngs = plot_worker.render_all(straggler.report, _frames(straggler), errors)
    assert proc is not None and proc.returncode == 3
    assert pngs == plots.render_all(straggler.report, _frames(straggler)) and not errors


def test_without_a_worker_the_plots_are_drawn_here(straggler: Analysis) -> None:
    assert plot_worker._worker is None
    assert plot_worker.render_all(straggler.report, _frames(straggler)) == plots.render_all(straggler.report,
                                                                                          _frames(straggler))


def test_cli_analyze_draws_the_plots_without_matplotlib_in_the_analysing_process(
        straggler: Analysis, tmp_path: Path) -> None:
    job = Path(straggler.report["job"]["dir"])
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "forensics.cli", "analyze", str(job),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, env=ENV, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    mods = {m.group(1).split(".")[0]
            for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", run.stderr, re.M)}
    assert {"polars", "duckdb", "forensics"} <= mods and "matplotlib" not in mods and "PIL" not in mods
    assert run.stdout.startswith("Verdict: ")
    pngs = {p.stem: p.read_bytes() for p in (tmp_path / "out" / "plots").iterdir()}
    assert set(pngs) == set(plots.PLOT_NAMES)
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == len(plots.PLOT_NAMES)
    # the worker drew from the same data as the in-process analysis of the same job
    assert pngs["downtime"] == plots.png_bytes(plots.downtime_breakdown(straggler.report))


def test_no_worker_on_a_busy_machine_or_when_told(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = len(os.sched_getaffinity(0))
    assert plot_worker._runnable_now() is None or plot_worker._runnable_now() >= 1  # this process runs
    monkeypatch.setattr(plot_worker, "_runnable_now", lambda: cores)  # every core busy, this one's too
    assert not plot_worker.prewarm() and plot_worker._worker is None
    monkeypatch.setattr(plot_worker, "_runnable_now", lambda: None)  # no /proc: the load average decides
    monkeypatch.setattr(os, "getloadavg", lambda: (cores - 0.5, 0.0, 0.0))
    assert not plot_worker.prewarm() and plot_worker._worker is None
    monkeypatch.setattr(plot_worker, "_runnable_now", lambda: 1)  # only this process runs
    monkeypatch.setenv(plot_worker.ENV_VAR, "never")
    assert not plot_worker.prewarm() and plot_worker._worker is None
    monkeypatch.delenv(plot_worker.ENV_VAR)
    if cores > 1:  # an idle machine with a second core: the worker starts
        assert plot_worker.prewarm() and plot_worker._worker is not None
        plot_worker._discard()
        assert plot_worker._worker is None

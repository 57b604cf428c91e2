"""End to end: every bundled scenario is simulated, analyzed, and checked against its truth."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml"))
E2E_SEED = 101  # not a seed the simulator tests or the demo use


def _case(tmp: Path, scenario: Path, seed: int = E2E_SEED) -> tuple[Path, dict]:
    case = simulate(load_scenario(scenario), tmp / scenario.stem, seed)
    return case, tomllib.loads((case / "expected.toml").read_text())


def primary(expected: dict, report: dict) -> tuple[dict, dict]:
    """(expected, got) for the verdict; for a job that completed after an interruption (a
    preemption that was requeued, a straggler), its first interruption."""
    ev = expected["verdict"]
    if ev["kind"] == "completed" and expected.get("interruptions"):
        got = report["interruptions"][0] if report["interruptions"] else {"kind": None, "category": None,
                                                                          "culprit": {"host": None}}
        return expected["interruptions"][0], got
    return ev, report["verdict"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_scenario_verdict_culprit_and_downtime(tmp_path: Path, scenario: Path) -> None:
    case, exp = _case(tmp_path, scenario)
    rep = analyze(case / "job", tmp_path / "out", html=False).report
    # downtime (DESIGN §7): every bucket within max(30 s, 1 % of wall), goodput within 0.01
    d, truth = rep["downtime"], exp["downtime"]
    tol = max(30.0, 0.01 * truth["wall_s"])
    for bucket in ("wall_s", "productive_s", "startup_s", "checkpoint_s", "lost_work_s", "termination_s",
                   "restart_s", "slowdown_s"):
        assert abs(d[bucket] - truth[bucket]) <= tol, (bucket, d, truth)
    assert abs(d["goodput"] - truth["goodput"]) <= 0.01, (d, truth)
    assert abs(sum(d[k] for k in d if k.endswith("_s") and k != "wall_s") - d["wall_s"]) < 1e-6 * max(1.0, d["wall_s"])
    want, got = primary(exp, rep)
    assert got["kind"] == want["kind"], (got["summary"], got.get("evidence"))
    if want["kind"] != "completed":
        assert got["category"] == want["category"], got["summary"]
    if want.get("culprit_host"):
        assert got["culprit"]["host"] == want["culprit_host"], got["summary"]
    if got["kind"] not in ("completed",):
        assert got["evidence"] or got["kind"] == "slowdown", "a verdict must cite its evidence"
        for e in got["evidence"]:
            path = case / "job" / e["path"]
            lines = path.read_text(errors="replace").split("\n")
            assert e["text"].strip() and e["text"].strip() in lines[e["line"] - 1]


def test_line_accounting_and_sources_command(tmp_path: Path) -> None:
    case, _ = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml")
    job = case / "job"
    rep = analyze(job, tmp_path / "out").report
    assert rep["sources"]
    for s in rep["sources"]:
        data = (job / s["path"]).read_bytes()
        n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        assert s["lines"] == n, s["path"]
        assert s["lines"] == s["parsed"] + s["ignored"] + s["unparsed"], s["path"]
    by_parser = {s["parser"] for s in rep["sources"]}
    assert {"kernel", "dcgm", "sacct", "nccl", "elastic"} <= by_parser
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "sources", str(job), "--json", "-"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    listed = {s["path"]: s for s in json.loads(r.stdout)["sources"]}
    for s in rep["sources"]:
        got = listed[s["path"]]
        assert (got["parser"], got["lines"], got["parsed"], got["ignored"], got["unparsed"]) == (
            s["parser"], s["lines"], s["parsed"], s["ignored"], s["unparsed"])
    table = subprocess.run([sys.executable, "-m", "forensics.cli", "sources", str(job)],
                           capture_output=True, text=True, timeout=300)
    assert table.returncode == 0 and "unparsed" in table.stdout and "kernel" in table.stdout


def test_same_input_same_report(tmp_path: Path) -> None:
    case, _ = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "ib_link_error.toml")
    a = analyze(case / "job", tmp_path / "o1").report
    b = analyze(case / "job", tmp_path / "o2").report
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (tmp_path / "o1" / "report.md").read_text() == (tmp_path / "o2" / "report.md").read_text()

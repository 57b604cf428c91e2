"""`forensics explain-time`: on the demo job (the Makefile's `make demo`: gpu_fell_off_bus, seed
7) every bucket of report.json has a line with report.json's seconds, each attempt's shares add
up to the job's, and the lines it cites hold what it says they hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.downtime import BUCKETS, AttemptSpan, account
from forensics.explain_time import explain_path, explain_time, render
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"  # the Makefile's DEMO_SCENARIO, --seed 7


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    tmp = tmp_path_factory.mktemp("explain")
    case = simulate(load_scenario(DEMO), tmp / "case", 7)
    out = tmp / "out"
    rep = analyze(case / "job", out, html=False).report
    return case / "job", out, rep


def test_every_bucket_has_a_line_with_the_reports_seconds(demo: tuple[Path, Path, dict]) -> None:
    _, out, rep = demo
    got, lines = explain_path(out)
    assert got == rep
    total = {ln.bucket: ln.seconds for ln in lines if ln.attempt is None}
    want = {k[:-2]: v for k, v in rep["downtime"].items() if k.endswith("_s") and k != "wall_s"}
    assert set(want) == set(BUCKETS)
    assert total == want
    # the demo: attempt 0 crashes (the GPU fell off the bus), attempt 1 resumes and completes
    assert [a["end_reason"] for a in rep["attempts"]] == ["crash", "completed"]
    for a in rep["attempts"]:
        share = a["downtime"]
        mine = {ln.bucket: ln.seconds for ln in lines if ln.attempt == a["index"]}
        assert mine == {b: share[f"{b}_s"] for b in BUCKETS if share[f"{b}_s"]}
    for b in BUCKETS:  # the attempts' shares are the job's buckets
        assert sum(a["downtime"][f"{b}_s"] for a in rep["attempts"]) == pytest.approx(want[b], abs=0.002)
    by = {(ln.attempt, ln.bucket) for ln in lines}
    # the crash costs lost work and termination in attempt 0, the restart is attempt 1's
    assert {(0, "startup"), (0, "lost_work"), (0, "termination"), (1, "restart"), (0, "checkpoint")} <= by
    assert (1, "termination") not in by and (0, "restart") not in by
    text = render(rep, lines)
    for b in BUCKETS:
        assert f"  {b:<12} {want[b]:>12.3f} s  " in text


def _line(job: Path, where: dict) -> str:
    return (job / where["path"]).read_text(encoding="utf-8").splitlines()[where["line"] - 1]


def test_cited_lines_hold_what_they_are_cited_for(demo: tuple[Path, Path, dict]) -> None:
    job, _, rep = demo
    a0, a1 = rep["attempts"]
    for a in (a0, a1):
        ev = a["evidence"]
        for k in ("first_step", "last_step"):
            assert ev[k]["step"] == a[k]
            assert str(a[k]) in _line(job, ev[k]), (k, ev[k])
        assert ev["last_step"]["time"] == a["last_progress"]
        dur = ev["last_durable_checkpoint"]
        assert dur["time"] == a["last_durable_checkpoint"]
        assert str(dur["step"]) in _line(job, dur)
    # attempt 1 resumed from the checkpoint attempt 0 last saved, and the load line says so
    assert a1["resumed_from"] == a0["evidence"]["last_durable_checkpoint"]["step"]
    assert str(a1["resumed_from"]) in _line(job, a1["evidence"]["resumed_from"])
    # the scheduler placed both starts: sacct rows whose Start is the attempt's start
    for a in (a0, a1):
        st = a["evidence"]["start"]
        assert st["path"].endswith("sacct.txt") and st["time"] == a["start"]
        assert a["start"][11:19] in _line(job, st)
    f = a0["evidence"]["fault"]
    (x,) = rep["interruptions"]
    assert (f["interruption"], f["time"]) == (x["id"], x["time"])
    assert "Xid" in _line(job, f) or "fallen off the bus" in _line(job, f)
    saves = a0["evidence"]["saves"]
    assert saves["count"] == 3 and [s["step"] for s in saves["listed"]] == [500, 1000, 1500]
    for s in saves["listed"]:
        assert s["end_line"] == s["start_line"] + 1  # the trainer prints start then end


def test_cli_from_out_dir_and_from_job_dir_agree(demo: tuple[Path, Path, dict]) -> None:
    job, out, rep = demo
    a = cli("explain-time", str(out), "--json", "-")
    b = cli("explain-time", str(job), "--json", "-")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert ja == jb  # deterministic, and the temporary analysis is the same analysis
    assert [ln["seconds"] for ln in ja["lines"] if ln["attempt"] is None] == [
        rep["downtime"][f"{b}_s"] for b in BUCKETS]
    t = cli("explain-time", str(out))
    assert t.returncode == 0 and t.stdout == render(rep, explain_time(rep))
    assert not list(job.parent.glob("forensics-out*"))  # nothing written beside the job


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    r = cli("explain-time", str(tmp_path / "nope"))
    assert r.returncode == 2 and "no such file or directory" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "report.json"
    bad.write_text("{not json", encoding="utf-8")
    r = cli("explain-time", str(bad))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    bad.write_text('{"a": 1}', encoding="utf-8")
    r = cli("explain-time", str(tmp_path))
    assert r.returncode == 2 and "not a forensics report.json" in r.stderr


def test_account_splits_buckets_by_attempt() -> None:
    # attempt 0: start 0, first step 100, last progress 900, durable save ending 500, fault, end 1000
    # attempt 1: starts 1200 (wait 200), first step 1300, completes at 2000, one save 1500-1560
    s0 = AttemptSpan(0, 0, 1000, 100, 900, True, fault=950, saves=[(440, 500)], durable=[500], interruption_id="a0")
    s1 = AttemptSpan(1, 1200, 2000, 1300, 2000, False, saves=[(1500, 1560)], durable=[1560], slowdown_s=40)
    d = account([s0, s1], 8)
    by = d.by_attempt
    assert by[("startup", 0)] == 100 and by[("checkpoint", 0)] == 60
    assert by[("lost_work", 0)] == 400 and by[("termination", 0)] == 100
    assert by[("restart", 1)] == 300 and by[("checkpoint", 1)] == 60
    assert by[("slowdown", 1)] == 40
    assert by[("productive", 0)] == 340 and by[("productive", 1)] == 600  # 700 s of steps less the save and slowdown
    for b in BUCKETS:
        assert sum(v for (lab, _), v in by.items() if lab == b) == pytest.approx(d.buckets[b])
    assert {k for *_, k in d.intervals} == {0, 1}
    assert [iv[2] for iv in d.intervals if iv[4] == 1][0] == "restart"  # the wait opens attempt 1

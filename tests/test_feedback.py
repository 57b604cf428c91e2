"""Feedback on long work: each step of an analysis is announced (the CLI's status line on a
terminal), Ctrl-C says in one line what was kept, `weekly --week` of an absent week is an error
(exit 2) instead of an empty report, and `fleet ingest` of a folder with nothing recognizable
counts it as not ingested, with the reason."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics import fleet
from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "fixtures" / "jobs" / "001-nccl-ib-status12-vendor129-kp-ddp"


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's scenario (a GPU fell off the bus), a job with real times and a week."""
    tmp = tmp_path_factory.mktemp("case")
    return simulate(load_scenario(ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"), tmp / "case", 3)


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_every_step_of_an_analysis_is_announced(tmp_path: Path) -> None:
    stages: list[str] = []
    reads: list[tuple[int, int]] = []
    analyze(JOB, tmp_path / "out", progress=lambda d, t: reads.append((d, t)), stage=stages.append)
    assert reads and reads[-1][0] == reads[-1][1]  # reading: counted to the end
    assert stages == ["aligning clocks and attempts", "matching signatures and attributing",
                      "stragglers, slow episodes and downtime", "writing the store and the report",
                      "drawing the plots", "writing report.html"]
    stages.clear()
    analyze(JOB, tmp_path / "out2", html=False, stage=stages.append)
    assert "drawing the plots" not in stages and stages[-1] == "writing the store and the report"


def _junk_job(root: Path) -> Path:
    d = root / "junk-job" / "logs"
    d.mkdir(parents=True)
    rnd = random.Random(18)
    for i in range(3):
        (d / f"blob-{i}.log").write_bytes(rnd.randbytes(4096))
    return d.parent


def test_fleet_ingest_does_not_ingest_a_folder_of_random_bytes(tmp_path: Path, case: Path) -> None:
    roots = tmp_path / "jobs"
    junk = _junk_job(roots)
    store = tmp_path / "store"
    res = fleet.ingest([roots, case], store, workers=1, job_html=False)
    assert [Path(x["dir"]) for x in res.ingested] == [case / "job"]
    assert [Path(x["dir"]) for x in res.failed] == [junk]
    assert "nothing recognizable" in res.failed[0]["error"] and "3 file(s)" in res.failed[0]["error"]
    assert not list(store.glob("week=unknown"))
    assert not (store / "jobs" / fleet.job_key(junk)).exists()
    r = cli("fleet", "ingest", str(junk.parent / "junk-job"), "--store", str(tmp_path / "store2"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "not ingested: nothing recognizable" in r.stderr and "0 job(s) ingested" in r.stdout
    assert "1 not ingested" in r.stdout


def test_weekly_of_an_absent_week_is_an_error(tmp_path: Path, case: Path) -> None:
    store = tmp_path / "store"
    res = fleet.ingest([case], store, workers=1, job_html=False)
    (week,) = {x["week"] for x in res.ingested}
    out = tmp_path / "weekly"
    r = cli("weekly", "--store", str(store), "--week", "2020-W01", "--out", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"forensics: no jobs in week 2020-W01; weeks in the store: {week}"
    assert not out.exists()
    r = cli("weekly", "--store", str(store), "--week", week, "--out", str(out))
    assert r.returncode == 0 and json.loads((out / "weekly.json").read_text())["summary"]["jobs"] == 1


def test_ctrl_c_says_nothing_was_written(tmp_path: Path, case: Path) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "outs" / "r"
    proc = subprocess.Popen([sys.executable, "-m", "forensics.cli", "analyze", str(case / "job"), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(private_tmp)})
    deadline = time.monotonic() + 120
    while not list(private_tmp.glob("forensics-spill-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # the spill folder appears once the files are found: the analysis is under way
    assert proc.poll() is None, "the analysis ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "forensics: interrupted, nothing written" and "Traceback" not in stderr
    assert not out.exists() and not list(out.parent.glob(".r.*"))  # no half report, no leftovers
    assert not list(private_tmp.iterdir())  # temp folders cleaned up

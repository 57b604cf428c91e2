"""bench/floor.py (what the stack costs before any parsing) and bench/run.py's baselines, on a small
simulated job: they must touch every file and count what the analysis counts, and the baselines
must read every byte (timed through a pipe, never /dev/null, which GNU grep detects and then stops
at each file's first match)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from forensics.analysis import analyze
from forensics.signatures import catalog_literals, load_catalog
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    case = tmp_path_factory.mktemp("bench") / "case"
    simulate(load_scenario(ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"), case, 3)
    return case / "job"


def test_floor_loads_every_dcgm_sample_and_counts_every_other_line(job: Path, tmp_path: Path, bench_module: Callable[[str], ModuleType]) -> None:
    got = bench_module("floor").main(job, hash_files=True)
    files = [p for p in job.rglob("*") if p.is_file()]
    dcgm = [p for p in files if p.name == "dcgm.csv"]
    other = [p for p in files if p.name != "dcgm.csv"]
    assert got["dcgm_files"] == len(dcgm) > 0 and got["other_files"] == len(other)
    assert got["files_hashed"] == len(files) and got["hash_s"] is not None
    assert got["other_lines"] == sum(p.read_bytes().count(b"\n") for p in other)
    assert got["nccl_info_lines"] == sum(
        len(re.findall(rb" NCCL INFO ", p.read_bytes())) for p in other)
    # as many samples as the analysis stores: the floor loads the same data, only without the rules
    a = analyze(job, tmp_path / "out", html=False)
    assert got["dcgm_samples"] == a.sql("SELECT count(*) AS n FROM dcgm_samples")["n"][0] > 0


def test_floor_runs_as_the_benchmark_runs_it(job: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "floor.py"), str(job)],
                         capture_output=True, text=True, check=True)
    assert '"dcgm_samples"' in out.stdout and out.stderr == ""
    assert json.loads(out.stdout)["files_hashed"] == 0  # hashing only with --hash


def test_baselines_read_every_byte_of_every_file(job: Path, bench_module: Callable[[str], ModuleType]) -> None:
    run = bench_module("run")
    files = sorted(str(p) for p in job.rglob("*") if p.is_file())
    cat = run.timed(["cat", *files], 1, run.BASELINE_ENV)
    assert cat["output_bytes"] == sum(Path(f).stat().st_size for f in files) > 0
    assert cat["cpu_s"] >= 0 and cat["wall_s"] > 0
    grep = run.timed(["grep", "-E", "-c", "-e", run.grep_pattern(), *files], 1, run.BASELINE_ENV)
    counts = run.grep_counts(grep["output"])
    lits = [lit.encode() for lit in catalog_literals(load_catalog())]
    want = {f: sum(any(lit in ln for lit in lits) for ln in Path(f).read_bytes().split(b"\n")) for f in files}
    # every matching line of every file counted: a grep that stopped at a file's first match could not
    assert counts == want and max(want.values()) > 1


def test_grep_baseline_is_the_catalog_literals_escaped(bench_module: Callable[[str], ModuleType]) -> None:
    pat = bench_module("run").grep_pattern()
    lits = catalog_literals(load_catalog())
    assert len(pat.split("|")) >= len(lits) > 100
    for lit in lits:  # every literal is found by the ERE as itself
        hit = subprocess.run(["grep", "-E", "-c", "-e", pat], input=f"x {lit} y\n", capture_output=True, text=True)
        assert hit.stdout.strip() == "1", lit

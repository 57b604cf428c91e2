"""Every output path of every command is checked before any work starts: an unusable one is one
line on stderr and exit 2, never a traceback after minutes of analysis."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.outpaths import dir_problem, file_problem

JOB = Path(__file__).resolve().parents[1] / "fixtures" / "jobs" / "001-nccl-ib-status12-vendor129-kp-ddp"
SCENARIO = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / "healthy.toml"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.fixture
def bad(tmp_path: Path) -> dict[str, str]:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    return {"dir_under_file": str(blocker / "sub"), "file_as_dir": str(blocker),
            "json_no_parent": str(tmp_path / "nonexistent" / "dir" / "r.json"), "json_is_dir": str(folder),
            "json_under_file": str(blocker / "r.json")}


def commands(bad: dict[str, str], tmp_path: Path) -> list[list[str]]:
    ok_out = str(tmp_path / "ok-out")
    store = tmp_path / "store"
    cases = [
        ["analyze", str(JOB), "--out", bad["dir_under_file"]],
        ["analyze", str(JOB), "--out", bad["file_as_dir"]],
        ["simulate", str(SCENARIO), "--out", bad["dir_under_file"]],
        ["fleet", "ingest", str(JOB), "--store", bad["dir_under_file"]],
        ["fleet", "ingest", str(JOB), "--store", bad["file_as_dir"]],
        ["weekly", "--store", str(store), "--out", bad["file_as_dir"]],
        ["weekly", "--store", str(store), "--out", bad["dir_under_file"]],
        ["eval", str(JOB.parent), "--out", bad["dir_under_file"]],
        ["train", "--out", bad["json_is_dir"]],
        ["train", "--workdir", bad["dir_under_file"]],
    ]
    for key in ("json_no_parent", "json_is_dir", "json_under_file"):
        cases.append(["analyze", str(JOB), "--out", ok_out, "--json", bad[key]])
    return cases


def test_every_command_refuses_bad_output_paths_at_once(bad: dict[str, str], tmp_path: Path) -> None:
    for args in commands(bad, tmp_path):
        t0 = time.monotonic()
        r = run(*args)
        took = time.monotonic() - t0
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr + r.stdout, args
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("forensics: "), (args, r.stderr)
        assert ("--out" in lines[0] or "--json" in lines[0] or "--store" in lines[0]
                or "--workdir" in lines[0]), lines
        assert took < 30, (args, took)  # refused before the work, not after it
    assert not (tmp_path / "ok-out").exists()  # the analysis never ran


def test_path_rules(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    assert dir_problem(tmp_path / "new" / "deeper") is None
    assert dir_problem(tmp_path) is None
    assert "not a directory" in (dir_problem(f) or "")
    assert "is a file" in (dir_problem(f / "x" / "y") or "")
    assert file_problem("-") is None
    assert file_problem(tmp_path / "r.json") is None
    assert "no such directory" in (file_problem(tmp_path / "missing" / "r.json") or "")
    assert "is a directory" in (file_problem(tmp_path) or "")

"""tools/cuda_errors.py: the committed CUDA error table is what the installed toolkit says.

Runs where a CUDA toolkit is installed (this project's machines have one, for its headers and
libcudart; no GPU is needed); skipped, saying so, where none is.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "cuda_errors.py"
CUDA = Path("/usr/local/cuda")
TABLE = ROOT / "forensics" / "signatures" / "cuda_errors.csv"

needs_toolkit = pytest.mark.skipif(not (CUDA / "include" / "driver_types.h").is_file()
                                   or not list((CUDA / "lib64").glob("libcudart.so*")),
                                   reason="no CUDA toolkit at /usr/local/cuda")


@needs_toolkit
def test_the_committed_table_matches_the_toolkit() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--check", "--cuda", str(CUDA)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "matches the toolkit" in run.stdout


@needs_toolkit
def test_the_rows_come_from_the_toolkit() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import cuda_errors
    finally:
        sys.path.pop(0)
    text = cuda_errors.build(CUDA, cuda_errors.committed_families())
    rows = list(csv.DictReader(text.splitlines()))
    by_name = {r["runtime_name"]: r for r in rows}
    assert by_name["cudaErrorMemoryAllocation"]["message"] == "out of memory"
    assert by_name["cudaErrorMemoryAllocation"]["driver_name"] == "CUDA_ERROR_OUT_OF_MEMORY"
    assert by_name["cudaErrorIllegalAddress"]["message"] == "an illegal memory access was encountered"
    assert text == TABLE.read_bytes().decode()


def test_no_toolkit_is_a_clear_message(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--check", "--cuda", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "no CUDA toolkit at" in run.stderr and "Traceback" not in run.stderr

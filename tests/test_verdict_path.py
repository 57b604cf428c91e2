"""The verdict path: `forensics analyze --no-html` never imports matplotlib, the verdict is
printed before any output is written (and before DuckDB is imported; the store is written without
pyarrow), and report.json is the same as with the HTML report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "fixtures" / "jobs" / "021-dmesg-xid43-xid31-two-gpus-faulty-device" / "job"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _imported(stderr: str) -> set[str]:
    """Top-level package names from `python -X importtime` output."""
    return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", stderr, re.M)}


def test_no_html_skips_matplotlib_and_prints_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "forensics.cli", "analyze", str(JOB),
                          "--no-html", "--out", str(out)], capture_output=True, text=True, env=ENV, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    mods = _imported(run.stderr)
    assert {"polars", "forensics", "parsers", "duckdb"} <= mods  # the listing is real: the store is written
    assert "matplotlib" not in mods and "PIL" not in mods
    assert run.stdout.startswith("Verdict: ") and f"Report: {out / 'report.json'}" in run.stdout
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "forensics.duckdb"}


def test_verdict_comes_before_duckdb_and_the_outputs(tmp_path: Path) -> None:
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from forensics.analysis import analyze\n"
        "seen = {}\n"
        "def cb(rep, out):\n"
        "    seen.update(mods=sorted(m for m in ('duckdb', 'pyarrow', 'matplotlib') if m in sys.modules),\n"
        "                out_exists=Path(out).exists(), category=rep['verdict'].get('category'))\n"
        f"a = analyze({str(JOB)!r}, {str(tmp_path / 'fast')!r}, html=False, on_report=cb)\n"
        "seen['after'] = sorted(m for m in ('duckdb', 'pyarrow', 'matplotlib') if m in sys.modules)\n"
        "print(json.dumps(seen))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout)
    assert seen["mods"] == [] and seen["out_exists"] is False
    assert seen["after"] == ["duckdb"]  # the store, written after the verdict (frames go in without pyarrow)
    full = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(JOB), "--out", str(tmp_path / "full"),
                           "--quiet"], capture_output=True, text=True, env=ENV, timeout=300)
    assert full.returncode == 0, full.stderr[-2000:]
    assert (tmp_path / "full" / "report.html").is_file()
    fast = json.loads((tmp_path / "fast" / "report.json").read_text())
    assert fast == json.loads((tmp_path / "full" / "report.json").read_text())
    assert seen["category"] == fast["verdict"]["category"] is not None

"""Output piped into a file, `tee` or a CI log is plain text at full width: nothing wraps at 80
columns and no escape codes; rich styling only on a terminal or with --color; NO_COLOR respected."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.terminal import console_for

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "fixtures" / "jobs" / "001-nccl-ib-status12-vendor129-kp-ddp"
ESC = "\x1b["


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**e, **(env or {})})


def test_piped_output_is_full_width_and_plain(tmp_path: Path) -> None:
    out = tmp_path / ("a-rather-long-output-directory-name-" * 3).rstrip("-")
    r = run("analyze", str(JOB), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert ESC not in r.stdout
    lines = r.stdout.splitlines()
    assert f"Report: {out / 'report.html'}" in lines  # the path whole, on its line
    summary = lines[1].strip()
    # the verdict's summary is one line, as long as the report says it is
    rep = json.loads((out / "report.json").read_text())
    assert summary == rep["verdict"]["summary"] and len(summary) > 80
    ev = [ln for ln in lines if ln.startswith("  job/nccl.log:")]
    assert len(ev) == min(5, len(rep["verdict"]["evidence"])) and all(len(ln) > 80 for ln in ev)


def test_sources_table_not_wrapped_when_piped() -> None:
    r = run("sources", str(JOB))
    assert r.returncode == 0 and ESC not in r.stdout
    row = next(ln for ln in r.stdout.splitlines() if "nccl.log" in ln)
    assert "nccl" in row.split("nccl.log", 1)[1]  # path and parser on the same row


def test_color_flag_forces_and_no_color_forbids(tmp_path: Path) -> None:
    r = run("--color", "sources", str(JOB))
    assert r.returncode == 0 and ESC in r.stdout
    r = run("--no-color", "sources", str(JOB))
    assert r.returncode == 0 and ESC not in r.stdout


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_gets_rich_and_no_color_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    c = console_for(FakeTTY())
    assert c.is_terminal and not c.no_color
    c.print("[bold]x[/bold]")
    assert ESC in c.file.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    c = console_for(FakeTTY())
    c.print("[red]x[/red]")
    assert c.file.getvalue() == "x\n"  # no colour (NO_COLOR is about colour)
    c = console_for(FakeTTY(), color=True)  # an explicit --color wins over NO_COLOR
    c.print("[red]x[/red]")
    assert ESC in c.file.getvalue()
    piped = console_for(io.StringIO())
    piped.print("y" * 300)
    assert piped.file.getvalue() == "y" * 300 + "\n" and not piped.is_terminal

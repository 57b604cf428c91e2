"""CLI conventions: -h everywhere, clean flag help (no `<bool>`, no markup eating `[ray]`), enums as
choices, completion, --json PATH|- with one meaning, and the README's command table equal to what
each command's --help says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "fixtures" / "jobs" / "001-nccl-ib-status12-vendor129-kp-ddp"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def readme_table() -> dict[str, tuple[list[str], set[str]]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- commands:start -->")[1].split("<!-- commands:end -->")[0]
    rows = {}
    for line in block.strip().splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        cmd = cells[0].strip("`").removeprefix("forensics").strip()
        args = [a.strip("`").removesuffix("...") for a in cells[1].split()]
        opts = {o.replace("\\|", "|") for o in re.findall(r"`([^`]+)`", cells[2])}
        rows[cmd] = (args, opts)
    return rows


def help_of(cmd: str) -> tuple[list[str], set[str], str]:
    r = run(*cmd.split(), "-h")
    assert r.returncode == 0, r.stderr
    section = None
    args, opts = [], set()
    for line in r.stdout.splitlines():
        if line in ("Arguments:", "Options:", "Commands:"):
            section = line
            continue
        m = re.match(r"^  (\S.*?)(?:\s{2,}|$)", line)
        if not m:
            continue
        if section == "Arguments:":
            args.append(m.group(1).split()[0])
        elif section == "Options:" and m.group(1).startswith("-"):
            opts.add(m.group(1))
    opts.discard("-h, --help")
    return args, opts, r.stdout


def test_readme_command_table_matches_help() -> None:
    table = readme_table()
    assert set(table) == {"analyze", "sources", "explain-time", "simulate", "eval", "train", "fleet ingest", "weekly", ""}
    for cmd, (args, opts) in table.items():
        got_args, got_opts, _ = help_of(cmd)
        assert got_args == args, (cmd, got_args, args)
        assert got_opts == opts, (cmd, sorted(got_opts ^ opts))


def test_help_is_clean_everywhere() -> None:
    for cmd in ("", "analyze", "sources", "explain-time", "simulate", "eval", "train", "fleet", "fleet ingest", "weekly"):
        _, _, text = help_of(cmd)
        assert "-h, --help" in text
        assert "<bool>" not in text and "<str>" not in text, (cmd, text)
    assert "pip install 'forensics[ray]'" in help_of("fleet ingest")[2]
    assert "--install-completion" in help_of("")[2]


def test_engine_is_a_choice(tmp_path: Path) -> None:
    r = run("fleet", "ingest", str(JOB), "--store", str(tmp_path / "s"), "--engine", "spark")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "spark" in r.stderr and "local" in r.stderr and "ray" in r.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("cmd", ["sources", "analyze"])
def test_json_means_path_or_stdout(cmd: str, tmp_path: Path) -> None:
    extra = ["--out", str(tmp_path / "out")] if cmd == "analyze" else []
    r = run(cmd, str(JOB), *extra, "--json", "-")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # stdout is the JSON and nothing else
    target = tmp_path / "r.json"
    r2 = run(cmd, str(JOB), *extra, "--json", str(target))
    assert r2.returncode == 0, r2.stderr
    assert json.loads(target.read_text()) == data
    assert r2.stdout.strip() and not r2.stdout.lstrip().startswith("{")  # the text output as well
    key = "sources" if cmd == "sources" else "verdict"
    assert data[key]

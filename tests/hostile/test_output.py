"""Output: no --out inside the job dir, atomic reports, clean reruns, log text escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import forensics.outputs as outputs_mod
from forensics.analysis import OutputDirError, analyze

XID = ("[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.\n")
SCRIPT = "<script>alert('x')</script>"


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    (job / "node-001").mkdir(parents=True)
    (job / "node-001" / "dmesg.log").write_text(XID)
    (job / "node-001" / "rank-0.log").write_text(
        f"RuntimeError: boom {SCRIPT} | `code` [link](javascript:alert(1)) **bold** # head\n"
        f"fatal {SCRIPT}\n")
    return job


@pytest.mark.parametrize("inside", [".", "out", "node-001/out", "a/b/c"])
def test_out_inside_the_job_dir_refused(tmp_path: Path, inside: str, snapshot) -> None:  # noqa: ANN001
    job = _job(tmp_path)
    before = snapshot(job)
    with pytest.raises(OutputDirError, match="inside the job directory"):
        analyze(job, job / inside)
    assert snapshot(job) == before


def test_out_inside_via_symlink_refused(tmp_path: Path, snapshot) -> None:  # noqa: ANN001
    job = _job(tmp_path)
    (tmp_path / "alias").symlink_to(job)
    before = snapshot(job)
    with pytest.raises(OutputDirError):
        analyze(job, tmp_path / "alias" / "out")
    assert snapshot(job) == before


@pytest.mark.parametrize("where", [".", ".."])
def test_out_that_holds_the_job_refused(tmp_path: Path, where: str, snapshot) -> None:  # noqa: ANN001
    """The output folder is replaced when the run ends: one that holds the job (its parent, or
    higher) would take the evidence with it."""
    job = _job(tmp_path / "cases")
    before = snapshot(tmp_path)
    with pytest.raises(OutputDirError, match="holds the job"):
        analyze(job, tmp_path / "cases" / where)
    assert snapshot(tmp_path) == before


def test_out_that_is_a_foreign_folder_refused(tmp_path: Path, snapshot) -> None:  # noqa: ANN001
    """An existing folder that is not empty and holds no report.json is someone's data, never
    replaced; an empty one and an earlier output folder are."""
    job = _job(tmp_path)
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "sub" / "todo.txt").write_text("keep me\n")
    before = snapshot(notes)
    with pytest.raises(OutputDirError, match="no forensics output"):
        analyze(job, notes)
    assert snapshot(notes) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    analyze(job, empty)
    assert (empty / "report.json").is_file()
    analyze(job, empty)  # an earlier output: replaced
    assert json.loads((empty / "report.json").read_text())["verdict"]["category"] == "gpu_lost"


def test_out_that_is_a_file_refused(tmp_path: Path) -> None:
    job = _job(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputDirError, match="not a directory"):
        analyze(job, tmp_path / "file")


def _leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def test_failure_while_writing_leaves_old_output_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job(tmp_path)
    out = tmp_path / "out"
    analyze(job, out)
    old = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def broken(rep, path):  # noqa: ANN001, ANN202
        path.write_text("# half a report")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs_mod, "write_markdown", broken)
    with pytest.raises(OSError, match="No space left"):
        analyze(job, out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == old
    assert _leftovers(tmp_path, "out") == []


def test_failure_on_first_run_leaves_nothing_that_looks_complete(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job(tmp_path)

    def broken(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs_mod, "write_markdown", broken)
    with pytest.raises(KeyboardInterrupt):
        analyze(job, tmp_path / "out")
    assert not (tmp_path / "out").exists() and _leftovers(tmp_path, "out") == []


def test_rerun_replaces_cleanly(tmp_path: Path) -> None:
    job = _job(tmp_path)
    out = tmp_path / "out"
    analyze(job, out)
    (out / "stale-extra-file.txt").write_text("from an older version")
    (job / "node-001" / "dmesg.log").write_text("nothing here\n")
    rep = analyze(job, out).report
    assert not (out / "stale-extra-file.txt").exists()
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(rep))
    assert rep["verdict"]["category"] != "gpu_lost"
    assert _leftovers(tmp_path, "out") == []


def test_log_text_escaped_in_markdown_and_html(tmp_path: Path) -> None:
    job = _job(tmp_path)
    out = tmp_path / "out"
    rep = analyze(job, out).report
    assert any(SCRIPT in u["text"] for u in rep["unparsed_errors"]) or any(
        SCRIPT in (e["text"] or "") for x in rep["interruptions"] for e in x["evidence"])
    md = (out / "report.md").read_text()
    assert "<script" not in md.lower()
    assert "[link](" not in md and "\\[link\\](" in md  # no live link: brackets escaped
    html = out / "report.html"
    if html.exists():
        assert "<script>alert" not in html.read_text().lower()


def test_leftovers_of_a_killed_run_are_removed(tmp_path: Path) -> None:
    """A run killed between the two renames leaves `.out.old-PID` / `.out.tmp-*`: the next run
    removes those of dead processes (and stale temp dirs), not those of live ones."""
    import os
    import subprocess
    import time as _time

    from forensics.analysis import analyze
    from forensics.outputs import STALE_TMP_S

    job = tmp_path / "job"
    job.mkdir()
    (job / "dmesg.log").write_text("[  12.000000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale_old = tmp_path / f".out.old-{dead.pid}"
    stale_tmp = tmp_path / ".out.tmp-abc123"
    live_old = tmp_path / f".out.old-{os.getppid()}"
    fresh_tmp = tmp_path / ".out.tmp-inprogress"
    for d in (stale_old, stale_tmp, live_old, fresh_tmp):
        d.mkdir()
        (d / "report.json").write_text("{}")
    old = _time.time() - STALE_TMP_S - 10
    os.utime(stale_tmp, (old, old))
    analyze(job, tmp_path / "out", html=False)
    assert not stale_old.exists() and not stale_tmp.exists()
    assert live_old.exists() and fresh_tmp.exists()
    assert (tmp_path / "out" / "report.json").is_file()

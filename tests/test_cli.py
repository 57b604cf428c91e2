"""CLI error paths and commands, run as a user would (a subprocess): exit codes, one-line
messages, no traceback, and the job directory left untouched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_version_and_help() -> None:
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("forensics ")
    for cmd in ("analyze", "sources", "simulate"):
        r = run(cmd, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout


def test_missing_path(tmp_path: Path) -> None:
    r = run("analyze", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no such file or directory" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_file_where_directory_expected(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    r = run("analyze", str(f))
    assert r.returncode == 2 and "not a directory or archive" in r.stderr and "Traceback" not in r.stderr
    assert run("sources", str(f)).returncode == 2


def test_out_inside_job_dir_refused(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "a.log").write_text("x\n")
    before = tree_hash(job)
    r = run("analyze", str(job), "--out", str(job / "out"))
    assert r.returncode == 2 and "inside the job directory" in r.stderr
    assert tree_hash(job) == before


def test_empty_directory_gives_unknown_verdict(tmp_path: Path) -> None:
    job = tmp_path / "empty"
    job.mkdir()
    out = tmp_path / "out"
    r = run("analyze", str(job), "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["verdict"]["kind"] == "unknown"
    assert any("no files" in w for w in rep["warnings"])
    assert list(job.iterdir()) == []


def test_nothing_recognizable(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "notes.txt").write_text("shopping list\neggs\nmilk\n")
    (job / "image.bin").write_bytes(bytes(range(256)) * 40)
    out = tmp_path / "out"
    r = run("analyze", str(job), "--out", str(out), "--json", "-")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    # the text file's lines were read and screened (none looks like an error): no failure found is `none`;
    # the warning says that no file was a log this tool reads (docs/architecture.md, "Verdict" 5)
    assert rep["verdict"]["kind"] == "none"
    assert rep["verdict"]["summary"] == ("No interruption found in the sources read (1 file not recognized by any "
                                         "parser, its 3 lines screened for error lines; 1 more not read)")
    assert any("no file was recognized" in w for w in rep["warnings"])
    src = {s["path"]: s for s in rep["sources"]}
    assert src["notes.txt"]["parser"] is None and src["notes.txt"]["unparsed"] == 3
    assert any("binary" in w for w in src["image.bin"]["warnings"])


def test_a_line_two_signatures_cite_is_printed_once(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    out = tmp_path / "out"
    r = run("analyze", str(job), "--out", str(out), "--no-html")
    assert r.returncode == 0, r.stderr
    ev = json.loads((out / "report.json").read_text())["verdict"]["evidence"]
    # the report keeps both signatures' evidence for the line (the PyTorch rule's and the CUDA family's) ...
    assert sorted(e["signature"] for e in ev) == ["cuda-oom", "pt-cuda-oom"]
    assert {(e["path"], e["line"]) for e in ev} == {("train.log", 1)}
    # ... the terminal prints the line once
    assert [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("train.log:")] == [
        "train.log:1 torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]


def test_nothing_read_is_unknown(tmp_path: Path) -> None:
    """Only a binary and an empty file: no line read, so nothing can be said: `unknown`."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "image.bin").write_bytes(bytes(range(256)) * 40)
    (job / "empty.log").write_bytes(b"")
    r = run("analyze", str(job), "--out", str(tmp_path / "out"), "--json", "-")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["verdict"]
    assert (v["kind"], v["category"], v["summary"]) == ("unknown", "unknown", "No recognizable log content found")


def test_unreadable_file_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that cannot be read (permissions, vanished mid-run) is a warning; the rest goes on.
    Root reads everything, so the failure is injected at the read."""
    import forensics.ingest as ingest_mod
    from forensics.analysis import analyze

    job = tmp_path / "job"
    (job / "node-001").mkdir(parents=True)
    (job / "node-001" / "dmesg.log").write_text(
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    (job / "secret.log").write_text("x\n")
    real, real_whole = ingest_mod.read_head, ingest_mod._read_whole

    def flaky(sf, limits=None):  # noqa: ANN001, ANN202
        if sf.rel_path == "secret.log":
            raise PermissionError(13, "Permission denied")
        return real(sf, limits)

    def flaky_whole(sf):  # noqa: ANN001, ANN202 - the batched reader (forensics/bulk.py)
        if sf.rel_path == "secret.log":
            raise PermissionError(13, "Permission denied")
        return real_whole(sf)

    monkeypatch.setattr(ingest_mod, "read_head", flaky)
    monkeypatch.setattr(ingest_mod, "_read_whole", flaky_whole)
    rep = analyze(job, tmp_path / "out").report
    src = {s["path"]: s for s in rep["sources"]}
    assert any("could not be read" in w and "Permission denied" in w for w in src["secret.log"]["warnings"])
    assert rep["verdict"]["category"] == "gpu_lost" and rep["verdict"]["culprit"]["host"] == "node-001"


def test_dangling_symlink_is_a_warning(tmp_path: Path) -> None:
    import os

    job = tmp_path / "job"
    job.mkdir()
    os.symlink(job / "gone.log", job / "link.log")
    r = run("sources", str(job), "--json", "-")
    assert r.returncode == 0
    assert any("link.log" in w and "dangling" in w for w in json.loads(r.stdout)["warnings"])


def test_json_path_inside_job_dir_refused(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "a.log").write_text("x\n")
    before = tree_hash(job)
    r = run("analyze", str(job), "--out", str(tmp_path / "out"), "--json", str(job / "r.json"))
    assert r.returncode == 2 and "inside the job directory" in r.stderr
    assert tree_hash(job) == before


@pytest.mark.parametrize("extra", [[], ["--json", "-"]])
def test_closed_stdout_still_writes_the_outputs(tmp_path: Path, extra: list[str]) -> None:
    # `forensics analyze job | head -1`: the reader is gone before the verdict is printed; the report
    # and the store are still written, with no traceback and no "cannot write the outputs"
    job = tmp_path / "job"
    job.mkdir()
    (job / "slurm-1234.out").write_text(
        "slurmstepd: error: Detected 1 oom_kill event in StepId=1234.batch. Some of the step tasks have been OOM Killed.\n"
        "srun: error: gpu-node-07: task 0: Out Of Memory\n")
    out = tmp_path / "out"
    r, w = os.pipe()
    os.close(r)  # every write to stdout fails with EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(job), "--out", str(out),
                            "--no-html", *extra], stdout=w, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "cannot write" not in p.stderr and "Broken pipe" not in p.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["verdict"]["category"] == "oom"
    assert (out / "forensics.duckdb").is_file() and (out / "report.md").is_file()

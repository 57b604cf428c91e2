"""The analyzer never writes outside --out and its private temp dir: run on a read-only copy of a job
(chmod -R a-w; root ignores permissions, so every file's sha256, mode, size and mtime and the
directory listing are compared too), from a scratch working directory, with a private TMPDIR."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path

import pytest

from forensics.analysis import analyze

ROOT = Path(__file__).resolve().parents[2]


def _chmod_tree(root: Path, writable: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for n in [*dirnames, *filenames, "."]:
            p = Path(dirpath) / n if n != "." else Path(dirpath)
            if p.is_symlink():
                continue
            m = p.stat().st_mode
            p.chmod(m | stat.S_IWUSR if writable else m & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _job(base: Path) -> Path:
    job = base / "job"
    # 30 plain logs besides the Xid 79 (not from fixtures/fresh: its held-out batches grow every round,
    # and one more node dmesg among the 30 changes which GPU fault decides, not what this test checks)
    logs = [p for p in sorted((ROOT / "fixtures").rglob("*.log")) if "fresh" not in p.relative_to(ROOT).parts]
    for i, p in enumerate(logs[:30]):
        d = job / f"node-{i % 3:03d}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, d / p.name)
    (job / "node-000" / "dmesg.log.gz").write_bytes(gzip.compress(
        b"[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
        b"GPU has fallen off the bus.\n"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in (("inner/rank-1.log", b"[rank1]: RuntimeError: x\n"), ("../up.log", b"x\n")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    (job / "bundle.tar.gz").write_bytes(buf.getvalue())
    (job / "job.toml").write_text('name = "ro-job"\n')
    os.symlink("node-000/dmesg.log.gz", job / "latest.log.gz")
    return job


@pytest.mark.parametrize("as_tarball", [False, True])
def test_read_only_job_is_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot,  # noqa: ANN001
                                    as_tarball: bool) -> None:
    base = tmp_path / "evidence"
    base.mkdir()
    job = _job(base)
    if as_tarball:
        with tarfile.open(base / "job.tar.gz", "w:gz") as tf:
            tf.add(job, arcname="job")
        shutil.rmtree(job)
        target = base / "job.tar.gz"
    else:
        target = job
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    monkeypatch.chdir(cwd)
    _chmod_tree(base, writable=False)
    try:
        before = snapshot(base)
        out = tmp_path / "out"
        rep = analyze(target, out).report
        after = snapshot(base)
    finally:
        _chmod_tree(base, writable=True)
    assert after == before
    assert rep["verdict"]["category"] == "gpu_lost"
    assert list(private_tmp.iterdir()) == []  # the archive's temp dir is gone
    assert list(cwd.iterdir()) == []  # nothing dropped in the working directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "evidence", "out", "tmp"]
    assert {p.name for p in out.iterdir()} >= {"report.json", "report.md", "forensics.duckdb"}

"""Broken files: each gets a counted warning and the analysis goes on, in bounded time and memory."""

from __future__ import annotations

import gzip
import os
import time
import tracemalloc
from pathlib import Path

import pytest

import forensics.ingest as ingest_mod
from forensics.analysis import analyze
from forensics.config import load_job_config
from forensics.discovery import Limits, ReadPath, discover, iter_chunks
from forensics.ingest import ingest
from parsers.lines import MAX_LINE_CHARS

XID = ("[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.\n")


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    (job / "node-001").mkdir(parents=True)
    (job / "node-001" / "dmesg.log").write_text(XID)
    return job


def _run(job: Path, tmp_path: Path, **kw) -> tuple[dict, dict]:  # noqa: ANN003
    rep = analyze(job, tmp_path / "out", **kw).report
    assert rep["verdict"]["category"] == "gpu_lost"  # the real evidence still wins
    for s in rep["sources"]:
        assert s["lines"] == s["parsed"] + s["ignored"] + s["unparsed"], s
    return rep, {s["path"]: s for s in rep["sources"]}


def test_binary_nul_invalid_utf8_crlf_lone_cr(tmp_path: Path) -> None:
    job = _job(tmp_path)
    (job / "core.bin").write_bytes(os.urandom(20000))
    (job / "nul.log").write_bytes(b"a\x00b error one\n\x00\x00two\n")
    (job / "bad.log").write_bytes(b"caf\xe9 error in the data loader \xff\n" + b"normal line\n" * 3 + b"\xc3\n")
    (job / "crlf.log").write_bytes(b"one error\r\ntwo\r\nthree")
    (job / "cr.log").write_bytes(b"progress 1%\rprogress 50%\rprogress 100% failed\nnext\n")
    rep, src = _run(job, tmp_path)
    assert any("binary" in w for w in src["core.bin"]["warnings"])
    assert any("3 NUL bytes removed" in w for w in src["nul.log"]["warnings"])
    assert any("invalid UTF-8" in w for w in src["bad.log"]["warnings"])
    assert src["crlf.log"]["lines"] == 3 and src["cr.log"]["lines"] == 2
    texts = {(u["path"], u["text"]) for u in rep["unparsed_errors"]}
    assert ("crlf.log", "one error") in texts  # the CR is gone
    assert ("cr.log", "progress 100% failed") in texts  # last segment of a progress line
    assert ("nul.log", "ab error one") in texts
    assert any(p == "bad.log" and "\ufffd" in t for p, t in texts)


def test_50mb_single_line_is_cut_counted_and_bounded(tmp_path: Path) -> None:
    job = _job(tmp_path)
    line = b"error " + b"x" * (50 * 1024 * 1024)
    (job / "huge.log").write_bytes(line + b"\nafter error\n" + line)  # twice: mid-file and unterminated
    (job / "huge2.log.gz").write_bytes(gzip.compress(line, 1))
    tracemalloc.start()
    t0 = time.monotonic()
    rep, src = _run(job, tmp_path, limits=Limits(chunk_bytes=8 << 20))
    elapsed = time.monotonic() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 180  # loose: catches per-file blow-ups, not noise on a shared machine
    assert peak < 400 << 20  # Python-side allocations: far from 50 MB x copies
    h = src["huge.log"]
    assert h["lines"] == 3
    assert any(f"2 line(s) longer than {MAX_LINE_CHARS} bytes cut" in w for w in h["warnings"])
    assert any("huge.log" in w and "cut" in w for w in rep["warnings"])
    assert any("cut" in w for w in src["huge2.log.gz"]["warnings"])
    assert h["digest"] is not None and len(h["digest"]) == 64 and h["digest_algo"] in ("blake3", "blake2b-256")


def test_iter_chunks_memory_bounded_for_an_endless_line(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"y" * (30 << 20))
    (f,) = discover(tmp_path).files
    tracemalloc.start()
    out = list(iter_chunks(f, Limits(chunk_bytes=1 << 20, max_line_bytes=1000)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [len(c) for c, _ in out] == [1000] and peak < 16 << 20
    assert any("1 line(s) longer than 1000 bytes cut" in w for w in f.warnings)


def test_truncated_gzip_is_a_warning(tmp_path: Path) -> None:
    job = _job(tmp_path)
    data = gzip.compress(b"".join(f"line {i} error\n".encode() for i in range(50000)))
    (job / "cut.log.gz").write_bytes(data[: len(data) // 2])
    (job / "notgzip.log.gz").write_bytes(b"\x1f\x8b\x08garbage")
    _, src = _run(job, tmp_path)
    assert 0 < src["cut.log.gz"]["lines"] < 50000
    assert any("truncated or corrupt gzip" in w for w in src["cut.log.gz"]["warnings"])
    assert src["notgzip.log.gz"]["lines"] == 0


def test_file_that_disappears_or_changes_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job(tmp_path)
    (job / "gone.log").write_text("will vanish error\n")
    (job / "gone-late.log").write_text("vanishes after reading error\n")
    (job / "grows.log").write_text("first error\n" * 5000)
    real_iter = ingest_mod.iter_chunks

    def racing(sf, limits=None, chunk_bytes=None, hasher=None):  # noqa: ANN001, ANN202
        if sf.rel_path == "gone.log":
            sf.real_path.unlink()
        for piece in real_iter(sf, limits, chunk_bytes, hasher):
            yield piece
            if sf.rel_path == "grows.log":
                with open(sf.real_path, "ab") as fh:
                    fh.write(b"more\n")
        if sf.rel_path == "gone-late.log":
            sf.real_path.unlink()

    monkeypatch.setattr(ingest_mod, "iter_chunks", racing)
    # the race is staged in the file-by-file reader
    _, src = _run(job, tmp_path, limits=Limits(read=ReadPath(bulk=False, screen_small_files=False)))
    assert any("could not be read" in w for w in src["gone.log"]["warnings"])
    assert any("disappeared while it was being analyzed" in w for w in src["gone-late.log"]["warnings"])
    assert any("changed while it was being analyzed" in w for w in src["grows.log"]["warnings"])


def test_file_deleted_between_discovery_and_ingest(tmp_path: Path) -> None:
    job = _job(tmp_path)
    (job / "a.log").write_text("x\n")
    (job / "b.log").write_text("y\n" * 100000)
    d = discover(job)
    (job / "a.log").unlink()
    (job / "b.log").unlink()
    try:
        ing = ingest(d, load_job_config(job))
    finally:
        d.close()
    got = {f.rel_path: f for f in ing.files}
    for name in ("a.log", "b.log"):
        assert any("could not be read" in w for w in got[name].warnings), got[name].warnings


def test_unreadable_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root reads everything: the OSError is injected where the bytes are opened."""
    import forensics.discovery as disc_mod

    job = _job(tmp_path)
    (job / "secret.log").write_text("x error\n")
    (job / "big-secret.log").write_text("y\n" * 100000)
    (job / "locked").mkdir()
    (job / "locked" / "a.log").write_text("z\n")
    real_open, real_scandir = disc_mod.safe_open, disc_mod.os.scandir

    def deny(path):  # noqa: ANN001, ANN202
        if "secret" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    class _Os:
        def __getattr__(self, name):  # noqa: ANN001, ANN204
            return getattr(os, name)

        def scandir(self, path):  # noqa: ANN001, ANN202
            if str(path).endswith("locked"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_scandir(path)

    monkeypatch.setattr(disc_mod, "os", _Os())
    monkeypatch.setattr(disc_mod, "safe_open", deny)
    d = discover(job)
    d.close()
    assert any("locked" in w and "directory unreadable" in w for w in d.warnings)
    assert any("secret.log: unreadable (Permission denied)" in w for w in d.warnings)
    assert [f.rel_path for f in d.files] == ["node-001/dmesg.log"]
    monkeypatch.setattr(disc_mod, "safe_open", real_open)
    d = discover(job)  # readable at discovery, denied when ingest opens it
    monkeypatch.setattr(disc_mod, "safe_open", deny)
    try:
        ing = ingest(d, load_job_config(job))
    finally:
        d.close()
    got = {f.rel_path: f for f in ing.files}
    for name in ("secret.log", "big-secret.log"):
        assert any("could not be read" in w and "Permission denied" in w for w in got[name].warnings)
    assert got["node-001/dmesg.log"].events.height == 1


def test_deep_nesting(tmp_path: Path) -> None:
    job = _job(tmp_path)
    d = job
    for i in range(200):
        d = d / f"d{i % 10}"
    d.mkdir(parents=True)
    (d / "deep.log").write_text("deep error\n")
    disc = discover(job)
    assert not any(f.rel_path.endswith("deep.log") for f in disc.files)
    assert any("nested deeper than 64 directories" in w for w in disc.warnings)
    disc = discover(job, Limits(max_depth=1000))
    assert any(f.rel_path.endswith("deep.log") for f in disc.files)
    rep, src = _run(job, tmp_path, limits=Limits(max_depth=1000))
    assert any(u["text"] == "deep error" for u in rep["unparsed_errors"])


def test_20000_tiny_files(tmp_path: Path) -> None:
    job = _job(tmp_path)
    many = job / "many"
    many.mkdir()
    for i in range(20000):
        (many / f"f{i:05d}.log").write_bytes(b"hello %d\n" % i if i % 1000 else b"step %d failed\n" % i)
    (many / "f-nccl.log").write_text("node-001:12:34 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    t0 = time.monotonic()
    rep, src = _run(job, tmp_path)
    assert time.monotonic() - t0 < 180  # loose: catches blow-ups, not noise
    assert len(src) == 20002
    assert src["many/f00001.log"]["unparsed"] == 1
    assert sum(1 for u in rep["unparsed_errors"] if u["path"].startswith("many/")) == 20
    assert src["many/f-nccl.log"]["parser"] == "nccl"


def test_file_limit(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"{i:02d}.log").write_text("x\n")
    d = discover(tmp_path, Limits(max_files=25))
    assert len(d.files) == 25 and any("more than 25 files" in w for w in d.warnings)


def test_fifo_socket_and_symlink_loops_skipped(tmp_path: Path) -> None:
    job = _job(tmp_path)
    os.mkfifo(job / "pipe.log")
    os.symlink("loop.log", job / "loop.log")
    os.symlink(tmp_path, job / "up")
    os.symlink("node-001/dmesg.log", job / "latest.log")
    d = discover(job)
    w = "\n".join(d.warnings)
    assert "pipe.log: not a regular file" in w and "loop.log: symlink loop" in w
    assert "up: symlink pointing outside" in w
    latest = next(f for f in d.files if f.rel_path == "latest.log")
    assert latest.real_path == (job / "node-001" / "dmesg.log").resolve()


def test_small_file_screening_matches_file_by_file(tmp_path: Path) -> None:
    """The batch pre-screen of small files gives the same per-file results as parsing each alone."""
    root = Path(__file__).resolve().parents[2] / "fixtures"
    job = tmp_path / "job"
    job.mkdir()
    for k, p in enumerate(sorted(root.rglob("*.log"))):
        (job / f"{k:03d}-{p.name}").write_bytes(p.read_bytes())
        (job / f"{k:03d}-junk.log").write_text(f"junk {k}\nerror {k}\n\n")
    cfg = load_job_config(job)

    def run(read: ReadPath | None = None) -> dict:
        d = discover(job)
        try:
            ing = ingest(d, cfg, Limits(read=read or ReadPath()))
        finally:
            d.close()
        return {f.rel_path: (f.lines, f.parsed, f.ignored, f.unparsed, f.parser, f.digest, f.events.height,
                             f.unparsed_errors.to_dicts(), f.first_ts, f.last_ts, sorted(f.warnings)) for f in ing.files}

    batched = run()
    screened = run(ReadPath(bulk=False))
    assert run(ReadPath(bulk=False, screen_small_files=False)) == batched == screened

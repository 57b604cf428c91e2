"""Discovery: path hints, compressed files, archives (safely), symlinks, binary detection."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest
import zstandard

from forensics.discovery import (
    JobDirError,
    Limits,
    discover,
    is_archive,
    iter_chunks,
    looks_binary,
    path_hints,
)


@pytest.mark.parametrize(("path", "host", "rank", "attempt"), [
    ("logs/attempt-1/node-003/rank-25.log", "node-003", 25, 1),
    ("nodes/gpu-a17/dmesg.log", "gpu-a17", None, None),
    ("nccl.node-17.123456.log", "node-17", None, None),
    ("logs/rank12.log", None, 12, None),
    ("slurm/sacct.txt", None, None, None),
    ("bundle.tar.gz!job/nodes/cn234/dmesg.txt", "cn234", None, None),
    ("logs/s1/node-003/rank-25.log", "node-003", 25, 1),
    ("logs/try-2/rank-3.log", None, 3, 2),
    ("logs/retry_3/gpu-a17/torchrun.log", "gpu-a17", None, 3),
    ("logs/node-003/s2.log", "node-003", None, None),
    # an archive's name, without its suffix, is a folder's (the bundle analyzed as the job: test_archives.py)
    ("logs/node3.tar.gz!var/log/dmesg.log", "node3", None, None),
    ("collected/gpu-a17.zip!dmesg.txt", "gpu-a17", None, None),
    # a folder named by a job id is the job's, not a host's
    ("job-4711/dmesg.log", None, None, None),
    ("jobs/job_4711/node-7/rank-2.log", "node-7", 2, None),
])
def test_path_hints(path: str, host: str | None, rank: int | None, attempt: int | None) -> None:
    assert path_hints(path) == (host, rank, attempt)


def test_missing_path_raises() -> None:
    with pytest.raises(JobDirError, match="no such file or directory"):
        discover(Path("/nonexistent/job"))


def test_gzip_zstd_and_plain_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("one\ntwo\n")
    (tmp_path / "b.log.gz").write_bytes(gzip.compress(b"x\ny\nz\n"))
    (tmp_path / "c.log.zst").write_bytes(zstandard.ZstdCompressor().compress(b"p\nq\n"))
    d = discover(tmp_path)
    got = {f.rel_path: b"".join(c for c, _ in iter_chunks(f)) for f in d.files}
    assert got == {"a.log": b"one\ntwo\n", "b.log.gz": b"x\ny\nz\n", "c.log.zst": b"p\nq\n"}


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(f"line {i}\n".encode() for i in range(20000)))
    (tmp_path / "t.log.gz").write_bytes(data[: len(data) // 2])
    f = discover(tmp_path).files[0]
    text = b"".join(c for c, _ in iter_chunks(f))
    assert text.startswith(b"line 0\n") and 0 < text.count(b"\n") < 20000
    assert any("truncated" in w for w in f.warnings)


def test_chunks_cut_at_newlines_and_number_lines(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"".join(f"{i}\n".encode() for i in range(1, 1001)) + b"tail")
    f = discover(tmp_path).files[0]
    chunks = list(iter_chunks(f, chunk_bytes=100))
    assert all(c.endswith(b"\n") for c, _ in chunks[:-1])
    first_nos = [n for _, n in chunks]
    for (c, n), nxt in zip(chunks, first_nos[1:], strict=False):
        assert n + c.count(b"\n") == nxt
    assert chunks[-1][0].endswith(b"tail")


def _tar_with(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def test_tar_members_unpacked_privately_and_unsafe_ones_refused(tmp_path: Path) -> None:
    def reg(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        return ti, data

    link = tarfile.TarInfo("logs/evil-link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    dev = tarfile.TarInfo("logs/dev")
    dev.type = tarfile.CHRTYPE
    job = tmp_path / "job"
    job.mkdir()
    (job / "bundle.tar.gz").write_bytes(_tar_with([
        reg("logs/node-1/rank-0.log", b"hello\n"), reg("../escape.log", b"no\n"), reg("/abs.log", b"no\n"),
        (link, None), (dev, None)]))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    d = discover(job)
    assert [f.rel_path for f in d.files] == ["bundle.tar.gz!logs/node-1/rank-0.log"]
    assert d.files[0].host_hint == "node-1" and d.files[0].rank_hint == 0
    assert not str(d.files[0].real_path).startswith(str(job))
    w = " ".join(d.warnings)
    assert "unsafe member path" in w and "link inside archive" in w and "special file" in w
    d.close()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written next to the evidence


def test_tar_expanded_size_limit(tmp_path: Path) -> None:
    ti = tarfile.TarInfo("big.log")
    data = b"x\n" * 5000
    ti.size = len(data)
    (tmp_path / "b.tar.gz").write_bytes(_tar_with([(ti, data), (ti, data)]))
    d = discover(tmp_path, Limits(max_expanded_bytes=len(data) + 10))
    assert len(d.files) == 1 and any("expanded size limit" in w for w in d.warnings)
    d.close()


def test_symlink_out_of_job_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    job = tmp_path / "job"
    job.mkdir()
    (job / "ok.log").write_text("x\n")
    os.symlink(outside, job / "link.log")
    d = discover(job)
    assert [f.rel_path for f in d.files] == ["ok.log"]
    assert any("symlink pointing outside" in w for w in d.warnings)


def test_binary_detection() -> None:
    assert looks_binary(bytes(range(256)) * 10)
    assert not looks_binary("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus. ünïcode\n".encode() * 10)


def _v7(tar: bytes) -> bytes:
    """The same tar with the first header's ustar magic blanked (an old v7 tar), checksum redone."""
    h = bytearray(tar[:512])
    h[257:265] = bytes(8)
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h) + tar[512:]


@pytest.mark.parametrize("fmt,mode,v7", [(tarfile.GNU_FORMAT, "w", True), (tarfile.GNU_FORMAT, "w", False),
                                         (tarfile.USTAR_FORMAT, "w", False), (tarfile.PAX_FORMAT, "w:bz2", False),
                                         (tarfile.GNU_FORMAT, "w:xz", False)])
def test_archive_detection_agrees_with_tarfile(tmp_path: Path, fmt: int, mode: str, v7: bool) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=fmt) as tf:  # type: ignore[call-overload]
        ti = tarfile.TarInfo("logs/rank-0.log")
        data = b"x" * 700
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    bundle = tmp_path / "bundle.bin"  # no telling suffix: detection reads the bytes
    bundle.write_bytes(_v7(buf.getvalue()) if v7 else buf.getvalue())
    if v7:
        assert b"ustar" not in bundle.read_bytes()[:512]
    log = tmp_path / "big.log"
    log.write_bytes(b"2024-01-01 00:00:00 INFO step 1\n" * 40)  # 1.3 kB of text: not a tar
    for p in (bundle, log):
        assert is_archive(p) == tarfile.is_tarfile(str(p))
    assert is_archive(bundle) and not is_archive(log)


@pytest.mark.parametrize("max_line", [1, 2, 7, 8, 1000])
def test_iter_chunks_cuts_every_overlong_line_wherever_it_starts(tmp_path: Path, max_line: int) -> None:
    # the chunk is checked window by window for lines over the cap: a line just over it (or twice it)
    # starting at any offset is still found and cut, one just under it is kept whole
    for length in sorted({max(0, max_line - 1), max_line, max_line + 1, 2 * max_line - 1, 2 * max_line,
                          2 * max_line + 1}):
        for offset in range(0, max_line + 2):
            data = b"a" * offset + b"\n" + b"x" * length + b"\n" + b"b\n" * 3
            f = tmp_path / "a.log"
            f.write_bytes(data)
            (sf,) = discover(tmp_path).files
            got = b"".join(c for c, _ in iter_chunks(sf, Limits(chunk_bytes=1 << 20, max_line_bytes=max_line)))
            want = b"".join(ln[:max_line] + b"\n" for ln in data.split(b"\n")[:-1])
            assert got == want, (length, offset)
            cut = sum(len(ln) > max_line for ln in data.split(b"\n"))
            assert any(f"{cut} line(s) longer than" in w for w in sf.warnings) == (cut > 0), (length, offset)


def test_utf16_files_read_as_utf8(tmp_path: Path) -> None:
    """PowerShell 5's `>` and `Out-File` write UTF-16 with a byte-order mark (and CRLF): read as the text."""
    text = "[2024-05-01 10:00:00] torch.cuda.OutOfMemoryError: CUDA out of memory. Tried 2.00 GiB — GPU 0\r\nok ü\r\n"
    job = tmp_path / "job"
    job.mkdir()
    (job / "le.log").write_bytes(text.encode("utf-16"))  # the platform's order, with its mark (LE here)
    (job / "be.log").write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    (job / "odd.bin").write_bytes(b"\xff\xfe" + bytes(range(1, 256)) * 4)  # a mark, but no UTF-16 text after it
    d = discover(job)
    try:
        got = {f.rel_path: f for f in d.files}
        assert (got["le.log"].compression, got["be.log"].compression, got["odd.bin"].compression) == (
            "utf-16", "utf-16", None)
        for name in ("le.log", "be.log"):
            assert b"".join(c for c, _ in iter_chunks(got[name])).decode("utf-8") == text
    finally:
        d.close()

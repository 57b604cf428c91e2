"""Archives: unsafe members are never extracted or followed outside the private temp dir;
decompression bombs stop at the limits with a warning and the rest of the job is analyzed."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from forensics.analysis import analyze
from forensics.discovery import Limits, discover, iter_chunks

XID = (b"[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
       b"GPU has fallen off the bus.\n")


def _member(name: str, data: bytes | None = None, kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple:
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, link
    if data is not None:
        ti.size = len(data)
    return ti, data


def _tar(members: list[tuple], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for ti, data in members:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def test_unsafe_members_never_leave_the_temp_dir(tmp_path: Path, snapshot) -> None:  # noqa: ANN001
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret error\n")
    job = tmp_path / "job"
    job.mkdir()
    (job / "bundle.tar.gz").write_bytes(_tar([
        _member("node-1/dmesg.log", XID),
        _member("../../outside/evil.log", b"dotdot error\n"),
        _member("/tmp/abs-evil.log", b"absolute error\n"),
        _member("a/../../b.log", b"sneaky error\n"),
        _member("sym", kind=tarfile.SYMTYPE, link=str(outside / "secret.txt")),
        _member("hard", kind=tarfile.LNKTYPE, link=str(outside / "secret.txt")),
        _member("rel-sym", kind=tarfile.SYMTYPE, link="../../outside/secret.txt"),
        _member("dev", kind=tarfile.CHRTYPE),
        _member("blk", kind=tarfile.BLKTYPE),
        _member("fifo", kind=tarfile.FIFOTYPE),
        _member("sym/through-link.log", b"through a link error\n"),
        _member("node-1/dmesg.log", b"duplicate name error\n"),
    ]))
    before_outside = snapshot(outside)
    before_job = snapshot(job)
    d = discover(job)
    try:
        tmp = Path(d.tempdir.name).resolve()
        for f in d.files:
            assert tmp in f.real_path.resolve().parents
        names = [f.rel_path for f in d.files]
        assert "bundle.tar.gz!node-1/dmesg.log" in names
        assert not any("evil" in n or "sneaky" in n for n in names)
        texts = [b"".join(c for c, _ in iter_chunks(f)) for f in d.files]
        assert XID in texts and b"duplicate name error\n" in texts  # same name twice: both kept
        w = "\n".join(d.warnings)
        assert w.count("unsafe member path") == 3
        assert w.count("link inside archive") == 3
        assert w.count("special file inside archive") == 3
    finally:
        d.close()
    assert not tmp.exists()
    assert snapshot(outside) == before_outside and snapshot(job) == before_job
    assert not Path("/tmp/abs-evil.log").exists()


def test_gzip_bomb_capped_and_rest_analyzed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "node-001").mkdir(parents=True)
    (job / "node-001" / "dmesg.log").write_bytes(XID)
    (job / "bomb.log.gz").write_bytes(gzip.compress(b"error: " + b"A" * (4 << 20) + b"\n" * (4 << 20), 9))
    limits = Limits(max_ratio=10, min_capped_bytes=1 << 20)
    rep = analyze(job, tmp_path / "out", limits=limits).report
    bomb = next(s for s in rep["sources"] if s["path"] == "bomb.log.gz")
    assert any("decompression bomb" in w for w in bomb["warnings"])
    assert any("bomb.log.gz" in w and "decompression bomb" in w for w in rep["warnings"])
    assert rep["verdict"]["category"] == "gpu_lost"


def test_gzip_just_under_the_cap_is_not_flagged(tmp_path: Path) -> None:
    (tmp_path / "a.log.gz").write_bytes(gzip.compress(b"x\n" * 1000))
    (f,) = discover(tmp_path).files
    assert b"".join(c for c, _ in iter_chunks(f, Limits(min_capped_bytes=2000, max_ratio=1))) == b"x\n" * 1000
    assert not f.warnings


def test_tar_bomb_ratio_and_total_limits(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    zeros = b"\n" * (2 << 20)
    (job / "bomb.tar.gz").write_bytes(_tar([_member(f"z{i}.log", zeros) for i in range(8)]))
    (job / "ok.log").write_bytes(XID)
    d = discover(job, Limits(max_ratio=50, min_capped_bytes=1 << 20))
    try:
        assert any("expansion ratio" in w and "decompression bomb" in w for w in d.warnings)
        assert sum(f.rel_path.startswith("bomb.tar.gz!") for f in d.files) < 8
        assert any(f.rel_path == "ok.log" for f in d.files)
    finally:
        d.close()
    d = discover(job, Limits(max_expanded_bytes=3 << 20))
    try:
        assert any("expanded size limit" in w for w in d.warnings)
        assert sum(f.rel_path.startswith("bomb.tar.gz!") for f in d.files) == 1
    finally:
        d.close()


def test_gzip_member_inside_tar_is_capped_too(tmp_path: Path) -> None:
    inner = gzip.compress(b"\n" * (4 << 20), 9)
    (tmp_path / "b.tar").write_bytes(_tar([_member("x.log.gz", inner)], mode="w"))
    d = discover(tmp_path)
    try:
        (f,) = d.files
        assert f.compression == "gzip"
        list(iter_chunks(f, Limits(max_ratio=2, min_capped_bytes=1 << 16)))
        assert any("decompression bomb" in w for w in f.warnings)
    finally:
        d.close()


def test_truncated_and_corrupt_archives_keep_what_was_read(tmp_path: Path) -> None:
    good = _tar([_member("node-1/a.log", b"first\n"), _member("node-1/b.log", b"x\n" * 200000)])
    (tmp_path / "cut.tar.gz").write_bytes(good[: len(good) // 2])
    (tmp_path / "junk.tar.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 100)
    (tmp_path / "tiny.tar").write_bytes(b"not a tar at all")
    d = discover(tmp_path)
    try:
        assert "cut.tar.gz!node-1/a.log" in [f.rel_path for f in d.files]
        assert any("cut.tar.gz" in w and "truncated or corrupt" in w for w in d.warnings)
        assert any("junk.tar.gz" in w and "truncated or corrupt" in w for w in d.warnings)
    finally:
        d.close()


def test_archive_member_file_limit(tmp_path: Path) -> None:
    (tmp_path / "many.tar").write_bytes(_tar([_member(f"f{i}.log", b"x\n") for i in range(50)], mode="w"))
    d = discover(tmp_path, Limits(max_files=10))
    try:
        assert len(d.files) == 10 and any("file limit" in w or "more than 10 files" in w for w in d.warnings)
    finally:
        d.close()


def test_analyze_a_hostile_tarball_directly(tmp_path: Path, snapshot) -> None:  # noqa: ANN001
    job_tar = tmp_path / "job.tar.gz"
    job_tar.write_bytes(_tar([_member("job/node-001/dmesg.log", XID),
                              _member("../escape.log", b"x\n"),
                              _member("job/l", kind=tarfile.SYMTYPE, link="/etc/shadow")]))
    before = snapshot(tmp_path)
    rep = analyze(job_tar, tmp_path / "out").report
    assert rep["verdict"]["category"] == "gpu_lost"
    assert any("unsafe member path" in w for w in rep["warnings"])
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("out") and k != "."} == \
        {k: v for k, v in before.items() if k != "."}

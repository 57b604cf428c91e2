"""Archives: unsafe members are never extracted or followed outside the private temp dir;
decompression bombs stop at the limits with a warning and the rest of the job is analyzed."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import stat
import tarfile
import zipfile
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


def _zip(members: list[tuple[str, bytes, int]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip of (name, data, unix mode) members (mode 0: none recorded, as Windows archivers write)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data, mode in members:
            zi = zipfile.ZipInfo(name, date_time=(2025, 2, 23, 16, 24, 18))
            zi.compress_type = method
            zi.external_attr = mode << 16
            zf.writestr(zi, data)
    return buf.getvalue()


def test_zip_members_unsafe_ones_never_leave_the_temp_dir(tmp_path: Path, snapshot) -> None:  # noqa: ANN001
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret error\n")
    job = tmp_path / "job"
    job.mkdir()
    (job / "logs.zip").write_bytes(_zip([
        ("node-1/dmesg.log", XID, stat.S_IFREG | 0o644),
        ("node-2\\rank3.log", b"RuntimeError: CUDA error: an illegal memory access was encountered\n", 0),
        ("../../outside/evil.log", b"dotdot error\n", 0),
        ("/tmp/abs-evil.log", b"absolute error\n", 0),
        ("a\\..\\..\\b.log", b"sneaky error\n", 0),
        ("sym", str(outside / "secret.txt").encode(), stat.S_IFLNK | 0o777),
        ("fifo", b"", stat.S_IFIFO | 0o644),
        ("node-1/dmesg.log", b"duplicate name error\n", 0),
    ]))
    # a zip file under another name (a PyTorch checkpoint is one) is a binary file, not unpacked
    (job / "model.pt").write_bytes(_zip([("archive/data.pkl", b"\x80\x04 not a log", 0)]))
    before_outside, before_job = snapshot(outside), snapshot(job)
    d = discover(job)
    try:
        tmp = Path(d.tempdir.name).resolve()
        names = [f.rel_path for f in d.files]
        assert names == ["logs.zip!node-1/dmesg.log", "logs.zip!node-2/rank3.log",
                         "logs.zip!node-1/dmesg.log", "model.pt"]  # same name twice: both kept
        assert all(tmp in f.real_path.resolve().parents for f in d.files if f.rel_path.startswith("logs.zip!"))
        assert [(f.host_hint, f.rank_hint) for f in d.files[:2]] == [("node-1", None), ("node-2", 3)]
        texts = [b"".join(c for c, _ in iter_chunks(f)) for f in d.files[:3]]
        assert texts[0] == XID and texts[2] == b"duplicate name error\n"
        w = "\n".join(d.warnings)
        assert w.count("unsafe member path") == 3
        assert w.count("link inside archive") == 1
        assert w.count("special file inside archive") == 1
    finally:
        d.close()
    assert not tmp.exists()
    assert snapshot(outside) == before_outside and snapshot(job) == before_job
    assert not Path("/tmp/abs-evil.log").exists()


def test_zip_encrypted_damaged_and_truncated(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    second = b"".join(b"second member %d\n" % i for i in range(200_000))  # 3.6 MB: read in pieces
    data = _zip([("a.log", XID, 0), ("b.log", second, 0), ("c.log", b"third member\n", 0)])
    # member b's stored CRC broken (in its local header and in the central directory): what was read before
    # the check failed (at its end) is kept, with a warning
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo("b.log")
        crc = info.CRC.to_bytes(4, "little")
    assert data.count(crc) == 2
    (job / "crc.zip").write_bytes(data.replace(crc, bytes(b ^ 0xFF for b in crc)))
    # the encrypted-flag bit set on member a (in both headers): not read
    enc = bytearray(data)
    for sig, off in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = enc.find(sig)
        enc[at + off] |= 0x1
    (job / "enc.zip").write_bytes(bytes(enc))
    (job / "cut.zip").write_bytes(data[: len(data) // 2])  # no central directory
    d = discover(job)
    try:
        names = [f.rel_path for f in d.files]
        assert names == ["crc.zip!a.log", "crc.zip!b.log", "crc.zip!c.log", "enc.zip!b.log", "enc.zip!c.log"]
        kept = b"".join(c for c, _ in iter_chunks(d.files[1]))
        assert len(kept) >= 2 << 20 and second.startswith(kept)
        w = "\n".join(d.warnings)
        assert "crc.zip!b.log: damaged (Bad CRC-32 for file 'b.log'); read up to the damage" in w
        assert "enc.zip!a.log: encrypted member, not read" in w
        assert "cut.zip: archive truncated or corrupt (File is not a zip file)" in w
    finally:
        d.close()


def test_zip_bomb_stops_at_the_ratio(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "bomb.zip").write_bytes(_zip([("a.log", XID, 0), ("zeros.log", b"\n" * (8 << 20), 0),
                                         ("after.log", b"never unpacked\n", 0)]))
    d = discover(job, Limits(max_ratio=10.0, min_capped_bytes=1 << 20))
    try:
        assert [f.rel_path for f in d.files] == ["bomb.zip!a.log"]
        assert any("expansion ratio above 10 (possible decompression bomb)" in w for w in d.warnings)
    finally:
        d.close()


def test_zip_bundle_analyzed_as_the_job(tmp_path: Path) -> None:
    """`analyze job-4711.zip`: the bundle's job.toml is read, and neither its name nor its single top
    folder becomes a host (the same for a tar bundle)."""
    dmesg = b"[  10.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
    members = [("job-4711/job.toml", b'name = "zipped"\ntimezone = "UTC"\n', 0), ("job-4711/dmesg.log", dmesg, 0)]
    (tmp_path / "job-4711.zip").write_bytes(_zip(members))
    (tmp_path / "job-4711.tar.gz").write_bytes(_tar([_member(n, b) for n, b, _ in members]))
    for bundle in ("job-4711.zip", "job-4711.tar.gz"):
        rep = analyze(tmp_path / bundle, tmp_path / f"out-{bundle}", html=False).report
        assert rep["job"]["name"] == "zipped"
        assert rep["verdict"]["category"] == "gpu_lost"
        assert rep["verdict"]["culprit"]["host"] is None and rep["verdict"]["culprit"]["pci_bus_id"] == "0000:3b:00"
        assert rep["verdict"]["evidence"][0]["path"] == f"{bundle}!job-4711/dmesg.log"


def test_xz_and_bzip2_files_are_read_and_a_cut_one_keeps_its_head(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    lines = b"".join(b"line %d\n" % i for i in range(20_000))
    (job / "a.log.xz").write_bytes(lzma.compress(lines))
    (job / "b.log.bz2").write_bytes(bz2.compress(lines))
    (job / "cut.log.xz").write_bytes(lzma.compress(lines)[:2000])
    d = discover(job)
    try:
        assert [(f.rel_path, f.compression) for f in d.files] == [
            ("a.log.xz", "xz"), ("b.log.bz2", "bzip2"), ("cut.log.xz", "xz")]
        assert [b"".join(c for c, _ in iter_chunks(f)) for f in d.files[:2]] == [lines, lines]
        cut = b"".join(c for c, _ in iter_chunks(d.files[2]))
        assert 0 < len(cut) < len(lines) and lines.startswith(cut)
        assert any("truncated or corrupt xz stream" in w for w in d.files[2].warnings)
    finally:
        d.close()

"""Walk a job directory (or a .tar/.tar.gz of one), decompress, and name every file.

The job directory is evidence: nothing here writes into it. Archives are unpacked member by
member into a private temporary directory, refusing links, devices, absolute paths and `..`,
and stopping at size limits (decompression bombs). Symlinks inside the job directory are not
followed out of it.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import zstandard

HEAD_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024 * 1024
READ_BYTES = 256 * 1024


@dataclass(frozen=True)
class Limits:
    max_expanded_bytes: int = 64 * 1024**3  # all archive members together
    max_ratio: float = 1000.0  # expanded / compressed for one member or file
    max_files: int = 200_000


@dataclass
class SourceFile:
    rel_path: str  # relative to the job dir; 'bundle.tar.gz!logs/x.log' inside archives
    real_path: Path  # where the bytes are (the job dir, or the private temp dir)
    compression: str | None  # gzip | zstd | None
    size: int  # bytes on disk (compressed size for compressed files)
    host_hint: str | None = None
    rank_hint: int | None = None
    attempt_hint: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Discovery:
    files: list[SourceFile]
    warnings: list[str]
    tempdir: tempfile.TemporaryDirectory | None = None

    def close(self) -> None:
        if self.tempdir is not None:
            self.tempdir.cleanup()
            self.tempdir = None


class JobDirError(Exception):
    """The path given is not a job directory we can read (message is for the user)."""


GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_GENERIC_DIR = re.compile(
    r"^(?:logs?|nodes?|hosts?|ranks?|workers?|attempt[-_]?\d+|run[-_]?\d+|rank[-_]?\d+|slurm|dcgm|dmesg|"
    r"kernel|job|jobs|output|outputs|out|tmp|data|stdout|stderr|\d+|default)$",
    re.IGNORECASE,
)
_HOSTLIKE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*\d[A-Za-z0-9_.-]*$")
_HOST_IN_NAME = re.compile(
    r"(?:^|[._-])((?:node|host|gpu|worker|compute|cn|nid|ip)[-_]?[0-9][A-Za-z0-9-]*)(?:[._]|$)", re.IGNORECASE)
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.IGNORECASE)
_ATTEMPT = re.compile(r"(?:attempt|restart|run)[-_]?(\d+)", re.IGNORECASE)


def path_hints(rel_path: str) -> tuple[str | None, int | None, int | None]:
    """Host, rank and attempt suggested by a path (content wins over these)."""
    parts = rel_path.replace("!", "/").split("/")
    dirs, name = parts[:-1], parts[-1]
    host = None
    for d in reversed(dirs):
        if not _GENERIC_DIR.match(d) and _HOSTLIKE.match(d) and not _RANK_IN_NAME.search(d):
            host = d
            break
    if host is None:
        m = _HOST_IN_NAME.search(name)
        if m:
            host = m.group(1)
    rank = None
    m = _RANK_IN_NAME.search(name)
    if m:
        rank = int(m.group(1))
    attempt = None
    for p in parts:
        m = _ATTEMPT.fullmatch(p) or _ATTEMPT.search(p)
        if m:
            attempt = int(m.group(1))
    return host, rank, attempt


def _magic(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(6)


def _is_tar(path: Path, magic: bytes) -> bool:
    name = path.name.lower()
    if name.endswith((".tar", ".tar.gz", ".tgz", ".tar.zst")):
        return True
    if magic.startswith(GZIP_MAGIC) or magic.startswith(ZSTD_MAGIC):
        return False
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def is_archive(path: Path) -> bool:
    """A .tar / .tar.gz / .tar.zst job bundle (what `analyze` accepts besides a directory)."""
    try:
        return _is_tar(path, _magic(path)) and tarfile.is_tarfile(path)
    except OSError:
        return False


def discover(root: Path, limits: Limits | None = None) -> Discovery:
    """List every readable file below `root` (or inside `root` when it is an archive)."""
    limits = limits or Limits()
    if not root.exists():
        raise JobDirError(f"no such file or directory: {root}")
    warnings: list[str] = []
    files: list[SourceFile] = []
    tmp: tempfile.TemporaryDirectory | None = None

    def add(rel: str, real: Path) -> None:
        nonlocal tmp
        try:
            st = real.stat()
            magic = _magic(real)
        except OSError as exc:
            warnings.append(f"{rel}: unreadable ({exc.strerror or exc})")
            return
        if _is_tar(real, magic):
            if tmp is None:
                tmp = tempfile.TemporaryDirectory(prefix="forensics-")
            files.extend(_unpack_tar(rel, real, Path(tmp.name), limits, warnings))
            return
        comp = "gzip" if magic.startswith(GZIP_MAGIC) else "zstd" if magic.startswith(ZSTD_MAGIC) else None
        h, r, a = path_hints(rel)
        files.append(SourceFile(rel, real, comp, st.st_size, h, r, a))

    if root.is_file():
        add(root.name, root)
    elif root.is_dir():
        root_real = root.resolve()
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for fn in sorted(filenames):
                p = Path(dirpath) / fn
                rel = p.relative_to(root).as_posix()
                if p.is_symlink():
                    try:
                        target = p.resolve()
                        target.relative_to(root_real)
                    except (ValueError, OSError, RuntimeError):
                        warnings.append(f"{rel}: symlink pointing outside the job directory, not followed")
                        continue
                    if not target.exists():
                        warnings.append(f"{rel}: dangling symlink, skipped")
                        continue
                    if not target.is_file():
                        continue
                elif not p.is_file():
                    warnings.append(f"{rel}: not a regular file (device, socket or pipe), skipped")
                    continue
                if len(files) >= limits.max_files:
                    warnings.append(f"more than {limits.max_files} files: the rest were not read")
                    return Discovery(files, warnings, tmp)
                add(rel, p)
    else:
        raise JobDirError(f"not a directory or archive: {root}")
    return Discovery(files, warnings, tmp)


def _unpack_tar(rel: str, path: Path, tmpdir: Path, limits: Limits, warnings: list[str]) -> list[SourceFile]:
    out: list[SourceFile] = []
    dest_root = tmpdir / f"a{len(list(tmpdir.iterdir()))}"
    dest_root.mkdir()
    total = 0
    try:
        with tarfile.open(path, mode="r:*") as tf:
            for member in tf:
                name = member.name
                if member.issym() or member.islnk():
                    warnings.append(f"{rel}!{name}: link inside archive, not followed")
                    continue
                if member.isdir():
                    continue
                if not member.isfile():
                    warnings.append(f"{rel}!{name}: special file inside archive, skipped")
                    continue
                clean = Path(name)
                if clean.is_absolute() or ".." in clean.parts or name.startswith("/"):
                    warnings.append(f"{rel}!{name}: unsafe member path, skipped")
                    continue
                if total + member.size > limits.max_expanded_bytes:
                    warnings.append(f"{rel}: expanded size limit reached; later members skipped")
                    break
                target = dest_root / clean
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(member)
                if src is None:
                    continue
                with src, open(target, "wb") as dst:
                    while True:
                        buf = src.read(1 << 20)
                        if not buf:
                            break
                        dst.write(buf)
                total += member.size
                member_rel = f"{rel}!{clean.as_posix()}"
                magic = _magic(target)
                comp = "gzip" if magic.startswith(GZIP_MAGIC) else "zstd" if magic.startswith(ZSTD_MAGIC) else None
                h, r, a = path_hints(member_rel)
                out.append(SourceFile(member_rel, target, comp, member.size, h, r, a))
    except (tarfile.TarError, EOFError, OSError) as exc:
        warnings.append(f"{rel}: archive truncated or corrupt ({exc}); members read so far are analyzed")
    return out


class _Capped(io.RawIOBase):
    """Reads a decompressing stream and stops past a byte limit (decompression bombs)."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self.inner, self.limit, self.seen, self.capped = inner, limit, 0, False

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        if self.seen >= self.limit:
            self.capped = True
            return 0
        want = min(len(b), self.limit - self.seen)
        reader = getattr(self.inner, "read1", self.inner.read)
        data = reader(want)
        n = len(data)
        b[:n] = data
        self.seen += n
        return n


def open_stream(sf: SourceFile, limits: Limits | None = None) -> BinaryIO:
    limits = limits or Limits()
    fh = open(sf.real_path, "rb")
    if sf.compression == "gzip":
        inner: BinaryIO = gzip.GzipFile(fileobj=fh)  # type: ignore[assignment]
    elif sf.compression == "zstd":
        inner = zstandard.ZstdDecompressor().stream_reader(fh, closefd=True)  # type: ignore[assignment]
    else:
        return fh
    cap = max(int(sf.size * limits.max_ratio), 64 * 1024 * 1024)
    return _Capped(inner, cap)  # type: ignore[return-value]


def iter_chunks(sf: SourceFile, limits: Limits | None = None,
                chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[bytes, int]]:
    """Yield (bytes, first_line_no) pieces cut at newlines. Truncated compressed streams yield
    what could be read and record a warning on `sf`."""
    stream = open_stream(sf, limits)
    line_no = 1
    rest = b""
    try:
        broken = False
        while not broken:
            pieces: list[bytes] = []
            got = 0
            while got < chunk_bytes:
                try:
                    piece = stream.read(min(READ_BYTES, chunk_bytes - got))
                except (EOFError, OSError, zstandard.ZstdError) as exc:
                    sf.warnings.append(f"truncated or corrupt {sf.compression} stream ({exc}); read up to the damage")
                    broken = True
                    break
                if not piece:
                    break
                pieces.append(piece)
                got += len(piece)
            buf = b"".join(pieces)
            if not buf:
                break
            data = rest + buf
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            piece, rest = data[: cut + 1], data[cut + 1:]
            yield piece, line_no
            line_no += piece.count(b"\n")
        if rest:
            yield rest, line_no
        if isinstance(stream, _Capped) and stream.capped:
            sf.warnings.append("decompressed size limit reached (possible decompression bomb); rest not read")
    finally:
        stream.close()


def read_head(sf: SourceFile, limits: Limits | None = None) -> bytes:
    try:
        stream = open_stream(sf, limits)
    except OSError:
        return b""
    try:
        return stream.read(HEAD_BYTES)
    except (EOFError, OSError, zstandard.ZstdError):
        return b""
    finally:
        stream.close()


def looks_binary(head: bytes) -> bool:
    """Mostly non-text bytes (an image, a core dump, a pickle, random data). A log with some
    invalid UTF-8 or a few NULs is still text."""
    if not head:
        return False
    sample = head[:8192]
    if sample.count(b"\x00") > len(sample) // 100 + 1:
        return True
    text = sample.decode("utf-8", errors="replace")
    bad = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\x1b\x0c"))
    return bad > len(text) // 10

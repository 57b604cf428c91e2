"""Walk a job directory (or a .tar/.tar.gz of one), decompress, and name every file.

The job directory is evidence: nothing here writes into it. Archives are unpacked member by
member into a private temporary directory, refusing links, devices, absolute paths and `..`,
and stopping at size limits (decompression bombs). Symlinks inside the job directory are not
followed out of it.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import re
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import numpy as np
import zstandard

from parsers.lines import MAX_LINE_CHARS

HEAD_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024 * 1024
READ_BYTES = 256 * 1024
MIN_CAPPED_BYTES = 64 * 1024 * 1024  # the ratio limit never stops a stream before this many bytes


@dataclass(frozen=True)
class ReadPath:
    """Which of ingest's faster read routes run (forensics/ingest.py). Each gives what the plain
    route gives, file by file; tests turn one off to compare the two."""

    bulk: bool = True  # plain line logs parsed many files at a time (forensics/bulk.py)
    beside: bool = True  # large CSV tables read in a thread beside the line logs, not after them
    parse_bytes: bool = True  # a parser with `parse_bytes_many` reads whole plain files from their bytes
    screen_small_files: bool = True  # small unrecognized files screened in batches
    sniff_gate: bool = True  # the structured formats' sniffs skipped on heads without their SNIFF_NEEDS


@dataclass(frozen=True)
class Limits:
    """Resource limits against hostile or broken input (docs/hostile.md), and the read routes
    (`read`). The defaults suit real job bundles; tests pass small ones."""

    max_expanded_bytes: int = 64 * 1024**3  # all members of one archive together, once unpacked
    max_ratio: float = 1000.0  # expanded / compressed, per archive and per compressed file ...
    min_capped_bytes: int = MIN_CAPPED_BYTES  # ... once past this many expanded bytes
    max_files: int = 200_000  # files read per job (directory entries plus archive members)
    max_depth: int = 64  # directory levels walked below the job dir
    max_line_bytes: int = MAX_LINE_CHARS  # longer lines are cut (and counted) while streaming
    chunk_bytes: int = CHUNK_BYTES  # bytes per piece handed to the parsers (memory per file)
    parse_rows: int = 500_000  # a large file's kept (not chatter) lines parsed together (`ingest.parse_one`)
    read: ReadPath = ReadPath()


@dataclass
class SourceFile:
    rel_path: str  # relative to the job dir; 'bundle.tar.gz!logs/x.log' inside archives
    real_path: Path  # where the bytes are (the job dir, or the private temp dir)
    compression: str | None  # gzip | zstd | xz | bzip2 | utf-16 (read as UTF-8) | None
    size: int  # bytes on disk (compressed size for compressed files)
    host_hint: str | None = None
    rank_hint: int | None = None
    attempt_hint: int | None = None
    warnings: list[str] = field(default_factory=list)
    mtime_ns: int | None = None  # at discovery: a file that changes while it is read is reported


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
_OTHER_TAR_MAGIC = (b"BZh", b"\xfd7zXZ\x00")  # tar.bz2 / tar.xz bundles (tarfile reads them too)
BZIP2_MAGIC, XZ_MAGIC = _OTHER_TAR_MAGIC
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; an empty archive's end record
# what a compressed stream's reader raises on a truncated or corrupt stream
STREAM_ERRORS = (EOFError, OSError, zlib.error, zstandard.ZstdError, lzma.LZMAError)

_GENERIC_DIR = re.compile(
    r"^(?:logs?|nodes?|hosts?|ranks?|workers?|(?:attempt|restart|run|retry|try|trial|requeue)[-_]?\d+|s\d+|"
    r"rank[-_]?\d+|slurm|dcgm|dmesg|"
    r"kernel|job|jobs|job[-_.]?\d+|output|outputs|out|tmp|data|stdout|stderr|\d+|default)$",
    re.IGNORECASE,
)
_HOSTLIKE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*\d[A-Za-z0-9_.-]*$")
_HOST_IN_NAME = re.compile(
    r"(?:^|[._-])((?:node|host|gpu|worker|compute|cn|nid|ip)[-_]?[0-9][A-Za-z0-9-]*)(?:[._]|$)", re.IGNORECASE)
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.IGNORECASE)
_ATTEMPT = re.compile(r"(?:attempt|restart|run)[-_]?(\d+)", re.IGNORECASE)
# a folder named only by an attempt number under another word: s0/s1, try-2, retry_3, trial1, requeue-2
_ATTEMPT_DIR = re.compile(r"(?:attempt|restart|run|retry|try|trial|requeue|s)[-_]?(\d+)", re.IGNORECASE)


# an archive's name before the `!` of its members' paths: what is left of it names a place (node3.tar.gz!dmesg.log)
_ARCHIVE_MEMBER = re.compile(r"\.(?:tar(?:\.(?:gz|zst|xz|bz2))?|tgz|tzst|zip)!", re.IGNORECASE)


def path_hints(rel_path: str) -> tuple[str | None, int | None, int | None]:
    """Host, rank and attempt suggested by a path (content wins over these). An archive's name counts
    as a folder named without its suffix (`node3.tar.gz!dmesg.log`: node3)."""
    parts = _ARCHIVE_MEMBER.sub("/", rel_path).replace("!", "/").split("/")
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
        rank = _hint_int(m.group(1))
    attempt = None
    for i, p in enumerate(parts):
        m = (_ATTEMPT_DIR.fullmatch(p) if i < len(parts) - 1 else None) or _ATTEMPT.fullmatch(p) or _ATTEMPT.search(p)
        if m:
            attempt = _hint_int(m.group(1))
    return host, rank, attempt


_MAX_HINT = 2**31 - 1  # a 'rank12345678901234567890.log' is a name, not a rank


def _hint_int(s: str) -> int | None:
    v = int(s)
    return v if v <= _MAX_HINT else None


def safe_open(path: Path) -> BinaryIO:
    """Open a regular file for reading without following a final symlink and without blocking on a
    FIFO that replaced a file after discovery (OSError otherwise)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _head_bytes(path: Path, n: int = 512) -> bytes:
    with safe_open(path) as fh:
        return fh.read(n)


def _is_tar(path: Path, head: bytes) -> bool:
    name = path.name.lower()
    if head.startswith(GZIP_MAGIC) or head.startswith(ZSTD_MAGIC):
        return name.endswith((".tar.gz", ".tgz", ".tar.zst", ".tzst"))
    if len(head) >= 262 and head[257:262] == b"ustar":
        return True
    if head.startswith(_OTHER_TAR_MAGIC):  # bzip2 / xz (any size): tarfile tries the decompressors
        try:
            with safe_open(path) as fh:
                return tarfile.is_tarfile(fh)
        except (OSError, tarfile.TarError, ValueError):
            return False
    if len(head) < 512:
        return False
    try:  # old (v7) tar without the ustar magic: a first header whose checksum holds (what
        # tarfile.is_tarfile checks, without reopening the file and trying every decompressor)
        tarfile.TarInfo.frombuf(head[:512], "utf-8", "surrogateescape")
        return True
    except (tarfile.TarError, ValueError):
        return False


def _is_zip(path: Path, head: bytes) -> bool:
    """A zip archive by its name and magic: other formats are zip files inside (a PyTorch checkpoint,
    a .jar, a .docx) and are not unpacked."""
    return path.name.lower().endswith(".zip") and head.startswith(ZIP_MAGIC)


def is_archive(path: Path) -> bool:
    """A .tar / .tar.gz / .tar.zst / .tar.xz / .tar.bz2 / .zip job bundle (what `analyze` accepts
    besides a directory)."""
    try:
        head = _head_bytes(path)
    except OSError:
        return False
    return _is_tar(path, head) or _is_zip(path, head)


_COMPRESSIONS = ((GZIP_MAGIC, "gzip"), (ZSTD_MAGIC, "zstd"), (XZ_MAGIC, "xz"), (BZIP2_MAGIC, "bzip2"))
UTF16_BOM = {b"\xff\xfe": 1, b"\xfe\xff": 0}  # little / big endian: where the NUL of an ASCII character is


def _compression(head: bytes) -> str | None:
    """How a file's bytes are read: decompressed (gzip, zstd, xz, bzip2), from UTF-16 ("utf-16": a byte-order
    mark, and the NUL halves of mostly ASCII text after it: what PowerShell 5's `>` and `Out-File` write), or
    as they are (None)."""
    got = next((name for magic, name in _COMPRESSIONS if head.startswith(magic)), None)
    if got is None and head[:2] in UTF16_BOM:
        pairs = head[2:514]
        zero = pairs[UTF16_BOM[head[:2]]::2]
        if len(zero) >= 2 and zero.count(0) >= 0.5 * len(zero):
            got = "utf-16"
    return got


def discover(root: Path, limits: Limits | None = None) -> Discovery:
    """List every readable file below `root` (or inside `root` when it is an archive).

    Never raises for content: unreadable entries, links out of the job, special files, unsafe or
    oversized archive members become warnings. JobDirError only when `root` itself is unusable."""
    limits = limits or Limits()
    if not root.exists():
        raise JobDirError(f"no such file or directory: {root}")
    warnings: list[str] = []
    files: list[SourceFile] = []
    tmp: tempfile.TemporaryDirectory | None = None
    full = False

    def add(rel: str, real: Path) -> None:
        nonlocal tmp, full
        if len(files) >= limits.max_files:
            if not full:
                warnings.append(f"more than {limits.max_files} files: the rest were not read")
                full = True
            return
        try:
            st = real.stat()
            if not stat.S_ISREG(st.st_mode):
                warnings.append(f"{rel}: not a regular file (device, socket or pipe), skipped")
                return
            head = _head_bytes(real)
        except OSError as exc:
            warnings.append(f"{rel}: unreadable ({exc.strerror or exc})")
            return
        unpack = _unpack_tar if _is_tar(real, head) else _unpack_zip if _is_zip(real, head) else None
        if unpack is not None:
            if tmp is None:
                tmp = tempfile.TemporaryDirectory(prefix="forensics-")
            files.extend(unpack(rel, real, Path(tmp.name), limits, warnings, limits.max_files - len(files)))
            if len(files) >= limits.max_files and not full:
                warnings.append(f"more than {limits.max_files} files: the rest were not read")
                full = True
            return
        h, r, a = path_hints(rel)
        files.append(SourceFile(rel, real, _compression(head), st.st_size, h, r, a, mtime_ns=st.st_mtime_ns))

    if root.is_file():
        add(root.name, root)
        _bundle_hints(files, f"{root.name}!")
    elif root.is_dir():
        _walk(root, limits, warnings, add)
    else:
        raise JobDirError(f"not a directory or archive: {root}")
    return Discovery(files, warnings, tmp)


def _bundle_hints(files: list[SourceFile], prefix: str) -> None:
    """The hints of the members of an archive analyzed as the job (`analyze job-123.tar.gz`): read from
    their paths inside it, below its single top folder when every member has one. That folder, like
    the archive's name, is the job directory's own name: neither names a host, a rank or an attempt."""
    inner = [PurePosixPath(f.rel_path[len(prefix):]).parts for f in files if f.rel_path.startswith(prefix)]
    strip = len(inner) == len(files) and len({p[0] for p in inner if p}) == 1 and all(len(p) > 1 for p in inner)
    for f, parts in zip(files, inner, strict=False):
        f.host_hint, f.rank_hint, f.attempt_hint = path_hints("/".join(parts[1:] if strip else parts))


def _walk(root: Path, limits: Limits, warnings: list[str], add) -> None:  # noqa: ANN001
    """Depth-first, sorted, iterative (no recursion limit), never following a directory symlink."""
    root_real = root.resolve()
    stack: list[tuple[Path, str, int]] = [(root, "", 0)]
    while stack:
        d, rel_d, depth = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            warnings.append(f"{rel_d or '.'}: directory unreadable ({exc.strerror or exc}), skipped")
            continue
        subdirs: list[tuple[Path, str, int]] = []
        for e in entries:
            rel = f"{rel_d}/{e.name}" if rel_d else e.name
            p = Path(e.path)
            try:
                is_link = e.is_symlink()
                if not is_link and e.is_dir(follow_symlinks=False):
                    if depth + 1 > limits.max_depth:
                        warnings.append(f"{rel}: nested deeper than {limits.max_depth} directories, not read")
                    else:
                        subdirs.append((p, rel, depth + 1))
                    continue
            except OSError as exc:
                warnings.append(f"{rel}: unreadable ({exc.strerror or exc})")
                continue
            if is_link:
                try:
                    target = p.resolve(strict=True)
                except FileNotFoundError:
                    warnings.append(f"{rel}: dangling symlink, skipped")
                    continue
                except (OSError, RuntimeError):
                    warnings.append(f"{rel}: symlink loop or unreadable link, skipped")
                    continue
                try:
                    target.relative_to(root_real)
                except ValueError:
                    warnings.append(f"{rel}: symlink pointing outside the job directory, not followed")
                    continue
                if target.is_dir():
                    warnings.append(f"{rel}: symlink to a directory, not followed")
                    continue
                add(rel, target)  # opened by its real path: a link swapped in later is refused
                continue
            add(rel, p)
        stack.extend(reversed(subdirs))


def _unique_target(dest_root: Path, clean: Path) -> Path:
    target = dest_root / clean
    k = 0
    while target.exists() or target.is_symlink():
        k += 1
        target = dest_root / f"__dup{k}" / clean
    return target


class _Unpacker:
    """One archive's members, unpacked one by one into the private temp dir: the checks every member
    passes, whatever the archive's format (`_unpack_tar`, `_unpack_zip`), and the SourceFiles made."""

    def __init__(self, rel: str, path: Path, tmpdir: Path, limits: Limits, warnings: list[str], room: int) -> None:
        self.rel, self.limits, self.warnings, self.room = rel, limits, warnings, room
        self.dest_root = tmpdir / f"a{len(list(tmpdir.iterdir()))}"
        self.dest_root.mkdir()
        self.compressed = max(1, path.stat().st_size)
        self.total = 0
        self.out: list[SourceFile] = []

    def skip(self, name: str, why: str) -> None:
        self.warnings.append(f"{self.rel}!{name}: {why}")

    def clean(self, name: str) -> Path | None:
        """The member's relative path, or None (and a warning) for an unsafe name."""
        clean = Path(name)
        if (clean.is_absolute() or ".." in clean.parts or name.startswith("/") or "\x00" in name
                or not clean.parts or clean == Path(".")):
            self.skip(name, "unsafe member path, skipped")
            return None
        return clean

    def full(self, size: int) -> bool:
        """Whether a member of `size` bytes would pass a limit (a warning: the later members are skipped)."""
        total, limits = self.total + size, self.limits
        if len(self.out) >= self.room:
            self.warnings.append(f"{self.rel}: file limit reached; later members skipped")
        elif total > limits.max_expanded_bytes:
            self.warnings.append(f"{self.rel}: expanded size limit ({limits.max_expanded_bytes} bytes) reached; "
                                 "later members skipped")
        elif total > limits.min_capped_bytes and total > self.compressed * limits.max_ratio:
            self.warnings.append(f"{self.rel}: expansion ratio above {limits.max_ratio:g} (possible decompression "
                                 "bomb); later members skipped")
        else:
            return False
        return True

    def write(self, clean: Path, size: int, src: BinaryIO, damage: tuple[type[BaseException], ...] = ()) -> None:
        """Copy the member from `src` (closed here) and keep it; a member that cannot be written (a name
        too long, a file where a directory is needed) is skipped with a warning. A `damage` error while
        reading keeps what was read (a warning); OSError without an errno (a corrupt stream) and the
        reader's other errors propagate."""
        member_rel = f"{self.rel}!{clean.as_posix()}"
        try:
            target = _unique_target(self.dest_root, clean)
            target.parent.mkdir(parents=True, exist_ok=True)
            with src, open(target, "xb") as dst:
                try:
                    while True:
                        buf = src.read(1 << 20)
                        if not buf:
                            break
                        dst.write(buf)
                except damage as exc:
                    self.warnings.append(f"{member_rel}: damaged ({exc}); read up to the damage")
            head = _head_bytes(target, 8)
        except OSError as exc:
            if exc.errno is None:  # a corrupt stream (BadGzipFile, ...), not a bad member name
                raise
            self.warnings.append(f"{member_rel}: could not be unpacked ({exc.strerror or exc}), skipped")
            return
        self.total += size
        h, r, a = path_hints(member_rel)
        self.out.append(SourceFile(member_rel, target, _compression(head), size, h, r, a))

    def corrupt(self, exc: BaseException) -> None:
        self.warnings.append(f"{self.rel}: archive truncated or corrupt ({exc}); members read so far are analyzed")


def _unpack_tar(rel: str, path: Path, tmpdir: Path, limits: Limits, warnings: list[str],
                room: int) -> list[SourceFile]:
    """Unpack the regular members of one tar into the private temp dir, one by one, bounded."""
    u = _Unpacker(rel, path, tmpdir, limits, warnings, room)
    try:
        with safe_open(path) as raw, tarfile.open(fileobj=raw, mode="r:*") as tf:
            for member in tf:
                name = member.name
                if member.issym() or member.islnk():
                    u.skip(name, "link inside archive, not followed")
                    continue
                if member.isdir():
                    continue
                if not member.isfile():
                    u.skip(name, "special file inside archive, skipped")
                    continue
                clean = u.clean(name)
                if clean is None:
                    continue
                if u.full(member.size):
                    break
                src = tf.extractfile(member)
                if src is not None:
                    u.write(clean, member.size, src)
    except (tarfile.TarError, *STREAM_ERRORS) as exc:
        u.corrupt(exc)
    return u.out


_ZIP_ENCRYPTED = 0x1  # general purpose flag bit 0 (APPNOTE 4.4.4)
# a zip member's reader on a bad CRC or a cut or corrupt stream: the member keeps what was read
_ZIP_MEMBER_DAMAGE = (zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError)


def _unpack_zip(rel: str, path: Path, tmpdir: Path, limits: Limits, warnings: list[str],
                room: int) -> list[SourceFile]:
    """Unpack the regular members of one zip into the private temp dir, one by one, bounded, as
    `_unpack_tar` does. A member's declared size is trusted for the running total: zipfile reads no
    more than it. Names with backslashes (an archiver on Windows) are read as paths. An encrypted
    member, or one in a method zipfile cannot decompress, is skipped with a warning; a member
    damaged part-way keeps what was read (a warning)."""
    u = _Unpacker(rel, path, tmpdir, limits, warnings, room)
    try:
        with safe_open(path) as raw, zipfile.ZipFile(raw) as zf:
            for info in zf.infolist():
                name = info.filename
                mode = info.external_attr >> 16  # the Unix mode, where a Unix archiver wrote one
                if info.is_dir() or stat.S_ISDIR(mode):
                    continue
                if stat.S_ISLNK(mode):
                    u.skip(name, "link inside archive, not followed")
                    continue
                if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                    u.skip(name, "special file inside archive, skipped")
                    continue
                if info.flag_bits & _ZIP_ENCRYPTED:
                    u.skip(name, "encrypted member, not read")
                    continue
                clean = u.clean(name.replace("\\", "/"))
                if clean is None:
                    continue
                if u.full(info.file_size):
                    break
                try:
                    src = zf.open(info)
                except NotImplementedError as exc:  # deflate64, ... : a method zipfile does not read
                    u.skip(name, f"not read ({exc})")
                    continue
                u.write(clean, info.file_size, src, damage=_ZIP_MEMBER_DAMAGE)
    except (zipfile.BadZipFile, *STREAM_ERRORS) as exc:
        u.corrupt(exc)
    return u.out


class _Utf16(io.RawIOBase):
    """A UTF-16 text file (its byte-order mark says the byte order) read as UTF-8 bytes; an unpaired
    surrogate or a cut last character becomes U+FFFD. Line ends stay as written."""

    def __init__(self, raw: BinaryIO) -> None:
        self.text = io.TextIOWrapper(raw, encoding="utf-16", errors="replace", newline="")
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        while len(self.pending) < len(b):
            chars = self.text.read(max(1, len(b) // 2))
            if not chars:
                break
            self.pending += chars.encode("utf-8")
        n = min(len(b), len(self.pending))
        b[:n], self.pending = self.pending[:n], self.pending[n:]
        return n

    def close(self) -> None:
        try:
            self.text.detach()  # the raw file is closed by open_stream's caller (`_raw`)
        except ValueError:
            pass
        finally:
            super().close()


class _Capped(io.RawIOBase):
    """Reads a decompressing stream and stops past a byte limit (decompression bombs)."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self.inner, self.limit, self.seen, self.capped = inner, limit, 0, False

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        if self.seen >= self.limit:
            if not self.capped:
                self.capped = bool(self.inner.read(1))  # capped only if something was left
            return 0
        want = min(len(b), self.limit - self.seen)
        reader = getattr(self.inner, "read1", self.inner.read)
        data = reader(want)
        n = len(data)
        b[:n] = data
        self.seen += n
        return n

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


def open_stream(sf: SourceFile, limits: Limits | None = None) -> BinaryIO:
    limits = limits or Limits()
    fh = safe_open(sf.real_path)
    try:
        if sf.compression == "gzip":
            inner: BinaryIO = gzip.GzipFile(fileobj=fh)  # type: ignore[assignment]
        elif sf.compression == "zstd":
            inner = zstandard.ZstdDecompressor().stream_reader(fh, closefd=True)  # type: ignore[assignment]
        elif sf.compression == "xz":
            inner = lzma.LZMAFile(fh)  # type: ignore[assignment]
        elif sf.compression == "bzip2":
            inner = bz2.BZ2File(fh)  # type: ignore[assignment]
        elif sf.compression == "utf-16":
            inner = _Utf16(fh)  # type: ignore[assignment]
        else:
            return fh
    except BaseException:
        fh.close()
        raise
    cap = max(int(sf.size * limits.max_ratio), limits.min_capped_bytes)
    capped = _Capped(inner, cap)
    capped._raw = fh  # type: ignore[attr-defined] # closed with it (GzipFile does not close fileobj)
    return capped  # type: ignore[return-value]


def _close(stream: BinaryIO) -> None:
    try:
        stream.close()
    finally:
        raw = getattr(stream, "_raw", None)
        if raw is not None:
            raw.close()


def _may_hold_long_line(piece: bytes, max_line: int) -> bool:
    """False when no line of `piece` is longer than max_line bytes, True when one may be: a line
    that long holds a whole aligned window of (max_line + 1) // 2 bytes without a newline, so a
    newline found in every window rules it out (a `find` per window, each stopping at the first
    newline: a few per chunk instead of a pass over every byte)."""
    d = max(1, (max_line + 1) // 2)
    find = piece.find
    return any(find(b"\n", pos, pos + d) < 0 for pos in range(0, len(piece) - d + 1, d))


def _cut_long_lines(piece: bytes, max_line: int) -> tuple[bytes, int]:
    """Cut the '\n'-terminated lines of `piece` longer than max_line bytes; return the count cut."""
    if len(piece) <= max_line + 1 or not _may_hold_long_line(piece, max_line):
        return piece, 0
    nl = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], nl[:-1] + 1))
    long_ = np.flatnonzero(nl - starts > max_line)
    if long_.size == 0:
        return piece, 0
    parts, pos = [], 0
    for k in long_.tolist():
        s, e = int(starts[k]), int(nl[k])
        parts.append(piece[pos:s + max_line])
        pos = e  # keep the newline
    parts.append(piece[pos:])
    return b"".join(parts), int(long_.size)


def iter_chunks(sf: SourceFile, limits: Limits | None = None, chunk_bytes: int | None = None,
                hasher=None) -> Iterator[tuple[bytes, int]]:  # noqa: ANN001
    """Yield (bytes, first_line_no) pieces cut at newlines, each at most about chunk_bytes (plus one
    line). Lines longer than limits.max_line_bytes are cut to that length while streaming (memory
    stays bounded whatever the line length) and counted in a warning on `sf`. Truncated compressed
    streams yield what could be read and record a warning on `sf`. `hasher` (hashlib) sees the
    decompressed bytes as read, before any cut."""
    limits = limits or Limits()
    chunk_bytes = max(1, chunk_bytes or limits.chunk_bytes)
    max_line = max(1, limits.max_line_bytes)
    stream = open_stream(sf, limits)
    line_no = 1
    rest = b""  # the unfinished last line (at most max_line bytes)
    skipping = False  # inside an overlong line whose head is kept in `rest`: drop up to its newline
    cut = 0
    try:
        eof = False
        while not eof:
            pieces: list[bytes] = []
            got = 0
            while got < chunk_bytes:
                try:
                    piece = stream.read(min(READ_BYTES, chunk_bytes - got))
                except STREAM_ERRORS as exc:
                    sf.warnings.append(f"truncated or corrupt {sf.compression} stream ({exc}); read up to the damage")
                    eof = True
                    break
                if not piece:
                    eof = True
                    break
                if hasher is not None:
                    hasher.update(piece)
                if skipping:
                    k = piece.find(b"\n")
                    if k < 0:
                        continue
                    piece = piece[k:]
                    skipping = False
                pieces.append(piece)
                got += len(piece)
            if not any(pieces):
                continue
            # the complete lines in one copy: the unfinished line, the pieces up to the one holding
            # the last newline and that piece's head (the tail after it waits for the next chunk)
            k = len(pieces) - 1
            while k >= 0 and (end := pieces[k].rfind(b"\n")) < 0:
                k -= 1
            if k < 0:
                complete, rest = b"", b"".join([rest, *pieces])
            else:
                last = pieces[k]
                complete = b"".join([rest, *pieces[:k], last[: end + 1]])  # (a whole-piece slice is no copy)
                rest = b"".join([last[end + 1:], *pieces[k + 1:]])
            if len(rest) > max_line:
                rest = rest[:max_line]
                skipping = True
                cut += 1
            if complete:
                complete, n = _cut_long_lines(complete, max_line)
                cut += n
                yield complete, line_no
                line_no += complete.count(b"\n")
        if rest:
            yield rest, line_no
        if isinstance(stream, _Capped) and stream.capped:
            sf.warnings.append(f"decompressed size limit ({stream.limit} bytes, ratio {limits.max_ratio:g}) reached "
                               "(possible decompression bomb); rest not read")
        if cut:
            sf.warnings.append(f"{cut} line(s) longer than {max_line} bytes cut to {max_line} bytes")
    finally:
        _close(stream)


def read_head(sf: SourceFile, limits: Limits | None = None) -> bytes:
    """The first HEAD_BYTES (decompressed) of a file; b'' when a compressed stream is corrupt.
    OSError when the file cannot be opened (gone, permissions)."""
    stream = open_stream(sf, limits)
    try:
        return stream.read(HEAD_BYTES)
    except STREAM_ERRORS:
        return b""
    finally:
        _close(stream)


_CONTROL_BYTES = bytes(c for c in range(32) if chr(c) not in "\t\n\r\x1b\x0c")


def looks_binary(head: bytes) -> bool:
    """Mostly non-text bytes (an image, a core dump, a pickle, random data). A log with some
    invalid UTF-8 or NUL bytes is still text."""
    if not head:
        return False
    # NUL runs are what a crashed node leaves in a log (allocated, never written blocks) and UTF-16
    # text is half NULs: judge the rest of the bytes
    sample = head[:8192].replace(b"\x00", b"")
    if not sample:
        return False
    text = sample.decode("utf-8", errors="replace")
    # control characters are single bytes in UTF-8: count them on the bytes (C speed)
    bad = text.count("\ufffd") + len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return bad > len(text) // 10

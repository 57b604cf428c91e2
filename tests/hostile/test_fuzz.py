"""Property-based and mutation fuzzing of every parser and of the discovery/ingest layer.

`make test` runs these as a short deterministic smoke (a few examples each). `make fuzz`
sets FORENSICS_FUZZ=1: random seeds, FORENSICS_FUZZ_EXAMPLES (default 2000) examples per test.
Every failure found becomes an explicit regression in tests/hostile/regressions/.

Invariants: no exception escapes a parser, sniff, decode or discovery; claimed/ignored lines
and event line numbers are lines of the input; frames conform to the schemas; per file
`lines == parsed + ignored + unparsed`; nothing is written outside the private temp dir.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import stat
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.config import load_job_config
from forensics.discovery import Discovery, Limits, discover, iter_chunks
from forensics.ingest import ingest
from parsers import registry
from parsers.elastic import parse_error_json, sniff_error_json
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, ParseContext, conform

pytestmark = pytest.mark.fuzz

FUZZ = os.environ.get("FORENSICS_FUZZ") == "1"
N = int(os.environ.get("FORENSICS_FUZZ_EXAMPLES", "2000")) if FUZZ else 6
SETTINGS = settings(max_examples=N, deadline=None, derandomize=not FUZZ, database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_FILES = sorted(p for p in (ROOT / "fixtures").rglob("*")
                       if p.is_file() and p.suffix != ".toml" and p.name != "README.md")
FIXTURE_TEXTS = [p.read_bytes() for p in FIXTURE_FILES]
CORPUS = sorted({ln for t in FIXTURE_TEXTS for ln in t.splitlines() if ln.strip()})
PARSERS = registry()
TOKENS = [b"", b" ", b":", b"[", b"]", b"(", b")", b"=", b",", b"\t", b"\r", b"\x00", b"\x1b[31m", b"\xff\xfe",
          b"\xc3", "\u00e9".encode(), "\U0001f525".encode(), b"0x", b"-", b"-1", b"0", b"99999999999999999999999",
          b"nan", b"inf", b"-inf", b"1e308", b"NCCL ", b"NVRM: Xid ", b"[rank3]:", b"[default0]:", b"0: ",
          b"2024-13-45T99:99:99Z", b"Traceback (most recent call last):", b"\\", b"\"", b"{", b"}", b"|",
          b"00000000:3B:00.0", b"   ", b"step", b"iteration", b"Epoch", b"exitcode", b"Xid", b"%", b"$1"]


def _ctx(path: str = "node-001/rank-3.log", host: str | None = "node-001", rank: int | None = 3) -> ParseContext:
    return ParseContext(path=path, host_hint=host, rank_hint=rank, ref_year=2024)


def check_parse(p, data: bytes, first_line: int = 1, ctx: ParseContext | None = None) -> None:  # noqa: ANN001
    """Run one parser on `data` as ingest would, and check the contract."""
    ctx = ctx or _ctx()
    s = float(p.module.sniff(data[:65536].decode("utf-8", errors="replace")))
    assert 0.0 <= s <= 1.0, (p.name, s)
    lines = with_body(decode_lines(data, first_line).lines)
    ext = p.module.parse(lines, ctx)
    ids = set(lines["line_no"].to_list())
    assert set(ext.claimed.to_list()) <= ids, p.name
    assert set(ext.ignored.to_list()) <= ids, p.name
    ev = conform(ext.events, EVENT_SCHEMA)
    assert set(ev["line_no"].drop_nulls().to_list()) <= ids | {0}, p.name
    for name, df in ext.tables.items():
        if name in TABLE_SCHEMAS:
            conform(df, TABLE_SCHEMAS[name])
    assert all(isinstance(w, str) for w in ext.warnings)


def mutate(rnd: random.Random, line: bytes) -> bytes:
    op = rnd.randrange(8)
    i = rnd.randrange(len(line) + 1)
    j = min(len(line), i + rnd.randrange(1, 12))
    if op == 0:  # insert a token
        return line[:i] + rnd.choice(TOKENS) + line[i:]
    if op == 1:  # replace a span with a token
        return line[:i] + rnd.choice(TOKENS) + line[j:]
    if op == 2:  # delete a span
        return line[:i] + line[j:]
    if op == 3:  # truncate (a dying node writes half a line)
        return line[:i]
    if op == 4:  # flip a byte
        if not line:
            return line
        k = rnd.randrange(len(line))
        return line[:k] + bytes([line[k] ^ (1 << rnd.randrange(8))]) + line[k + 1:]
    if op == 5:  # splice with another corpus line
        other = rnd.choice(CORPUS)
        return line[:i] + other[rnd.randrange(len(other) + 1):]
    if op == 6:  # numbers become huge / negative / odd
        out, k = bytearray(), 0
        while k < len(line):
            if chr(line[k]).isdigit() and rnd.random() < 0.5:
                out += rnd.choice([b"99999999999999999999999", b"-1", b"0", b"", b"1.5", b"007"])
                while k < len(line) and chr(line[k]).isdigit():
                    k += 1
            else:
                out.append(line[k])
                k += 1
        return bytes(out)
    return line + line[i:j]  # duplicate a span


@st.composite
def mutated_text(draw) -> bytes:  # noqa: ANN001
    """A few real lines (or a whole real file, with its multi-line records), mutated."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        lines = rnd.choice(FIXTURE_TEXTS).splitlines()
        start = rnd.randrange(len(lines) + 1)
        lines = lines[start:start + rnd.randrange(1, 80)]
    else:
        lines = [rnd.choice(CORPUS) for _ in range(rnd.randrange(1, 40))]
    n_mut = draw(st.integers(0, 6))
    for _ in range(n_mut):
        if lines:
            k = rnd.randrange(len(lines))
            lines[k] = mutate(rnd, lines[k])
    if lines and rnd.random() < 0.2:
        rnd.shuffle(lines)
    sep = rnd.choice([b"\n", b"\n", b"\r\n", b"\r"])
    return sep.join(lines) + rnd.choice([b"\n", b"", sep])


@pytest.mark.parametrize("name", [p.name for p in PARSERS])
@SETTINGS
@given(data=mutated_text(), first=st.sampled_from([1, 2, 1000, 2**40]))
def test_fuzz_parser_mutated_real_lines(name: str, data: bytes, first: int) -> None:
    check_parse(next(p for p in PARSERS if p.name == name), data, first)


@pytest.mark.parametrize("name", [p.name for p in PARSERS])
@SETTINGS
@given(data=st.binary(max_size=2048))
def test_fuzz_parser_random_bytes(name: str, data: bytes) -> None:
    check_parse(next(p for p in PARSERS if p.name == name), data)


@pytest.mark.parametrize("name", [p.name for p in PARSERS])
@SETTINGS
@given(lines=st.lists(st.one_of(st.text(max_size=200), st.sampled_from(CORPUS).map(
    lambda b: b.decode("utf-8", "replace"))), max_size=40),
       path=st.text(max_size=40), host=st.one_of(st.none(), st.text(max_size=20)),
       rank=st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)))
def test_fuzz_parser_random_text_and_context(name: str, lines: list[str], path: str, host: str | None,
                                             rank: int | None) -> None:
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    check_parse(next(p for p in PARSERS if p.name == name), data, ctx=_ctx(path, host, rank))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
                        st.sampled_from(["message", "extraInfo", "timestamp", "py_callstack", "errorCode", "x"])
                        | st.text(max_size=8), kids, max_size=5), max_leaves=20)


@SETTINGS
@given(obj=JSON, cut=st.integers(0, 400), path=st.sampled_from(["0/error.json", "x/3/error_9.json", "e.json"]))
def test_fuzz_error_json(obj: object, cut: int, path: str) -> None:
    text = json.dumps(obj)
    if cut and cut < len(text):
        text = text[:cut]
    sniff_error_json(text)
    ext = parse_error_json(text, _ctx(path))
    conform(ext.events, EVENT_SCHEMA)
    assert set(ext.claimed.to_list()) <= set(range(1, text.count("\n") + 2))


def _ingest(job: Path, limits: Limits | None = None):  # noqa: ANN202
    disc = discover(job, limits)
    try:
        return disc, ingest(disc, load_job_config(job), limits, workers=1)
    finally:
        disc.close()


@SETTINGS
@given(data=mutated_text(), chunk=st.sampled_from([64, 200, 4096, 1 << 20]),
       comp=st.sampled_from([None, "gzip"]), cut=st.integers(0, 300))
def test_fuzz_ingest_accounting(data: bytes, chunk: int, comp: str | None, cut: int) -> None:
    """One file through the whole ingest path (chunked, maybe gzip, maybe truncated)."""
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "job"
        (job / "node-001").mkdir(parents=True)
        raw = gzip.compress(data) if comp else data
        if comp and cut:
            raw = raw[: max(10, len(raw) - cut)]
        (job / "node-001" / ("rank-0.log.gz" if comp else "rank-0.log")).write_bytes(raw)
        _, ing = _ingest(job, Limits(chunk_bytes=chunk))
        (f,) = ing.files
        assert f.lines == f.parsed + f.ignored + f.unparsed, f
        if not comp:  # every line counted once (binary files are not read as lines)
            assert f.lines == len(decode_lines(data).lines) or any("binary" in w for w in f.warnings)


def _tar(members: list[tuple[str, str, bytes]], mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, kind, data in members:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE,
                       "fifo": tarfile.FIFOTYPE, "dir": tarfile.DIRTYPE}[kind]
            ti.linkname = data.decode("utf-8", "replace") if kind in ("sym", "hard") else ""
            tf.addfile(ti)
    return buf.getvalue()


_ZIP_MODES = {"sym": stat.S_IFLNK | 0o777, "hard": stat.S_IFREG | 0o644, "chr": stat.S_IFCHR | 0o644,
              "fifo": stat.S_IFIFO | 0o644, "dir": stat.S_IFDIR | 0o755, "file": 0}


def _zip(members: list[tuple[str, str, bytes]]) -> bytes:
    """The same members as a zip (links and devices by their Unix mode, as Info-ZIP writes them)."""
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name: duplicates are part of the test
        for name, kind, data in members:
            zi = zipfile.ZipInfo(name + "/" if kind == "dir" and not name.endswith("/") else name)
            zi.external_attr = _ZIP_MODES[kind] << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data if kind in ("file", "sym", "hard") else b"")
    return buf.getvalue()


NAME = st.one_of(st.sampled_from(["a.log", "../x.log", "/etc/x", "..", ".", "a/../../b", "node-1/rank-0.log",
                                  "d/", "//x", "a\\..\\b", "x" * 300, "\u00e9.log", "a/b/c/d/e/f.log"]),
                 st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                         min_size=1, max_size=30))
MEMBER = st.tuples(NAME, st.sampled_from(["file", "file", "file", "sym", "hard", "chr", "fifo", "dir"]),
                   st.one_of(st.binary(max_size=300), mutated_text(),
                             st.sampled_from([b"/etc/passwd", b"../../x", b"a.log"])))


def _all_paths(d: Path) -> set[str]:
    return {p.as_posix() for p in d.rglob("*")}


def _check_discovery(job: Path, outside: Path, limits: Limits | None = None) -> Discovery:
    before = _all_paths(outside)
    disc = discover(job, limits)
    try:
        tmp = Path(disc.tempdir.name).resolve() if disc.tempdir is not None else None
        job_real = job.resolve()
        for sf in disc.files:
            real = sf.real_path.resolve()
            assert job_real in real.parents or (tmp is not None and tmp in real.parents), real
        ing = ingest(disc, load_job_config(job), limits, workers=1)
        for f in ing.files:
            assert f.lines == f.parsed + f.ignored + f.unparsed
    finally:
        disc.close()
    assert _all_paths(outside) == before  # nothing created outside (the temp dir is elsewhere)
    return disc


@SETTINGS
@given(members=st.lists(MEMBER, max_size=8), mode=st.sampled_from(["w", "w:gz", "zip"]), cut=st.integers(0, 2000),
       junk=st.binary(max_size=64))
def test_fuzz_discovery_random_archives(members: list[tuple[str, str, bytes]], mode: str, cut: int,
                                        junk: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        outside = Path(d)
        job = outside / "job"
        job.mkdir()
        try:
            raw = _zip(members) if mode == "zip" else _tar(members, mode)
        except (ValueError, UnicodeError, tarfile.TarError):
            return  # tarfile itself cannot write that name
        if cut and cut < len(raw):
            raw = raw[:-cut] + junk
        (job / {"w:gz": "bundle.tar.gz", "w": "bundle.tar", "zip": "bundle.zip"}[mode]).write_bytes(raw)
        _check_discovery(job, outside, Limits(max_expanded_bytes=4096, max_files=20))


@SETTINGS
@given(entries=st.lists(st.tuples(
    st.lists(st.sampled_from(["a", "node-1", "rank-2", "attempt-1", "..x", "d d", "\u00e9", ".hidden"]),
             max_size=6),
    st.sampled_from(["f", "f", "f", "gz", "bad_gz", "sym_in", "sym_out", "sym_dir_out", "sym_loop", "fifo",
                     "empty", "binary"]),
    mutated_text()), max_size=12))
def test_fuzz_discovery_random_trees(entries: list[tuple[list[str], str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        outside = Path(d)
        (outside / "secret").mkdir()
        (outside / "secret" / "s.log").write_text("secret\n")
        job = outside / "job"
        job.mkdir()
        for k, (parts, kind, data) in enumerate(entries):
            parent = job.joinpath(*parts) if parts else job
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                continue
            p = parent / f"f{k}.log"
            if p.exists() or p.is_symlink():
                continue
            if kind == "f":
                p.write_bytes(data)
            elif kind == "gz":
                p.write_bytes(gzip.compress(data))
            elif kind == "bad_gz":
                p.write_bytes(gzip.compress(data)[:-5])
            elif kind == "sym_in":
                os.symlink("f0.log", p)
            elif kind == "sym_out":
                os.symlink(outside / "secret" / "s.log", p)
            elif kind == "sym_dir_out":
                os.symlink(outside / "secret", parent / f"dir{k}")
            elif kind == "sym_loop":
                os.symlink(p.name, p)
            elif kind == "fifo":
                os.mkfifo(p)
            elif kind == "empty":
                p.write_bytes(b"")
            else:
                p.write_bytes(bytes(range(256)) * 4)
        disc = _check_discovery(job, outside)
        assert not any("secret" in str(sf.real_path.resolve()) for sf in disc.files)


@SETTINGS
@given(data=mutated_text(), chunk=st.integers(1, 300), max_line=st.integers(1, 200))
def test_fuzz_iter_chunks_reassembles(data: bytes, chunk: int, max_line: int) -> None:
    """Chunks cut at newlines; lines longer than the cap are cut to it; every line is kept, once."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "a.log").write_bytes(data)
        (sf,) = discover(Path(d)).files
        got = list(iter_chunks(sf, Limits(chunk_bytes=chunk, max_line_bytes=max_line)))
        joined = b"".join(c for c, _ in got)
        want = [ln[:max_line] for ln in data.split(b"\n")]
        if data.endswith(b"\n"):
            want.pop()
        assert joined.split(b"\n")[: len(want)] == want
        n = 1
        for c, first in got:
            assert first == n
            n += c.count(b"\n")


def test_corpus_is_not_empty() -> None:
    assert len(CORPUS) > 500 and len(PARSERS) >= 8
    assert pl.__version__

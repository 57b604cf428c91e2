"""Triage: one pass over a file's bytes with a multi-literal engine, before any line reaches polars.

Every signature pattern and every parser TRIGGER has *required literals*: for each top-level
alternative of the pattern, a run of literal text that every match of that alternative contains
(`required_literals`; `tests/test_triage.py` checks that each signature's examples and each
fixture line a TRIGGER matches contain one, so a prefilter on them is sound). `scan` reads a file
in chunks (bounded memory: one chunk and one partial line), finds the lines holding any of a
`LiteralSet`, and returns their line numbers and byte offsets with the file's digest from the same
pass.

Two engines give identical results behind one interface (`Matcher.rows`):
- `hyperscan` (PyPI `hyperscan`, Intel's multi-pattern engine): the bytes are scanned once and
  only the matches cost Python work, so it pays when survivors are few;
- `polars`: the lines as a polars string column, `str.contains_any` for the literals and
  `str.contains` for regexes (the Rust regex engine the parsers use).
The engine is `hyperscan` when it imports, else `polars`; `FORENSICS_TRIAGE_ENGINE` (or the
`engine` argument) chooses one. The digest is BLAKE3 (PyPI `blake3`) when it imports, else
BLAKE2b-256 (hashlib); `Triage.digest_algo` says which.

Regexes given to a Matcher must not match across a newline (no `\\s`, `.` under `(?s)`, `^`/`$`).
hyperscan runs them only on ASCII input, where its classes (`\\w`, `\\d`) are Rust's; other input
goes to the polars engine (hyperscan's Unicode classes cost 0.35 s to compile per pattern).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from forensics.signatures import top_level_alternatives
from parsers.lines import is_plain, plain_lines

ENGINE_ENV = "FORENSICS_TRIAGE_ENGINE"
ENGINES = ("hyperscan", "polars")
CHUNK_BYTES = 8 * 1024 * 1024
MIN_LITERAL = 3  # shorter runs are too common to screen on
_META = set(".^$*+?{}[]()|\\")
_QUANT = set("*?{")


def hyperscan_available() -> bool:
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return False
    return True


def engine_name(requested: str | None = None) -> str:
    """The engine to use: `requested`, else $FORENSICS_TRIAGE_ENGINE, else hyperscan when it imports."""
    name = requested or os.environ.get(ENGINE_ENV) or ("hyperscan" if hyperscan_available() else "polars")
    if name not in ENGINES:
        raise ValueError(f"unknown triage engine {name!r} (one of {', '.join(ENGINES)})")
    if name == "hyperscan" and not hyperscan_available():
        raise ValueError("triage engine 'hyperscan' asked for, but the hyperscan package is not installed")
    return name


# ---------------------------------------------------------------------------------------------
# required literals


def _runs(alt: str, min_len: int = MIN_LITERAL) -> list[tuple[str, ...]]:
    """What every match of `alt` contains: runs of literal text (1-tuples; classes, escapes like
    `\\d` and optional characters end a run) and, for a required group of alternatives, the set of
    their literals (a match holds one of them)."""
    runs: list[tuple[str, ...]] = []
    lit, i = "", 0

    def close() -> None:
        nonlocal lit
        if lit:
            runs.append((lit,))
        lit = ""

    while i < len(alt):
        c = alt[i]
        if c == "\\" and i + 1 < len(alt):
            if alt[i + 1].isalnum():  # a class (\d, \s, \w) or an anchor (\b): no literal
                close()
                i += 2
                continue
            ch, i = alt[i + 1], i + 2
        elif c == "[":  # a class: skip to its end
            close()
            j = i + 1
            j += alt[j:j + 1] == "^"
            j += alt[j:j + 1] == "]"
            while j < len(alt) and alt[j] != "]":
                j += 2 if alt[j] == "\\" else 1
            i = j + 1
            ch = None
        elif c == "(":  # a group: skip it whole (it may be optional or an alternation)
            close()
            depth, j = 1, i + 1
            start = j
            while j < len(alt) and depth:
                if alt[j] == "\\":
                    j += 2
                    continue
                depth += (alt[j] == "(") - (alt[j] == ")")
                j += 1
            inner, i, ch = alt[start:j - 1], j, None
            if i < len(alt) and alt[i] in "*?{+":  # its quantifier: the group may be absent
                i += 1
                if alt[i - 1] == "{":
                    i = alt.index("}", i) + 1
                i += alt[i:i + 1] in ("?", "+")
                continue
            head = re.match(r"^\?(?:([a-zA-Z]*)(?:-[a-zA-Z]*)?:|P<\w+>)?", inner)
            if "i" in (head.group(1) or ""):  # a (?i:...) group inside: no exact literal
                continue
            inner = inner[head.end():]  # (?:, (?-i:, (?P<name>
            if inner.startswith("?"):  # a lookaround or a flag group: nothing required
                continue
            alts = top_level_alternatives(inner)
            if len(alts) == 1:
                runs.extend(_runs(inner, min_len))  # a group of one alternative: its runs are required
            else:
                bests = [_best(a, min_len) for a in alts]
                if all(b is not None for b in bests):
                    runs.append(tuple(dict.fromkeys(x for b in bests for x in b)))
        elif c in _META:
            close()
            i += 1
            if c == "{":
                i = alt.index("}", i) + 1
            continue
        else:
            ch, i = c, i + 1
        if ch is None:
            continue
        nxt = alt[i:i + 1]
        if nxt in _QUANT:  # optional or repeated zero times: not required
            close()
            continue
        lit += ch
        if nxt == "+":  # one is required, the run ends there
            close()
    close()
    return runs


def _best(alt: str, min_len: int) -> tuple[str, ...] | None:
    """The factor of `alt` to screen on: its shortest member the longest (then the fewest members)."""
    ok = [f for f in _runs(alt, min_len) if all(len(x.strip()) >= min_len for x in f)]
    return max(ok, key=lambda f: (min(len(x) for x in f), -len(f))) if ok else None


def required_literals(pattern: str, min_len: int = MIN_LITERAL) -> tuple[list[str], bool] | None:
    """Literals for each top-level alternative of `pattern` (the longest run every match of that
    alternative contains, or the literals of a required group of alternatives) and whether they match case-insensitively (`(?i)` in front); None when
    some alternative has no run of `min_len` characters (the pattern cannot be prefiltered)."""
    m = re.match(r"^\(\?([a-zA-Z]+)\)", pattern)
    flags = m.group(1) if m else ""
    body = pattern[m.end():] if m else pattern
    lits: list[str] = []
    for alt in top_level_alternatives(body):
        best = _best(alt, min_len)
        if best is None:
            return None
        lits += [x for x in best if x not in lits]
    return lits, "i" in flags


@dataclass(frozen=True)
class LiteralSet:
    exact: tuple[str, ...]
    caseless: tuple[str, ...]  # ASCII case-insensitive

    @property
    def size(self) -> int:
        return len(self.exact) + len(self.caseless)


def literal_set(patterns: Iterable[str]) -> tuple[LiteralSet, list[str]]:
    """The literals of `patterns` and the patterns that have none (they cannot be prefiltered)."""
    exact, caseless, missing = set(), set(), []
    for p in patterns:
        got = required_literals(p)
        if got is None:
            missing.append(p)
            continue
        lits, ci = got
        if ci and all(lit.isascii() for lit in lits):
            caseless.update(lits)
        elif ci:  # non-ASCII letters fold beyond ASCII: no sound literal for the engines' ASCII folding
            missing.append(p)
        else:
            exact.update(lits)
    caseless_l = {c.lower() for c in caseless}
    exact = {e for e in exact if e.lower() not in caseless_l}  # a caseless literal covers it
    return LiteralSet(tuple(sorted(exact)), tuple(sorted(caseless))), missing


def trigger_patterns(parsers: Sequence) -> dict[str, list[str]]:  # noqa: ANN001 - ParserInfo list
    """Each line parser's trigger (its spec's `trigger`) as regexes (a literal list becomes escaped
    alternatives)."""
    out = {}
    for p in parsers:
        trig = p.spec.trigger
        if trig is None:
            continue
        out[p.name] = [re.escape(t) for t in trig] if isinstance(trig, list | tuple) else [trig]
    return out


def catalog_patterns(catalog, parsers: Sequence) -> list[str]:  # noqa: ANN001 - Catalog, ParserInfo list
    """Every signature pattern and every parser trigger: what the catalog's literal set covers."""
    pats = [s.pattern for s in catalog.signatures]
    for trig in trigger_patterns(parsers).values():
        pats += trig
    return pats


# ---------------------------------------------------------------------------------------------
# engines


def _line_starts(data: bytes) -> np.ndarray:
    nl = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.concatenate([[0], nl + 1]).astype(np.int64)
    return starts if not data.endswith(b"\n") else starts[:-1]


def _lines(data: bytes) -> pl.Series:
    """The lines of `data` as strings (invalid UTF-8 replaced: literals are matched on what stays)."""
    s = plain_lines(data) if data and is_plain(data) else None
    if s is not None:
        return s
    text = data.decode("utf-8", errors="replace")
    parts = text.split("\n")
    if text.endswith("\n"):
        parts.pop()
    return pl.Series("text", parts, dtype=pl.Utf8)


class Matcher:
    """A compiled set of literals (and line-local regexes) for one engine."""

    def __init__(self, literals: LiteralSet, regexes: tuple[str, ...] = (), engine: str | None = None) -> None:
        self.literals, self.regexes, self.engine = literals, regexes, engine_name(engine)
        self._db = self._compile() if self.engine == "hyperscan" else None
        self._local = threading.local()  # a scratch space per thread: no two scans may share one

    def _compile(self):  # noqa: ANN202 - a hyperscan.Database
        import hyperscan

        exprs, flags = [], []
        for lit in self.literals.exact:
            exprs.append(re.escape(lit).encode())
            flags.append(0)
        for lit in self.literals.caseless:
            exprs.append(re.escape(lit).encode())
            flags.append(hyperscan.HS_FLAG_CASELESS)
        for rx in self.regexes:  # ASCII input only (see `rows`): ASCII classes are Rust's there
            exprs.append(rx.encode())
            flags.append(0)
        if not exprs:
            return None
        db = hyperscan.Database()
        db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
        return db

    def rows(self, data: bytes, starts: np.ndarray | None = None, lines: pl.Series | None = None) -> np.ndarray:
        """Sorted 0-based indexes of the lines of `data` that hold a match. `starts` (each line's
        byte offset) and `lines` (the lines as strings) spare recomputing them when known."""
        if self.engine == "hyperscan" and (not self.regexes or data.isascii()):
            return self._rows_hyperscan(data, starts)
        return self._rows_polars(data, lines)

    def _rows_hyperscan(self, data: bytes, starts: np.ndarray | None) -> np.ndarray:
        if self._db is None or not data:
            return np.array([], dtype=np.int64)
        ends: list[int] = []

        def hit(_id: int, _frm: int, to: int, _flags: int, _ctx: object) -> None:
            ends.append(to)

        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan

            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        self._db.scan(data, match_event_handler=hit, scratch=scratch)
        if not ends:
            return np.array([], dtype=np.int64)
        last = np.unique(np.asarray(ends, dtype=np.int64) - 1)  # offset of each match's last byte
        if starts is not None:
            return np.unique(np.searchsorted(starts, last, side="right") - 1)
        out, line, prev = [], 0, 0  # newlines before each match: one pass over the bytes in all
        for off in last.tolist():
            line += data.count(b"\n", prev, off)
            prev = off
            if not out or out[-1] != line:
                out.append(line)
        return np.asarray(out, dtype=np.int64)

    def _rows_polars(self, data: bytes, lines: pl.Series | None) -> np.ndarray:
        s = lines if lines is not None else _lines(data)
        if s.is_empty():
            return np.array([], dtype=np.int64)
        conds = []
        if self.literals.exact:
            conds.append(pl.col("t").str.contains_any(list(self.literals.exact)))
        if self.literals.caseless:
            conds.append(pl.col("t").str.contains_any(list(self.literals.caseless), ascii_case_insensitive=True))
        conds += [pl.col("t").str.contains(rx) for rx in self.regexes]
        if not conds:
            return np.array([], dtype=np.int64)
        mask = pl.DataFrame({"t": s}).select(pl.any_horizontal(conds).alias("m"))["m"]
        return np.flatnonzero(mask.fill_null(False).to_numpy()).astype(np.int64)


def matcher(literals: LiteralSet, regexes: tuple[str, ...] = (), engine: str | None = None) -> Matcher:
    """A compiled Matcher for the engine `engine_name(engine)` names now, cached (compiling
    hundreds of literals takes tens of milliseconds)."""
    return _matcher(literals, regexes, engine_name(engine))


@functools.lru_cache(maxsize=16)
def _matcher(literals: LiteralSet, regexes: tuple[str, ...], engine: str) -> Matcher:
    return Matcher(literals, regexes, engine)


# ---------------------------------------------------------------------------------------------
# the pass over a file


def digest_algo() -> str:
    try:
        import blake3  # noqa: F401
    except ImportError:
        return "blake2b-256"
    return "blake3"


def new_hasher(algo: str | None = None):  # noqa: ANN201 - a hashlib-like object
    algo = algo or digest_algo()
    if algo == "blake3":
        import blake3

        return blake3.blake3()
    if algo == "blake2b-256":
        return hashlib.blake2b(digest_size=32)
    raise ValueError(f"unknown digest {algo!r}")


@dataclass
class Triage:
    lines: int  # lines in the file (a last line without '\n' counts)
    line_nos: np.ndarray  # 1-based numbers of the lines holding a literal (sorted)
    offsets: np.ndarray  # byte offset of each such line's start
    digest: str
    digest_algo: str  # 'blake3' or 'blake2b-256'
    engine: str


def scan(chunks: Iterable[bytes], m: Matcher, algo: str | None = None) -> Triage:
    """The survivor lines of a stream of bytes (`m`'s literals) and its digest, in one pass. Memory:
    one chunk plus one unfinished line."""
    algo = algo or digest_algo()
    h = new_hasher(algo)
    carry, base_line, base_off = b"", 0, 0
    nos, offs = [], []

    def block(data: bytes) -> int:
        starts = _line_starts(data)
        rows = m.rows(data, starts=starts)
        nos.append(rows + base_line + 1)
        offs.append(starts[rows] + base_off)
        return len(starts)

    for chunk in chunks:
        if not chunk:
            continue
        h.update(chunk)
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n") + 1
        if cut == 0:
            carry = buf
            continue
        data, carry = buf[:cut], buf[cut:]
        base_line += block(data)
        base_off += len(data)
    if carry:
        base_line += block(carry)
    empty = np.array([], dtype=np.int64)
    return Triage(base_line, np.concatenate(nos) if nos else empty, np.concatenate(offs) if offs else empty,
                  h.hexdigest(), algo, m.engine)


def scan_file(path: Path | str, m: Matcher, chunk_bytes: int = CHUNK_BYTES, algo: str | None = None) -> Triage:
    with open(path, "rb") as fh:
        return scan(iter(lambda: fh.read(chunk_bytes), b""), m, algo)

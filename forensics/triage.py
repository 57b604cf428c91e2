"""Triage: one pass over a file's bytes with a multi-literal engine, before any line reaches polars.

Every signature pattern (but the kind-only ones) and every parser TRIGGER has *required
literals*: a set of literals every line the pattern matches contains one of (`literal_factor`,
derived from the pattern's syntax tree; see "required literals" below). `tests/test_triage.py`
checks that every signature has one, that each example and each fixture line a TRIGGER matches
holds one, and that strings generated from each pattern do; `signatures.match` screens the events'
messages with them before running the regexes. `scan` reads a file
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
import re._constants as _C  # the stdlib regex parser's opcodes
import re._parser as _sre  # the stdlib's own regex parser: the tree `re.compile` builds
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.lines import is_plain, plain_lines

ENGINE_ENV = "FORENSICS_TRIAGE_ENGINE"
ENGINES = ("hyperscan", "polars")
CHUNK_BYTES = 8 * 1024 * 1024
MIN_LITERAL = 3  # shorter runs are too common to screen on


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
#
# The pattern is read by the stdlib's own regex parser (`re._parser`, the tree `re.compile` builds
# from), so escapes, classes, groups, scoped flags and quantifiers mean what `re` says they mean.
# Every node of the tree gets two facts, both sound over-approximations:
#   exact: every string the node can match, when that is a small finite set (else None);
#   req:   a set of literals every match of the node contains one of (else None).
# A sequence multiplies the exact sets of consecutive nodes into a run; a node with no exact set
# (a class, `\d`, `.`, `x*`, anything unbounded) ends the run, and every run is a candidate `req`.
# An alternation's exact set is the union of its branches', its `req` the union of each branch's
# best factor (none when one branch has none). `x?` adds the empty string to x's exact set, `x*`
# and `x{0,n}` know nothing, `x{n,}` is n copies of x then something unknown. Zero-width nodes
# (`^`, `\b`, lookarounds) match the empty string. Case: under `(?i)` an ASCII letter matches
# either ASCII case and the literal is ASCII-caseless (the engines' `ascii_case_insensitive`);
# the few non-ASCII characters `(?i)` also matches to an ASCII letter (CASE_FOLDS) join the exact
# literals of any LiteralSet holding a caseless literal with that letter; any other character
# under `(?i)` that has a case ends the run. A pattern the two engines could read differently
# (verbose mode, a nested class or class set operation, a `{` read as a literal) gets nothing.

CAP = 32  # the most strings an exact set may hold (a longer product ends the run)
_CLASS_CAP = 8  # a class of at most this many characters is an exact set ([Ee], [-_])
# non-ASCII characters `(?i)` matches to an ASCII letter (Python's `re`: all four; Rust's regex,
# which polars runs: the long s and the Kelvin sign); tests/test_triage.py checks every code point
CASE_FOLDS = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

Lit = tuple[str, bool]  # (text, ASCII-caseless)
_EMPTY: tuple[Lit, ...] = (("", False),)


@dataclass(frozen=True)
class _Info:
    exact: tuple[Lit, ...] | None  # every string the node matches (None: not a small finite set)
    req: tuple[Lit, ...] | None  # every match contains one of these
    prefix: tuple[Lit, ...] = _EMPTY  # every match starts with one of these
    suffix: tuple[Lit, ...] = _EMPTY  # every match ends with one of these

    @classmethod
    def of(cls, exact: tuple[Lit, ...]) -> _Info:
        return cls(exact, None, exact, exact)


_UNKNOWN = _Info(None, None)
_ZERO_WIDTH = _Info.of(_EMPTY)


def _uniq(lits: Iterable[Lit]) -> tuple[Lit, ...]:
    return tuple(dict.fromkeys(lits))


def _cat(a: Lit, b: Lit) -> Lit:
    return (a[0] + b[0], a[1] or b[1])


def _covers(b: Lit, a: Lit) -> bool:
    """Every line holding `a` holds `b`."""
    if b[1]:
        return b[0].translate(_LOWER) in a[0].translate(_LOWER)
    return not a[1] and b[0] in a[0]


def _absorb(lits: tuple[Lit, ...]) -> tuple[Lit, ...]:
    """A literal set without the members that hold another member (a line holding them holds it)."""
    if len(lits) < 2:
        return lits
    keep = []
    for i, a in enumerate(lits):
        # dropped when another member is inside it (of two that hold each other, the first stays)
        if not any(j != i and _covers(b, a) and not (i < j and _covers(a, b)) for j, b in enumerate(lits)):
            keep.append(a)
    return tuple(keep)


def _char(code: int, ci: bool) -> Lit | None:
    ch = chr(code)
    if not ci:
        return (ch, False)
    if ch.isascii():
        return (ch, ch.isalpha())
    return None  # a non-ASCII character under (?i): its case partners are not ASCII-foldable


class _Walk:
    def __init__(self, min_len: int) -> None:
        self.min_len = min_len

    def ok(self, lits: tuple[Lit, ...] | None) -> bool:
        return bool(lits) and all(len(t.strip()) >= self.min_len for t, _ in lits)

    def best(self, cands: Iterable[tuple[Lit, ...] | None]) -> tuple[Lit, ...] | None:
        """The candidate to screen on: its shortest literal the longest, then the fewest literals."""
        good = [c for c in cands if self.ok(c)]
        if not good:
            return None
        return max(good, key=lambda c: (min(len(t) for t, _ in c), -len(c), not any(ci for _, ci in c)))

    def seq(self, items: Iterable, flags: int) -> _Info:  # noqa: ANN001 - (opcode, argument) pairs
        infos: list[_Info] = []
        run: list[Lit] = []  # consecutive plain characters, joined before they meet the product
        for op, av in items:
            inf = self.node(op, av, flags)
            if op is _C.LITERAL and inf.exact is not None:
                run.append(inf.exact[0])
                continue
            if run:
                infos.append(_Info.of((("".join(t for t, _ in run), any(c for _, c in run)),)))
                run = []
            infos.append(inf)
        if run:
            infos.append(_Info.of((("".join(t for t, _ in run), any(c for _, c in run)),)))
        return self.concat(infos)

    def concat(self, infos: list[_Info]) -> _Info:
        """A sequence: the exact sets of consecutive nodes multiply into a run; a node without one
        ends it (the run joined to that node's prefixes is a candidate) and starts the next run
        with its suffixes."""
        cur, prefix, cands = _EMPTY, None, []
        for inf in infos:
            if inf.req is not None:
                cands.append(inf.req)
            if inf.exact is not None and len(cur) * len(inf.exact) <= CAP:
                cur = _uniq(_cat(a, b) for a in cur for b in inf.exact)
                continue
            joined = cur
            if inf.exact is None and len(cur) * len(inf.prefix) <= CAP:
                joined = _uniq(_cat(a, b) for a in cur for b in inf.prefix)
            cands.append(joined)
            prefix = joined if prefix is None else prefix
            cur = inf.exact if inf.exact is not None else inf.suffix
        cands.append(cur)
        if prefix is None:
            return _Info(cur, self.best(cands), cur, cur)
        return _Info(None, self.best(cands), prefix, cur)

    def node(self, op, av, flags: int) -> _Info:  # noqa: ANN001, C901 - a re._parser node
        ci = bool(flags & re.IGNORECASE)
        if op is _C.LITERAL:
            if chr(av) in "{}":  # Python reads a brace that opens no quantifier as text; be safe
                return _UNKNOWN
            lit = _char(av, ci)
            return _Info.of((lit,)) if lit is not None else _UNKNOWN
        if op is _C.IN:
            return self.klass(av, ci)
        if op is _C.AT or op is _C.ASSERT or op is _C.ASSERT_NOT:
            return _ZERO_WIDTH
        if op is _C.BRANCH:
            infos = [self.seq(b, flags) for b in av[1]]
            bests = [self.best([i.req, i.exact]) for i in infos]
            req = _uniq(x for b in bests for x in b) if all(b is not None for b in bests) else None

            def union(sets: list[tuple[Lit, ...] | None]) -> tuple[Lit, ...] | None:
                if any(s is None for s in sets):
                    return None
                u = _uniq(x for s in sets for x in s)
                return u if len(u) <= CAP else None

            exact = union([i.exact for i in infos])
            if exact is not None:
                return _Info(exact, req, exact, exact)
            return _Info(None, req, union([i.prefix for i in infos]) or _EMPTY, union([i.suffix for i in infos]) or _EMPTY)
        if op is _C.SUBPATTERN:
            _group, add, delete, sub = av
            return self.seq(sub, (flags | add) & ~delete)
        if op is getattr(_C, "ATOMIC_GROUP", None):
            return self.seq(av, flags)
        if op in _REPEATS:
            lo, hi, sub = av
            inner = self.seq(sub, flags)
            if lo == 0:
                if hi == 1 and inner.exact is not None:
                    return _Info.of(_uniq((*inner.exact, ("", False))))
                return _UNKNOWN
            k = min(lo, 4)
            if hi == lo == k:
                return self.concat([inner] * k)
            got = self.concat([inner] * k + [_UNKNOWN])  # k copies, then more or none
            return _Info(None, got.req, got.prefix, inner.exact if inner.exact is not None else inner.suffix)
        return _UNKNOWN  # ANY, NOT_LITERAL, CATEGORY, GROUPREF, ...: some text, not known

    def klass(self, items: list, ci: bool) -> _Info:  # noqa: ANN001
        chars: list[int] = []
        for op, av in items:
            if op is _C.LITERAL:
                chars.append(av)
            elif op is _C.RANGE and av[1] - av[0] < _CLASS_CAP:
                chars += range(av[0], av[1] + 1)
            else:  # NEGATE, CATEGORY, a wide range
                return _UNKNOWN
        lits = [_char(c, ci) for c in chars]
        if len(chars) > _CLASS_CAP or any(x is None for x in lits) or any(not chr(c).isprintable() for c in chars):
            return _UNKNOWN
        return _Info.of(_uniq(lits))


_REPEATS = tuple(x for x in (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", None)) if x is not None)


@functools.lru_cache(maxsize=4096)
def literal_factor(pattern: str, min_len: int = MIN_LITERAL) -> tuple[Lit, ...] | None:
    """Literals every match of `pattern` contains one of, each (text, ASCII-caseless), each at
    least `min_len` characters (not counting spaces); None when the pattern has no such set."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tree = _sre.parse(pattern)
        except re.error:
            return None
    if any(issubclass(w.category, FutureWarning) for w in caught):  # a nested set: Rust reads it otherwise
        return None
    flags = tree.state.flags
    if flags & re.VERBOSE:
        return None
    req = _Walk(min_len).seq(tree, flags).req
    return _absorb(req) if req is not None else None


def required_literals(pattern: str, min_len: int = MIN_LITERAL) -> tuple[list[str], bool] | None:
    """`literal_factor` as (literals, caseless): every match of `pattern` contains one of the
    literals (ASCII case-insensitively when `caseless`: a set mixing both is caseless, which only
    keeps more lines); None when the pattern has no literal of `min_len` characters."""
    got = literal_factor(pattern, min_len)
    if got is None:
        return None
    ci = any(c for _, c in got)
    return list(dict.fromkeys(t for t, _ in got)), ci


@dataclass(frozen=True)
class LiteralSet:
    exact: tuple[str, ...]
    caseless: tuple[str, ...]  # ASCII case-insensitive

    @property
    def size(self) -> int:
        return len(self.exact) + len(self.caseless)

    @classmethod
    def of(cls, lits: Iterable[Lit]) -> LiteralSet:
        """The set holding `lits` ((text, caseless) pairs), sorted, with an exact literal a caseless
        one covers left out, and the non-ASCII characters (?i) matches to a caseless literal's
        letters (CASE_FOLDS) added as exact literals: a line the pattern matches through one of
        them still holds a literal."""
        exact, caseless = set(), {}
        for text, ci in lits:
            if ci:
                caseless.setdefault(text.translate(_LOWER), text)
            else:
                exact.add(text)
        exact = {e for e in exact if e.translate(_LOWER) not in caseless}
        exact |= {f for c in caseless for letter, folds in CASE_FOLDS.items() if letter in c for f in folds}
        return cls(tuple(sorted(exact)), tuple(sorted(caseless.values())))

    @classmethod
    def union(cls, sets: Iterable[LiteralSet]) -> LiteralSet:
        """One set holding the literals of all of `sets` (a line holding one of any of them)."""
        sets = list(sets)
        return cls.of([(e, False) for s in sets for e in s.exact] + [(c, True) for s in sets for c in s.caseless])

    def contains(self, col: pl.Expr) -> pl.Expr:
        """True where the strings of `col` hold one of the literals (null stays null); False
        everywhere for an empty set."""
        conds = []
        if self.exact:
            conds.append(col.str.contains_any(list(self.exact)))
        if self.caseless:
            conds.append(col.str.contains_any(list(self.caseless), ascii_case_insensitive=True))
        return pl.any_horizontal(conds) if conds else pl.lit(False)


def literal_set(patterns: Iterable[str]) -> tuple[LiteralSet, list[str]]:
    """The literals of `patterns` and the patterns that have none (they cannot be prefiltered)."""
    lits: list[Lit] = []
    missing = []
    for p in patterns:
        got = literal_factor(p)
        if got is None:
            missing.append(p)
        else:
            lits += got
    return LiteralSet.of(lits), missing


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

    def __init__(self, literals: LiteralSet, regexes: tuple[str, ...] = (), engine: str | None = None,
                 once: tuple[str, ...] = ()) -> None:
        self.literals, self.regexes, self.engine = literals, regexes, engine_name(engine)
        self.once = once  # byte patterns (hyperscan only) reported once a scan, ids after the regexes' (`scan`)
        if once and self.engine != "hyperscan":
            raise ValueError("`once` patterns need the hyperscan engine")
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
        for rx in self.once:
            exprs.append(rx.encode())
            flags.append(hyperscan.HS_FLAG_SINGLEMATCH)
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

    def rows_each(self, data: bytes, starts: np.ndarray | None = None, lines: pl.Series | None = None,
                  ascii_: bool | None = None) -> list[np.ndarray]:
        """For each of the regexes, in order, the sorted 0-based indexes of the lines of `data` it
        matches (the literals are not looked for): one pass over the bytes with hyperscan on ASCII
        input, else polars on the lines. `ascii_`: whether `data` is ASCII, when the caller knows."""
        if self.engine == "hyperscan" and (data.isascii() if ascii_ is None else ascii_):
            ends = self._scan(data)
            base = self.literals.size
            return [self._rows_of(data, ends.get(base + k, []), starts) for k in range(len(self.regexes))]
        s = lines if lines is not None else _lines(data)
        if s.is_empty() or not self.regexes:
            return [np.array([], dtype=np.int64) for _ in self.regexes]
        masks = pl.DataFrame({"t": s}).select([pl.col("t").str.contains(ascii_classes(rx)).alias(f"m{k}")
                                               for k, rx in enumerate(self.regexes)])
        return [np.flatnonzero(masks[c].fill_null(False).to_numpy()).astype(np.int64) for c in masks.columns]

    def scan(self, data: bytes) -> dict[int, list[int]]:
        """The end offsets of the matches of each expression, from one hyperscan pass over `data`,
        by id: the literals (exact, then caseless), the regexes, then the `once` patterns (their
        first match only). `rows_of` turns a regex's offsets into lines."""
        return self._scan(data)

    def rows_of(self, data: bytes, ends: list[int], starts: np.ndarray | None = None) -> np.ndarray:
        """The sorted 0-based indexes of the lines of `data` holding the matches that end at `ends`
        (`starts`: each line's byte offset, when known)."""
        return self._rows_of(data, ends, starts)

    def _scan(self, data: bytes) -> dict[int, list[int]]:
        """The end offsets of the matches of each expression (by id), from one hyperscan pass."""
        ends: dict[int, list[int]] = {}
        if self._db is None or not data:
            return ends

        def hit(i: int, _frm: int, to: int, _flags: int, _ctx: object) -> None:
            ends.setdefault(i, []).append(to)

        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan

            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        self._db.scan(data, match_event_handler=hit, scratch=scratch)
        return ends

    def _rows_hyperscan(self, data: bytes, starts: np.ndarray | None) -> np.ndarray:
        ends = [to for got in self._scan(data).values() for to in got]
        return self._rows_of(data, ends, starts)

    @staticmethod
    def _rows_of(data: bytes, ends: list[int], starts: np.ndarray | None) -> np.ndarray:
        """The lines holding the matches that end at `ends` (sorted, unique)."""
        if not ends:
            return np.array([], dtype=np.int64)
        last = _sorted_unique(np.asarray(ends, dtype=np.int64) - 1)  # offset of each match's last byte
        if starts is not None:
            return _sorted_unique(np.searchsorted(starts, last, side="right") - 1)
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
        conds += [pl.col("t").str.contains(ascii_classes(rx)) for rx in self.regexes]
        if not conds:
            return np.array([], dtype=np.int64)
        mask = pl.DataFrame({"t": s}).select(pl.any_horizontal(conds).alias("m"))["m"]
        return np.flatnonzero(mask.fill_null(False).to_numpy()).astype(np.int64)


def matcher(literals: LiteralSet, regexes: tuple[str, ...] = (), engine: str | None = None,
            once: tuple[str, ...] = ()) -> Matcher:
    """A compiled Matcher for the engine `engine_name(engine)` names now, cached (compiling
    hundreds of literals takes tens of milliseconds)."""
    return _matcher(literals, regexes, engine_name(engine), once)


@functools.lru_cache(maxsize=16)
def _matcher(literals: LiteralSet, regexes: tuple[str, ...], engine: str, once: tuple[str, ...] = ()) -> Matcher:
    return Matcher(literals, regexes, engine, once)


class LiteralGate:
    """Which of a few ASCII literals ((text, ASCII-caseless) pairs) occur in a piece of bytes:
    one hyperscan pass, each literal reported once (a head holding thousands of one literal costs
    one callback), or one `in` per literal (the polars engine's platforms; caseless ones on the
    ASCII-lowered bytes). Both give the same set (tests/test_triage.py)."""

    def __init__(self, literals: Sequence[Lit], engine: str | None = None) -> None:
        if not all(text.isascii() and text for text, _ in literals):
            raise ValueError("a LiteralGate holds non-empty ASCII literals only")
        self.literals, self.engine = tuple(literals), engine_name(engine)
        self._db = None
        self._local = threading.local()
        if self.engine == "hyperscan" and self.literals:
            import hyperscan

            flags = [hyperscan.HS_FLAG_SINGLEMATCH | (hyperscan.HS_FLAG_CASELESS if ci else 0)
                     for _, ci in self.literals]
            self._db = hyperscan.Database()
            self._db.compile(expressions=[re.escape(t).encode() for t, _ in self.literals],
                             ids=list(range(len(self.literals))), elements=len(self.literals), flags=flags)

    def found(self, data: bytes) -> frozenset[int]:
        """Indexes (in `literals`) of the literals `data` holds."""
        if self._db is None or not data:
            if not data:
                return frozenset()
            low = data.lower() if any(ci for _, ci in self.literals) else data
            return frozenset(k for k, (t, ci) in enumerate(self.literals)
                             if (t.lower().encode() in low if ci else t.encode() in data))
        got: set[int] = set()

        def hit(i: int, _frm: int, _to: int, _flags: int, _ctx: object) -> None:
            got.add(i)

        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan

            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        self._db.scan(data, match_event_handler=hit, scratch=scratch)
        return frozenset(got)


def literal_gate(literals: Sequence[Lit], engine: str | None = None) -> LiteralGate:
    """A compiled LiteralGate for the engine `engine_name(engine)` names now, cached."""
    return _literal_gate(tuple(literals), engine_name(engine))


@functools.lru_cache(maxsize=8)
def _literal_gate(literals: tuple[Lit, ...], engine: str) -> LiteralGate:
    return LiteralGate(literals, engine)


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


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """`np.unique(a)` of a 1-D integer array (sorted, each value once), without what numpy 2.x's
    `np.unique` loads on its first call (`numpy.ma`: 10-20 ms of a small bundle's run)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a

"""Batched ingest of plain-text line logs: the hot path for jobs with thousands of rank logs.

`ingest.parse_one` costs a few hundred polars calls per file whatever its size, and runs every
regex over every line. Here many files are handled at once:

1. their bytes are read into one frame, a line per row, two separator rows after each file (one
   `pl.read_csv` call: the files as pieces when large, else joined); each file's lines are counted
   from the frame and checked against its bytes (`_file_lines`);
2. NCCL INFO/TRACE/CALL chatter (`parsers.nccl.chatter`, computed as `chatter_mask`: literal prefix
   checks, the prefix regex on the few other lines) is counted as ignored and dropped before any parser runs: in an INFO-level log that is
   nearly every line;
3. every BATCH parser runs once over the remaining lines of all files (not at all when it declares a
   trigger and no line matches it: `triggered`). Per-file hints are the
   columns `hint_host`, `hint_rank`, `hint_file`; the line numbers of different files lie GAP
   apart and two separator lines stand between files, so no multi-line rule joins two files;
4. every other line parser runs per file, and only on files with a line matching its trigger (`spec.trigger`)
   (a parser finds nothing in a file without one: tests/test_bulk.py checks that on every
   fixture);
5. the results are split back per file, line numbers made the file's own again.

A file's result is that of `parse_one` on the same bytes (tests/test_bulk.py compares both on
every fixture), except that the dropped chatter no longer stands between the lines a
multi-line rule looks at. Files with NUL, CR, ESC, 0x1e, 0x1f or invalid UTF-8 (`clean`), files a
batch parser warns about, and batches that fail are left to `parse_one`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from forensics import triage
from forensics.accounting import (
    ERRORISH,
    SPAN_LINES,
    FileResult,
    check_unchanged,
    fill_wrapper_host,
    keep_errors,
    stamp_fields,
    stamp_of_fields,
    wrapper_hosts,
)
from forensics.config import JobConfig
from forensics.discovery import SourceFile
from parsers import ParserInfo
from parsers.ascii_regex import ascii_classes
from parsers.lines import MAX_LINE_CHARS, is_plain, literal_regex, plain_kind, plain_lines, with_body
from parsers.nccl import INFO_INTERESTING, PREFIX_CHECK
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext, conform
from parsers.timestamps import derive_missing

GAP = 1_000_000  # line numbers between two files of a batch (wider than any parser's look-ahead)
SEP = "\x1e"  # text of the separator lines between files
_SEP_BYTE = SEP.encode()
_SEP_BLOCK = (SEP + "\n") * 2
# every stamp shape `accounting.stamp_expr` reads has one (a web-UI export's epoch ms: the second)
STAMP_HINT = r"\d\d:\d\d:\d\d|\| \d{13} \| "
PREFIX_SAMPLE = 64  # lines sampled per file for the batch's common NCCL prefixes
PREFIX_SAMPLES, PREFIX_SAMPLE_MIN = 1024, 16  # ... fewer a file in a batch of many (at least the second)
_NO_LITERALS = triage.LiteralSet((), ())  # the chatter screen's triage matches one regex, no literal
# every line PREFIX_CHECK matches holds one of these (`triage.literal_factor`): the regex runs on those only
_PREFIX_LITERALS = triage.LiteralSet.of(triage.literal_factor(PREFIX_CHECK) or (("", False),))


@dataclass
class Item:
    index: int  # position in the discovery's file list
    sf: SourceFile
    data: bytes


def digest_algo() -> str:
    """The file digest of this run: BLAKE3 when the `blake3` package imports, else BLAKE2b-256."""
    return triage.digest_algo()


def new_hasher():  # noqa: ANN201 - a hashlib-like object
    return triage.new_hasher(digest_algo())


def digest(data: bytes) -> str:
    h = new_hasher()
    h.update(data)
    return h.hexdigest()


def clean(data: bytes) -> bool:
    """Plain text (`parsers.lines.is_plain`) without the separator the batch frame uses itself."""
    return bool(data) and plain_kind(data, (_SEP_BYTE,)) is not None


def _hints(items: list[Item], cfg: JobConfig) -> tuple[list[str | None], list[int | None]]:
    """Each file's host (through the job's host aliases) and rank, as its path names them."""
    return ([cfg.host_aliases.get(it.sf.host_hint or "", it.sf.host_hint) for it in items],
            [it.sf.rank_hint for it in items])


SKIP_UNTRIGGERED = True  # skip a parser on a frame without a trigger line (tests turn it off: same results)


def _trigger(p: ParserInfo) -> pl.Expr | None:
    trig = p.spec.trigger
    if trig is None:
        return None
    body = pl.col("body")
    return body.str.contains_any(list(trig)) if isinstance(trig, list | tuple) else body.str.contains(ascii_classes(trig))


def triggered(p: ParserInfo, lines: pl.DataFrame) -> bool:
    """Whether parser `p` may find something in `lines` (a frame with `body`): False only when it
    declares a trigger (`spec.trigger`) and no line matches it, so its parse call can be skipped
    (the trigger contract: such a frame gives nothing; tests/test_line_triggers.py checks it)."""
    trig = _trigger(p) if SKIP_UNTRIGGERED and "body" in lines.columns else None
    return trig is None or bool(lines.select(trig.fill_null(False).any()).item())


def trigger_literals(p: ParserInfo) -> tuple[tuple[str, bool], ...] | None:
    """Literals ((text, ASCII-caseless) pairs) every line matching parser `p`'s trigger holds one of:
    a literal trigger's own, a regex trigger's `triage.literal_factor`; None without a trigger or
    when the regex has no such set."""
    trig = p.spec.trigger
    if trig is None:
        return None
    return tuple((t, False) for t in trig) if isinstance(trig, list | tuple) else triage.literal_factor(trig)


TRIGGER_SCREEN_ROWS = 50_000  # a batch frame this tall: the screened triggers are looked for on the screen's lines
_TRIGGER_SCREENS: dict[tuple, tuple[frozenset[str], pl.Expr | None]] = {}


def trigger_screen(parsers: list[ParserInfo]) -> tuple[frozenset[str], pl.Expr | None]:
    """The parsers of `parsers` whose trigger `trigger_literals` covers, and an expression over
    `body` true on the lines holding one of those literals (None when fewer than two are covered):
    every line matching one of their triggers is such a line, so their triggers can be looked for
    on those lines alone (`parse_screened`). The exact literals as one regex alternation (the
    regex engine's literal search reads a large frame about twice as fast as `str.contains_any`)."""
    key = tuple((p.name, p.spec.trigger if not isinstance(p.spec.trigger, list) else tuple(p.spec.trigger))
                for p in parsers if not p.exclusive)
    got = _TRIGGER_SCREENS.get(key)
    if got is None:
        names, lits = set(), []
        for p in parsers:
            req = trigger_literals(p) if not p.exclusive else None
            if req:
                names.add(p.name)
                lits += req
        ls = triage.LiteralSet.of(lits)
        body = pl.col("body")
        conds = ([body.str.contains(ascii_classes(literal_regex(ls.exact)))] if ls.exact else []) + (
            [body.str.contains_any(list(ls.caseless), ascii_case_insensitive=True)] if ls.caseless else [])
        expr = pl.any_horizontal(conds).fill_null(False) if len(names) > 1 and conds else None
        got = _TRIGGER_SCREENS[key] = (frozenset(names), expr)
    return got


def _file_of(nos: pl.Series, bases: np.ndarray) -> np.ndarray:
    """The batch file each batch line number belongs to."""
    return np.searchsorted(bases, nos.to_numpy(), side="right") - 1


def _per_file(values: list, dtype: pl.DataType) -> pl.Expr:
    """Each row's file's value (by the `hint_file` column)."""
    return pl.col("hint_file").replace_strict(list(range(len(values))), values, return_dtype=dtype)


@dataclass
class Screened:
    """One batch after the byte-level pass: the raw text is gone, what the parsers need is kept."""
    items: list[Item]  # data dropped (b"")
    n: np.ndarray  # lines per file
    chat: np.ndarray  # chatter lines per file (ignored, never parsed)
    sha: list[str]  # each file's digest (`digest`)
    span: pl.DataFrame  # hint_file, line_no, text: each file's first and last SPAN_LINES lines (stamped ones)
    rest: pl.DataFrame  # line_no (batch numbering), text, hint_file, _local, _sep: all but chatter
    bases: np.ndarray  # line_no = base + local line number


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The integers of the half-open ranges [lo, hi) one after the other (empty ranges allowed)."""
    size = np.maximum(hi - lo, 0)
    if not size.sum():
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(size)
    return np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - size - lo, size)


GROUPS_MIN_LINES = 4096  # chatter_mask: fewer lines left than this go to the regex without the other prefixes
PIECES_MIN_BYTES = 1 << 20  # files this large on average are handed to polars' reader as they are (no join)


def screen(items: list[Item], cfg: JobConfig, ref_year: int | None,
           max_line: int = MAX_LINE_CHARS) -> tuple[Screened | None, list[int]]:
    """Read a batch into one frame, count and drop NCCL chatter, find each file's first and last
    stamps. Returns the screened batch and the item indices left to `parse_one` (unclean files,
    or all when the batch cannot be read as lines). Only the lines kept (not chatter) and each
    file's first and last SPAN_LINES lines with a stamp hint leave as frames: the others are
    counted and never made rows of their own.

    The bytes are read few times: one hyperscan pass a file tells whether it is clean and ASCII
    and finds the lines the regexes match (`_clean_kind`; without hyperscan, `plain_kind`), then
    polars' reader (the files and the separator lines between them, as pieces when the files are
    large, else joined), the digest. Each file's
    lines are counted from the frame (the separator rows after it), and checked against its
    bytes: its rows and their newlines are exactly its bytes, or the batch goes to `parse_one`."""

    pieces = sum(len(it.data) for it in items) >= PIECES_MIN_BYTES * len(items)
    # the stamp hint runs in the hyperscan pass over small files (most of their lines are span lines),
    # else on the span lines only
    regexes = (INFO_INTERESTING,) if pieces else (INFO_INTERESTING, STAMP_HINT)
    m = triage.matcher(_NO_LITERALS, regexes, once=_UNCLEAN_BYTES) if triage.engine_name() == "hyperscan" else None
    kinds, ends = zip(*(_clean_kind(it.data, m) for it in items), strict=True) if items else ((), ())
    ok = [it for it, k in zip(items, kinds, strict=True) if k is not None]
    ok_ends = [e for e, k in zip(ends, kinds, strict=True) if k is not None]
    again = [it.index for it, k in zip(items, kinds, strict=True) if k is None]
    if not ok:
        return None, again
    ascii_ = all(k == "ascii" for k in kinds if k is not None)
    sep = _SEP_BLOCK.encode()
    if pieces:
        blob = None  # each file a piece of its own (a last line without '\n' ends with its piece)
        text = _read_lines([part for it in ok for part in (it.data, sep)])
    else:
        blob = b"".join([part for it in ok for part in (it.data, b"" if it.data.endswith(b"\n") else b"\n", sep)])
        text = _read_lines([blob])
    lines = _file_lines(text, ok, min(max_line, MAX_LINE_CHARS)) if text is not None else None
    if lines is None:
        return None, again + [it.index for it in ok]
    n, first, cum = lines
    bases = np.concatenate([[0], np.cumsum(n + GAP)[:-1]]).astype(np.int64)
    # first / last stamp among each file's first and last SPAN_LINES lines (chatter included)
    head_hi = np.minimum(n, SPAN_LINES)
    span_rows = np.sort(np.concatenate([_ranges(first, first + head_hi),
                                        _ranges(first + np.maximum(head_hi, n - SPAN_LINES), first + n)]))
    interesting = stamped = None
    if m is not None and ascii_:  # the same hyperscan pass found the few lines the regexes match
        got = _hyperscan_rows(m, ok, ok_ends, n, first, cum)
        interesting = np.zeros(text.len(), dtype=bool)
        interesting[got[0]] = True
        if len(got) > 1:
            stamped = np.zeros(text.len(), dtype=bool)
            stamped[got[1]] = True
    del blob
    chat = chatter_mask(text, interesting, np.append(first, text.len()))
    kept = np.flatnonzero(~chat)  # blank lines stay: a block may hold them; so do the separators
    k = np.searchsorted(first, kept, side="right") - 1
    local = kept - first[k] + 1
    is_sep = local > n[k]
    rest = pl.DataFrame({"line_no": bases[k] + local, "text": text.gather(kept), "hint_file": k, "_local": local,
                         "_sep": is_sep})
    chat_n = n - np.bincount(k[~is_sep], minlength=len(ok)).astype(np.int64)
    if stamped is not None:  # those with a stamp hint (their stamps are read per group, `parse_screened`)
        span_rows = span_rows[stamped[span_rows]]
    sk = np.searchsorted(first, span_rows, side="right") - 1
    spans = pl.DataFrame({"hint_file": sk, "line_no": bases[sk] + span_rows - first[sk] + 1,
                          "text": text.gather(span_rows)})
    if stamped is None:
        spans = spans.filter(pl.col("text").str.contains(ascii_classes(STAMP_HINT)))
    sha = [digest(it.data) for it in ok]
    kept_items = [Item(it.index, it.sf, b"") for it in ok]
    return Screened(kept_items, n, chat_n, sha, spans, rest, bases), again


def _read_lines(pieces: list[bytes]) -> pl.Series | None:
    """The lines of plain text (`clean`) read as a one-column CSV by polars (many threads), as
    `parsers.lines.plain_lines` reads them, each piece as a file of its own (no join); None when
    polars cannot read them."""
    try:
        s = pl.read_csv(pieces[0] if len(pieces) == 1 else pieces, has_header=False, separator="\x1f",
                        quote_char=None, infer_schema=False, new_columns=["text"], empty_string_is_null=False)["text"]
    except Exception:  # noqa: BLE001 - parse_one reads anything
        return None
    return s


def _file_lines(text: pl.Series, ok: list[Item], longest: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each file's lines, first row and row bytes (`cum`: the byte offset of every row, each row
    taking its newline, and the end), from the frame of the batch's files, each followed by two
    separator rows: None unless the rows after each file are the separators, every row is at most
    `longest` bytes, and each file's rows with a newline each are its bytes (a file's last line
    without one gets one), so that its rows are its lines exactly."""
    lens = text.str.len_bytes().to_numpy()
    if not lens.size or int(lens.max()) > longest:
        return None
    seps = np.flatnonzero((text == SEP).to_numpy())  # (a clean file holds no SEP byte: these are ours)
    if seps.size != 2 * len(ok):
        return None
    a, b = seps[0::2], seps[1::2]
    if not bool((b == a + 1).all()) or int(b[-1]) != lens.size - 1:
        return None
    first = np.concatenate([[0], b[:-1] + 1]).astype(np.int64)
    step = lens.astype(np.int64)
    step += 1
    cum = np.empty(lens.size + 1, dtype=np.int64)
    cum[0] = 0
    np.cumsum(step, out=cum[1:])
    size = np.array([len(it.data) + (0 if it.data.endswith(b"\n") else 1) for it in ok], dtype=np.int64)
    if not bool((cum[a] - cum[first] == size).all()):
        return None
    return (a - first).astype(np.int64), first, cum


# the bytes `clean` refuses (a hyperscan class: NUL, CR, ESC, SEP, 0x1f), and any byte that is not ASCII
_UNCLEAN_BYTES = (r"[\x00\r\x1b\x1e\x1f]", r"[\x80-\xff]")


def _clean_kind(data: bytes, m: triage.Matcher | None) -> tuple[str | None, dict[int, list[int]] | None]:
    """`plain_kind` of a file's bytes with the separator refused too (None for empty bytes), and,
    with a hyperscan matcher `m` (its `once` patterns: _UNCLEAN_BYTES), the end offsets of its
    regexes' matches: one pass over the bytes tells both (the text that is not ASCII is then
    decoded whole)."""
    if not data:
        return None, None
    if m is None:
        return plain_kind(data, (_SEP_BYTE,)), None
    ends = m.scan(data)
    k = m.literals.size + len(m.regexes)
    if k in ends:
        return None, None
    if k + 1 not in ends:
        return "ascii", ends
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None, None
    return "utf-8", ends


class ChunkScreen:
    """The chatter screen of `screen` for the chunks of one large file (`ingest.parse_one`): one
    hyperscan pass a chunk tells whether its bytes are plain (`plain_kind`: no NUL, CR, ESC, \\x1e,
    \\x1f; ASCII or UTF-8) and where INFO_INTERESTING matches, so that `chatter` is `chatter_mask`
    with that mask. Without hyperscan: no pass, `chatter_mask` finds the mask itself. The same lines
    are chatter either way (tests/test_bulk.py)."""

    def __init__(self) -> None:
        self.m = triage.matcher(_NO_LITERALS, (INFO_INTERESTING,), once=_UNCLEAN_BYTES) \
            if triage.engine_name() == "hyperscan" else None
        self.kind: str | None = None  # of the last chunk scanned: "ascii", "utf-8", None (not plain / unknown)
        self._ends: list[int] = []
        self._data = b""

    def scan(self, data: bytes) -> bool | None:
        """Look at the next chunk's bytes: whether they are plain text (None: not known)."""
        self._data, self._ends, self.kind = data, [], None
        if self.m is None or not data:
            return None
        kind, ends = _clean_kind(data, self.m)
        self.kind = kind
        if kind is not None and ends:
            self._ends = ends.get(self.m.literals.size, [])
        return kind is not None

    def chatter(self, text: pl.Series) -> np.ndarray:
        """The chatter mask of the lines of the chunk last scanned (`text`: its lines, one row each)."""
        interesting = None
        if self.kind == "ascii":  # its rows are its newline-separated pieces: the offsets give the rows
            starts = None
            if len(self._ends) > 4096:  # (many matches: each line's offset once, not a count per match)
                nl = np.flatnonzero(np.frombuffer(self._data, dtype=np.uint8) == 10)
                starts = np.concatenate([[0], nl + 1]).astype(np.int64)
            interesting = np.zeros(text.len(), dtype=bool)
            rows = self.m.rows_of(self._data, self._ends, starts) if self._ends else np.array([], dtype=np.int64)
            interesting[rows[rows < text.len()]] = True
        return chatter_mask(text, interesting)


def _hyperscan_rows(m: triage.Matcher, ok: list[Item], ends: list[dict[int, list[int]]], n: np.ndarray,
                    first: np.ndarray, cum: np.ndarray) -> list[np.ndarray]:
    """Each regex's rows of the batch frame from the end offsets of its matches in each file
    (`ends`, `_clean_kind`; `n`, `first`, `cum`: as `_file_lines` gives them)."""
    parts: list[list[np.ndarray]] = [[] for _ in m.regexes]
    base = m.literals.size
    for f, (it, got) in enumerate(zip(ok, ends, strict=True)):
        lo, hi = int(first[f]), int(first[f] + n[f])
        for k in range(len(m.regexes)):
            if got.get(base + k):
                parts[k].append(m.rows_of(it.data, got[base + k], cum[lo:hi] - cum[lo]) + lo)
    return [np.concatenate(p) if p else np.zeros(0, dtype=np.int64) for p in parts]


def chatter_mask(text: pl.Series, interesting: np.ndarray | None = None, bounds: np.ndarray | None = None
                 ) -> np.ndarray:
    """`parsers.nccl.chatter` of each line, computed with the prefix regex on few lines. A line
    that starts with a string PREFIX_CHECK matches whole holds a match (the regex is not anchored),
    so the lines starting with one of the NCCL prefixes found on a sample of each file's lines
    (`host:pid:tid [dev] NCCL INFO `, `_common_prefixes`) need only a literal check: first each
    line against its file's most common prefix (one compare a line), then the lines still unknown
    against the others, a length at a time (their first characters looked up in the set of the
    prefixes of that length); the regex runs on the lines left. Since every match of PREFIX_CHECK
    holds " NCCL INFO ", " NCCL TRACE " or " NCCL CALL ", a line it matches is chatter unless it is
    interesting (INFO_INTERESTING) and neither TRACE nor CALL, so those literals are checked on the
    interesting lines only. `interesting`: the INFO_INTERESTING mask when known (bulk's triage
    engine); `bounds`: each file's first row, then the number of rows (one file when None). Equal
    to `chatter` on every line (tests/test_bulk.py)."""
    n = text.len()
    if n == 0:
        return np.zeros(0, dtype=bool)
    bounds = np.array([0, n], dtype=np.int64) if bounds is None else np.asarray(bounds, dtype=np.int64)
    tops, groups = _common_prefixes(text, bounds)
    distinct = {t for t in tops if t is not None}
    if not distinct:
        pc = np.zeros(n, dtype=bool)
    elif len(distinct) == 1:  # (a plain comparison: no slice, no hashing)
        pc = text.str.starts_with(distinct.pop()).fill_null(False).to_numpy()
    else:  # each line against its own file's prefix
        own = pl.Series("p", tops, dtype=pl.Utf8).gather(
            pl.Series(np.repeat(np.arange(len(tops), dtype=np.uint32), np.diff(bounds))))
        hit = text.str.starts_with(own)
        pc = (hit.fill_null(False) if hit.null_count() else hit).to_numpy()
    if not pc.flags.writeable:
        pc = pc.copy()
    unknown = np.flatnonzero(~pc)
    for group in groups if unknown.size > GROUPS_MIN_LINES else ():  # (few lines: the regex at once)
        part = text.gather(unknown)
        if len(group) == 1:
            hit = part.str.starts_with(group[0]).fill_null(False).to_numpy()
        else:
            hit = part.str.slice(0, len(group[0])).is_in(pl.Series(group, dtype=pl.Utf8).implode()) \
                .fill_null(False).to_numpy()
        pc[unknown[hit]] = True
        unknown = unknown[~hit]
        if not unknown.size:
            break
    if unknown.size:  # of the other lines, those that hold a literal every match of the regex holds
        t = pl.col("t")
        pc[unknown] = pl.DataFrame({"t": text.gather(unknown)}).select(
            (_PREFIX_LITERALS.contains(t) & t.str.contains(ascii_classes(PREFIX_CHECK))).fill_null(False)).to_series().to_numpy()
    if interesting is None:
        interesting = text.str.contains(ascii_classes(INFO_INTERESTING)).fill_null(False).to_numpy()
    chat = pc
    hot = np.flatnonzero(pc & interesting)
    if hot.size:
        chat[hot] = pl.DataFrame({"t": text.gather(hot)}).select(
            pl.col("t").str.contains_any([" NCCL TRACE ", " NCCL CALL "]).fill_null(False)).to_series().to_numpy()
    return chat


def _common_prefixes(text: pl.Series, bounds: np.ndarray) -> tuple[list[str | None], list[list[str]]]:
    """The NCCL prefixes (strings PREFIX_CHECK matches whole, at the start of a line) found on
    PREFIX_SAMPLE evenly spread lines of each file (fewer when the batch has many files) (rows bounds[f]:bounds[f+1]): each file's own
    that starts most of its sampled lines, if one does (else None), and all of them grouped by
    their length in characters, the groups that start the most sampled lines first."""
    sizes = np.diff(bounds)
    take = np.minimum(sizes, max(PREFIX_SAMPLE_MIN, min(PREFIX_SAMPLE, PREFIX_SAMPLES // max(sizes.size, 1))))
    step = np.maximum(sizes // np.maximum(take, 1), 1)
    idx = _ranges(np.zeros_like(take), take) * np.repeat(step, take) + np.repeat(bounds[:-1], take)
    found = text.gather(idx).str.extract(f"^({PREFIX_CHECK})", 1).to_list()
    tops: list[str | None] = [None] * sizes.size
    counts: Counter[str] = Counter()
    at = 0
    for f, t in enumerate(take.tolist()):  # (PREFIX_SAMPLE lines a file, not a line each)
        mine = Counter(p for p in found[at:at + t] if p is not None)
        at += t
        if mine:
            p, c = min(mine.items(), key=lambda kv: (-kv[1], kv[0]))
            if 2 * c > t:
                tops[f] = p
            counts.update(mine)
    by_len: dict[int, list[str]] = {}
    n_len: Counter[int] = Counter()
    for p, c in counts.items():
        by_len.setdefault(len(p), []).append(p)
        n_len[len(p)] += c
    order = sorted(by_len, key=lambda ln: (-n_len[ln], ln))
    return tops, [sorted(by_len[ln]) for ln in order]


def _spans(lines: pl.DataFrame, cfg: JobConfig, ref_year: int | None) -> dict[int, tuple]:
    """hint_file -> (earliest, latest) stamp among `lines` (hint_file, line_no, text): each file's
    first and last SPAN_LINES lines, as `accounting.line_span` reads them."""

    span = lines.filter(pl.col("text").str.contains(ascii_classes(STAMP_HINT))).select("hint_file", "line_no", "text")
    if span.is_empty():
        return {}
    sctx = ParseContext(path="<batch>", ref_year=ref_year, tz=cfg.timezone)
    # each distinct stamp (its pieces, `accounting.stamp_fields`) parsed once per file: the lines
    # of a CSV export share a few hundred stamps, and parsing is most of the cost
    fields = with_body(span).select("hint_file", *stamp_fields()).unique()
    st = fields.with_columns(stamp_of_fields(sctx, *(pl.col(c) for c in fields.columns[1:])).alias("_t")) \
        .group_by("hint_file").agg(pl.col("_t").min().alias("lo"), pl.col("_t").max().alias("hi"))
    return {r["hint_file"]: (r["lo"], r["hi"]) for r in st.iter_rows(named=True)}


def parse_batch(items: list[Item], cfg: JobConfig, ref_year: int | None, boot_times: dict[str, datetime],
                parsers: list[ParserInfo], max_line: int = MAX_LINE_CHARS) -> tuple[dict[int, object], list[int]]:
    """FileResults of the clean files among `items` (by item index) and the indices left to
    `parse_one` (unclean files, files a batch parser warned about, or all when the batch fails)."""
    sc, again = screen(items, cfg, ref_year, max_line)
    if sc is None:
        return {}, again
    out, more = parse_screened([sc], cfg, ref_year, boot_times, parsers)
    return out, again + more


def _combine(screens: list[Screened]) -> Screened:
    """Several screened batches as one: file indices and line numbers shifted past the previous."""
    if len(screens) == 1:
        return screens[0]
    parts, bases, spans, f_off, l_off = [], [], [], 0, 0
    for sc in screens:
        parts.append(sc.rest.with_columns(pl.col("line_no") + l_off, pl.col("hint_file") + f_off))
        bases.append(sc.bases + l_off)
        spans.append(sc.span.with_columns(pl.col("line_no") + l_off, pl.col("hint_file") + f_off))
        f_off += len(sc.items)
        l_off += int(sc.bases[-1] + sc.n[-1] + GAP)
    return Screened([it for sc in screens for it in sc.items], np.concatenate([sc.n for sc in screens]),
                    np.concatenate([sc.chat for sc in screens]), [h for sc in screens for h in sc.sha], pl.concat(spans),
                    pl.concat(parts), np.concatenate(bases))


def _file_starts(rest: pl.DataFrame, files: int) -> np.ndarray | None:
    """Each file's first row in `rest` and the row count after them, when its rows are in file order
    (as `screen` and `_combine` make them); else None."""
    hf = rest["hint_file"].to_numpy()
    if hf.size > 1 and not bool((hf[1:] >= hf[:-1]).all()):
        return None
    return np.searchsorted(hf, np.arange(files + 1), side="left")


def _file_rows(rest: pl.DataFrame, f: int, at: np.ndarray | None) -> pl.DataFrame:
    """File f's lines of `rest` (its rows but the separators): a slice when `at` (`_file_starts`)
    is known, no copy (a file's separators are its last rows, and no line of a clean file is one)."""
    if at is None:
        return rest.filter((pl.col("hint_file") == f) & (pl.col("text") != SEP))
    a, k = int(at[f]), int(at[f + 1] - at[f])
    text = rest["text"]
    while k and text[a + k - 1] == SEP:
        k -= 1
    return rest.slice(a, k)


def parse_screened(screens: list[Screened], cfg: JobConfig, ref_year: int | None, boot_times: dict[str, datetime],
                   parsers: list[ParserInfo]) -> tuple[dict[int, object], list[int]]:
    """Run the line parsers once over the remaining lines of screened batches and make each file's
    FileResult; item indices of files to read again alone (a parser failed or warned)."""

    sc = _combine(screens)
    ok, n, bases = sc.items, sc.n, sc.bases
    lo_hi = _spans(sc.span, cfg, ref_year)
    hosts, ranks = _hints(ok, cfg)
    rest = with_body(sc.rest.select("line_no", "text", "hint_file")).with_columns(
        _per_file(hosts, pl.Utf8).alias("hint_host"), _per_file(ranks, pl.Int64).alias("hint_rank"),
    )
    ctx = ParseContext(path="<batch>", ref_year=ref_year, tz=cfg.timezone, boot_times=boot_times, batched=True)
    exts: list[tuple[str, object]] = []
    redo: set[int] = set()
    # the lines holding a literal of the screened triggers: those triggers are looked for there alone
    screened, screen_expr = trigger_screen(parsers) if SKIP_UNTRIGGERED and rest.height >= TRIGGER_SCREEN_ROWS \
        else (frozenset(), None)
    near = rest.select("body", "hint_file").filter(screen_expr) if screen_expr is not None else None
    at = _file_starts(rest, len(ok))
    for p in (p for p in parsers if not p.exclusive):
        where = near if near is not None and p.name in screened else rest
        if p.spec.batch:
            if not triggered(p, where):  # no line of the batch holds its trigger: it would give nothing
                continue
            try:
                ext = p.module.parse(rest, ctx)
            except Exception:  # noqa: BLE001 - parse_one runs them file by file and reports it
                return {}, [it.index for it in ok]
            if ext.warnings:  # warnings count per file: those files are read alone
                redo |= set(_touched(ext, bases).tolist())
            exts.append((p.name, ext))
            continue
        trig = _trigger(p) if SKIP_UNTRIGGERED else None
        hit = where.filter(trig)["hint_file"].unique().sort().to_list() if trig is not None else range(len(ok))
        for f in hit:
            sub = _file_rows(rest, f, at).with_columns(pl.col("line_no") - int(bases[f])) \
                .drop("hint_file", "hint_host", "hint_rank")
            fctx = ParseContext(path=ok[f].sf.rel_path, host_hint=hosts[f], rank_hint=ranks[f], ref_year=ref_year,
                                tz=cfg.timezone, boot_times=boot_times)
            try:
                ext = p.module.parse(sub, fctx)
            except Exception:  # noqa: BLE001
                redo.add(f)
                continue
            if ext.warnings:
                redo.add(f)
            exts.append((p.name, _shift(ext, int(bases[f]))))

    # line status: parsed (claimed by a parser, the first in registry order counts it), ignored (a
    # parser ignored it, blank, or chatter: counted in `screen`), unparsed (the rest)
    real = sc.rest.with_columns(rest["body"]).filter(~pl.col("_sep"))  # rest: sc.rest's rows, peeled
    t = pl.col("text")
    claimed = pl.Series("line_no", [], dtype=pl.Int64)
    owner_parts = []
    ignored_parts = [real.filter(~pl.col("body").str.contains(r"\S"))["line_no"]]  # blank once peeled
    for name, ext in exts:
        c = ext.claimed.cast(pl.Int64).unique()
        new = c.filter(~c.is_in(claimed.implode()))
        owner_parts.append(pl.DataFrame({"line_no": new, "parser": pl.Series([name] * new.len(), dtype=pl.Utf8)}))
        claimed = pl.concat([claimed, new])
        ignored_parts.append(ext.ignored.cast(pl.Int64))
    real = real.with_columns(pl.col("line_no").is_in(claimed.implode()).alias("_parsed"))
    real = real.with_columns((~pl.col("_parsed") & pl.col("line_no").is_in(pl.concat(ignored_parts).implode()))
                             .alias("_ignored"))
    per = real.group_by("hint_file").agg(
        pl.col("_parsed").sum().alias("parsed"), pl.col("_ignored").sum().alias("ignored"))
    stats = {r["hint_file"]: r for r in per.iter_rows(named=True)}
    owners = pl.concat(owner_parts) if owner_parts else pl.DataFrame(schema={"line_no": pl.Int64, "parser": pl.Utf8})
    owners = owners.join(real.select("line_no", "hint_file"), on="line_no", how="inner")
    named: dict[int, list[tuple[str, int]]] = {}
    for r in owners.group_by("hint_file", "parser").len().iter_rows(named=True):
        named.setdefault(r["hint_file"], []).append((r["parser"], r["len"]))
    # a file none of whose lines a parser claimed is the log of the parser that set its lines aside as
    # its own format's chatter (a healthy dmesg of driver banners), as in ingest.parse_one
    seen = claimed
    ig_parts = []
    for name, ext in exts:
        c = ext.ignored.cast(pl.Int64).unique()
        new = c.filter(~c.is_in(seen.implode()))
        ig_parts.append(pl.DataFrame({"line_no": new, "parser": pl.Series([name] * new.len(), dtype=pl.Utf8)}))
        seen = pl.concat([seen, new])
    set_aside: dict[int, list[tuple[str, int]]] = {}
    if ig_parts:
        ig_owners = pl.concat(ig_parts).join(real.select("line_no", "hint_file"), on="line_no", how="inner")
        for r in ig_owners.group_by("hint_file", "parser").len().iter_rows(named=True):
            set_aside.setdefault(r["hint_file"], []).append((r["parser"], r["len"]))
    errs = real.filter(~pl.col("_parsed") & ~pl.col("_ignored")).filter(t.str.contains(ascii_classes(ERRORISH))).select(
        "hint_file", pl.col("_local").alias("line_no"), "text")
    err_by = errs.partition_by("hint_file", as_dict=True) if not errs.is_empty() else {}

    events, tables = _split(exts, bases, hosts, ranks, cfg, wrapper_hosts(rest))
    no_events = pl.DataFrame(schema=EVENT_SCHEMA)  # shared by the files without any (never mutated)
    no_errors = pl.DataFrame(schema={"line_no": pl.Int64, "text": pl.Utf8})
    out: dict[int, object] = {}
    again: list[int] = []
    for f, it in enumerate(ok):
        if f in redo:
            again.append(it.index)
            continue
        res = FileResult(it.sf.rel_path, it.sf.size, sc.sha[f], None, None,
                         events=no_events, unparsed_errors=no_errors)
        s = stats.get(f, {})
        res.lines = int(n[f])
        res.parsed = int(s.get("parsed") or 0)
        res.ignored = int(s.get("ignored") or 0) + int(sc.chat[f])
        res.unparsed = res.lines - res.parsed - res.ignored
        res.first_ts, res.last_ts = lo_hi.get(f, (None, None))
        e = err_by.get((f,))
        if e is not None:
            keep_errors(res, e.select("line_no", "text"))
        ranked = sorted(((p, c) for p, c in named.get(f, []) if c > 0), key=lambda kv: (-kv[1], kv[0]))
        if not ranked:
            ranked = sorted(((p, c) for p, c in set_aside.get(f, []) if c > 0), key=lambda kv: (-kv[1], kv[0]))
        if ranked:
            res.parser = ranked[0][0]
            res.parsers = ",".join(p for p, _ in ranked)
        _attach(res, f, events, tables)
        if res.unparsed_error_lines > res.unparsed_errors.height:
            res.warnings.append(f"{res.unparsed_error_lines} error-like unparsed lines; the first "
                                f"{res.unparsed_errors.height} are kept")
        res.warnings.extend(it.sf.warnings)
        check_unchanged(it.sf, res)
        out[it.index] = res
    return out, again


def _attach(res, f: int, events: dict, tables: dict[str, dict]) -> None:  # noqa: ANN001 - a FileResult
    """Give batch file `f`'s result its events and tables (from `_split`)."""
    ev = events.get((f,))
    if ev is not None:
        res.events = ev
    for name, parts in tables.items():
        tb = parts.get((f,))
        if tb is not None:
            res.tables[name] = tb


def _touched(ext, bases: np.ndarray) -> np.ndarray:  # noqa: ANN001
    nos = [ext.claimed, ext.ignored]
    if not ext.events.is_empty():
        nos.append(ext.events["line_no"])
    nos += [tb["line_no"] for tb in ext.tables.values() if "line_no" in tb.columns and not tb.is_empty()]
    allnos = pl.concat([s.cast(pl.Int64).drop_nulls() for s in nos])
    return np.unique(_file_of(allnos, bases)) if allnos.len() else np.array([], dtype=np.int64)


def _shift(ext, base: int):  # noqa: ANN001, ANN202 - an Extraction with batch line numbers

    def sh(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(pl.col("line_no") + base) if "line_no" in df.columns and not df.is_empty() else df

    return Extraction(events=sh(ext.events), tables={k: sh(v) for k, v in ext.tables.items()},
                      claimed=ext.claimed.cast(pl.Int64) + base, ignored=ext.ignored.cast(pl.Int64) + base,
                      warnings=list(ext.warnings))


def _with_file(df: pl.DataFrame, bases: np.ndarray) -> pl.DataFrame:
    f = _file_of(df["line_no"], bases)
    return df.with_columns(pl.Series("hint_file", f, dtype=pl.Int64)).with_columns(
        (pl.col("line_no") - pl.Series(bases[f], dtype=pl.Int64)).alias("line_no"))


def _split(exts: Iterable, bases: np.ndarray, hosts: list[str | None], ranks: list[int | None],
           cfg: JobConfig, wrapped: pl.DataFrame | None = None) -> tuple[dict, dict[str, dict]]:
    """Events and tables of the batch, per file (line numbers the file's own), finished as
    `parse_one` finishes them: hints filled (a line wrapper's host, `wrapped`, before the path's),
    host aliases, derived stamps, sorted."""

    ev_parts, tb_parts = [], {}
    for _name, ext in exts:
        if not ext.events.is_empty():
            ev_parts.append(conform(ext.events, EVENT_SCHEMA))
        for tname, tdf in ext.tables.items():
            if tname in TABLE_SCHEMAS and not tdf.is_empty():
                tb_parts.setdefault(tname, []).append(conform(tdf, TABLE_SCHEMAS[tname]))
    events: dict = {}
    if ev_parts:
        ev = _with_file(fill_wrapper_host(pl.concat(ev_parts), wrapped), bases)
        ev = ev.with_columns(
            pl.col("host").fill_null(_per_file(hosts, pl.Utf8)), pl.col("rank").fill_null(_per_file(ranks, pl.Int64)),
        )
        if cfg.host_aliases:
            ev = ev.with_columns(pl.col("host").replace(cfg.host_aliases))
        ev = derive_missing(ev, by="hint_file").sort("hint_file", "line_no", "kind", maintain_order=True)
        events = ev.partition_by("hint_file", as_dict=True, maintain_order=True, include_key=False)
    tables: dict[str, dict] = {}
    for tname, parts in tb_parts.items():
        tb = _with_file(pl.concat(parts), bases)
        if "host" in tb.columns and tb["host"].null_count():  # (a CSV export's rows name their host)
            tb = tb.with_columns(pl.col("host").fill_null(_per_file(hosts, pl.Utf8)))
        tables[tname] = tb.partition_by("hint_file", as_dict=True, maintain_order=True, include_key=False)
    return events, tables


def _head_tail_spans(files: dict[int, tuple[bytes, np.ndarray, int]], cfg: JobConfig, ref_year: int | None
                     ) -> dict[int, tuple] | None:
    """First / last stamps of whole files (key -> data, newline offsets, lines) among their first
    and last SPAN_LINES lines, read as one frame (None if the lines cannot be split)."""

    blob, keys, local = [], [], []
    for k, (data, nl, n) in files.items():
        cut = [(0, min(n, SPAN_LINES))]
        if n > SPAN_LINES:
            cut.append((max(SPAN_LINES, n - SPAN_LINES), n))
        for a, b in cut:
            start = 0 if a == 0 else int(nl[a - 1]) + 1
            blob.append(data[start:int(nl[b - 1]) + 1] if b <= len(nl) else data[start:] + b"\n")
            keys.append(np.full(b - a, k, dtype=np.int64))
            local.append(np.arange(a + 1, b + 1, dtype=np.int64))
    if not blob:
        return {}
    text = plain_lines(b"".join(blob))
    if text is None:
        return None
    return _spans(pl.DataFrame({"hint_file": np.concatenate(keys), "line_no": np.concatenate(local), "text": text}),
                  cfg, ref_year)


def _sorted_unique(s: pl.Series) -> np.ndarray:
    """The distinct values of an integer Series, ascending (no hashing when they are so already)."""
    a = s.cast(pl.Int64).drop_nulls().to_numpy()
    if a.size > 1 and not bool((a[1:] > a[:-1]).all()):
        a = np.unique(a)
    return a


def _per_file_counts(nos: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """How many of the ascending batch line numbers `nos` fall in each file (file f: bases[f] on)."""
    return np.diff(np.searchsorted(nos, np.append(bases, np.iinfo(np.int64).max)))


def _split_tables(tables: dict[str, pl.DataFrame], bases: np.ndarray, hosts: list[str | None]
                  ) -> dict[str, dict] | None:
    """`_split`'s tables when each table's rows are in batch line order (each file's rows one run):
    each file's rows a slice (no copy, no partition), its line numbers made its own, host filled
    from its path. None when a table is not in that order (then `_split` does it)."""
    out: dict[str, dict] = {}
    for tname, tdf in tables.items():
        if tname not in TABLE_SCHEMAS or tdf.is_empty():
            continue
        t = conform(tdf, TABLE_SCHEMAS[tname])
        nos = t["line_no"]
        if nos.null_count() or not nos.is_sorted():
            return None
        starts = np.searchsorted(nos.to_numpy(), np.append(bases, np.iinfo(np.int64).max))
        parts = {}
        for f in range(len(bases)):
            a, b = int(starts[f]), int(starts[f + 1])
            if b > a:
                part = t.slice(a, b - a).with_columns(pl.col("line_no") - int(bases[f]))
                if "host" in part.columns:
                    part = part.with_columns(pl.col("host").fill_null(pl.lit(hosts[f], dtype=pl.Utf8)))
                parts[(f,)] = part
        out[tname] = parts
    return out


def parse_whole(items: list[Item], p: ParserInfo, cfg: JobConfig, ref_year: int | None,
                max_line: int = MAX_LINE_CHARS) -> tuple[dict[int, object], list[int]]:
    """Whole structured files that parser `p` reads straight from their bytes (`parse_bytes_many`:
    many files, one read per header, its rules applied once). FileResults by item index, as
    `ingest.parse_one` makes them, and the indices it leaves to the usual way (not plain text, a
    line over the limit, a file the parser declines, or one whose lines it does not account for
    exactly once). Each file's newlines are found once (here; the parser gets them)."""

    ok, again, newlines = [], [], []
    for it in items:
        nl = np.flatnonzero(np.frombuffer(it.data, dtype=np.uint8) == 10)
        longest = int(np.diff(np.concatenate(([-1], nl, [len(it.data)]))).max()) - 1 if it.data else 0
        if len(it.data) == it.sf.size and 0 < len(it.data) and is_plain(it.data) \
                and longest <= min(max_line, MAX_LINE_CHARS):
            ok.append(it)
            newlines.append(nl)
        else:
            again.append(it.index)
    if not ok:
        return {}, again
    hosts, ranks = _hints(ok, cfg)
    ctx = ParseContext(path="<batch>", ref_year=ref_year, tz=cfg.timezone, batched=True)
    try:
        ext, taken = p.module.parse_bytes_many([it.data for it in ok], hosts, ctx, newlines=newlines)
    except Exception:  # noqa: BLE001 - the usual way reads them and reports what fails
        return {}, again + [it.index for it in ok]
    if ext.warnings:
        return {}, again + [it.index for it in ok]
    bases = np.arange(len(ok), dtype=np.int64) * p.module.BYTES_STRIDE
    n = np.array([len(nl) + (0 if it.data.endswith(b"\n") else 1) for it, nl in zip(ok, newlines, strict=True)],
                 dtype=np.int64)
    claimed, ignored = _sorted_unique(ext.claimed), _sorted_unique(ext.ignored)
    n_claimed = _per_file_counts(claimed, bases)
    n_ignored = _per_file_counts(ignored, bases)
    at = np.searchsorted(claimed, ignored)  # the lines both claimed and ignored (ignored ones are few)
    dup = ignored[(at < claimed.size) & (claimed[np.minimum(at, max(claimed.size - 1, 0))] == ignored)] \
        if claimed.size else ignored[:0]
    both = np.unique(_file_of(pl.Series(dup), bases)) if dup.size else []
    taken = [t and n_claimed[k] + n_ignored[k] == n[k] and k not in both for k, t in enumerate(taken)]
    lo_hi = _head_tail_spans({k: (it.data, newlines[k], int(n[k])) for k, it in enumerate(ok) if taken[k]},
                             cfg, ref_year)
    if lo_hi is None:
        return {}, again + [it.index for it in ok]
    tables = _split_tables(ext.tables, bases, hosts)
    if tables is None:
        events, tables = _split([(p.name, ext)], bases, hosts, ranks, cfg)
    else:
        events, _ = _split([(p.name, Extraction(events=ext.events))], bases, hosts, ranks, cfg)
    no_events = pl.DataFrame(schema=EVENT_SCHEMA)
    out: dict[int, object] = {}
    for k, it in enumerate(ok):
        if not taken[k]:
            again.append(it.index)
            continue
        res = FileResult(it.sf.rel_path, it.sf.size, digest(it.data), p.name, p.name,
                         events=no_events)
        res.lines, res.parsed, res.ignored = int(n[k]), int(n_claimed[k]), int(n_ignored[k])
        res.first_ts, res.last_ts = lo_hi.get(k, (None, None))
        _attach(res, k, events, tables)
        check_unchanged(it.sf, res)
        res.warnings.extend(it.sf.warnings)
        out[it.index] = res
    return out, again

"""Route every discovered file through the parsers and account for every line.

Per file: sniff the head against every parser; a structured format (EXCLUSIVE parser) that
wins the sniff reads the file alone, otherwise every line parser reads it and each line is
counted once: parsed (claimed by any parser), ignored (recognised chatter or blank) or
unparsed. Files are parsed in parallel; results are ordered by path, so output is
deterministic.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from forensics import bulk, discovery, triage
from forensics.accounting import (
    ERRORISH,
    MAX_KEPT_ERRORS,
    SPAN_LINES,
    FileResult,
    check_unchanged,
    fill_wrapper_host,
    keep_errors,
    line_span,
    stamp_expr,
    wrapper_hosts,
)
from forensics.bulk import Item, digest, digest_algo, new_hasher, parse_screened, parse_whole, screen
from forensics.config import JobConfig
from forensics.discovery import (
    HEAD_BYTES,
    Discovery,
    Limits,
    SourceFile,
    iter_chunks,
    looks_binary,
    read_head,
)
from forensics.report import MAX_UNPARSED_LISTED
from parsers import ParserInfo, registry, source_with
from parsers.ascii_regex import ascii_classes
from parsers.elastic import ERROR_JSON_NEEDS, parse_error_json, sniff_error_json
from parsers.lines import decode_lines, with_body
from parsers.prefixes import peel
from parsers.records import (
    EVENT_SCHEMA,
    TABLE_SCHEMAS,
    Extraction,
    ParseContext,
    conform,
    own_strings,
)
from parsers.timestamps import derive_missing

BATCH_BYTES = 8 * 1024 * 1024  # small files are screened together, up to this much per batch
BULK_BATCH_BYTES = 16 * 1024 * 1024  # bytes of files per bulk batch (memory: ~3x this per worker)
# screened lines parsed together (a parse call costs ~0.3 s whatever its size; what screening leaves
# of NCCL INFO logs is small): at most this much in memory per worker, as 8 unscreened batches were
BULK_GROUP_REST_BYTES = 8 * BULK_BATCH_BYTES
# A file's DCGM samples beyond this many rows wait on disk (Parquet in the caller's spill_dir) rather
# than in memory: a 4,096-GPU job sampled at 1 Hz has tens of millions (DuckDB reads them there).
SPILL_ROWS = 10_000
SPILLED_TABLES = ("dcgm_samples",)
_BLANK_RUN = re.compile(r"\n(?:[ \t\r\f\v]*\n)+")
_UPTIME_S = re.compile(rb"^\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)\s*$")
_YEAR_RE = re.compile(r"\b((?:19|20)\d\d)-[01]\d-[0-3]\d[ T_]|\b\w{3} \w{3} +\d+ \d\d:\d\d:\d\d ((?:19|20)\d\d)\b")


@dataclass
class Ingested:
    files: list[FileResult]
    ref_year: int | None
    boot_times: dict[str, datetime]
    warnings: list[str]


def _boot_time_file(head: bytes, cfg: JobConfig) -> datetime | None:
    """`uptime -s` output: one 'YYYY-MM-DD HH:MM:SS' line, the node's boot time (local)."""
    m = _UPTIME_S.match(head)
    if not m:
        return None
    try:
        dt = datetime.fromisoformat(m.group(1).decode())
    except ValueError:
        return None
    return dt.replace(tzinfo=cfg.timezone).astimezone(UTC)


YEAR_HEAD_BYTES = 16384  # of each file, read by the reference-year guess


class _YearCount:
    """The year printed most often in the first YEAR_HEAD_BYTES of the files (ties: the first seen),
    counted in batches of heads by polars' regex engine (the same pattern as _YEAR_RE)."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()  # insertion order = first seen, as most_common breaks ties
        self.pending: list[str] = []

    def add(self, head: bytes) -> None:
        self.pending.append(head[:YEAR_HEAD_BYTES].decode("utf-8", "replace"))
        if len(self.pending) >= 256:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        found = pl.Series(self.pending, dtype=pl.Utf8).str.extract_all(ascii_classes(_YEAR_RE.pattern)).explode().drop_nulls()
        self.pending = []
        for m in found.to_list():
            self.counts[int(m[:4] if m[:1].isdigit() else m[-4:])] += 1

    def most_common(self) -> int | None:
        self.flush()
        return self.counts.most_common(1)[0][0] if self.counts else None


def sniff_text(head_text: str) -> str:
    r"""The head as sniffs see it: runs of blank lines collapsed. Blank lines carry no format signal,
    and a `(?m)^\s*...` search in Python `re` is quadratic over a run of them."""
    return _BLANK_RUN.sub("\n", head_text)


LINE_SNIFF_MAX = 0.95  # no line parser's sniff says more (tests/test_sniffing.py checks every fixture)


def _sniff(p: ParserInfo, head_text: str) -> float:
    try:
        return float(p.module.sniff(head_text))
    except Exception:  # a parser's sniff must never take the run down
        return 0.0


def peeled_head(head_text: str) -> str:
    """The head's lines with their launcher/collector wrappers peeled (`parsers.prefixes`): what
    the line parsers read, so what their sniffs judge (a pdsh-wrapped dmesg, NCCL behind docker
    stamps)."""
    return "\n".join(peel(pl.Series(head_text.split("\n"), dtype=pl.Utf8))["body"].to_list())




@dataclass(frozen=True)
class _Gate:
    """The literals the structured parsers' sniffs need (SNIFF_NEEDS) and the error-JSON sniff's,
    looked for in one pass over a head (`triage.LiteralGate`)."""
    gate: triage.LiteralGate
    needs: tuple[tuple[str, frozenset[int] | None], ...]  # each structured parser: its literals' indexes
    error_json: int  # the index of ERROR_JSON_NEEDS
    line_parsers: tuple[ParserInfo, ...]


_GATES: dict[tuple, _Gate] = {}


def _gate(parsers: list[ParserInfo]) -> _Gate:
    key = (triage.engine_name(), *map(id, parsers))
    got = _GATES.get(key)
    if got is None:
        lits: list[tuple[str, bool]] = [ERROR_JSON_NEEDS]
        needs = []
        for p in parsers:
            if p.exclusive:
                more = tuple(getattr(p.module, "SNIFF_NEEDS", None) or ())
                needs.append((p.name, frozenset(range(len(lits), len(lits) + len(more))) if more else None))
                lits += more
        got = _GATES[key] = _Gate(triage.literal_gate(lits), tuple(needs), 0,
                                  tuple(p for p in parsers if not p.exclusive))
    return got


def _may_sniff(head: bytes, parsers: list[ParserInfo], gate: bool = True) -> tuple[frozenset[str] | None, bool]:
    """Names of the structured parsers whose sniff can score on a head with these bytes (those
    without SNIFF_NEEDS, and those with one of theirs in the head), and whether the head can be an
    error JSON file (`sniff_error_json`). The literals are ASCII without a newline: in the bytes
    exactly when in the decoded text `sniff_text` makes of them. (None, True) without the gate (`gate`:
    `ReadPath.sniff_gate`), or
    when $FORENSICS_TRIAGE_ENGINE names no usable engine (every sniff then runs, as without the gate;
    the bulk screen that needs the engine hands its files to `parse_one` the same way)."""
    if not gate:
        return None, True
    try:
        g = _gate(parsers)
    except ValueError:  # triage.engine_name: an unknown engine, or hyperscan asked for and missing
        return None, True
    found = g.gate.found(head)
    return frozenset(name for name, need in g.needs if need is None or need & found), g.error_json in found


def _choose(head_text: str, parsers: list[ParserInfo], may: frozenset[str] | None = None) -> list[ParserInfo]:
    """The parsers that read a file with this head (`may`: `_may_sniff` of its bytes, when known)."""
    line_parsers = [p for p in parsers if not p.exclusive]
    if may is not None and not may:
        return line_parsers  # no structured format can score: nothing to sniff
    head_text = sniff_text(head_text)
    # structured formats read `text` as is: they sniff the raw head
    exclusive = [(s, p) for p in parsers
                 if p.exclusive and (may is None or p.name in may) and (s := _sniff(p, head_text)) >= 0.5]
    if exclusive:  # the line parsers' sniffs only matter against a structured format's
        best = max(exclusive, key=lambda sp: sp[0])
        # at LINE_SNIFF_MAX no line parser can beat it: their sniffs are not run
        if best[0] >= LINE_SNIFF_MAX:
            return [best[1]]
        body = peeled_head(head_text)  # line parsers read the peeled lines: they sniff those
        if best[0] >= max((_sniff(p, body) for p in line_parsers), default=0.0):
            return [best[1]]
    return line_parsers


def _head_choice(head: bytes, cfg: JobConfig, parsers: list[ParserInfo], gate: bool = True) -> list[ParserInfo]:
    """The parsers `parse_one` runs on a file with this head; [] for an empty, binary, boot-time
    (`uptime -s`) or torchelastic error-JSON file, which it handles apart. `gate`: `_may_sniff`'s."""
    if not head or looks_binary(head) or _boot_time_file(head, cfg) is not None:
        return []
    may, error_json = _may_sniff(head, parsers, gate)
    if may is not None and not may and not error_json:
        return list(_gate(parsers).line_parsers)  # (`_choose` without decoding the head)
    text = head.decode("utf-8", errors="replace")
    return [] if error_json and sniff_error_json(text) else _choose(text, parsers, may)


def _run_parser(p: ParserInfo | None, fn: Callable[[], Extraction], warnings: list[str]) -> Extraction | None:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one bad file or parser bug must not stop the analysis
        name = p.name if p else source_with("launcher")  # error.json files
        warnings.append(f"parser {name} failed on this file ({type(exc).__name__}: {exc}); its lines count as unparsed")
        return None


def parse_one(sf: SourceFile, cfg: JobConfig, ref_year: int | None, boot_times: dict[str, datetime],
              parsers: list[ParserInfo], limits: Limits) -> FileResult:
    res = FileResult(sf.rel_path, sf.size, None, None, None)
    head = read_head(sf, limits)
    if not head and sf.size == 0:
        res.warnings.append("empty file")
        return res
    if looks_binary(head):
        res.warnings.append("binary content, not read as a log")
        res.digest = _file_digest(sf)
        return res
    host_hint = cfg.host_aliases.get(sf.host_hint or "", sf.host_hint)
    ctx = ParseContext(path=sf.rel_path, host_hint=host_hint, rank_hint=sf.rank_hint, ref_year=ref_year,
                       tz=cfg.timezone, boot_times=boot_times)
    head_text = head.decode("utf-8", errors="replace")
    if _boot_time_file(head, cfg) is not None:
        res.parser = res.parsers = "uptime"
        res.lines = res.parsed = head.count(b"\n") or 1
        res.digest = _file_digest(sf)
        return res
    may, error_json = _may_sniff(head, parsers, limits.read.sniff_gate)
    error_json = error_json and sniff_error_json(head_text)
    chosen = [] if error_json else _choose(head_text, parsers, may)
    hasher = new_hasher() if sf.compression is None else None
    events, tables, claimed_counts = [], {}, Counter()
    # lines a parser set aside as its own format's chatter (a healthy dmesg of driver banners): the file
    # is that parser's log even when none of them is an event
    ignored_counts: Counter = Counter()
    wrapped_hosts: list[pl.DataFrame] = []  # line_no -> the host a line's wrapper names (pdsh, Ray, kubectl)
    invalid_utf8 = False
    nul = 0
    layout = _table_layout(sf, chosen, head_text, limits)
    if layout is not None:  # a CSV table of telemetry: the parser's reader takes the file by path
        got = _parse_table(sf, chosen[0], layout, ctx, cfg, res)
        if got is not None:
            return got
    if _whole_parser(sf, chosen, limits) is not None:  # a structured file its parser reads from the bytes

        try:
            got, _ = parse_whole([Item(0, sf, _read_whole(sf))], chosen[0], cfg, ref_year, limits.max_line_bytes)
        except OSError:
            got = {}
        if 0 in got:
            return got[0]  # type: ignore[return-value]
    exclusive = bool(chosen) and all(p.exclusive for p in chosen)
    chunk_screen = bulk.ChunkScreen() if chosen and not exclusive else None
    # the lines the chatter screen keeps wait for the parsers until limits.parse_rows of them (or the end):
    # a log that is mostly NCCL chatter is parsed a few times, not once per chunk (each parser call
    # costs tens of milliseconds whatever its lines); memory stays bounded by that many lines
    pending: list[tuple[pl.DataFrame, int, int]] = []  # (kept lines, first and last line number of their chunks)
    # the last header line a chosen parser declares (`ParserSpec.header`, a CSV header): handed to it
    # again with every later chunk (read, never counted twice)
    header_res = [p.spec.header for p in chosen if p.spec.header]
    carried: pl.DataFrame | None = None

    def parse_pending() -> None:
        nonlocal pending
        if not pending:
            return
        lines = pending[0][0] if len(pending) == 1 else pl.concat([p[0] for p in pending], how="diagonal_relaxed")
        lo, hi = pending[0][1], pending[-1][2]
        pending = []
        _parse_lines(lines, lo, hi, None)

    def _parse_lines(lines: pl.DataFrame, lo: int, hi: int, chunk: bytes | None) -> None:
        """Run the chosen parsers over `lines` (the lines of file lines lo..hi that are not chatter:
        those are counted as ignored as they are read) and count each line once: claimed, ignored or
        unparsed."""
        nonlocal carried
        plines = lines if carried is None else pl.concat([carried, lines], how="diagonal_relaxed")
        if header_res and "body" in lines.columns:
            heads = lines.filter(pl.any_horizontal([pl.col("body").str.contains(ascii_classes(rx)) for rx in header_res]))
            if heads.height:
                carried = heads.tail(1)
        claimed = pl.Series("line_no", [], dtype=pl.Int64)
        ignored = pl.Series("line_no", [], dtype=pl.Int64)
        exts: list[tuple[str, Extraction]] = []
        if error_json and chunk is not None:
            text = chunk.decode("utf-8", errors="replace")
            ext = _run_parser(None, lambda t=text: parse_error_json(t, ctx), res.warnings)
            if ext is not None:
                exts.append((source_with("launcher"), ext))
        for p in chosen:
            if not bulk.triggered(p, plines):  # no line of these holds its trigger: it gives nothing
                continue
            ext = _run_parser(p, lambda p=p, lines=plines: p.module.parse(lines, ctx), res.warnings)
            if ext is not None:
                exts.append((p.name, ext))
        for name, ext in exts:
            valid = ext.claimed.filter(ext.claimed.is_in(lines["line_no"].implode()))
            new = valid.unique().filter(~valid.unique().is_in(claimed.implode()))
            claimed_counts[name] += new.len()
            claimed = pl.concat([claimed, new])
            ignored = pl.concat([ignored, ext.ignored])
            if not ext.events.is_empty():  # (a carried header line is this batch's context, not its line)
                events.append(conform(ext.events.filter(pl.col("line_no").is_between(lo, hi)), EVENT_SCHEMA))
            for tname, tdf in ext.tables.items():
                if tname in TABLE_SCHEMAS and not tdf.is_empty():
                    tables.setdefault(tname, []).append(conform(tdf, TABLE_SCHEMAS[tname]))
            res.warnings.extend(ext.warnings)
        seen = claimed
        for name, ext in exts:  # a line set aside by several parsers counts for the first (registry order)
            ig = ext.ignored.cast(pl.Int64).unique()
            ig = ig.filter(ig.is_in(lines["line_no"].implode()) & ~ig.is_in(seen.implode()))
            ignored_counts[name] += ig.len()
            seen = pl.concat([seen, ig])
        # blank: nothing but white space once the wrappers are peeled (`[1,2]<stdout>:` alone)
        blank = lines.filter(pl.col("body" if "body" in lines.columns else "text").str.strip_chars() == "")["line_no"]
        ignored = pl.concat([ignored.cast(pl.Int64), blank]).unique()
        ignored = ignored.filter(~ignored.is_in(claimed.implode()) & ignored.is_between(lo, hi))
        res.parsed += claimed.len()
        res.ignored += ignored.len()
        rest = lines.filter(~pl.col("line_no").is_in(claimed.implode()) & ~pl.col("line_no").is_in(ignored.implode()))
        res.unparsed += rest.height
        keep_errors(res, rest)

    for chunk, first in iter_chunks(sf, limits, hasher=hasher):
        plain = chunk_screen.scan(chunk) if chunk_screen is not None else None
        dec = decode_lines(chunk, first, plain)
        invalid_utf8 |= dec.invalid_utf8
        nul += dec.nul_bytes
        raw = dec.lines
        n_chat = 0
        if exclusive:
            lines = raw  # structured formats read `text` only: no launcher-prefix pass over CSV rows
        elif chunk_screen is not None:
            # NCCL chatter is counted as ignored and never reaches a parser (as in forensics/bulk.py)
            is_chat = chunk_screen.chatter(raw["text"])
            n_chat = int(is_chat.sum())
            lines = with_body(raw.filter(pl.Series(~is_chat)) if n_chat else raw)
        else:
            lines = with_body(raw)
        if "prefix_host" in lines.columns:
            wrapped_hosts.append(wrapper_hosts(lines))
        n = raw.height
        lo, hi = line_span(raw, ctx)
        if lo is not None:
            res.first_ts = lo if res.first_ts is None else min(res.first_ts, lo)
            res.last_ts = hi if res.last_ts is None else max(res.last_ts, hi)
        res.lines += n
        res.ignored += n_chat  # (a chatter line reaches no parser: nothing else can count it)
        if n == 0:
            continue
        if chunk_screen is None or error_json:  # each chunk parsed as it comes
            _parse_lines(lines, first, first + n - 1, chunk)
            continue
        pending.append((own_strings(lines), first, first + n - 1))  # (not the whole chunk kept for them)
        if sum(p[0].height for p in pending) >= limits.parse_rows:
            parse_pending()
    parse_pending()
    res.digest = hasher.hexdigest() if hasher is not None else _file_digest(sf)
    check_unchanged(sf, res)
    if res.unparsed_error_lines > res.unparsed_errors.height:
        res.warnings.append(f"{res.unparsed_error_lines} error-like unparsed lines; the first "
                            f"{res.unparsed_errors.height} are kept")
    if invalid_utf8:
        res.warnings.append("invalid UTF-8 replaced with U+FFFD")
    if nul:
        res.warnings.append(f"{nul} NUL bytes removed")
    if claimed_counts:
        ranked = sorted(claimed_counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ranked = [kv for kv in ranked if kv[1] > 0]
        if ranked:
            res.parser = ranked[0][0]
            res.parsers = ",".join(k for k, _ in ranked)
    if res.parser is None and ignored_counts:
        ranked = [kv for kv in sorted(ignored_counts.items(), key=lambda kv: (-kv[1], kv[0])) if kv[1] > 0]
        if ranked:
            res.parser = ranked[0][0]
            res.parsers = ",".join(k for k, _ in ranked)
    if res.parser is None and chosen and len(chosen) == 1 and chosen[0].exclusive:
        res.parser = res.parsers = chosen[0].name
    if events:
        ev = fill_wrapper_host(pl.concat(events), pl.concat(wrapped_hosts) if wrapped_hosts else None)
        ev = ev.with_columns(
            pl.col("host").fill_null(pl.lit(host_hint, dtype=pl.Utf8)),
            pl.col("rank").fill_null(pl.lit(sf.rank_hint, dtype=pl.Int64)),
        )
        if cfg.host_aliases:
            ev = ev.with_columns(pl.col("host").replace(cfg.host_aliases))
        res.events = derive_missing(ev).sort("line_no", "kind", maintain_order=True)
    for tname, parts in tables.items():
        t = pl.concat(parts)
        if "host" in t.columns:
            t = t.with_columns(pl.col("host").fill_null(pl.lit(host_hint, dtype=pl.Utf8)))
        res.tables[tname] = t
    for w in sf.warnings:
        res.warnings.append(w)
    return res


TABLE_BLOCK_BYTES = 16 * 1024 * 1024  # bytes per block of a CSV table read by its parser (`read_csv_chunks`)


def _table_layout(sf: SourceFile, chosen: list[ParserInfo], head_text: str, limits: Limits) -> Any:
    """The CSV layout of a plain file that its one parser reads by path (`table_layout`), or None."""
    if sf.compression is not None or len(chosen) != 1 or not hasattr(chosen[0].module, "table_layout"):
        return None
    return chosen[0].module.table_layout(head_text, sf.size, limits.chunk_bytes)


def _parse_table(sf: SourceFile, p: ParserInfo, layout: Any, ctx: ParseContext, cfg: JobConfig,
                 res: FileResult) -> FileResult | None:
    """A CSV table read by its parser from the file's bytes in blocks (bounded memory: one block and
    what the parser keeps), the digest taken in the same pass; None when that fails (the line
    path reads it then)."""
    hasher = new_hasher()

    def blocks() -> Iterator[bytes]:
        with discovery.safe_open(sf.real_path) as fh:
            while block := fh.read(TABLE_BLOCK_BYTES):
                block += fh.readline(TABLE_BLOCK_BYTES)  # to a line's end: the reader copies nothing
                hasher.update(block)
                yield block

    try:
        ext, n_lines, n_read = p.module.read_csv_chunks(blocks(), layout, ctx)
    except Exception as exc:  # noqa: BLE001 - a reader failure: the line path reports what it can
        res.warnings.append(f"parser {p.name}: the CSV reader failed ({type(exc).__name__}: {exc}); "
                            "read line by line instead")
        return None
    res.parser = res.parsers = p.name
    res.lines = n_lines
    res.parsed = n_read
    res.ignored = ext.ignored.len()
    res.unparsed = max(0, n_lines - res.parsed - res.ignored)
    res.warnings.extend(ext.warnings)
    host_hint = ctx.host_hint
    if not ext.events.is_empty():
        ev = conform(ext.events, EVENT_SCHEMA).with_columns(
            pl.col("host").fill_null(pl.lit(host_hint, dtype=pl.Utf8)),
            pl.col("rank").fill_null(pl.lit(sf.rank_hint, dtype=pl.Int64)))
        if cfg.host_aliases:
            ev = ev.with_columns(pl.col("host").replace(cfg.host_aliases))
        res.events = derive_missing(ev).sort("line_no", "kind", maintain_order=True)
    for tname, tdf in ext.tables.items():
        if tname in TABLE_SCHEMAS and not tdf.is_empty():
            t = conform(tdf, TABLE_SCHEMAS[tname])
            if "host" in t.columns:
                t = t.with_columns(pl.col("host").fill_null(pl.lit(host_hint, dtype=pl.Utf8)))
            res.tables[tname] = t
    res.digest = hasher.hexdigest()
    check_unchanged(sf, res)
    for w in sf.warnings:
        res.warnings.append(w)
    return res


WHOLE_BATCH_BYTES = 32 * 1024 * 1024  # bytes of such files read together


def _whole_parser(sf: SourceFile, chosen: list[ParserInfo], limits: Limits) -> ParserInfo | None:
    """The structured parser that reads this file straight from its bytes (`bulk.parse_whole`),
    if the file is a plain one of at most one chunk and the one parser chosen for it can."""
    if (limits.read.parse_bytes and len(chosen) == 1 and chosen[0].exclusive and _bulk_candidate(sf, limits)
            and chosen[0].spec.reads_bytes):
        return chosen[0]
    return None


def _whole_route(sf: SourceFile, cfg: JobConfig, parsers: list[ParserInfo], limits: Limits,
                 chosen: list[ParserInfo] | None = None) -> ParserInfo | None:
    """`_whole_parser` from the file's head, as `parse_one` chooses (None for anything unusual);
    `chosen`: `_head_choice` of its head when known."""
    if not limits.read.parse_bytes or not _bulk_candidate(sf, limits):
        return None
    if chosen is None:
        try:
            head = read_head(sf, limits)
        except OSError:
            return None
        chosen = _head_choice(head, cfg, parsers, limits.read.sniff_gate)
    return _whole_parser(sf, chosen, limits)


def _whole_group(ids: list[int], disc: Discovery, p: ParserInfo, cfg: JobConfig, ref_year: int | None,
                 limits: Limits) -> dict[int, FileResult]:

    items = []
    for i in ids:
        try:
            items.append(Item(i, disc.files[i], _read_whole(disc.files[i])))
        except OSError:
            continue
    try:
        got, _ = parse_whole(items, p, cfg, ref_year, limits.max_line_bytes)
    except Exception:  # noqa: BLE001 - file by file instead: parse_one reports what fails, per file
        return {}
    return got  # type: ignore[return-value]


def _safe_head(sf: SourceFile, limits: Limits) -> bytes:
    try:
        return read_head(sf, limits)
    except OSError:
        return b""


def _file_digest(sf: SourceFile) -> str | None:
    """The digest of a file read apart (binary and boot-time files, compressed files' stored bytes)."""
    h = new_hasher()
    try:
        with open(sf.real_path, "rb") as fh:
            for buf in iter(lambda: fh.read(1 << 20), b""):
                h.update(buf)
    except OSError:
        return None
    return h.hexdigest()


def _small_candidate(sf: SourceFile, head: bytes, cfg: JobConfig, parsers: list[ParserInfo],
                     chosen: list[ParserInfo] | None = None, gate: bool = True) -> bool:
    """A small plain text file that every line parser would read (no structured format, no error
    file, no boot-time file): it can be pre-screened in a batch with other small files.
    `chosen`: `_head_choice` of `head` when known."""
    if sf.compression is not None or not head or len(head) != sf.size or len(head) >= HEAD_BYTES:
        return False
    if head.count(b"\n") > 2 * SPAN_LINES:
        return False
    chosen = _head_choice(head, cfg, parsers, gate) if chosen is None else chosen
    return bool(chosen) and all(not p.exclusive for p in chosen)


def _screen_batch(items: list[tuple[int, SourceFile, bytes]], cfg: JobConfig, ref_year: int | None,
                  boot_times: dict[str, datetime], parsers: list[ParserInfo]) -> tuple[dict[int, FileResult], list[int]]:
    """Run every line parser once over many small files (joined, a blank line between files).
    Files in which no parser claimed or ignored a non-blank line and no event fell are final as
    they are: all their lines unparsed or blank. The others are parsed again alone (parse_one),
    so their results are exactly those of a lone parse. This removes the per-file cost of the
    parsers for the thousands of tiny unrecognized files some bundles hold."""
    starts, counts, blobs, line = [], [], [], 1
    for _, _, data in items:
        n = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        starts.append(line)
        counts.append(n)
        blobs.append(data if data.endswith(b"\n") else data + b"\n")
        blobs.append(b"\n")
        line += n + 1
    lines = with_body(decode_lines(b"".join(blobs)).lines)
    ctx = ParseContext(path="<batch>", ref_year=ref_year, tz=cfg.timezone, boot_times=boot_times)
    starts_a = np.asarray(starts, dtype=np.int64)
    ends_a = starts_a + np.asarray(counts, dtype=np.int64)  # exclusive: the separator line

    def owners(nos: pl.Series) -> set[int]:
        a = nos.drop_nulls().cast(pl.Int64).to_numpy()
        k = np.searchsorted(starts_a, a, side="right") - 1
        ok = (k >= 0) & (a < ends_a[np.clip(k, 0, None)])
        return set(k[ok].tolist())

    blank = lines.filter(pl.col("body").str.strip_chars() == "")["line_no"]
    touched: set[int] = set()
    for p in parsers:
        if p.exclusive:
            continue
        try:
            ext = p.module.parse(lines, ctx)
        except Exception:  # noqa: BLE001 - parse them one by one; parse_one reports the failure
            return {}, [i for i, _, _ in items]
        nos = [ext.claimed, ext.ignored.filter(~ext.ignored.is_in(blank.implode()))]
        if not ext.events.is_empty():
            nos.append(ext.events["line_no"])
        nos += [t["line_no"] for t in ext.tables.values() if "line_no" in t.columns and not t.is_empty()]
        for s in nos:
            touched |= owners(s)
    nos_all = lines["line_no"].to_numpy()
    k_all = np.searchsorted(starts_a, nos_all, side="right") - 1
    tagged = lines.with_columns(pl.Series("_k", k_all, dtype=pl.Int64)).filter(
        pl.Series(nos_all < ends_a[k_all]))  # separator lines belong to no file
    tagged = tagged.with_columns(
        (pl.col("body").str.strip_chars() == "").alias("_blank"),
        pl.col("text").str.contains(ascii_classes(ERRORISH)).alias("_err"),
        stamp_expr(ctx).alias("_t"),
    )
    per = tagged.group_by("_k").agg(pl.col("_blank").sum().alias("blank"), pl.col("_t").min().alias("lo"),
                                    pl.col("_t").max().alias("hi"))
    stats = {r["_k"]: r for r in per.iter_rows(named=True)}
    errs = tagged.filter(pl.col("_err") & ~pl.col("_blank")).select("_k", "line_no", "text")
    err_by_k = errs.partition_by("_k", as_dict=True) if not errs.is_empty() else {}
    done: dict[int, FileResult] = {}
    again: list[int] = []
    for k, (i, sf, data) in enumerate(items):
        if k in touched:
            again.append(i)
            continue
        res = FileResult(sf.rel_path, sf.size, digest(data), None, None)
        st = stats.get(k, {})
        res.lines = counts[k]
        res.ignored = int(st.get("blank") or 0)
        res.unparsed = res.lines - res.ignored
        res.first_ts, res.last_ts = st.get("lo"), st.get("hi")
        e = err_by_k.get((k,))
        if e is not None:
            rest = e.select((pl.col("line_no") - starts[k] + 1).alias("line_no"), "text")
            keep_errors(res, rest)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            res.warnings.append("invalid UTF-8 replaced with U+FFFD")
        if b"\x00" in data:
            res.warnings.append(f"{data.count(bytes(1))} NUL bytes removed")
        res.warnings.extend(sf.warnings)
        done[i] = res
    return done, again


T = TypeVar("T")


def _pack(ids: list[int], size_of: Callable[[int], int], limit: int) -> list[list[int]]:
    """`ids` in order, cut into runs of at most `limit` bytes (a larger item is a run of its own)."""
    packs: list[list[int]] = []
    size = 0
    for i in ids:
        if not packs or size + size_of(i) > limit:
            packs.append([])
            size = 0
        packs[-1].append(i)
        size += size_of(i)
    return packs


def _balance(jobs: list[T], size_of: Callable[[T], int], n: int) -> list[list[T]]:
    """`jobs` dealt into `n` lists of about equal size (the largest job first to the lightest list),
    each list in the order of `jobs`."""
    load, where = [0] * n, {}
    for k in sorted(range(len(jobs)), key=lambda k: (-size_of(jobs[k]), k)):
        g = min(range(n), key=lambda g: (load[g], g))
        load[g] += size_of(jobs[k])
        where[k] = g
    return [[jobs[k] for k in range(len(jobs)) if where[k] == g] for g in range(n)]


def _bulk_candidate(sf: SourceFile, limits: Limits) -> bool:
    """A plain file that one read and one piece hold whole (parse_one would read it in one chunk)."""
    return sf.compression is None and 0 < sf.size <= limits.chunk_bytes


def _read_whole(sf: SourceFile) -> bytes:
    """All bytes of a plain file (one more than discovery saw, to notice growth); opened as every
    evidence file is (`safe_open`: no symlink followed, no FIFO waited on)."""
    with discovery.safe_open(sf.real_path) as fh:
        return fh.read(sf.size + 1)


def _bulk_group(group: list[list[tuple[int, SourceFile]]], cfg: JobConfig, ref_year: int | None,
                boot_times: dict[str, datetime], parsers: list[ParserInfo], limits: Limits,
                choices: dict[int, list[ParserInfo]] | None = None) -> tuple[dict[int, FileResult], list[int]]:
    """Screen the batches of a group one after the other (one batch's bytes in memory at a time),
    then parse what they left together (forensics/bulk.py): the parsers' fixed cost (about 0.3 s a
    call, whatever the size) is paid once per BULK_GROUP_REST_BYTES of screened lines, not per batch.
    A batch whose screening fails, or screened batches whose parse fails, go to `parse_one`.
    `choices`: `_head_choice` of the files' heads by index, where known (see `_bulk_items`)."""

    got: dict[int, FileResult] = {}
    again: list[int] = []
    screens: list = []
    held = 0

    def flush() -> None:
        nonlocal screens, held
        if not screens:
            return
        try:
            done, more = parse_screened(screens, cfg, ref_year, boot_times, parsers)
        except Exception:  # noqa: BLE001 - file by file instead: parse_one reports what fails, per file
            done, more = {}, [it.index for sc in screens for it in sc.items]
        got.update(done)
        again.extend(more)
        screens, held = [], 0

    for batch in group:
        try:
            items, left = _bulk_items(batch, cfg, parsers, choices or {}, limits.read.sniff_gate)
            sc, more = screen(items, cfg, ref_year, max_line=limits.max_line_bytes)
            del items  # the batch's bytes: the screened frame holds its lines (a 59 MB dmesg stayed twice)
        except Exception:  # noqa: BLE001
            again += [i for i, _ in batch]
            continue
        again += left + more
        if sc is not None:
            screens.append(sc)
            held += sc.rest.estimated_size()
            if held >= BULK_GROUP_REST_BYTES:
                flush()
    flush()
    return got, again


def _bulk_items(batch: list[tuple[int, SourceFile]], cfg: JobConfig, parsers: list[ParserInfo],
                choices: dict[int, list[ParserInfo]], gate: bool = True) -> tuple[list, list[int]]:
    """Read the files of one batch: the plain line logs among them (for forensics/bulk.py), and the
    indices of the others (structured formats, error files, binary, unreadable, changed). A file
    whose head's choice is known (`choices`) and is not the line parsers is not read here."""

    items, again = [], []
    for i, sf in batch:
        known = choices.get(i)
        if known is not None and (not known or any(p.exclusive for p in known)):
            again.append(i)
            continue
        try:
            data = _read_whole(sf)
        except OSError:
            again.append(i)
            continue
        if len(data) != sf.size:
            chosen = []
        else:
            chosen = known if known is not None else _head_choice(data[:HEAD_BYTES], cfg, parsers, gate)
        if not chosen or any(p.exclusive for p in chosen):
            again.append(i)
            continue
        items.append(Item(i, sf, data))
    return items, again




def _beside_candidate(sf: SourceFile, head: bytes, cfg: JobConfig, parsers: list[ParserInfo],
                      limits: Limits) -> bool:
    """A plain file larger than one chunk that its parser reads as a CSV table by path (`_table_layout`
    of its head: a DCGM export), as `parse_one` would choose for it. Only where it is read changes
    (the thread beside the line logs), not how: a wrong guess costs time, never a different result."""
    if sf.compression is not None or sf.size <= limits.chunk_bytes or not head:
        return False
    chosen = _head_choice(head, cfg, parsers, limits.read.sniff_gate)
    return _table_layout(sf, chosen, head.decode("utf-8", errors="replace"), limits) is not None


def _spill(i: int, res: FileResult, spill_dir: Path | None) -> FileResult:
    if spill_dir is None:
        return res
    for name in SPILLED_TABLES:
        t = res.tables.get(name)
        if t is not None and t.height >= SPILL_ROWS:
            path = spill_dir / f"{i}-{name}.parquet"
            t.write_parquet(path, compression="lz4", statistics=False)
            res.spilled[name] = str(path)
            del res.tables[name]
    return res


def ingest(disc: Discovery, cfg: JobConfig, limits: Limits | None = None,
           progress: Callable[[int, int], None] | None = None, workers: int | None = None,
           spill_dir: Path | None = None) -> Ingested:
    limits = limits or Limits()
    parsers = registry()
    # one pass over the heads: year guess, boot-time files; small files are kept whole (they may be
    # screened in a batch), of the others nothing: memory stays small with tens of thousands of files
    heads: list[bytes] = []
    years = _YearCount()
    boot_times = dict(cfg.boot_times)
    # the parsers each plain file of at most one chunk goes to, from this head (`_head_choice`): the
    # bulk, whole-file and small-file routes below read them (a file's head is sniffed once)
    choices: dict[int, list[ParserInfo]] = {}
    beside: list[int] = []  # large CSV tables (`_beside_candidate`): read beside the line logs
    for i, sf in enumerate(disc.files):
        head = _safe_head(sf, limits)
        if _bulk_candidate(sf, limits):
            choices[i] = _head_choice(head, cfg, parsers, limits.read.sniff_gate)
        elif limits.read.beside and _beside_candidate(sf, head, cfg, parsers, limits):
            beside.append(i)
        if not cfg.year:
            years.add(head)
        bt = _boot_time_file(head, cfg)
        if bt is not None and sf.host_hint and sf.host_hint not in boot_times:
            boot_times[cfg.host_aliases.get(sf.host_hint, sf.host_hint)] = bt
        heads.append(head if len(head) < HEAD_BYTES else b"")
    ref_year = cfg.year or years.most_common()
    warnings = list(cfg.warnings) + list(disc.warnings)
    if not cfg.timezone_set:
        warnings.append("no timezone in job.toml: naive local timestamps were read as UTC")
    order = sorted(range(len(disc.files)), key=lambda i: disc.files[i].rel_path)
    beside_set = set(beside)
    results: list[FileResult | None] = [None] * len(disc.files)
    workers = workers or max(1, min(os.cpu_count() or 1, 8))
    done = 0

    def work(i: int) -> tuple[int, FileResult]:
        sf = disc.files[i]
        try:
            return i, _spill(i, parse_one(sf, cfg, ref_year, boot_times, parsers, limits), spill_dir)
        except (OSError, MemoryError) as exc:
            r = FileResult(sf.rel_path, sf.size, None, None, None)
            r.warnings.append(f"could not be read ({type(exc).__name__}: {exc})")
            return i, r
        except Exception as exc:  # noqa: BLE001 - a bug on one hostile file must not take the job down
            r = FileResult(sf.rel_path, sf.size, _file_digest(sf), None, None)
            r.warnings.append(f"internal error while reading this file ({type(exc).__name__}: "
                              f"{str(exc)[:300]}); it was skipped, please report it")
            return i, r

    def pooled(fn: Callable[[T], dict[int, FileResult]], jobs: list[T]) -> None:
        """Run `fn` over `jobs` in the pool; each worker spills what it got (not one by one here)."""
        nonlocal done

        def run(job: T) -> dict[int, FileResult]:
            return {i: _spill(i, r, spill_dir) for i, r in fn(job).items()}

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for got in pool.map(run, jobs):
                for i, r in got.items():
                    results[i] = r
                    done += 1
                if progress and got:
                    progress(done, len(order))

    # The large CSV tables (a DCGM export: its block reader) are read in a thread of their own,
    # started first, one at a time, and the line logs beside them: the two keep both cores busy
    # (issue 17; after one another, one core idled through the line logs' last parse and much of the
    # table). Each file's result lands in its own slot: the output (order, values) does not depend
    # on the threads' timing. (The DCGM files read whole, below, stay after the line logs: beside
    # them, on the 1,024-rank job, they cost more CPU and memory and no time.)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="beside") as side:
        tables = [side.submit(work, i) for i in order if i in beside_set]
        # plain line logs: many files at a time (forensics/bulk.py); what it leaves goes file by file
        if limits.read.bulk:
            bulk_ids = [i for i in order if _bulk_candidate(disc.files[i], limits)]
            packs = [[(i, disc.files[i]) for i in p]
                     for p in _pack(bulk_ids, lambda i: disc.files[i].size, BULK_BATCH_BYTES)]
            # one group of batches per worker (each parses what its screens leave, BULK_GROUP_REST_BYTES
            # at a time), balanced by bytes
            groups = _balance(packs, lambda b: sum(sf.size for _, sf in b), min(workers, len(packs)))
            pooled(lambda g: _bulk_group(g, cfg, ref_year, boot_times, parsers, limits, choices)[0], groups)
        # whole structured files a parser reads from their bytes (DCGM CSV): many at a time
        routes: dict[str, tuple[ParserInfo, list[int]]] = {}
        for i in order:
            if results[i] is None and i not in beside_set:
                wp = _whole_route(disc.files[i], cfg, parsers, limits, choices.get(i))
                if wp is not None:
                    routes.setdefault(wp.name, (wp, []))[1].append(i)
        jobs = [(wp, pack) for wp, ids in routes.values()
                for pack in _pack(ids, lambda i: disc.files[i].size, WHOLE_BATCH_BYTES)]
        if jobs:
            pooled(lambda j: _whole_group(j[1], disc, j[0], cfg, ref_year, limits), jobs)
        for fut in tables:
            i, r = fut.result()
            results[i] = r
            done += 1
            if progress:
                progress(done, len(order))
    order_left = [i for i in order if results[i] is None]
    # small unrecognizable files are screened in batches (no per-file parser cost)
    cands = [i for i in order_left
             if limits.read.screen_small_files
             and _small_candidate(disc.files[i], heads[i], cfg, parsers, choices.get(i), limits.read.sniff_gate)]
    batches = [[(i, disc.files[i], heads[i]) for i in p] for p in _pack(cands, lambda i: len(heads[i]) + 1, BATCH_BYTES)]
    single = set(order_left) - set(cands)
    if len(cands) > 1:
        for b in batches:
            got, again = _screen_batch(b, cfg, ref_year, boot_times, parsers)
            for i, r in got.items():
                results[i] = r
                done += 1
            single.update(again)
        if progress and done:
            progress(done, len(order))
    else:
        single.update(cands)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for i, r in pool.map(work, [i for i in order_left if i in single]):
            results[i] = r
            done += 1
            if progress:
                progress(done, len(order))
    files = [results[i] for i in order]
    algo = digest_algo()  # every digest above came from `new_hasher`
    for f in files:
        if f is not None and f.digest is not None:
            f.digest_algo = algo
    n_err = sum(f.unparsed_error_lines for f in files if f is not None)
    if n_err > MAX_UNPARSED_LISTED:
        warnings.append(f"{n_err} unparsed lines look like errors; report.json lists the first {MAX_UNPARSED_LISTED}, "
                        f"{n_err - MAX_UNPARSED_LISTED} more are not listed (the unparsed_lines table of "
                        f"forensics.duckdb keeps up to {MAX_KEPT_ERRORS} per file)")
    return Ingested([f for f in files if f is not None], ref_year, boot_times, warnings)

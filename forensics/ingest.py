"""Route every discovered file through the parsers and account for every line.

Per file: sniff the head against every parser; a structured format (EXCLUSIVE parser) that
wins the sniff reads the file alone, otherwise every line parser reads it and each line is
counted once: parsed (claimed by any parser), ignored (recognised chatter or blank) or
unparsed. Files are parsed in parallel; results are ordered by path, so output is
deterministic.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl

from forensics.config import JobConfig
from forensics.discovery import Discovery, Limits, SourceFile, iter_chunks, looks_binary, read_head
from parsers import ParserInfo, registry
from parsers import timestamps as ts
from parsers.elastic import parse_error_json, sniff_error_json
from parsers.lines import decode_lines, with_body
from parsers.records import (
    EVENT_SCHEMA,
    TABLE_SCHEMAS,
    Extraction,
    ParseContext,
    conform,
)
from parsers.timestamps import derive_missing

SPAN_LINES = 2000
_ISO_ANY = r"(\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
_GLOG = r"^\[?[IWEF](\d{3,4}) (\d\d:\d\d:\d\d(?:\.\d+)?)\s"
ERRORISH = r"(?i)error|fail|fatal|exception|xid|warn|abort|timeout|timed out|killed|panic"
_UPTIME_S = re.compile(rb"^\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)\s*$")
_YEAR_RE = re.compile(r"\b((?:19|20)\d\d)-[01]\d-[0-3]\d[ T_]|\b\w{3} \w{3} +\d+ \d\d:\d\d:\d\d ((?:19|20)\d\d)\b")


@dataclass
class FileResult:
    rel_path: str
    size: int
    sha256: str | None
    parser: str | None
    parsers: str | None
    lines: int = 0
    parsed: int = 0
    ignored: int = 0
    unparsed: int = 0
    events: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EVENT_SCHEMA))
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    unparsed_errors: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"line_no": pl.Int64, "text": pl.Utf8}))
    warnings: list[str] = field(default_factory=list)
    first_ts: datetime | None = None  # earliest / latest stamped line among the file's first and
    last_ts: datetime | None = None  # last SPAN_LINES lines (any stamp shape a process log prints)


@dataclass
class Ingested:
    files: list[FileResult]
    ref_year: int | None
    boot_times: dict[str, datetime]
    warnings: list[str]


def line_span(lines: pl.DataFrame, ctx: ParseContext) -> tuple[datetime | None, datetime | None]:
    """Earliest and latest time stamp printed on the first / last SPAN_LINES lines: the span a
    process log covers (its first line may be a banner that no parser turns into an event)."""
    if lines.is_empty():
        return None, None
    part = pl.concat([lines.head(SPAN_LINES), lines.tail(SPAN_LINES)]).unique("line_no", maintain_order=True)
    g = pl.col("body").str.extract_groups(_GLOG)
    t = part.select(
        pl.coalesce(
            ts.iso(pl.col("body").str.extract(_ISO_ANY, 1).str.replace("_", " "), ctx.tz),
            ts.mmdd_time(g.struct.field("1"), g.struct.field("2"), ctx.ref_year, ctx.tz),
        ).alias("t")
    )["t"].drop_nulls()
    if t.is_empty():
        return None, None
    return t.min(), t.max()


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


def _ref_year(heads: list[bytes], cfg: JobConfig) -> int | None:
    if cfg.year:
        return cfg.year
    years: Counter[int] = Counter()
    for h in heads:
        for m in _YEAR_RE.finditer(h[:16384].decode("utf-8", "replace")):
            years[int(m.group(1) or m.group(2))] += 1
    return years.most_common(1)[0][0] if years else None


def _choose(head_text: str, parsers: list[ParserInfo]) -> list[ParserInfo]:
    scores = []
    for p in parsers:
        try:
            s = float(p.module.sniff(head_text))
        except Exception:  # a parser's sniff must never take the run down
            s = 0.0
        scores.append((s, p))
    exclusive = [(s, p) for s, p in scores if p.exclusive and s >= 0.5]
    if exclusive:
        best = max(exclusive, key=lambda sp: sp[0])
        line_best = max((s for s, p in scores if not p.exclusive), default=0.0)
        if best[0] >= line_best:
            return [best[1]]
    return [p for p in parsers if not p.exclusive]


def _run_parser(p: ParserInfo | None, fn: Callable[[], Extraction], warnings: list[str]) -> Extraction | None:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one bad file or parser bug must not stop the analysis
        name = p.name if p else "elastic"
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
        res.sha256 = _sha256(sf)
        return res
    host_hint = cfg.host_aliases.get(sf.host_hint or "", sf.host_hint)
    ctx = ParseContext(path=sf.rel_path, host_hint=host_hint, rank_hint=sf.rank_hint, ref_year=ref_year,
                       tz=cfg.timezone, boot_times=boot_times)
    head_text = head.decode("utf-8", errors="replace")
    if _boot_time_file(head, cfg) is not None:
        res.parser = res.parsers = "uptime"
        res.lines = res.parsed = head.count(b"\n") or 1
        res.sha256 = _sha256(sf)
        return res
    error_json = sniff_error_json(head_text)
    chosen = [] if error_json else _choose(head_text, parsers)
    hasher = hashlib.sha256() if sf.compression is None else None
    events, tables, claimed_counts = [], {}, Counter()
    invalid_utf8 = False
    nul = 0
    for chunk, first in iter_chunks(sf, limits):
        if hasher is not None:
            hasher.update(chunk)
        dec = decode_lines(chunk, first)
        invalid_utf8 |= dec.invalid_utf8
        nul += dec.nul_bytes
        lines = with_body(dec.lines)
        n = lines.height
        lo, hi = line_span(lines, ctx)
        if lo is not None:
            res.first_ts = lo if res.first_ts is None else min(res.first_ts, lo)
            res.last_ts = hi if res.last_ts is None else max(res.last_ts, hi)
        res.lines += n
        claimed = pl.Series("line_no", [], dtype=pl.Int64)
        ignored = pl.Series("line_no", [], dtype=pl.Int64)
        exts: list[tuple[str, Extraction]] = []
        if error_json:
            text = chunk.decode("utf-8", errors="replace")
            ext = _run_parser(None, lambda t=text: parse_error_json(t, ctx), res.warnings)
            if ext is not None:
                exts.append(("elastic", ext))
        for p in chosen:
            ext = _run_parser(p, lambda p=p, lines=lines: p.module.parse(lines, ctx), res.warnings)
            if ext is not None:
                exts.append((p.name, ext))
        for name, ext in exts:
            valid = ext.claimed.filter(ext.claimed.is_in(lines["line_no"].implode()))
            new = valid.unique().filter(~valid.unique().is_in(claimed.implode()))
            claimed_counts[name] += new.len()
            claimed = pl.concat([claimed, new])
            ignored = pl.concat([ignored, ext.ignored])
            if not ext.events.is_empty():
                events.append(conform(ext.events, EVENT_SCHEMA))
            for tname, tdf in ext.tables.items():
                if tname in TABLE_SCHEMAS and not tdf.is_empty():
                    tables.setdefault(tname, []).append(conform(tdf, TABLE_SCHEMAS[tname]))
            res.warnings.extend(ext.warnings)
        blank = lines.filter(pl.col("text").str.strip_chars() == "")["line_no"]
        ignored = pl.concat([ignored, blank]).unique()
        ignored = ignored.filter(~ignored.is_in(claimed.implode()) & ignored.is_in(lines["line_no"].implode()))
        res.parsed += claimed.len()
        res.ignored += ignored.len()
        rest = lines.filter(~pl.col("line_no").is_in(claimed.implode()) & ~pl.col("line_no").is_in(ignored.implode()))
        res.unparsed += rest.height
        errs = rest.filter(pl.col("text").str.contains(ERRORISH)).select("line_no", pl.col("text").str.slice(0, 2000))
        if not errs.is_empty():
            res.unparsed_errors = pl.concat([res.unparsed_errors, errs])
    res.sha256 = hasher.hexdigest() if hasher is not None else _sha256(sf)
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
    if res.parser is None and chosen and len(chosen) == 1 and chosen[0].exclusive:
        res.parser = res.parsers = chosen[0].name
    if events:
        ev = pl.concat(events)
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


def _safe_head(sf: SourceFile, limits: Limits) -> bytes:
    try:
        return read_head(sf, limits)
    except OSError:
        return b""


def _sha256(sf: SourceFile) -> str | None:
    h = hashlib.sha256()
    try:
        with open(sf.real_path, "rb") as fh:
            for buf in iter(lambda: fh.read(1 << 20), b""):
                h.update(buf)
    except OSError:
        return None
    return h.hexdigest()


def ingest(disc: Discovery, cfg: JobConfig, limits: Limits | None = None,
           progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> Ingested:
    limits = limits or Limits()
    parsers = registry()
    heads = [_safe_head(sf, limits) for sf in disc.files]
    ref_year = _ref_year(heads, cfg)
    boot_times = dict(cfg.boot_times)
    for sf, head in zip(disc.files, heads, strict=True):
        bt = _boot_time_file(head, cfg)
        if bt is not None and sf.host_hint and sf.host_hint not in boot_times:
            boot_times[cfg.host_aliases.get(sf.host_hint, sf.host_hint)] = bt
    warnings = list(cfg.warnings) + list(disc.warnings)
    if not cfg.timezone_set:
        warnings.append("no timezone in job.toml: naive local timestamps were read as UTC")
    order = sorted(range(len(disc.files)), key=lambda i: disc.files[i].rel_path)
    results: list[FileResult | None] = [None] * len(disc.files)
    workers = workers or max(1, min(os.cpu_count() or 1, 8))
    done = 0

    def work(i: int) -> tuple[int, FileResult]:
        sf = disc.files[i]
        try:
            return i, parse_one(sf, cfg, ref_year, boot_times, parsers, limits)
        except (OSError, MemoryError) as exc:
            r = FileResult(sf.rel_path, sf.size, None, None, None)
            r.warnings.append(f"could not be read ({type(exc).__name__}: {exc})")
            return i, r

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for i, r in pool.map(work, order):
            results[i] = r
            done += 1
            if progress:
                progress(done, len(order))
    files = [results[i] for i in order]
    return Ingested([f for f in files if f is not None], ref_year, boot_times, warnings)

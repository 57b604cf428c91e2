"""DCGM telemetry: dcgm-exporter Prometheus text, long CSV time series, `dcgmi dmon` tables and
Prometheus `query_range`/`query` JSON.

Every sample becomes one `dcgm_samples` row; field names (classic, old, DCGM 4.6 names, dmon short
names, exporter 1.x lowercase names) are normalised to the classic `DCGM_FI_*` name from
`parsers/data/dcgm_fields.csv`. DCGM blank sentinels and `N/A` become null. Events: `dcgm_xid`
(DCGM_FI_DEV_XID_ERRORS, or DCGM_EXP_XID_ERRORS_COUNT > 0, non-zero; one per change of the value
per host and GPU) and `dcgm_health` (DCGM_EXP_GPU_HEALTH_STATUS non-zero, one per change).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from parsers import dcgmi_json
from parsers.ascii_regex import ascii_classes
from parsers.kernel import xid_severity
from parsers.records import (
    Extraction,
    ParseContext,
    empty_events,
    empty_table,
    events_frame,
    file_keys,
    host_hint,
    normalize_pci,
    own_strings,
    table_frame,
)
from parsers.spec import ParserSpec
from parsers.timestamps import epoch_seconds, iso

_DATA = Path(__file__).with_name("data")
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT_FIELD = "DCGM_EXP_XID_ERRORS_COUNT"
HEALTH_FIELD = "DCGM_EXP_GPU_HEALTH_STATUS"


def _field_table(*columns: str) -> list[tuple[str, ...]]:
    """Rows of parsers/data/dcgm_fields.csv, only `columns`, as text (an empty cell is "")."""
    with (_DATA / "dcgm_fields.csv").open(newline="", encoding="utf-8") as f:
        return [tuple(r[c] for c in columns) for r in csv.DictReader(f)]


@cache
def _fields() -> tuple[dict[str, str], dict[str, str]]:
    """(every accepted spelling -> classic DCGM name, dmon short name -> classic name), read from
    the field table on first use (a bundle without DCGM or dmon output never reads it)."""
    names: dict[str, str] = {}
    dmon: dict[str, str] = {}
    for name, others, short in _field_table("name", "other_names", "dmon_short"):
        names[name] = name
        for o in re.split(r"[;|,\s]+", others or ""):
            if o:
                names.setdefault(o, name)
        if short:
            dmon.setdefault(short.strip(), name)
    return names, dmon


def canonical_field(name: str) -> str:
    """Classic DCGM name for any accepted spelling; unknown names are returned unchanged."""
    names = _fields()[0]
    if name in names:
        return names[name]
    if name.lower().startswith("dcgm_") and not name.startswith("DCGM_"):
        rest = name[5:].upper()
        for pre in ("DCGM_FI_DEV_", "DCGM_FI_", "DCGM_FI_PROF_"):
            if pre + rest in names:
                return names[pre + rest]
    return name


def _canon_expr(expr: pl.Expr, uniques: list[str]) -> pl.Expr:
    # numeric field ids (a `field_id` column) too, as the block reader names them (`canonical_or_id`)
    mapping = {u: canonical_or_id(u) for u in uniques if u is not None and canonical_or_id(u) != u}
    return expr.replace(mapping) if mapping else expr


# --------------------------------------------------------------------------------------------
# value cleaning


def _clean_values(raw: pl.Series, stripped: bool = False) -> pl.Series:
    s = raw.cast(pl.Utf8) if stripped else raw.cast(pl.Utf8).str.strip_chars()
    v = s.cast(pl.Float64, strict=False)  # the blank strings (N/A, <<<...>>>, '') are no number: null
    big = v >= 2147483632
    if not big.any():  # no value in the sentinel ranges
        return v.alias(raw.name)
    is_int = s.str.contains(ascii_classes(r"^-?\d+$"))
    blank = (
        (is_int & ((v >= 9.2233720368547758e18) | (big & (v <= 2147483635))))
        | (~is_int & (v >= 1.40737488355328e14) & v.is_finite())
    ).fill_null(False)
    return pl.select(pl.when(blank).then(None).otherwise(v)).to_series().alias(raw.name)


def clean_value(expr: pl.Expr, stripped: bool = False) -> pl.Expr:
    """Text value -> Float64 with DCGM blank sentinels (int64 >= 0x7ffffffffffffff0, int32
    0x7ffffff0..3, double >= 1.40737488355328e14) and `N/A`/`<<<...>>>` strings as null.
    Evaluated on whole columns (each intermediate once: as one expression tree, an eager select
    recomputed the strip and the cast for every comparison, 4x the cost). `stripped`: the text has
    no white space around it already."""
    if stripped:
        return expr.map_batches(lambda s: _clean_values(s, True), return_dtype=pl.Float64)
    return expr.map_batches(_clean_values, return_dtype=pl.Float64)


def _label(labels: pl.Expr, *names: str) -> pl.Expr:
    alt = "|".join(re.escape(n) for n in names)
    return labels.str.extract(ascii_classes(r'(?:^|[,\s{])(?:' + alt + r')\s*=\s*"((?:[^"\\]|\\.)*)"'), 1)


# --------------------------------------------------------------------------------------------
# events from samples


def _events(samples: pl.DataFrame, extra: pl.DataFrame, keys: list[str] | None = None) -> pl.DataFrame:
    """samples has line_no, ts, ts_quality, host, gpu, pci_bus_id, field, value, message plus (in
    `extra`, same row order) err_code, xid_label, health_code."""
    keep = samples["field"].is_in([XID_FIELD, XID_COUNT_FIELD, HEALTH_FIELD])  # the rows events come from
    # (the columns the rules read; an event's other columns are its sample's, gathered at the end)
    rule_cols = ["ts", "host", "gpu", "field", "value", *(keys or [])]
    df = pl.concat([samples.select(rule_cols).filter(keep), extra.filter(keep)], how="horizontal").with_columns(
        keep.arg_true().alias("_ord"))
    xid = (
        pl.when(pl.col("field") == XID_FIELD)
        .then(pl.coalesce(pl.col("value").cast(pl.Int64, strict=False),
                          pl.col("err_code").cast(pl.Int64, strict=False)))
        .when((pl.col("field") == XID_COUNT_FIELD) & (pl.col("value") > 0))
        .then(pl.col("xid_label").cast(pl.Int64, strict=False))
    )
    x = df.with_columns(xid.alias("_xid")).filter(pl.col("field").is_in([XID_FIELD, XID_COUNT_FIELD]))
    # only a series (host, GPU, field, file) with a non-zero Xid has events: the others' rows (the
    # usual gauge of zeros, a sample per GPU and round) are left out before the sort
    x_keys = ["host", "gpu", "field", *(keys or [])]
    x = _series_with(x, pl.col("_xid").is_not_null() & (pl.col("_xid") != 0), x_keys)
    x = x.sort("ts", "_ord", nulls_last=False).with_columns(
        pl.col("_xid").shift(1).over(x_keys).alias("_prev")
    ).filter(
        pl.col("_xid").is_not_null() & (pl.col("_xid") != 0)
        & (pl.col("_prev").is_null() | (pl.col("_prev") != pl.col("_xid")))
    ).with_columns(
        pl.lit("dcgm_xid").alias("kind"),
        pl.col("_xid").cast(pl.Utf8).alias("code"),
        xid_severity(pl.col("_xid")).alias("severity"),
    )
    h_keys = ["host", "gpu", "health_watch", *(keys or [])]
    health = (pl.col("value") > 0) & pl.col("value").is_finite()  # (NaN compares greater than any number)
    h = _series_with(df.filter(pl.col("field") == HEALTH_FIELD), health, h_keys)
    h = h.sort("ts", "_ord").with_columns(
        pl.col("value").shift(1).over(h_keys).alias("_prev")
    ).filter(
        health
        & (pl.col("_prev").is_null() | (pl.col("_prev") != pl.col("value")))
    ).with_columns(
        pl.lit("dcgm_health").alias("kind"),
        pl.coalesce(pl.col("health_code"), pl.col("value").cast(pl.Int64).cast(pl.Utf8)).alias("code"),
        pl.when(pl.col("value") >= 20).then(pl.lit("error")).otherwise(pl.lit("warning")).alias("severity"),
    )
    found = pl.concat([x.select("_ord", "kind", "code", "severity"), h.select("_ord", "kind", "code", "severity")])
    ev = samples.drop("code", "kind", "severity", strict=False)[found["_ord"]].hstack(found).sort("line_no", "_ord")
    return events_frame(ev.with_columns(pl.lit(SPEC.name).alias("source")))


def _series_with(df: pl.DataFrame, hit: pl.Expr, keys: list[str]) -> pl.DataFrame:
    """The rows of `df` whose series (`keys`, nulls alike: as `over` groups them) holds a row where
    `hit` is true: a series without one has no event (each event is such a row; the rows before
    it in its series only decide whether it is one)."""
    hits = df.filter(hit)
    if hits.is_empty():
        return df.head(0)
    if hits.height * 4 > df.height:  # (hits everywhere: the join would save little)
        return df
    return df.join(hits.select(keys).unique(), on=keys, how="semi", nulls_equal=True)


_EXTRA_COLS = ["err_code", "xid_label", "health_code", "health_watch"]


def _finish(samples: pl.DataFrame, claimed: pl.Series, ignored: pl.Series, warnings: list[str],
            messages: pl.DataFrame | Callable[[pl.Series], pl.DataFrame] | None = None,
            keys: list[str] | None = None) -> Extraction:
    """`messages`: line_no -> message of the lines, or a function giving them for some line numbers
    (only events carry their line's text). `keys`: what else keeps samples apart (many files)."""
    extra = samples.with_columns([pl.lit(None, dtype=pl.Utf8).alias(c) for c in _EXTRA_COLS
                                  if c not in samples.columns]).select(_EXTRA_COLS)
    base = samples.select([c for c in samples.columns if c not in _EXTRA_COLS])
    events = _events(base, extra, keys)
    if messages is not None and not events.is_empty():
        if callable(messages):
            messages = messages(events["line_no"])
        events = events.drop("message").join(messages, on="line_no", how="left").select(events.columns)
    return Extraction(
        events=events,
        tables={"dcgm_samples": table_frame("dcgm_samples", base)},
        claimed=_unique_sorted(claimed).alias("line_no"),
        ignored=_unique_sorted(ignored).alias("line_no"),
        warnings=warnings,
    )


# --------------------------------------------------------------------------------------------
# formats

PROM_RE = (
    r"^\s*(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(?P<labels>.*)\})?"
    r"(?:\s+(?P<value>[^\s]+))?(?:\s+(?P<tsms>-?\d+))?\s*$"
)


def _prometheus(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    t = pl.col("text")
    df = lines.select("line_no", "text")
    comment = t.str.strip_chars().str.starts_with("#") | (t.str.strip_chars() == "")
    g = t.str.extract_groups(ascii_classes(PROM_RE))
    df = df.with_columns(comment.alias("_c"), g.alias("_g")).unnest("_g")
    samples = df.filter(~pl.col("_c") & pl.col("name").is_not_null()
                        & (pl.col("labels").is_not_null() | pl.col("value").is_not_null()))
    warnings: list[str] = []
    n_noval = samples.filter(pl.col("value").is_null()).height
    if n_noval:
        warnings.append(f"{n_noval} sample line(s) without a value (label set only): value null")
    lab = pl.col("labels").fill_null("")
    uniques = samples["name"].unique().to_list()
    ts = epoch_seconds(pl.col("tsms").cast(pl.Float64, strict=False) / 1000.0)
    out = samples.select(
        "line_no",
        ts.alias("ts"),
        pl.when(pl.col("tsms").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.col("tsms").alias("ts_raw"),
        pl.coalesce(_label(lab, "Hostname", "hostname"), pl.lit(ctx.host_hint, dtype=pl.Utf8)).alias("host"),
        _label(lab, "gpu").cast(pl.Int64, strict=False).alias("gpu"),
        _label(lab, "UUID", "uuid", "gpu_uuid").alias("uuid"),
        normalize_pci(_label(lab, "pci_bus_id")).alias("pci_bus_id"),
        _canon_expr(pl.col("name"), uniques).alias("field"),
        clean_value(pl.col("value")).alias("value"),
        pl.col("text").alias("message"),
        _label(lab, "err_code").alias("err_code"),
        _label(lab, "xid").alias("xid_label"),
        _label(lab, "health_error_code").alias("health_code"),
        _label(lab, "health_watch").alias("health_watch"),
    )
    ignored = df.filter(pl.col("_c"))["line_no"]
    return _finish(out, samples["line_no"], ignored, warnings)


def _is_csv_header(line: str) -> bool:
    """A comma-separated long CSV header: a field column and a value column by any of the names
    the block reader takes (`_COLS`), so that a file reads the same at any size."""
    cols = {c.strip().strip('"').lower() for c in line.strip().split(",")}
    return bool(cols & set(_COLS["value"])) and bool(cols & set(_COLS["field"]))


def _csv_header(lines: pl.DataFrame) -> tuple[int, str] | None:
    for line_no, text in lines.select("line_no", "text").head(50).iter_rows():
        s = (text or "").strip()
        if not s or s.startswith("#"):
            continue
        return (int(line_no), s) if _is_csv_header(s) else None
    return None


def _per_value(df: pl.DataFrame, raw: pl.Expr, fn: Callable[[pl.Expr], pl.Expr], name: str,
               runs: bool = False) -> pl.DataFrame:
    """Add column `name` = fn(raw), computed once per distinct value of `raw` (a sample file repeats
    one stamp over every GPU and field, one address over every field and sample). `fn` sees the
    values only, as the column `_k`. `runs`: the column holds long runs of one value (a stamp over
    a whole sampling round), each looked up once: comparing neighbours costs less than hashing
    every row."""
    k = df.with_columns(raw.alias("_k"))["_k"]  # (a literal is broadcast)
    return df.with_columns(_values_of(k, fn, runs).alias(name))


def _values_of(k: pl.Series, fn: Callable[[pl.Expr], pl.Expr], runs: bool) -> pl.Series:
    if runs and k.len() > 1:
        starts = k.ne_missing(k.shift(1)).scatter(0, True)
        n_runs = int(starts.sum())
        if 8 * n_runs < k.len():  # (long runs only: gathering the values back costs too)
            return _values_of(k.filter(starts), fn, runs=False).gather(starts.cum_sum() - 1)
    u = k.drop_nulls().unique(maintain_order=True)
    v = pl.DataFrame({"_k": pl.concat([u, pl.Series([None], dtype=u.dtype)])}).select(fn(pl.col("_k")))[:, 0]
    if k.dtype == pl.Utf8 and 0 < 8 * u.len() < k.len():  # few distinct texts: each row's position in
        # `u` by an Enum of them (one hash per row; replace_strict cost 2x)
        out = v.head(u.len()).gather(k.cast(pl.Enum(u.to_list())).to_physical())
    else:
        out = k.replace_strict(u, v.head(u.len()), default=None, return_dtype=v.dtype)
    if v[-1] is not None:  # what fn makes of a missing value
        out = pl.select(pl.when(k.is_null()).then(pl.lit(v[-1], dtype=v.dtype)).otherwise(out)).to_series()
    return out


def _csv(lines: pl.DataFrame, ctx: ParseContext, header_line: int | None,
         names: tuple[str, ...] | None = None) -> Extraction:
    """The long CSV whose header is line `header_line`, or (header_line None) rows without a header
    whose columns are `names` (`headerless_layout`; `#` comment lines are no rows then)."""
    headerless = header_line is None
    start = 0 if headerless else header_line
    body = lines.filter((pl.col("line_no") >= start) & (pl.col("text").str.strip_chars() != ""))
    if headerless:
        body = body.filter(~pl.col("text").str.strip_chars_start().str.starts_with("#"))
    data_lines = body["line_no"] if headerless else body["line_no"][1:]
    raw = "\n".join(body["text"].to_list()).encode()
    warnings: list[str] = [_headerless_note(names)] if headerless else []
    try:
        df = pl.read_csv(io.BytesIO(raw), infer_schema=False, truncate_ragged_lines=True,
                         **({"has_header": False, "new_columns": list(names)} if headerless else {}))
    except Exception as e:  # malformed CSV: report, parse nothing
        return Extraction(events=empty_events(),
                          tables={"dcgm_samples": empty_table("dcgm_samples")},
                          warnings=[f"CSV could not be read: {e}"])
    if df.height != len(data_lines):
        warnings.append(f"CSV rows ({df.height}) do not match data lines ({len(data_lines)}); line numbers approximate")
        data_lines = pl.Series("line_no", list(range(start + 1, start + 1 + df.height)), dtype=pl.Int64)
    ignored = lines.filter(~pl.col("line_no").is_in(data_lines.implode()))["line_no"]
    # the line's text is the message of the few samples that become events, not of every sample
    return _finish(_csv_samples(df, data_lines, ctx), data_lines, ignored, warnings,
                   messages=lines.select("line_no", pl.col("text").alias("message")))


def _csv_ts(raw: pl.Expr, ctx: ParseContext) -> pl.Expr:
    """A CSV stamp: epoch seconds or milliseconds, or ISO 8601."""
    num = raw.cast(pl.Float64, strict=False)
    return (pl.when(num.is_not_null() & (num > 1e11)).then(epoch_seconds(num / 1000.0))
            .when(num.is_not_null()).then(epoch_seconds(num))
            .otherwise(iso(raw, ctx.tz)))


def _csv_samples(df: pl.DataFrame, data_lines: pl.Series, ctx: ParseContext, spaces: bool = True) -> pl.DataFrame:
    """The rules of the long CSV: the rows of `df` (text columns as the header names them) as
    samples, row i read from line data_lines[i]. `spaces=False`: the text has no white space, so
    no cell needs stripping."""
    cols = {c.strip().lower(): c for c in df.columns}

    def col(*names: str) -> pl.Expr:
        for n in names:
            if n.lower() in cols:
                return pl.col(cols[n.lower()]).str.strip_chars() if spaces else pl.col(cols[n.lower()])
        return pl.lit(None, dtype=pl.Utf8)

    tsraw = col(*_COLS["ts"])  # the block reader's column names for each role (`_COLS`)

    metric = col(*_COLS["field"])
    uniques = df.select(metric.alias("m"))["m"].unique().to_list()
    # a few stamps and addresses repeat over every GPU and field: parse each distinct value once
    df = _per_value(df, tsraw, lambda r: _csv_ts(r, ctx), "_ts", runs=True)
    df = _per_value(df, col(*_COLS["pci"]), normalize_pci, "_pci")
    return df.with_columns(pl.Series("line_no", data_lines, dtype=pl.Int64)).select(
        "line_no",
        pl.col("_ts").alias("ts"),
        pl.when(pl.col("_ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        tsraw.alias("ts_raw"),
        pl.coalesce(col(*_COLS["host"]), host_hint(ctx)).alias("host"),
        col(*_COLS["gpu"]).cast(pl.Int64, strict=False).alias("gpu"),
        col(*_COLS["uuid"]).alias("uuid"),
        pl.col("_pci").alias("pci_bus_id"),
        _canon_expr(metric, uniques).alias("field"),
        clean_value(col(*_COLS["value"]), stripped=True).alias("value"),  # (col strips: see `spaces`)
        col(*_COLS["err_code"]).alias("err_code"),
        col(*_COLS["xid_label"]).alias("xid_label"),
        col(*_COLS["health_code"]).alias("health_code"),
        col(*_COLS["health_watch"]).alias("health_watch"),
        *file_keys(ctx),
    )


_BAD_LINE_STARTS = np.frombuffer(b"\n \t\x0b\x0c#|", dtype=np.uint8)
_SPACES = (b" ", b"\t", b"\x0b", b"\x0c")  # the white space an ASCII cell can hold (no CR: plain text)
BYTES_STRIDE = 1 << 40  # line numbers of file k in parse_bytes_many start at k * BYTES_STRIDE


@dataclass
class _WholeCsv:
    header: bytes
    body: list[memoryview | bytes]  # the lines after the header (no copy), ending in a newline
    n: int  # lines in the file
    stops: np.ndarray  # where each line ends (its newline, or the end of the data)


def _whole_csv(data: bytes, ends: np.ndarray | None = None) -> _WholeCsv | None:
    """`data` as `parse` would read it, if that is a long CSV with its header on line 1 and one
    sample per later line (ASCII, no quote, no blank or indented line, no other DCGM shape).
    `ends`: the offsets of its newlines, when the caller has them."""
    if not data or not data.isascii() or b'"' in data or data[:1].isspace():
        return None
    arr = np.frombuffer(data, dtype=np.uint8)
    if ends is None:
        ends = np.flatnonzero(arr == 10)
    # no blank or indented line, and none starting as a dmon header (#Entity) or diag table (|) does
    if np.isin(arr[ends[ends + 1 < len(data)] + 1], _BAD_LINE_STARTS).any():
        return None
    first = data[:ends[0]] if len(ends) else data
    last = data[ends[-1] + 1:] if len(ends) else data
    if first.startswith((b"#", b"|")) or not _is_csv_header(first.decode()) or (last and last.isspace()):
        return None
    if b" " in data and HEALTH_MARK.encode() in data:  # the other shape `parse` tries before the CSV
        return None
    n = len(ends) + (0 if data.endswith(b"\n") else 1)
    body: list[memoryview | bytes] = [memoryview(data)[len(first) + 1:]]
    if n > 1 and not data.endswith(b"\n"):
        body.append(b"\n")
    return _WholeCsv(first, body, n, ends if len(ends) == n else np.append(ends, len(data)))


def parse_bytes(data: bytes, ctx: ParseContext) -> Extraction | None:
    """A whole plain file (`parsers.lines.is_plain`) that `parse` would read as a long CSV with its
    header on line 1 and one sample per line after it (ASCII, no quotes, no blank or indented
    line, no line of another DCGM shape): read by polars' CSV reader straight from the bytes,
    without a frame of lines first, by the same rules (`_csv_samples`; tests compare both on every
    CSV fixture). None for anything else: `parse` reads it."""
    ext, taken = parse_bytes_many([data], [ctx.host_hint], ctx)
    return ext if taken[0] else None


JOIN_BELOW = 1 << 20  # files of fewer bytes are joined into one CSV read (larger ones: a read each, no copy)


def _read_group(datas: list[bytes], wholes: list[_WholeCsv]) -> pl.DataFrame:
    """The rows of files with one header, in order, every cell as text: a large file read from its
    own bytes (header included: nothing copied), runs of small ones joined under the header (one
    reader call instead of one each)."""
    frames, run = [], []

    def flush() -> None:
        if run:
            frames.append(pl.read_csv(b"".join([wholes[0].header, b"\n", *(p for w in run for p in w.body)]),
                                      infer_schema=False, truncate_ragged_lines=True))
            run.clear()

    for d, w in zip(datas, wholes, strict=True):
        if len(d) < JOIN_BELOW:
            run.append(w)
            continue
        flush()
        frames.append(pl.read_csv(d, infer_schema=False, truncate_ragged_lines=True))
    flush()
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")


def _unique_sorted(s: pl.Series) -> pl.Series:
    """`s.unique().sort()`, without hashing or sorting when `s` is strictly increasing already (the
    data lines of a CSV read in file order: millions)."""
    if s.len() < 2 or s.null_count() == 0 and bool((s.diff().slice(1) > 0).all()):
        return s.set_sorted()
    return s.unique().sort()


def parse_bytes_many(datas: list[bytes], hosts: list[str | None], ctx: ParseContext,
                     newlines: list[np.ndarray] | None = None) -> tuple[Extraction, list[bool]]:
    """`parse_bytes` of many files at once (files with the same header read by one CSV call, their
    rules applied once): one Extraction in which file k's line i is k * BYTES_STRIDE + i (a batched
    `ctx` keys events per file), and which files it read (the others need `parse`). `hosts`: each
    file's host hint; `newlines`: each file's newline offsets, when the caller has them (one scan)."""
    wholes = [_whole_csv(d, None if newlines is None else newlines[k]) for k, d in enumerate(datas)]
    taken = [w is not None for w in wholes]
    groups: dict[bytes, list[int]] = {}
    for k, w in enumerate(wholes):
        if w is not None:
            groups.setdefault(w.header, []).append(k)
    parts, nos_parts = [], []
    for ks in groups.values():
        try:
            df = _read_group([datas[k] for k in ks], [wholes[k] for k in ks])  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - `parse` reads them and reports why
            df = None
        rows = [wholes[k].n - 1 for k in ks]  # type: ignore[union-attr]
        if df is None or df.height != sum(rows):
            for k in ks:
                taken[k] = False
            continue
        nos = pl.Series("line_no", np.concatenate(
            [k * BYTES_STRIDE + np.arange(2, r + 2, dtype=np.int64) for k, r in zip(ks, rows, strict=True)]))
        if ctx.batched:
            df = df.with_columns(
                pl.Series("hint_file", np.repeat(np.array(ks, dtype=np.int64), rows)),
                pl.Series("hint_host", hosts, dtype=pl.Utf8).gather(np.repeat(np.array(ks, dtype=np.int64), rows)))
        # one chunk per column: the reader's columns come in many chunks (several per file), the added
        # ones in one, and polars re-aligns such columns in every later expression over the frame (a
        # copy of the columns each time: the rules below cost a quarter more without this one copy)
        df = df.rechunk()
        spaces = any(c in datas[k] for k in ks for c in _SPACES)
        parts.append(_csv_samples(df, nos, ctx, spaces))
        nos_parts.append(nos)
    if not parts:
        return Extraction(events=empty_events(), tables={"dcgm_samples": empty_table("dcgm_samples")}), taken
    data_lines = pl.concat(nos_parts)
    headers = pl.Series("line_no", [k * BYTES_STRIDE + 1 for k, t in enumerate(taken) if t], dtype=pl.Int64)

    def messages(line_nos: pl.Series) -> pl.DataFrame:
        nos = line_nos.unique().sort().to_list()
        text = []
        for no in nos:
            k, i = divmod(no, BYTES_STRIDE)
            w = wholes[k]
            start = 0 if i == 1 else int(w.stops[i - 2]) + 1  # type: ignore[union-attr]
            text.append(datas[k][start:int(w.stops[i - 1])].decode())  # type: ignore[union-attr]
        return pl.DataFrame({"line_no": nos, "message": text}, schema={"line_no": pl.Int64, "message": pl.Utf8})

    return _finish(pl.concat(parts), data_lines, headers, [], messages=messages, keys=file_keys(ctx)), taken


def _dmon(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    t = pl.col("text")
    df = lines.select("line_no", "text").with_columns(
        pl.when(t.str.starts_with("#Entity")).then(t).forward_fill().alias("_hdr"),
    )
    is_row = t.str.contains(ascii_classes(r"^(?:GPU|GPU-I|GPU-CI|Switch|SW|vGPU|CPU|CPU Core|Link)\s+\d")) & pl.col("_hdr").is_not_null()
    rows = df.filter(is_row)
    ignored = df.filter(~is_row)["line_no"]
    parts: list[pl.DataFrame] = []
    for hdr in rows["_hdr"].unique(maintain_order=True).to_list():
        toks = [(m.start(), m.group()) for m in re.finditer(r"\S+", hdr)]
        sub = rows.filter(pl.col("_hdr") == hdr)
        cols = []
        for i, (start, name) in enumerate(toks[1:], start=1):
            end = toks[i + 1][0] if i + 1 < len(toks) else None
            width = (end - start) if end is not None else None
            cols.append(t.str.slice(start, width).str.strip_chars().alias(name))
        first = toks[1][0] if len(toks) > 1 else None
        ent = t.str.slice(0, first).str.strip_chars() if first is not None else t.str.strip_chars()
        wide = sub.select("line_no", ent.alias("_ent"), *cols)
        long = wide.unpivot(index=["line_no", "_ent"], variable_name="_short", value_name="_raw")
        parts.append(long)
    if parts:
        long = pl.concat(parts)
    else:
        long = pl.DataFrame(schema={"line_no": pl.Int64, "_ent": pl.Utf8, "_short": pl.Utf8, "_raw": pl.Utf8})
    warnings: list[str] = []
    shorts = long["_short"].unique().to_list()
    dmon_fields = _fields()[1]
    unknown = [s for s in shorts if s not in dmon_fields]
    if unknown:
        warnings.append(f"dmon columns not in the field table: {', '.join(sorted(unknown))}")
    out = long.with_columns(
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("ts"),
        pl.lit("missing").alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"),
        pl.col("_ent").str.extract(ascii_classes(r"^GPU\s+(\d+)$"), 1).cast(pl.Int64, strict=False).alias("gpu"),
        pl.col("_short").replace({s: dmon_fields[s] for s in shorts if s in dmon_fields}).alias("field"),
        clean_value(pl.col("_raw")).alias("value"),
    ).join(lines.select("line_no", pl.col("text").alias("message")), on="line_no", how="left")
    out = out.select("line_no", "ts", "ts_quality", "host", "gpu",
                     pl.lit(None, dtype=pl.Utf8).alias("uuid"), pl.lit(None, dtype=pl.Utf8).alias("pci_bus_id"),
                     "field", "value", "message")
    if rows.height:
        warnings.append("dcgmi dmon has no timestamps: sample ts left null")
    return _finish(out, rows["line_no"], ignored, warnings)


def _json(lines: pl.DataFrame, ctx: ParseContext, text: str) -> Extraction:
    try:
        doc: Any = json.loads(text)
    except ValueError as e:
        return Extraction(events=empty_events(),
                          tables={"dcgm_samples": empty_table("dcgm_samples")},
                          warnings=[f"JSON could not be read: {e}"])
    result = (doc.get("data") or {}).get("result") or [] if isinstance(doc, dict) else []
    line_no = int(lines["line_no"][0]) if lines.height == 1 else 0
    recs: dict[str, list[Any]] = {k: [] for k in
                                  ("name", "host", "gpu", "uuid", "pci", "err_code", "xid", "hcode", "hwatch",
                                   "ts", "value")}
    for series in result:
        metric = series.get("metric") or {}
        values = series.get("values") or ([series["value"]] if "value" in series else [])
        n = len(values)
        lab = {
            "name": metric.get("__name__"), "host": metric.get("Hostname") or metric.get("hostname"),
            "gpu": metric.get("gpu"), "uuid": metric.get("UUID") or metric.get("uuid") or metric.get("gpu_uuid"),
            "pci": metric.get("pci_bus_id"), "err_code": metric.get("err_code"), "xid": metric.get("xid"),
            "hcode": metric.get("health_error_code"), "hwatch": metric.get("health_watch"),
        }
        for k, v in lab.items():
            recs[k].extend([v] * n)
        recs["ts"].extend(str(v[0]) for v in values)
        recs["value"].extend(str(v[1]) for v in values)
    df = pl.DataFrame(recs, schema={k: pl.Utf8 for k in recs})
    uniques = df["name"].unique().to_list()
    out = df.select(
        pl.lit(line_no, dtype=pl.Int64).alias("line_no"),
        epoch_seconds(pl.col("ts")).alias("ts"),
        pl.lit("exact").alias("ts_quality"),
        pl.col("ts").alias("ts_raw"),
        pl.coalesce(pl.col("host"), pl.lit(ctx.host_hint, dtype=pl.Utf8)).alias("host"),
        pl.col("gpu").cast(pl.Int64, strict=False).alias("gpu"),
        pl.col("uuid"),
        normalize_pci(pl.col("pci")).alias("pci_bus_id"),
        _canon_expr(pl.col("name"), uniques).alias("field"),
        clean_value(pl.col("value")).alias("value"),
        pl.lit(None, dtype=pl.Utf8).alias("message"),
        pl.col("err_code"), pl.col("xid").alias("xid_label"), pl.col("hcode").alias("health_code"),
        pl.col("hwatch").alias("health_watch"),
    )
    return _finish(out, lines["line_no"], pl.Series("line_no", [], dtype=pl.Int64), [])


HEALTH_MARK = "Health Monitor Report"
DIAG_HDR_RE = r"^\|\s*Diagnostic\s*\|\s*Result\s*\|"
# a `dcgmi diag` table pasted without its header: its section banners (DCGM's test categories) or a
# row naming one of DCGM's tests with its result (dcgmi/diag docs: deployment, integration, hardware,
# stress and extended tests of DCGM 2.x-4.x)
DIAG_SECTION_RE = r"^[+|]-+\s+(?:Deployment|Integration|Hardware|Stress|Extended|Metadata)\s+-+[+|]"
DIAG_TESTS = (r"Blacklist|Denylist|NVML Library|CUDA Main Library|CUDA Toolkit Libraries|Permissions and OS Blocks"
              r"|Permissions and OS-related Blocks|Persistence Mode|Environment Variables|Page Retirement/Row Remap"
              r"|Graphics Processes|Inforom|GPU Memory|Memtest|Memory Bandwidth|PCIe|SM Stress|Targeted Stress"
              r"|Targeted Power|Pulse Test|EUD|NVBandwidth|Context Create|Software|Diagnostic")
DIAG_ROW_RE = r"^\|\s*(?:" + DIAG_TESTS + r")\s*\|\s*(?:Pass|Fail|Warn|Skip)"
DIAG_ANY_RE = "|".join(f"(?:{p})" for p in (DIAG_HDR_RE, DIAG_SECTION_RE, DIAG_ROW_RE))
CELLS_RE = r"^\|\s*(?P<left>.*?)\s*\|\s*(?P<right>.*?)\s*\|\s*$"
NEW_HEALTH_RE = r"^(?P<sys>[A-Za-z][\w ./-]*?):\s*(?P<st>Healthy|Warning|Failure)(?:\s*-\s*(?P<msg>.*))?$"
STATUS_WORDS = ["Healthy", "Warning", "Failure"]
# nv-hostengine's own log: each health incident the health watch sets is logged by
# modules/health/DcgmHealthWatch.cpp SetResponse as `log_error("Detected a {} in health system {}:
# '{}'", GetHealthResultAsString(status), GetHealthSystemAsString(system), d.GetMessage())` (github:
# NVIDIA/DCGM 72fa3fe): result WARNING | FAILURE, system PCIe | NVLink | PMU | MCU | Memory | SM |
# Inforom | Thermal | Power | Driver | NVSwitch ... | ConnectX ..., the message a dcgm_errors.h
# DCGM_FR_*_MSG text (+ its _NEXT suggestion), which names the GPU as `GPU %u`. The line has the
# logger's `<date> <time> ERROR [pid:tid] [[Health]] ` head; a copy may lose the head or the closing quote.
HOSTENGINE_HEALTH_RE = (r"Detected an? (?P<st>WARNING|FAILURE|UNKNOWN) in health system (?P<sys>[^:']+?):\s*"
                        r"'?(?P<msg>.*?)'?\s*$")
HOSTENGINE_RESULT = {"WARNING": "Warning", "FAILURE": "Failure", "UNKNOWN": "Warning"}
_HOSTENGINE_TS = r"^\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)"


def _dcgmi(lines: pl.DataFrame, ctx: ParseContext, health: bool) -> Extraction:
    """`dcgmi health -c` (DCGM 2.x/3.x `-> GPU` tree or DCGM 3.3+/4.x `GPU ID: N` rows) and
    `dcgmi diag` tables. Non-healthy subsystems -> `dcgm_health` (code = Warning | Failure);
    failed or warning tests and their detail rows -> `dcgm_diag` (code = Fail | Warn | detail)."""
    t = pl.col("text")
    c = t.str.extract_groups(ascii_classes(CELLS_RE))
    left, right = pl.col("left"), pl.col("right")
    df = lines.select("line_no", "text").with_columns(c.alias("_c")).unnest("_c")
    gpu_here = pl.coalesce(left.str.extract(ascii_classes(r"^->\s*(\d+)$"), 1), left.str.extract(ascii_classes(r"^GPU ID:\s*(\d+)$"), 1))
    df = df.with_columns(gpu_here.cast(pl.Int64, strict=False).forward_fill().alias("gpu"))
    tableish = t.str.contains(r"^\s*[+|]") | t.str.contains(HEALTH_MARK, literal=True)
    if health:
        nh = right.str.extract_groups(ascii_classes(NEW_HEALTH_RE))
        old_sys = left.str.extract(ascii_classes(r"^->\s*([A-Za-z][\w ./-]*)$"), 1)
        overall = pl.coalesce(
            pl.when(left == "Overall Health").then(right), right.str.extract(ascii_classes(r"Overall Health:\s*(\w+)"), 1))
        status = pl.coalesce(
            nh.struct.field("st"),
            pl.when(old_sys.is_not_null() & right.is_in(STATUS_WORDS)).then(right),
            overall)
        df = df.with_columns(status.alias("code"))
        ev = df.filter(pl.col("code").is_not_null() & (pl.col("code") != "Healthy")).with_columns(
            pl.lit("dcgm_health").alias("kind"),
            pl.when(pl.col("code") == "Failure").then(pl.lit("error")).otherwise(pl.lit("warning")).alias("severity"),
            pl.when(overall.is_not_null()).then(pl.lit(None, dtype=pl.Int64)).otherwise(pl.col("gpu")).alias("gpu"))
    else:
        res = right.str.extract(ascii_classes(r"^(Pass|Fail|Warn|Skip)\b"), 1)
        detail = left.str.contains(ascii_classes(r"^(?:Warning|Error)\b"))
        gpus = right.str.extract(ascii_classes(r"GPUs?:\s*(\d+)"), 1).cast(pl.Int64, strict=False)
        dgpu = pl.coalesce(left.str.extract(ascii_classes(r"GPU\s*(\d+)"), 1), right.str.extract(ascii_classes(r"\bGPU\s*(\d+)"), 1)) \
            .cast(pl.Int64, strict=False)
        df = df.with_columns(
            pl.when(detail).then(pl.lit("detail")).when(res.is_in(["Fail", "Warn"])).then(res).alias("code"),
            pl.when(detail).then(dgpu).otherwise(gpus).alias("gpu"))
        # a test's result row that names no GPU (`Fail - All`, or DCGM 4.x `Fail` with `GPU0: Fail` rows
        # below it) is the GPU its Warning / Error rows name, when they name exactly one: the rows up to
        # the next test (a named result row) or section banner are its details (nvvs prints each test's
        # result, then its warnings and infos; `Info` rows are no fault and often name the passing GPUs)
        named = (left != "") & left.is_not_null() & res.is_not_null()
        block = (named | t.str.contains(ascii_classes(DIAG_SECTION_RE))).cum_sum().alias("_blk")
        df = df.with_columns(block)
        one = (df.filter(pl.col("code") == "detail").group_by("_blk")
               .agg(pl.col("gpu").drop_nulls().unique().alias("_g"))
               .filter(pl.col("_g").list.len() == 1)
               .select("_blk", pl.col("_g").list.first().alias("_dg")))
        df = df.join(one, on="_blk", how="left").with_columns(
            pl.when(pl.col("code").is_in(["Fail", "Warn"]) & named & pl.col("gpu").is_null())
            .then(pl.col("_dg")).otherwise(pl.col("gpu")).alias("gpu")).drop("_blk", "_dg").sort("line_no")
        ev = df.filter(pl.col("code").is_not_null()).with_columns(
            pl.lit("dcgm_diag").alias("kind"),
            pl.when(pl.col("code") == "Warn").then(pl.lit("warning")).otherwise(pl.lit("error")).alias("severity"))
    ev = ev.with_columns(
        pl.lit(SPEC.name).alias("source"), pl.lit("missing").alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"), t.alias("message"))
    events = events_frame(ev).sort("line_no")
    understood = df.filter(tableish | (t.str.strip_chars() == "")
                           | t.str.contains(r"^Successfully ran diagnostic|^Health Monitor Report"))["line_no"]
    # detail text continued in the right-hand cell belongs to the record above it
    cont = df.filter((left == "") & (right != "") & right.is_not_null() & pl.col("code").is_null())["line_no"]
    claimed = pl.concat([events["line_no"], cont])
    ignored = understood.filter(~understood.is_in(claimed.implode()))
    return Extraction(events=events, tables={"dcgm_samples": empty_table("dcgm_samples")},
                      claimed=claimed.unique().sort(), ignored=ignored.sort(), warnings=[])


def _hostengine(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    """nv-hostengine log lines of health incidents (HOSTENGINE_HEALTH_RE) -> `dcgm_health` events
    (code Warning | Failure as `dcgmi health`, gpu from the message's `GPU n`). The log's other lines
    (module loading, connections) stay unparsed: the error-like ones reach the signatures as error lines."""
    t = pl.col("text")
    g = t.str.extract_groups(ascii_classes(HOSTENGINE_HEALTH_RE))
    df = lines.select("line_no", "text").with_columns(g.alias("_g")).unnest("_g").filter(pl.col("st").is_not_null())
    raw = t.str.extract(ascii_classes(_HOSTENGINE_TS), 1)
    ev = df.with_columns(
        pl.lit("dcgm_health").alias("kind"),
        pl.col("st").replace_strict(HOSTENGINE_RESULT, default="Warning").alias("code"),
        pl.when(pl.col("st") == "FAILURE").then(pl.lit("error")).otherwise(pl.lit("warning")).alias("severity"),
        pl.col("msg").str.extract(ascii_classes(r"\bGPU (\d+)\b"), 1).cast(pl.Int64, strict=False).alias("gpu"),
        iso(raw, ctx.tz).alias("ts"), raw.alias("ts_raw"),
        pl.when(raw.is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.lit(SPEC.name).alias("source"), pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"),
        pl.concat_str([pl.col("sys"), pl.lit(": "), pl.col("msg")]).alias("message"))
    events = events_frame(ev).sort("line_no")
    return Extraction(events=events, tables={"dcgm_samples": empty_table("dcgm_samples")},
                      claimed=events["line_no"].unique().sort(), ignored=pl.Series("line_no", [], dtype=pl.Int64),
                      warnings=[])


def _dcgmi_json(lines: pl.DataFrame, ctx: ParseContext, kind: str) -> Extraction:
    """`dcgmi health -c -j` / `dcgmi diag -j` (parsers/dcgmi_json.py): the table readers' events."""
    ev, claimed, ignored, warnings = dcgmi_json.read(lines, kind)
    events = events_frame(ev.with_columns(
        pl.lit(SPEC.name).alias("source"), pl.lit("missing").alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"))).sort("line_no") if not ev.is_empty() else empty_events()
    return Extraction(events=events, tables={"dcgm_samples": empty_table("dcgm_samples")},
                      claimed=claimed, ignored=ignored, warnings=warnings)


# An excerpt of `dcgmi diag -j` (users paste the failing result, not the whole document; the JSON does
# not parse): its result records read line by line, in the key names of dcgmi's JSON (nvvs/include/
# NvvsJsonStrings.h: `"gpu_id"` / `"gpu_ids"` (<= 3.x), `"entity_id"` (4.x), `"status"`, `"warnings"` /
# `"warning"`, `"info"`): a `"status"` of Fail | Warn is a `dcgm_diag` event (code Fail | Warn) and each
# warning text a `detail` event, both of the GPU the record names above them. The rest of the excerpt is
# JSON structure: ignored.
DIAG_JSON_STATUS_RE = r'^\s*"status"\s*:\s*"(?:Pass|Fail|Warn|Skip)"\s*,?\s*$'
DIAG_JSON_GPU_RE = r'^\s*"(?:gpu_ids?|entity_id)"\s*:\s*"?\d+'
_DIAG_JSON_WARN_RE = r'^\s*"warnings?"\s*:\s*"(.+)$'


def _dcgmi_json_excerpt(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    t = pl.col("text")
    df = lines.select("line_no", "text").with_columns(
        t.str.extract(ascii_classes(r'^\s*"(?:gpu_ids?|entity_id)"\s*:\s*"?(\d+)'), 1).cast(pl.Int64, strict=False)
        .forward_fill().alias("gpu"),
        t.str.extract(r'^\s*"status"\s*:\s*"(Pass|Fail|Warn|Skip)"', 1).alias("_st"),
        t.str.extract(ascii_classes(_DIAG_JSON_WARN_RE), 1).str.strip_chars_end('",').alias("_w"))
    code = pl.when(pl.col("_st").is_in(["Fail", "Warn"])).then(pl.col("_st")) \
        .when(pl.col("_w").is_not_null()).then(pl.lit("detail"))
    ev = df.with_columns(code.alias("code")).filter(pl.col("code").is_not_null()).with_columns(
        pl.lit("dcgm_diag").alias("kind"),
        pl.when(pl.col("code") == "Warn").then(pl.lit("warning")).otherwise(pl.lit("error")).alias("severity"),
        pl.lit(SPEC.name).alias("source"), pl.lit("missing").alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"),
        pl.coalesce(pl.col("_w"), t.str.strip_chars()).alias("message"))
    events = events_frame(ev).sort("line_no") if not ev.is_empty() else empty_events()
    claimed = events["line_no"].unique().sort() if not events.is_empty() else pl.Series("line_no", [], dtype=pl.Int64)
    # the rest: JSON structure, and the continuation of a string the paste wrapped (dcgmi's own texts
    # hold no newline; the poster's terminal or editor broke them)
    structure = df.filter(~pl.col("line_no").is_in(claimed.implode()))["line_no"]
    return Extraction(events=events, tables={"dcgm_samples": empty_table("dcgm_samples")},
                      claimed=claimed, ignored=structure.sort(), warnings=[])


# --------------------------------------------------------------------------------------------


# Every head `sniff` scores above 0 holds one of these (its first, cheap exit): ingest looks for the
# literals of every parser's SNIFF_NEEDS in one pass over a head and skips the sniffs it rules out.
SNIFF_NEEDS = tuple((w, False) for w in ("DCGM_", "dcgm_", "#Entity", HEALTH_MARK, "Diagnostic", "| Pass", '"status"',
                                         "| Fail", "| Warn", "| Skip", "-  Integration", "-  Deployment",
                                         "-  Hardware", "-  Stress", "in health system"))
# a literal each match of these `(?m)` searches holds (`triage.literal_factor`, checked by
# tests/test_sniffing.py): looked for first, since Python's `re` tries `^` at every offset of 64 KiB
DIAG_SECTION_WORDS = ("Deployment", "Integration", "Hardware", "Stress", "Extended", "Metadata")
DIAG_ROW_WORDS = ("Pass", "Fail", "Warn", "Skip")


def sniff(head: str) -> float:
    s = head.lstrip()
    if not s:
        return 0.0
    # every shape below needs one of these words (a cheap exit for the thousands of other logs)
    if not any(w in head for w, _ in SNIFF_NEEDS):
        return 0.0
    if s.startswith("{") and '"resultType"' in head and re.search(r"DCGM_|dcgm_", head):
        return 0.95
    if dcgmi_json.kind_of(s) is not None:
        return 0.95
    if '"status"' in head and re.search(DIAG_JSON_STATUS_RE, head, re.M) and re.search(DIAG_JSON_GPU_RE, head, re.M):
        return 0.9  # an excerpt of `dcgmi diag -j` (no whole document): its result records
    if "#Entity" in head and re.search(r"(?m)^#Entity\s+\S", head):
        return 0.95
    if HEALTH_MARK in head or ("Diagnostic" in head and re.search(r"(?m)" + DIAG_HDR_RE, head)) \
            or (any(w in head for w in DIAG_SECTION_WORDS) and re.search(r"(?m)" + DIAG_SECTION_RE, head)):
        return 0.95
    if any(w in head for w in DIAG_ROW_WORDS) and re.search(r"(?m)" + DIAG_ROW_RE, head):
        return 0.9
    # nv-hostengine's log: below the line parsers' usual scores, so that a log holding other sources'
    # lines too (a journal, a rank log) stays theirs and a health line there is read as an error line
    if "in health system" in head and re.search(HOSTENGINE_HEALTH_RE.replace("$", "", 1), head):
        return 0.6
    first = next((ln for ln in s.splitlines() if ln.strip() and not ln.startswith("#")), "")
    cols = [c.strip().strip('"').lower() for c in first.split(",")]
    if "value" in cols and ("metric" in cols or "__name__" in cols) and re.search(r"DCGM_|dcgm_", head):
        return 0.95
    layout = csv_layout(first)
    if layout is not None and (layout.wide or re.search(r"DCGM_|dcgm_", head)):
        return 0.95  # a header of any column order, quoting or delimiter (wide: DCGM field columns)
    if "DCGM_FI_" in head and headerless_layout(s.split("\n")[:HEADERLESS_ROWS]) is not None:
        return 0.9  # long-CSV rows without their header
    n = len(re.findall(r"(?m)^\s*(?:DCGM_[A-Z0-9_]+|dcgm_[a-z0-9_]+)(?:\{[^\n]*\})?(?:[ \t]+\S+){0,2}[ \t]*$", head))
    if n >= 2 or "# TYPE DCGM_" in head or "# HELP DCGM_" in head:
        return 0.95
    if n == 1:
        return 0.8
    return 0.0


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return Extraction(events=empty_events(),
                          tables={"dcgm_samples": empty_table("dcgm_samples")})
    first = lines.filter(pl.col("text").str.strip_chars() != "").head(1)["text"]
    if first.len() and first[0].lstrip().startswith(("{", "[")):
        text = "\n".join(lines["text"].to_list())
        if (kind := dcgmi_json.kind_of(text)) is not None:
            return _dcgmi_json(lines, ctx, kind)
        if '"result' in text:
            return _json(lines, ctx, text)
    if lines["text"].str.starts_with("#Entity").any():
        return _dmon(lines, ctx)
    if lines["text"].str.contains(ascii_classes(DIAG_JSON_STATUS_RE)).any() and lines["text"].str.contains(ascii_classes(DIAG_JSON_GPU_RE)).any():
        return _dcgmi_json_excerpt(lines, ctx)
    if lines["text"].str.contains(HEALTH_MARK, literal=True).any():
        return _dcgmi(lines, ctx, health=True)
    if lines["text"].str.contains(ascii_classes(DIAG_ANY_RE)).any():
        return _dcgmi(lines, ctx, health=False)
    if lines["text"].str.contains(ascii_classes(HOSTENGINE_HEALTH_RE)).any():
        return _hostengine(lines, ctx)
    hdr = _csv_header(lines)
    if hdr is not None:
        return _csv(lines, ctx, hdr[0])
    if first.len() and "DCGM_FI_" in first[0]:
        lay = headerless_layout(lines.head(4 * HEADERLESS_ROWS)["text"].to_list())
        if lay is not None and lay.delimiter == ",":
            return _csv(lines, ctx, None, lay.names)
    return _prometheus(lines, ctx)


# --------------------------------------------------------------------------------------------
# large CSV files: read in blocks by polars' CSV reader, aggregated

BUCKET_S = 10  # samples of one GPU and field within this many seconds become one row (mean; OR of bit masks)
BITMASK_FIELDS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",)
COUNTER_FIELDS = ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
EVENT_FIELDS = (XID_FIELD, XID_COUNT_FIELD, HEALTH_FIELD)
_COLS = {  # role -> header names (lower case) that hold it
    "ts": ("timestamp", "time", "ts", "datetime", "date_time", "sample_time"),
    "host": ("hostname", "host", "instance", "node", "nodename"),
    "gpu": ("gpu", "gpu_id", "gpuid", "gpu_index", "device_id", "entityid", "entity_id"),
    "uuid": ("uuid", "gpu_uuid"),
    "pci": ("pci_bus_id", "pcibusid", "bus_id"),
    "field": ("metric", "__name__", "field", "field_name", "fieldname", "field_id", "fieldid", "metric_name"),
    "value": ("value", "val", "sample"),
    "err_code": ("err_code",), "xid_label": ("xid",), "health_code": ("health_error_code",),
    "health_watch": ("health_watch",),
}


@cache
def _field_ids() -> dict[str, str]:
    """Numeric DCGM field id -> classic name (the field table, read on first use)."""
    return {i.strip(): n for i, n in _field_table("id", "name") if i}


def canonical_or_id(name: str) -> str:
    """`canonical_field`, also for a numeric DCGM field id ("100" -> DCGM_FI_DEV_SM_CLOCK)."""
    s = name.strip()
    return _field_ids().get(s, s) if s.isdigit() else canonical_field(s)


@dataclass(frozen=True)
class CsvLayout:
    """Where the roles sit in a DCGM CSV header: long (a field column and a value column) or wide
    (one column per DCGM field, named by classic/alias name or numeric id)."""

    delimiter: str
    names: tuple[str, ...]  # the header's cells, unquoted
    roles: dict[str, str]  # role -> column name
    wide: dict[str, str]  # wide only: column name -> canonical DCGM field
    header_lines: int = 1  # 0: no header, the first line is data (`headerless_layout`)


def csv_layout(header_line: str) -> CsvLayout | None:
    """The layout of a DCGM CSV from its header line (quoted or not, comma, semicolon or tab
    delimited, any column order), or None when the header is not one."""
    line = header_line.strip().lstrip("\ufeff")
    if not line or line.startswith("#"):
        return None
    delim = max((",", ";", "\t", "|"), key=line.count)
    if line.count(delim) < 1:
        return None
    try:
        names = tuple(c.strip() for c in next(csv.reader([line], delimiter=delim)))
    except csv.Error:  # a line the csv module refuses (a lone CR inside it): no header of a table
        return None
    low = {n.lower(): n for n in names}
    roles = {r: next(low[c] for c in cands if c in low) for r, cands in _COLS.items() if any(c in low for c in cands)}
    if "field" in roles and "value" in roles:
        return CsvLayout(delim, names, roles, {})
    taken = set(roles.values())
    wide = {n: canonical_or_id(n) for n in names if n not in taken and canonical_or_id(n).startswith("DCGM_")}
    wide = {n: f for n, f in wide.items() if f in _fields()[0].values() or re.fullmatch(r"DCGM_EXP_[A-Z0-9_]+", f)}
    if wide and ("ts" in roles or "gpu" in roles):
        return CsvLayout(delim, names, {r: c for r, c in roles.items() if r not in ("field", "value")}, wide)
    return None


# A long CSV without its header (a `tail`, a `split` piece, an export written with `--no-header`): the
# columns are told by their cells, on up to HEADERLESS_ROWS rows: the one whose every cell is a DCGM
# field name is the field, the last column the value (every exporter and `dcgmi dmon -c` writer puts
# it last; it must be numeric or empty), then the stamp (ISO 8601 or epoch s/ms), the UUID, the PCI
# address, the one column of small integers (the GPU) and the one of host-like names, each only when
# exactly one column fits. Others stay unnamed and unread; an ambiguous file is not read as a table.
HEADERLESS_ROWS = 20
_HL_FIELD = re.compile(r"DCGM_FI_[A-Z0-9_]+")
_HL_TS = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|\d{10}(?:\.\d+)?|\d{13}")
_HL_UUID = re.compile(r"(?:GPU|MIG)-[0-9a-fA-F-]{8,}")
_HL_PCI = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?")
_HL_NUM = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|")
_HL_GPU = re.compile(r"\d{1,3}")
_HL_HOST = re.compile(r"[A-Za-z][\w.-]*")


def _headerless_note(names: tuple[str, ...]) -> str:
    """The warning of a file read by `headerless_layout`'s names (the columns it could name)."""
    return "CSV without its header: columns told by their cells (" + ", ".join(
        n for n in names if not n.startswith("column_")) + ")"


def headerless_layout(rows: list[str]) -> CsvLayout | None:
    """The layout of DCGM long-CSV data rows that came without their header (see HEADERLESS_ROWS), or
    None. The layout's names are the ones `_csv_samples` reads (`_SAMPLE_NAMES`); header_lines 0."""
    rows = [r.strip() for r in rows if r.strip() and not r.lstrip().startswith("#")][:HEADERLESS_ROWS]
    if not rows or not _HL_FIELD.search(rows[0]):
        return None
    delim = max((",", ";", "\t"), key=rows[0].count)
    try:
        cells = [[c.strip() for c in next(csv.reader([r], delimiter=delim))] for r in rows]
    except (csv.Error, StopIteration):
        return None
    width = len(cells[0])
    if width < 3 or any(len(c) != width for c in cells):
        return None
    cols = list(zip(*cells, strict=True))

    def every(rx: re.Pattern[str], i: int) -> bool:
        return all(rx.fullmatch(v) for v in cols[i])

    field = [i for i in range(width) if every(_HL_FIELD, i)]
    value = width - 1
    if len(field) != 1 or field[0] == value or not every(_HL_NUM, value):
        return None
    names = [""] * width
    names[field[0]], names[value] = _SAMPLE_NAMES["field"], _SAMPLE_NAMES["value"]
    for role, rx in (("ts", _HL_TS), ("uuid", _HL_UUID), ("pci", _HL_PCI), ("gpu", _HL_GPU), ("host", _HL_HOST)):
        fits = [i for i in range(width) if not names[i] and every(rx, i)]
        if role == "host":  # names, not numbers (a column of digits is no host)
            fits = [i for i in fits if not every(_HL_NUM, i)]
        if len(fits) == 1 or (role == "ts" and fits):  # (the first stamp column: a row's time)
            names[fits[0]] = _SAMPLE_NAMES[role]
    names = [n or f"column_{i + 1}" for i, n in enumerate(names)]
    roles = {r: _SAMPLE_NAMES[r] for r in _SAMPLE_NAMES if _SAMPLE_NAMES[r] in names}
    return CsvLayout(delim, tuple(names), roles, {}, header_lines=0)


# the names `_csv_samples` reads each role under (its column lookup is by these names)
_SAMPLE_NAMES = {"ts": "timestamp", "host": "hostname", "gpu": "gpu", "uuid": "uuid", "pci": "pci_bus_id",
                 "field": "metric", "value": "value", "err_code": "err_code", "xid_label": "xid",
                 "health_code": "health_error_code", "health_watch": "health_watch"}


BLOCK_THREADS = 1  # blocks of a large CSV parsed at once (`read_csv_chunks`); one, since the CSV is read
# in a thread beside the line logs (forensics/ingest.py, `ReadPath.beside`): with 2, the 1.4 GB job of bench/README.md
# peaked at 1,045 MiB and ran 8.8 s; with 1, 782 MiB and 8.3 s (same minutes). Results are the same for any
# count (blocks are added in file order; tests/parsers/test_dcgm.py compares 1 and more)
COMBINE_ROWS = 4_000_000  # partial bucket rows kept before they are folded (a block adds its buckets)
_KEYS = ["ts_us", "h", "gpu", "f"]


def _line_texts(data: bytes, rows: np.ndarray, first_line: int) -> dict[int, str]:
    """line_no -> text of the given rows (0-based, one line each) of a block of whole lines."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.concatenate([[0], ends + 1])
    return {first_line + r: data[starts[r]:ends[r]].rstrip(b"\r").decode("utf-8", errors="replace")
            for r in np.unique(rows).tolist() if 0 <= r < len(ends)}


class _Codes:
    """Strings seen so far, each with a stable small code (its position), for cheap group keys.
    Codes are only ever appended, so blocks parsed in several threads share one table (a code a
    block got stays valid; which code a string gets depends on the threads' order, but codes never
    reach the output: it is decoded and sorted by the strings)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.pos: dict[str, int] = {}
        self.lock = threading.Lock()

    def codes(self, s: pl.Series) -> pl.Series:
        names = list(self.names)  # (append-only: a snapshot is a prefix of the table)
        if names:
            try:  # the strings are known already (the usual case after the first block)
                return s.cast(pl.Enum(names)).to_physical().cast(pl.Int32)
            except pl.exceptions.PolarsError:
                pass
        with self.lock:
            for v in s.unique().to_list():
                if v is not None and v not in self.pos:
                    self.pos[v] = len(self.names)
                    self.names.append(v)
            names = list(self.names)
        return s.cast(pl.Enum(names)).to_physical().cast(pl.Int32)

    def add(self, name: str) -> int:
        """The code of one string (given one if new)."""
        with self.lock:
            if name not in self.pos:
                self.pos[name] = len(self.names)
                self.names.append(name)
            return self.pos[name]



@dataclass
class _Block:
    """What one block of data lines gives (`_ChunkReader.parse`), added in file order (`add`)."""

    first: int  # data row index of its first row (that row is line first + 2)
    rows: int  # CSV records read
    lines: int  # newlines in it
    part: pl.DataFrame  # its bucket aggregates
    events: pl.DataFrame | None  # the rows of the event fields: their cells (as read) and line_no
    texts: dict[int, str]  # line_no -> text of the lines that may become events
    samples: int


class _ChunkReader:
    """The state of `read_csv_chunks` between blocks: partial bucket aggregates (keys as codes),
    the rows of the event fields, the texts of the lines that may become events, the counts.
    `parse` reads one block (it may run in several threads at once); `add` takes the blocks in
    file order."""

    def __init__(self, layout: CsvLayout, ctx: ParseContext) -> None:
        self.layout, self.ctx = layout, ctx
        roles = {c: r for r, c in layout.roles.items()}
        keep = [i for i, n in enumerate(layout.names) if n in roles or n in layout.wide]
        self.idx = keep
        self.names = [_SAMPLE_NAMES[roles[layout.names[i]]] if layout.names[i] in roles else layout.names[i]
                      for i in keep]
        # the field column as read (`raw`), and each of its codes' canonical field's code (a cache of a
        # pure function: threads may fill it in any order)
        self.raw, self.canon = _Codes(), {}
        self.hosts, self.fields = _Codes(), _Codes()
        self.parts: list[pl.DataFrame] = []
        self.part_rows = 0
        self.events: list[pl.DataFrame] = []
        self.texts: dict[int, str] = {}
        self.rows = 0  # data rows read (CSV records)
        self.samples = 0
        self.mismatch = False

    def block(self, data: bytes, n_lines: int) -> None:
        """Complete data lines (each ending in a newline), `n_lines` of them, read in order."""
        self.add(self.parse(data, n_lines, self.rows), data)

    def add(self, blk: _Block, data: bytes) -> None:
        """The next block in file order. A block parsed before the rows above it were known (in a
        thread) assumed that every line above was one record; when that was wrong (a quoted cell
        over several lines) it is read again with its true first row, as the sequential reader
        would read it."""
        if blk.first != self.rows:
            blk = self.parse(data, blk.lines, self.rows)
        if blk.rows != blk.lines:
            self.mismatch = True
        self.rows += blk.rows
        self.samples += blk.samples
        if blk.events is not None:
            self.events.append(blk.events)
        self.texts.update(blk.texts)
        self.parts.append(blk.part)
        self.part_rows += blk.part.height
        if self.part_rows > COMBINE_ROWS:  # folded when they grow (rows far out of time order)
            self.parts = [self._combine(self.parts).collect()]
            self.part_rows = self.parts[0].height

    def parse(self, data: bytes, n_lines: int, first: int) -> _Block:
        """One block of complete data lines whose first row is data row `first`."""
        lay = self.layout
        try:
            df = pl.read_csv(data, has_header=False, columns=self.idx, infer_schema=False,
                             separator=lay.delimiter, quote_char='"', truncate_ragged_lines=True)
        except pl.exceptions.NoDataError:
            df = pl.DataFrame({n: pl.Series([], dtype=pl.Utf8) for n in self.names})
        df.columns = self.names
        rows = df.height
        top = first + 1 + lay.header_lines  # the line of data row `first`
        nos = pl.int_range(top, top + df.height, dtype=pl.Int64, eager=True).alias("line_no")
        if lay.wide:  # one sample per row and field, in the order of the header's fields
            wide = list(lay.wide)
            df = df.with_columns(nos).unpivot(index=[c for c in df.columns if c not in lay.wide] + ["line_no"],
                                              on=wide, variable_name="metric", value_name="value")
            df = df.with_columns(pl.col("metric").replace_strict(wide, list(lay.wide.values()), return_dtype=pl.Utf8))
            nos = df["line_no"]
            df = df.drop("line_no")
        # each row's canonical field as a code: the field text as read coded, each code mapped once
        # (`canonical_or_id` strips the text: the canonical name is that of the stripped cell)
        raw = self.raw.codes(df["metric"] if "metric" in df.columns else pl.Series([None] * df.height, dtype=pl.Utf8))
        names = list(self.raw.names)  # (a snapshot that holds every code of `raw`)
        for i in range(len(names)):
            if i not in self.canon:
                self.canon[i] = self.fields.add(canonical_or_id(names[i]))
        f = pl.Series([self.canon[i] for i in range(len(names))] + [None], dtype=pl.Int32).gather(
            raw.fill_null(len(names)))
        spaces = any(c in data for c in _SPACES)
        if spaces:
            df = df.with_columns(pl.exclude("metric").str.strip_chars())
        cols = set(df.columns)

        def col(name: str) -> pl.Expr:
            return pl.col(name) if name in cols else pl.lit(None, dtype=pl.Utf8)

        is_ev = f.is_in([self.fields.pos[n] for n in EVENT_FIELDS if n in self.fields.pos]).fill_null(False)
        events, texts = None, {}
        if is_ev.any():  # the rows events come from, every column (the field canonical): turned into samples
            # by the rules of the small-file path in `finish`, all blocks' rows at once (a call per block
            # cost 8 ms)
            fields = pl.Series(list(self.fields.names), dtype=pl.Utf8)
            events = own_strings(df.filter(is_ev).with_columns(
                *([fields.gather(f.filter(is_ev)).alias("metric")] if "metric" in cols else []), nos.filter(is_ev)))
            value = events.select(clean_value(col("value"), stripped=True))[:, 0]
            maybe = events["line_no"].filter(value.is_null() | (value != 0))  # 0: never an event
            if maybe.len():
                texts = _line_texts(data, maybe.to_numpy() - top, top)
        samples = df.height
        # the samples, only what the buckets need, by the same rules as `_csv_samples`
        us = BUCKET_S * 1_000_000
        df = _per_value(df, col("timestamp"), lambda r: _csv_ts(r, self.ctx).dt.epoch("us"), "_ts", runs=True)
        host = df["hostname"] if "hostname" in cols else None
        if host is None or host.null_count():
            host = df.select(pl.coalesce(col("hostname"), host_hint(self.ctx)).alias("h"))["h"]
        df = df.select((pl.col("_ts") // us).alias("ts_us"), self.hosts.codes(host).alias("h"),  # (the bucket)
                       col("gpu").cast(pl.Int64, strict=False).alias("gpu"), f.alias("f"),
                       clean_value(col("value"), stripped=True).alias("value"),
                       *([pl.col("uuid")] if "uuid" in cols else []),
                       *([normalize_pci(pl.col("pci_bus_id")).alias("pci_bus_id")] if "pci_bus_id" in cols else []))
        ids = [pl.col(c).drop_nulls().first() for c in ("uuid", "pci_bus_id") if c in cols]
        v = pl.col("value")
        bits = [self.fields.pos[f] for f in BITMASK_FIELDS if f in self.fields.pos]
        aggs = [*ids, v.sum().alias("_sum"), v.count().alias("_n"), v.max().alias("_max")]
        if bits:  # bit masks: the OR of the samples, grouped apart (`f` is a key: no bucket holds both;
            # polars' OR over every row, nulls included, cost as much as the other aggregates together)
            is_bits = df["f"].is_in(bits)
            if is_bits.any():
                masks = df.filter(is_bits)
                parts = [_group_by_key(df.filter(~is_bits), _KEYS, aggs), _group_by_key(
                    masks.with_columns(v.cast(pl.Int64, strict=False).alias("_or")), _KEYS,
                    [*aggs, pl.col("_or").bitwise_or()])]
                part = pl.concat(parts, how="diagonal")
            else:
                part = _group_by_key(df, _KEYS, aggs)
        else:
            part = _group_by_key(df, _KEYS, aggs)
        part = part.with_columns(pl.col("ts_us") * us)  # the bucket's start
        return _Block(first, rows, n_lines, own_strings(part), events, texts, samples)

    @staticmethod
    def _fold(df: pl.DataFrame) -> pl.DataFrame:
        ids = [pl.col(c).drop_nulls().first() for c in ("uuid", "pci_bus_id") if c in df.columns]
        us = BUCKET_S * 1_000_000  # (bucket starts: multiples of it, so the division is exact)
        return _group_by_key(df.with_columns(pl.col("ts_us") // us), _KEYS, [
            *ids, pl.col("_sum").sum(), pl.col("_n").sum(), pl.col("_max").max(), pl.col("_or").bitwise_or()
        ]).with_columns(pl.col("ts_us") * us)

    @classmethod
    def _combine(cls, parts: list[pl.DataFrame]) -> pl.LazyFrame:
        """The partial aggregates as one: only rows whose bucket another part may hold (at or past
        the edges of the other parts' time ranges, or unstamped) are grouped again, so rows in time
        order cost one pass."""
        parts = [p if "_or" in p.columns else p.with_columns(pl.lit(None, dtype=pl.Int64).alias("_or")) for p in parts]
        if len(parts) == 1:
            return parts[0].lazy()
        lo = [p["ts_us"].min() for p in parts]
        hi = [p["ts_us"].max() for p in parts]
        inner, edge = [], []
        for i, p in enumerate(parts):
            before = [h for h in hi[:i] if h is not None]
            after = [v for v in lo[i + 1:] if v is not None]
            ok = pl.col("ts_us").is_not_null()
            if before:
                ok &= pl.col("ts_us") > max(before)
            if after:
                ok &= pl.col("ts_us") < min(after)
            if len(before) < i or len(after) < len(parts) - i - 1:  # a part without stamps: it may hold any
                ok = pl.lit(False)
            inner.append(p.lazy().filter(ok))
            edge.append(p.filter(~ok))
        return pl.concat([*inner, cls._fold(pl.concat(edge)).lazy()], how="diagonal_relaxed")

    def finish(self, total: int) -> tuple[Extraction, int, int]:
        if self.parts:
            agg = self._combine(self.parts)
        else:
            agg = pl.LazyFrame(schema={"ts_us": pl.Int64, "h": pl.Int32, "gpu": pl.Int64, "f": pl.Int32,
                                       "_sum": pl.Float64, "_n": pl.UInt32, "_max": pl.Float64, "_or": pl.Int64})
        names = agg.collect_schema().names()
        us = BUCKET_S * 1_000_000  # (bucket starts: multiples of the bucket, so _tb is exact)
        f = pl.col("f")
        codes = [[self.fields.pos[n] for n in group if n in self.fields.pos] for group in (BITMASK_FIELDS, COUNTER_FIELDS)]
        value = (pl.when(f.is_in(codes[0])).then(pl.col("_or").cast(pl.Float64))
                 .when(f.is_in(codes[1])).then(pl.col("_max"))
                 .when(pl.col("_n") > 0).then(pl.col("_sum") / pl.col("_n"))).cast(pl.Float64).alias("value")
        ids = [pl.col(c) if c in names else pl.lit(None, dtype=pl.Utf8).alias(c) for c in ("uuid", "pci_bus_id")]
        df = agg.select((pl.col("ts_us") // us).alias("_tb"), "h", "gpu", "f", value, *ids).collect()
        # sorted by (bucket, host, GPU, field), nulls last: each as a digit (its offset from its least
        # value, the host and field by the rank of their text; null: one past the greatest), the rows
        # ordered by numpy's sort of one key in mixed radix (a third of polars' sort by it; keys are
        # unique: any sort gives this order), host and field gathered from the sorted names
        hosts, fields = sorted(self.hosts.names), sorted(self.fields.names)
        h, fr = _rank_digits(df["h"], self.hosts.names), _rank_digits(df["f"], self.fields.names)
        tb, gpu = _digits(df["_tb"]), _digits(df["gpu"])
        if df.height < 2:
            order = np.arange(df.height)
        elif tb is not None and gpu is not None and tb[1] * (len(hosts) + 1) * gpu[1] * (len(fields) + 1) < 1 << 62:
            key = ((tb[0] * (len(hosts) + 1) + h) * gpu[1] + gpu[0]) * (len(fields) + 1) + fr
            order = np.argsort(key)
        else:  # (the ranges' product does not fit one key)
            order = df.with_columns(pl.Series("_hr", h), pl.Series("_fr", fr)).select(
                pl.arg_sort_by("_tb", "_hr", "gpu", "_fr", nulls_last=True)).to_series().to_numpy()
        df = df.drop("h", "f")
        df = df[order] if df.height else df
        samples = df.select(
            pl.lit(None, dtype=pl.Int64).alias("line_no"),
            pl.from_epoch(pl.col("_tb") * us, time_unit="us").dt.replace_time_zone("UTC").alias("ts"),
            pl.when(pl.col("_tb").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
            pl.lit(None, dtype=pl.Utf8).alias("ts_raw"),
            pl.Series([*hosts, None], dtype=pl.Utf8).gather(h[order]).alias("host"), "gpu", "uuid", "pci_bus_id",
            pl.Series([*fields, None], dtype=pl.Utf8).gather(fr[order]).alias("field"), "value",
            pl.lit(None, dtype=pl.Utf8).alias("message"))
        self.parts = []
        ev = None
        if self.events:
            rows = pl.concat(self.events)
            ev = _csv_samples(rows.drop("line_no"), rows["line_no"], self.ctx, spaces=False)
        events = _events(ev.drop(_EXTRA_COLS), ev.select(_EXTRA_COLS)) if ev is not None else empty_events()
        if not events.is_empty():
            texts = pl.DataFrame({"line_no": list(self.texts), "message": list(self.texts.values())},
                                 schema={"line_no": pl.Int64, "message": pl.Utf8})
            events = events.drop("message").join(texts, on="line_no", how="left").select(events.columns)
        warnings = [f"{self.samples:,} DCGM samples read by polars' CSV reader in blocks and aggregated to "
                    f"{samples.height:,} rows ({BUCKET_S} s per GPU and field; line numbers only on events)"]
        hl = self.layout.header_lines
        if self.mismatch or self.rows != total - hl:
            warnings.append(f"CSV rows ({self.rows}) do not match data lines ({total - hl}); line numbers approximate")
        if not hl:
            warnings.append(_headerless_note(self.layout.names))
        ext = Extraction(events=events, tables={"dcgm_samples": table_frame("dcgm_samples", samples)},
                         claimed=events["line_no"], ignored=pl.Series("line_no", [1] * hl, dtype=pl.Int64),
                         warnings=warnings)
        return ext, total, min(self.rows, max(0, total - hl))


def _count_newlines(data: bytes) -> int:
    """`data.count(b"\\n")`, 1 MiB at a time by numpy (3x faster on a 16 MiB block)."""
    a = np.frombuffer(data, dtype=np.uint8)
    step = 1 << 20
    return sum(int(np.count_nonzero(a[i:i + step] == 10)) for i in range(0, a.size, step))


def _sort_key(ranges: dict[str, tuple[int | None, int | None]]) -> pl.Expr | None:
    """For integer columns (name -> least and greatest value, None when all null) no two rows share
    all of (the buckets: the order is then total, whatever the sort): one Int64 key that orders as
    `sort(columns, nulls_last=True)`: each column's offset from its least value (null: one past
    its greatest) in mixed radix. None when the ranges' product does not fit. (polars' sort by four
    columns of 1.5 M rows cost 0.9 s, by one 0.1 s.)"""
    key, span = None, 1
    for c, (lo, hi) in ranges.items():
        if lo is None or hi is None:  # all null: one value
            continue
        width = int(hi) - int(lo) + 2  # (the last: null)
        span *= width
        off = (pl.col(c).cast(pl.Int64) - int(lo)).fill_null(width - 1)
        key = off if key is None else key * width + off
    return key if span < 1 << 62 else None


def _group_by_key(df: pl.DataFrame, keys: list[str], aggs: list[pl.Expr]) -> pl.DataFrame:
    """`df.group_by(keys).agg(aggs)` for integer key columns, grouped by ONE Int64 key (`_sort_key`:
    the columns in mixed radix, null as one past the greatest) and the key columns decoded from it
    (a 16 MiB block's 270 K rows: 25 ms min against 29 ms for the four columns). Each group
    sees its rows in the same order, so the aggregates are the same. The rows' order is polars'
    (it is not the four-column group_by's either)."""
    ranges = {c: (df[c].min(), df[c].max()) for c in keys}
    key = _sort_key(ranges)
    if key is None:  # the ranges' product does not fit in 62 bits
        return df.group_by(keys).agg(aggs)
    g = df.group_by(key.alias("_key")).agg(aggs)
    return g.select(*_decode_key(pl.col("_key"), ranges, {c: df.schema[c] for c in keys}), pl.exclude("_key"))


def _decode_key(key: pl.Expr, ranges: dict[str, tuple[int | None, int | None]],
                dtypes: dict[str, pl.DataType]) -> list[pl.Expr]:
    """The columns `_sort_key(ranges)` was built from, from the key (in the order of `ranges`)."""
    k, cols = key, {}
    for c in reversed(list(ranges)):  # the last column is the lowest digit
        lo, hi = ranges[c]
        if lo is None or hi is None:  # all null: no digit
            cols[c] = pl.lit(None, dtype=dtypes[c]).alias(c)
            continue
        width = int(hi) - int(lo) + 2
        off = k % width
        cols[c] = pl.when(off == width - 1).then(None).otherwise(off + int(lo)).cast(dtypes[c]).alias(c)
        k = k // width
    return [cols[c] for c in ranges]


def _digits(s: pl.Series) -> tuple[np.ndarray, int] | None:
    """An integer column as sort digits: (each value's offset from the least, null: one past the
    greatest; the digits' radix), None past 62 bits."""
    lo, hi = s.min(), s.max()
    if lo is None or hi is None:  # all null: one digit
        return np.zeros(s.len(), dtype=np.int64), 1
    width = int(hi) - int(lo) + 2
    if width >= 1 << 62:
        return None
    return (s.cast(pl.Int64) - int(lo)).fill_null(width - 1).to_numpy(), width


def _rank_digits(codes: pl.Series, names: list[str]) -> np.ndarray:
    """`_Codes` codes as sort digits: the rank of their text among `names` (null: len(names))."""
    rank = np.empty(len(names) + 1, dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    rank[len(names)] = len(names)
    return rank[codes.fill_null(len(names)).cast(pl.Int64).to_numpy()]


def read_csv_chunks(blocks: Iterable[bytes], layout: CsvLayout, ctx: ParseContext) -> tuple[Extraction, int, int]:
    """A DCGM CSV of any size (`table_layout`) from its bytes, given in blocks cut anywhere: each
    run of whole lines is read by polars' CSV reader (only the columns the rules use, every cell as
    text) and turned into samples by the rules of the small-file path (`_csv_samples`), then
    aggregated to one row per GPU, field and BUCKET_S seconds (the mean value; the OR of bit-mask
    fields, the maximum of counters), stamped at the bucket's start, line_no null (a row stands for
    several lines). Events (Xid, health) come from the rows themselves, each at its own line, with
    its line's text. Blocks are parsed BLOCK_THREADS at a time (polars works outside the GIL: on a
    small machine both cores read while the file is read and hashed) and added in file order, so
    the result is the sequential reader's, block for block. Memory: a few blocks and the partial
    aggregates. Returns the Extraction and the
    file's number of lines and of data lines read (`claimed` holds only the events' lines: the
    others are many millions)."""
    rd = _ChunkReader(layout, ctx)
    threads = max(1, min(BLOCK_THREADS, os.cpu_count() or 1))
    pool = ThreadPoolExecutor(threads, thread_name_prefix="dcgm-block") if threads > 1 else None
    pending: deque[tuple[Future[_Block], bytes]] = deque()
    queued = 0  # data rows of the blocks handed out, if each of their lines is one record

    def feed(data: bytes, n: int) -> None:
        nonlocal queued
        if pool is None:
            rd.block(data, n)
            return
        pending.append((pool.submit(rd.parse, data, n, queued), data))
        queued += n
        while len(pending) > threads:  # memory: a few blocks in flight
            fut, d = pending.popleft()
            rd.add(fut.result(), d)

    carry, header, total = b"", layout.header_lines > 0, 0
    try:
        for b in blocks:
            if not b:
                continue
            buf = carry + b if carry else b
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                carry = buf
                continue
            data, carry = buf[:cut], buf[cut:]
            if header:  # line 1: the header
                nl = data.index(b"\n") + 1
                data, header, total = data[nl:], False, 1
            n = _count_newlines(data)
            total += n
            if data:
                feed(data, n)
        if carry:  # a last line without a newline
            if header:
                total, carry = 1, b""
            else:
                total += 1
                feed(carry + b"\n", 1)
        while pending:
            fut, d = pending.popleft()
            rd.add(fut.result(), d)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return rd.finish(total)


def table_layout(head: str, size: int, chunk_bytes: int) -> CsvLayout | None:
    """The layout of a file whose first line is a DCGM CSV header, when the block reader
    (`read_csv_chunks`) should take the file: it is larger than one chunk the line path reads (whose
    later chunks would lack the header), or a shape the line path does not read (wide, field ids,
    other delimiters). None: the line path reads it (or it is no CSV)."""
    first = head.split("\n", 1)[0].rstrip("\r")
    layout = csv_layout(first)
    if layout is None:  # data rows without their header: only this reader reads them
        return headerless_layout(head.split("\n")[:HEADERLESS_ROWS])
    small_ok = _is_csv_header(first) and layout.delimiter == "," and not layout.wide
    return layout if size > chunk_bytes or not small_ok else None


SPEC = ParserSpec(
    name="dcgm",
    scope="node",
    description="DCGM telemetry: dcgm-exporter metrics, CSV time series, dcgmi dmon tables, Prometheus JSON, "
                "dcgmi health and diag results",
    formats=(
        "dcgm-exporter Prometheus text (optional ms timestamps)",
        "long CSV (timestamp, metric, label columns, value)",
        "dcgmi dmon table",
        "Prometheus query_range / query JSON",
        "dcgmi health -c (old and new table layouts)",
        "dcgmi diag -r N",
        "dcgmi health -c -j, dcgmi diag -j JSON",
        "nv-hostengine log: health watch incidents (Detected a WARNING in health system ...)",
    ),
    kinds=("dcgm_xid", "dcgm_health", "dcgm_diag"),
    tables=("dcgm_samples",),
    exclusive=True,
    reads_bytes=True,
)

"""NVIDIA nccl-tests output (all_reduce_perf, all_gather_perf, ... : github:NVIDIA/nccl-tests, the
PRINT/printf formats of src/common.h, src/common.cu and src/util.cu, 2017 .. 2026).

A run prints a header, a device table, a result table and a footer:

    # nccl-tests version 2.17.1 nccl-headers=22803 nccl-library=22803      (2025+)
    # Collective test starting: all_reduce_perf                             (2025+)
    # nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 ...
    # Using devices
    #   Rank  0 on    node-1 device  0 [0x18] Tesla V100                  (2017 ..)
    #  Rank  0 Pid  12414 on     node-1 device  0 [0x1a] Tesla V100        (2019 ..)
    #  Rank  0 Group  0 Pid  1688 on node-1 device  0 [0x18] A100           (2024 ..)
    #  Rank  0 Group  0 Pid  1688 on node-1 device  0 [0000:18:00] H100     (2025 ..)
    #                                    out-of-place          in-place
    #       size   count   type   redop   root   time   algbw   busbw  #wrong   time ...
    #        (B)  (elements)                      (us)  (GB/s)  (GB/s)           (us) ...
               8       2   float     sum      -1   14.48    0.00    0.00      0   14.22 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 10.4 OK
    # Collective test concluded: all_reduce_perf

(the 2017 versions print `nThread ...` and the footer without the `#`, and an error magnitude where
`#wrong` stands; per-iteration timing (-I) adds four columns to each half, -Z a timestamp). Real
logs lose the leading `#` to a markdown quote: every structural pattern takes it as optional.

Claimed without an event: the header lines, the column headers, the result rows with no wrong
element, the OK footers, `rank=N #wrong=0`, and a bare `#` line in a file that has other nccl-tests
lines (ignored). The parser reads a file only when one of its lines holds a trigger literal
(result rows alone carry none). Events:
- `test_device`: one per device line (rank, host, CUDA device, pid; the PCI address only where the
  line prints domain:bus:device), feeding the rank -> host map; context only.
- `error_line`: the test's own failure lines, `%s: Test CUDA failure %s:%d '%s'`, `%s: Test NCCL
  failure %s:%d '%s / %s'` (or `'%s'` before NCCL 2.13), ` .. %s pid %d: Test failure %s:%d` (the
  trace of TESTCHECK), `%s: Test timeout (%ds) %s:%d`, with the host the line names: the kind
  forensics/error_lines.py gives unclaimed lines, so the ncclResult / CUDA signatures of source
  `any` judge them as before, now with their host.
- `wrong_results`: wrong data out of a collective: `Out of bounds values : N FAILED` (N > 0), a result
  row whose `#wrong` column is 1 or more (either half; an old error-magnitude column of 1 or more),
  `rank=N #wrong=M` (M > 0, the DEBUG_PRINT build). code = the count.
- `bw_check_failed`: `Avg bus bandwidth : X FAILED` (the -c threshold was missed); code = X.
`# error: ...` (ncclGetLastError at exit) is left to forensics/error_lines.py.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.lines import literal_regex
from parsers.records import Extraction, ParseContext, empty_events, events_frame, line_host
from parsers.spec import ParserSpec

_H = r"^\s*#?\s*"  # the `#` a markdown quote may eat, and the indent
HEADER_RE = (_H + r"(?:nThread \d+ nGpus \d+ minBytes \d+ maxBytes \d+|Using devices\s*$|Collective test "
             r"(?:starting|concluded): \S+\s*$|nccl-tests version \S+|Reducing maxBytes to \d+|Blocking Enabled: |"
             r"Per-Iteration Report: |Parallel Init Enabled: |Swap Comms Enabled: |GPU memory usage\s+: |"
             r"Writing JSON output to |skipping json output)")
DEVICE_RE = (_H + r"Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?(?:\s+Pid\s+(?P<pid>\d+))?\s+on\s+"
             r"(?P<host>\S+)\s+device\s+(?P<dev>\d+)\s+\[(?:0x[0-9a-fA-F]{1,2}|(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:"
             r"[0-9a-fA-F]{2}))\]\s+\S")
COLUMNS_RE = (_H + r"(?:(?:size|bytes)\s+(?:count|N)\s+type\s+(?:redop|op)\s+(?:root\s+)?(?:cpu)?time\s+algbw|\(B\)\s+\(elements\)|"
              r"out-of-place\s+(?:\(\+ per-iteration\)\s+)?in-place)")
_NUM = r"(?:-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|-?inf|-?nan|N/A)"
ROW_RE = (r"^\s*\d+\s+\d+\s+[a-z][a-z0-9_]*\s+[a-z][a-z0-9_]*\s+(?:-?\d+\s+)?(?P<vals>" + _NUM + r"(?:\s+" + _NUM
          + r")*)(?:\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)?\s*$")
OOB_RE = _H + r"Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<st>OK|FAILED)\s*$"
AVGBW_RE = _H + r"Avg bus bandwidth\s*:\s*(?P<bw>\S+)\s*(?P<st>OK|FAILED)?\s*$"
WRONG_RANK_RE = r"^\s*rank=(?P<rank>\d+) #wrong=(?P<n>\d+)\s*$"
WRONG_ELT_RE = r"^\s*rank=\d+ elt\[\d+\]: want=0x[0-9a-fA-F]+ got=0x[0-9a-fA-F]+\s*$"
# the `%s: ` hostname is peeled with the wrappers when it looks like a pdsh host (`node-3: `): then
# the line's host is `prefix_host`
FAILURE_RE = (r"^\s*(?:(?:(?P<host>\S+): )?Test (?:CUDA|NCCL) failure \S+:\d+ '|\.\. (?P<thost>\S+) pid (?P<pid>\d+): "
              r"Test failure \S+:\d+\s*$|(?:(?P<ohost>\S+): )?Test timeout \(\d+s\) \S+:\d+\s*$)")
BARE_RE = r"^\s*#\s*$"
_TRIGGER = ("nThread ", "Using devices", "Collective test ", "nccl-tests version", " device ", "Out of bounds values",
           "Avg bus bandwidth", "Test CUDA failure", "Test NCCL failure", "Test failure", "Test timeout", "#wrong",
           "(elements)", "out-of-place")
# every match of a pattern but ROW_RE and BARE_RE holds one of these or a trigger literal
# (tests/parsers/test_nccl_tests.py checks them against `forensics.triage.literal_factor`)
STRUCT_LITERALS = (" minBytes ", "Reducing maxBytes to ", "Blocking Enabled: ", "Per-Iteration Report: ",
                   "Parallel Init Enabled: ", "Swap Comms Enabled: ", "GPU memory usage", "Writing JSON output to ",
                   "skipping json output", "device", "algbw", "]: want=0x")
_LITERALS = (*_TRIGGER, *STRUCT_LITERALS)
_STRUCT_PATTERNS = (HEADER_RE, DEVICE_RE, COLUMNS_RE, OOB_RE, AVGBW_RE, WRONG_RANK_RE, WRONG_ELT_RE, FAILURE_RE)
# the sniff reads the raw head: the patterns less their line-start anchor (a launcher prefix may stand
# there) and their group names


@cache
def _sniff_re() -> re.Pattern[str]:
    """Compiled on the first head that holds a sniff word."""
    return re.compile(r"(?m)" + "|".join(
        "(?:" + re.sub(r"[(][?]P<[a-z]+>", "(?:", p.removeprefix(_H).removeprefix(r"^\s*")) + ")"
        for p in (HEADER_RE, DEVICE_RE, COLUMNS_RE, OOB_RE, AVGBW_RE, FAILURE_RE)))


def sniff(head: str) -> float:
    if not any(t in head for t in ("Rank ", "nThread ", "Out of bounds", "Avg bus", "(elements)", "Test ")):
        return 0.0
    n = len(_sniff_re().findall(head))
    return 0.0 if n == 0 else 0.6 if n == 1 else 0.9


def _wrong(vals: pl.Expr) -> pl.Expr:
    """The larger `#wrong` of a row's two halves, as printed: index 3 of each half (time algbw busbw
    #wrong), a half being 4 columns, or 8 with per-iteration timing (16 in all); N/A is no count."""
    parts = vals.str.split(" ")
    n = parts.list.len()
    second = pl.when(n == 16).then(parts.list.get(11, null_on_oob=True)).when(n == 8).then(
        parts.list.get(7, null_on_oob=True))
    first = parts.list.get(3, null_on_oob=True)
    f1, f2 = first.cast(pl.Float64, strict=False), second.cast(pl.Float64, strict=False)
    return pl.when(f2.is_not_null() & (f1.is_null() | (f2 > f1))).then(second).otherwise(first)


@cache
def _patterns_re() -> str:
    """Every pattern but ROW_RE and BARE_RE as one (their groups unnamed): where none matches, none
    of `parse`'s tests but the row and the bare `#` is true."""
    return "|".join("(?:" + re.sub(r"[(][?]P<[a-z]+>", "(?:", p) + ")" for p in _STRUCT_PATTERNS)


@cache
def _literals_re() -> str:
    return literal_regex(_LITERALS)  # (= str.contains_any(_LITERALS), read faster)


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    # the lines a pattern other than ROW_RE and BARE_RE may match (one literal pass over the frame);
    # the patterns run on those alone
    maybe = np.flatnonzero(lines.select(b.str.contains(ascii_classes(_literals_re())).fill_null(False))[:, 0].to_numpy())
    near = lines.select("body")[maybe].select(b.str.contains_any(list(_TRIGGER)).fill_null(False).alias("lit"),
                                              b.str.contains(ascii_classes(_patterns_re())).fill_null(False).alias("any"))
    if not near["lit"].any():  # the trigger: a file with no such line gives nothing (rows alone are not read)
        return Extraction(events=empty_events())
    if not near["any"].any():  # trigger lines only (a dmesg's ` device `): nothing is claimed, nothing ignored
        return Extraction(events=empty_events(), claimed=lines["line_no"].clear(),
                          ignored=pl.Series("line_no", [], dtype=pl.Int64))
    # the candidates: the trigger lines and the structural ones; result rows and bare `#` lines only
    # in a frame that holds nccl-tests structure (`ours` below: the device, footer and structure lines
    # among the candidates), where they are looked for on every line
    hit = maybe[near["any"].to_numpy()]
    f = lines.select("body")[hit].select(
        (b.str.contains(ascii_classes(DEVICE_RE)) | b.str.contains(ascii_classes(OOB_RE)) | b.str.contains(ascii_classes(AVGBW_RE))).fill_null(False).alias("foot"),
        (b.str.contains(ascii_classes(HEADER_RE)) | b.str.contains(ascii_classes(COLUMNS_RE)) | b.str.contains(ascii_classes(WRONG_ELT_RE))).fill_null(False)
        .alias("struct"))
    struct, foot = f["struct"].to_numpy(), f["foot"].to_numpy()
    lit = near["lit"].to_numpy()
    keep = np.union1d(maybe[lit], hit[struct])
    if bool(((foot | struct) & (lit[near["any"].to_numpy()] | struct)).any()):
        rows = np.flatnonzero(lines.select((b.str.contains(ascii_classes(ROW_RE)) | b.str.contains(ascii_classes(BARE_RE))).fill_null(False))[:, 0]
                              .to_numpy())
        keep = np.union1d(keep, rows)
    cand = lines[keep]
    dev = b.str.extract_groups(ascii_classes(DEVICE_RE))
    fail = b.str.extract_groups(ascii_classes(FAILURE_RE))
    oob = b.str.extract_groups(ascii_classes(OOB_RE))
    avg = b.str.extract_groups(ascii_classes(AVGBW_RE))
    wr = b.str.extract_groups(ascii_classes(WRONG_RANK_RE))
    rec = cand.with_columns(
        dev.struct.field("rank").cast(pl.Int64).alias("_rank"), dev.struct.field("host").alias("_dhost"),
        dev.struct.field("dev").cast(pl.Int64).alias("_dev"), dev.struct.field("pid").cast(pl.Int64).alias("_dpid"),
        dev.struct.field("pci").str.to_lowercase().alias("_pci"),
        pl.coalesce(fail.struct.field("host"), fail.struct.field("thost"), fail.struct.field("ohost")).alias("_fhost"),
        b.str.contains(ascii_classes(FAILURE_RE)).alias("_fail"),
        fail.struct.field("pid").cast(pl.Int64).alias("_fpid"),
        oob.struct.field("n").cast(pl.Int64).alias("_oob"), oob.struct.field("st").alias("_oobst"),
        avg.struct.field("bw").alias("_bw"), avg.struct.field("st").alias("_bwst"),
        wr.struct.field("rank").cast(pl.Int64).alias("_wrank"), wr.struct.field("n").cast(pl.Int64).alias("_wn"),
        _wrong(b.str.extract(ascii_classes(ROW_RE), 1).str.replace_all(r"\s+", " ")).alias("_roww"),
        b.str.contains(ascii_classes(ROW_RE)).alias("_row"),
        (b.str.contains(ascii_classes(HEADER_RE)) | b.str.contains(ascii_classes(COLUMNS_RE)) | b.str.contains(ascii_classes(WRONG_ELT_RE))).alias("_struct"),
        b.str.contains(ascii_classes(BARE_RE)).alias("_bare"),
    )
    is_dev = pl.col("_rank").is_not_null()
    is_fail = pl.col("_fail")
    is_oob = pl.col("_oob").is_not_null()
    is_avg = pl.col("_bw").is_not_null()
    is_wr = pl.col("_wn").is_not_null()
    # a result row (numbers after two words) and a bare `#` (the table's spacer) are nccl-tests' own only
    # in a frame that holds other nccl-tests structure: a device line, a header, the column names or a
    # footer (a training log's `Using device cuda:0` meets the trigger; its `100 200 loss is 0.5` is no row)
    ours = rec.select((is_dev | is_oob | is_avg | pl.col("_struct")).any()).item()
    row = pl.col("_row") & pl.lit(ours)
    claimed = rec.filter(is_dev | is_fail | is_oob | is_avg | is_wr | row | pl.col("_struct"))
    ignored = rec.filter(pl.col("_bare"))["line_no"] if ours else pl.Series("line_no", [], dtype=pl.Int64)

    wrong_n = (pl.when(is_oob & (pl.col("_oob") > 0)).then(pl.col("_oob").cast(pl.Utf8))
               .when(is_wr & (pl.col("_wn") > 0)).then(pl.col("_wn").cast(pl.Utf8))
               .when(row & (pl.col("_roww").cast(pl.Float64, strict=False) >= 1)).then(pl.col("_roww")))
    kind = (pl.when(is_dev).then(pl.lit("test_device"))
            .when(is_fail).then(pl.lit("error_line"))
            .when(wrong_n.is_not_null()).then(pl.lit("wrong_results"))
            .when(is_avg & (pl.col("_bwst") == "FAILED")).then(pl.lit("bw_check_failed")))
    ev = claimed.with_columns(kind.alias("kind"), wrong_n.alias("_wcode")).filter(pl.col("kind").is_not_null())
    if ev.is_empty():
        return Extraction(events=empty_events(), claimed=claimed["line_no"].sort(), ignored=ignored.sort())
    k = pl.col("kind")
    ev = ev.select(
        "line_no", pl.lit(SPEC.name).alias("source"), "kind",
        pl.lit("missing").alias("ts_quality"),
        pl.coalesce(pl.col("_dhost"), pl.col("_fhost"), line_host(ctx)).alias("host"),
        pl.coalesce(pl.col("_rank"), pl.col("_wrank")).alias("rank"),
        pl.col("_dev").alias("gpu"), pl.col("_pci").alias("pci_bus_id"),
        pl.coalesce(pl.col("_dpid"), pl.col("_fpid")).alias("pid"),
        pl.when(k == "test_device").then(pl.lit("info")).when(k == "bw_check_failed").then(pl.lit("warning"))
        .otherwise(pl.lit("error")).alias("severity"),
        pl.when(k == "wrong_results").then(pl.col("_wcode")).when(k == "bw_check_failed").then(pl.col("_bw"))
        .alias("code"),
        b.alias("message"))
    return Extraction(events=events_frame(ev), claimed=claimed["line_no"].sort(), ignored=ignored.sort())


SPEC = ParserSpec(
    name="nccl_tests",
    scope="process",
    description="NVIDIA nccl-tests output (all_reduce_perf and siblings): devices, results, failures",
    formats=("nccl-tests stdout (header, device table, result rows, footer, 2017 .. 2026 formats)",),
    kinds=("test_device", "error_line", "wrong_results", "bw_check_failed"),
    trigger=_TRIGGER,  # per file: a bare `#` counts only beside other nccl-tests lines
)

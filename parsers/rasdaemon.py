"""rasdaemon's `ras-mc-ctl --errors` and `--summary` reports (util/ras-mc-ctl.in, subs `errors` and
`summary`): what the RAS daemon recorded of the kernel's RAS tracepoints into its SQLite database.

`--errors` prints one section per table, each either `No <X> errors.` or a header and its rows:

    Memory controller events:
    1 2024-06-01 10:11:12 +0000 1 Corrected error(s): memory read error at CPU_SrcID#0_MC#1_Chan#0_DIMM#0 location: 1:0:0:-1, addr 0x..., grain 6, syndrome 0 ...
    PCIe AER events:
    2 2024-06-01 10:12:00 +0000 0000:3b:00.0 Uncorrected (Fatal) error: Surprise Down Error
    MCE events:
    1 2024-12-19 03:52:38 +0000 error: Corrected error, no action required., CPU 2, bank Unified Memory Controller (bank=17), ...

(`$id $time $count $type error(s): $msg at $label ...` for mc_event, `$id $time $devname $type error: $msg`
for aer_event, `$id $time error: $msg, CPU ...` for mce_record: rasdaemon's error_msg, e.g. AMD's `Corrected
error, no action required.` / `Uncorrected, software containable error.`, Intel's `Corrected error` /
`Uncorrected error` / `Fatal error`). `--summary` prints per-label and per-message counts
(`\\tCorrected on DIMM Label(s): 'DIMM_A1' location: 1:0:0:0 errors: 42`, `MCE records summary:` then
`\\t3 Corrected error, no action required. errors`).

Each row becomes a `ras_event` event: code `<table>_corrected` (context: the hardware fixed it) or
`<table>_uncorrected` (an uncorrected / fatal / deferred error: the node's memory, CPU or PCIe link
failed), for table `memory`, `pcie`, `mce`. The `No ... errors.` lines, the section headers and the
shell prompt or command line that ran it are parsed and make no event. Host: the wrapper or the path.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, events_frame, file_keys, line_host
from parsers.spec import ParserSpec
from parsers.timestamps import iso

_TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [+-]\d{4})?"
# the `No <table> errors.` lines (ras-mc-ctl.in: Memory, PCIe AER, ARM processor, CXL ..., Extlog, devlink,
# disk, Memory failure, MCE; `No SIGNAL.`) and the section / summary headers
NONE_RE = r"^\s*No (?:[A-Za-z][\w /-]*? errors\.|SIGNAL\.|uncorrectable errors\.)\s*$"
HEADER_RE = (r"^\s*(?:Memory controller events|PCIe AER events|MCE events|ARM processor events|Extlog events|"
             r"Devlink events|Disk errors|Memory failure events|CXL [\w ]+? events|SIGNAL events|"
             r"(?:Memory controller|PCIe AER|ARM processor|CXL [\w ]+?|Memory failure|SIGNAL) events summary|"
             r"MCE records summary|Extlog records summary|Devlink records summary|Disk errors summary):\s*$")
COMMAND_RE = r"(?:^|[\s#$>])ras-mc-ctl(?:\s+--?[\w-]+)*\s*$"
MC_ROW_RE = (r"^\s*(?P<id>\d+) (?P<ts>" + _TS + r") (?P<count>\d+) (?P<type>Corrected|Uncorrected|Fatal|Info|Deferred)"
             r" error\(s\): (?P<msg>.*)$")
AER_ROW_RE = (r"^\s*(?P<id>\d+) (?P<ts>" + _TS + r") (?P<dev>\S+) (?P<type>Corrected|Uncorrected \((?:Non-Fatal|Fatal)\)"
              r"|Uncorrected|Fatal) error: (?P<msg>.*)$")
MCE_ROW_RE = r"^\s*(?P<id>\d+) (?P<ts>" + _TS + r"|\.\.) error: (?P<msg>.*)$"
# --summary rows: `Corrected on DIMM Label(s): ...`, `\t3 Corrected error, no action required. errors`
MC_SUMMARY_RE = r"^\s*(?P<type>Corrected|Uncorrected|Fatal|Deferred) on DIMM Label\(s\): .* errors: \d+\s*$"
MCE_SUMMARY_RE = r"^\s+\d+ (?P<msg>.*?) errors\s*$"
# an MCE message that is not the hardware's correction (rasdaemon's mce decoders' error_msg)
UNCORRECTED_RE = r"(?i)\buncorrect|\bfatal\b|\bdeferred\b|unrecoverable|\bpoison"
# a line worth reading (the row shapes without their group names, which may not repeat in one regex)
_TRIGGER = re.sub(r"\(\?P<\w+>", "(?:", "|".join((NONE_RE, HEADER_RE, COMMAND_RE, MC_ROW_RE, AER_ROW_RE, MCE_ROW_RE,
                                                    MC_SUMMARY_RE, MCE_SUMMARY_RE)))


def sniff(head: str) -> float:
    n = len(re.findall(r"(?m)" + NONE_RE + "|" + HEADER_RE, head))
    return 0.0 if n == 0 else (0.9 if n >= 2 else 0.6)


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    if not lines["body"].str.contains(ascii_classes(NONE_RE + "|" + HEADER_RE)).any():  # no report of ras-mc-ctl's here
        return Extraction(events=empty_events())
    mc = b.str.extract_groups(ascii_classes(MC_ROW_RE))
    aer = b.str.extract_groups(ascii_classes(AER_ROW_RE))
    mce = b.str.extract_groups(ascii_classes(MCE_ROW_RE))
    mcs = b.str.extract(ascii_classes(MC_SUMMARY_RE), 1)
    mces = b.str.extract(ascii_classes(MCE_SUMMARY_RE), 1)
    df = lines.with_columns(mc.alias("_mc"), aer.alias("_aer"), mce.alias("_mce"), mcs.alias("_mcs"),
                            mces.alias("_mces"))
    is_mc = pl.col("_mc").struct.field("id").is_not_null()
    is_aer = ~is_mc & pl.col("_aer").struct.field("id").is_not_null()
    is_mce = ~is_mc & ~is_aer & pl.col("_mce").struct.field("id").is_not_null()
    mc_type = pl.coalesce(pl.col("_mc").struct.field("type"), pl.col("_mcs"))
    table = (pl.when(is_mc | pl.col("_mcs").is_not_null()).then(pl.lit("memory"))
             .when(is_aer).then(pl.lit("pcie"))
             .when(is_mce | pl.col("_mces").is_not_null()).then(pl.lit("mce")))
    bad = (pl.when(is_mc | pl.col("_mcs").is_not_null()).then(mc_type.is_in(["Uncorrected", "Fatal", "Deferred"]))
           .when(is_aer).then(pl.col("_aer").struct.field("type") != "Corrected")
           .when(is_mce).then(pl.col("_mce").struct.field("msg").str.contains(ascii_classes(UNCORRECTED_RE)))
           .otherwise(pl.col("_mces").str.contains(ascii_classes(UNCORRECTED_RE))))
    raw_ts = pl.coalesce(pl.col("_mc").struct.field("ts"), pl.col("_aer").struct.field("ts"),
                         pl.col("_mce").struct.field("ts"))
    raw_ts = pl.when(raw_ts.str.contains(ascii_classes(r"^\d"))).then(raw_ts)
    # only the files that hold a report of ras-mc-ctl's (a batch mixes files)
    report = b.str.contains(ascii_classes(NONE_RE + "|" + HEADER_RE)).any()
    keys = file_keys(ctx)
    df = df.with_columns(table.alias("_table"), bad.alias("_bad"), raw_ts.alias("ts_raw"),
                         (report.over(keys) if keys else report).alias("_report")).filter(pl.col("_report"))
    rows = df.filter(pl.col("_table").is_not_null())
    ev = rows.select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("ras_event").alias("kind"),
        iso(pl.col("ts_raw"), ctx.tz).alias("ts"), "ts_raw",
        pl.when(pl.col("ts_raw").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        line_host(ctx).alias("host"),
        pl.when(pl.col("_bad")).then(pl.lit("critical")).otherwise(pl.lit("warning")).alias("severity"),
        pl.concat_str([pl.col("_table"), pl.when(pl.col("_bad")).then(pl.lit("_uncorrected"))
                       .otherwise(pl.lit("_corrected"))]).alias("code"),
        b.alias("message"))
    events = events_frame(ev) if not ev.is_empty() else empty_events()
    understood = df.filter(pl.col("_table").is_not_null() | b.str.contains(ascii_classes(NONE_RE)) | b.str.contains(ascii_classes(HEADER_RE))
                           | b.str.contains(ascii_classes(COMMAND_RE)))["line_no"]
    return Extraction(events=events, claimed=understood.sort())


SPEC = ParserSpec(
    name="rasdaemon",
    scope="node",
    description="rasdaemon's ras-mc-ctl --errors / --summary reports (memory controller, PCIe AER, MCE records)",
    formats=("ras-mc-ctl --errors", "ras-mc-ctl --summary"),
    kinds=("ras_event",),
    batch=True,  # no per-file state
    trigger=_TRIGGER,
)

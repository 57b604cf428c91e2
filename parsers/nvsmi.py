"""nvidia-smi output: `nvidia-smi -q` reports (ECC errors, retired pages, remapped rows, clocks
event / throttle reasons, temperatures, power), the default `nvidia-smi` table, `nvidia-smi dmon`
(with or without `-o DT`) and the errors nvidia-smi/NVML print when a GPU is gone
(`Unable to determine the device handle for GPU0000:03:00.0: Unknown Error`, `GPU is lost`,
`Failed to initialize NVML: ...`, `No devices were found`).

Numeric values become `dcgm_samples` rows under the classic DCGM field name where one exists
(`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, `DCGM_FI_DEV_ROW_REMAP_PENDING`, ...), else under
`nvsmi:<section path>/<key>`. Events: `gpu_lost` (code = the reason nvidia-smi gave, or `ERR!`),
`nvml_error`, `gpu_ecc` (uncorrectable ECC count > 0; code = count), `gpu_row_remap`
(code `pending` | `failure`), `gpu_retired_pages` (code `pending` or the DBE page count),
`gpu_clock_event` (an active HW slowdown / HW thermal / HW power brake / SW thermal reason; code =
that reason).

NVML agents report the Xid events NVML hands them, in their own words: the k8s device plugin
(`XidCriticalError: Xid=69 on Device=GPU-..., the device will go unhealthy.`, `...; marking device
as unhealthy.`, `XidCriticalError: Xid=%d on unknown device.`) and gpud (`XID 79(GPU has fallen off
the bus) detected on PCI:0000:ae:00`, `XID %d detected on %s`). Those lines are events of kind
`xid` (code = the Xid; the signatures of the Xid table match them as they match the kernel's
lines); the plugin's `'nvidia.com/gpu' device marked unhealthy: <uuid>` is `gpu_unhealthy`, and an
NVML return code `ERROR_GPU_IS_LOST` as agents print it is `gpu_lost`. OpenPAI's Hadoop-AI YARN
NodeManager (org.apache.hadoop.util.SysInfoLinux, which reads the default nvidia-smi table's
`Volatile Uncorr. ECC` column with a regex) withdraws a GPU from the node's capacity in its own words,
`ignored error: gpu <index> ECC code is <code>, will make this gpu unavailable` (log4j
`yy/MM/dd HH:mm:ss` stamp): `gpu_unhealthy` too, code `ecc <code>`, gpu = the index the agent read.

`nvidia-smi nvlink -s` (`GPU n: <name> (UUID: ...)` then `Link k: <speed>` or `Link k: <inactive>`)
and `dcgmi nvlink -s` (`gpuId n:` then one `U`/`D`/`X`/`_` per link) become `nvlink_status`
events, one per GPU with a link that is inactive (nvidia-smi) or Down (dcgmi; `X` disabled and `_`
not supported are not faults); code = the links, `3,5`. A table without its header is read the
same way: the per-GPU line and the link rows are the format.

`nvidia-smi -q -x` XML (whole, or a fragment without its root) is read by `parsers.nvsmi_xml` into
the same samples and events as the text report.

`nvidia-smi --query-gpu=<properties> --format=csv[,nounits]` (the GPU monitor people leave running
in a job script: `-l 5 > gpu.csv`) is read under its header: each known reading becomes a sample under
its classic DCGM field (`QCSV_FIELDS`), the others `nvsmi:query/<property>`; `index`, `pci.bus_id`,
`uuid` and `timestamp` say which GPU and when. A state that lasts is one event where it starts for
that GPU: every cell an NVML device error (`[GPU is lost]`, `[GPU requires reset]`, or all
`[Unknown Error]`) or `reset_status.reset_required` Yes is `gpu_lost`; an active clock event reason
(by name or by the bits of `.active`) `gpu_clock_event`; more uncorrectable volatile ECC errors than
the row before `gpu_ecc`; `retired_pages.pending` Yes `gpu_retired_pages`. One property's
`[Unknown Error]` is only a missing value. Rows of `noheader` output are read under the nvidia-smi
command line that printed them when the log holds it (`set -x`, a pasted command: its `--query-gpu=`
list names the columns); without it they name no property and are not read.

A line parser (the error lines show up in job stdout), but the block formats are read only inside
their own region: after an `NVSMI LOG` banner, inside a table that holds an `NVIDIA-SMI` header,
after a `# gpu` dmon header. Lines of those regions that carry no value are `ignored`.
"""

from __future__ import annotations

import re

import polars as pl

from parsers import nvsmi_xml
from parsers.ascii_regex import ascii_classes
from parsers.kernel import xid_severity
from parsers.records import (
    UTC_DT,
    Extraction,
    ParseContext,
    empty_events,
    empty_table,
    events_frame,
    host_hint,
    line_host,
    normalize_pci,
    table_frame,
)
from parsers.spec import ParserSpec
from parsers.timestamps import ctime, iso

_PCI = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?"
HANDLE_RE = rf"Unable to determine the device handle for (?:GPU|gpu)?\s*(?P<pci>{_PCI}):\s*(?P<why>.*?)\s*$"
NVML_INIT_RE = r"Failed to initialize NVML: (?P<why>.*?)\s*$"
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
NO_DEVICES_RE = r"^\s*No devices were found\s*$"

Q_MARKER_RE = r"^=+\s*NVSMI LOG\s*=+\s*$"
# a section of `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` pasted without the log's header (users
# post the block that matters): the section's heading at the GPU block's indent, then its key : value rows
Q_SECTION_RE = r"^ {4}(?:Remapped Rows|Retired Pages|ECC Errors)\s*$"
KV_RE = r"^(?P<ind> *)(?P<key>\S.*?)\s+:\s?(?P<val>.*?)\s*$"
HDR_RE = r"^(?P<ind> *)(?P<key>\S.*?)\s*$"
Q_GPU_RE = rf"^GPU (?P<pci>{_PCI})\s*$"

TABLE_ROW1_RE = (
    rf"^\|\s*(?P<idx>\d+)\s+(?P<name>.*?)\s+(?P<persist>On|Off|ERR!)\s*\|\s*(?P<pci>{_PCI})\s+(?P<disp>\S+)\s*"
    r"\|\s*(?P<ecc>\S+)\s*\|\s*$"
)
TABLE_ROW2_RE = (
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+C|N/A|ERR!)\s+(?P<perf>P\d+|ERR!|N/A)\s+(?:\S+\s+)?(?P<pwr>\S+?)\s*/\s*"
    r"(?P<cap>\S+)\s*\|\s*(?P<used>\S+?)\s*/\s*(?P<total>\S+)\s*\|\s*(?P<util>\S+)\s+(?P<mode>.*?)\s*\|\s*$"
)

DMON_COLS = ("pwr|gtemp|mtemp|sm|mem|enc|dec|jpg|ofa|mclk|pclk|fb|bar1|ccpm|sbecc|dbecc|pci|rxpci|txpci|pviol|tviol"
             "|rxpd|txpd|mpt")
DMON_HDR_RE = rf"^#\s*(?:Date\s+Time\s+)?gpu(?:\s+(?:{DMON_COLS}))+\s*$"
# NVML agents (k8s-device-plugin internal/rm/health.go, gpud components/accelerator/nvidia/xid)
AGENT_XID_RE = r"(?:XidCriticalError: Xid=|\bXID )(?P<xid>\d+)(?:\((?P<name>[^)]*)\))?(?P<rest>.*)$"
AGENT_XID_LINE = r"XidCriticalError: Xid=\d+|\bXID \d+(?:\([^)]*\))? detected on "
UNHEALTHY_RE = r"device marked unhealthy: (?P<uuid>\S+)"
# OpenPAI hadoop-ai patch, SysInfoLinux.refreshGpuIfNeeded: LOG.error("ignored error: gpu " + index + " ECC code
# is " + errCode + ", will make this gpu unavailable") (older builds print the literal `ECC code is 1`)
HADOOP_AI_ECC_RE = r"ignored error: gpu (?P<gpu>\d+) ECC code is (?P<code>\S+?), will make this gpu unavailable"
LOG4J_YY_RE = r"^(\d\d)/(\d\d)/(\d\d) (\d\d:\d\d:\d\d)\s"  # Hadoop's log4j %d{yy/MM/dd HH:mm:ss}
GPU_IS_LOST_RE = r"\b(?:NVML_)?ERROR_GPU_IS_LOST\b"
UUID_RE = r"(GPU-[0-9a-fA-F]{8}-[0-9a-fA-F-]+)"
GO_STAMP_RE = r"^(\d{4})/(\d\d)/(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)\s"
# `nvidia-smi nvlink -s` / `dcgmi nvlink -s`
SMI_NVL_GPU_RE = r"^GPU (?P<gpu>\d+): .*\(UUID: "
SMI_NVL_LINK_RE = r"^\s+Link (?P<link>\d+): (?P<val><inactive>|[\d.]+ GB/s)\s*$"
DCGMI_NVL_GPU_RE = r"^\s*gpuId (?P<gpu>\d+):\s*$"
DCGMI_NVL_LINKS_RE = r"^\s*(?P<links>[UDX_](?: [UDX_])+)\s*$"

# `nvidia-smi --query-gpu=<properties> --format=csv[,noheader][,nounits]` (`nvidia-smi --help-query-gpu`):
# a header of property names (`timestamp, index, temperature.gpu, power.draw [W]`, units in brackets
# unless `nounits`), then one row per GPU and sample (`-l N` repeats them), cells separated by ", ".
# A property NVML could not read prints as its NVML error string in brackets: `[N/A]`, `[Not
# Supported]`, `[Unknown Error]` (one property), `[GPU is lost]` / `[GPU requires reset]` (the device;
# nvmlErrorString of NVML_ERROR_GPU_IS_LOST / NVML_ERROR_RESET_REQUIRED).
QCSV_NAME = r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*"
QCSV_HDR_RE = rf"^\s*{QCSV_NAME}(?: \[[^\]]*\])?(?:,\s*{QCSV_NAME}(?: \[[^\]]*\])?)+\s*$"
# properties -> the classic DCGM field of the same reading (aliases as --help-query-gpu lists them)
QCSV_FIELDS = {
    "temperature.gpu": "DCGM_FI_DEV_GPU_TEMP", "temperature.memory": "DCGM_FI_DEV_MEMORY_TEMP",
    "power.draw": "DCGM_FI_DEV_POWER_USAGE", "power.draw.average": "DCGM_FI_DEV_POWER_USAGE",
    "power.draw.instant": "DCGM_FI_DEV_POWER_USAGE_INSTANT",
    "clocks.sm": "DCGM_FI_DEV_SM_CLOCK", "clocks.current.sm": "DCGM_FI_DEV_SM_CLOCK",
    "clocks.mem": "DCGM_FI_DEV_MEM_CLOCK", "clocks.current.memory": "DCGM_FI_DEV_MEM_CLOCK",
    "utilization.gpu": "DCGM_FI_DEV_GPU_UTIL", "utilization.memory": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "memory.used": "DCGM_FI_DEV_FB_USED", "memory.free": "DCGM_FI_DEV_FB_FREE", "memory.total": "DCGM_FI_DEV_FB_TOTAL",
    "ecc.errors.uncorrected.volatile.total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "ecc.errors.corrected.volatile.total": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "ecc.errors.uncorrected.aggregate.total": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "ecc.errors.corrected.aggregate.total": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "retired_pages.dbe": "DCGM_FI_DEV_RETIRED_DBE", "retired_pages.double_bit.count": "DCGM_FI_DEV_RETIRED_DBE",
    "retired_pages.sbe": "DCGM_FI_DEV_RETIRED_SBE", "retired_pages.single_bit_ecc.count": "DCGM_FI_DEV_RETIRED_SBE",
    "retired_pages.pending": "DCGM_FI_DEV_RETIRED_PENDING",
    "clocks_event_reasons.active": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "clocks_throttle_reasons.active": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "pcie.link.gen.current": "DCGM_FI_DEV_PCIE_LINK_GEN", "pcie.link.gen.gpucurrent": "DCGM_FI_DEV_PCIE_LINK_GEN",
    "pcie.link.width.current": "DCGM_FI_DEV_PCIE_LINK_WIDTH",
}
# the columns that say which GPU a row is, and when
QCSV_IDS = {"index": "gpu", "pci.bus_id": "pci", "gpu_bus_id": "pci", "uuid": "uuid", "gpu_uuid": "uuid",
            "timestamp": "ts"}
# the clock event reasons the -q report's CLOCK_EVENTS name, as properties (both spellings) and as the
# bits of `.active` (nvml.h nvmlClocksEventReasons: HwSlowdown 0x8, SwThermalSlowdown 0x20,
# HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80)
QCSV_CLOCK_REASONS = {"hw_slowdown": ("hw_slowdown", 0x8), "hw_thermal_slowdown": ("hw_thermal", 0x40),
                      "hw_power_brake_slowdown": ("hw_power_brake", 0x80), "sw_thermal_slowdown": ("sw_thermal", 0x20)}
# `--format=csv,noheader` prints no header: the rows' names are then those of the command line, where the
# log holds it (a job script under `set -x`, a pasted command): `nvidia-smi --query-gpu=a,b,c --format=csv...`
QCSV_CMD_RE = r"nvidia-smi\b.*?--query-gpu[= ]+[\"']?(?P<props>[a-z][a-z0-9_.]*(?:,[a-z][a-z0-9_.]*)+)"
QCSV_CMD_FORMAT_RE = r"--format[= ]+[\"']?csv"  # (the same line: the rows are CSV)
QCSV_DEVICE_ERRORS = ("GPU is lost", "GPU requires reset")  # a cell holding one: the device, not one property
QCSV_TRIGGER = (r"(?:temperature\.gpu|power\.draw|utilization\.gpu|clocks\.(?:current\.)?sm|memory\.used"
                r"|ecc\.errors\.|retired_pages\.|clocks_(?:event|throttle)_reasons\.|reset_status\.|pcie\.link\."
                r"|\[GPU (?:is lost|requires reset)\])")


def _unnamed(rx: str) -> str:
    """`rx` with its named groups made plain, so that several patterns can be joined into one."""
    return re.sub(r"\(\?P<\w+>", "(?:", rx)


NVL_ANY_RE = _unnamed(rf"{SMI_NVL_LINK_RE}|{DCGMI_NVL_GPU_RE}")
# Parsed file by file (query blocks, tables), only in files with a line matching _TRIGGER.
_TRIGGER = _unnamed(rf"device handle|NVML|NVIDIA-SMI|No devices were found|{Q_MARKER_RE}|{Q_SECTION_RE}|{DMON_HDR_RE}"
                   rf"|{AGENT_XID_LINE}|{UNHEALTHY_RE}|{HADOOP_AI_ECC_RE}|ERROR_GPU_IS_LOST|{SMI_NVL_GPU_RE}|{NVL_ANY_RE}"
                   rf"|{nvsmi_xml.MARKER_RE}|{QCSV_TRIGGER}")
DMON_UNITS_RE = r"^#\s*(?:YYYYMMDD\s+HH:MM:SS\s+)?Idx\b"
DMON_ROW_RE = r"^\s*(?:\d{8}\s+\d\d:\d\d:\d\d\s+)?\d+(?:\s+(?:-|[\d.]+))+\s*$"

# classic DCGM names for the values nvidia-smi prints
DMON_FIELDS = {
    "pwr": "DCGM_FI_DEV_POWER_USAGE", "gtemp": "DCGM_FI_DEV_GPU_TEMP", "mtemp": "DCGM_FI_DEV_MEMORY_TEMP",
    "sm": "DCGM_FI_DEV_GPU_UTIL", "mem": "DCGM_FI_DEV_MEM_COPY_UTIL", "enc": "DCGM_FI_DEV_ENC_UTIL",
    "dec": "DCGM_FI_DEV_DEC_UTIL", "mclk": "DCGM_FI_DEV_MEM_CLOCK", "pclk": "DCGM_FI_DEV_SM_CLOCK",
    "fb": "DCGM_FI_DEV_FB_USED",
}
CLOCK_SECTIONS = ["Clocks Event Reasons", "Clocks Throttle Reasons"]
CLOCK_EVENTS = {
    "HW Slowdown": "hw_slowdown", "HW Thermal Slowdown": "hw_thermal",
    "HW Power Brake Slowdown": "hw_power_brake", "SW Thermal Slowdown": "sw_thermal",
}


def _empty(warnings: list[str] | None = None) -> Extraction:
    return Extraction(events=empty_events(), tables={"dcgm_samples": empty_table("dcgm_samples")},
                      warnings=warnings or [])


def _ids(df: pl.DataFrame) -> pl.Series:
    return df["line_no"] if "line_no" in df.columns else pl.Series("line_no", [], dtype=pl.Int64)


# --------------------------------------------------------------------------------------------
# error lines (anywhere)


def _errors(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    b = pl.col("body")
    cand = lines.filter(b.str.contains_any(["device handle", "NVML", "NVIDIA-SMI has failed", "No devices were found"]))
    if cand.is_empty():
        return _agents(lines, ctx)
    h = b.str.extract_groups(ascii_classes(HANDLE_RE))
    why = h.struct.field("why")
    lost = cand.filter(h.struct.field("pci").is_not_null()).select(
        "line_no", pl.lit("gpu_lost").alias("kind"), pl.lit("critical").alias("severity"),
        pl.when(why.str.contains("(?i)GPU is lost")).then(pl.lit("GPU is lost"))
        .otherwise(why.str.replace(r"\.$", "")).alias("code"),
        normalize_pci(h.struct.field("pci")).alias("pci_bus_id"), b.alias("message"))
    init = cand.filter(b.str.contains(ascii_classes(NVML_INIT_RE))).select(
        "line_no", pl.lit("nvml_error").alias("kind"), pl.lit("error").alias("severity"),
        b.str.extract(ascii_classes(NVML_INIT_RE), 1).alias("code"), b.alias("message"))
    other = cand.filter(b.str.contains(NO_DRIVER, literal=True) | b.str.contains(ascii_classes(NO_DEVICES_RE))).select(
        "line_no", pl.lit("nvml_error").alias("kind"), pl.lit("error").alias("severity"),
        pl.when(b.str.contains(NO_DRIVER, literal=True)).then(pl.lit("driver_unreachable"))
        .otherwise(pl.lit("no_devices")).alias("code"), b.alias("message"))
    return pl.concat([lost, init, other, _agents(lines, ctx)], how="diagonal_relaxed")


def _agents(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Xid / health lines of NVML agents (k8s device plugin, gpud): see the module docstring."""
    b = pl.col("body")
    cand = lines.filter(b.str.contains(ascii_classes(
        _unnamed(rf"{AGENT_XID_LINE}|{UNHEALTHY_RE}|{HADOOP_AI_ECC_RE}|{GPU_IS_LOST_RE}"))))
    if cand.is_empty():
        return pl.DataFrame()
    x = b.str.extract_groups(ascii_classes(AGENT_XID_RE))
    hd = b.str.extract_groups(ascii_classes(HADOOP_AI_ECC_RE))
    go = b.str.extract_groups(ascii_classes(GO_STAMP_RE))
    go_raw = pl.concat_str([go.struct.field("1"), go.struct.field("2"), go.struct.field("3")], separator="-")
    yy = b.str.extract_groups(ascii_classes(LOG4J_YY_RE))
    yy_raw = pl.concat_str([pl.lit("20"), yy.struct.field("1"), pl.lit("-"), yy.struct.field("2"), pl.lit("-"),
                            yy.struct.field("3"), pl.lit(" "), yy.struct.field("4")])
    stamp_raw = pl.when(go.struct.field("1").is_not_null()).then(
        pl.concat_str([go_raw, go.struct.field("4")], separator=" ")).when(
        hd.struct.field("gpu").is_not_null() & yy.struct.field("1").is_not_null()).then(yy_raw)
    is_xid = b.str.contains(ascii_classes(AGENT_XID_LINE))
    is_hadoop = hd.struct.field("gpu").is_not_null()
    is_unh = b.str.contains(ascii_classes(UNHEALTHY_RE)) | is_hadoop
    xid = x.struct.field("xid").cast(pl.Int64, strict=False)
    return cand.select(
        "line_no",
        pl.when(is_xid).then(pl.lit("xid")).when(is_unh).then(pl.lit("gpu_unhealthy"))
        .otherwise(pl.lit("gpu_lost")).alias("kind"),
        pl.when(is_xid).then(xid_severity(xid)).when(is_unh).then(pl.lit("warning"))
        .otherwise(pl.lit("critical")).alias("severity"),
        pl.when(is_xid).then(xid.cast(pl.Utf8))
        .when(is_hadoop).then(pl.concat_str([pl.lit("ecc "), hd.struct.field("code")]))
        .when(is_unh).then(pl.lit("unhealthy"))
        .otherwise(pl.lit("GPU is lost")).alias("code"),
        hd.struct.field("gpu").cast(pl.Int64, strict=False).alias("gpu"),
        normalize_pci(b.str.extract(rf"PCI:({_PCI})", 1)).alias("pci_bus_id"),
        iso(stamp_raw, ctx.tz).alias("ts"), stamp_raw.alias("ts_raw"),
        pl.when(iso(stamp_raw, ctx.tz).is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing"))
        .alias("ts_quality"),
        b.alias("message"))


# --------------------------------------------------------------------------------------------
# nvidia-smi nvlink -s, dcgmi nvlink -s


def _nvlink(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.Series]:
    """One `nvlink_status` event per GPU block with inactive (nvidia-smi) or Down (dcgmi) links.
    A block is a GPU line and the link rows right under it; link rows with no GPU line above are a
    block of their own (gpu unknown)."""
    b = pl.col("body")
    smi_gpu = b.str.extract(ascii_classes(SMI_NVL_GPU_RE), 1)
    dc_gpu = b.str.extract(ascii_classes(DCGMI_NVL_GPU_RE), 1)
    smi_link = b.str.extract_groups(ascii_classes(SMI_NVL_LINK_RE))
    dc_links = b.str.extract(ascii_classes(DCGMI_NVL_LINKS_RE), 1)
    df = lines.select("line_no", "body").with_columns(
        pl.coalesce(smi_gpu, dc_gpu).cast(pl.Int64, strict=False).alias("_gpu"),
        smi_gpu.is_not_null().alias("_smi_hdr"), dc_gpu.is_not_null().alias("_dc_hdr"),
        smi_link.struct.field("link").cast(pl.Int64, strict=False).alias("_link"),
        (smi_link.struct.field("val") == "<inactive>").alias("_inactive"), dc_links.alias("_dc"))
    is_hdr = pl.col("_gpu").is_not_null()
    is_smi_row = pl.col("_link").is_not_null()
    df = df.with_columns(
        (is_hdr | ~is_smi_row).cum_sum().alias("_blk"),
        pl.col("_smi_hdr").shift(1).fill_null(False).alias("_after_smi"),
        pl.col("_dc_hdr").shift(1).fill_null(False).alias("_after_dc"),
        pl.col("_gpu").shift(1).alias("_prev_gpu"))
    # nvidia-smi: link rows belong to the block of the GPU line above (or to none)
    smi = df.filter(is_smi_row | (pl.col("_smi_hdr") & pl.col("_blk").is_in(
        df.filter(is_smi_row)["_blk"].unique().implode())))
    hdr_gpu = smi.filter(pl.col("_smi_hdr")).select("_blk", pl.col("_gpu").alias("_bgpu"))
    bad = smi.filter(is_smi_row & pl.col("_inactive")).join(hdr_gpu, on="_blk", how="left").group_by("_blk").agg(
        pl.col("line_no").min(), pl.col("_bgpu").first().alias("gpu"),
        pl.col("_link").sort().cast(pl.Utf8).str.join(",").alias("code"))
    # dcgmi: the link line right under a `gpuId n:` line
    dc = df.filter(pl.col("_dc").is_not_null() & pl.col("_after_dc")).with_columns(
        pl.col("_dc").str.split(" ").list.eval(pl.arg_where(pl.element() == "D")).alias("_down"))
    dc_bad = dc.filter(pl.col("_down").list.len() > 0).select(
        "line_no", pl.col("_prev_gpu").alias("gpu"),
        pl.col("_down").list.eval(pl.element().cast(pl.Utf8)).list.join(",").alias("code"))
    known = pl.concat([smi["line_no"], df.filter(pl.col("_dc_hdr"))["line_no"], dc["line_no"]])
    ev = pl.concat([bad.select("line_no", "gpu", "code"), dc_bad], how="diagonal_relaxed")
    if ev.is_empty():
        return pl.DataFrame(), known
    ev = ev.join(lines.select("line_no", pl.col("body").alias("message")), on="line_no", how="left").with_columns(
        pl.lit("nvlink_status").alias("kind"), pl.lit("error").alias("severity"),
        pl.lit("missing").alias("ts_quality"), pl.col("gpu").cast(pl.Int64))
    return ev, known


# --------------------------------------------------------------------------------------------
# nvidia-smi -q


_value = nvsmi_xml.value_expr


def _query(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    t = pl.col("body")
    kv = t.str.extract_groups(ascii_classes(KV_RE))
    hd = t.str.extract_groups(ascii_classes(HDR_RE))
    headed = lines.select(t.str.contains(ascii_classes(Q_MARKER_RE)).any()).item()
    df = lines.select("line_no", "body").with_columns(
        (t.str.contains(ascii_classes(Q_MARKER_RE)) | (pl.lit(not headed) & t.str.contains(ascii_classes(Q_SECTION_RE)))).alias("_mark"),
        (t.str.strip_chars() == "").alias("_blank"),
        kv.struct.field("key").alias("key"),
        kv.struct.field("val").alias("val"),
        pl.coalesce(kv.struct.field("ind"), hd.struct.field("ind")).str.len_chars().fill_null(0).alias("_ind"),
        t.str.extract(ascii_classes(Q_GPU_RE), 1).alias("_gpu_pci"),
    ).with_columns(
        (pl.col("_ind") // 4).alias("lvl"),
        pl.when(pl.col("key").is_null() & ~pl.col("_blank")).then(t.str.strip_chars()).alias("_hdr"),
    )
    bad = ~(pl.col("_blank") | (pl.col("lvl") > 0) | pl.col("key").is_not_null() | pl.col("_gpu_pci").is_not_null()
            | pl.col("_mark"))
    df = df.with_columns(pl.col("_mark").cum_sum().alias("_region")).with_columns(
        (bad.cast(pl.Int64).cum_sum().over("_region") > 0).alias("_ended"))
    df = df.filter((pl.col("_region") > 0) & ~pl.col("_ended"))
    if df.is_empty():
        return pl.DataFrame(), pl.DataFrame(), pl.Series("line_no", [], dtype=pl.Int64)
    hcols = []
    for lv in (1, 2, 3):
        hcols.append(pl.when(pl.col("_hdr").is_not_null() & (pl.col("lvl") == lv)).then(pl.col("_hdr"))
                     .when(~pl.col("_blank") & (pl.col("lvl") <= lv)).then(pl.lit(""))
                     .otherwise(None).forward_fill().over("_region").fill_null("").alias(f"h{lv}"))
    stamp = pl.when((pl.col("lvl") == 0) & (pl.col("key") == "Timestamp")).then(ctime(pl.col("val"), ctx.tz))
    df = df.with_columns(
        *hcols,
        pl.col("_gpu_pci").forward_fill().over("_region").alias("_pci"),
        (pl.col("_gpu_pci").is_not_null().cum_sum().over("_region") - 1).alias("_gord"),
        stamp.forward_fill().over("_region").alias("ts"),
        pl.when((pl.col("lvl") == 0) & (pl.col("key") == "Timestamp")).then(pl.col("val"))
        .forward_fill().over("_region").alias("ts_raw"),
    )
    key, h1, h2, h3 = pl.col("key"), pl.col("h1"), pl.col("h2"), pl.col("h3")
    in_vol = (h1 == "ECC Errors") & (h2 == "Volatile")
    in_agg = (h1 == "ECC Errors") & (h2 == "Aggregate")
    dbe_key = (key == "DRAM Uncorrectable") | ((h3 == "Double Bit") & (key == "Total"))
    sbe_key = (key == "DRAM Correctable") | ((h3 == "Single Bit") & (key == "Total"))
    in_clock = h1.is_in(CLOCK_SECTIONS)
    field = (
        pl.when(in_vol & dbe_key).then(pl.lit("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"))
        .when(in_vol & sbe_key).then(pl.lit("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"))
        .when(in_agg & dbe_key).then(pl.lit("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"))
        .when(in_agg & sbe_key).then(pl.lit("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"))
        .when((h1 == "Retired Pages") & (key == "Double Bit ECC")).then(pl.lit("DCGM_FI_DEV_RETIRED_DBE"))
        .when((h1 == "Retired Pages") & (key == "Single Bit ECC")).then(pl.lit("DCGM_FI_DEV_RETIRED_SBE"))
        .when((h1 == "Retired Pages") & key.str.starts_with("Pending")).then(pl.lit("DCGM_FI_DEV_RETIRED_PENDING"))
        .when((h1 == "Remapped Rows") & (h2 == "") & (key == "Correctable Error"))
        .then(pl.lit("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"))
        .when((h1 == "Remapped Rows") & (h2 == "") & (key == "Uncorrectable Error"))
        .then(pl.lit("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"))
        .when((h1 == "Remapped Rows") & (h2 == "") & (key == "Pending")).then(pl.lit("DCGM_FI_DEV_ROW_REMAP_PENDING"))
        .when((h1 == "Remapped Rows") & key.str.starts_with("Remapping Failure"))
        .then(pl.lit("DCGM_FI_DEV_ROW_REMAP_FAILURE"))
        .when((h1 == "Temperature") & (key == "GPU Current Temp")).then(pl.lit("DCGM_FI_DEV_GPU_TEMP"))
        .when((h1 == "Temperature") & (key == "Memory Current Temp")).then(pl.lit("DCGM_FI_DEV_MEMORY_TEMP"))
        .when(h1.str.contains("Power Readings") & (key == "Power Draw")).then(pl.lit("DCGM_FI_DEV_POWER_USAGE"))
        .otherwise(pl.concat_str([pl.lit("nvsmi:"), pl.concat_str([h1, h2, h3, key], separator="/")
                                  .str.replace_all("/{2,}", "/").str.strip_prefix("/")]))
    )
    value = _value(pl.col("val"))
    # a value at the top of a GPU section (serial, minor number) is an identity, not a sample
    q = df.with_columns(field.alias("field"), value.alias("value")).filter(
        pl.col("key").is_not_null() & pl.col("value").is_not_null()
        & ((pl.col("lvl") > 1) | ~pl.col("field").str.starts_with("nvsmi:")))
    samples = q.select(
        "line_no", "ts", "ts_raw", pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact"))
        .otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"), pl.col("_gord").alias("gpu"),
        normalize_pci(pl.col("_pci")).alias("pci_bus_id"), "field", "value", pl.col("body").alias("message"))
    f, v = pl.col("field"), pl.col("value")
    clock_slug = pl.col("key").replace_strict(CLOCK_EVENTS, default=None)
    # uncorrectable SRAM (A100+; `Parity` / `SEC-DED` parts in R550+): no classic DCGM total of its own
    sram = (in_vol | in_agg) & key.str.contains(r"^SRAM Uncorrectable(?: Parity| SEC-DED)?$")
    ev = q.with_columns(
        pl.when((f.is_in(["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"]) | sram) & (v > 0))
        .then(pl.lit("gpu_ecc"))
        .when(f.is_in(["DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ROW_REMAP_FAILURE"]) & (v > 0))
        .then(pl.lit("gpu_row_remap"))
        .when(f.is_in(["DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_RETIRED_DBE"]) & (v > 0))
        .then(pl.lit("gpu_retired_pages"))
        .when(in_clock & clock_slug.is_not_null() & (v > 0)).then(pl.lit("gpu_clock_event"))
        .alias("kind"),
    ).filter(pl.col("kind").is_not_null()).select(
        "line_no", "kind", "ts", "ts_raw",
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.col("_gord").alias("gpu"), normalize_pci(pl.col("_pci")).alias("pci_bus_id"),
        pl.when(pl.col("kind") == "gpu_clock_event").then(clock_slug)
        .when(f.str.ends_with("PENDING")).then(pl.lit("pending"))
        .when(f == "DCGM_FI_DEV_ROW_REMAP_FAILURE").then(pl.lit("failure"))
        .otherwise(v.cast(pl.Int64).cast(pl.Utf8)).alias("code"),
        pl.when((f == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") | (sram & in_vol)).then(pl.lit("error"))
        .when(f == "DCGM_FI_DEV_ROW_REMAP_FAILURE").then(pl.lit("critical"))
        .otherwise(pl.lit("warning")).alias("severity"),
        pl.col("body").alias("message"))
    ignored = df.filter(~pl.col("line_no").is_in(q["line_no"].implode()))["line_no"]
    return samples, ev, ignored


# --------------------------------------------------------------------------------------------
# nvidia-smi table


def _table(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    t = pl.col("body")
    tableish = t.str.contains(r"^\s*[+|]")
    df = lines.select("line_no", "body").with_columns(
        tableish.alias("_tab"), (~tableish).cum_sum().alias("_grp"),
        ctime(t.str.strip_chars(), ctx.tz).alias("_stamp"), t.str.strip_chars().alias("_raw"))
    df = df.with_columns(
        pl.col("_stamp").shift(1).alias("_prev_stamp"), pl.col("_raw").shift(1).alias("_prev_raw"))
    smi_groups = df.filter(pl.col("_tab") & t.str.contains(ascii_classes(r"NVIDIA-SMI \d|\|\s*Processes:")))["_grp"].unique()
    df = df.filter(pl.col("_tab") & pl.col("_grp").is_in(smi_groups.implode()))
    if df.is_empty():
        return pl.DataFrame(), pl.DataFrame(), pl.Series("line_no", [], dtype=pl.Int64)
    first = pl.col("line_no") == pl.col("line_no").min().over("_grp")
    df = df.with_columns(
        pl.when(first).then(pl.col("_prev_stamp")).max().over("_grp").alias("ts"),
        pl.when(first & pl.col("_prev_stamp").is_not_null()).then(pl.col("_prev_raw")).max().over("_grp")
        .alias("ts_raw"),
        t.str.extract_groups(ascii_classes(TABLE_ROW1_RE)).alias("_r1"), t.str.extract_groups(ascii_classes(TABLE_ROW2_RE)).alias("_r2"))
    df = df.with_columns(pl.col("_r1").shift(1).alias("_r1_prev"), pl.col("line_no").shift(1).alias("_l1"))
    r1 = df.filter(pl.col("_r1").struct.field("pci").is_not_null())
    r2 = df.filter(pl.col("_r2").struct.field("temp").is_not_null()
                   & pl.col("_r1_prev").struct.field("pci").is_not_null())
    gpu1 = pl.col("_r1").struct.field("idx").cast(pl.Int64, strict=False)
    pci1 = normalize_pci(pl.col("_r1").struct.field("pci"))
    base = ["line_no", "ts", "ts_raw",
            pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
            pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"), pl.col("body").alias("message")]
    s_ecc = r1.select(*base, gpu1.alias("gpu"), pci1.alias("pci_bus_id"),
                      pl.lit("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL").alias("field"),
                      pl.col("_r1").struct.field("ecc").cast(pl.Float64, strict=False).alias("value"))
    r2g = pl.col("_r1_prev").struct.field("idx").cast(pl.Int64, strict=False)
    r2p = normalize_pci(pl.col("_r1_prev").struct.field("pci"))
    num = lambda e: e.str.extract(ascii_classes(r"^(\d+(?:\.\d+)?)"), 1).cast(pl.Float64, strict=False)  # noqa: E731
    s2 = []
    for fname, expr in (("DCGM_FI_DEV_GPU_TEMP", num(pl.col("_r2").struct.field("temp"))),
                        ("DCGM_FI_DEV_POWER_USAGE", num(pl.col("_r2").struct.field("pwr"))),
                        ("DCGM_FI_DEV_FB_USED", num(pl.col("_r2").struct.field("used"))),
                        ("DCGM_FI_DEV_GPU_UTIL", num(pl.col("_r2").struct.field("util")))):
        s2.append(r2.select(*base, r2g.alias("gpu"), r2p.alias("pci_bus_id"), pl.lit(fname).alias("field"),
                            expr.alias("value")))
    samples = pl.concat([s_ecc, *s2]).filter(pl.col("value").is_not_null())
    err1 = r1.filter(t.str.contains("ERR!", literal=True)).select(*base, gpu1.alias("gpu"), pci1.alias("pci_bus_id"))
    err2 = r2.filter(t.str.contains("ERR!", literal=True)).select(*base, r2g.alias("gpu"), r2p.alias("pci_bus_id"))
    lost = pl.concat([err1, err2]).with_columns(pl.lit("gpu_lost").alias("kind"), pl.lit("ERR!").alias("code"),
                                                pl.lit("critical").alias("severity"))
    ecc_v = pl.col("_r1").struct.field("ecc").cast(pl.Int64, strict=False)
    ecc = r1.filter(ecc_v > 0).select(*base, gpu1.alias("gpu"), pci1.alias("pci_bus_id"),
                                      pl.lit("gpu_ecc").alias("kind"), ecc_v.cast(pl.Utf8).alias("code"),
                                      pl.lit("error").alias("severity"))
    ev = pl.concat([lost, ecc], how="diagonal_relaxed")
    taken = pl.concat([r1["line_no"], r2["line_no"]])
    # the `date` line printed just above the table (its time stamp) is understood too
    stamp_lines = df.filter(first & pl.col("_prev_stamp").is_not_null()).select(pl.col("line_no") - 1)["line_no"]
    ignored = pl.concat([df.filter(~pl.col("line_no").is_in(taken.implode()))["line_no"], stamp_lines])
    return samples, ev, ignored


# --------------------------------------------------------------------------------------------
# nvidia-smi dmon


def _dmon(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.Series, list[str]]:
    t = pl.col("body")
    is_hdr = t.str.contains(ascii_classes(DMON_HDR_RE))
    is_units = t.str.contains(ascii_classes(DMON_UNITS_RE))
    is_row = t.str.contains(ascii_classes(DMON_ROW_RE))
    df = lines.select("line_no", "body").with_columns(
        pl.when(is_hdr).then(t).when(~(is_row | is_units)).then(pl.lit("")).otherwise(None)
        .forward_fill().alias("_hdr"), is_row.alias("_row"), is_units.alias("_units"), is_hdr.alias("_ishdr"))
    df = df.filter(pl.col("_hdr").is_not_null() & (pl.col("_hdr") != ""))
    if df.is_empty():
        return pl.DataFrame(), pl.Series("line_no", [], dtype=pl.Int64), []
    rows = df.filter(pl.col("_row"))
    ignored = df.filter(pl.col("_ishdr") | pl.col("_units"))["line_no"]
    parts = []
    for hdr in rows["_hdr"].unique(maintain_order=True).to_list():
        names = hdr.lstrip("#").split()
        sub = rows.filter(pl.col("_hdr") == hdr)
        split = pl.col("body").str.strip_chars().str.replace_all(r"\s+", " ").str.split(" ")
        cols = [split.list.get(i, null_on_oob=True).alias(n) for i, n in enumerate(names)]
        wide = sub.select("line_no", pl.col("body").alias("message"), *cols)
        has_dt = "Date" in names and "Time" in names
        stamp = (pl.concat_str([pl.col("Date"), pl.col("Time")], separator=" ")
                 if has_dt else pl.lit(None, dtype=pl.Utf8))
        metrics = [n for n in names if n not in ("Date", "Time", "gpu")]
        long = wide.with_columns(stamp.alias("ts_raw"), pl.col("gpu").cast(pl.Int64, strict=False).alias("gpu")) \
            .unpivot(index=["line_no", "message", "ts_raw", "gpu"], on=metrics, variable_name="_name",
                     value_name="_raw")
        parts.append(long)
    if not parts:
        return pl.DataFrame(), ignored, []
    long = pl.concat(parts)
    naive = pl.col("ts_raw").str.to_datetime("%Y%m%d %H:%M:%S", strict=False, time_unit="us")
    key = getattr(ctx.tz, "key", "UTC") or "UTC"
    ts = naive.dt.replace_time_zone(key, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC") \
        .cast(UTC_DT)
    samples = long.select(
        "line_no", ts.alias("ts"), "ts_raw",
        pl.when(ts.is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"), "gpu",
        pl.col("_name").replace_strict(DMON_FIELDS, default=pl.concat_str([pl.lit("nvsmi:dmon/"), pl.col("_name")]))
        .alias("field"),
        pl.col("_raw").cast(pl.Float64, strict=False).alias("value"), "message")
    warnings = [] if samples["ts"].is_not_null().any() else ["nvidia-smi dmon without -o DT: sample ts left null"]
    return samples, ignored, warnings


# --------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv


def _qcsv_names(header: str) -> list[str] | None:
    """The property names of a query CSV header (units dropped), or of the `--query-gpu=` list of an
    nvidia-smi command line that prints CSV (QCSV_CMD_RE), or None when the line is neither: at
    least two names, one of them a reading this parser knows."""
    cmd = re.search(QCSV_CMD_RE, header)
    if cmd is not None and re.search(QCSV_CMD_FORMAT_RE, header):
        names = cmd.group("props").split(",")
    elif re.match(QCSV_HDR_RE, header):
        names = [re.sub(r"\s*\[[^\]]*\]$", "", c.strip()) for c in header.split(",")]
    else:
        return None
    known = [n for n in names if n in QCSV_FIELDS or n.split(".", 1)[-1] in QCSV_CLOCK_REASONS
             or n.startswith(("reset_status.", "clocks_event_reasons.", "clocks_throttle_reasons."))]
    return names if len(names) >= 2 and known else None


def _hex(cell: pl.Expr) -> pl.Expr:
    """A `0x...` bit mask cell (`clocks_event_reasons.active`) as an integer; null for anything else."""
    return cell.str.strip_prefix("0x").str.to_integer(base=16, strict=False)


def _run_starts(df: pl.DataFrame, on: pl.Expr, key: str) -> pl.DataFrame:
    """The rows where `on` holds and did not on the previous row of the same `key` (a state that
    lasts many samples is one event, at its first row)."""
    return df.with_columns(on.fill_null(False).alias("_on")).with_columns(
        pl.col("_on").shift(1).over(key).fill_null(False).alias("_was")).filter(pl.col("_on") & ~pl.col("_was"))


def _qcsv(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """Samples and events of query CSV rows: each row under the nearest header above it with as many
    cells (a row of another width is no row of it). Events start where a state starts for a GPU:
    a device error cell (gpu_lost), `reset_status.reset_required` Yes (gpu_lost), an active clock
    event reason (gpu_clock_event), uncorrectable volatile ECC above the last count (gpu_ecc), pages
    pending retirement (gpu_retired_pages)."""
    b = pl.col("body")
    host = line_host(ctx) if "prefix_host" in lines.columns else host_hint(ctx)
    cand = lines.select("line_no", "body", host.alias("_host")).with_columns(
        (b.str.contains(ascii_classes(QCSV_HDR_RE)) | b.str.contains(ascii_classes(QCSV_CMD_RE))).alias("_hdr_like"),
        (b.str.count_matches(",") + 1).alias("_cells"))
    hdr_texts = cand.filter(pl.col("_hdr_like"))["body"].unique(maintain_order=True).to_list()
    headers = {h: n for h in hdr_texts if (n := _qcsv_names(h)) is not None}
    empty = (pl.DataFrame(), pl.DataFrame(), pl.Series("line_no", [], dtype=pl.Int64))
    if not headers:
        return empty
    is_hdr = b.is_in(list(headers))
    width = b.replace_strict(list(headers), [len(n) for n in headers.values()], default=None, return_dtype=pl.UInt32)
    df = cand.with_columns(pl.when(is_hdr).then(b).forward_fill().alias("_h"),
                           pl.when(is_hdr).then(width).forward_fill().alias("_w"), is_hdr.alias("_is_hdr"))
    rows = df.filter(~pl.col("_is_hdr") & pl.col("_h").is_not_null() & (pl.col("_cells") == pl.col("_w")))
    sample_parts, event_parts = [], []
    for hdr, names in headers.items():
        sub = rows.filter(pl.col("_h") == hdr)
        if sub.is_empty():
            continue
        cells = b.str.split(",")
        cols = {f"c{i}": cells.list.get(i, null_on_oob=True).str.strip_chars() for i in range(len(names))}
        w = sub.with_columns(**cols)
        role = {QCSV_IDS[n]: f"c{i}" for i, n in reversed(list(enumerate(names))) if n in QCSV_IDS}
        ids = {r: pl.col(role[r]) if r in role else pl.lit(None, dtype=pl.Utf8) for r in ("ts", "gpu", "pci", "uuid")}
        ts = iso(ids["ts"].str.replace_all("/", "-"), ctx.tz)
        w = w.with_columns(ts.alias("ts"), ids["ts"].alias("ts_raw"), ids["gpu"].cast(pl.Int64, strict=False).alias("gpu"),
                           normalize_pci(ids["pci"]).alias("pci_bus_id"), ids["uuid"].alias("uuid"))
        w = w.with_columns(pl.coalesce(pl.col("gpu").cast(pl.Utf8), pl.col("pci_bus_id"), pl.col("uuid"), pl.lit(""))
                           .alias("_gkey"))
        w = w.with_columns(pl.concat_str([pl.col("_host").fill_null(""), pl.col("_gkey")], separator="|").alias("_key"))
        base = ["line_no", "ts", "ts_raw", pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact"))
                .otherwise(pl.lit("missing")).alias("ts_quality"), pl.col("_host").alias("host"), "gpu", "uuid",
                "pci_bus_id", pl.col("body").alias("message")]
        vals = [(i, n) for i, n in enumerate(names) if n not in QCSV_IDS]
        for i, n in vals:
            c = pl.col(f"c{i}")
            value = pl.when(c.str.starts_with("0x")).then(_hex(c).cast(pl.Float64)).otherwise(_value(c))
            sample_parts.append(w.select(*base, pl.lit(QCSV_FIELDS.get(n, f"nvsmi:query/{n}")).alias("field"),
                                         value.alias("value")).filter(pl.col("value").is_not_null()))
        dev_cells = [pl.col(f"c{i}") for i, _ in vals]
        if dev_cells:
            err = pl.coalesce([pl.when(c.str.strip_chars("[]").is_in(list(QCSV_DEVICE_ERRORS)))
                               .then(c.str.strip_chars("[]")) for c in dev_cells])
            all_unknown = pl.all_horizontal([c == "[Unknown Error]" for c in dev_cells])
            reset = pl.lit(None, dtype=pl.Utf8)
            for i, n in vals:
                if n == "reset_status.reset_required":
                    reset = pl.when(pl.col(f"c{i}") == "Yes").then(pl.lit("GPU requires reset"))
            lost = w.with_columns(pl.coalesce(err, pl.when(all_unknown).then(pl.lit("Unknown Error")), reset)
                                  .alias("code"))
            lost = _run_starts(lost, pl.col("code").is_not_null(), "_key")
            event_parts.append(lost.select(*base, "code", pl.lit("gpu_lost").alias("kind"),
                                           pl.lit("critical").alias("severity")))
        for i, n in vals:
            c, prop = pl.col(f"c{i}"), n.split(".", 1)
            if prop[0] in ("clocks_event_reasons", "clocks_throttle_reasons") and len(prop) == 2:
                if prop[1] in QCSV_CLOCK_REASONS:
                    slugs = [(QCSV_CLOCK_REASONS[prop[1]][0], c == "Active")]
                elif prop[1] == "active":
                    slugs = [(slug, (_hex(c) & bit) != 0) for slug, bit in QCSV_CLOCK_REASONS.values()]
                else:
                    continue
                for slug, on in slugs:
                    ev = _run_starts(w, on, "_key")
                    event_parts.append(ev.select(*base, pl.lit(slug).alias("code"), pl.lit("gpu_clock_event").alias("kind"),
                                                 pl.lit("warning").alias("severity")))
            elif QCSV_FIELDS.get(n) == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":
                v = _value(c)
                ev = w.with_columns(v.alias("_v")).with_columns(
                    pl.col("_v").forward_fill().shift(1).over("_key").fill_null(0).alias("_prev")).filter(
                    pl.col("_v") > pl.col("_prev"))
                event_parts.append(ev.select(*base, pl.col("_v").cast(pl.Int64).cast(pl.Utf8).alias("code"),
                                             pl.lit("gpu_ecc").alias("kind"), pl.lit("error").alias("severity")))
            elif n == "retired_pages.pending":
                ev = _run_starts(w, c == "Yes", "_key")
                event_parts.append(ev.select(*base, pl.lit("pending").alias("code"),
                                             pl.lit("gpu_retired_pages").alias("kind"), pl.lit("warning").alias("severity")))
    samples = pl.concat(sample_parts, how="diagonal_relaxed") if sample_parts else pl.DataFrame()
    event_parts = [e for e in event_parts if not e.is_empty()]
    events = pl.concat(event_parts, how="diagonal_relaxed") if event_parts else pl.DataFrame()
    # the headers, and rows without a reading (all N/A) are understood too
    ignored = pl.concat([df.filter(pl.col("_is_hdr"))["line_no"], rows["line_no"]])
    return samples, events, ignored


# --------------------------------------------------------------------------------------------


def sniff(head: str) -> float:
    if re.search(r"(?m)^=+\s*NVSMI LOG\s*=+\s*$", head):
        return 0.95
    if (xml := nvsmi_xml.sniff(head)) > 0:
        return xml
    if re.search(r"(?m)^\|\s*NVIDIA-SMI \d", head):
        return 0.9
    if re.search(r"(?m)" + DMON_HDR_RE + r"\n#\s*(?:YYYYMMDD\s+HH:MM:SS\s+)?Idx\b", head):
        return 0.9
    if re.search(r"Unable to determine the device handle for|Failed to initialize NVML|" + re.escape(NO_DRIVER), head):
        return 0.8
    if re.search(r"(?m)" + Q_SECTION_RE.removesuffix("$") + r"\n {8}\S.*?\s+:\s", head):
        return 0.8  # a `-q -d` section without the log's header
    first = next((ln for ln in head.splitlines() if ln.strip()), "")
    if re.match(QCSV_HDR_RE, first) and _qcsv_names(first) is not None:
        return 0.85  # a query CSV starts with its header (noheader output carries no names: not sniffed)
    return 0.0


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return _empty()
    warnings: list[str] = []
    b = pl.col("body")
    flags = lines.select(
        (b.str.contains(ascii_classes(Q_MARKER_RE)).any() | b.str.contains(ascii_classes(Q_SECTION_RE)).any()).alias("q"),
        b.str.contains("NVIDIA-SMI", literal=True).any().alias("t"),
        b.str.contains(ascii_classes(DMON_HDR_RE)).any().alias("d"),
    ).row(0, named=True)
    sample_parts, event_parts, ignored_parts = [], [], []
    err = _errors(lines, ctx)
    if not err.is_empty():
        event_parts.append(err)
    if lines.select(b.str.contains(ascii_classes(NVL_ANY_RE)).any()).item():
        e, ig = _nvlink(lines, ctx)
        event_parts.append(e)
        ignored_parts.append(ig)
    if flags["q"]:
        s, e, ig = _query(lines, ctx)
        sample_parts.append(s)
        event_parts.append(e)
        ignored_parts.append(ig)
    if flags["t"]:
        s, e, ig = _table(lines, ctx)
        sample_parts.append(s)
        event_parts.append(e)
        ignored_parts.append(ig)
    x = nvsmi_xml.read(lines, ctx, pl.lit(ctx.host_hint, dtype=pl.Utf8))
    sample_parts.append(x.samples)
    event_parts.append(x.events)
    ignored_parts.append(x.ignored)
    warnings.extend(x.warnings)
    if lines.select((b.str.contains(ascii_classes(QCSV_HDR_RE)) | b.str.contains(ascii_classes(QCSV_CMD_RE))).any()).item():
        s, e, ig = _qcsv(lines, ctx)
        sample_parts.append(s)
        event_parts.append(e)
        ignored_parts.append(ig)
    if flags["d"]:
        s, ig, w = _dmon(lines, ctx)
        sample_parts.append(s)
        ignored_parts.append(ig)
        warnings.extend(w)
    sample_parts = [p for p in sample_parts if not p.is_empty()]
    event_parts = [p for p in event_parts if not p.is_empty()]
    samples = table_frame("dcgm_samples", pl.concat(sample_parts, how="diagonal_relaxed")) \
        if sample_parts else empty_table("dcgm_samples")
    if event_parts:
        ev = events_frame(pl.concat(event_parts, how="diagonal_relaxed"))
        events = ev.with_columns(
            pl.lit(SPEC.name).alias("source"),
            pl.col("host").fill_null(pl.lit(ctx.host_hint, dtype=pl.Utf8)),
            pl.col("ts_quality").fill_null("missing"),
        ).sort("line_no", maintain_order=True)
    else:
        events = empty_events()
    claimed = pl.concat([_ids(samples), _ids(events)]).unique().sort()
    ignored = pl.concat([p.cast(pl.Int64) for p in ignored_parts]).unique() if ignored_parts else \
        pl.Series("line_no", [], dtype=pl.Int64)
    ignored = ignored.filter(~ignored.is_in(claimed.implode())).sort()
    return Extraction(events=events, tables={"dcgm_samples": samples}, claimed=claimed.alias("line_no"),
                      ignored=ignored.alias("line_no"), warnings=warnings)


SPEC = ParserSpec(
    name="nvsmi",
    scope="node",
    description="nvidia-smi: -q reports, the GPU table, dmon, and NVML errors for lost GPUs",
    formats=(
        "nvidia-smi -q (ECC errors, retired pages, remapped rows, clocks event/throttle reasons)",
        "nvidia-smi table",
        "nvidia-smi dmon (optionally -o DT)",
        "nvidia-smi / NVML error lines",
        "NVML agent Xid lines (k8s device plugin, gpud)",
        "Hadoop-AI NodeManager GPU withdrawal lines (ECC code)",
        "nvidia-smi nvlink -s, dcgmi nvlink -s",
        "nvidia-smi -q -x XML (whole or a fragment)",
        "nvidia-smi --query-gpu=... --format=csv (with or without units or header: noheader rows read under the command line that printed them)",
    ),
    kinds=("gpu_lost", "nvml_error", "gpu_ecc", "gpu_row_remap", "gpu_retired_pages", "gpu_clock_event", "xid",
           "gpu_unhealthy", "nvlink_status"),
    tables=("dcgm_samples",),
    trigger=_TRIGGER,
    header=_unnamed(rf"{QCSV_HDR_RE}|{QCSV_CMD_RE}"),
)

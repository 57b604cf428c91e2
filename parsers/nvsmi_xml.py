"""`nvidia-smi -q -x` XML (`<nvidia_smi_log>` ... `<gpu id="00000000:07:00.0">` ...), whole or as a
fragment pasted without its root (an `<ecc_errors>` block), read into what `parsers.nvsmi` makes of
the text `nvidia-smi -q`: `dcgm_samples` under the classic DCGM field name where one exists (else
`nvsmi:xml/<element path>`), and the same events for the same bad states: `gpu_ecc` (uncorrectable
DRAM/SRAM or double-bit count > 0), `gpu_row_remap` (`remapped_row_pending` / `remapped_row_failure`
Yes), `gpu_retired_pages` (pending retirement, or double-bit retired pages), `gpu_clock_event` (an
active HW slowdown / HW thermal / HW power brake / SW thermal reason, under `clocks_throttle_reasons`
of drivers < 535 or `clocks_event_reasons` after). Healthy values (zero counters, `No`, `Not Active`,
temperatures, power, fan, P-state, PCIe replays) are samples, never events.

Element names are those of nvidia-smi's DTD (nvsmi_device_v10..v12.dtd, as installed beside
nvidia-smi; field meanings in `nvidia-smi -q` docs): ecc_errors/{volatile,aggregate}/{sram,dram}_
{correctable,uncorrectable} (A100 and later; `_parity` / `_secded` SRAM parts in R550+), the older
{single,double}_bit/{device_memory,...,total}, retired_pages/{multiple_single_bit_retirement,
double_bit_retirement}/retired_count and pending_retirement (pending_blacklist before R450),
remapped_rows/remapped_row_{corr,unc,pending,failure}, temperature/{gpu_temp,memory_temp},
(gpu_)power_readings/{power_draw,instant_power_draw}, pci/replay_counter, fan_speed,
performance_state.

Safety: read with the standard library's expat (the parser under `xml.etree`; used directly for its
line numbers). A document with an internal DTD subset or any `<!ENTITY` is refused (a warning, its
lines unparsed); nvidia-smi's own `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">` line and
the `<?xml ...?>` declaration are blanked before parsing (external entities are never fetched:
parameter-entity parsing is off, no external-entity handler is set, and a DOCTYPE or entity
declaration reaching the parser stops it). Bounded: a region over MAX_XML_BYTES is not read (real
outputs are a few hundred KiB for 8 GPUs). A document cut short (an excerpt) keeps every value
before the cut, with a warning. The per-element callbacks are Python, which is why the size is capped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.parsers import expat

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import ParseContext, normalize_pci
from parsers.timestamps import ctime

MAX_XML_BYTES = 4 * 1024 * 1024  # of one XML region; larger ones are left unread, with a warning
# the root, the per-GPU element, and the sections of a -q -x report (any one marks a fragment)
MARKER_RE = (r'<nvidia_smi_log\b|<gpu id="|<(?:ecc_errors|ecc_mode|retired_pages|remapped_rows'
             r"|clocks_(?:throttle|event)_reasons|fb_memory_usage|bar1_memory_usage|(?:gpu_)?power_readings"
             r"|pci_bus_id|product_name|performance_state|temperature)>")
TAG_LINE_RE = r"^\s*<"
_UNSAFE = re.compile(r"<!ENTITY|<!DOCTYPE[^>]*\[", re.IGNORECASE)
_BLANKED = re.compile(r"^\s*(?:<\?xml\b[^>]*\?>|<!DOCTYPE\s+nvidia_smi_log\b[^>\[]*>)\s*$", re.IGNORECASE)
_ROOT = "xml_region"

_ECC = {"volatile": "VOL", "aggregate": "AGG"}
FIELDS: dict[str, str] = {
    **{f"ecc_errors/{k}/{leaf}": f"DCGM_FI_DEV_ECC_DBE_{v}_TOTAL"
       for k, v in _ECC.items() for leaf in ("dram_uncorrectable", "double_bit/total")},
    **{f"ecc_errors/{k}/{leaf}": f"DCGM_FI_DEV_ECC_SBE_{v}_TOTAL"
       for k, v in _ECC.items() for leaf in ("dram_correctable", "single_bit/total")},
    "retired_pages/double_bit_retirement/retired_count": "DCGM_FI_DEV_RETIRED_DBE",
    "retired_pages/multiple_single_bit_retirement/retired_count": "DCGM_FI_DEV_RETIRED_SBE",
    "retired_pages/pending_retirement": "DCGM_FI_DEV_RETIRED_PENDING",
    "retired_pages/pending_blacklist": "DCGM_FI_DEV_RETIRED_PENDING",
    "remapped_rows/remapped_row_corr": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "remapped_rows/remapped_row_unc": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "remapped_rows/remapped_row_pending": "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "remapped_rows/remapped_row_failure": "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "temperature/gpu_temp": "DCGM_FI_DEV_GPU_TEMP",
    "temperature/memory_temp": "DCGM_FI_DEV_MEMORY_TEMP",
    "power_readings/power_draw": "DCGM_FI_DEV_POWER_USAGE",
    "gpu_power_readings/power_draw": "DCGM_FI_DEV_POWER_USAGE",
    "gpu_power_readings/instant_power_draw": "DCGM_FI_DEV_POWER_USAGE",
    "pci/replay_counter": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "fan_speed": "DCGM_FI_DEV_FAN_SPEED",
    "performance_state": "DCGM_FI_DEV_PSTATE",
}
# uncorrectable SRAM counts (no classic DCGM total of their own): `nvsmi:xml/...` samples, and events
SRAM_UNCORRECTABLE_RE = r"^ecc_errors/(?:volatile|aggregate)/sram_uncorrectable(?:_parity|_secded)?$"
CLOCK_RE = (r"^clocks_(?:throttle|event)_reasons/clocks_(?:throttle|event)_reason_"
            r"(hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown|sw_thermal_slowdown)$")
CLOCK_SLUGS = {"hw_slowdown": "hw_slowdown", "hw_thermal_slowdown": "hw_thermal",
               "hw_power_brake_slowdown": "hw_power_brake", "sw_thermal_slowdown": "sw_thermal"}


def value_expr(val: pl.Expr) -> pl.Expr:
    """'45 C' / '71.25 W' / '3' / 'Yes' / 'Active' -> float; anything else (N/A) null."""
    v = val.str.strip_chars()
    num = v.str.extract(ascii_classes(r"^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%()/]+)*$"), 1).cast(pl.Float64, strict=False)
    return (pl.when(v.is_in(["Yes", "Active"])).then(pl.lit(1.0))
            .when(v.is_in(["No", "Not Active"])).then(pl.lit(0.0))
            .otherwise(num))


@dataclass
class _Walk:
    """What expat hands over: one row per leaf element (line of its start tag, its path, its text)."""

    line: list[int] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    gpu: list[int | None] = field(default_factory=list)
    pci: list[str | None] = field(default_factory=list)
    stack: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    has_child: list[bool] = field(default_factory=list)
    buf: list[str] = field(default_factory=list)
    gpu_no: int = -1
    gpu_pci: str | None = None
    in_gpu: bool = False

    def start(self, name: str, attrs: dict[str, str], line: int) -> None:
        if self.has_child:
            self.has_child[-1] = True
        if name == "gpu" and "id" in attrs:
            self.gpu_no += 1
            self.gpu_pci = attrs["id"]
            self.in_gpu = True
        self.stack.append(name)
        self.starts.append(line)
        self.has_child.append(False)
        self.buf = []

    def end(self, name: str) -> None:
        line = self.starts.pop()
        leaf = not self.has_child.pop()
        if leaf and name != _ROOT:
            rel = [n for n in self.stack[1:] if n not in ("nvidia_smi_log", "gpu")]
            self.line.append(line)
            self.path.append("/".join(rel))
            self.text.append("".join(self.buf).strip())
            self.gpu.append(self.gpu_no if self.in_gpu else None)
            self.pci.append(self.gpu_pci if self.in_gpu else None)
        if name == "gpu" and self.in_gpu:
            self.in_gpu = False
        self.stack.pop()
        self.buf = []


def _refuse(*_: object) -> None:
    raise ValueError("a DOCTYPE or entity declaration reached the XML parser")


def _walk(text: str) -> tuple[_Walk, str | None]:
    """Parse `text` (a region of lines; line 1 is its first) inside a synthetic root. Returns the
    leaves read and, when the document stops early, why and where."""
    w = _Walk()
    p = expat.ParserCreate()
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    p.StartDoctypeDeclHandler = _refuse
    p.EntityDeclHandler = _refuse
    p.StartElementHandler = lambda n, a: w.start(n, a, p.CurrentLineNumber)
    p.EndElementHandler = w.end
    p.CharacterDataHandler = lambda d: w.buf.append(d)
    p.buffer_text = True
    try:
        p.Parse(f"<{_ROOT}>" + text + f"</{_ROOT}>", True)
    except expat.ExpatError as e:
        open_tags = [n for n in w.stack if n != _ROOT]
        where = f" inside <{open_tags[-1]}>" if open_tags else ""
        return w, f"{expat.ErrorString(e.code)} at line {e.lineno}{where}"
    return w, None


@dataclass
class XmlRead:
    samples: pl.DataFrame
    events: pl.DataFrame
    claimed: pl.Series
    ignored: pl.Series
    warnings: list[str]


def _none() -> XmlRead:
    empty = pl.Series("line_no", [], dtype=pl.Int64)
    return XmlRead(pl.DataFrame(), pl.DataFrame(), empty, empty, [])


def region(lines: pl.DataFrame) -> pl.DataFrame:
    """The lines from the first to the last tag line, if any tag line is one of a -q -x report."""
    b = pl.col("body")
    if not lines.select(b.str.contains(ascii_classes(MARKER_RE)).any()).item():
        return lines.clear()
    tagged = lines.filter(b.str.contains(ascii_classes(TAG_LINE_RE)))["line_no"]
    return lines.filter(pl.col("line_no").is_between(tagged.min(), tagged.max()))


def read(lines: pl.DataFrame, ctx: ParseContext, host: pl.Expr) -> XmlRead:
    """The -q -x region of `lines` (columns line_no, body) read; see the module docstring."""
    reg = region(lines)
    if reg.is_empty():
        return _none()
    nos = reg["line_no"]
    body = reg["body"].to_list()
    out = _none()
    size = sum(len(x) + 1 for x in body)
    if size > MAX_XML_BYTES:
        out.warnings.append(f"nvidia-smi XML of {size} bytes at lines {nos[0]}-{nos[-1]} not read "
                            f"(more than {MAX_XML_BYTES} bytes)")
        return out
    if any(_UNSAFE.search(x) for x in body):
        out.warnings.append(f"XML with an internal DTD or an ENTITY declaration at lines {nos[0]}-{nos[-1]} "
                            "refused (not parsed)")
        return out
    blanked = [i for i, x in enumerate(body) if _BLANKED.match(x)]
    for i in blanked:
        body[i] = ""
    try:
        w, stop = _walk("\n".join(body))
    except ValueError as e:
        out.warnings.append(f"XML at lines {nos[0]}-{nos[-1]} refused: {e}")
        return out
    stopped_at = None
    if stop is not None:
        m = re.search(r"at line (\d+)", stop)
        k = int(m.group(1)) if m else len(body)
        stopped_at = int(nos[min(k, len(nos)) - 1])
        out.warnings.append(f"nvidia-smi XML ends early ({stop.replace(f'line {k}', f'line {stopped_at}')}): "
                            f"{len(w.line)} values before it are read")
    leaves = pl.DataFrame({"_k": w.line, "path": w.path, "val": w.text, "gpu": w.gpu, "_pci": w.pci},
                          schema={"_k": pl.Int64, "path": pl.Utf8, "val": pl.Utf8, "gpu": pl.Int64, "_pci": pl.Utf8})
    leaves = leaves.with_columns(nos.gather(leaves["_k"] - 1).alias("line_no")).join(
        reg.select("line_no", pl.col("body").alias("message")), on="line_no", how="left")
    stamp_raw = leaves.filter(pl.col("path") == "timestamp")["val"]
    ts_raw = pl.lit(stamp_raw[0] if stamp_raw.len() else None, dtype=pl.Utf8)
    path, v = pl.col("path"), pl.col("value")
    field = pl.col("path").replace_strict(FIELDS, default=pl.concat_str([pl.lit("nvsmi:xml/"), pl.col("path")]))
    pstate = pl.col("val").str.extract(ascii_classes(r"^\s*P(\d{1,2})\s*$"), 1).cast(pl.Float64, strict=False)
    value = pl.when(path == "performance_state").then(pstate).otherwise(value_expr(pl.col("val")))
    q = leaves.with_columns(field.alias("field"), value.alias("value"),
                            ctime(ts_raw, ctx.tz).alias("ts"), ts_raw.alias("ts_raw"))
    # values at the top of a GPU element (minor number, serial, ids) are identities, not samples
    q = q.filter(pl.col("value").is_not_null() & (path.str.contains("/") | ~pl.col("field").str.starts_with("nvsmi:")))
    tsq = pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality")
    pci = normalize_pci(pl.col("_pci")).alias("pci_bus_id")
    out.samples = q.select("line_no", "ts", "ts_raw", tsq, host.alias("host"), "gpu", pci, "field", "value",
                           "message")
    f = pl.col("field")
    clock = path.str.extract(ascii_classes(CLOCK_RE), 1).replace_strict(CLOCK_SLUGS, default=None)
    sram = path.str.contains(ascii_classes(SRAM_UNCORRECTABLE_RE))
    dbe = f.is_in(["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"])
    kind = (pl.when((dbe | sram) & (v > 0)).then(pl.lit("gpu_ecc"))
            .when(f.is_in(["DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ROW_REMAP_FAILURE"]) & (v > 0))
            .then(pl.lit("gpu_row_remap"))
            .when(f.is_in(["DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_RETIRED_DBE"]) & (v > 0))
            .then(pl.lit("gpu_retired_pages"))
            .when(clock.is_not_null() & (v > 0)).then(pl.lit("gpu_clock_event")))
    volatile = (f == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") | (sram & path.str.contains("/volatile/"))
    out.events = q.with_columns(kind.alias("kind"), clock.alias("_clock")).filter(pl.col("kind").is_not_null()).select(
        "line_no", "kind", "ts", "ts_raw", tsq, "gpu", pci,
        pl.when(pl.col("kind") == "gpu_clock_event").then(pl.col("_clock"))
        .when(f.str.ends_with("PENDING")).then(pl.lit("pending"))
        .when(f == "DCGM_FI_DEV_ROW_REMAP_FAILURE").then(pl.lit("failure"))
        .otherwise(v.cast(pl.Int64).cast(pl.Utf8)).alias("code"),
        pl.when(volatile).then(pl.lit("error"))
        .when(f == "DCGM_FI_DEV_ROW_REMAP_FAILURE").then(pl.lit("critical"))
        .otherwise(pl.lit("warning")).alias("severity"),
        "message")
    out.claimed = q["line_no"].unique().sort()
    read_upto = reg if stopped_at is None else reg.filter(pl.col("line_no") < stopped_at)
    if stopped_at is not None and stopped_at == int(nos[-1]):
        read_upto = reg  # cut at the end of the excerpt: every line of it was read
    out.ignored = read_upto.filter(~pl.col("line_no").is_in(out.claimed.implode()))["line_no"]
    return out


def sniff(head: str) -> float:
    """0.95 for a -q -x report with its root, 0.9 for a fragment of two or more of its sections."""
    if re.search(r"<nvidia_smi_log\b", head):
        return 0.95
    return 0.9 if len(set(re.findall(MARKER_RE, head))) >= 2 else 0.0

"""BMC System Event Log as `ipmitool sel list` / `sel elist` print it (lib/ipmi_sel.c
`ipmi_sel_print_std_entry`):

    record id (hex) | date | time | <sensor type> <sensor> | <event> | Asserted|Deasserted [| extra]

`sel list` names the sensor by number (`Memory #0x01`), `sel elist` by its SDR id string
(`Memory DIMM_A1`, `Temperature CPU1 Temp`); the date is `%m/%d/%Y` (ipmitool <= 1.8.18) or the C
locale's `%x` (`07/23/24`, later versions, whose time also carries `%Z`); `Pre-Init` (with the raw
seconds as time), `Unspecified` and `S+ ...` (seconds since the BMC's init) have no date: ts null.
The extra field is a threshold event's `Reading 95 > Threshold 90 degrees C` or a memory event's
`CPU 1 DIMM 2`.

Each asserted record whose sensor type and event string (ipmitool's `sensor_specific_event_types`
and the generic threshold / severity strings of `generic_event_types`, include/ipmitool/ipmi_sel.h)
are in RULES becomes a `bmc_sel` event, code = the family (`memory_uncorrectable`, `cpu_ierr`,
`pci_serr`, `temperature_critical`, ...). Every other record (informational: presence, boot
progress, log cleared, clock sync, OS graceful shutdown; and every Deasserted record: the end of
a condition) is parsed and makes no event. Host: the line's wrapper (pdsh) or the file's path.

FreeIPMI's `ipmi-sel` (ipmi-sel/ipmi-sel.c, the default columns, `--output-event-state` adding State)
prints the same records as a table with its own strings:

    ID | Date        | Time     | Name                      | Type         | [State    |] Event
    3  | Dec-09-2024 | 21:12:29 | Power Supply 2 PS2 Status | Power Supply | Critical | Power Supply Failure detected

the date `%b-%d-%Y` (`PostInit` / `Unknown` undated), the sensor type in its own column and the event as
libfreeipmi's short sensor-type and generic strings (libfreeipmi/spec/ipmi-sensor-and-event-code-tables-spec.c:
`Power Supply Failure detected`, `Uncorrectable memory error`, `Machine Check Exception`, `Upper Critical -
going high`, ...), without an Asserted/Deasserted column (a deassertion shows only with `--verbose`:
`Deassertion Event`). FREEIPMI_RULES map those strings onto the same codes.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, events_frame, line_host
from parsers.spec import ParserSpec
from parsers.timestamps import iso

# lib/ipmi_sdr.c sensor_type_desc (longest first, so that `Other FRU` is not read as `Other`)
SENSOR_TYPES = sorted([
    "Temperature", "Voltage", "Current", "Fan", "Physical Security", "Platform Security", "Processor",
    "Power Supply", "Power Unit", "Cooling Device", "Other", "Memory", "Drive Slot / Bay", "POST Memory Resize",
    "System Firmwares", "Event Logging Disabled", "Watchdog1", "System Event", "Critical Interrupt", "Button",
    "Module / Board", "Microcontroller", "Add-in Card", "Chassis", "Chip Set", "Other FRU", "Cable / Interconnect",
    "Terminator", "System Boot Initiated", "Boot Error", "OS Boot", "OS Critical Stop", "Slot / Connector",
    "System ACPI Power State", "Watchdog2", "Platform Alert", "Entity Presence", "Monitor ASIC", "LAN",
    "Management Subsys Health", "Battery", "Session Audit", "Version Change", "FRU State",
], key=lambda s: (-len(s), s))
_DATE = r"\d\d/\d\d/\d{2,4}|Pre-Init|Unspecified|S\+ [\d/]+"
SEL_RE = (r"^\s*(?P<id>[0-9a-fA-F]{1,8})\s*\|\s*(?P<date>" + _DATE + r")\s*\|\s*(?P<time>[^|]*?)\s*\|"
          r"\s*(?P<sensor>[^|]*?)\s*\|\s*(?P<event>[^|]*?)\s*\|\s*(?P<dir>Asserted|Deasserted)\s*"
          r"(?:\|\s*(?P<extra>.*?))?\s*$")
TYPE_RE = r"^(" + "|".join(re.escape(t) for t in SENSOR_TYPES) + r")(?:\s|$)"
# ipmi-sel's date (strftime "%b-%d-%Y", C locale month names: a literal the triage screen can require)
_FI_DATE = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)-\d\d-\d{4}|PostInit|Unknown"
FREEIPMI_RE = (r"^\s*(?P<id>\d{1,6})\s*\|\s*(?P<date>" + _FI_DATE + r")\s*\|\s*(?P<time>[^|]*?)\s*\|"
               r"\s*(?P<name>[^|]*?)\s*\|\s*(?P<type>[^|]*?)\s*\|(?:\s*(?P<state>Nominal|Warning|Critical|N/A)\s*\|)?"
               r"\s*(?P<event>[^|]*?)\s*(?:\|\s*(?P<extra>.*?))?\s*$")
# the column header ipmi-sel prints first (`ID | Date | Time | Name | Type | [State |] Event [| ...]`)
FREEIPMI_HEADER_RE = r"^\s*ID\s*\|\s*Date\s*\|\s*Time\s*\|\s*Name\s*\|\s*Type\s*\|"
_TRIGGER = (r"\|\s*(?:Asserted|Deasserted)\s*(?:\||$)|^\s*\d{1,6}\s*\|\s*(?:" + _FI_DATE + r")\s*\||"
            + FREEIPMI_HEADER_RE)

# (sensor type, event string as ipmitool prints it (regex, whole field), code, severity). Threshold
# and generic-severity events of any sensor type are THRESHOLDS below.
RULES: tuple[tuple[str, str, str, str], ...] = (
    ("Memory", r"Uncorrectable ECC", "memory_uncorrectable", "critical"),
    ("Memory", r"Parity", "memory_parity", "error"),
    ("Memory", r"Memory Scrub Failed", "memory_scrub_failed", "error"),
    ("Memory", r"Memory Device Disabled", "memory_disabled", "error"),
    ("Memory", r"Critical Overtemperature", "memory_overtemperature", "error"),
    ("Memory", r"Correctable ECC logging limit reached", "memory_correctable_limit", "warning"),
    ("Memory", r"Correctable ECC", "memory_correctable", "warning"),
    ("Memory", r"Configuration Error", "memory_config_error", "warning"),
    ("Memory", r"Throttled", "memory_throttled", "warning"),
    ("Processor", r"IERR", "cpu_ierr", "critical"),
    ("Processor", r"Thermal Trip", "cpu_thermal_trip", "critical"),
    ("Processor", r"FRB1/BIST failure|FRB2/Hang in POST failure|FRB3/Processor startup/init failure",
     "cpu_frb_failure", "error"),
    ("Processor", r"SM BIOS Uncorrectable CPU-complex Error", "cpu_uncorrectable", "critical"),
    ("Processor", r"Uncorrectable machine check exception", "cpu_mce_uncorrectable", "critical"),
    ("Processor", r"Correctable machine check error", "cpu_mce_correctable", "warning"),
    ("Processor", r"Configuration Error", "cpu_config_error", "warning"),
    ("Processor", r"Disabled", "cpu_disabled", "error"),
    ("Processor", r"Throttled", "cpu_throttled", "warning"),
    ("Power Supply", r"Failure detected", "psu_failure", "error"),
    ("Power Supply", r"Predictive failure", "psu_predictive_failure", "warning"),
    ("Power Supply", r"Power Supply AC lost|AC lost|AC lost or out-of-range|AC out-of-range, but present", "psu_ac_lost",
     "warning"),
    ("Power Supply", r"Config Error(?:: .*)?", "psu_config_error", "warning"),
    ("Power Supply", r"Power Supply Inactive", "psu_inactive", "warning"),
    ("Power Unit", r"AC lost", "power_ac_lost", "critical"),
    ("Power Unit", r"Soft-power control failure|Failure detected", "power_unit_failure", "error"),
    ("Power Unit", r"Predictive failure", "power_unit_predictive_failure", "warning"),
    ("Power Unit", r"Power off/down|240VA power down|Interlock power down", "power_down", "warning"),
    ("Power Unit", r"Power cycle", "power_cycle", "warning"),
    ("Critical Interrupt", r"PCI PERR", "pci_perr", "error"),
    ("Critical Interrupt", r"PCI SERR", "pci_serr", "critical"),
    ("Critical Interrupt", r"Bus Uncorrectable error", "bus_uncorrectable", "critical"),
    ("Critical Interrupt", r"Bus Fatal Error", "bus_fatal", "critical"),
    ("Critical Interrupt", r"Fatal NMI", "fatal_nmi", "critical"),
    ("Critical Interrupt", r"I/O Channel check NMI", "io_check_nmi", "critical"),
    ("Critical Interrupt", r"Bus Timeout|EISA failsafe timeout", "bus_timeout", "error"),
    ("Critical Interrupt", r"Bus Correctable error", "bus_correctable", "warning"),
    ("Critical Interrupt", r"Bus Degraded", "bus_degraded", "warning"),
    ("Critical Interrupt", r"NMI/Diag Interrupt|Software NMI", "nmi", "warning"),
    ("OS Critical Stop", r"Run-time critical stop", "os_critical_stop", "critical"),
    ("OS Critical Stop", r"Error during system startup", "os_startup_error", "error"),
    ("System Event", r"Undetermined system hardware failure", "system_hardware_failure", "critical"),
    ("Watchdog2", r"Timer expired|Hard reset|Power down|Power cycle", "watchdog_expired", "error"),
    ("Watchdog1", r"BIOS Reset|OS Reset|OS Shut Down|OS Power Down|OS Power Cycle|OS Expired", "watchdog_expired",
     "error"),
    ("Drive Slot / Bay", r"Drive Fault|In Failed Array", "drive_fault", "error"),
    ("Drive Slot / Bay", r"Predictive Failure|In Critical Array|Rebuild Aborted", "drive_predictive_failure",
     "warning"),
    ("Fan", r"Device Absent|Transition to Degraded|Install Error", "fan_fault", "warning"),
)
# FreeIPMI's short strings (libfreeipmi/spec/ipmi-sensor-and-event-code-tables-spec.c, the `_short` tables
# ipmi-sel prints) for the same families: (sensor type column, event (regex, whole field), code, severity)
FREEIPMI_RULES: tuple[tuple[str, str, str, str], ...] = (
    ("Memory", r"Uncorrectable memory error|Uncorrectable ECC/other uncorrectable memory error", "memory_uncorrectable",
     "critical"),
    ("Memory", r"Parity", "memory_parity", "error"),
    ("Memory", r"Memory Scrub Failed(?: \(stuck bit\))?", "memory_scrub_failed", "error"),
    ("Memory", r"Memory Device Disabled", "memory_disabled", "error"),
    ("Memory", r"Critical Overtemperature.*", "memory_overtemperature", "error"),
    ("Memory", r"Correctable (?:ECC/other correctable )?memory error logging limit reached", "memory_correctable_limit",
     "warning"),
    ("Memory", r"Correctable (?:ECC/other correctable )?memory error", "memory_correctable", "warning"),
    ("Memory", r"Configuration error", "memory_config_error", "warning"),
    ("Memory", r"Memory Automatically Throttled", "memory_throttled", "warning"),
    ("Processor", r"IERR", "cpu_ierr", "critical"),
    ("Processor", r"Thermal Trip", "cpu_thermal_trip", "critical"),
    ("Processor", r"FRB1/BIST failure|FRB2/Hang in POST failure.*|FRB3/Processor Startup/Initialization failure.*",
     "cpu_frb_failure", "error"),
    ("Processor", r"SM BIOS .Uncorrectable CPU-complex Error.", "cpu_uncorrectable", "critical"),
    ("Processor", r"Machine Check Exception(?: \(Uncorrectable\))?", "cpu_mce_uncorrectable", "critical"),
    ("Processor", r"Correctable Machine Check Error", "cpu_mce_correctable", "warning"),
    ("Processor", r"Configuration Error", "cpu_config_error", "warning"),
    ("Processor", r"Processor disabled", "cpu_disabled", "error"),
    ("Processor", r"Processor Automatically Throttled.*", "cpu_throttled", "warning"),
    ("Power Supply", r"Power Supply Failure detected", "psu_failure", "error"),
    ("Power Supply", r"Predictive Failure", "psu_predictive_failure", "warning"),
    ("Power Supply", r"Power Supply input lost.*|Power Supply input out-of-range, but present", "psu_ac_lost", "warning"),
    ("Power Supply", r"Configuration error", "psu_config_error", "warning"),
    ("Power Supply", r"Power Supply Inactive.*", "psu_inactive", "warning"),
    ("Power Unit", r"AC lost/Power input lost.*", "power_ac_lost", "critical"),
    ("Power Unit", r"Soft Power Control Failure.*|Power Unit Failure detected", "power_unit_failure", "error"),
    ("Power Unit", r"Predictive Failure", "power_unit_predictive_failure", "warning"),
    ("Power Unit", r"Power Off/Power Down|240VA Power Down|Interlock Power Down", "power_down", "warning"),
    ("Power Unit", r"Power Cycle", "power_cycle", "warning"),
    ("Critical Interrupt", r"PCI PERR", "pci_perr", "error"),
    ("Critical Interrupt", r"PCI SERR", "pci_serr", "critical"),
    ("Critical Interrupt", r"Bus Uncorrectable Error", "bus_uncorrectable", "critical"),
    ("Critical Interrupt", r"Bus Fatal Error", "bus_fatal", "critical"),
    ("Critical Interrupt", r"Fatal NMI.*", "fatal_nmi", "critical"),
    ("Critical Interrupt", r"I/O channel check NMI", "io_check_nmi", "critical"),
    ("Critical Interrupt", r"Bus Timeout|EISA Fail Safe Timeout", "bus_timeout", "error"),
    ("Critical Interrupt", r"Bus Correctable Error", "bus_correctable", "warning"),
    ("Critical Interrupt", r"Bus Degraded.*", "bus_degraded", "warning"),
    ("Critical Interrupt", r"Front Panel NMI/Diagnostic Interrupt|Software NMI", "nmi", "warning"),
    ("OS Critical Stop", r"Run-time Critical Stop.*", "os_critical_stop", "critical"),
    ("OS Critical Stop", r"Critical stop during OS load.*", "os_startup_error", "error"),
    ("System Event", r"Undetermined system hardware failure", "system_hardware_failure", "critical"),
    ("Watchdog 2", r"Hard Reset|Power Down|Power Cycle|Timer expired.*", "watchdog_expired", "error"),
    ("Watchdog 1", r"BIOS Watchdog Reset|OS Watchdog (?:Reset|Shut Down|Power Down|Power Cycle|Expired.*)",
     "watchdog_expired", "error"),
    ("Drive Slot", r"Drive Fault|In Failed Array", "drive_fault", "error"),
    ("Drive Slot", r"Predictive Failure|In Critical Array|Rebuild/Remap Aborted.*", "drive_predictive_failure",
     "warning"),
    ("Fan", r"Device Removed/Device Absent|transition to Degraded|Install Error", "fan_fault", "warning"),
)
# its threshold and severity strings (`Upper Critical - going high`, `transition to Critical from less severe`)
FREEIPMI_THRESHOLDS: tuple[tuple[str, str, str], ...] = (
    (r"Upper Non-recoverable - going high|Lower Non-recoverable - going low|transition to Non-recoverable"
     r"(?: from less severe)?", "nonrecoverable", "critical"),
    (r"Upper Critical - going high|Lower Critical - going low|transition to Critical from (?:less severe|Non-recoverable)",
     "critical", "error"),
    (r"Upper Non-critical - going high|Lower Non-critical - going low|transition to Non-Critical from OK",
     "noncritical", "warning"),
    (r"Predictive Failure asserted", "predictive_failure", "warning"),
    (r"Redundancy Lost|Non-redundant:Insufficient Resources", "redundancy_lost", "warning"),
)

# generic_event_types: threshold crossings (Upper ... going high, Lower ... going low) and the
# generic severity transitions, of any sensor type (code = <sensor type slug>_<level>)
THRESHOLDS: tuple[tuple[str, str, str], ...] = (
    (r"Upper Non-recoverable going high|Lower Non-recoverable going low|Transition to Non-recoverable"
     r"(?: from less severe)?", "nonrecoverable", "critical"),
    (r"Upper Critical going high|Lower Critical going low|Transition to Critical from (?:less severe|Non-recoverable)",
     "critical", "error"),
    (r"Upper Non-critical going high|Lower Non-critical going low|Transition to Non-critical from OK",
     "noncritical", "warning"),
    (r"Predictive Failure Asserted", "predictive_failure", "warning"),
    (r"Redundancy Lost|Non-Redundant: Insufficient Resources", "redundancy_lost", "warning"),
)


def _slug(e: pl.Expr) -> pl.Expr:
    return e.str.to_lowercase().str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")


def _classify(stype: pl.Expr, event: pl.Expr, rules: tuple[tuple[str, str, str, str], ...] = RULES,
              thresholds: tuple[tuple[str, str, str], ...] = THRESHOLDS) -> tuple[pl.Expr, pl.Expr]:
    code: pl.Expr = pl.lit(None, dtype=pl.Utf8)
    sev: pl.Expr = pl.lit(None, dtype=pl.Utf8)
    # first rule wins: build the chain from the last rule up
    for st, ev_re, c, s in reversed(rules):
        hit = (stype == st) & event.str.contains(f"^(?:{ev_re})$")
        code = pl.when(hit).then(pl.lit(c)).otherwise(code)
        sev = pl.when(hit).then(pl.lit(s)).otherwise(sev)
    t_code: pl.Expr = pl.lit(None, dtype=pl.Utf8)
    t_sev: pl.Expr = pl.lit(None, dtype=pl.Utf8)
    for ev_re, level, s in reversed(thresholds):
        hit = event.str.contains(f"^(?:{ev_re})$")
        t_code = pl.when(hit).then(pl.concat_str([_slug(pl.coalesce(stype, pl.lit("sensor"))), pl.lit("_" + level)])) \
            .otherwise(t_code)
        t_sev = pl.when(hit).then(pl.lit(s)).otherwise(t_sev)
    return pl.coalesce(code, t_code), pl.coalesce(sev, t_sev)


def _stamp(date: pl.Expr, time: pl.Expr, ctx: ParseContext) -> tuple[pl.Expr, pl.Expr]:
    """`07/23/2024` or `07/23/24` with `10:12:01[ TZ]` -> ISO text, in the job's zone (the zone
    abbreviation ipmitool adds is not resolvable; UTC/GMT are honoured). Undated forms: null."""
    d = date.str.extract_groups(ascii_classes(r"^(\d\d)/(\d\d)/(\d{2,4})$"))
    t = time.str.extract_groups(ascii_classes(r"^(\d\d:\d\d:\d\d)(?:\s+(?:([A-Z]{2,5})|[+-]\d{2,4}))?$"))
    year = d.struct.field("3")
    year = pl.when(year.str.len_chars() == 2).then(pl.concat_str([pl.lit("20"), year])).otherwise(year)
    raw = pl.when(d.struct.field("1").is_not_null() & t.struct.field("1").is_not_null()).then(
        pl.concat_str([year, pl.lit("-"), d.struct.field("1"), pl.lit("-"), d.struct.field("2"), pl.lit(" "),
                       t.struct.field("1"),
                       pl.when(t.struct.field("2").is_in(["UTC", "GMT"])).then(pl.lit("Z")).otherwise(pl.lit(""))]))
    return iso(raw, ctx.tz), pl.when(raw.is_not_null()).then(pl.concat_str([date, pl.lit(" "), time]))


_MONTHS = {m: f"{i:02d}" for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}


def _stamp_freeipmi(date: pl.Expr, time: pl.Expr, ctx: ParseContext) -> tuple[pl.Expr, pl.Expr]:
    """ipmi-sel's `Dec-09-2024` with `21:12:29` -> ISO text in the job's zone; `PostInit`/`Unknown`: null."""
    d = date.str.extract_groups(ascii_classes(r"^([A-Z][a-z]{2})-(\d\d)-(\d{4})$"))
    month = d.struct.field("1").replace_strict(_MONTHS, default=None, return_dtype=pl.Utf8)
    t = time.str.extract(ascii_classes(r"^(\d\d:\d\d:\d\d)$"), 1)
    raw = pl.when(month.is_not_null() & t.is_not_null()).then(
        pl.concat_str([d.struct.field("3"), pl.lit("-"), month, pl.lit("-"), d.struct.field("2"), pl.lit(" "), t]))
    return iso(raw, ctx.tz), pl.when(raw.is_not_null()).then(pl.concat_str([date, pl.lit(" "), time]))


def sniff(head: str) -> float:
    n = len(re.findall(r"(?m)" + SEL_RE, head)) + len(re.findall(r"(?m)" + FREEIPMI_RE, head))
    return 0.0 if n == 0 else (0.9 if n >= 2 else 0.7)


def _parse_freeipmi(cand: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.Series]:
    """FreeIPMI `ipmi-sel` rows (see the module doc): the records, and the line numbers understood."""
    b = pl.col("body")
    rec = cand.with_columns(b.str.extract_groups(ascii_classes(FREEIPMI_RE)).alias("_f")) \
        .filter(pl.col("_f").struct.field("id").is_not_null())
    header = cand.filter(b.str.contains(ascii_classes(FREEIPMI_HEADER_RE)))["line_no"]
    f = pl.col("_f").struct
    code, sev = _classify(f.field("type"), f.field("event"), FREEIPMI_RULES, FREEIPMI_THRESHOLDS)
    ts, ts_raw = _stamp_freeipmi(f.field("date"), f.field("time"), ctx)
    off = f.field("extra").fill_null("").str.contains("Deassertion Event")
    rec = rec.with_columns(code.alias("code"), sev.alias("severity"), ts.alias("ts"), ts_raw.alias("ts_raw"),
                           (~off).alias("_on"))
    return rec, pl.concat([rec["line_no"], header])


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    cand = lines.filter(b.str.contains(ascii_classes(_TRIGGER)))
    if cand.is_empty():
        return Extraction(events=empty_events())
    g = b.str.extract_groups(ascii_classes(SEL_RE))
    rec = cand.with_columns(g.alias("_g")).filter(pl.col("_g").struct.field("id").is_not_null())
    fi, fi_lines = _parse_freeipmi(cand.filter(~pl.col("line_no").is_in(rec["line_no"].implode())), ctx)
    sensor = pl.col("_g").struct.field("sensor")
    stype = sensor.str.extract(ascii_classes(TYPE_RE), 1)
    event = pl.col("_g").struct.field("event")
    code, sev = _classify(stype, event)
    ts, ts_raw = _stamp(pl.col("_g").struct.field("date"), pl.col("_g").struct.field("time"), ctx)
    rec = rec.with_columns(code.alias("code"), sev.alias("severity"), ts.alias("ts"), ts_raw.alias("ts_raw"),
                           (pl.col("_g").struct.field("dir") == "Asserted").alias("_on"))
    rec = pl.concat([rec.drop("_g"), fi.drop("_f").select(rec.drop("_g").columns)], how="vertical_relaxed")
    ev = rec.filter(pl.col("_on") & pl.col("code").is_not_null()).select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("bmc_sel").alias("kind"), "ts", "ts_raw",
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        line_host(ctx).alias("host"), "severity", "code", b.alias("message"))
    events = events_frame(ev) if not ev.is_empty() else empty_events()
    # every record is understood (parsed); only the faults are events
    return Extraction(events=events, claimed=pl.concat([rec["line_no"], fi_lines]).unique().sort())


SPEC = ParserSpec(
    name="ipmi",
    scope="node",
    description="BMC System Event Log: ipmitool sel list / sel elist, FreeIPMI ipmi-sel (memory, CPU, PSU, PCI, "
                "thermal faults)",
    formats=("ipmitool sel list", "ipmitool sel elist", "FreeIPMI ipmi-sel"),
    kinds=("bmc_sel",),
    batch=True,  # no per-file state: many files' lines may be parsed in one frame
    trigger=_TRIGGER,
)

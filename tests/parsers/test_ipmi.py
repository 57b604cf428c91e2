"""Tests for parsers.ipmi: BMC SEL lines of `ipmitool sel list` / `sel elist`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from forensics.analysis import analyze
from parsers import ipmi
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ipmi"


def run(text: str, **ctx: object) -> Extraction:
    lines = with_body(decode_lines(text.encode()).lines)
    return ipmi.parse(lines, ParseContext(path="node-21/sel.txt", host_hint="node-21", **ctx))  # type: ignore[arg-type]


def rows(ex: Extraction) -> list[tuple]:
    return [(r["line_no"], r["code"], r["severity"]) for r in ex.events.iter_rows(named=True)]


def test_elist_gpu_node_faults_are_events_and_informational_records_parsed_without_one() -> None:
    text = (FIX / "sel_elist_gpu_node.txt").read_text()
    ex = run(text)
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert rows(ex) == [
        (5, "memory_correctable", "warning"), (6, "memory_correctable", "warning"),
        (7, "memory_correctable_limit", "warning"), (8, "temperature_noncritical", "warning"),
        (10, "psu_ac_lost", "warning"), (11, "power_unit_redundancy_lost", "warning"),
        (14, "pci_serr", "critical"), (15, "bus_uncorrectable", "critical"),
        (16, "memory_uncorrectable", "critical"), (17, "cpu_ierr", "critical"),
        (18, "os_critical_stop", "critical"), (20, "watchdog_expired", "error"),
    ]
    # every record is parsed: log cleared, clock sync, boots, deassertions, `Fully Redundant` included
    assert ex.claimed.to_list() == list(range(1, 22))
    assert set(ex.events["host"].to_list()) == {"node-21"}
    assert set(ex.events["source"].to_list()) == {"ipmi"}
    first = ex.events.row(0, named=True)
    assert first["ts"] == datetime(2024, 7, 23, 10, 12, 1, tzinfo=UTC)
    assert first["ts_raw"] == "07/23/2024 10:12:01"
    assert first["message"].endswith("| Correctable ECC | Asserted | CPU 1 DIMM 3")


def test_sel_list_numbered_sensors_pre_init_and_threshold_families() -> None:
    ex = run((FIX / "sel_list_numbered_preinit.txt").read_text())
    assert rows(ex) == [
        (3, "temperature_critical", "error"), (4, "cpu_thermal_trip", "critical"), (5, "power_down", "warning"),
        (6, "fan_critical", "error"), (7, "fan_nonrecoverable", "critical"),
        (8, "voltage_nonrecoverable", "critical"), (9, "power_ac_lost", "critical"), (10, "drive_fault", "error"),
        (11, "pci_perr", "error"), (12, "fatal_nmi", "critical"), (13, "cpu_mce_uncorrectable", "critical"),
        (14, "system_hardware_failure", "critical"),
    ]
    assert ex.claimed.to_list() == list(range(1, 15))  # the Pre-Init records are parsed too


def test_ipmitool_1819_two_digit_year_and_zone() -> None:
    ex = run((FIX / "sel_elist_ipmitool_1819.txt").read_text(), tz=ZoneInfo("Europe/Berlin"))
    assert rows(ex) == [(1, "memory_uncorrectable", "critical"), (2, "os_critical_stop", "critical"),
                        (5, "cpu_mce_correctable", "warning"), (6, "psu_failure", "error")]
    # an explicit UTC is honoured over the job's zone
    assert ex.events["ts"][0] == datetime(2025, 3, 11, 16, 34, 51, tzinfo=UTC)
    assert ex.events["ts_quality"][0] == "exact"


def test_naive_stamp_uses_the_job_zone_and_undated_records_have_no_ts() -> None:
    text = ("   1 | 07/23/2024 | 10:12:01 | Memory #0x01 | Uncorrectable ECC | Asserted\n"
            "   2 |  Pre-Init  |0000000012| Processor #0x0a | IERR | Asserted\n"
            "   3 | Unspecified | Unspecified | Critical Interrupt #0x72 | PCI SERR | Asserted\n")
    ex = run(text, tz=ZoneInfo("America/New_York"))
    assert rows(ex) == [(1, "memory_uncorrectable", "critical"), (2, "cpu_ierr", "critical"),
                        (3, "pci_serr", "critical")]
    assert ex.events["ts"].to_list() == [datetime(2024, 7, 23, 14, 12, 1, tzinfo=UTC), None, None]
    assert ex.events["ts_quality"].to_list() == ["exact", "missing", "missing"]


def test_pdsh_wrapped_sel_takes_the_host_from_the_wrapper() -> None:
    text = ("gpu-a07:    4 | 07/23/2024 | 13:27:56 | Memory DIMM_A1 | Uncorrectable ECC | Asserted\n"
            "gpu-b11:    9 | 07/23/2024 | 13:30:00 | System Event #0x83 | Timestamp Clock Sync | Asserted\n")
    ex = run(text)
    assert [(r["line_no"], r["host"], r["code"]) for r in ex.events.iter_rows(named=True)] == [
        (1, "gpu-a07", "memory_uncorrectable")]
    assert ex.claimed.to_list() == [1, 2]


@pytest.mark.parametrize("line", [
    "| Pass | 2 |",
    "Stopping | Apr 12, 2022 08:51 UTC | Apr 12, 2022 08:54 UTC | Stopping the training job",
    "   1 | Memory | Uncorrectable ECC | Asserted",  # no date or time: not ipmitool's record
    "JobID|State|ExitCode|\n123|FAILED|1:0|",
])
def test_other_pipe_tables_are_not_sel(line: str) -> None:
    assert ipmi.sniff(line) == 0.0
    assert run(line).claimed.is_empty()


def test_batched_frame_keeps_each_files_host() -> None:
    lines = with_body(decode_lines(
        b"   1 | 07/23/2024 | 10:12:01 | Memory #0x01 | Uncorrectable ECC | Asserted\n"
        b"   2 | 07/23/2024 | 10:12:05 | Processor #0x0a | IERR | Asserted\n").lines).with_columns(
        pl.Series("hint_host", ["n1", "n2"]), pl.Series("hint_rank", [None, None], dtype=pl.Int64),
        pl.Series("hint_file", [0, 1]))
    ex = ipmi.parse(lines, ParseContext(path="", batched=True))
    assert ex.events["host"].to_list() == ["n1", "n2"]


def test_end_to_end_sel_uncorrectable_ecc_names_the_node(job_of, tmp_path: Path) -> None:
    job = job_of({
        "node-21/ipmi_sel.txt": (FIX / "sel_elist_gpu_node.txt").read_text(),
        "node-22/ipmi_sel.txt": (FIX / "sel_elist_gpu_node.txt").read_text().split("\n   e |")[0] + "\n",
    })
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "host_hardware"
    assert v["culprit"]["host"] == "node-21"  # node-22 logged only warnings
    assert v["action"] == "exclude_node_and_restart"


FREEIPMI = (
    "ID   | Date        | Time     | Name                 | Type                        | State    | Event\n"
    "1    | Nov-25-2024 | 21:47:47 | Chassis Intru        | Physical Security           | Critical | General Chassis Intrusion\n"
    "2    | Dec-09-2024 | 21:12:29 | PS2 Status           | Power Supply                | Critical | Power Supply Failure detected\n"
    "3    | Dec-10-2024 | 03:01:12 | DIMM_B2              | Memory                      | Critical | Uncorrectable memory error\n"
    "4    | Dec-10-2024 | 03:01:13 | CPU1 Status          | Processor                   | Critical | IERR\n"
    "5    | Dec-10-2024 | 03:01:14 | PCIe Slot 3          | Critical Interrupt          | Critical | Bus Fatal Error\n"
    "6    | Dec-10-2024 | 03:02:00 | CPU1 Temp            | Temperature                 | Critical | Upper Critical - going high\n"
    "7    | Dec-10-2024 | 03:05:30 | DIMM_A1              | Memory                      | Warning  | Correctable memory error\n"
    "8    | PostInit    | 000012   | System Firmware      | System Firmware Progress    | Nominal  | System Firmware Progress\n"
    "9    | Dec-10-2024 | 03:09:01 | OS Watchdog          | Watchdog 2                  | Critical | Hard Reset\n"
)


def test_freeipmi_ipmi_sel_table_maps_its_own_strings_onto_the_sel_families() -> None:
    """FreeIPMI's ipmi-sel (libfreeipmi's short event strings, `%b-%d-%Y` dates, the State column)."""
    ex = run(FREEIPMI)
    assert rows(ex) == [
        (3, "psu_failure", "error"), (4, "memory_uncorrectable", "critical"), (5, "cpu_ierr", "critical"),
        (6, "bus_fatal", "critical"), (7, "temperature_critical", "error"), (8, "memory_correctable", "warning"),
        (10, "watchdog_expired", "error"),
    ]
    assert ex.claimed.to_list() == list(range(1, 11))  # the header, intrusion and boot progress understood too
    first = ex.events.row(0, named=True)
    assert first["ts"] == datetime(2024, 12, 9, 21, 12, 29, tzinfo=UTC) and first["ts_raw"] == "Dec-09-2024 21:12:29"
    assert set(ex.events["host"].to_list()) == {"node-21"}


def test_freeipmi_default_columns_and_a_verbose_deassertion() -> None:
    """Without --output-event-state there is no State column; `--verbose` adds the event direction."""
    ex = run("ID  | Date        | Time     | Name      | Type       | Event\n"
             "12  | Jan-03-2025 | 08:00:01 | CPU2      | Processor  | Machine Check Exception\n"
             "13  | Jan-03-2025 | 08:00:09 | PSU1      | Power Supply | Power Supply input lost (AC/DC) | Assertion Event\n"
             "14  | Jan-03-2025 | 08:10:09 | PSU1      | Power Supply | Power Supply input lost (AC/DC) | Deassertion Event\n")
    assert rows(ex) == [(2, "cpu_mce_uncorrectable", "critical"), (3, "psu_ac_lost", "warning")]
    assert ipmi.sniff("12  | Jan-03-2025 | 08:00:01 | CPU2 | Processor | IERR\n") > 0


def test_end_to_end_freeipmi_cpu_ierr_names_the_node(job_of, tmp_path: Path) -> None:
    job = job_of({"node-07/ipmi-sel.txt": FREEIPMI})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "host_hardware" and v["culprit"]["host"] == "node-07"
    assert v["evidence"][0]["signature"] == "ipmi-memory-uncorrectable"

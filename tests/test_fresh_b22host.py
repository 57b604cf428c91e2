"""The real host-hardware excerpts of fixtures/fresh/b22host (HPE's Integrated Management Log as iLO and `hplog -v`
print it, Supermicro's BMC web event log, and a hung_task-on-NFS trap whose cause is the client's Ethernet driver;
public threads held out from the real samples and from every other fresh set; sources and conclusions in its
README.md), analyzed end to end: the verdict's category is the one the thread concluded, the culprit is the host
the thread names (its folder), the deciding evidence is the line a person would cite, and the restart decision is
the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b22host"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "osm89-hp-iml-uncorrectable-mce-spike-01": (
        "host_hardware", "ipmi-cpu-fatal", {"host": "spike-01"}, ("iml.txt", 1), True),
    "osm1364-supermicro-bmc-uncorrectable-ecc-longma": (
        "host_hardware", "ipmi-memory-uncorrectable", {"host": "longma"}, ("bmc-event-log.txt", 1), True),
    "osm1182-hpe-iml-dimm-failure-uncorrectable-smaug": (
        "host_hardware", "ipmi-memory-uncorrectable", {"host": "smaug"}, ("iml.txt", 1), True),
    "osm1255-supermicro-bmc-ppr-failing-dimm-horntail": (
        "host_hardware", "ipmi-host-warning", {"host": "horntail"}, ("bmc-event-log.txt", 2), None),
    "rpi2482-hung-task-nfs-lan78xx-not-host": (
        "network_fabric", "kernel-hung-task-netfs", {"host": None}, ("dmesg", 14), None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "osm1364-supermicro-bmc-uncorrectable-ecc-longma": (
        "category, signature, evidence and restart right (ipmi-memory-uncorrectable on the BMC web event log's "
        "`Uncorrectable ECC / other uncorrectable memory error @P2-DIMMH2(CPU2) - Assertion`); the culprit stays "
        "null: a folder name without a digit (`longma`) is not read as a host (forensics/discovery.py _HOSTLIKE, "
        "by design, so that `logs/` or `output/` are not hosts) and the line names no host"),
    "osm1182-hpe-iml-dimm-failure-uncorrectable-smaug": (
        "category, signature, evidence and restart right (ipmi-memory-uncorrectable on the IML's `DIMM Failure - "
        "Uncorrectable Memory Error (Processor 2, DIMM 3)`); the culprit stays null: the digitless folder `smaug` "
        "is not read as a host (discovery _HOSTLIKE) and the line names none"),
    "osm1255-supermicro-bmc-ppr-failing-dimm-horntail": (
        "the rows are now read (ipmi: `[BIOS-0057] ... Failing DIMM ... (Correctable memory component found)` is "
        "memory_correctable, context; `[BIOS-0066] ... Post Package Repair success.` makes no event), but the "
        "poster's table header `Date | Error | Details |` stays an error line, so the verdict is unknown; and the "
        "lines themselves show only corrected, repaired DIMM faults: the thread's DIMM failure (with soft lockups "
        "and a CPU CATERR the excerpt does not hold) is its conclusion, not the lines'. Host folder digitless"),
    "rpi2482-hung-task-nfs-lan78xx-not-host": (
        "the trap holds (not host_hardware), culprit right and the deciding line the NFS client frame (dmesg:14 `nfs_file_fsync`), but the category is storage "
        "(kernel-hung-task-netfs: a task blocked inside the NFS client waits on the server): the thread found the "
        "client's own lan78xx Ethernet driver dropping the link (Wi-Fi worked), which the NFS and hung_task lines "
        "cannot tell from a slow or unreachable server"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b22host_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

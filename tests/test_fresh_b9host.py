"""The real host-platform excerpts of fixtures/fresh/b9host (public threads held out from the real samples
and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's
category is the one the thread concluded (`none` for the two healthy logs), the culprit host is the one the
thread names, the deciding evidence is the line a person would cite, and the restart decision is the
thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b9host"

# case -> (category, or "none"; deciding signature; culprit (host, rank) the thread names; (file, line) of the
# deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, tuple[str | None, int | None], tuple[str, int] | None, bool | None]] = {
    "charm2635-mlx5-health-irisc-not-responding-c122-021": (
        "network_fabric", "kernel-ib-nic-fatal", ("c122-021", None), ("dmesg", 2), True),
    "checkipmi66-freeipmi-sel-psu-failure-detected": ("host_hardware", None, (None, None), None, None),
    "deepspeed925-syslogd-wall-soft-lockup-pytest": (
        "host_hardware", "kernel-lockup", ("badass", None), ("console.txt", 2), None),
    "illinoisscicomp66-edac-ce-overflow-dmesg-T-dunkel": ("host_hardware", None, ("dunkel", None), None, True),
    "nixosinfra523-ras-mc-ctl-corrected-mce-healthy": ("none", None, (None, None), None, None),
    "nvmecli151-nvme-admin-timeout-reset-removed": (
        "storage", "kernel-fs-error", (None, None), ("dmesg", 1), True),
    "opbuild594-ipmitool-sel-boot-progress-healthy": ("none", None, (None, None), None, None),
    "opbuild607-ipmitool-sel-processor-ierr-reboot": (
        "host_hardware", "ipmi-cpu-fatal", (None, None), ("sel.txt", 11), None),
    "radiasoft134-edac-sbridge-ce-scrubbing-fnl226b": ("host_hardware", None, ("fnl226b", None), None, True),
    "sonicvs2-console-soft-lockup-panic-hung-tasks": (
        "host_hardware", "kernel-panic", (None, None), ("console.log", 2), None),
}

_CE = ("corrected EDAC errors (kernel-mce-corrected) are context by design, as in fresh/hw osm300: no "
       "interruption; that the DIMM was failing (and, here, {}) is the thread's conclusion, not a failure the "
       "log shows; escalating a repeated context signal of one host to a root needs a rule kind read by "
       "forensics/attribution.py")
XFAIL = {
    "checkipmi66-freeipmi-sel-psu-failure-detected": (
        "FreeIPMI's table is now read (psu_failure), but one supply's failure is context by design "
        "(ipmi.toml ipmi-host-warning: redundant supplies keep the node up); the log shows no node going down"),
    "illinoisscicomp66-edac-ce-overflow-dmesg-T-dunkel": _CE.format("that it did not come back after a reboot"),
    "radiasoft134-edac-sbridge-ce-scrubbing-fnl226b": _CE.format("that the RAM was replaced"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b9host_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, (host, rank), cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, {"host": host, "rank": rank}, cite, restart)


FREEIPMI = ("ID  | Date        | Time     | Name        | Type               | State    | Event\n"
            "1   | Mar-02-2025 | 11:02:03 | CPU2 Status | Processor          | Critical | IERR\n")

# variants of the families the b9host rules generalise to, beyond the posted lines, end to end:
# (file name, text, category, deciding signature, culprit host)
VARIANTS = {
    # FreeIPMI's ipmi-sel: a processor IERR (libfreeipmi's short string), the node named by its folder
    "freeipmi-processor-ierr": ("node-12/ipmi-sel.txt", FREEIPMI, "host_hardware", "ipmi-cpu-fatal", "node-12"),
    # FreeIPMI's full-string memory event (`ipmi-sel --verbose`), direction column
    "freeipmi-uncorrectable-memory": ("node-3/sel.txt", (
        "ID | Date        | Time     | Name    | Type   | Event                                               | Event Direction\n"
        "7  | Mar-02-2025 | 11:02:03 | DIMM_C1 | Memory | Uncorrectable ECC/other uncorrectable memory error | Assertion Event\n"),
        "host_hardware", "ipmi-memory-uncorrectable", "node-3"),
    # journald's ForwardToWall broadcast of a kernel panic, pasted from a terminal: the header names the host
    "journald-wall-panic": ("console.txt", (
        "Broadcast message from systemd-journald@gpu-a17 (Fri 2022-05-06 09:51:02 UTC):\n\n"
        "kernel[304]: [  224.240838] Kernel panic - not syncing: Fatal exception in interrupt\n"),
        "host_hardware", "kernel-panic", "gpu-a17"),
    # rsyslog's wall format of a hard lockup
    "rsyslog-wall-hard-lockup": ("wall.txt", (
        "Message from syslogd@dgx-04 at Jun  9 02:11:40 ...\n"
        " kernel:[812345.123456] NMI watchdog: Watchdog detected hard LOCKUP on cpu 17\n"),
        "host_hardware", "kernel-lockup", "dgx-04"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants(variant: str, tmp_path: Path, job_of) -> None:
    name, text, category, signature, host = VARIANTS[variant]
    v = analyze(job_of({name: text}), tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category, v["summary"]
    assert v["evidence"][0]["signature"] == signature
    assert v["culprit"]["host"] == host, v["summary"]

"""The real communication-layer / hardware / driver excerpts of fixtures/fresh/b5sys (public threads
held out from the real samples and from every other fresh set; sources and conclusions in its
README.md), analyzed end to end: the verdict's kind and category are the ones the thread concluded
(`none` for the two logs where nothing failed), the culprit GPU is the one the thread names, the
deciding evidence is the line a person would cite, and the restart decision is the analyzer's
documented rule (where it differs from the thread's answer, RESTART_DISAGREES says why)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b5sys"

# case -> (category, or "none" for no interruption; deciding signature; culprit PCI bus id the thread
# names; (file, line) of the deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, str | None, tuple[str, int] | None, bool | None]] = {
    "dcgm55-dcgmi-diag-r3-deployment-pass": ("none", None, None, None, None),
    "gpuoperator610-journal-zh-fabricmanager-nothing-to-do": ("none", None, None, None, None),
    "mscclpp493-ibstat-port-down-disabled": ("nccl_config", None, None, ("ibstat.txt", 27), False),
    "nccl1612-bootstrap-closed-before-magic-port-scan": ("framework_bug", None, None, ("nccl.log", 1), True),
    "nccl1664-netibp-status12-vendor129-headerless": (
        "network_fabric", "nccl-ib-retry-exceeded", None, ("nccl.log", 1), None),
    "nccl1698-ib-status12-vendor129-intermittent": (
        "network_fabric", "nccl-ib-retry-exceeded", None, ("all_reduce_perf.log", 1), True),
    "nccl229-ofi-no-optimal-provider-quoted": ("nccl_config", None, None, ("nccl.log", 1), False),
    "ofi203-register-mr-rc22-old-efa-installer": ("framework_bug", None, None, ("train.log", 1), False),
    "ogkm446-dmesg-T-xid119-gsp-rpc-timeout": (
        "gpu_driver_firmware", "xid-119", "0000:61:00", ("dmesg.log", 1), True),
    "owod81-nvidia-smi-gpu-is-lost": ("gpu_lost", "nvsmi-gpu-lost", "0000:02:00", ("nvidia-smi.txt", 1), None),
}

# cases the analyzer does not get right at the first look (main 703497c); the reason is what it does
XFAIL = {
    "gpuoperator610-journal-zh-fabricmanager-nothing-to-do": (
        "fabric-manager-failed reads nv-fabricmanager's NV_WARN_NOTHING_TO_DO exit as an NVLink fault; on a "
        "node without NVSwitch that exit means there is nothing to manage"),
    "mscclpp493-ibstat-port-down-disabled": (
        "ibstat alone shows a Down/Disabled Ethernet port; that the job picked that NIC is in no log, so no "
        "rule over ibstat can name a configuration fault (needs a job log that names the NIC)"),
    "nccl1612-bootstrap-closed-before-magic-port-scan": (
        "a connection closed before the bootstrap magic prints the same socketProgress line as a dead peer; "
        "the log has no other line that says a port scan (not the peer) closed it"),
    "nccl229-ofi-no-optimal-provider-quoted": (
        "aws-ofi-nccl's provider-selection failure is read as an nccl_ib_error with no signature"),
    "ofi203-register-mr-rc22-old-efa-installer": (
        "aws-ofi-nccl's memory-registration failure (RC -22) is read as an nccl_ib_error with no signature"),
}

# the thread's restart answer against the analyzer's documented rule (precedence.toml [restart]):
# asserted as the analyzer decides, so that a change of either shows here
RESTART_DISAGREES = {
    "ogkm446-dmesg-T-xid119-gsp-rpc-timeout": (
        "the thread's fix is a driver upgrade (525.105.17; the GSP RPC timeout recurs on the old driver), "
        "but a driver/firmware Xid is exclude-node-and-restart by the rule"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(reason=XFAIL[c], strict=True)) if c in XFAIL else c
    for c in sorted(CASES)
])
def test_fresh_b5sys_verdict(case: str, tmp_path: Path) -> None:
    category, signature, pci, cite, restart = CASES[case]
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    if category == "none":
        assert (v["kind"], v["action"], v["culprit"]["host"]) == ("none", "none", None)
        return
    assert v["category"] == category
    if signature is not None:
        assert v["evidence"][0]["signature"] == signature
    assert cite is not None and (Path(v["evidence"][0]["path"]).name, v["evidence"][0]["line"]) == cite
    if pci is not None:
        assert v["culprit"]["pci_bus_id"] == pci
    if restart is not None:
        assert v["auto_recoverable"] is restart, RESTART_DISAGREES.get(case, "")

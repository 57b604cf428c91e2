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
    "nccl229-ofi-no-optimal-provider-quoted": (
        "nccl_config", "nccl-ofi-plugin-init-failed", None, ("nccl.log", 1), False),
    "ofi203-register-mr-rc22-old-efa-installer": (
        "framework_bug", "nccl-ofi-register-memory-einval", None, ("train.log", 1), False),
    "ogkm446-dmesg-T-xid119-gsp-rpc-timeout": (
        "gpu_driver_firmware", "xid-119", "0000:61:00", ("dmesg.log", 1), True),
    "owod81-nvidia-smi-gpu-is-lost": ("gpu_lost", "nvsmi-gpu-lost", "0000:02:00", ("nvidia-smi.txt", 1), None),
}

# cases the analyzer still does not get right; the reason is what it does
XFAIL = {
    "mscclpp493-ibstat-port-down-disabled": (
        "ibstat alone shows a Down/Disabled Ethernet port; that the job picked that NIC is in no log, so no "
        "rule over ibstat can name a configuration fault (needs a job log that names the NIC)"),
    "nccl1612-bootstrap-closed-before-magic-port-scan": (
        "a connection closed before the bootstrap magic prints the same socketProgress line as a dead peer; "
        "the log has no other line that says a port scan (not the peer) closed it"),
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


@pytest.mark.fresh_cases
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


def _verdict(tmp_path: Path, files: dict[str, str]) -> dict:
    job = tmp_path / "job"
    for name, text in files.items():
        (job / name).parent.mkdir(parents=True, exist_ok=True)
        (job / name).write_text(text)
    return analyze(job, tmp_path / "out", html=False).report["verdict"]


# aws-ofi-nccl's plugin/provider initialisation failures beyond the nccl229 sample, each in the
# wrapper it was posted in: `NCCL_OFI_WARN("Couldn't find any optimal provider")` (github:aws/aws-ofi-nccl
# b8628aa5~1 src/nccl_ofi_net.c:425) as the plugin's own test binary prints it behind a pdsh-style host
# prefix (aws/aws-ofi-nccl#67); `NCCL_OFI_WARN(PACKAGE_NAME " initialization failed")`
# (src/nccl_ofi_net.cpp:418) behind Ray's `(RayTrainWorker pid=N, ip=...)` prefix
# (awslabs/awsome-distributed-ai#386); `NCCL_OFI_WARN("Only EFA provider is supported")`
# (8f8d80cc src/nccl_ofi_net.c:988) under an mpirun `[1,0]<stdout>:` tag (aws/deep-learning-containers#2675)
OFI_INIT_VARIANTS = {
    "pdsh-old-test-binary": (
        "10.3.35.83: INFO: Function: ofi_init Line: 1076: NET/OFI Running on P4d platform, Setting NCCL_TOPO_FILE "
        "environment variable to /home/deepspeed/aws-ofi-nccl/install/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml\n"
        "10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider\n"
        "10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2\n"),
    "ray-worker-plugin-init": (
        "(RayTrainWorker pid=954, ip=10.67.132.202) ini-worker-ray-worker-p5:954:3133 [6] nccl_net_ofi_create_plugin:1067 "
        "NCCL WARN NET/OFI aws-ofi-nccl initialization failed\n"
        "(RayTrainWorker pid=954, ip=10.67.132.202) ini-worker-ray-worker-p5:954:3133 [6] NCCL INFO net.cc:56 -> 2\n"
        "(RayTrainWorker pid=954, ip=10.67.132.202) ini-worker-ray-worker-p5:954:3133 [6] NCCL INFO NET/IB : No device found.\n"),
    "mpirun-only-efa": (
        "[1,0]<stdout>:algo-1:462:532 [0] ofi_init:988 NCCL WARN NET/OFI Only EFA provider is supported\n"
        "[1,0]<stdout>:algo-1:462:532 [0] NCCL INFO NET/IB : No device found.\n"),
}


@pytest.mark.parametrize("variant", sorted(OFI_INIT_VARIANTS))
def test_ofi_plugin_init_family(variant: str, tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"train.log": OFI_INIT_VARIANTS[variant]})
    assert (v["category"], v["evidence"][0]["signature"]) == ("nccl_config", "nccl-ofi-plugin-init-failed")


# aws-ofi-nccl's memory-registration failures by errno: `NCCL_OFI_WARN("Unable to register memory
# (type = %d) for device %d. RC: %d, Error: %s")` (src/nccl_ofi_sendrecv.cpp:582) with RC -22 from the
# rail-less `register_mr_buffers:544` of aws/aws-ofi-nccl#584 (same answer as #203: the Libfabric of EFA
# installers before 1.29 with NCCL 2.19+), and `NCCL_OFI_WARN("CM: Unable to register memory. RC: %d,
# Error: %s")` (src/cm/nccl_ofi_cm_resources.cpp:242, in endpoint::reg_mr; the macro prints
# __PRETTY_FUNCTION__:__LINE__, include/nccl_ofi_log.h:19) with RC -12, the locked-memory limit
OFI_REGISTER_VARIANTS = {
    "register-mr-buffers-einval": (
        "ip-172-31-40-103:36870:36990 [0] register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory "
        "(type = 2) for device 0. RC: -22, Error: Invalid argument\n",
        "framework_bug", "nccl-ofi-register-memory-einval"),
    "cm-register-enomem": (
        "node-3:4411:4490 [2] int nccl_ofi_cm::endpoint::reg_mr(void*, void*, size_t, void**):242 NCCL WARN "
        "NET/OFI CM: Unable to register memory. RC: -12, "
        "Error: Cannot allocate memory\n",
        "nccl_config", "nccl-ofi-register-memory-limit"),
}


@pytest.mark.parametrize("variant", sorted(OFI_REGISTER_VARIANTS))
def test_ofi_register_memory_family(variant: str, tmp_path: Path) -> None:
    text, category, signature = OFI_REGISTER_VARIANTS[variant]
    v = _verdict(tmp_path, {"train.log": text})
    assert (v["category"], v["evidence"][0]["signature"]) == (category, signature)


# Fabric Manager's "nothing to manage" exit and its unit-state lines are not an NVLink fault beside a
# job that ran (the start script's wording, data-infra/cube-studio#29, on a 2 x 4090 node), while
# FM's own failure line still is (the FM user guide's "fabric manager failed to initialize").
def test_fabric_manager_nothing_to_do_is_not_a_fault(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {
        "ubuntu2404/syslog": (
            "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4753]: Detected Pre-NVL5 system\n"
            "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4756]: request to query NVSwitch device "
            "information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n"
            "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4753]: \"/usr/bin/nv-fabricmanager -c "
            "/usr/share/nvidia/nvswitch/fabricmanager.cfg\" failed! Exit code: 1\n"
            "Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Control process exited, "
            "code=exited, status=1/FAILURE\n")})
    assert v["category"] != "nvlink"


def test_fabric_manager_own_failure_is_still_nvlink(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {
        "fm.log": (
            "[Jan 03 2025 10:00:01] [INFO] [tid 2231] Fabric Manager version 550.90.07 is running with the "
            "following configuration options\n"
            "[Jan 03 2025 10:00:02] [ERROR] [tid 2231] fabric manager failed to initialize: detected driver "
            "version mismatch\n"),
        "node/systemd.log": "nvidia-fabricmanager.service: Failed with result 'exit-code'.\n"})
    assert (v["category"], v["evidence"][0]["signature"]) == ("nvlink", "fabric-manager-failed")

"""The real system-side excerpts of fixtures/fresh/b6sys (fabric, NVLink, driver, storage, hangs; public
threads held out from the real samples and from every other fresh set; sources and conclusions in its
README.md), analyzed end to end: the verdict's kind and category are the ones the thread concluded
(`none` for the two logs where nothing failed), the culprit GPU is the one the thread names, the deciding
evidence is the line a person would cite, and the restart decision is the analyzer's documented rule
(where it differs from the thread's answer, RESTART_DISAGREES says why). Below the cases, the message
families the batch's misses were fixed for, each with variants beyond the posted lines."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b6sys"

# case -> (category, or "none" for no interruption; deciding signature; culprit PCI bus id the thread
# names; (file, line) of the deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, str | None, tuple[str, int] | None, bool | None]] = {
    "pytorch177472-nvls-multicast-bind-cuda401-fabric-manager-ci": (
        "nvlink", "nccl-nvls-bind-failed", None, ("test.log", 4), True),
    "vllm40652-talosctl-kern-xid74-nvlink-then-gsp-timeout-a100": (
        "nvlink", "xid-74", "0000:48:00", ("talosctl-dmesg.log", 3), None),
    "returnn1829-streamwriter-write-failed-transient-shared-fs": (
        "storage", "pt-checkpoint-write-failed", None, ("train.log", 6), True),
    "io500dev63-ior-open64-enospc-lustre-mdt-inodes": ("storage", "pt-storage-full", None, ("io500.log", 2), False),
    "jade14-dmesg-T-lustre-lnet-o2ib-timeouts-mdt-ping-failed": (
        "storage", "kernel-lustre-error", None, ("dmesg.log", 8), None),
    "megatronbridge2053-b300-watchdog-seqnum1-coalesced-first-iteration": (
        "comm_hang_unknown", "pt-watchdog-timeout", None, ("rank218.log", 1), None),
    "pytorch81628-nccl-ib-error12-vendor129-old-wording-title": (
        "network_fabric", "nccl-ib-retry-exceeded", None, ("nccl.log", 1), None),
    "ofi663-efa-av-insert-failed-security-group-egress": (
        "nccl_config", "nccl-result-internal-error", None, ("train.log", 1), False),
    "dcgm149-exporter-nvlink-prof-bytes-zero-a100-healthy": ("none", None, None, None, None),
    "talospkgs792-talosctl-kern-amdgpu-loaded-healthy": ("none", None, None, None, None),
}

# cases the analyzer still does not get right; the reason is what it does (none after this batch)
XFAIL: dict[str, str] = {}

# the thread's restart answer against the analyzer's documented rule (precedence.toml [restart])
RESTART_DISAGREES: dict[str, str] = {}

KINDS = {"comm_hang_unknown": "hang"}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b6sys_verdict(case: str, tmp_path: Path) -> None:
    category, signature, pci, cite, restart = CASES[case]
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    if category == "none":
        assert (v["kind"], v["action"], v["culprit"]["host"]) == ("none", "none", None)
        return
    assert (v["kind"], v["category"]) == (KINDS.get(category, "crash"), category)
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
    return analyze(job, tmp_path / "out", html=False).report


# NCCL's NVLS bind WARN (src/transport/nvls.cc: "Failed to bind NVLink SHARP (NVLS) Multicast memory of
# size %zu[ at MC group %llx offset %zu] : CUDA error %d '%s'.\nThis is usually caused by a system or
# configuration error in the Fabric Manager or NVSwitches.\nDisable NVLS ...") in the places it is read:
# NCCL's own WARN line, PyTorch's `Last error:` relay behind a `[rankN]: ` prefix (2.29's wording with
# the MC group), and vLLM's RuntimeError relay where only NCCL's hint line survives the excerpt
NVLS_VARIANTS = {
    "nccl-warn-line": (
        "gpu-a:3310:3402 [2] transport/nvls.cc:379 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory "
        "of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'.\n"),
    "pytorch-rank-relay-mc-group": (
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.cpp:93, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.29.7\n"
        "[rank3]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank3]: Last error:\n"
        "[rank3]: Failed to bind NVLink SHARP (NVLS) Multicast memory of size 4194304 at MC group 7f3a12 offset 0 "
        ": CUDA error 1 'invalid argument'.\n"
        "[rank3]: This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.\n"),
    "vllm-hint-line-only": (
        "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
        "This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.\n"
        "Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.\n"),
}


@pytest.mark.parametrize("variant", sorted(NVLS_VARIANTS))
def test_nvls_bind_family_is_nvlink(variant: str, tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"train.log": NVLS_VARIANTS[variant]})["verdict"]
    assert (v["category"], v["evidence"][0]["signature"]) == ("nvlink", "nccl-nvls-bind-failed")


def test_plain_cuda_401_is_still_a_cuda_error(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"train.log": "RuntimeError: CUDA error: the operation cannot be performed in the "
                                         "present state\n"})["verdict"]
    assert v["category"] == "cuda_error"


# talosctl dmesg (Talos machined's Dmesg service, internal/app/machined/internal/server/v1alpha1/
# v1alpha1_server.go: `"%s: %7s: [%s]: %s"` of facility, priority right-aligned to 7, RFC3339Nano time,
# message; talosctl prepends `<node>: `): priorities of every width, Go's RFC3339Nano with its trailing
# zeros dropped (8 digits, none), an offset, and a line without the node prefix
TALOS_XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."


@pytest.mark.parametrize("head,stamp,host", [
    ("10.5.0.7: kern:     err: [2026-04-22T21:30:51.52643656Z]: ", "2026-04-22T21:30:51.526436", "10.5.0.7"),
    ("gpu-node-3: kern: warning: [2026-04-22T21:30:51Z]: ", "2026-04-22T21:30:51", "gpu-node-3"),
    ("talos-w1.lab: kern:    crit: [2026-04-22T23:30:51.1+02:00]: ", "2026-04-22T21:30:51.100000", "talos-w1.lab"),
    ("kern:    info: [2026-04-22T21:30:51.000000001Z]: ", "2026-04-22T21:30:51", None),
])
def test_talosctl_dmesg_lines_are_kernel_lines(head: str, stamp: str, host: str | None, tmp_path: Path) -> None:
    rep = _verdict(tmp_path, {"talos.log": head + TALOS_XID79 + "\n"})
    v = rep["verdict"]
    assert (v["category"], v["evidence"][0]["signature"], v["culprit"]["pci_bus_id"]) == (
        "gpu_lost", "xid-79", "0000:3b:00")
    assert v["culprit"]["host"] == host
    assert (v["evidence"][0]["time"] or "").replace(" ", "T").startswith(stamp)


# a kernel log whose every line is driver chatter (no boot line, no event) is still a kernel log read:
# no interruption, not "no recognizable log content"; the same for talosctl, plain dmesg and dmesg -T
@pytest.mark.parametrize("text", [
    "node-1: kern:    info: [2023-08-22T01:37:21.493402442Z]: ACPI: bus type drm_connector registered\n"
    "node-1: kern:    info: [2023-08-22T01:37:21.493519442Z]: [drm] amdgpu kernel modesetting enabled.\n",
    "[    2.493402] ACPI: bus type drm_connector registered\n[    2.493519] [drm] amdgpu kernel modesetting enabled.\n",
    "[Tue Aug 22 01:37:21 2023] ACPI: bus type drm_connector registered\n",
])
def test_chatter_only_kernel_log_is_no_interruption(text: str, tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"dmesg.log": text})["verdict"]
    assert (v["kind"], v["action"]) == ("none", "none")


# nv-hostengine's module-load failures (github:NVIDIA/DCGM modules/DcgmModule.h SafeWrapper,
# dcgmlib/src/DcgmHostEngineHandler.cpp LoadModule, modules/sysmon, the NvSwitch and profiling modules)
# are missing telemetry, not a fault: beside a healthy exporter scrape they leave no interruption
HOSTENGINE = (
    "2024-02-22 13:03:43.997 ERROR [4042437:4042440] [[Profiling]] DcgmModuleProfiling failed to initialize. See "
    "the logs. [/workspaces/dcgm-rel_dcgm_3_1-postmerge@2/dcgm_private/modules/profiling/DcgmModuleProfiling.cpp:502]"
    " [DcgmNs::Modules::Profiling::DcgmModuleProfiling::DcgmModuleProfiling]\n"
    "2024-02-22 13:03:43.997 ERROR [4042437:4042440] [[Profiling]] A runtime exception occured when creating module. "
    "Ex: DcgmModuleProfiling failed to initialize. See the logs. [/workspaces/dcgm-rel_dcgm_3_1-postmerge@2/modules/"
    "DcgmModule.h:146] [{anonymous}::SafeWrapper]\n"
    "2024-02-22 13:03:43.997 ERROR [4042437:4042440] Failed to load module 8 [/workspaces/dcgm-rel_dcgm_3_1-postmerge@2"
    "/dcgmlib/src/DcgmHostEngineHandler.cpp:1734] [DcgmHostEngineHandler::LoadModule]\n"
    "2024-02-22 13:04:13.101 ERROR [4042437:4042452] [[NvSwitch]] Not attached to NvSwitches. Aborting [/workspaces/"
    "dcgm-rel_dcgm_3_1-postmerge@2/modules/nvswitch/DcgmNvSwitchManager.cpp:1212] [DcgmNvSwitchManager::ReadNvSwitchStatusAllSwitches]\n")


SCRAPE = ('# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n'
          'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-715daa1d-db6f-9e69-ab48-190158bd5360",device="nvidia0",'
          'modelName="NVIDIA A100-SXM4-40GB",Hostname="axa"} 97\n')


def test_hostengine_module_load_errors_are_not_a_fault(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"nv-hostengine.log": HOSTENGINE, "metrics.txt": SCRAPE})["verdict"]
    assert (v["kind"], v["action"]) == ("none", "none")


def test_hostengine_errors_do_not_hide_a_real_fault(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"nv-hostengine.log": HOSTENGINE,
                            "node/dmesg.log": "[ 1843.3] NVRM: Xid (PCI:0000:b3:00): 79, pid=1, GPU has fallen off "
                                              "the bus.\n"})["verdict"]
    assert (v["category"], v["culprit"]["pci_bus_id"]) == ("gpu_lost", "0000:b3:00")

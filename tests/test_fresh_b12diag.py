"""The real GPU health-diagnostic excerpts of fixtures/fresh/b12diag (dcgmi diag tables and JSON, dcgmi dmon and
health, nvidia-smi -q / device-handle errors, gpu_burn, gpu-fryer, NVSentinel's preflight log; public threads held
out from every other fresh set, sources and conclusions in its README.md), analyzed end to end: the verdict's
category is the one the thread concluded (`none` for the three healthy logs), the culprit GPU is the one the thread
names, the deciding evidence is the line a person would cite, and the restart decision is the thread's answer
where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b12diag"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "dcgm263-dmon-xid120-health-json-healthy-gpu1-reset": (
        "gpu_driver_firmware", "xid-120", {"gpu": 1}, ("dcgmi-dmon.txt", 4), True),
    "dcgm122-diag-json-gflops-below-threshold-gpu5": (
        "straggler_hardware", "dcgm-diag-perf-below-floor", {"gpu": 5}, ("dcgmi-diag-r3.json", 12), None),
    "godcgm52-diag-r2-wrapped-gpu0-ctx-busy-unavailable": (
        "gpu_other_hardware", "dcgm-diag-hardware-fail", {"gpu": 0}, ("dcgmi-diag-r2-g0.txt", 19), None),
    "gpud80-nvsmi-q-remapped-rows-uncorrectable-pending": ("gpu_memory", None, {"gpu": None}, None, None),
    "instanceloc20-nvsmi-device-handle-unknown-error-after-training": (
        "gpu_lost", "nvsmi-gpu-lost", {"pci_bus_id": "0000:81:00"}, ("nvidia-smi.txt", 1), None),
    "marian251-nvsmi-gpu-is-lost-reboot": (
        "gpu_lost", "nvsmi-gpu-lost", {"pci_bus_id": "0000:03:00"}, ("nvidia-smi.txt", 1), False),
    "gpuburn101-ptx-jit-compilation-failed-died-gt730": (
        "framework_bug", "cuda-arch-toolchain", {"gpu": None}, ("gpu_burn.log", 6), False),
    "gpuburn124-a500-errors-0-healthy": ("none", None, {"host": None}, None, None),
    "gpufryer29-all-gpus-seem-healthy": ("none", None, {"host": None}, None, None),
    "nvsentinel772-preflight-dcgm-diag-all-passed-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong after this batch's family rules
XFAIL = {
    "gpud80-nvsmi-q-remapped-rows-uncorrectable-pending": (
        "the headerless `Remapped Rows` block is read now (parsers/nvsmi.py Q_SECTION_RE: Pending Yes is a "
        "gpu_row_remap event), but a pending remap is context by the catalog's design (nvsmi-remap-pending: the GPU "
        "needs a reset, no job failed in these lines), so the verdict is none; the first look's gpu_memory came from "
        "the line classifier reading `Uncorrectable Error : 4` as an error line, not from a rule"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b12diag_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


# variants of the families this batch's rules cover, beyond the posted lines, end to end:
# (file name, text, category, deciding signature, culprit gpu)
VARIANTS = {
    # gpu_burn's table: a FAULTY GPU is a hardware fault of that GPU
    "gpu-burn-faulty": ("gpu_burn.log", (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
        "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445556)\n"
        "100.0%  proc'd: 9800 (18100 Gflop/s) - 9790 (18090 Gflop/s)   errors: 0 - 1250  (WARNING!)   temps: 61 C - 63 C \n"
        "Killing processes with SIGTERM (soft kill)\ndone\n\nTested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: FAULTY\n"),
        "gpu_other_hardware", "gpuburn-faulty", 1),
    # gpu-fryer's problems: a GPU below the others' FLOPS is a straggler
    "gpu-fryer-low-flops": ("fryer.log", (
        "GPU #3: 401233 Gflops/s (min: 380000.00, max: 410000.00, dev: 5000.00)\n"
        "         Temperature: 71.00°C (min: 40.00, max: 78.00)\n"
        "         Throttling HW: false, Thermal SW: false, Thermal HW: false\n"
        "Some GPUs are not healthy. Reasons:\n"
        "  - GPU 3 - GPU is not performing as expected. Check the flops values and temperatures\n"),
        "straggler_hardware", "gpufryer-slow-gpu", 3),
    # a dcgmi diag table's targeted-stress floor (DCGM_FR_STRESS_LEVEL) on one GPU
    "dcgmi-diag-stress-level": ("dcgmi-diag.txt", (
        "+-----  Stress  ------------+------------------------------------------------+\n"
        "| Targeted Stress           | Fail - GPU: 6                                  |\n"
        "| Warning                   | GPU 6 Max stress level of 9800.4 did not reach desired stress level of 12000.0 for GPU 6 |\n"),
        "gpu_other_hardware", "dcgm-diag-hardware-fail", 6),
    # gpu_burn's checkError text names the CUDA error: a driver that cannot run the GPU
    "gpu-burn-failure-during-compute": ("gpu_burn.log", (
        "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)\n"
        "Failure during compute: Error in \"SGEMM\" (gpu_burn-drv.cpp:212): an illegal memory access was encountered\n"
        "40.0%  proc'd: -1 (0 Gflop/s)   errors: 0  (DIED!)  temps: 55 C \n"),
        "cuda_error", "cuda-kernel-fault", None),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants(variant: str, tmp_path: Path, job_of) -> None:
    name, text, category, signature, gpu = VARIANTS[variant]
    v = analyze(job_of({name: text}), tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category and v["evidence"][0]["signature"] == signature, v["summary"]
    assert v["culprit"]["gpu"] == gpu


def test_a_healthy_gpu_burn_table_and_zero_error_progress_is_no_interruption(tmp_path: Path, job_of) -> None:
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-d5f74cda-baee-d69a-e1c5-1a9ba8e48749)\n"
            "10.0%  proc'd: 3360 (52150 Gflop/s)   errors: 0   temps: 45 C \n\tSummary at:   Mon May 11 10:00:00 UTC 2026\n\n"
            "Killing processes with SIGTERM (soft kill)\nFreed memory for dev 0\nUninitted cublas\ndone\n\n"
            "Tested 1 GPUs:\n\tGPU 0: OK\n")
    report = analyze(job_of({"gpu_burn.log": text}), tmp_path / "out", html=False).report
    assert report["verdict"]["kind"] == "none" and not report["interruptions"], report["verdict"]["summary"]

"""The real healthy-run and noise-buried-failure excerpts of fixtures/fresh/b15ok (public threads held out from the
real samples and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: a
healthy run's verdict is `none` with no culprit; a failure's category is the one the thread concluded (the noise the
thread calls harmless does not win), the deciding evidence is the line a person would cite, and the restart decision
is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b15ok"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "pytorch144599-barrier-device-unknown-warn-unit-tests": ("none", None, {"host": None}, None, None),
    "gptneox990-deepspeed-nccl-backend-not-implemented-warning": ("none", None, {"host": None}, None, None),
    "pytorch105695-processgroupnccl-init-options-glog-info": ("none", None, {"host": None}, None, None),
    "k8sdeviceplugin106-crashloopbackoff-pod-that-completed": ("none", None, {"host": None}, None, None),
    "sdwebui9-tf-register-cudnn-factory-e-lines-runs": ("none", None, {"host": None}, None, None),
    "verlab5-xla-register-factory-noise-training-runs": ("none", None, {"host": None}, None, None),
    "galaxy2359-slurmstepd-exceeded-step-memory-job-completed": ("none", None, {"host": None}, None, None),
    "endlesslinux548-aer-corrected-badtlp-spam-device-works": ("none", None, {"host": None}, None, None),
    "ragretrieval10-kernel-version-warning-then-fsdp-wrap-class-missing": (
        "user_code", "hf-fsdp-wrap-class-missing", {"host": None}, ("train.log", 2), False),
    "nccl1231-plugin-not-found-harmless-then-cuda-802": (
        "nvlink", "cuda-system-not-ready", {}, ("train.log", 4), None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "k8sdeviceplugin106-crashloopbackoff-pod-that-completed": (
        "`kubectl get pods` shows only `CrashLoopBackOff` with RESTARTS 1: the kubelet backs off restarting a container "
        "that exited, whatever its exit code; that this one exited 0 (an image with no long-running command under "
        "restartPolicy Always) is in the poster's answer, not in the log, and the same row is most often a crash"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b15ok_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


def test_noise_lines_are_read_as_what_they_are(tmp_path: Path) -> None:
    """Family variants beyond the posted lines: TF's `I` line with error words behind a thread id, a `W` line
    (GeneratorDataset's finalizer notice), and Slurm 19.05's wording of the memory-limit-touched notice make no
    interruption; a TF `E` line that names a failure, and the OOM kill line, still do."""
    job = tmp_path / "healthy"
    job.mkdir()
    (job / "train.log").write_text(
        "2023-06-02 09:00:01.000001: I  123456 tensorflow/core/common_runtime/executor.cc:1197] [/device:CPU:0] (DEBUG "
        "INFO) Executor start aborting (this does not indicate an error and you can ignore this message): "
        "INVALID_ARGUMENT: You must feed a value for placeholder tensor 'Placeholder/_0' with dtype int32\n"
        "Epoch 10/10\n"
        "2020-06-08 05:30:15.889706: W tensorflow/core/kernels/data/generator_dataset_op.cc:103] Error occurred when "
        "finalizing GeneratorDataset iterator: Cancelled: Operation was cancelled\n")
    (job / "slurm-77.out").write_text(
        "slurmstepd: info: Step 77.0 hit memory limit at least once during execution. This may or may not result in "
        "some failure.\n")
    r = analyze(job, tmp_path / "out1", html=False).report
    assert r["verdict"]["kind"] == "none" and not r["interruptions"], r["verdict"]["summary"]

    bad = tmp_path / "oom"
    bad.mkdir()
    (bad / "slurm-78.out").write_text(
        "slurmstepd: error: Exceeded step memory limit at some point.\n"
        "slurmstepd: error: Detected 1 oom-kill event(s) in step 78.0 cgroup.\n")
    v = analyze(bad, tmp_path / "out2", html=False).report["verdict"]
    assert v["category"] == "oom" and v["evidence"][0]["line"] == 2, v["summary"]

    tf = tmp_path / "tf-error"
    tf.mkdir()
    (tf / "train.log").write_text(
        "2024-06-24 15:23:20.803158: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is "
        "optimized to use available CPU instructions in performance-critical operations.\n"
        "2024-06-24 15:23:21.919523: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to "
        "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n")
    v = analyze(tf, tmp_path / "out3", html=False).report["verdict"]
    assert v["kind"] != "none" and v["evidence"][0]["line"] == 2, v["summary"]

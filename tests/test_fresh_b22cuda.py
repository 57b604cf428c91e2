"""The real CUDA runtime-error excerpts of fixtures/fresh/b22cuda (Jittor's `code=700( cudaErrorIllegalAddress )`
check, ggml's old `CUDA error 700 at file:line` and new `CUDA error:` / `current device: N` block, CUB's `CUDA error
716 [file, line]` with a thrust `what():`, redner's `CUDA Runtime Error: ... at file:line`, TensorFlow 1.x
stream_executor with a cuDNN status; public threads held out from the real samples and from every other fresh set;
sources and conclusions in its README.md), analyzed end to end: the verdict's category is the one the thread
concluded, the culprit is the GPU / host the thread or the emitter's own line names, the deciding evidence is the
line a person would cite, and the restart decision is the thread's answer."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b22cuda"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "jnerf43-jittor-code700-illegal-address-n-rays-per-batch": (
        "cuda_error", "cuda-kernel-fault", {"host": None, "gpu": None}, ("train.log", 1), False),
    "whispercpp1502-ggml-cuda-error-700-gtx1060": (
        "cuda_error", "cuda-kernel-fault", {"host": None, "gpu": None}, ("whisper.log", 1), False),
    "megba43-cub-cuda-error-716-misaligned-thrust-odd-frames": (
        "cuda_error", "cuda-kernel-fault", {"host": None, "gpu": None}, ("megba.log", 2), False),
    "redner39-cuda-runtime-unspecified-launch-failure-gcc5-build": (
        "cuda_error", "cuda-launch-failure", {"host": None, "gpu": None}, ("redner.log", 1), False),
    "sparsewinograd4-tf-illegal-address-cudnn-exec-failed-broken-server": (
        "gpu_other_hardware", None, {"host": None}, None, True),
    "llamacpp5347-ggml-peer-access-already-enabled-assert": (
        "cuda_error", "cuda-api-misuse", {"host": None, "gpu": 0}, ("llama.log", 7), False),
}

# cases the analyzer still gets wrong
XFAIL = {
    "sparsewinograd4-tf-illegal-address-cudnn-exec-failed-broken-server": (
        "the log holds TensorFlow's `failed to enqueue async memset operation: CUDA_ERROR_ILLEGAL_ADDRESS` and a "
        "`CUDNN_STATUS_EXECUTION_FAILED` on the first step and nothing from the kernel or the driver: an illegal "
        "address is an application fault by the CUDA family's default (cuda_error, stop_and_fix). That the server "
        "was broken (fixed by moving to another one) is in the thread's prose only; one job on one machine cannot "
        "show the taxonomy's 'recurs on one GPU across different code'"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b22cuda_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

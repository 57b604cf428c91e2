"""The real training-framework runtime excerpts of fixtures/fresh/b15ds (DeepSpeed, Megatron-LM / Megatron-Core, FSDP,
NeMo Automodel, TransformerEngine, accelerate; public threads held out from the real samples and from every other fresh
set; sources and conclusions in its README.md), analyzed end to end: the verdict's category is the one the thread
concluded, the culprit is the one the thread names (none here: no thread names a faulty host or rank), the deciding
evidence is the line a person would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b15ds"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "deepspeed3869-zero-inference-cpu-offload-cuda-oom-gtx1650": (
        "oom", "pt-cuda-oom", {"host": None, "rank": None}, ("train.log", 10), None),
    "megatronlm4129-mfsdp-dcp-ckpt-resume-size-mismatch": (
        "user_code", "ckpt-model-mismatch", {"host": None, "rank": None}, ("train.log", 1), False),
    "transformerengine2795-fusedadam-state-not-dtensor-to-local": (
        "framework_bug", "pt-dtensor-api-on-plain-tensor", {"host": None}, ("train.log", 10), False),
    "slime1818-megatron-ep-pp-exceeds-world-size": (
        "user_code", "parallel-layout-mismatch", {"host": None, "rank": None}, ("train.log", 3), False),
    "peft484-fsdp-flatparam-uniform-dtype": (
        "user_code", "fsdp-flatten-mixed-params", {"host": None}, ("train.log", 3), False),
    "automodel2673-fsdp2-allgather-oom-h200-recipe-on-h100": (
        "oom", "pt-cuda-oom", {"host": None, "rank": None}, ("train.log", 1), False),
    "prodigy35-fsdp1-lora-early-return-allreduce-hang": (
        "collective_desync", None, {"host": None, "rank": None}, None, False),
    "accelerate1589-deepspeed-wall-clock-breakdown-tqdm-healthy": ("none", None, {"host": None}, None, None),
    "visualrft51-zero3-invalidate-trace-cache-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "prodigy35-fsdp1-lora-early-return-allreduce-hang": (
        "two watchdog lines of one rank (`Timeout at NCCL work: 175, last enqueued NCCL work: 175, last completed NCCL "
        "work: 174`) read the same for a rank waiting on a peer that skipped the collective (the thread: the optimizer "
        "returns early on ranks whose FSDP1 shard holds only frozen parameters) and for a peer lost to the network; the "
        "other ranks' sequence numbers or a Flight Recorder dump would tell them apart, and the excerpt has neither: "
        "comm_hang_unknown with a restart is the honest reading"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b15ds_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


def test_fresh_b15ds_healthy_logs_are_read_not_left_unparsed(tmp_path: Path) -> None:
    """The two healthy controls are `none` because their lines are read (DeepSpeed's wall-clock-breakdown timers,
    ZeRO-3's trace-cache notices), not because no parser recognized the file."""
    for case in ("accelerate1589-deepspeed-wall-clock-breakdown-tqdm-healthy",
                 "visualrft51-zero3-invalidate-trace-cache-healthy"):
        report = analyze(FRESH / case, tmp_path / case, html=False).report
        assert [(s["parser"], s["unparsed"]) for s in report["sources"]] == [("steps", 0)], report["sources"]

"""The real numerics excerpts of fixtures/fresh/b10num (NaN/Inf losses and gradients, fp16 loss-scale collapse) and
three healthy runs whose fp16 overflow skips recover (public threads held out from the real samples and from every
other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's category is the one the
thread concluded (`none` for the healthy logs: no interruption), the culprit is the rank the error line names where
it names one (no thread names a faulty node), the deciding evidence is the line a person would cite, and the restart
decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b10num"

# case -> (category, or "none" for no interruption; deciding signature; culprit fields; (file, line) of the
# deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "cogvideo233-deepspeed-overflow-recovers-healthy": ("none", None, {}, None, None),
    "deepspeed931-hysteresis-warmup-overflows-healthy": ("none", None, {}, None, None),
    "learndeepspeed1-wrapped-periodic-overflow-8192-healthy": ("none", None, {}, None, None),
    "transformers14531-zero2-loss-scale-stuck-at-1-tqdm": (
        "numerics", "steps-loss-scale-floor", {"host": None, "rank": None}, ("train.log", 1), False),
    "chinesellamaalpaca534-zero2-scale-halving-each-step-tqdm": (
        "numerics", "steps-loss-scale-floor", {"host": None, "rank": None}, ("train.log", 10), None),
    "factseg6-apex-overflow-scale-to-denormal": (
        "numerics", "steps-loss-scale-floor", {"host": None, "rank": None}, ("train.log", 3), None),
    "paimegatron366-megatron-nan-local-grad-norm-rank11": (
        "numerics", "pt-nan", {"host": None, "rank": 11, "gpu": 3}, ("train.log", 1), False),
    "nemo14348-nested-prefix-unexpected-result-nan-bucket0": (
        "numerics", "pt-nan", {"host": "dcfai-xe9680-01", "rank": 2, "gpu": 2}, ("pretrain.log", 1), None),
    "pytorch37712-anomaly-solvebackward-nan": (
        "numerics", "pt-nan", {"host": None, "rank": None}, ("train.log", 15), False),
    "hake34-ae-pretrain-loss-nan-custom-rows": (
        "numerics", "steps-nan-loss", {"host": None, "rank": None}, ("train.log", 4), False),
}

# cases the analyzer still gets wrong after this batch's family rules
XFAIL: dict[str, str] = {}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b10num_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


def test_a_healthy_overflow_run_is_not_a_numerics_incident(tmp_path: Path) -> None:
    """The healthy controls leave no numerics hit at root level: every overflow line stays a warning."""
    for case in ("cogvideo233-deepspeed-overflow-recovers-healthy", "deepspeed931-hysteresis-warmup-overflows-healthy",
                 "learndeepspeed1-wrapped-periodic-overflow-8192-healthy"):
        report = analyze(FRESH / case, tmp_path / case, html=False).report
        assert report["verdict"]["category"] in (None, "none"), case
        assert not report["interruptions"], case

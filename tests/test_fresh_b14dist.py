"""The real PyTorch-distributed failure excerpts of fixtures/fresh/b14dist (public threads held out from the real
samples and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's
category is the one the thread concluded, the culprit is the one the thread names, the deciding evidence is the line a
person would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b14dist"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "awsdoeks69-gloo-connectfullmesh-loopback-hostnetwork": (
        "nccl_config", "gloo-connect-failed", {"host": None, "rank": None}, ("leader.log", 3), False),
    "awsdoeks50-gloo-loopback-fallback-rank8": (
        "nccl_config", "gloo-connect-failed", {"rank": 8}, ("worker.log", 3), False),
    "awsdoeks51-gloo-ifname-exclusion-list": (
        "nccl_config", "gloo-device-address", {"host": None}, ("leader.log", 1), False),
    "medsegdiff27-ddp-unused-parameters": ("user_code", "pt-user-exception", {"host": None}, ("train.log", 1), False),
    "anchordetr6-ddp-unused-parameters-model-code": (
        "user_code", "pt-user-exception", {"host": None}, ("train.log", 1), False),
    "grmg11-store-port-in-use-lingering-process": (
        "user_code", "pt-store-port-in-use", {"host": None}, ("train.log", 1), False),
    "wekws93-store-port-in-use-second-job": (
        "user_code", "pt-store-port-in-use", {"host": None}, ("train.log", 2), False),
    "dmlcloud61-pg-not-destroyed-warning-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "awsdoeks50-gloo-loopback-fallback-rank8": (
        "the thread names rank 8 (the worker node's rank that fell back to loopback), but the PR quotes its lines as "
        "`[rank8] Warning: ...` / `[rank8] Gloo connectFullMesh failed ...`: PyTorch's own rank prefix is `[rank8]:`, "
        "and a colon-less `[rankN] ` is the poster's abbreviation, not an emitter's format, so no rank is read"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b14dist_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

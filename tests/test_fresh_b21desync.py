"""The real collective-desync excerpts of fixtures/fresh/b21desync (NCCL's COLL trace with one process's Broadcast
count / datatype out of step, ProcessGroupWrapper's TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprint mismatch in its new and
its old one-sided wording, a watchdog timeout of ranks left waiting while one validates, Horovod's stall inspector;
public threads held out from the real samples and from every other fresh set; sources and conclusions in its
README.md), analyzed end to end: the verdict's category is the one the thread concluded, the culprit is the rank /
GPU the posted lines single out, the deciding evidence is the line a person would cite, and the restart decision is
the thread's answer."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b21desync"

# case -> (category, or "none"; deciding signature; culprit fields the thread's lines name; (file, line) of the
# deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "nccl147-coll-info-broadcast-count-dtype-mismatch-dev0": (
        "collective_desync", "nccl-coll-param-mismatch", {"host": "learnfair062", "gpu": 0},
        ("nccl-coll-grep.txt", 1), False),
    "speechbrain2401-fingerprint-broadcast-vs-allreduce-main-only-ckpt": (
        "collective_desync", "pt-collective-mismatch", {"rank": None}, ("train.log", 2), False),
    "speechbrain1166-inconsistent-collective-old-wording-ckpt-interval": (
        "collective_desync", "pt-collective-mismatch", {"rank": None}, ("train.log", 2), False),
    "finetrainers114-validation-on-one-gpu-broadcast-timeout": (
        "collective_desync", None, {"rank": None}, None, False),
    "lightning5155-horovod-stall-broadcast-on-one-rank": (
        "collective_desync", "hvd-stall-inspector", {"rank": 0}, ("horovodrun.log", 1), False),
}

# cases the analyzer still gets wrong
XFAIL = {
    "finetrainers114-validation-on-one-gpu-broadcast-timeout": (
        "comm_hang_unknown / restart: the posted lines are rank 3's watchdog timeout alone (BROADCAST SeqNum 3348, "
        "last completed 3347); that the main rank was away generating validation videos is the maintainer's "
        "reading of the script, not in the log, and no other rank's line says which rank never joined"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b21desync_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

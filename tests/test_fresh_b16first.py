"""The real multi-rank failure excerpts of fixtures/fresh/b16first (public threads held out from the real samples and
from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's category is
the one the thread concluded, the culprit is the host/rank the thread names, the deciding evidence is the line a person
would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b16first"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "brainscore950-srun-node107-task0-out-of-memory": (
        "oom", "slurm-oom", {"host": "node107", "rank": 0}, ("slurm-37205392.out", 2), False),
    "grasp58-mpirun-rank2-signal9-qy-pc": ("oom", None, {"host": "qy-PC", "rank": 2}, None, False),
    "peridigm12-mvapich-rank16-signal9-c557-203": (
        "oom", None, {"host": "c557-203.stampede.tacc.utexas.edu", "rank": 16}, None, False),
    "vllm7896-ray-nccl-unhandled-cuda-bad-node": ("gpu_other_hardware", None, {"host": None}, None, False),
    "ucx7349-ib-client-reregistration-warn-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "grasp58-mpirun-rank2-signal9-qy-pc": (
        "the log says only that rank 2 on qy-PC died of SIGKILL (mpi-proc-sigkill, context): the OOM killer, a cgroup "
        "limit or a hard kill read the same; that it was memory is the maintainer's inference, not a line"),
    "peridigm12-mvapich-rank16-signal9-c557-203": (
        "MVAPICH2's mpispawn says rank 16 on c557-203 was terminated with signal 9 and nothing more: as for Open MPI's "
        "SIGKILL the cause (OOM killer, cgroup, hard kill) is not in the log; memory is the thread's title"),
    "vllm7896-ray-nccl-unhandled-cuda-bad-node": (
        "`NCCL error: unhandled cuda error` in init_device reads the same for a bad node and for a CUDA/driver setup "
        "fault; the thread's 'bad instance node' is known only from removing it, and the log names no host"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b16first_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


@pytest.mark.parametrize("case", ["grasp58-mpirun-rank2-signal9-qy-pc", "peridigm12-mvapich-rank16-signal9-c557-203"])
def test_fresh_b16first_first_dead_process_is_the_culprit(case: str, tmp_path: Path) -> None:
    """The cause stays unknown (a bare SIGKILL), but the launcher names the process that died first: the verdict's
    culprit is that host and rank, not the nodes whose launchers only saw it go (precedence.toml [first_dead])."""
    _, _, culprit, _, _ = CASES[case]
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "unknown"
    assert {k: v["culprit"][k] for k in culprit} == culprit

"""The real hang / slowdown excerpts of fixtures/fresh/b7hang (public threads held out from the real samples
and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's
category is the one the thread concluded (`none` for the two healthy logs: no interruption, the verdict `none`
or `completed`), the culprit rank and host are the ones the thread names, the deciding evidence is the line a
person would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b7hang"

# case -> (category, or "none" for no interruption; deciding signature; culprit (host, rank) the thread
# names; (file, line) of the deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, tuple[str | None, int | None], tuple[str, int] | None, bool | None]] = {
    "pytorch152623-desync-report-rank7-never-joined": (
        "collective_desync", "pt-watchdog-timeout", (None, 7), ("train.log", 1), None),
    "nccl1911-ras-mismatch-allgather-two-ranks-ahead": (
        "comm_hang_unknown", "nccl-ras-error", (None, None), ("ncclras.txt", 16), None),
    "megatronllm22-iteration-time-grows-tp2-pp1": ("slowdown_workload", None, (None, None), None, False),
    "xdit147-heartbeat-monitor-stuck-after-last-timestep": (
        "collective_desync", "pt-heartbeat-timeout", (None, None), ("run.log", 1), False),
    "llamafactory8261-numbered-lines-fr-dump-signal-local-rank": (
        "comm_hang_unknown", "pt-watchdog-status", (None, None), ("train.log", 1), None),
    "accelerate3104-pyspy-dump-zero3-backward-allgather": (
        "comm_hang_unknown", "pyspy-collective-wait", (None, None), ("pyspy.txt", 25), None),
    "vlmr1-257-heartbeat-stuck-terminal-wrapped": (
        "comm_hang_unknown", "pt-heartbeat-timeout", (None, None), ("train.log", 2), None),
    "simplegrpo46-tqdm-glued-watchdog-fr-dump-from-rank2": (
        "comm_hang_unknown", "pt-watchdog-timeout", (None, None), ("train.log", 1), None),
    "tensorflow40042-cifar10-first-steps-healthy": ("none", None, (None, None), None, None),
    "diffusionpipe410-deepspeed-steady-iter-time-healthy": ("none", None, (None, None), None, None),
}

# cases the analyzer still gets wrong after this batch's family rules
XFAIL = {
    "nccl1911-ras-mismatch-allgather-two-ranks-ahead": (
        "one ncclras snapshot with different operation counts is no hang by itself: NCCL's RAS guide "
        "(docs/userguide/source/troubleshooting/ras.rst) says it 'should not be a cause for concern, as long as the "
        "counts increase across repeated queries' (collectives outpace the query); the excerpt holds one query, so "
        "the report stays context (nccl-ras-error) and the verdict none"),
    "megatronllm22-iteration-time-grows-tp2-pp1": (
        "two Megatron iteration rows (11.1 s, then 14.6 s) are all the excerpt keeps: too few steps to tell a "
        "slowdown from warm-up, so no slow episode is found"),
    "xdit147-heartbeat-monitor-stuck-after-last-timestep": (
        "the heartbeat monitor lines are read (a hang, pt-heartbeat-timeout), but that the hang is the framework's "
        "pipeline schedule diverging under one parallel config is in the issue's prose, not the log: a plain "
        "comm_hang_unknown, auto-recoverable"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b7hang_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, (host, rank), cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, {"host": host, "rank": rank}, cite, restart)


WATCHDOG = ("[rank0]:[E515 18:36:47.341808597 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=241, OpType=ALLREDUCE, NumelIn=6, NumelOut=6, Timeout(ms)=600000) "
            "ran for 600086 milliseconds before timing out.\n")

RAS = ("NCCL version 2.26.2 compiled with CUDA 12.6\n\nCommunicators... (0.00s)\n=============\n\n"
       "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
       "    #  in group  per comm  per node  per comm  in group\n"
       "    0         1         4         8        32        32   RUNNING  MISMATCH\n\nWarnings\n========\n\n"
       "#0-0 (fa93daea854b060b) MISMATCH\n  Communicator ranks have different AllGather operation counts\n{}\n")
ONE_BEHIND = ("  31 ranks have launched up to operation 641\n"
              "  Rank 12 has launched up to operation 640 -- GPU 4 managed by process 323032 on node 10.137.190.124")
TWO_AHEAD = ("  30 ranks have launched up to operation 640\n  2 ranks have launched up to operation 641\n"
             "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124\n"
             "  Rank 13 -- GPU 5 managed by process 323033 on node 10.137.190.124")

# variants of the families the b7hang misses generalised to, beyond the posted lines, end to end:
# (file name, text, category, deciding signature, culprit rank)
VARIANTS = {
    # analyzeMissingRanks: a rank that never joined any collective (old 1.x/2.0 bare-severity watchdog)
    "desync-missing-rank-never-joined": ("train.log", (
        "[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800356 milliseconds before timing out.\n"
        "\t - [1] Timeout at collective: BROADCAST, #1\n"
        "\t - To our best knowledge, ranks [3] are the lagging ranks that caused this timeout. They never joined "
        "any collectives\n"), "collective_desync", "pt-watchdog-timeout", 3),
    # analyzeLaggingRanks with a rank stuck inside the collective: a plain hang, localized to that rank
    "desync-rank-stuck-inside-collective": ("train.log", (
        WATCHDOG +
        "\t - [0] Timeout at collective: ALLREDUCE, #241\n"
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "\t   - [5] joined but didn't finish collective #241 (count from 1)\n"
        "\t - Snapshot of ranks' latest states:\n"
        "\t   #241 started ranks:\n"
        "\t     [0, 1, 2, 3, 4, 5, 6, 7] started ALLREDUCE\n"), "comm_hang_unknown", "pt-watchdog-timeout", 5),
    # several ranks never joined: a desync, no single culprit
    "desync-two-ranks-not-joined": ("train.log", (
        WATCHDOG + "             [6, 7] finished collective #182, but didn't join collective #183 (count from 1)\n"),
        "collective_desync", "pt-watchdog-timeout", None),
    # a py-spy dump taken of a stuck rank, in a ProcessGroupNCCL collective through --native frames
    "pyspy-native-nccl-wait": ("dump.txt", (
        "Process 2417: python -m torch.distributed.run --nproc_per_node 8 train.py\n"
        "Python v3.10.12 (/usr/bin/python3.10)\n\n"
        'Thread 2417 (active): "MainThread"\n'
        "    ncclGroupEndInternal (group.cc:418)\n"
        "    ncclAllReduce (collectives.cc:49)\n"
        "    backward (torch/autograd/__init__.py:266)\n"), "comm_hang_unknown", None, None),
    # a py-spy dump of a stuck rank waiting on the GPU
    "pyspy-cuda-synchronize": ("stack.txt", (
        'Thread 0x7F3A2C5FF640 (active+gil): "MainThread"\n'
        "    synchronize (torch/cuda/__init__.py:954)\n"
        "    _communicate_shapes (xfuser/core/distributed/group_coordinator.py:865)\n"),
        "comm_hang_unknown", "pyspy-cuda-sync-wait", None),
    # ncclras queried twice, the counts unchanged: stuck; the one rank behind is the culprit
    "ras-repeated-one-rank-behind": ("ncclras.txt", RAS.format(ONE_BEHIND) * 2, "comm_hang_unknown",
                                     "nccl-ras-stuck", 12),
    # the same with the listed ranks ahead of the others (nccl#1911's shape): stuck, nobody blamed
    "ras-repeated-listed-ranks-ahead": ("ncclras.txt", RAS.format(TWO_AHEAD) * 2, "comm_hang_unknown",
                                        "nccl-ras-stuck", None),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants(variant: str, tmp_path: Path, job_of) -> None:
    name, text, category, signature, rank = VARIANTS[variant]
    v = analyze(job_of({name: text}), tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == "hang" and v["category"] == category, v["summary"]
    if signature is not None:
        assert v["evidence"][0]["signature"] == signature
    assert v["culprit"]["rank"] == rank, v["summary"]


def test_ras_counts_that_moved_are_no_hang(tmp_path: Path) -> None:
    """Two queries whose counts advanced: the collectives outpace RAS (NCCL's RAS guide), nothing is stuck."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "ncclras.txt").write_text(RAS.format(ONE_BEHIND) + RAS.format(ONE_BEHIND.replace("641", "702")
                                                                         .replace("640", "701")))
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == "none", v["summary"]


def test_pyspy_dump_of_a_busy_process_is_no_hang(tmp_path: Path) -> None:
    """A dump whose threads wait on nothing collective (data loading, the tqdm monitor) is no hang signal."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "dump.txt").write_text('Thread 42 (active): "MainThread"\n'
                                  "    _next_data (torch/utils/data/dataloader.py:1329)\n"
                                  'Thread 928 (idle): "Thread-1"\n'
                                  "    wait (threading.py:324)\n")
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] in ("none", "unknown") and not v["evidence"], v["summary"]

"""The real launcher/wrapper excerpts of fixtures/fresh/b13hf (DeepSpeed's launcher, accelerate, Lightning, HF
Trainer; public threads held out from the real samples and from every other fresh set; sources and conclusions in
its README.md), analyzed end to end: the verdict's category is the one the thread concluded (`none` for the two
healthy logs), the culprit is the one the thread names (none where it names none: a wrapper's notice and a
mismatch report do not name the rank at fault), the deciding evidence is the line a person would cite, and the
restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b13hf"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "ds618-launcher-nameerror-two-ranks": (
        "user_code", "pt-user-exception", {"host": None, "rank": None}, ("train.log", 11), False),
    "ds626-sigkill-handler-return-code-minus11": (
        "framework_bug", "elastic-sigsegv", {"host": None, "rank": None}, ("train.log", 6), None),
    "ds7568-zero-fp16-mismatch-allreduce-vs-gather": (
        "collective_desync", "pt-collective-mismatch", {"host": None, "rank": None}, ("output.log", 1), False),
    "ds2931-inference-2node-ib-completion-error12": (
        "network_fabric", "nccl-ib-retry-exceeded", {"host": None}, ("inference.log", 5), None),
    "transformers11658-trainer-deepspeed-nccl-shm-no-space": (
        "nccl_config", "nccl-shm-setup", {"host": "simple-layoutlm-mmml-1573-investigate-how-to-implement-d-lcbz2t"},
        ("pod.log", 1), None),
    "accelerate847-test-stderr-prefix-exitcode-minus11": (
        "framework_bug", "elastic-sigsegv", {"host": None, "rank": None}, ("accelerate-test.log", 1), None),
    "accelerate1743-elastic-exitcode-minus9-sigterm-siblings": (
        "unknown", None, {"host": None, "rank": None}, None, None),
    "lightning19680-all-gather-epoch-end-mismatch": (
        "collective_desync", "pt-collective-mismatch", {"host": None, "rank": None}, ("train.log", 3), None),
    "lightning14428-fit-stopped-max-epochs-healthy": ("none", None, {"host": None}, None, None),
    "hongbo37505-deepspeed-launch-two-ranks-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong after this batch's family rules
XFAIL: dict[str, str] = {}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b13hf_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


def test_deepspeed_banner_is_read_not_unparsed(tmp_path: Path) -> None:
    """DeepSpeed's runner.py/launch.py banner is the elastic parser's: claimed, one launch, nothing unparsed
    but the shell command the poster typed."""
    report = analyze(FRESH / "hongbo37505-deepspeed-launch-two-ranks-healthy", tmp_path / "out", html=False).report
    (src,) = report["sources"]
    assert (src["parser"], src["lines"], src["events"], src["unparsed"]) == ("elastic", 9, 1, 1)


MISMATCH = ("[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: "
            "CollectiveFingerPrint(SequenceNumber={s}, OpType={op}), but Rank {o} is running collective: "
            "CollectiveFingerPrint(SequenceNumber={so}, OpType={oop}).Collectives differ in the following aspects:   "
            "Sequence number: {s}vs {so}\n")

# variants of the families beyond the posted lines, end to end: (file name, text, kind, category, deciding
# signature or None, culprit fields)
VARIANTS = {
    # accelerate's simple_launcher (and DeepSpeed's launch.py before 0.6) re-raising a child killed by SIGSEGV:
    # Python's CalledProcessError text for a negative return code
    "calledprocesserror-died-with-sigsegv": ("train.log", (
        "  File \"/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py\", line 554, in simple_launcher\n"
        "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
        "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train_network.py']' died with "
        "<Signals.SIGSEGV: 11>.\n"), "crash", "framework_bug", "elastic-sigsegv", {"host": None}),
    # the same for SIGBUS (a /dev/shm or mmap'd file problem)
    "calledprocesserror-died-with-sigbus": ("train.log", (
        "subprocess.CalledProcessError: Command '['/opt/conda/bin/python', '-u', 'train.py', '--local_rank=3']' died "
        "with <Signals.SIGBUS: 7>.\n"), "crash", "storage", "elastic-sigbus", {"host": None}),
    # SIGKILL names no cause (OOM killer or a hard kill): unknown, and no user_code guess from the exception
    "calledprocesserror-died-with-sigkill": ("train.log", (
        "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with <Signals.SIGKILL: 9>.\n"),
        "unknown", "unknown", None, {"host": None}),
    # Lightning ddp_spawn / mp.spawn: a worker killed by SIGSEGV
    "spawn-process-exited-sigsegv": ("train.log", (
        "  File \"/opt/conda/lib/python3.8/site-packages/torch/multiprocessing/spawn.py\", line 150, in join\n"
        "    raise ProcessExitedException(\n"
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGSEGV\n"),
        "crash", "framework_bug", "elastic-sigsegv", {"host": None}),
    # mp.spawn's plain exit code names no cause: not a user_code exception of its own
    "spawn-process-exited-exit-code": ("train.log", (
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1\n"),
        "unknown", "unknown", None, {"host": None}),
    # a multi-node DeepSpeed run under pdsh: the node's launcher reports its worker's SIGBUS
    "deepspeed-pdsh-host-sigbus": ("train.log", (
        "worker-1: [2023-03-08 23:09:10,901] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 15884\n"
        "worker-1: [2023-03-08 23:09:10,911] [ERROR] [launch.py:324:sigkill_handler] ['/usr/bin/python', '-u', "
        "'run_clm.py', '--local_rank=7'] exits with return code = -7\n"),
        "crash", "storage", "elastic-sigbus", {"host": "worker-1", "rank": None}),
    # the launcher told to stop from outside, workers killed: teardown only, the cause is not in the log
    "deepspeed-main-process-sigterm": ("train.log", (
        "[2024-05-01 10:00:00,000] [INFO] [launch.py:146:main] WORLD INFO DICT: {'localhost': [0, 1]}\n"
        "[2024-05-01 12:00:00,000] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1001\n"
        "[2024-05-01 12:00:00,000] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1002\n"
        "[2024-05-01 12:00:01,000] [INFO] [launch.py:328:sigkill_handler] Main process received SIGTERM, exiting\n"),
        "unknown", "unknown", "elastic-teardown", {"host": None}),
    # three reports of one mismatch: rank 3 is the one every report names, the culprit
    "mismatch-three-reports-one-odd-rank": ("output.log", (
        MISMATCH.format(r=0, s=32, op="ALLREDUCE", o=3, so=0, oop="GATHER")
        + MISMATCH.format(r=2, s=32, op="ALLREDUCE", o=3, so=0, oop="GATHER")
        + MISMATCH.format(r=3, s=0, op="GATHER", o=0, so=32, oop="ALLREDUCE")),
        "hang", "collective_desync", "pt-collective-mismatch", {"rank": 3}),
    # two reports of one pair seen from both sides: both ranks are in every report, so no culprit
    "mismatch-one-pair-both-sides": ("output.log", (
        MISMATCH.format(r=0, s=32, op="ALLREDUCE", o=1, so=0, oop="GATHER")
        + MISMATCH.format(r=1, s=0, op="GATHER", o=0, so=32, oop="ALLREDUCE")),
        "hang", "collective_desync", "pt-collective-mismatch", {"rank": None, "host": None}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants(variant: str, tmp_path: Path, job_of) -> None:
    name, text, kind, category, signature, culprit = VARIANTS[variant]
    v = analyze(job_of({name: text}), tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == kind and v["category"] == category, v["summary"]
    if signature is not None:
        assert v["evidence"][0]["signature"] == signature
    assert {k: v["culprit"][k] for k in culprit} == culprit


def test_deepspeed_launcher_run_that_exits_cleanly_is_none(tmp_path: Path, job_of) -> None:
    """The launcher's whole normal life (banner, spawns, `Process N exits successfully.`) is no interruption."""
    text = (
        "[2024-05-01 10:00:00,000] [WARNING] [runner.py:202:fetch_hostfile] Unable to find hostfile, will proceed "
        "with training with local resources only.\n"
        "[2024-05-01 10:00:00,100] [INFO] [runner.py:568:main] cmd = /usr/bin/python -u -m deepspeed.launcher.launch "
        "--world_info=eyJsb2NhbGhvc3QiOiBbMCwgMV19 --master_addr=127.0.0.1 --master_port=29500 train.py\n"
        "[2024-05-01 10:00:02,000] [INFO] [launch.py:138:main] 0 NCCL_DEBUG=WARN\n"
        "[2024-05-01 10:00:02,000] [INFO] [launch.py:145:main] WORLD INFO DICT: {'localhost': [0, 1]}\n"
        "[2024-05-01 10:00:02,000] [INFO] [launch.py:151:main] nnodes=1, num_local_procs=2, node_rank=0\n"
        "[2024-05-01 10:00:02,000] [INFO] [launch.py:162:main] global_rank_mapping=defaultdict(<class 'list'>, "
        "{'localhost': [0, 1]})\n"
        "[2024-05-01 10:00:02,000] [INFO] [launch.py:163:main] dist_world_size=2\n"
        "[2024-05-01 10:00:02,000] [INFO] [launch.py:165:main] Setting CUDA_VISIBLE_DEVICES=0,1\n"
        "[2024-05-01 10:00:02,001] [INFO] [launch.py:253:main] process 4242 spawned with command: "
        "['/usr/bin/python', '-u', 'train.py', '--local_rank=0']\n"
        "[2024-05-01 10:00:02,002] [INFO] [launch.py:253:main] process 4243 spawned with command: "
        "['/usr/bin/python', '-u', 'train.py', '--local_rank=1']\n"
        "[2024-05-01 11:00:00,000] [INFO] [launch.py:348:main] Process 4242 exits successfully.\n"
        "[2024-05-01 11:00:01,000] [INFO] [launch.py:348:main] Process 4243 exits successfully.\n")
    report = analyze(job_of({"train.log": text}), tmp_path / "out", html=False).report
    assert report["verdict"]["kind"] in ("none", "completed") and not report["interruptions"]
    (src,) = report["sources"]
    assert src["unparsed"] == 0

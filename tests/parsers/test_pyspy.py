"""Tests for parsers.pyspy: `py-spy dump` output (benfred/py-spy src/dump.rs, src/stack_trace.rs). Every
header, thread and frame line of a dump is claimed; a thread whose innermost frame waits in a collective
or on the GPU is a `pyspy_wait` event on that frame's line; other stacks give no event."""
from __future__ import annotations

from pathlib import Path

from parsers import pyspy
from parsers.lines import decode_lines, with_body
from parsers.records import ParseContext


def _parse(text: str, **ctx):  # noqa: ANN202
    return pyspy.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="x.txt", **ctx))


DUMP = """Process 307: /usr/local/bin/python -u /usr/local/lib/python3.11/site-packages/swift/cli/_megatron/sft.py --bf16 true
Python v3.11.9 (/usr/local/bin/python3.11)

Thread 307 (active): "MainThread"
    synchronize (torch/cuda/__init__.py:954)
    train_step (megatron/training/training.py:612)
Thread 0x7F3A2C5FF640 (idle): "Thread-1"
    wait (threading.py:324)
    run (tqdm/_monitor.py:60)
Thread 4076 (idle)
Thread 4079 (active+gil)
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    wrapper (torch/distributed/c10d_logger.py:83)
        Arguments:
            tensor: <Tensor at 0x7f00>
"""


def test_dump_families_and_accounting() -> None:
    ex = _parse(DUMP, rank_hint=3)
    ev = ex.events
    assert ev.select("line_no", "code", "rank").rows() == [(5, "cuda_sync", 3), (12, "collective", 3)]
    assert ev["kind"].unique().to_list() == ["pyspy_wait"] and ev["ts"].null_count() == 2
    assert ex.claimed.to_list() == [1, 2, *range(4, 16)]


def test_native_and_deepspeed_frames() -> None:
    ev = _parse('Thread 1302975 (active): "MainThread"\n'
                "    sched_yield (libc.so.6)\n"
                "    ncclAllReduce (collectives.cc:49)\n"
                'Thread 3297 (active): "MainThread"\n'
                "    all_gather_coalesced (deepspeed/runtime/zero/partition_parameters.py:1254)\n"
                'Thread 12 (idle): "pt_autograd_0"\n'
                "    cudaStreamSynchronize (libcudart.so.12)\n"
                'Thread 13 (gil): "x"\n'
                "    all_to_all_single (deepspeed/comm/comm.py:117)\n").events
    # the innermost frame above the C library's own waiting decides (sched_yield under ncclAllReduce); a
    # ZeRO-3 gather's own frame (deepspeed/runtime/zero) is not the comm layer
    assert ev.select("line_no", "code", "message").rows() == [
        (3, "collective", "ncclAllReduce (collectives.cc:49)"), (7, "cuda_sync", "cudaStreamSynchronize (libcudart.so.12)"),
        (9, "collective", "all_to_all_single (deepspeed/comm/comm.py:117)")]


def test_not_a_dump() -> None:
    # a Python traceback and a log line that mention Thread / frames in other shapes give nothing
    ex = _parse('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                "Thread 5 started working\n    all_reduce (torch/distributed/distributed_c10d.py:2501)\n")
    assert ex.events.is_empty() and ex.claimed.is_empty()
    assert pyspy.sniff(DUMP) > 0 and pyspy.sniff("Thread 5 started working\n") == 0


FIX = Path(__file__).resolve().parents[2] / "fixtures" / "pyspy"


def test_real_fixtures() -> None:
    def one(name: str):  # noqa: ANN202
        text = (FIX / name).read_text()
        ex = _parse(text)
        assert ex.claimed.to_list() == list(range(1, text.count("\n") + 1))  # every line of a dump
        return ex.events.select("line_no", "code").rows()

    assert one("tgi2099_native_nccl_allreduce.txt") == [(3, "collective")]
    assert one("xdit363_cuda_synchronize.txt") == [(2, "cuda_sync")]
    assert one("deepspeed6524_zero3_backward_no_wait.txt") == []

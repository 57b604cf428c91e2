"""forensics/host_names.py: a host named by a file's path and by the file's own lines is one host."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from forensics.analysis import analyze
from forensics.host_names import describe, is_part_of, path_hint_names


@pytest.mark.parametrize(("hint", "name", "part"), [
    ("worker-0", "llm-train-worker-0", True),   # a Kubernetes pod: the job name before the replica
    ("node-3", "node-3.cluster.local", True),   # a domain after the short name
    ("gpu_7", "rack2_gpu_7", True),
    ("node-1", "node-10", False),               # another node, not a longer name of this one
    ("worker-0", "worker-0", False),
    ("node-3", "xnode-3", False),               # no separator: another name
])
def test_a_longer_name_holds_the_hint_after_a_separator_or_before_a_domain(hint: str, name: str, part: bool) -> None:
    assert is_part_of(hint, name) is part


def _events(rows: list[tuple[int, str | None]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"file_id": pl.Int32, "host": pl.Utf8}, orient="row")


def test_a_hint_is_read_as_the_one_longer_name_its_file_gives() -> None:
    ev = _events([(0, "worker-0"), (0, "llm-worker-0"), (0, None), (1, "worker-1"), (1, "llm-worker-1"),
                  (2, "node-5"), (2, "node-6"), (2, "x-node-5"),   # two other names in the file: left alone
                  (3, "node-7")])                                   # only the hint: nothing to read
    got = path_hint_names(ev, {0: "worker-0", 1: "worker-1", 2: "node-5", 3: "node-7"})
    assert got == {"worker-0": "llm-worker-0", "worker-1": "llm-worker-1"}
    assert describe(got) == ["host names: 2 host names from file paths read as the longer names the files' own "
                             "lines give ('worker-0' as 'llm-worker-0', 'worker-1' as 'llm-worker-1')"]


def test_a_hint_two_files_read_differently_is_left_alone() -> None:
    ev = _events([(0, "worker-0"), (0, "jobA-worker-0"), (1, "worker-0"), (1, "jobB-worker-0")])
    assert path_hint_names(ev, {0: "worker-0", 1: "worker-0"}) == {}


def _pod_log(pod: str, rank: int, ip: str) -> str:
    return (f"{pod}:4{rank}:4{rank} [0] NCCL INFO Bootstrap : Using eth0:{ip}<0>\n"
            f"{pod}:4{rank}:9{rank} [0] NCCL INFO comm 0x5581f0a0 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId 8000 "
            "commId 0x7c1e5a44d2b3b1e9 - Init COMPLETE\n"
            f"[rank{rank}]: Traceback (most recent call last):\n"
            f"[rank{rank}]: RuntimeError: CUDA error: an illegal memory access was encountered\n" if rank == 1 else
            f"{pod}:4{rank}:4{rank} [0] NCCL INFO Bootstrap : Using eth0:{ip}<0>\n"
            f"{pod}:4{rank}:9{rank} [0] NCCL INFO comm 0x5581f0a0 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId 8000 "
            "commId 0x7c1e5a44d2b3b1e9 - Init COMPLETE\n")


def test_pod_logs_named_by_the_pod_give_one_host_per_pod(job_of: Callable[[dict[str, str]], Path],
                                                          tmp_path: Path) -> None:
    """`pods/llm-train-worker-1.log`: the path suggests `worker-1`, NCCL's prefix says
    `llm-train-worker-1`; the report has one host per pod and names the failing one in full."""
    job = job_of({f"pods/llm-train-worker-{r}.log": _pod_log(f"llm-train-worker-{r}", r, f"10.8.0.1{r}") for r in (0, 1)})
    rep = analyze(job, tmp_path / "out", html=False).report
    assert rep["job"]["hosts"] == ["llm-train-worker-0", "llm-train-worker-1"]
    v = rep["verdict"]
    assert (v["category"], v["culprit"]["host"], v["culprit"]["rank"]) == ("cuda_error", "llm-train-worker-1", 1), v
    # worker-0's lines all name their host (NCCL's prefix): only worker-1's traceback took the path's
    assert ("host names: 1 host name from file paths read as the longer name the files' own lines give "
            "('worker-1' as 'llm-train-worker-1')") in rep["warnings"]

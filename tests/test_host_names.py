"""forensics/host_names.py: a host named by a file's path and by the file's own lines is one host."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from forensics.analysis import analyze
from forensics.host_names import describe, describe_pods, is_part_of, path_hint_names, pod_node_names


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


def _pod_nodes(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame([(i + 1, p, "ns", n) for i, (p, n) in enumerate(rows)],
                        schema={"line_no": pl.Int64, "pod": pl.Utf8, "namespace": pl.Utf8, "node": pl.Utf8}, orient="row")


def test_pods_are_read_as_the_one_node_kubectl_shows_them_on() -> None:
    ev = _events([(0, "trainer-worker-0"), (1, "trainer-worker-1"), (2, "node-b"), (3, "jobset-w-0-0"),
                  (4, "trainer-worker-2"), (5, "other-host")])
    pods = _pod_nodes([("trainer-worker-0", "node-a"), ("trainer-worker-1", "node-b"),
                       ("trainer-worker-1", "node-b"),                       # the same pair twice (describe + events)
                       ("jobset-w-0-0-x7k2p", "node-c"),                      # a generated name; its hostname lacks the suffix
                       ("trainer-worker-2", "node-d"), ("trainer-worker-2", "node-e"),  # rescheduled: left alone
                       ("idle-pod", "node-f")])                               # a pod no log names
    names, moved = pod_node_names(ev, pods)
    assert names == {"jobset-w-0-0": "node-c", "trainer-worker-0": "node-a", "trainer-worker-1": "node-b"}
    assert moved == ["trainer-worker-2"]
    assert describe_pods(names, moved) == [
        "host names: 3 Kubernetes pods read as the nodes kubectl shows them on ('jobset-w-0-0' on 'node-c', "
        "'trainer-worker-0' on 'node-a', 'trainer-worker-1' on 'node-b')",
        "host names: 1 Kubernetes pod shown on more than one node kept as named ('trainer-worker-2')"]
    assert pod_node_names(ev, None) == ({}, [])


def test_a_suffix_that_two_generated_pods_share_names_neither() -> None:
    ev = _events([(0, "w-0")])
    assert pod_node_names(ev, _pod_nodes([("w-0-x7k2p", "n1"), ("w-0-bcdfg", "n2")])) == ({}, [])
    # `abcde` holds a vowel: Kubernetes never generates it, so this is another pod's own name
    assert pod_node_names(ev, _pod_nodes([("w-0-abcde", "n1")])) == ({}, [])


def test_a_pod_log_links_its_rank_to_the_node_whose_dmesg_names_the_gpu(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    """NCCL in the pods prints the pods' names, dmesg and describe name the nodes: with the pods read as
    their nodes the Xid's GPU (PCI 0000:04:00) is rank 1's (busId 4000 on that node)."""
    def nccl(pod: str, rank: int) -> str:
        return (f"{pod}:4{rank}:4{rank} [0] NCCL INFO Bootstrap : Using eth0:10.8.{rank}.7<0>\n"
                f"{pod}:4{rank}:2{rank} [0] NCCL INFO comm 0x55d3c0 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId 4000 "
                "commId 0x1f2e3d4c5b6a7988 - Init COMPLETE\n")
    describe_pods_text = (Path(__file__).parent / ".." / "fixtures" / "k8s" / "describe_pods_two_nodes.txt").read_text()
    job = job_of({
        "pods/llm-train-worker-0.log": nccl("llm-train-worker-0", 0) + (
            "[rank0]:[E1102 08:21:05.118000 41 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=5120, OpType=ALLREDUCE, NumelIn=1048576, "
            "NumelOut=1048576, Timeout(ms)=600000) ran for 600036 milliseconds before timing out.\n"),
        "pods/llm-train-worker-1.log": nccl("llm-train-worker-1", 1),
        "nodes/gke-a3-pool-7f3c/dmesg.log": (
            "[Mon Nov  2 08:10:58 2026] NVRM: Xid (PCI:0000:04:00): 79, pid=39, name=python, GPU has fallen off the bus.\n"),
        "describe-pods.txt": describe_pods_text,
    })
    rep = analyze(job, tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert (v["category"], v["culprit"]) == ("gpu_lost", {"host": "gke-a3-pool-7f3c", "rank": 1, "gpu": 0,
                                                          "pci_bus_id": "0000:04:00"}), v
    assert sorted(rep["job"]["hosts"]) == ["gke-a3-pool-7f3c", "gke-a3-pool-91d2"]
    assert ("host names: 2 Kubernetes pods read as the nodes kubectl shows them on ('llm-train-worker-0' on "
            "'gke-a3-pool-91d2', 'llm-train-worker-1' on 'gke-a3-pool-7f3c')") in rep["warnings"]

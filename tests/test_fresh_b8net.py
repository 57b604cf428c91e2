"""The real network / communication failure excerpts of fixtures/fresh/b8net (public threads held out from the
real samples and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the
verdict's category is the one the thread (or, where the thread is silent, the emitter's own documentation of that
message) concluded, `unknown` where neither names a cause, `none` for the healthy RCCL log; the culprit host/rank
is the one the thread or the root record names, the deciding evidence is the line a person would cite, and the
restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b8net"

# case -> (category, or "none" for no interruption; deciding signature; culprit (host, rank); (file, line) of the
# deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, tuple[str | None, int | None], tuple[str, int] | None, bool | None]] = {
    "nccltests252-ib-error4-from-peer-service-thread-closed": (
        "nccl_config", "nccl-ib-local-setup-error", ("kolyoz2", 4), ("all_reduce_perf.log", 14), None),
    "nccl1235-socket-closed-then-nccl-cuda-oom-local-rank3": (
        "oom", "cuda-oom", ("ng30903", None), ("slurm-job.out", 14), None),
    "stanfordalpaca207-one-line-ib-error12-from-peer": (
        "network_fabric", "nccl-ib-retry-exceeded", (None, None), ("train.log", 1), None),
    "deepep106-space-padded-ib-error5-hard-wrapped": (
        "unknown", "nccl-ib-flush-error", (None, None), ("test_internode.log", 1), None),
    "nccl799-ibv-modify-qp-enodev-roce-nccl278": (
        "nccl_config", "nccl-ibv-modify-qp", ("72bf7b08-26f3-4ebc-8b9d-85df3e4414c0", None), ("train.log", 7), None),
    "nccl562-ibv-create-qp-failed-srun-memlock": (
        "nccl_config", "nccl-ibv-resource-alloc", ("hai-a100-3", None), ("slurm.log", 4), False),
    "pytorch64926-elastic-c10d-store-failed-multiple-nics": (
        "nccl_config", "pt-store-rendezvous-failed", (None, None), ("run.log", 23), False),
    "llamafactory6849-socket-broken-pipe-progress-thread": (
        "unknown", "nccl-socket-peer-closed", (None, None), ("train.log", 4), None),
    "nccl1920-k8s-timestamped-reset-by-peer-bootstrap": (
        "unknown", "nccl-socket-peer-closed", (None, None), ("pod.log", 1), None),
    "rccltests163-mi50-rccl-init-healthy": ("none", None, (None, None), None, None),
}

# cases the analyzer still gets wrong after this batch's family rules
XFAIL: dict[str, str] = {}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b8net_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, (host, rank), cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, {"host": host, "rank": rank}, cite, restart)


def test_terminal_padded_rows_are_read_record_by_record(tmp_path: Path) -> None:
    """deepep106: the rows glued behind space padding are records of their own (the host `VM-17-82-centos`
    is read from them), and the evidence quotes the one record, not the whole pasted line."""
    report = analyze(FRESH / "deepep106-space-padded-ib-error5-hard-wrapped", tmp_path / "out", html=False).report
    assert "VM-17-82-centos" in report["job"]["hosts"]
    text = report["verdict"]["evidence"][0]["text"]
    assert text.endswith("vendor err 249") and "VM-17-82-centos" not in text


PAD = " " * 57

# variants of the families the b8net misses generalised to, beyond the posted lines, end to end:
# (file name, text, category, deciding signature, culprit host)
VARIANTS = {
    # ibvwrap.cc IBV_PTR_CHECK_ERRNO: the errno form, a completion queue, behind srun -l's task prefix
    "ibv-create-cq-enomem-srun-prefix": ("slurm-4412.out", (
        "3: gpu-a017:90211:90402 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.8.0.17<0>\n"
        "3: \n"
        "3: gpu-a017:90211:90402 [3] misc/ibvwrap.cc:240 NCCL WARN Call to ibv_create_cq failed with error "
        "Cannot allocate memory\n"
        "3: gpu-a017:90211:90402 [3] NCCL INFO transport/net_ib.cc:1012 -> 2\n"), "nccl_config",
        "nccl-ibv-resource-alloc", "gpu-a017"),
    # the memory-region form NCCL's troubleshooting guide quotes, the bare (pre-2.9) wrapper
    "ibv-reg-mr-bare": ("train.log", (
        "node03:5120:5188 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE ; OOB eth0:192.168.1.3<0>\n\n"
        "node03:5120:5188 [0] ibvwrap.c:212 NCCL WARN Call to ibv_reg_mr failed\n"
        "node03:5120:5188 [0] NCCL INFO net_ib.cc:780 -> 2\n"), "nccl_config", "nccl-ibv-resource-alloc", "node03"),
    # ibv_reg_mr_iova2 (NCCL >= 2.19) with the errno text, NCCL's default WARN timestamp in front
    "ibv-reg-mr-iova2-timestamped": ("rank0.log", (
        "\n[2025-03-02 10:11:12] h100-07:4410:4501 [2] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 "
        "failed with error Cannot allocate memory\n"
        "h100-07:4410:4501 [2] NCCL INFO transport/net_ib.cc:1240 -> 2\n"), "nccl_config",
        "nccl-ibv-resource-alloc", "h100-07"),
    # a terminal-padded paste whose row starts with INFO chatter: the WARN glued behind it is still read
    "padded-info-then-retry-exceeded": ("console.txt", (
        "node7:311:402 [2] NCCL INFO Channel 00/0 : 2[2] -> 10[2] [send] via NET/IB/2/GDRDMA" + PAD +
        "node7:311:402 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.9<4421> "
        "with error 12, opcode 0, len 0, vendor err 129 (Send)" + PAD +
        "node7:311:402 [2] NCCL INFO transport/net.cc:1137 -> 6\n"), "network_fabric", "nccl-ib-retry-exceeded",
        None),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants(variant: str, tmp_path: Path, job_of) -> None:
    name, text, category, signature, host = VARIANTS[variant]
    v = analyze(job_of({name: text}), tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == "crash" and v["category"] == category, v["summary"]
    assert v["evidence"][0]["signature"] == signature
    assert v["culprit"]["host"] == host, v["summary"]


def test_ibv_failure_of_a_device_gone_is_not_a_limit(tmp_path: Path, job_of) -> None:
    """`Call to ibv_create_qp failed with error Input/output error`: the device is in error, not a memlock limit;
    the allocation rule stays silent (no nccl_config verdict from it)."""
    v = analyze(job_of({"log.txt": "gpu12:900:955 [3] misc/ibvwrap.cc:254 NCCL WARN Call to ibv_create_qp failed "
                                    "with error Input/output error\n"}), tmp_path / "out", html=False).report["verdict"]
    assert all(e["signature"] != "nccl-ibv-resource-alloc" for e in v["evidence"]) and v["category"] != "nccl_config"

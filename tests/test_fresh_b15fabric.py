"""The real RDMA-fabric excerpts of fixtures/fresh/b15fabric (public threads held out from the real samples and from
every other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's category is the
one the thread concluded, the culprit is the one the thread names (none here), the deciding evidence is the line a
person would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b15fabric"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "ucx8229-ibv-create-cq-memlock-ulimit-64k": (
        "nccl_config", "ompi-pml-ucx-worker-failed", {"host": None}, ("mpirun.log", 2), False),
    "ucx5634-rc-mlx5-transport-retry-exceeded-96-nodes": (
        "network_fabric", "rdma-transport-retry-exceeded", {"host": None}, ("mpirun.log", 1), None),
    "ucx2684-rc-verbs-send-completion-retry-exceeded-roce": (
        "network_fabric", "rdma-transport-retry-exceeded", {"host": None}, ("mtt-stdout.log", 1), True),
    "fesom166-psp-ib-retry-counter-exceeded-rerun-ok": (
        "network_fabric", "pscom-openib-connection-broken", {"host": None}, ("job.out", 1), True),
    "ofi156-efa-tx-error-enotdir-security-group": ("nccl_config", None, {"host": None}, None, False),
    "ucx8746-create-cq-error-no-ib-node-osu-ran-healthy": ("none", None, {"host": None}, None, None),
    "ompi8403-openfabrics-device-init-warning-ucx-healthy": ("none", None, {"host": None}, None, None),
    "jdftx270-openib-port-not-used-hfi1-warning-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL: dict[str, str] = {
    "ofi156-efa-tx-error-enotdir-security-group": (
        "aws-ofi-nccl's `Request ... completed with error. RC: 20` and the EFA provider's `rxr_cq_write_tx_error: err: "
        "20, prov_err: Not a directory (20)` name no cause: the same completion error follows a peer instance's "
        "hardware failure, a peer process gone, or a security group without the self-referencing all-traffic rules "
        "(the maintainer's guess, which the poster confirmed); newer libfabric prints `Unresponsive receiver` with "
        "those three reasons, this one prints none. Reading RC 20 as the security group would be a guess"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b15fabric_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

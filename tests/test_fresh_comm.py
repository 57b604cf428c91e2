"""The real communication-layer excerpts of fixtures/fresh/comm (public threads held out from the real
samples; sources and conclusions in its README.md), analyzed end to end: the verdict's category is the
one the thread concluded, and none of them is a failure an automatic restart fixes."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "comm"

# case -> (expected category, deciding signature)
CASES: dict[str, tuple[str, str]] = {
    "nccl969-ib-collective-mismatch-pdsh": ("nccl_config", "nccl-ib-collective-mismatch"),
    "nccl928-ib-error4-acs-gdr": ("nccl_config", "nccl-ib-local-setup-error"),
    "nccl296-mismatched-collective-headerless": ("collective_desync", "nccl-mismatched-collective"),
    "opendde23-collective-fingerprint-shape": ("collective_desync", "pt-collective-mismatch"),
    "horovod552-tf-cuda-oom-horovod-shutdown": ("oom", "pt-cuda-oom"),
    "openr1mm7-rank0-bootstrap-no-socket-interface": ("nccl_config", "nccl-no-interface"),
    "aml58-k8s-invalid-rank-requested": ("nccl_config", "nccl-invalid-usage"),
    "pytorch69197-rdzv-tcpstore-connect-timeout": ("nccl_config", "pt-store-rendezvous-failed"),
}


def test_every_fixture_dir_has_a_case() -> None:
    dirs = {p.name for p in FRESH.iterdir() if p.is_dir()}
    assert dirs == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fresh_comm_verdict(case: str, tmp_path: Path) -> None:
    category, signature = CASES[case]
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category
    assert v["evidence"][0]["signature"] == signature
    # configuration, desync and OOM: a restart runs into the same failure
    assert v["auto_recoverable"] is False


def test_last_error_echo_names_the_nccl_setup_failure(tmp_path: Path) -> None:
    """PyTorch re-prints NCCL's last WARN under `Last error:`; that text, not the generic `internal error`
    of the exception line above it, decides (here a missing socket interface: configuration)."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank3.log").write_text(
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error - "
        "please report this issue to the NCCL developers, NCCL version 2.21.5\n"
        "[rank3]: ncclInternalError: Internal check failed.\n"
        "[rank3]: Last error:\n"
        "[rank3]: Bootstrap : no socket interface found\n")
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert (v["category"], v["evidence"][0]["signature"], v["evidence"][0]["line"]) == (
        "nccl_config", "nccl-no-interface", 4)

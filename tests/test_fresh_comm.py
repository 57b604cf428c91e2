"""The real communication-layer excerpts of fixtures/fresh/comm (public threads held out from the real
samples; sources and conclusions in its README.md), analyzed end to end: the verdict's category is the
one the thread concluded, and the restart decision is the thread's (only the network failure mid-run is
one an automatic restart gets past)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "comm"

# case -> (expected category, deciding signature, would an automatic restart fix it)
CASES: dict[str, tuple[str, str, bool]] = {
    "nccl969-ib-collective-mismatch-pdsh": ("nccl_config", "nccl-ib-collective-mismatch", False),
    "nccl928-ib-error4-acs-gdr": ("nccl_config", "nccl-ib-local-setup-error", False),
    "nccl296-mismatched-collective-headerless": ("collective_desync", "nccl-mismatched-collective", False),
    "opendde23-collective-fingerprint-shape": ("collective_desync", "pt-collective-mismatch", False),
    "horovod552-tf-cuda-oom-horovod-shutdown": ("oom", "pt-cuda-oom", False),
    "openr1mm7-rank0-bootstrap-no-socket-interface": ("nccl_config", "nccl-no-interface", False),
    "aml58-k8s-invalid-rank-requested": ("nccl_config", "nccl-invalid-usage", False),
    "pytorch69197-rdzv-tcpstore-connect-timeout": ("nccl_config", "pt-store-rendezvous-failed", False),
    "torchtune392-store-port-in-use-two-jobs": ("user_code", "pt-store-port-in-use", False),
    "horovod3611-k8s-socket-recv-timeout": ("network_fabric", "nccl-socket-io-timeout", True),
}


def test_every_fixture_dir_has_a_case() -> None:
    dirs = {p.name for p in FRESH.iterdir() if p.is_dir()}
    assert dirs == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fresh_comm_verdict(case: str, tmp_path: Path) -> None:
    category, signature, restart = CASES[case]
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category
    assert v["evidence"][0]["signature"] == signature
    assert v["auto_recoverable"] is restart


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


@pytest.mark.parametrize(("warn", "category", "signature"), [
    ("misc/socket.cc:503 NCCL WARN Net : Call to recv from 10.0.4.1<41468> failed : Connection timed out",
     "network_fabric", "nccl-socket-io-timeout"),
    ("misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.4.1<41468> failed : Connection timed out",
     "nccl_config", "nccl-socket-connect-failed"),
])
def test_socket_timeout_on_a_connection_vs_on_connecting(tmp_path: Path, warn: str, category: str,
                                                         signature: str) -> None:
    """Both lines end in ETIMEDOUT and neither job ran a step: failing to connect is a launch setting
    (precedence.toml init-socket-is-configuration), a connected socket that stops answering is not."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank5.log").write_text(f"gpu-b:4242:4300 [5] {warn}\n")
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert (v["category"], v["evidence"][0]["signature"]) == (category, signature)

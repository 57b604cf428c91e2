"""The real NCCL / c10d excerpts of fixtures/fresh/nccl (public threads held out from the real
samples; sources and conclusions in its README.md), analyzed end to end: the verdict's category
is the one the thread concluded. Cases no general rule can decide stay strict xfails with why."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "nccl"

# case -> (expected category, culprit host the log names or None, xfail reason or None)
CASES: dict[str, tuple[str, str | None, str | None]] = {
    "awsome192-socket-connect-abort-ifname": ("nccl_config", None, None),
    "nccl902-ib-error12-roce-timeout": ("network_fabric", None, None),
    "nccl2013-modify-qp-timeout-cross-nic": ("nccl_config", None, None),
    "nccl769-modify-qp-timeout-gid-index": ("nccl_config", None, None),
    "nccl2076-remote-error-reset-ib-nodes": (
        "network_fabric", None,
        "only the surviving rank's ncclRemoteError and its 'Last error: Connection reset by peer': a peer "
        "exiting and a failed network print the same, and precedence.toml treats remote errors alone as "
        "teardown; the thread's IB fault is in no log posted"),
    "nccl1141-remote-error-socket-ifname": (
        "nccl_config", None,
        "the one line posted is ncclRemoteError, which names neither the interface nor a phase; the "
        "NCCL_SOCKET_IFNAME fix is in prose only"),
    "nccl426-ib-error12-gid-index": (
        "nccl_config", None,
        "IB completion error 12 is a transport timeout whether the GID index is wrong or the NICs cannot "
        "reach each other (nccl902, real sample 217: network_fabric); one line without steps cannot tell"),
}


def test_every_fixture_dir_has_a_case() -> None:
    dirs = {p.name for p in FRESH.iterdir() if p.is_dir()}
    assert dirs == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fresh_nccl_verdict(case: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    category, host, why = CASES[case]
    if why:
        request.applymarker(pytest.mark.xfail(reason=why, strict=True))
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category
    if host is not None:
        assert v["culprit"]["host"] == host


def _job(tmp_path: Path, steps: bool) -> Path:
    """One rank's log: Megatron iterations (or none), then NCCL failing to bring a QP to RTR."""
    job = tmp_path / "job"
    job.mkdir()
    lines = []
    if steps:
        lines += [f"[2026-08-22 15:2{i}:22.123456] iteration      {100 * (i + 1)}/  500000 | consumed samples: "
                  f"{51200 * (i + 1)} | elapsed time per iteration (ms): 1234.5 | lm loss: 2.345678E+00 |"
                  for i in range(3)]
    lines.append("[2026-08-22 15:29:01.000000] gpu-a:4242:4300 [3] misc/ibvwrap.cc:262 NCCL WARN Call to "
                 "ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_3:1, curr state INIT, next "
                 "state RTR, local GID index 3, local GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.4.1")
    (job / "rank3.log").write_text("\n".join(lines) + "\n")
    return job


@pytest.mark.parametrize(("steps", "category"), [(False, "nccl_config"), (True, "network_fabric")])
def test_qp_connect_failure_depends_on_the_phase(tmp_path: Path, steps: bool, category: str) -> None:
    """precedence.toml ib-qp-connect-is-configuration: before any step the QP connect failure is a
    GID / HCA / rail configuration; after training ran it is the fabric changing under the job."""
    v = analyze(_job(tmp_path, steps), tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category
    assert any(e["signature"] == "nccl-ibv-modify-qp" for e in v["evidence"])

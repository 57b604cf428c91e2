"""The real communication-layer / hardware / driver excerpts of fixtures/fresh/b4sys (public threads
held out from the real samples and from every other fresh set; sources and conclusions in its
README.md), analyzed end to end: the verdict's kind and category are the ones the thread concluded
(`none` for the two logs where nothing failed), the culprit host is the one the thread names, the
deciding evidence is the line a person would cite, and the restart decision is the analyzer's
documented rule (where it differs from the thread's answer, RESTART_DISAGREES says why)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b4sys"

# case -> (category, or "none" for no interruption; deciding signature; culprit host the thread
# names; (file, line) of the deciding evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, str | None, tuple[str, int] | None, bool | None]] = {
    "nccl1292-net-plugin-symbol-info-only": ("none", None, None, None, None),
    "nccl258-cuda-gdb-peer-access-warnings": ("none", None, None, None, None),
    "nccl905-ib-async-port-error-flapping": ("network_fabric", "nccl-ib-port-error", None, ("export.txt", 1), True),
    "akash244-dmesg-T-xid94-contained-node4": ("gpu_memory", "xid-94", "node4", ("dmesg.log", 12), True),
    "akash209-dmesg-T-xid79-fallen-off-bus-node1": (
        "gpu_lost", "kernel-gpu-fell-off-bus", "node1", ("dmesg.log", 7), False),
    "nccl976-nvls-invalid-argument-headerless": (
        "nvlink", "nccl-nvls-cuda-failure", None, ("all_reduce_perf.log", 2), True),
    "trixie55-syslog-libcuda-segfaults-cn110": (
        "gpu_other_hardware", "kernel-user-fault-gpu-driver", "cn110", ("messages", 1), False),
    "raylightning24-pid-prefix-p2p-ipc-217": ("nccl_config", "nccl-cuda-ipc-failed", None, ("tune.log", 8), False),
    "nccl1611-gb200-ompi-signal-old-nccl": (
        "framework_bug", "pt-heap-corruption", None, ("12-nodes-NCCL-error.txt", 1), False),
    "okm688-journald-gpu-lost-dgx-station": (
        "gpu_lost", "kernel-gpu-is-lost", "abggdna-DGX-Station-A100", ("journalctl-k-b-1.log", 5), None),
}

# cases the analyzer cannot get right by a general rule within the files this work may change
XFAIL: dict[str, str] = {}

# the thread's restart answer against the analyzer's documented rule (precedence.toml [restart]):
# asserted as the analyzer decides, so that a change of either shows here
RESTART_DISAGREES = {
    "akash209-dmesg-T-xid79-fallen-off-bus-node1": (
        "the operator cordoned node1 and redeployed elsewhere (a restart without the node), but the log "
        "is node1's alone: a GPU loss with no other node in the logs is not auto-recoverable"),
    "trixie55-syslog-libcuda-segfaults-cn110": (
        "the admins drained cn110 (a restart without it fixes the job), but the syslog is cn110's alone: "
        "a suspect GPU with no spare node in the logs is not auto-recoverable"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b4sys_verdict(case: str, tmp_path: Path) -> None:
    category, signature, host, cite, restart = CASES[case]
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    if category == "none":
        assert (v["kind"], v["action"], v["culprit"]["host"]) == ("none", "none", None)
        return
    assert v["category"] == category
    assert v["evidence"][0]["signature"] == signature
    assert cite is not None and (Path(v["evidence"][0]["path"]).name, v["evidence"][0]["line"]) == cite
    if host is not None:
        assert v["culprit"]["host"] == host
    if restart is not None:
        assert v["auto_recoverable"] is restart, RESTART_DISAGREES.get(case, "")

"""Real application / storage / numerics / OOM / scheduler failure excerpts never seen while the rules
were written (fixtures/fresh/app, sources in its README): each job's verdict category, and the culprit
host where the log names one."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "fresh" / "app"

# (job dir, expected category, culprit host: a name, or None where the log names none)
CASES = [
    ("fairseq512-overflow-cascade-min-scale", "numerics", None),
    ("fairseq1895-stamped-overflow-notes", "numerics", None),
    ("pai-megatron60-nan-grad-norm-node", "numerics", "set-zw04-kubernetes-pc133.mt"),
    ("lsf-term-memlimit-souporcell", "oom", None),
    ("pbs-walltime-exceeded-canu", "time_limit", None),
    ("slime326-megatron-async-ckpt-eio", "storage", None),
    ("naifu35-rank3-eio-makedirs", "storage", None),
    ("torchxla3470-tpu-resource-exhausted", "oom", None),
    ("dmesg-iso-oom-kill-ert7797", "oom", None),
    ("torch10577-write-fd-eio-disk-full", "storage", None),
    ("h2o214-streamwriter-output-dir-full", "storage", None),
    ("determined5418-cuda-oom-rank-prefix", "oom", None),
    ("docker1001-journald-oom-kill-python3", "oom", "ubuntu-s-1vcpu-2gb-ams3-01"),
    ("rtx1680-dmesg-T-cgroup-oom-trace", "oom", None),
    ("ronin51-torch-save-cannot-open-disk-full", "storage", None),
    ("kubeflow1158-tf-philox-internal-oom", "oom", "worker-1"),  # the pod, from the file name
]


def test_every_fixture_has_a_case() -> None:
    assert {p.name for p in ROOT.iterdir() if p.is_dir()} == {c[0] for c in CASES}


@pytest.mark.parametrize(("case", "category", "host"), CASES, ids=[c[0] for c in CASES])
def test_fresh_app_verdict(tmp_path: Path, case: str, category: str, host: str | None) -> None:
    v = analyze(ROOT / case, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category
    assert v["culprit"]["host"] == host
    assert v["evidence"], "a verdict with no cited line"


def test_full_disk_is_not_restartable_but_an_io_error_is(tmp_path: Path) -> None:
    """The capacity members of the storage family (ENOSPC/EDQUOT) get stop_and_fix: a restart fails at the
    next write until space is freed; a bare I/O error keeps the storage default (restart)."""
    full = analyze(ROOT.parent / "sched" / "torch-save-enospc", tmp_path / "full", html=False).report["verdict"]
    assert (full["category"], full["action"], full["auto_recoverable"]) == ("storage", "stop_and_fix", False)
    eio = analyze(ROOT / "slime326-megatron-async-ckpt-eio", tmp_path / "eio", html=False).report["verdict"]
    assert (eio["category"], eio["action"], eio["auto_recoverable"]) == ("storage", "restart", True)

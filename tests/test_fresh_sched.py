"""Real scheduler / platform failure excerpts never seen while the rules were written
(fixtures/fresh/sched, sources in its README): each job's verdict category, and the culprit host
where the log names one (none where the poster redacted it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "fresh" / "sched"

# (job dir, expected category, culprit host: a name, or None where the log names none)
CASES = [
    ("slurm-timelimit-srun-step", "time_limit", None),
    ("slurm-step-timelimit-srun-terminated", "time_limit", "nid01934"),
    ("slurm-oom-kill-cgroup-step", "oom", "Orion-01-01"),
    ("slurm-oom-kill-stepid", "oom", "nid001277"),
    ("torch-save-enospc", "storage", None),
    ("stale-file-handle-log-write", "storage", None),
    ("slurm-preemption", "preemption", "cn119"),
    ("dataloader-killed-host-ram", "oom", None),
    ("k8s-evicted-memory-events", "oom", None),
    ("k8s-describe-evicted-ephemeral-storage", "storage", "xen15-142"),
]


def test_every_fixture_has_a_case() -> None:
    assert {p.name for p in ROOT.iterdir() if p.is_dir()} == {c[0] for c in CASES}


@pytest.mark.parametrize(("case", "category", "host"), CASES, ids=[c[0] for c in CASES])
def test_fresh_sched_verdict(tmp_path: Path, case: str, category: str, host: str | None) -> None:
    v = analyze(ROOT / case, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == category
    assert v["culprit"]["host"] == host
    assert v["evidence"], "a verdict with no cited line"

"""The real storage / filesystem failure excerpts of fixtures/fresh/b13store (public threads held out from the real
samples and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the verdict's
category is the one the thread concluded, the culprit is the one the thread names (none here), the deciding evidence is
the line a person would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b13store"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "pangeo258-dataloader-shm-unable-to-write-torch-file": (
        "oom", "pt-shm-exhausted", {"host": None}, ("train.log", 1), False),
    "flownet43-thallocator-unable-to-write-docker-shm": (
        "oom", "pt-shm-exhausted", {"host": None}, ("train.log", 1), False),
    "composer3543-s3-slowdown-checkpoint-upload": (
        "storage", "ckpt-object-store-error", {"host": None}, ("train.log", 1), True),
    "kerastuner390-savev2-no-space-left": ("storage", "pt-storage-full", {"host": None}, ("train.log", 1), None),
    "silnlp565-botocore-connection-closed-checkpoint-upload": (
        "storage", "ckpt-object-store-error", {"host": None}, ("train.log", 1), None),
    "gymidsgame7-readonly-hardcoded-media-path": ("user_code", None, {"host": None}, None, False),
    "sovits330-typedstorage-deprecated-warning-healthy": ("none", None, {"host": None}, None, None),
    "minicpm13-typedstorage-warning-demo-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "gymidsgame7-readonly-hardcoded-media-path": (
        "a bare `[Errno 30] Read-only file system: '/media'` reads the same for a filesystem the kernel remounted "
        "read-only after an error (storage) and for a path on a mount that was always read-only (the maintainer: a "
        "hard-coded results path); the log holds no kernel remount line or mount table to tell them apart"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b13store_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

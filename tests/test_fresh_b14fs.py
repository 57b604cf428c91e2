"""The real shared / network filesystem and I/O-hang excerpts of fixtures/fresh/b14fs (public threads held out from
the real samples and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the
verdict's category is the one the thread concluded, the culprit is the one the thread names (the silent NFS server for
a network filesystem outage, the head node that ran out of memory, else none), the deciding evidence is the line a
person would cite, and the restart decision is the thread's answer where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b14fs"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "parallelcluster2701-headnode-oom-then-fsx-lustre-lost": (
        "oom", "kernel-host-oom-kill", {"host": "ip-10-0-33-4"}, ("syslog", 1), None),
    "zfs3850-xen-guest-nfs-not-responding-hung-task": (
        "storage", "kernel-netfs-unreachable", {"host": "batalix"}, ("dmesg.log", 1), None),
    "colabtools3892-drive-disconnect-dataloader-filenotfound": ("storage", None, {"host": None}, None, None),
    "azurefuse579-blobfuse-mv-checkpoint-close-eio": (
        "storage", "pt-storage-oserror", {"host": None}, ("train.log", 3), None),
    "text4vis6-eio-reading-frame-dir-random": ("storage", "pt-storage-oserror", {"host": None}, ("train.log", 1), None),
    "pytorch8477-cephfs-torch-save-eintr": (
        "framework_bug", "syscall-eintr-not-retried", {"host": None}, ("train.log", 1), None),
    "rsmas512-stampede2-eio-mv-bad-interpreter-rerun-ok": (
        "storage", "pt-storage-oserror", {"host": None}, ("run_08_generate_burst_igram_70_8737129.e", 4), True),
    "capsnet5-nfs-busy-finalizer-training-fine-healthy": ("none", None, {"host": None}, None, None),
    "datasets6989-nfs-tmpdir-finalizer-continues-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "colabtools3892-drive-disconnect-dataloader-filenotfound": (
        "the cause (Colab's Google Drive FUSE mount disconnecting mid-run) is not in the log: all it holds is "
        "`FileNotFoundError: Caught FileNotFoundError in DataLoader worker process 1.` 3.5 h into training, which "
        "reads the same for a dataset manifest naming a file that never existed (user_code) and for a mount that "
        "lost its files (storage); the worker's own traceback, which might name the Drive path, is cut in the excerpt"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b14fs_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

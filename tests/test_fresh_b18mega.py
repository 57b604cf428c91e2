"""The framework-log excerpts of fixtures/fresh/b18mega (NeMo, torchtitan, DeepSpeed launcher, Megatron; public threads
held out from the real samples and from every other fresh set; sources and conclusions in its README.md), analyzed end
to end: the verdict's category is the one the thread concluded, the culprit is the host/rank the thread names (none
here), the deciding evidence is the line a person would cite, and the restart decision is the thread's answer where it
states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b18mega"

# case -> (category, or "none"; deciding signature; culprit fields the thread names; (file, line) of the deciding
# evidence; auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "nemospeech13996-nccl-no-net-id0-multinode": (
        "framework_bug", "nccl-topo-lookup-internal", {"host": None}, ("nemo_sft.log", 1), False),
    "torchtitan3476-dcp-pinned-mem-stager-keyerror": ("framework_bug", None, {"host": None}, None, False),
    "deepspeed3938-load-checkpoint-optim-states-sigkill": ("oom", None, {"host": None}, None, False),
    "megatronllm34-bad-grad-norm-skipped-healthy": ("none", None, {"host": None}, None, None),
    "nemospeech14938-onelogger-warnings-healthy": ("none", None, {"host": None}, None, None),
}

# cases the analyzer still gets wrong
XFAIL = {
    "torchtitan3476-dcp-pinned-mem-stager-keyerror": (
        "a bare `KeyError: <class 'type'>` under torch DCP's state-dict stager frame: that it is the framework's bug "
        "and not the user's state is the thread's comparison of the three async modes, not a line; a KeyError inside "
        "library frames reads the same for a user object the library cannot copy"),
    "deepspeed3938-load-checkpoint-optim-states-sigkill": (
        "the DeepSpeed launcher kills its workers right after `Loading checkpoint from ...optim_states.pt`, and nothing "
        "says why (no oom-killer line, no exit code in the excerpt): memory is the thread's title, not a line"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b18mega_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)

"""`interrupts.held`: a SIGINT/SIGTERM inside the block takes effect when it ends, through the handler
that was there before; and the two temporary folders made under it (the analysis' spill folder,
the output's temporary folder) are never left behind by an interrupt that lands right after the
folder is made (the window is opened on purpose: the signal is raised from inside the call that
makes the folder)."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import pytest

from forensics import analysis, interrupts, outputs

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "fixtures" / "jobs" / "021-dmesg-xid43-xid31-two-gpus-faulty-device" / "job"


class Stop(BaseException):
    pass


@pytest.fixture
def stopping() -> list[int]:
    """SIGINT and SIGTERM raise Stop (as the CLI's handler raises Interrupted); the signals seen."""
    seen: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        seen.append(signum)
        raise Stop

    before = {s: signal.signal(s, stop) for s in interrupts.INTERRUPTS}
    yield seen
    for s, h in before.items():
        signal.signal(s, h)


def test_a_signal_inside_waits_for_the_end_of_the_block(stopping: list[int]) -> None:
    ran = []
    with pytest.raises(Stop):
        with interrupts.held():
            signal.raise_signal(signal.SIGTERM)
            ran.append("after the signal")  # the block goes on
            signal.raise_signal(signal.SIGINT)
            ran.append("to its end")
    assert ran == ["after the signal", "to its end"]
    assert stopping == [signal.SIGTERM]  # the first one, once, by the handler that was there before
    assert signal.getsignal(signal.SIGINT).__name__ == "stop"  # put back


def test_no_signal_no_effect(stopping: list[int]) -> None:
    with interrupts.held():
        value = 1 + 1
    assert value == 2 and stopping == []
    with pytest.raises(Stop):
        signal.raise_signal(signal.SIGINT)  # outside the block: at once
    assert stopping == [signal.SIGINT]


def test_the_spill_folder_is_removed_when_the_interrupt_lands_as_it_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopping: list[int]) -> None:
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    made = tempfile.TemporaryDirectory

    def made_then_interrupted(*args: object, **kwargs: object) -> tempfile.TemporaryDirectory:
        d = made(*args, **kwargs)
        assert Path(d.name).is_dir()
        signal.raise_signal(signal.SIGINT)  # after the folder exists, before the caller holds its name
        return d

    monkeypatch.setattr(analysis.tempfile, "TemporaryDirectory", made_then_interrupted)
    with pytest.raises(Stop):
        analysis.analyze(JOB, tmp_path / "out", html=False)
    assert stopping == [signal.SIGINT]
    assert list(private.iterdir()) == []
    assert not (tmp_path / "out").exists()


def test_the_output_folder_is_removed_when_the_interrupt_lands_as_it_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopping: list[int]) -> None:
    made = tempfile.mkdtemp
    seen: list[Path] = []

    def made_then_interrupted(*args: object, **kwargs: object) -> str:
        d = made(*args, **kwargs)
        if Path(d).name.startswith(".r.tmp-"):  # (the spill folder is made by mkdtemp too)
            seen.append(Path(d))
            signal.raise_signal(signal.SIGINT)
        return d

    monkeypatch.setattr(outputs.tempfile, "mkdtemp", made_then_interrupted)  # (the one tempfile module)
    out = tmp_path / "outs" / "r"
    with pytest.raises(Stop):
        analysis.analyze(JOB, out, html=False)
    assert stopping == [signal.SIGINT] and len(seen) == 1
    assert not out.exists() and list(out.parent.iterdir()) == []  # no half report, no temp folder

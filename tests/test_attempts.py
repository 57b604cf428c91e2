"""Attempts from many witnesses (issue 16): simulated jobs whose attempts are told apart by the
scheduler, launcher banners, folders under other names, or not at all by the step counter."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate
from forensics.timeline import derive_times, sched_launches, sched_window
from parsers.records import UTC_DT

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
SEED = 202  # not the e2e seed


def _run(tmp: Path, name: str, **job: object) -> tuple[dict, dict]:
    sc = load_scenario(ROOT / f"{name}.toml")
    sc["job"].update(job)
    case = simulate(sc, tmp / name, SEED)
    exp = tomllib.loads((case / "expected.toml").read_text())
    return analyze(case / "job", tmp / "out", html=False).report, exp


def _check(rep: dict, exp: dict) -> None:
    assert len(rep["attempts"]) == len(exp["attempts"]), rep["attempts"]
    assert rep["verdict"]["kind"] == exp["verdict"]["kind"], rep["verdict"]["summary"]
    d, t = rep["downtime"], exp["downtime"]
    tol = max(30.0, 0.01 * t["wall_s"])
    for b in ("wall_s", "productive_s", "startup_s", "checkpoint_s", "lost_work_s", "termination_s",
              "restart_s", "slowdown_s"):
        assert abs(d[b] - t[b]) <= tol, (b, d, t)
    assert abs(d["goodput"] - t["goodput"]) <= 0.01, (d, t)
    for got, want in zip(rep["attempts"], exp["attempts"], strict=True):
        gs = datetime.fromisoformat(got["start"])
        assert abs((gs - datetime.fromisoformat(want["start"])).total_seconds()) <= 30, (got, want)
        assert got["end_reason"] in (want["end_reason"], "preemption")


@pytest.mark.parametrize(("name", "witness"), [
    ("requeue_append", {"sacct", "launcher", "silence"}),
    ("step_retry", {"sacct", "launcher"}),
])
def test_appended_attempts_found_by_scheduler_and_launcher(tmp_path: Path, name: str, witness: set[str]) -> None:
    rep, exp = _run(tmp_path, name)
    _check(rep, exp)
    # the step counter never goes back: only the scheduler and the launcher banners tell
    assert witness <= set(rep["attempts"][1]["witnesses"]), rep["attempts"]
    assert rep["attempts"][1]["first_step"] > rep["attempts"][0]["last_step"]
    assert rep["attempts"][-1]["end_reason"] == "completed"


@pytest.mark.parametrize("fmt", ["s{k}", "try-{k}", "retry_{k}"])
def test_attempt_folders_under_other_names(tmp_path: Path, fmt: str) -> None:
    rep, exp = _run(tmp_path, "attempt_dirs_named", attempt_dir=fmt)
    _check(rep, exp)
    assert [a["witnesses"] for a in rep["attempts"]] == [["folder"], ["folder"]]


def test_kernel_journal_days_before_never_stretches_an_attempt(tmp_path: Path) -> None:
    rep, exp = _run(tmp_path, "kernel_days_before")
    _check(rep, exp)
    assert rep["job"]["start"][:16] == exp["job"]["start"][:16]
    assert rep["downtime"]["startup_s"] < 200


def test_two_restarts_then_completed(tmp_path: Path) -> None:
    rep, exp = _run(tmp_path, "two_restarts_complete")
    _check(rep, exp)
    assert [a["end_reason"] for a in rep["attempts"]][-1] == "completed"
    a0 = rep["attempts"][0]
    assert a0["last_durable_checkpoint"] is not None and a0["first_step_time"] is not None


def _t(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


def test_sched_launches_requeues_and_sequential_steps() -> None:
    rows = pl.DataFrame({
        "step_id": [None, "0", "batch", "1", "2"],
        "start": [_t("2026-01-01T00:00:00"), _t("2026-01-01T00:00:00"), _t("2026-01-01T00:00:00"),
                  _t("2026-01-01T01:00:00"), _t("2026-01-01T01:00:10")],
        "end": [_t("2026-01-01T03:00:00"), _t("2026-01-01T00:59:00"), _t("2026-01-01T03:00:00"),
                _t("2026-01-01T03:00:00"), _t("2026-01-01T02:00:00")],
    }, schema_overrides={"start": UTC_DT, "end": UTC_DT})
    # step 2 overlaps step 1 (a helper beside the trainer): one launch only
    assert sched_launches(rows) == [_t("2026-01-01T01:00:00")]
    assert sched_window(rows) == (_t("2026-01-01T00:00:00"), _t("2026-01-01T03:00:00"))


def test_derive_times_brackets_unstamped_lines() -> None:
    ev = pl.DataFrame({
        "file_id": [0, 0, 0, 0, 1], "line_no": [1, 3, 5, 9, 2], "source": ["steps"] * 5,
        "kind": ["step"] * 5,
        "ts": [_t("2026-01-01T00:00:00"), None, _t("2026-01-01T00:00:40"), None, None],
        "ts_quality": ["exact", "missing", "exact", "derived", "relative"],
    }, schema_overrides={"ts": UTC_DT})
    files = pl.DataFrame({"file_id": [0, 1], "lines": [10, 3],
                          "last_ts": [_t("2026-01-01T00:01:00"), None]}, schema_overrides={"last_ts": UTC_DT})
    steps = pl.DataFrame({"file_id": [0], "line_no": [3], "ts": [None], "step": [2]},
                         schema_overrides={"ts": UTC_DT, "file_id": pl.Int32})
    out, tables = derive_times(ev.with_columns(pl.col("file_id").cast(pl.Int32)), {"train_steps": steps},
                               files.with_columns(pl.col("file_id").cast(pl.Int32)), ("train_steps",))
    got = dict(zip(zip(out["file_id"], out["line_no"], strict=True), out["ts"], strict=True))
    assert got[(0, 3)] == _t("2026-01-01T00:00:20")  # half way between its stamped neighbours
    # after the last stamped event: toward the file's last stamped line (line 11 = lines + 1)
    assert got[(0, 9)] == _t("2026-01-01T00:00:40") + (_t("2026-01-01T00:01:00") - _t("2026-01-01T00:00:40")) * 4 / 6
    assert got[(1, 2)] is None  # an uptime stamp without boot time stays relative
    assert out.filter(pl.col("line_no") == 3)["ts_quality"][0] == "derived"
    assert tables["train_steps"]["ts"][0] == _t("2026-01-01T00:00:20")


def test_hf_saves_without_an_end_line_are_durable_checkpoints(tmp_path: Path) -> None:
    rep, exp = _run(tmp_path, "hf_unstamped_saves")
    _check(rep, exp)
    assert rep["downtime"]["checkpoint_s"] > 0
    # the save at step 500 (no end line) is attempt 0's durable point: attempt 1 resumes from it
    assert rep["attempts"][0]["last_durable_checkpoint"] is not None
    assert rep["attempts"][1]["first_step"] == 501


def test_steps_of_a_log_without_any_time_stamp(job_of, tmp_path: Path) -> None:  # noqa: ANN001
    """A pasted excerpt with no stamp at all is one attempt of unknown span; its first and last
    steps are still its first and last step lines (they were null)."""
    lines = ["OVERFLOW! Skipping step. Attempted loss scale: 65536.0"]
    lines += [f"Train iter {n:>8} loss {50.0 / n:.6f} Grad Norm {9.5 - n / 100:.6f} 3.2{n % 10}s/it" for n in (101, 102, 103)]
    lines += ["OVERFLOW! Skipping step. Attempted loss scale: 32768.0", "Train iter      105 loss 0.4 Grad Norm 9.1 3.21s/it",
              "Validation loss 105: 0.512"]
    job = job_of({"train.log": "\n".join(lines) + "\n"})
    rep = analyze(job, tmp_path / "out", html=False).report
    (a,) = rep["attempts"]
    assert (a["start"], a["end"]) == (None, None)
    assert (a["first_step"], a["last_step"]) == (101, 105)
    ev = a["evidence"]
    assert (ev["first_step"]["path"], ev["first_step"]["line"]) == ("train.log", 2)
    assert (ev["last_step"]["path"], ev["last_step"]["line"]) == ("train.log", 6)


def test_saves_that_name_a_step_are_progress_when_no_step_line_is_logged(job_of, tmp_path: Path) -> None:  # noqa: ANN001
    """Lightning's ModelCheckpoint prints `Epoch E, global step N: ... saving model to ...` and
    nothing else here: the attempt reached steps 1000 to 3000, at those lines."""
    msg = ("[{t}][pytorch_lightning.utilities.rank_zero][INFO] - Epoch {e}, global step {n}: 'val_loss' reached "
           "{v:.5f} (best {v:.5f}), saving model to '/ckpt/epoch={e}-step={n}.ckpt' as top 1")
    lines = [msg.format(t=f"2025-03-0{1 + k} 10:0{k}:00,000", e=k, n=1000 * (k + 1), v=0.9 - k / 10) for k in range(3)]
    job = job_of({"train.log": "some preamble without a step\n" + "\n".join(lines) + "\n"})
    rep = analyze(job, tmp_path / "out", html=False).report
    (a,) = rep["attempts"]
    assert (a["first_step"], a["last_step"]) == (1000, 3000)
    ev = a["evidence"]
    assert (ev["first_step"]["line"], ev["last_step"]["line"], ev["last_step"]["from"]) == (2, 4, "save line")


def test_a_batch_counter_that_restarts_each_epoch_is_no_restart(job_of, tmp_path: Path) -> None:  # noqa: ANN001
    """MXNet's Speedometer counts batches within the epoch: Batch [80] of epoch 0 then Batch [20] of
    epoch 1 is progress. A counter that goes back while the epoch goes back too (resuming an
    earlier epoch after a crash) still is a restart."""
    def run(epochs: list[int], start: int = 0) -> list[str]:
        out, t = [], start
        for e in epochs:
            for b in (20, 40, 60, 80):
                t += 7
                out.append(f"2024-06-03 10:{t // 60:02d}:{t % 60:02d},044 Epoch[{e}] Batch [{b}]\t"
                           f"Speed: {2000 + b}.50 samples/sec\taccuracy=0.{b}1")
            t += 3
            out.append(f"2024-06-03 10:{t // 60:02d}:{t % 60:02d},100 Epoch[{e}] Time cost=28.{e}")
        return out
    one = run([0, 1, 2])
    rep = analyze(job_of({"train.log": "\n".join(one) + "\n"}), tmp_path / "a", html=False).report
    assert [(a["first_step"], a["last_step"], a["witnesses"]) for a in rep["attempts"]] == [(20, 80, [])]
    assert rep["attempts"][0]["evidence"]["last_step"]["line"] == 14  # Batch [80] of epoch 2
    crash = run([0, 1]) + ["2024-06-03 10:01:30,000 ERROR: Unexpected bus error encountered in worker."] + run([1, 2], 400)
    rep = analyze(job_of({"train.log": "\n".join(crash) + "\n"}), tmp_path / "b", html=False).report
    assert [(a["first_step"], a["last_step"]) for a in rep["attempts"]] == [(20, 80), (20, 80)]
    assert "step_reset" in rep["attempts"][1]["witnesses"]


@pytest.mark.parametrize("error", [
    ("Traceback (most recent call last):\n"
     "  File \"/usr/lib/python3.9/site-packages/torch/serialization.py\", line 423, in save\n"
     "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)\n"
     "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/176: "
     "file write failed\n", "storage"),
    ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB\n",
     "oom"),
])
def test_an_unstamped_log_beside_a_stamped_one_belongs_to_the_single_attempt(tmp_path: Path, error: tuple) -> None:
    """A job with one attempt (no boundary anywhere): a traceback saved on its own without stamps next to a stamped
    train log is that attempt's evidence, not left out of every attempt."""
    text, category = error
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text(
        "{'loss': 2.9043, 'learning_rate': 4.999641867738336e-05, 'epoch': 0.02}\n"
        "[INFO|trainer.py:2926] 2023-10-19 09:48:54,430 >> Saving model checkpoint to out/checkpoint-10\n"
        "[INFO|configuration_utils.py:458] 2023-10-19 09:48:55,234 >> Configuration saved in out/checkpoint-10/config.json\n")
    (job / "error.log").write_text(text)
    rep = analyze(job, tmp_path / "out", html=False).report
    assert rep["verdict"]["category"] == category, rep["verdict"]["summary"]

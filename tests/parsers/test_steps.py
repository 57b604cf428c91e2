"""parsers.steps: one test per format variant of shared/reference/step_logs.md, plus properties."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import steps
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "steps"


def frame(text: str) -> pl.DataFrame:
    return with_body(decode_lines(text.encode()).lines)


def parse(text: str, **ctx: object) -> Extraction:
    return steps.parse(frame(text), ParseContext(path="job/train.log", **ctx))  # type: ignore[arg-type]


def fixture(name: str, **ctx: object) -> Extraction:
    return parse((FIXTURES / name).read_text(encoding="utf-8"), **ctx)


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def rows(x: Extraction, table: str) -> list[dict]:
    return x.tables[table].to_dicts()


def kinds(x: Extraction) -> list[tuple[int, str, str | None]]:
    return [(r["line_no"], r["kind"], r["code"]) for r in x.events.to_dicts()]


def check_shape(x: Extraction, n_lines: int) -> None:
    assert x.events.schema == pl.Schema(EVENT_SCHEMA)
    for name in ("train_steps", "checkpoints"):
        assert x.tables[name].schema == pl.Schema(TABLE_SCHEMAS[name])
    claimed, ignored = set(x.claimed.to_list()), set(x.ignored.to_list())
    assert not claimed & ignored
    assert claimed | ignored <= set(range(1, n_lines + 1))
    assert set(x.events["line_no"].to_list()) <= claimed
    assert (x.events["source"] == "steps").all()


# --------------------------------------------------------------------------- Megatron-LM

def test_megatron_iteration_current() -> None:
    x = fixture("megatron_iteration_current.log", host_hint="node-3")
    check_shape(x, 6)
    s = rows(x, "train_steps")
    assert [r["line_no"] for r in s] == [1, 6]
    r = s[0]
    assert r["framework"] == "megatron" and r["step"] == 100 and r["total_steps"] == 500000
    assert r["ts"] == utc(2026, 8, 22, 15, 22, 22, 123456)
    assert r["step_time_s"] == pytest.approx(1.2345)
    assert r["loss"] == pytest.approx(2.345678)
    assert r["grad_norm"] == pytest.approx(0.567)
    assert r["throughput"] == pytest.approx(400.1)
    assert (r["skipped"], r["nan_iters"], r["host"]) == (0, 0, "node-3")
    # lm loss is taken before another loss printed after it
    assert s[1]["loss"] == pytest.approx(2.301234) and s[1]["step"] == 200
    ev = x.events.filter(pl.col("line_no") == 1).row(0, named=True)
    assert (ev["kind"], ev["code"], ev["severity"], ev["ts_quality"]) == ("step", "100", "info", "exact")
    assert ev["ts_raw"] == "2026-08-22 15:22:22.123456"
    assert ev["message"].startswith(" [2026-08-22 15:22:22.123456] iteration")
    # memory report ignored, timer block claimed without events
    assert x.ignored.to_list() == [2]
    assert {3, 4, 5} <= set(x.claimed.to_list())
    assert x.events["line_no"].to_list() == [1, 6]


def test_megatron_iteration_r08_seconds_stamp_and_first_loss() -> None:
    x = fixture("megatron_iteration_r08.log")
    r = rows(x, "train_steps")[0]
    assert r["ts"] == utc(2024, 6, 1, 10, 0, 0)
    assert r["step"] == 10 and r["step_time_s"] == pytest.approx(0.98)
    assert r["loss"] == pytest.approx(7.123456)  # lm loss preferred over load_balancing_loss


def test_megatron_first_loss_when_no_lm_loss() -> None:
    x = parse(" iteration        5/      10 | elapsed time per iteration (ms): 100.0 | mtp_1 loss: 3.500000E+00 |"
              " loss scale: 1.0 |\n")
    assert rows(x, "train_steps")[0]["loss"] == pytest.approx(3.5)


def test_megatron_iteration_no_timestamp_old() -> None:
    x = fixture("megatron_iteration_no_timestamp_old.log")
    check_shape(x, 2)
    s = rows(x, "train_steps")
    assert [(r["step"], r["total_steps"], r["skipped"], r["nan_iters"]) for r in s] == [(50, 2000, 1, 0),
                                                                                        (100, 2000, 2, 5)]
    assert s[0]["ts"] is None and s[0]["step_time_s"] == pytest.approx(1.5002)
    assert math.isnan(s[1]["loss"])
    assert kinds(x) == [(1, "step", "50"), (2, "nan", "nan"), (2, "step", "100")]  # no good step after it
    ev = x.events.to_dicts()
    assert ev[0]["ts_quality"] == "missing" and ev[0]["ts"] is None
    assert ev[2]["severity"] == "warning" and ev[1]["severity"] == "error"  # the step; the persisting NaN


def test_megatron_checkpoint_save_with_timer() -> None:
    x = fixture("megatron_checkpoint_save_with_timer.log")
    check_shape(x, 4)
    c = rows(x, "checkpoints")
    assert [(r["line_no"], r["event"], r["step"], r["path"]) for r in c] == [
        (1, "save_start", 1000, "/ckpt"), (2, "save_end", 1000, "/ckpt")]
    assert c[1]["duration_s"] == pytest.approx(42.51102)  # timer max, not the stamp difference
    assert c[0]["ts"] == utc(2026, 8, 22, 16, 0, 0, 1)
    assert kinds(x) == [(1, "checkpoint_save_start", "1000"), (2, "checkpoint_save_end", "1000")]
    assert x.claimed.to_list() == [1, 2, 3, 4]


def test_megatron_checkpoint_save_old_forms() -> None:
    x = fixture("megatron_checkpoint_save_old.log")
    c = rows(x, "checkpoints")
    assert [(r["event"], r["step"], r["path"]) for r in c] == [
        ("save_start", 2000, "/ckpt"), ("save_end", 2000, "/ckpt"),
        ("save_start", 3000, "/old/ckpt"), ("save_end", 3000, "/old/ckpt")]
    assert c[1]["duration_s"] is None  # no stamps, no timer
    assert c[3]["duration_s"] == pytest.approx(15.0)  # 'max time across ranks' variant
    assert x.claimed.to_list() == [1, 2, 3, 4, 5, 6]


def test_megatron_timers_all_ranks_variant() -> None:
    x = fixture("megatron_timers_all_ranks.log")
    c = rows(x, "checkpoints")
    assert c[0]["event"] == "save_end" and c[0]["duration_s"] == pytest.approx(31.5005)
    assert x.claimed.to_list() == [1, 2, 3, 4, 5]


def test_megatron_checkpoint_load() -> None:
    x = fixture("megatron_checkpoint_load.log")
    c = rows(x, "checkpoints")
    assert [(r["line_no"], r["event"], r["step"], r["path"]) for r in c] == [
        (1, "load_start", 1000, "/ckpt"), (2, "load_end", 1000, "/ckpt"), (5, "load_end", 500, "/ckpt")]
    assert c[1]["duration_s"] == pytest.approx(8.2005)
    assert [k for _, k, _ in kinds(x)] == ["checkpoint_load"] * 3


def test_megatron_fresh_start() -> None:
    x = fixture("megatron_fresh_start.log")
    check_shape(x, 5)
    assert kinds(x) == [(2, "train_start", "fresh"), (5, "train_start", "start")]
    assert x.events["ts"].to_list()[1] == utc(2026, 8, 22, 15, 20, 5, 500000)
    assert x.claimed.to_list() == [1, 2, 5]
    assert x.ignored.to_list() == [3, 4]


def test_megatron_exit_intentional() -> None:
    x = fixture("megatron_exit_intentional.log")
    assert kinds(x) == [(2, "train_end", "intentional"), (3, "train_end", "intentional"),
                        (4, "train_end", "done")]
    ev = x.events.to_dicts()
    assert ev[0]["ts"] == utc(2026, 8, 22, 17, 20, 1) and ev[0]["ts_quality"] == "exact"
    assert x.ignored.to_list() == [1]


# --------------------------------------------------------------------------- NeMo

def test_nemo_progress_printer() -> None:
    x = fixture("nemo_progress_printer.log")
    check_shape(x, 3)
    s = rows(x, "train_steps")
    assert [(r["framework"], r["step"], r["total_steps"]) for r in s] == [("nemo", 99, 1000), ("nemo", 100, 1000)]
    assert s[0]["loss"] == pytest.approx(2.345) and s[0]["step_time_s"] == pytest.approx(1.234)
    assert s[0]["ts"] == utc(2026, 5, 1, 12, 0, 0)
    assert math.isnan(s[1]["loss"])
    assert (2, "nan", "nan") in kinds(x)
    assert x.ignored.to_list() == [3]  # validation progress


def test_nemo_checkpoint_async_and_unfinished() -> None:
    x = fixture("nemo_checkpoint_async.log")
    check_shape(x, 4)
    c = rows(x, "checkpoints")
    path = "/results/checkpoints/megatron_gpt--step=1000-last.ckpt"
    assert [(r["line_no"], r["event"], r["step"], r["path"]) for r in c] == [
        (1, "save_start", 1000, path), (3, "save_end", 1000, path),
        (4, "save_failed", 2000, "/results/checkpoints/megatron_gpt--step=2000-last.ckpt")]
    assert c[1]["duration_s"] == pytest.approx(30.0)
    assert kinds(x) == [(1, "checkpoint_save_start", "1000"), (3, "checkpoint_save_end", "1000")]
    assert x.claimed.to_list() == [1, 2, 3, 4]


def test_nemo_checkpoint_epoch_stamp_without_prefix() -> None:
    x = parse("Checkpoint save for step 10 started at 1777637400.0.\n")
    c = rows(x, "checkpoints")[0]
    assert c["ts"] == utc(2026, 5, 1, 12, 10, 0) and c["step"] == 10
    assert x.events["ts_raw"][0] == "1777637400.0"


def test_nemo_lightning_bar() -> None:
    x = fixture("nemo_lightning_bar.log")
    r = rows(x, "train_steps")[0]
    assert (r["framework"], r["step"]) == ("lightning", 99)
    assert r["loss"] == pytest.approx(2.34) and r["step_time_s"] == pytest.approx(1.23)


def test_nemo_debug_prefix_rank() -> None:
    x = parse("[NeMo I 2026-05-01 12:00:00 nemo_logging:349 rank:5] Training epoch 0, iteration 1/9 | "
              "global_step: 1 | reduced_train_loss: 2.0\n")
    assert rows(x, "train_steps")[0]["rank"] == 5


# --------------------------------------------------------------------------- HF Trainer

def test_hf_trainer_banner_and_dicts() -> None:
    x = fixture("hf_trainer_banner_and_dicts.log")
    check_shape(x, 9)
    assert kinds(x) == [(1, "train_start", "start"), (5, "step", "1"), (6, "step", "2"),
                        (8, "checkpoint_save_start", "500"), (9, "train_end", "done")]
    s = rows(x, "train_steps")
    assert s[0]["loss"] == pytest.approx(2.3456) and s[0]["grad_norm"] == pytest.approx(1.2345)
    assert s[0]["total_steps"] == 1000 and s[0]["framework"] == "hf"
    assert x.events["ts"][0] == utc(2026, 5, 1, 12, 0, 0, 123000)
    assert rows(x, "checkpoints")[0]["path"] == "/out/checkpoint-500"
    assert x.ignored.to_list() == [7]  # eval dict
    assert {2, 3, 4} <= set(x.claimed.to_list())  # banner lines
    assert any("logging_steps unknown" in w for w in x.warnings)


def test_hf_dict_with_nan_loss() -> None:
    x = fixture("hf_dict_with_nan_loss.log")
    check_shape(x, 7)
    s = rows(x, "train_steps")
    assert [r["step"] for r in s] == [10, 20, 30]  # count x logging_steps=10
    assert math.isnan(s[1]["loss"]) and math.isinf(s[2]["loss"])
    assert [k for k in kinds(x) if k[1] == "nan"] == [(5, "nan", "nan"), (6, "nan", "nan")]
    c = rows(x, "checkpoints")[0]
    assert (c["step"], c["ts"]) == (30, utc(2026, 5, 1, 12, 30, 0))
    assert not x.warnings


def test_hf_resume_and_tqdm_on_same_line() -> None:
    x = fixture("hf_resume.log")
    check_shape(x, 9)
    c = rows(x, "checkpoints")
    assert [(r["event"], r["step"]) for r in c] == [("load_start", 500), ("load_end", 500)]
    s = rows(x, "train_steps")
    assert [(r["step"], r["total_steps"]) for r in s] == [(501, None), (520, 1000)]
    assert kinds(x)[-1] == (9, "train_end", "done")
    assert x.claimed.to_list() == list(range(1, 10))


def test_hf_string_values_and_extra_keys() -> None:
    x = parse("{'loss': '1.5', 'grad_norm': '0.25', 'learning_rate': 1e-05, 'num_tokens': 1000.0, 'epoch': 0.1}\n")
    r = rows(x, "train_steps")[0]
    assert (r["loss"], r["grad_norm"], r["step"]) == (1.5, 0.25, 1)


# --------------------------------------------------------------------------- DeepSpeed

def test_deepspeed_engine_steps_and_overflow() -> None:
    x = fixture("deepspeed_engine_steps.log")
    check_shape(x, 5)
    s = rows(x, "train_steps")
    assert [(r["step"], r["skipped"], r["throughput"], r["rank"]) for r in s] == [
        (100, 0, None, 0), (100, None, pytest.approx(125.10), None)]
    assert s[0]["ts"] == utc(2025, 12, 18, 20, 27, 22, 783000)
    assert kinds(x)[2:] == [(4, "nan", "overflow"), (5, "nan", "overflow")]
    assert x.events["severity"].to_list()[2:] == ["warning", "warning"]
    assert x.ignored.to_list() == [3]  # wall-clock breakdown


def test_deepspeed_wall_clock_breakdown_alone_is_read() -> None:
    """SynchronizedWallClockTimer.log (deepspeed/utils/timer.py) through log_dist, in the three wordings: the old
    `time (ms) | fwd_microstep: ...`, 0.9-0.14's `rank=0 time (ms) | ...` and the bare print of the newest, one
    of them glued behind a tqdm bar. A log of nothing else is sniffed as a step log and every line is read."""
    text = (
        "[2024-05-22 10:14:25,064] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: 499.07 | "
        "bwd_microstep: 1132.15 | bwd_inner_microstep: 1132.13 | bwd_allreduce_microstep: 0.00 | step_microstep: 0.12\n"
        "[2023-06-21 07:39:09,443] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | forward: 27.41 | "
        "backward: 73.44 | backward_inner: 50.99 | backward_allreduce: 22.40 | step: 72.82\n"
        "  3%|\u2588\u2588\u2588" + " " * 30 + "| 12/345 [00:07<06:50,  1.23s/it][2023-06-21 07:39:09,625] [INFO] "
        "[logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | optimizer_allgather: 7.96 | optimizer_gradients: 0.02 | "
        "optimizer_step: 60.64\n"
        "[Rank 0] time (ms) | fwd: 27.46 | bwd: 73.60 | bwd_inner: 51.05 | bwd_allreduce: 22.50 | step: 72.60\n")
    assert steps.sniff(text) >= 0.5
    x = parse(text)
    check_shape(x, 4)
    assert sorted(x.ignored.to_list()) == [1, 2, 3, 4]
    assert x.events.is_empty() and rows(x, "train_steps") == []
    # Megatron's old per-iteration timer line keeps its own reading (no `rank=`)
    assert steps.sniff("time (ms) | forward-compute: 58.16 | backward-compute: 42.66\n") >= 0.5


def test_zero3_trace_cache_invalidation_is_read_as_a_notice() -> None:
    """ZeRO-3's PartitionedParameterCoordinator.trace_prologue prints both wordings (print_rank_0, no prefix),
    one glued behind a tqdm bar: read, no event (the trace is recorded again; nothing failed)."""
    text = (
        "  0%|          | 0/900 [00:00<?, ?it/s]Invalidate trace cache @ step 10: expected module 11, but got module 19\n"
        "Invalidate trace cache @ step 10: expected module 11, but got module 19\n"
        "Invalidate trace cache @ step 0 and module 1458: cache has only 0 modules\n"
        "{'loss': 0.0, 'grad_norm': 6.722209930419922, 'learning_rate': 9.95e-07, 'epoch': 0.04}\n")
    assert steps.sniff(text) >= 0.5
    x = parse(text)
    check_shape(x, 4)
    assert {1, 2, 3} <= set(x.ignored.to_list())
    assert x.events.filter(pl.col("severity") != "info").is_empty()
    # ZeRO-3's real tracing failure is not this notice
    assert 1 not in parse("RuntimeError: tracing error at step 10: \n").ignored.to_list()


def test_deepspeed_pipeline_steps() -> None:
    x = fixture("deepspeed_pipeline_steps.log")
    s = rows(x, "train_steps")
    assert [(r["step"], r["loss"], r["step_time_s"], r["throughput"]) for r in s] == [
        (100, 2.3456, 1.234, 103.7), (200, 2.2, 1.22, 104.9)]
    assert s[0]["ts"] == utc(2025, 12, 18, 20, 30, 0, 100000) and s[1]["ts"] is None


def test_deepspeed_checkpoint_current() -> None:
    x = fixture("deepspeed_checkpoint.log")
    check_shape(x, 8)
    c = rows(x, "checkpoints")
    assert [(r["line_no"], r["event"], r["step"]) for r in c] == [
        (1, "save_start", 100), (5, "save_end", 100), (6, "load_start", 100), (7, "load_end", 100)]
    assert c[0]["path"] == "/ckpt/global_step100" and c[0]["rank"] == 0
    assert c[1]["duration_s"] == pytest.approx(9.5) and c[3]["duration_s"] == pytest.approx(3.0)
    assert x.claimed.to_list() == [1, 2, 3, 4, 5, 6, 7] and x.ignored.to_list() == [8]


def test_deepspeed_checkpoint_old() -> None:
    x = fixture("deepspeed_checkpoint_old.log")
    c = rows(x, "checkpoints")
    assert [(r["event"], r["step"], r["duration_s"]) for r in c] == [("save_start", 200, None),
                                                                    ("save_end", 200, 20.0)]


def test_deepspeed_min_loss_scale() -> None:
    x = parse("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n")
    assert kinds(x) == [(1, "nan", "loss_scale_min")] and x.events["severity"][0] == "error"


def test_tf_nan_tensor_hook_divergence() -> None:
    """TF Estimator's NanTensorHook, through Python logging and absl alike, and the NanLossDuringTrainingError
    it raises are each a NaN event; the LoggingTensorHook's `loss = X, step = N` beside them is a step; a
    finite loss that merely mentions NaN handling is neither."""
    x = parse(
        "INFO:tensorflow:loss = 11.164111, step = 1\n"
        "ERROR:tensorflow:Model diverged with loss = NaN.\n"
        "E0606 09:34:26.659411 46912496659904 basic_session_run_hooks.py:760] Model diverged with loss = NaN.\n"
        "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training.\n"
        "INFO:tensorflow:Using NanTensorHook to stop training when the loss becomes NaN\n")
    assert [k for k in kinds(x) if k[1] == "nan"] == [(2, "nan", "diverged"), (3, "nan", "diverged"),
                                                      (4, "nan", "diverged")]
    assert (1, "step", "1") in kinds(x)


# --------------------------------------------------------------------------- torchtitan

def test_torchtitan_tps_current() -> None:
    x = fixture("torchtitan_tps_current.log")
    check_shape(x, 5)
    s = rows(x, "train_steps")
    assert [(r["step"], r["loss"], r["grad_norm"], r["throughput"]) for r in s] == [
        (1, 12.26312, 4.1234, 3456.0), (11, 9.0, 2.0, 13456.0)]
    assert s[0]["ts"] == utc(2026, 5, 1, 12, 0, 10, 456000)
    assert s[0]["step_time_s"] is None and s[1]["step_time_s"] == pytest.approx(0.2)  # 2 s / 10 steps
    assert kinds(x)[0] == (1, "train_start", "start")
    assert x.ignored.to_list() == [4, 5]  # validation line, GC


def test_torchtitan_wps_old() -> None:
    x = fixture("torchtitan_wps_old.log")
    s = rows(x, "train_steps")
    assert [(r["step"], r["throughput"]) for r in s] == [(10, 2345.0), (20, 2300.0)]
    assert s[0]["loss"] == pytest.approx(7.1234) and math.isnan(s[1]["loss"])
    assert s[1]["step_time_s"] == pytest.approx(0.5)
    assert (2, "nan", "nan") in kinds(x)


def test_torchtitan_checkpoint() -> None:
    x = fixture("torchtitan_checkpoint.log")
    check_shape(x, 9)
    c = rows(x, "checkpoints")
    assert [(r["line_no"], r["event"], r["step"], r["duration_s"]) for r in c] == [
        (1, "load_start", 1000, None), (2, "load_end", 1000, 3.21), (4, "save_start", 1500, None),
        (5, "save_end", 1500, 12.34), (6, "save_start", 1500, None), (7, "save_end", 1500, 1.0),
        (8, "save_start", 2000, None)]
    assert c[0]["path"] == "./outputs/checkpoint/step-1000"
    assert kinds(x)[-1] == (9, "train_end", "data_exhausted")


def test_torchtitan_fresh_start() -> None:
    x = fixture("torchtitan_fresh.log")
    assert kinds(x) == [(2, "train_start", "fresh")] and x.ignored.to_list() == [1]


def test_torchtitan_ansi_colours() -> None:
    x = parse("[titan] 2026-05-01 12:00:10,456 - root - INFO - \x1b[31mstep:  7  \x1b[32mloss: 3.50000"
              "  \x1b[33mmemory: 1.0GiB(1.00%)  \x1b[34mtps: 1,000\x1b[39m\n")
    r = rows(x, "train_steps")[0]
    assert (r["step"], r["loss"], r["throughput"]) == (7, 3.5, 1000.0)


# --------------------------------------------------------------------------- Lightning

def test_lightning_tqdm_bar_and_info_lines() -> None:
    x = fixture("lightning_tqdm_bar.log")
    check_shape(x, 7)
    s = rows(x, "train_steps")[0]
    assert (s["framework"], s["step"], s["loss"]) == ("lightning", 3 * 1000 + 420, 2.31)
    assert s["step_time_s"] == pytest.approx(1 / 1.34)
    c = rows(x, "checkpoints")
    assert [(r["event"], r["step"], r["path"]) for r in c] == [
        ("save_start", 1000, "/ckpts/epoch=0-step=1000.ckpt"), ("load_start", None, "/ckpts/last.ckpt"),
        ("load_end", None, "/ckpts/last.ckpt")]
    assert kinds(x)[-1] == (7, "train_end", "done")
    assert x.ignored.to_list() == [2, 4]


def test_lightning_bar_cr_reduced() -> None:
    x = parse("Epoch 0:   1%|          | 1/100 [00:01<01:39,  1.00s/it, loss=9.0]\r"
              "Epoch 0:   2%|▏         | 2/100 [00:02<01:38,  2.00s/it, loss=8.5]\n")
    r = rows(x, "train_steps")
    assert len(r) == 1 and (r[0]["step"], r[0]["loss"], r[0]["step_time_s"]) == (2, 8.5, 2.0)


def test_lightning_bar_cut_at_the_terminal_width() -> None:
    """tqdm trims a bar to its `ncols` (format_meter's `disp_trim`): a long postfix loses the closing `]`.
    The bar as fresh/b5app lightning20542 posts it (Lightning-AI/pytorch-lightning#20542)."""
    x = parse('Epoch 10:  93%|█████████▎| 18626/20000 [5:43:21<25:19,  0.90it/s, v_num=0txx, train_loss=3.970, denoise_60%_expr=1.570, denoise_60%_emb_independence=0.068, denoise_60%_cls=0.386, denoise_60%_ecs=0.867, gen_expr=1...' + "\n")
    r = rows(x, "train_steps")
    assert len(r) == 1 and (r[0]["framework"], r[0]["step"]) == ("lightning", 10 * 20000 + 18626)
    assert r[0]["step_time_s"] == pytest.approx(1 / 0.90)


def test_lightning_slurm_auto_requeue_lines() -> None:
    """Lightning's SLURM auto-requeue (signal_connector.py) as its loggers print it: armed at start, the
    requeue signal, the `scontrol requeue` and its outcome, and the SIGTERM its handler bypasses."""
    x = parse("SLURM auto-requeueing enabled. Setting signal handlers.\n"
              "Epoch 3:  42%|####2     | 420/1000 [05:13<07:12,  1.34it/s, loss=2.31, v_num=1]\n"
              "Handling auto-requeue signal: 10\n"
              "requeing job 55595933...\n"
              "Requeued SLURM job: 55595933\n"
              "Requeuing SLURM job 777_3 failed with error code 1\n"
              "[rank: 0] Received SIGTERM: 15\n"
              "Bypassing SIGTERM: 15\n")
    assert [k for k in kinds(x) if k[1] == "requeue"] == [
        (1, "requeue", "enabled"), (3, "requeue", "signal"), (4, "requeue", "requeuing"), (5, "requeue", "requeued"),
        (6, "requeue", "failed"), (8, "requeue", "sigterm_bypassed")]
    assert {r["line_no"]: r["severity"] for r in x.events.to_dicts()}[6] == "warning"
    assert 7 not in x.claimed.to_list()  # the notifier's own `Received SIGTERM` is not the requeue's


# --------------------------------------------------------------------------- JSON lines

def test_jsonl_iso_time() -> None:
    x = fixture("jsonl_iso_time.jsonl")
    check_shape(x, 3)
    s = rows(x, "train_steps")
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in s] == [("jsonl", 100, 1.2), ("jsonl", 101, 1.3)]
    assert s[0]["loss"] == 2.3 and s[0]["grad_norm"] == 0.5
    assert s[1]["ts"] == utc(2026, 5, 1, 12, 0, 1, 500000) and math.isnan(s[1]["loss"])
    assert 3 not in x.claimed.to_list() + x.ignored.to_list()


def test_jsonl_epoch_time() -> None:
    x = fixture("jsonl_epoch_time.jsonl")
    s = rows(x, "train_steps")
    assert [(r["step"], r["loss"], r["step_time_s"]) for r in s] == [(7, 3.25, 1.5), (8, 3.2, 1.4)]
    assert s[0]["ts"] == utc(2026, 5, 1, 12, 0, 0, 500000) and s[1]["ts"] == utc(2026, 5, 1, 12, 0, 2)
    assert x.events["ts_quality"].to_list() == ["exact", "exact"]


# --------------------------------------------------------------------------- context

def test_rank_and_host_from_prefix_and_hints() -> None:
    text = ("[rank7]: iteration       10/     100 | lm loss: 1.0 |\n"
            "3: [default3]: iteration       11/     100 | lm loss: 1.0 |\n")
    x = parse(text, host_hint="gpu-9", rank_hint=42)
    s = rows(x, "train_steps")
    assert [(r["rank"], r["host"], r["line_no"]) for r in s] == [(7, "gpu-9", 1), (42, "gpu-9", 2)]


def test_naive_stamps_in_job_timezone_and_mpirun_stamp() -> None:
    x = parse(" [2026-01-15 09:00:00.000000] iteration 1/ 2 | lm loss: 1.0 |\n"
              "2026-01-15T08:00:05Z: [1,3]<stdout>: iteration 2/ 2 | lm loss: 1.0 |\n",
              tz=ZoneInfo("Europe/Berlin"))
    s = rows(x, "train_steps")
    assert s[0]["ts"] == utc(2026, 1, 15, 8, 0, 0)
    assert (s[1]["ts"], s[1]["rank"]) == (utc(2026, 1, 15, 8, 0, 5), 3)


def test_empty_and_unrelated_input() -> None:
    x = parse("")
    check_shape(x, 0)
    x = parse("node-1:1:1 [0] NCCL INFO Bootstrap : Using eth0\nhello\n")
    check_shape(x, 2)
    assert x.events.is_empty() and x.claimed.is_empty() and x.ignored.is_empty()


# --------------------------------------------------------------------------- sniff, fixtures

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*") if p.name != "README.md"))
def test_sniff_fixtures(name: str) -> None:
    assert steps.sniff((FIXTURES / name).read_text(encoding="utf-8")) >= 0.5


def test_sniff_unrelated() -> None:
    assert steps.sniff("node-1:1:1 [0] NCCL INFO Bootstrap : Using eth0\n[  12.3] NVRM: Xid 79\n") == 0.0


def test_fixture_readme_lists_every_file() -> None:
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for p in FIXTURES.glob("*"):
        if p.name != "README.md":
            assert f"`{p.name}`" in readme, p.name


def test_module_contract() -> None:
    assert steps.SPEC.name == "steps" and steps.SPEC.exclusive is False
    assert {"step", "checkpoint_save_start", "checkpoint_save_end", "checkpoint_load", "train_start",
            "train_end", "nan", "requeue", "train_steps", "checkpoints"} == set(steps.SPEC.extracts)


# --------------------------------------------------------------------------- properties

SAMPLES = [line for p in sorted(FIXTURES.glob("*")) if p.name != "README.md"
           for line in p.read_text(encoding="utf-8").splitlines()]


def _mutate(line: str, data: st.DataObject) -> str:
    ops = data.draw(st.lists(st.sampled_from(["cut", "insert", "digits", "drop"]), max_size=4))
    for op in ops:
        if not line:
            break
        i = data.draw(st.integers(0, len(line) - 1))
        if op == "cut":
            line = line[:i]
        elif op == "insert":
            line = line[:i] + data.draw(st.text(max_size=8)) + line[i:]
        elif op == "digits":
            line = line[:i] + data.draw(st.sampled_from(["9" * 30, "nan", "-inf", "1e999", "0", ",", "."])) + line[i:]
        else:
            line = line[:i] + line[i + 1:]
    return line


def _check_props(text: str) -> None:
    lines = frame(text)
    x = steps.parse(lines, ParseContext(path="p.log", rank_hint=1, host_hint="h"))
    check_shape(x, lines.height)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=120), max_size=8))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    _check_props("\n".join(lines))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_mutated_lines_never_raise(data: st.DataObject) -> None:
    picked = data.draw(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=10))
    _check_props("\n".join(_mutate(line, data) for line in picked) + "\n")


def test_hf_checkpoint_save_end_from_save_pretrained() -> None:
    text = ("[INFO|trainer.py:3410] 2026-05-01 12:00:00,123 >> Saving model checkpoint to /out/checkpoint-500\n"
            "[INFO|modeling_utils.py:2627] 2026-05-01 12:00:31,500 >> Model weights saved in /out/checkpoint-500/model.safetensors\n")
    ext = parse(text)
    ck = ext.tables["checkpoints"].sort("line_no")
    assert ck["event"].to_list() == ["save_start", "save_end"]
    assert ck["step"].to_list() == [500, 500]
    assert ck["duration_s"][1] == pytest.approx(31.377, abs=0.001)


# --------------------------------------------------------------------------- fp16 loss scaling and NaN persistence

def test_loss_scale_warmup_that_recovers_is_a_warning() -> None:
    """Dynamic loss scaling halving its scale during warm-up, then steady training: every skip stays
    `overflow` (a warning), whatever fp16 optimizer printed it."""
    x = parse(
        "OVERFLOW! Skipping step. Attempted loss scale: 8388608.0\n"
        "[2024-03-01 10:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768\n"
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0\n"
        "2024-03-01 10:00:03 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 8192.0\n"
        "[2024-03-01 10:00:04,000] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8192, but hysteresis is 2. Reducing hysteresis to 1\n"
        "Train iter       18 loss 40.572620 Grad Norm 24.962288 3.18s/it\n")
    assert [k for k in kinds(x) if k[1] == "nan"] == [(n, "nan", "overflow") for n in range(1, 6)]
    assert set(x.events.filter(pl.col("kind") == "nan")["severity"]) == {"warning"}
    assert ("step" in {k[1] for k in kinds(x)})  # the tacotron2 `Train iter` line is the step it is


def test_loss_scale_at_its_floor_is_a_numerics_error() -> None:
    """DeepSpeed unfused optimizer with min_loss_scale=1: every step overflows at scale 1 -> 1."""
    x = parse(
        "[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:275:_update_scale] Grad overflow on iteration: 445299\n"
        "[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:277:_update_scale] Reducing dynamic loss scale from 1 to 1\n"
        "[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:202:step] [deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1, reducing to 1\n"
        "{'loss': 3.2, 'learning_rate': 1e-05, 'epoch': 5.1}\n"
        "[2021-12-19 16:54:46,001] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1\n"
        "[2021-12-19 16:54:47,001] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4096, reducing to 2048\n")
    ev = [k for k in kinds(x) if k[1] == "nan"]
    assert ev == [(2, "nan", "loss_scale_min"), (3, "nan", "loss_scale_min"), (5, "nan", "loss_scale_min"),
                  (6, "nan", "overflow")]
    assert 1 in x.claimed.to_list()  # the 'Grad overflow on iteration' companion line


def test_skips_that_run_to_the_end_of_the_log_near_the_floor_are_persistent() -> None:
    """A trailing run of skips that has halved the scale to within three halvings of DeepSpeed's min_scale 1
    (here 64 -> 4) is the collapse `Current loss scale already at minimum` follows."""
    x = parse(
        "[2024-03-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=1000, skipped=3, lr=[1e-4], mom=[(0.9, 0.95)]\n"
        + "".join(f"[2024-03-01 10:00:0{i},000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                  f"Skipping step. Attempted loss scale: {2 ** (7 - i)}, reducing to {2 ** (6 - i)}\n" for i in range(1, 5))
        + "\n")
    assert [k for k in kinds(x) if k[1] == "nan"] == [(n, "nan", "overflow_persistent") for n in range(2, 6)]


def test_skips_that_end_the_log_at_a_high_scale_are_the_scaler_finding_its_level() -> None:
    """DeepSpeed's DynamicLossScaler halves from 2**16 / 2**32 one skipped step at a time at warm-up (and after
    a spike): a log ending inside such a run (32768 -> 2048; the warm-up from 2**32; the terminal-wrapped
    hysteresis lines) shows no collapse, each line stays a warning."""
    runs = [
        "[2024-03-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=1000, skipped=3, lr=[1e-4], mom=[(0.9, 0.95)]\n"
        + "".join(f"[2024-03-01 10:00:0{i},000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                  f"Skipping step. Attempted loss scale: {2 ** (16 - i)}, reducing to {2 ** (15 - i)}\n" for i in range(1, 5)),
        "".join(f"[2024-09-11 17:52:1{i},030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                f"Skipping step. Attempted loss scale: {2 ** (32 - i)}, reducing to {2 ** (31 - i)}\n" for i in range(6)),
        "Beginning of Epoch 1/16, Total Micro Batches 1840\n"
        "[2023-04-28 06:51:29,903] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
        "Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1\n"
        + "".join(f"[2023-04-28 06:51:3{i},648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                  f"Skipping step. Attempted loss scale: {2 ** (16 - i)}, reducing to {2 ** (15 - i)}\n" for i in range(3)),
        "".join(f"[2024-11-04 11:4{i}:27,623] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
                f"step. Attempted loss scal{' ' * 33}e: 8192, reducing to 4096\n" for i in range(4)),
    ]
    for text in runs:
        x = parse(text)
        nan = [c for _, k, c in kinds(x) if k == "nan"]
        assert nan and set(nan) == {"overflow"}, text
        assert set(x.events.filter(pl.col("kind") == "nan")["severity"]) == {"warning"}


def test_old_deepscale_tag_behind_tqdm_bars_is_read() -> None:
    """DeepSpeed < 0.5 ZeRO stage2.py / stage3.py tagged the line `[deepscale]`; glued behind tqdm bars (the prefix
    layer peels them) a run at scale 1 -> 1 is the floor."""
    bar = "  0%|\u258b" + " " * 40 + "| {}/24128 [00:40<2:40:10,  2.50it/s]"
    line = "[2021-11-27 00:36:5{},800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. " \
           "Attempted loss scale: 1, reducing to 1\n"
    x = parse(line.format(4) + "".join(bar.format(98 + i) + line.format(5 + i) for i in range(3)))
    assert [c for _, k, c in kinds(x) if k == "nan"] == ["loss_scale_min"] * 4


def test_nan_loss_that_recovers_is_a_warning() -> None:
    x = parse(
        "[2026-05-01 12:00:00] iteration      100/  500000 | lm loss: 2.345678E+00 | loss scale: 65536.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        "[2026-05-01 12:00:10] iteration      110/  500000 | lm loss: nan | loss scale: 32768.0 | number of skipped iterations:   1 | number of nan iterations:   1 |\n"
        "[2026-05-01 12:00:20] iteration      120/  500000 | lm loss: 2.301000E+00 | loss scale: 32768.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        "[2026-05-01 12:00:30] iteration      130/  500000 | lm loss: 2.290000E+00 | loss scale: 1.0 | number of skipped iterations:  10 | number of nan iterations:   0 |\n")
    nan = x.events.filter(pl.col("kind") == "nan").select("line_no", "code", "severity").rows()
    assert nan == [(2, "nan_recovered", "warning"), (4, "nan", "error")]


# --- generic step reader (issue 14 item 6): shapes beyond the named frameworks


def _steps_by_line(x: Extraction) -> dict[int, dict]:
    return {r["line_no"]: r for r in rows(x, "train_steps")}


def test_generic_shapes_read_step_loss_and_time() -> None:
    x = fixture("generic_step_shapes.log")
    s = _steps_by_line(x)
    got = {n: (r["framework"], r["step"], r["total_steps"], r["loss"], r["step_time_s"]) for n, r in s.items()}
    assert got[1] == ("generic", 120, 5000, 2.31, 0.84)  # Python logging `step N/M | loss X | Y s/step`
    assert got[2] == ("generic", 130, 5000, 2.29, 0.85)
    assert got[5] == ("generic", 140, 5000, 2.27, 0.83) and s[5]["grad_norm"] == 1.25  # `step_time=`
    assert got[7] == ("generic", 200, None, 4.68, 0.053)  # TF cifar10 `step N, loss = X (... Y sec/batch)`
    assert got[8] == ("generic", 210, None, 4.52, 0.053)
    assert got[9] == ("tf", 300, None, 0.6931, None)  # LoggingTensorHook: the (sec) is the whole interval
    assert got[10] == ("tf", 400, None, 0.6012, None)
    assert got[11] == ("dllogger", 500, None, 7.12, None) and got[12][1] == 510
    assert got[13] == ("fairseq", 600, None, 7.12, 0.25) and s[13]["grad_norm"] == 1.234  # 1 / ups
    assert got[14] == ("fairseq", 700, None, 6.98, 0.2) and s[14]["throughput"] == 15100.0
    assert got[15] == ("fairseq", 1250, None, 6.9, 0.25)  # the epoch summary `| num_updates 1250`
    assert got[16] == ("tqdm", 800, 1000, 2.3, 0.2)  # 5.00it/s
    assert got[17] == ("tqdm", 810, 1000, 2.29, 2.0)  # 2.00s/it
    assert got[18] == ("generic", 900, None, 1.95, 0.29)  # `Iteration N: train_loss=X, 290ms/step`
    assert s[1]["ts"] == utc(2024, 5, 1, 10, 0, 0, 101000)
    assert s[7]["ts"] == utc(2017, 3, 2, 11, 20, 31, 123456)
    assert s[11]["ts"] == utc(2020, 11, 4, 12, 0, 0, 123456)
    assert s[14]["ts"] == utc(2020, 9, 10, 10, 0, 0)
    assert [(n, k, c) for n, k, c in kinds(x) if k == "step"] == [(n, "step", str(s[n]["step"])) for n in sorted(s)]


def test_generic_shapes_counter_examples_are_not_steps() -> None:
    """A config dump (`steps: 1000`, `save_steps: 500`), `loss_scale: 1024`, NCCL INFO lines with
    numbers and a loss-scale skip message carry no step reading."""
    text = (FIXTURES / "generic_step_shapes.log").read_text(encoding="utf-8").splitlines()
    x = fixture("generic_step_shapes.log")
    n_bad = [n for n, t in enumerate(text, 1) if t.startswith(("steps:", "loss_scale", "max_steps"))
             or "NCCL INFO" in t or t.startswith("Skipping step")]
    assert len(n_bad) == 7
    assert not set(n_bad) & set(x.events["line_no"].to_list())
    assert not set(n_bad) & set(x.claimed.to_list())
    for line in ("steps: 1000", "loss_scale: 1024", "max_steps: 5000 warmup_steps: 100 save_steps: 500",
                 "global_step/sec: 8.21", "eval_step: 100 val_loss: 0.5",
                 "node-1:12:12 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7"):
        assert parse(line).events.is_empty(), line


def test_generic_checkpoint_lines() -> None:
    x = fixture("generic_step_shapes.log")
    ck = [(r["line_no"], r["event"], r["step"], r["path"], r["duration_s"]) for r in rows(x, "checkpoints")]
    assert ck == [(3, "save_start", 130, "/ckpt/run1/step_130.pt", None),
                  (4, "save_end", 130, "/ckpt/run1/step_130.pt", 2.1),
                  (6, "load_end", 130, "/ckpt/run1/step_130.pt", None)]
    assert [k for _, k, _ in kinds(x) if k.startswith("checkpoint")] == [
        "checkpoint_save_start", "checkpoint_save_end", "checkpoint_load"]
    y = parse('Saved checkpoint to "/ckpt/resnet-0003.params" in 4.5 s\nLoading checkpoint from /ckpt/a.ckpt ...')
    assert [(r["event"], r["path"], r["duration_s"]) for r in rows(y, "checkpoints")] == [
        ("save_end", "/ckpt/resnet-0003.params", 4.5), ("load_start", "/ckpt/a.ckpt", None)]


def test_fairseq_checkpoint_lines() -> None:
    # fairseq's checkpoint_utils / trainer messages (logger and print-era forms, a `@ N steps` copy)
    x = parse(
        "2024-03-01 10:00:00 | INFO | fairseq.trainer | Loaded checkpoint /ckpt/checkpoint_last.pt (epoch 1 @ 500 updates)\n"
        "2024-03-01 10:10:00 | INFO | fairseq.checkpoint_utils | Preparing to save checkpoint for epoch 1 @ 1000 updates\n"
        "2024-03-01 10:10:31 | INFO | fairseq.checkpoint_utils | Saved checkpoint /ckpt/checkpoint_1_1000.pt "
        "(epoch 1 @ 1000 updates, score 5.412) (writing took 30.5 seconds)\n"
        "| saved checkpoint checkpoints/checkpoint3.pt (epoch 3 @ 4500 updates) (writing took 2.0 seconds)\n"
        "Saved checkpoint /logs/epoch_2_800.pt (epoch 2 @ 800 steps) (writing took 1.25 seconds)\n"
        "2024-03-01 10:20:00 | INFO | fairseq.checkpoint_utils | saved checkpoint /ckpt/c.pt (epoch 1 @ 7 updates, score None)\n"
        "2024-03-01 10:30:00 | INFO | fairseq_cli.train | Saved checkpoints are kept in /ckpt\n")
    ck = [(r["line_no"], r["event"], r["step"], r["path"], r["duration_s"]) for r in rows(x, "checkpoints")]
    assert ck == [(1, "load_end", 500, "/ckpt/checkpoint_last.pt", None),
                  (2, "save_start", 1000, None, None),
                  (3, "save_end", 1000, "/ckpt/checkpoint_1_1000.pt", 30.5),
                  (4, "save_end", 4500, "checkpoints/checkpoint3.pt", 2.0),
                  (5, "save_end", 800, "/logs/epoch_2_800.pt", 1.25),
                  (6, "save_end", 7, "/ckpt/c.pt", None)]
    assert [k for _, k, _ in kinds(x) if k.startswith("checkpoint")] == [
        "checkpoint_load", "checkpoint_save_start", "checkpoint_save_end", "checkpoint_save_end",
        "checkpoint_save_end", "checkpoint_save_end"]
    assert rows(x, "checkpoints")[2]["ts"] == utc(2024, 3, 1, 10, 10, 31)


def test_mxnet_speedometer_real() -> None:
    x = fixture("mxnet_speedometer_real.log")
    s = rows(x, "train_steps")
    assert [(r["step"], r["throughput"]) for r in s[:4]] == [(20, 2015.42), (40, 2025.3), (60, 2018.21), (80, 2025.97)]
    assert [r["step"] for r in s] == [20, 40, 60, 80] * 2 + [20, 40]  # batch in its epoch, as printed
    assert [r["epoch"] for r in s] == [0] * 4 + [1] * 4 + [2] * 2  # the epoch it counts in
    assert all(r["framework"] == "mxnet" and r["loss"] is None for r in s)  # accuracy is no loss
    # Train-/Validation-accuracy and Time cost lines are read (claimed) and give no row
    assert x.claimed.len() == 16 and x.events.height == 10
    y = parse("INFO:root:Epoch[2] Batch [100]\tSpeed: 1200.50 samples/sec\tcross-entropy=1.234500")
    assert [(r["step"], r["loss"], r["throughput"]) for r in rows(y, "train_steps")] == [(100, 1.2345, 1200.5)]


def test_keras_epochs_give_global_steps_real() -> None:
    x = fixture("keras_verbose2_real.log")
    s = rows(x, "train_steps")
    # line 1 precedes `Epoch 12/200`: it is epoch 11's last batch
    assert [(r["line_no"], r["step"], r["total_steps"]) for r in s[:3]] == [
        (1, 11 * 1490, 200 * 1490), (3, 12 * 1490, 200 * 1490), (5, 13 * 1490, 200 * 1490)]
    assert s[0]["loss"] == 1.95e-05 and s[0]["step_time_s"] == pytest.approx(0.071) and s[2]["step_time_s"] == pytest.approx(0.072)
    assert len(s) == 11 and all(b["step"] - a["step"] == 1490 for a, b in zip(s, s[1:], strict=False))
    assert 2 not in {r["line_no"] for r in s} and 2 in x.claimed.to_list()  # `Epoch 12/200` read, no row
    y = parse("Epoch 3/50\n 60/120 [==============>...............] - ETA: 17s - loss: 0.2500\n"
              "120/120 [==============================] - 35s 290ms/step - loss: 0.1234 - val_loss: 0.2000\n")
    assert [(r["step"], r["total_steps"], r["loss"], r["step_time_s"]) for r in rows(y, "train_steps")] == [
        (300, 6000, 0.25, None), (360, 6000, 0.1234, pytest.approx(0.29))]


def test_tacotron2_steps_and_fp16_overflow_real() -> None:
    x = fixture("tacotron2_fp16_overflow_real.log")
    s = rows(x, "train_steps")
    assert [(r["step"], r["loss"], r["grad_norm"], r["step_time_s"]) for r in s[:2]] == [
        (16, 49.316841, 10.80046, 3.22), (18, 40.57262, 24.962288, 3.18)]
    assert [r["step"] for r in s] == [16, 18, 19, 20, 21, 22, 23, 24]
    nan = [(n, c) for n, k, c in kinds(x) if k == "nan"]
    assert nan == [(n, "overflow") for n in (1, 2, 3, 4, 5, 6, 7, 13)]
    y = parse("Train loss 123 0.532 Grad Norm 1.2 1.05s/it\n"
              "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n")
    assert [(r["step"], r["loss"], r["step_time_s"]) for r in rows(y, "train_steps")] == [(123, 0.532, 1.05)]
    assert ("nan", "overflow") in [(k, c) for _, k, c in kinds(y)]


def test_lightning_hydra_prefix_checkpoint_real() -> None:
    x = fixture("lightning_hydra_checkpoint_real.log")
    ck = rows(x, "checkpoints")
    assert [(r["event"], r["step"], r["ts"]) for r in ck] == [
        ("save_start", 2048, utc(2022, 4, 11, 14, 17, 41, 719000)),
        ("save_start", 4096, utc(2022, 4, 11, 14, 36, 41, 197000))]
    assert ck[0]["path"].endswith("/epoch=0-step=2048-val_loss=0.415-val_metric=0.751.ckpt")


def test_flagscale_straggler_report_step_real() -> None:
    x = fixture("flagscale_straggler_report_real.log")
    assert [(r["line_no"], r["framework"], r["step"]) for r in rows(x, "train_steps")] == [(2, "flagscale", 10)]


def test_fairseq_overflow_family_and_its_floor() -> None:
    """fairseq's three eras of the overflow line (`| WARNING:` print, `NOTE:` logger, 0.12's `NOTE: gradient
    overflow detected, ignoring gradient`) are skipped steps; fairseq's floor is 1e-4, so a scale of 0.5 or
    1.0 late in training stays a warning, and one within three halvings of 1e-4 is the collapse."""
    x = parse(
        "| WARNING: overflow detected, setting loss scale to: 0.5\n"
        "| epoch 082 | loss 3.530 | nll_loss 1.816 | ppl 3.52 | wps 416037 | ups 0.7 | num_updates 20839\n"
        "2020-03-23 11:39:44 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.0009765625\n"
        "2022-10-04 10:00:03 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 4.0\n"
        "2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.00048828125\n"
        "| WARNING: overflow detected, setting loss scale to: 0.0001220703125\n"
        "Traceback (most recent call last):\n")
    nan = [(n, c) for n, k, c in kinds(x) if k == "nan"]
    assert nan == [(1, "overflow"), (3, "overflow"), (4, "overflow"), (5, "loss_scale_min"), (6, "loss_scale_min")]
    ev = x.events.filter(pl.col("kind") == "nan")
    assert ev["severity"].to_list() == ["warning"] * 3 + ["error"] * 2


def test_fairseq_overflow_run_to_the_end_of_the_log_is_persistent_near_its_floor() -> None:
    """fairseq's floor is 1e-4: a trailing run ending at 64 -> 8 is the scaler at work; one that has fallen to
    within three halvings of 1e-4 is persistent, its last line at the floor band."""
    high = parse("".join(f"| WARNING: overflow detected, setting loss scale to: {2.0 ** (6 - i)}\n" for i in range(4)))
    assert [(n, c) for n, k, c in kinds(high) if k == "nan"] == [(n, "overflow") for n in range(1, 5)]
    low = parse("".join(f"| WARNING: overflow detected, setting loss scale to: {0.0064 / 2 ** i}\n" for i in range(4)))
    assert [c for _, k, c in kinds(low) if k == "nan"] == ["overflow_persistent"] * 3 + ["loss_scale_min"]


def test_every_rule_pattern_holds_a_rule_literal() -> None:
    """`_prepare` reads only the KEYWORDS lines holding a RULE_LITERALS (or, in any ASCII case,
    RULE_LITERALS_CI) literal: sound because each rule pattern's required literals (every match
    holds one; for the two patterns with none of three characters, of one) each hold one of them."""
    from forensics.triage import literal_factor

    short = 0
    for pat, _ in steps._rules():
        req = literal_factor(pat)
        if req is None:
            req = literal_factor(pat, 1)
            short += 1
        assert req is not None, pat
        for text, caseless in req:
            low = text.lower()
            assert (any(r.lower() in low for r in steps.RULE_LITERALS_CI)
                    or (not caseless and any(r in text for r in steps.RULE_LITERALS))), (pat, text)
    assert short == 2
    # a KEYWORDS line without a rule literal is not read; with one it is
    lines = with_body(decode_lines(b"[  3.1] nvidia-uvm: Loaded the UVM driver, major device number 510.\n"
                                   b"Loaded checkpoint from /ckpt/step_100\n").lines)
    assert steps._prepare(lines, ParseContext(path="x.log"))["line_no"].to_list() == [2]


def test_literal_regex_is_contains_any() -> None:
    import string

    from parsers.lines import literal_regex

    texts = pl.Series([string.punctuation + " \tx", "abc", "a<b", "", "Loaded the UVM driver"])
    for lits in ([c for c in string.punctuation + " \t"], ["<", ">"], ["a\\b"], ["x.y", "(elements)"], steps.KEYWORDS,
                 ["Loaded", "driver,"]):
        for lit in lits:
            assert texts.str.contains(literal_regex([lit])).to_list() == texts.str.contains_any([lit]).to_list(), lit
        assert texts.str.contains(literal_regex(lits)).to_list() == texts.str.contains_any(lits).to_list()
    with pytest.raises(ValueError):
        literal_regex([])


def test_pytorch_examples_train_epoch_lines() -> None:
    # pytorch/examples mnist/main.py: `'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'`; the counter is
    # the sample offset in the epoch (restarts each epoch), kept as printed with the epoch beside it
    x = parse("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300039\nTrain Epoch: 1 [640/60000 (1%)]\tLoss: 2.213470\n"
              "Train Epoch: 2 [0/60000 (0%)]\tloss=0.3021\n")
    s = rows(x, "train_steps")
    assert [(r["step"], r["epoch"], r["loss"], r["framework"]) for r in s] == [
        (0, 1, 2.300039, "generic"), (640, 1, 2.21347, "generic"), (0, 2, 0.3021, "generic")]
    assert all(r["total_steps"] is None for r in s)  # 60000 is the dataset size, not a step count
    assert parse("Test set: Average loss: 0.0330, Accuracy: 9894/10000 (99%)\n").events.height == 0


# nnU-Net print_to_log_file lines: v1 network_trainer.py (`epoch:  N` / `This epoch took %f s`),
# v2 nnUNetTrainer.py (`Epoch N` / `Epoch time: X s`)
NNUNET_V1 = """2021-05-19 13:58:41.260488: This epoch took 984.574277 s

2021-05-19 13:58:41.260515:\x20
epoch:  232
2021-05-19 14:11:34.923219: train loss : -0.7922
2021-05-19 14:11:58.867023: This epoch took 797.606469 s

2021-05-19 14:11:58.867113:\x20
epoch:  233
2021-05-19 14:26:37.462463: This epoch took 878.595276 s
"""
NNUNET_V2 = """2023-08-14 01:44:01.101112: Epoch 0
2023-08-14 01:44:01.101256: Current learning rate: 0.01
2023-08-14 01:46:36.118212: train_loss -0.2113
2023-08-14 01:46:36.118602: Epoch time: 155.02 s
2023-08-14 01:46:37.250113: Epoch 1
2023-08-14 01:49:08.902761: Epoch time: 151.65 s
"""


def test_nnunet_v1_epoch_times_are_steps_of_the_epoch_above() -> None:
    ex = parse(NNUNET_V1)
    rows = ex.tables["train_steps"].select("step", "epoch", "step_time_s", "framework").to_dicts()
    assert rows == [{"step": 232, "epoch": 232, "step_time_s": 797.606469, "framework": "nnunet"},
                    {"step": 233, "epoch": 233, "step_time_s": 878.595276, "framework": "nnunet"}]
    # the first epoch time has no epoch line above it (a log cut at its head): claimed, no step row
    assert 1 in set(ex.claimed.to_list())
    assert steps.sniff(NNUNET_V1) >= 0.9


def test_nnunet_v2_epoch_time_lines() -> None:
    ex = parse(NNUNET_V2)
    rows = ex.tables["train_steps"].select("step", "step_time_s", "framework").to_dicts()
    assert rows == [{"step": 0, "step_time_s": 155.02, "framework": "nnunet"},
                    {"step": 1, "step_time_s": 151.65, "framework": "nnunet"}]
    assert ex.tables["train_steps"]["ts"][0] == datetime(2023, 8, 14, 1, 46, 36, 118602, tzinfo=UTC)
    assert steps.sniff(NNUNET_V2) >= 0.9


def test_horovod_example_step_lines() -> None:
    # horovod/examples: tensorflow2_mnist.py `Step #%d\tLoss: %.6f`, the synthetic benchmarks' `Iter #%d: %.1f
    # img/sec per GPU`; behind horovodrun's --timestamp-output + rank tag (kubeflow/mpi-operator#444)
    text = ("Tue Dec  7 12:39:22 2021[2]<stdout>:Step #0     Loss: 2.122564\n"
            "Tue Dec  7 12:39:22 2021[0]<stdout>:Step #0\tLoss: 2.105374\n"
            "Tue Dec  7 12:39:24 2021[0]<stdout>:Step #10    Loss: 0.480093\n"
            "Fri Sep 11 07:06:58 2020[0]<stdout>:Iter #12: 96.6 img/sec per GPU\n"
            "[1]<stdout>:Iter #13: 97.0 img/sec per GPU\n")
    assert steps.sniff("Step #0\tLoss: 2.1\n") > 0 and steps.sniff("Iter #1: 9.5 img/sec per GPU\n") > 0
    x = parse(text)
    got = [(r["step"], r["rank"], r["loss"], r["throughput"]) for r in rows(x, "train_steps")]
    assert got == [(0, 2, 2.122564, None), (0, 0, 2.105374, None), (10, 0, 0.480093, None), (12, 0, None, 96.6),
                   (13, 1, None, 97.0)]
    check_shape(x, 5)
    # not a step line: a step counter with no loss, a loss without the Horovod shape
    assert rows(parse("Step #3 done\nIter #4: warming up\n"), "train_steps") == []


# --------------------------------------------------------------------------- VITS / tacotron2 checkpoint lines

def test_vits_logger_checkpoint_load_and_save() -> None:
    """VITS utils.py behind its tab-separated logger (so-vits-svc#36): the load of a checkpoint and the saves,
    the stamp read from the logger's asctime; the iteration VITS prints (its epoch) is kept apart from steps."""
    x = parse("2023-02-01 22:27:30,272\t32k\tINFO\tLoaded checkpoint './logs\\32k\\G_1000.pth' (iteration 1)\n"
              "2023-02-01 22:27:53,202\t32k\tINFO\tTrain Epoch: 1 [0%]\n"
              "2023-02-01 22:27:56,096\t32k\tINFO\tSaving model and optimizer state at iteration 1 to "
              "./logs\\32k\\G_0.pth\n"
              "2023-02-01 22:27:56,974\t44k\tWARNING\tSaving model and optimizer state at epoch 12 to "
              "logs/44k/D_12000.pth\n")
    c = rows(x, "checkpoints")
    assert [(r["line_no"], r["event"], r["path"]) for r in c] == [
        (1, "load_end", "./logs\\32k\\G_1000.pth"), (3, "save_start", "./logs\\32k\\G_0.pth"),
        (4, "save_start", "logs/44k/D_12000.pth")]
    assert c[0]["ts"] == utc(2023, 2, 1, 22, 27, 30, 272000)
    assert [k for _, k, _ in kinds(x)] == ["checkpoint_load", "checkpoint_save_start", "checkpoint_save_start"]


def test_tacotron2_checkpoint_print_forms() -> None:
    """NVIDIA tacotron2 / waveglow train.py print() forms: `Loading checkpoint '<p>'`, `Loaded checkpoint '<p>'
    from iteration N`, and a save line with a trailing validation score (tacotron2 forks)."""
    x = parse("Loading checkpoint 'outdir/checkpoint_4000'\n"
              "Loaded checkpoint 'outdir/checkpoint_4000' from iteration 4000\n"
              "Saving model and optimizer state at iteration 5000 to outdir/checkpoint_5000. Validation score = "
              "0.41321, Attention score = 0.61234\n")
    assert [(r["event"], r["path"]) for r in rows(x, "checkpoints")] == [
        ("load_start", "outdir/checkpoint_4000"), ("load_end", "outdir/checkpoint_4000"),
        ("save_start", "outdir/checkpoint_5000")]


def test_vits_sniff_reads_a_checkpoint_only_head() -> None:
    assert steps.sniff("2023-02-01 22:27:30,272\t32k\tINFO\tLoaded checkpoint './G_1000.pth' (iteration 1)\n") == 0.5
    assert steps.sniff("Loaded checkpoint weights for the tokenizer\n") == 0.0


def test_counter_first_step_lines_of_custom_loops() -> None:
    """Custom loops that print the count before the word (`06000 iter`, `1200 iters]`, `450 steps |`) are step
    rows with their loss; a NaN loss there with no good row after it is a `nan` error. A count of something else
    (`3 steps` without a loss near it, DeepSpeed's `Rank 0 Skipping step`) is no step."""
    x = parse(
        "000 epoch, 00000 iter, average time 7.0951, loss 37.2266\n"
        "000 epoch, 02000 iter, average time 0.6359, loss -403.4386\n"
        "[1200 iters] loss=2.10 lr=1e-4\n"
        "epoch 3 | 450 steps | loss: 1.93 | 0.41 s/step\n"
        "Warmup done after 3 steps\n"
        "000 epoch, 06000 iter, average time 0.6607, loss nan\n")
    s = rows(x, "train_steps")
    assert [(r["line_no"], r["step"]) for r in s] == [(1, 0), (2, 2000), (3, 1200), (4, 450), (6, 6000)]
    assert [r["loss"] for r in s][:4] == [37.2266, -403.4386, 2.10, 1.93] and math.isnan(s[4]["loss"])
    assert s[3]["step_time_s"] == 0.41
    assert [k for k in kinds(x) if k[1] == "nan"] == [(6, "nan", "nan")]
    assert steps.sniff("000 epoch, 02000 iter, average time 0.6359, loss -403.4386\n") > 0


def test_wandb_terminal_lines_are_claimed_without_rows() -> None:
    """wandb's terminal printer (`wandb: `, `wandb: WARNING `, `wandb: ERROR `: run start, retries, the
    tracker's API errors) is claimed without a row or event; the step lines around it stay steps (fresh/b12ok
    wandb4537, wandb8683). Only the printer's head is claimed: a loop's own line that mentions wandb is read
    as what it is (here a step row)."""
    text = (
        "wandb: Currently logged in as: someone. Use `wandb login --relogin` to force relogin\n"
        "Epoch 0:   1%|▋         | 44/4943 [00:11<21:31,  3.79it/s, loss=7.11, v_num=z34s]\n"
        "wandb: ERROR Error while calling W&B API: internal database error (<Response [500]>)\n"
        "wandb: Network error (ReadTimeout), entering retry loop.\n"
        'wandb: 500 encountered ({"errors":[{"message":"An internal error occurred."}]}), retrying request\n'
        "Epoch 0:   1%|▉         | 60/4943 [00:14<20:16,  4.01it/s, loss=6.37, v_num=z34s]\n"
        "Saving the run to wandb: step 60 loss 6.37\n"
    )
    x = parse(text)
    check_shape(x, 7)
    assert {1, 3, 4, 5} <= set(x.claimed.to_list())
    assert not x.events.filter(pl.col("line_no").is_in([1, 3, 4, 5])).height
    assert [(r["line_no"], r["step"]) for r in rows(x, "train_steps")] == [(2, 44), (6, 60), (7, 60)]


def test_mmcv_and_mmengine_text_logger_rows_carry_step_and_data_time() -> None:
    """OpenMMLab's text loggers (mmcv TextLoggerHook `_log_info`, mmengine LogProcessor): the by-epoch row's
    iteration within its epoch, the interval's mean `time` and `data_time`, the loss; a val row and the
    workflow line are read without a row (fresh/b21slow mmpretrain408)."""
    text = (
        "2021-08-17 16:49:31,759 - mmcls - INFO - workflow: [('train', 1)], max: 100 epochs\n"
        "2021-08-17 17:00:17,073 - mmcls - INFO - Epoch [1][100/5005]    lr: 1.000e-01, eta: 37 days, 5:46:17, "
        "time: 6.430, data_time: 5.762, memory: 3086, loss: 6.8864\n"
        "Iter [400/160000]\tlr: 9.998e-03, eta: 1 day, 2:03:04, time: 0.583, data_time: 0.012, memory: 7345, "
        "decode.loss_ce: 0.9123, loss: 1.3012\n"
        "Epoch(train)  [1][   1/1051]  lr: 9.0530e-09  eta: 8 days, 4:44:34  time: 33.6969  data_time: 31.8698  "
        "memory: 17929  loss: 7.6343  loss_cls: 3.1140\n"
        "Epoch(val) [1][ 50/500]    eta: 0:00:21  time: 0.0473  data_time: 0.0051  memory: 1466\n"
    )
    x = parse(text)
    check_shape(x, 5)
    s = rows(x, "train_steps")
    assert [(r["line_no"], r["framework"], r["step"], r["epoch"], r["total_steps"]) for r in s] == [
        (2, "mmcv", 100, 1, 5005), (3, "mmcv", 400, None, 160000), (4, "mmcv", 1, 1, 1051)]
    assert [(r["step_time_s"], r["data_time_s"], r["loss"]) for r in s] == [
        (6.43, 5.762, 6.8864), (0.583, 0.012, 1.3012), (33.6969, 31.8698, 7.6343)]
    assert 1 in set(x.claimed.to_list()) and 5 in set(x.ignored.to_list())


def test_metriclogger_rows_one_line_and_wrapped() -> None:
    """torchvision references' MetricLogger.log_every rows (`header  [ n/N]  eta: ..  meters  time: T  data: D
    max mem: M`): step and total from the counter, step / data time from the tail; a row wrapped over lines
    (as VindLU's was posted, fresh/b21slow vindlu10) takes its step from the head line above the tail."""
    one = ("Epoch: [0]  [  10/5005]  eta: 16:04:31  lr: 0.1  img/s: 12.32699510677423  loss: 6.9894 (6.9822)  "
           "acc1: 0.0000 (0.0000)  acc5: 0.0000 (0.2841)  time: 11.5858  data: 5.7029  max mem: 3524\n")
    s = rows(parse(one), "train_steps")
    assert [(r["framework"], r["step"], r["total_steps"], r["step_time_s"], r["data_time_s"], r["loss"]) for r in s] == [
        ("metriclogger", 10, 5005, 11.5858, 5.7029, 6.9894)]
    wrapped = (
        " utils.basic_utils: Train Epoch: [0]  [  200/10175]  eta: 2 days, 11:04:48  \n"
        "lr: 0.000002  temperature: 0.0702  image-loss_vtc: 6.2285  \n"
        "time: 40.1906  data: 38.0570  max mem: 10768 res mem: 11456\n"
        "time: 1.0  data: 0.5\n")
    x = parse(wrapped)
    check_shape(x, 4)
    s = rows(x, "train_steps")
    assert [(r["line_no"], r["step"], r["total_steps"], r["step_time_s"], r["data_time_s"]) for r in s] == [
        (3, 200, 10175, 40.1906, 38.057), (4, 200, 10175, 1.0, 0.5)]
    # a tail with no head above it has no step: no row
    assert rows(parse("time: 40.1906  data: 38.0570  max mem: 10768\n"), "train_steps") == []


def test_centernet_progress_row_and_mxnet_iter_speedometer() -> None:
    """CenterNet's progress.Bar suffix (`train: [E][n/N]|Tot: .. |loss X |.. |Data v(avg)s |Net avg s`): the
    step time is the Net mean, the data wait the Data mean (fresh/b21slow centernet604). MXNet's
    Speedometer without an eval metric (`Iter[E] Batch [n]\\tSpeed: X samples/sec`) is read as its `Epoch[` rows (mxnet223)."""
    cn = ("ctdet/coco_dla |##########                      | train: [54][4784/14785]|Tot: 1:20:53 |ETA: 6:14:23 "
          "|loss 1.7448 |hm_loss 1.3093 |wh_loss 2.2258 |off_loss 0.2129 |Data 3.556s(0.517s) |Net 1.014s\n")
    s = rows(parse(cn), "train_steps")
    assert [(r["framework"], r["step"], r["epoch"], r["total_steps"], r["step_time_s"], r["data_time_s"], r["loss"])
            for r in s] == [("centernet", 4784, 54, 14785, 1.014, 0.517, 1.7448)]
    mx = ("INFO:root:Start training with [gpu(0), gpu(1), gpu(2)]\n"
          "INFO:root:Iter[0] Batch [10]    Speed: 201.07 samples/sec\n"
          "INFO:root:Iter[0] Batch [20]    Speed: 188.29 samples/sec\n")
    x = parse(mx)
    check_shape(x, 3)
    assert [(r["framework"], r["step"], r["epoch"], r["throughput"]) for r in rows(x, "train_steps")] == [
        ("mxnet", 10, 0, 201.07), ("mxnet", 20, 0, 188.29)]
    assert ("train_start", "start") in {(k[1], k[2]) for k in kinds(x)}

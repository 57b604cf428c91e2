"""Tests for parsers.gpuburn: gpu_burn (wilicc/gpu-burn) and gpu-fryer (huggingface) console output from
public threads (fixtures/gpuburn/README.md), one gpu-fryer report written from its Display impls."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.signatures import load_catalog, match
from parsers import dcgm, gpuburn, nccl_tests
from parsers.lines import decode_lines, with_body
from parsers.records import Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "gpuburn"


def run(text: str) -> tuple[Extraction, pl.DataFrame]:
    lines = with_body(decode_lines(text.encode()).lines)
    return gpuburn.parse(lines, ParseContext(path="gpu_burn.log")), lines


def fixture(name: str) -> tuple[Extraction, pl.DataFrame]:
    return run((FIX / name).read_text(encoding="utf-8"))


def unread(ex: Extraction, lines: pl.DataFrame) -> list[str]:
    left = set(lines["line_no"].to_list()) - set(ex.claimed.to_list()) - set(ex.ignored.to_list())
    return [lines["body"][i - 1] for i in sorted(left) if lines["body"][i - 1].strip()]


def results(ex: Extraction) -> list[tuple]:
    return ex.events.select("line_no", "gpu", "code").rows()


def sigs(ex: Extraction) -> set[tuple[int, str]]:
    ev = ex.events.with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64), pl.lit(0).alias("file_id"))
    h = match(load_catalog(), ev).join(ev.select("event_id", "line_no"), on="event_id")
    return {(r["line_no"], r["signature"]) for r in h.iter_rows(named=True)}


def test_gpu_burn_faulty_table_and_warning_counts() -> None:
    ex, lines = fixture("gpu_burn_faulty_16.txt")
    got = results(ex)
    # the progress line's WARNING cells are GPUs 1-4, 9, 11 and 14 (their position in `errors:`)
    assert [g for ln, g, c in got if c == "errors"] == [1, 2, 3, 4, 9, 11, 14]
    assert {ln for ln, g, c in got if c == "errors"} == {1}
    assert [(ln, g) for ln, g, c in got if c == "FAULTY"] == [(5 + i, i) for i in range(16)]
    assert unread(ex, lines) == []
    assert (5, "gpuburn-faulty") in sigs(ex) and (1, "gpuburn-faulty") in sigs(ex)


def test_gpu_burn_died_child_and_abort_are_context_its_init_error_stays_an_error_line() -> None:
    ex, lines = fixture("gpu_burn_died_t4.txt")
    assert results(ex) == [(4, 0, "DIED"), (6, None, "aborted")]
    assert unread(ex, lines) == ["Couldn't init a GPU test: Error: "]
    assert sigs(ex) == {(4, "gpuburn-died"), (6, "gpuburn-died")}
    roles = {s.id: s.role for s in load_catalog().signatures}
    assert roles["gpuburn-died"] == "context"


def test_gpu_burn_healthy_run_gives_no_event_and_reads_every_line_but_the_init_error() -> None:
    ex, lines = fixture("gpu_burn_ok_8_v100.txt")
    assert ex.events.is_empty()
    assert unread(ex, lines) == ["Couldn't init a GPU test: Error: CUDA_ERROR_UNKNOWN"]


def test_gpu_fryer_progress_is_read_without_events() -> None:
    ex, lines = fixture("gpu_fryer_h100_progress.txt")
    assert ex.events.is_empty() and unread(ex, lines) == []


def test_gpu_fryer_problems_per_gpu() -> None:
    ex, lines = fixture("gpu_fryer_unhealthy_format.txt")
    assert results(ex) == [(11, 1, "zero_flops"), (12, 2, "throttled"), (13, 2, "low_flops")]
    assert unread(ex, lines) == []
    assert sigs(ex) == {(11, "gpufryer-zero-flops"), (12, "gpufryer-slow-gpu"), (13, "gpufryer-slow-gpu")}


def test_lines_of_other_tools_that_share_a_word_give_nothing() -> None:
    # a training log's `Initialized device` / `Burning for` words without any burn-test structure
    ex, _ = run("Initialized device cuda:0\nBurning for 3 epochs\nGPU 0: OK to go\n")
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()


def test_sniff() -> None:
    for name in ("gpu_burn_faulty_16.txt", "gpu_burn_died_t4.txt", "gpu_burn_ok_8_v100.txt",
                 "gpu_fryer_h100_progress.txt", "gpu_fryer_unhealthy_format.txt"):
        head = (FIX / name).read_text(encoding="utf-8")
        assert gpuburn.sniff(head) >= 0.6, name
        assert dcgm.sniff(head) == 0.0 and nccl_tests.sniff(head) < 0.5, name
    assert gpuburn.sniff("Epoch 1: loss 0.5\nerrors: 0\n") == 0.0

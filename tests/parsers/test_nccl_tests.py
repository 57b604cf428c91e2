"""Tests for parsers.nccl_tests: nccl-tests output of each era (from the emitter's printf formats),
the headerless device lines a markdown quote leaves, wrong results, failure lines and prefixes."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from forensics.analysis import analyze
from forensics.signatures import load_catalog, match
from parsers import nccl_tests
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def hits(ex: Extraction) -> set[tuple[int, str]]:
    """(line, signature id) of every catalog hit on the parser's events."""
    ev = ex.events.with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64)).with_columns(pl.lit(0).alias("file_id"))
    h = match(load_catalog(), ev).join(ev.select("event_id", "line_no"), on="event_id")
    return {(r["line_no"], r["signature"]) for r in h.iter_rows(named=True)}


def run(text: str, **ctx: object) -> tuple[Extraction, pl.DataFrame]:
    lines = with_body(decode_lines(text.encode()).lines)
    return nccl_tests.parse(lines, ParseContext(path="nccl_tests.log", **ctx)), lines  # type: ignore[arg-type]


def unread(ex: Extraction, lines: pl.DataFrame) -> list[str]:
    left = set(lines["line_no"].to_list()) - set(ex.claimed.to_list()) - set(ex.ignored.to_list())
    return [lines["body"][i - 1] for i in sorted(left) if lines["body"][i - 1].strip()]


def devices(ex: Extraction) -> list[tuple]:
    d = ex.events.filter(pl.col("kind") == "test_device")
    return d.select("line_no", "rank", "host", "gpu", "pid", "pci_bus_id").rows()


def test_current_format_healthy_run_is_read_whole_with_no_failure() -> None:
    text = (FIX / "all_reduce_perf_2025_dgx.log").read_text()
    ex, lines = run(text)
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert nccl_tests.sniff(text) == 0.9
    assert unread(ex, lines) == []
    assert set(ex.events["kind"].to_list()) == {"test_device"}
    assert devices(ex)[0] == (6, 0, "dgx-h100-07", 0, 40211, "0000:18:00")
    assert devices(ex)[7] == (13, 7, "dgx-h100-07", 7, 40211, "0000:db:00")
    assert ex.events["severity"].unique().to_list() == ["info"]


def test_mpirun_tagged_excerpt_cut_mid_header_two_hosts() -> None:
    ex, lines = run((FIX / "all_reduce_perf_2022_mpirun_tagged.log").read_text())
    assert unread(ex, lines) == []
    d = devices(ex)
    assert len(d) == 16
    # [0x%02x] is the bus alone: no domain:bus:device is invented from it
    assert d[0] == (1, 0, "gpu-node-1", 0, 5120, None)
    assert d[15] == (16, 15, "gpu-node-2", 7, 5127, None)
    assert ex.events.filter(pl.col("kind") != "test_device").is_empty()


def test_2018_format_without_hash_and_error_magnitude_is_not_a_wrong_count() -> None:
    ex, lines = run((FIX / "all_reduce_perf_2018_old.log").read_text())
    assert unread(ex, lines) == []
    assert devices(ex) == [(3, 0, "station1", 0, None, None), (4, 1, "station1", 1, None, None)]
    assert ex.events.height == 2  # 1e-07 in the `res` column is a float rounding, not a wrong element


def test_headerless_device_lines_of_a_quoted_excerpt() -> None:
    # fixtures/fresh/b4sys/nccl258: the quote ate the `#`; cuda-gdb's lines are not ours
    text = ("   Rank  0 Pid  12414 on 51e6e7896958 device  0 [0x1a] Tesla V100-SXM3-32GB\n"
            "   Rank  1 Pid  12414 on 51e6e7896958 device  1 [0x1b] Tesla V100-SXM3-32GB\n"
            "[New Thread 0x7fffe6d73700 (LWP 12424)]\n"
            "warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)\n")
    ex, lines = run(text)
    assert devices(ex) == [(1, 0, "51e6e7896958", 0, 12414, None), (2, 1, "51e6e7896958", 1, 12414, None)]
    assert ex.claimed.to_list() == [1, 2]
    assert nccl_tests.sniff(text) == 0.9


def test_wrong_results_rows_and_footer_are_events_with_the_printed_count() -> None:
    ex, lines = run((FIX / "all_reduce_perf_2024_wrong_results.log").read_text(), host_hint="node-b")
    assert unread(ex, lines) == []
    w = ex.events.filter(pl.col("kind") == "wrong_results")
    assert w.select("line_no", "code", "severity", "host").rows() == [
        (13, "4096", "error", "node-b"), (14, "3.35544e+07", "error", "node-b"), (15, "3", "error", "node-b")]
    assert {h for h in hits(ex) if h[0] in (13, 14, 15)} == {
        (13, "nccl-tests-wrong-results"), (14, "nccl-tests-wrong-results"), (15, "nccl-tests-wrong-results")}


def test_ok_footer_and_zero_wrong_make_no_event() -> None:
    text = ("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5 OK\nrank=0 #wrong=0\n"
            "rank=1 #wrong=7\n# Avg bus bandwidth    : 12.5306 FAILED\n")
    ex, lines = run(text)
    assert unread(ex, lines) == []
    assert ex.events.select("line_no", "kind", "rank", "code").rows() == [
        (4, "wrong_results", 1, "7"), (5, "bw_check_failed", None, "12.5306")]


def test_failure_lines_are_error_lines_with_the_host_they_name() -> None:
    ex, lines = run((FIX / "alltoall_perf_pdsh_cuda_oom.log").read_text())
    assert unread(ex, lines) == []
    f = ex.events.filter(pl.col("kind") == "error_line")
    assert f.select("line_no", "host", "pid", "severity", "message").rows() == [
        # pdsh's `node-3: ` and the test's own `node-3: ` are both peeled: the host is the wrapper's
        (8, "node-3", None, "error", "Test CUDA failure common.cu:891 'out of memory'"),
        (9, "node-3", 918, "error", " .. node-3 pid 918: Test failure common.cu:1062"),
        (10, "node-3", 918, "error", " .. node-3 pid 918: Test failure common.cu:1214")]
    assert {h for h in hits(ex) if h[0] in (8, 9)} == {(8, "cuda-oom"), (9, "nccl-tests-trace")}


def test_nccl_failure_forms_and_a_peeled_hostname() -> None:
    text = ("fastmoe: Test NCCL failure common.cu:777 'unhandled system error'\n"
            "gpu-node-12: Test NCCL failure common.cu:1005 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details) / Cuda failure 'invalid device ordinal''\n"
            "gpu-node-12: Test timeout (300s) common.cu:523\n")
    ex, lines = run(text)
    # `gpu-node-12: ` looks like a pdsh host: the wrapper layer peels it, the host stays the line's
    assert ex.events.select("line_no", "kind", "host").rows() == [
        (1, "error_line", "fastmoe"), (2, "error_line", "gpu-node-12"), (3, "error_line", "gpu-node-12")]
    got = hits(ex)
    assert {(1, "nccl-result-system-error"), (2, "nccl-result-cuda-error"), (3, "nccl-tests-timeout")} <= got


def test_a_file_without_nccl_tests_lines_gives_nothing() -> None:
    text = "           8             2     float     sum      -1    11.00    0.00    0.00       0\n#\n"
    ex, _ = run(text)  # a row alone holds no trigger literal: not read
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()
    assert nccl_tests.sniff("NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n") == 0.0


def test_a_training_log_that_meets_the_trigger_keeps_its_own_lines() -> None:
    """`Using device cuda:0` holds the ` device ` trigger literal, and `100 200 loss is 0.5 3` has a
    result row's shape (two numbers, two words, numbers; the fourth value at the `#wrong` place): with
    no device line, header, column names or footer in the frame it is no nccl-tests row, claimed by
    nothing here and no wrong-results event."""
    text = ("epoch 1 Using device cuda:0 for training\n"
            "100 200 loss is 0.5 0.25 0.125 3\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    ex, lines = run(text)
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()
    assert len(unread(ex, lines)) == 3
    # the same row beside a device line is read, and its `#wrong` of 3 is an event
    ex, _ = run("#  Rank  0 Group  0 Pid  41 on node-7 device  0 [0000:1a:00] NVIDIA H100 80GB HBM3\n"
                "        8             2     float     sum      -1    11.00    0.00    0.00       3\n")
    assert ex.claimed.to_list() == [1, 2]
    assert ex.events.filter(pl.col("kind") == "wrong_results").select("line_no", "code").rows() == [(2, "3")]


def test_every_structural_pattern_holds_a_screen_literal() -> None:
    """`parse` runs its patterns (all but ROW_RE and BARE_RE) only on lines holding a trigger or a
    STRUCT_LITERALS literal: sound because each pattern's required literals (every match holds one)
    each hold one of those."""
    from forensics.triage import literal_factor

    screen = (*nccl_tests._TRIGGER, *nccl_tests.STRUCT_LITERALS)
    pats = nccl_tests._STRUCT_PATTERNS
    assert {nccl_tests.DEVICE_RE, nccl_tests.FAILURE_RE, nccl_tests.WRONG_ELT_RE} <= set(pats) and len(pats) == 8
    for pat in pats:
        req = literal_factor(pat)
        assert req is not None, pat
        for text, caseless in req:
            assert not caseless and any(lit in text for lit in screen), (pat, text)
    # a dmesg holds ` device ` (the trigger) and `device` on many lines: no structure, nothing read
    ex, _ = run("[    1.5] pci 0000:3b:00.0: Adding to iommu group 7\n"
                "[    2.0] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
                "[    2.1] 8       2     float     sum      -1    11.00    0.00    0.00       3\n"
                "#\n")
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()


@pytest.mark.parametrize(("name", "want"), [
    ("all_reduce_perf_2025_dgx.log", ("none", None, None, None)),
    ("all_reduce_perf_2018_old.log", ("none", None, None, None)),
    ("all_reduce_perf_2024_wrong_results.log", ("unknown", "unknown", "nccl-tests-wrong-results", 13)),
    ("alltoall_perf_pdsh_cuda_oom.log", ("crash", "oom", "cuda-oom", 8)),
])
def test_end_to_end_verdicts(name: str, want: tuple, tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(FIX / name, job / name)
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    ev = v["evidence"][0] if v["evidence"] else {}
    assert (v["kind"], v["category"] if v["kind"] != "none" else None, ev.get("signature"), ev.get("line")) == want
    if name.startswith("alltoall"):
        assert v["culprit"]["host"] == "node-3"


def test_per_iteration_columns_timestamps_and_unchecked_rows() -> None:
    # -I 1 adds i_min i_max i_p99 i_cv% to each half (the cv% of 3.41 is no wrong count); -Z appends a
    # stamp; -c 0 prints N/A for #wrong
    text = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0 unalign: 0\n"
            "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows \n"
            "     1048576        262144     float     sum      -1    52.1"
            "0   20.13   35.22       0    50.01    58.93    58.12     3.41    51.80   20.24   35.42      12    49.90    57.70    57.60     3.12\n"
            "     1048576        262144     float     sum      -1    52.1"
            "0   20.13   35.22    N/A    51.80   20.24   35.42    N/A  2025-10-17 09:41:07\n")
    ex, lines = run(text)
    assert unread(ex, lines) == []
    assert ex.events.select("line_no", "kind", "code").rows() == [(3, "wrong_results", "12")]

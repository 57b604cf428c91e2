"""parsers/rasdaemon.py: ras-mc-ctl --errors / --summary (util/ras-mc-ctl.in's formats)."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from forensics.analysis import analyze
from parsers import rasdaemon
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "rasdaemon"


def run(text: str) -> Extraction:
    return rasdaemon.parse(with_body(decode_lines(text.encode()).lines),
                           ParseContext(path="node-4/ras.txt", host_hint="node-4"))


def codes(ex: Extraction) -> list[tuple[int, str]]:
    return [(r["line_no"], r["code"]) for r in ex.events.iter_rows(named=True)]


def test_errors_report_rows_of_each_table_corrected_or_not() -> None:
    ex = run((FIX / "errors_mixed.txt").read_text())
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert codes(ex) == [(3, "memory_corrected"), (4, "memory_uncorrected"), (7, "pcie_uncorrected"),
                         (20, "mce_corrected"), (21, "mce_uncorrected")]
    first = ex.events.row(0, named=True)
    assert first["ts"] == datetime(2024, 6, 1, 10, 11, 12, tzinfo=UTC) and first["host"] == "node-4"
    # the prompt with the command, the headers and the `No ... errors.` sections are understood
    assert {1, 2, 6, 9, 11, 13, 15, 17, 19} <= set(ex.claimed.to_list())


def test_summary_counts_have_no_time_and_a_clean_summary_gives_nothing() -> None:
    ex = run((FIX / "summary_counts.txt").read_text())
    assert codes(ex) == [(2, "memory_corrected"), (3, "memory_uncorrected"), (10, "mce_corrected")]
    assert ex.events["ts"].null_count() == 3
    clean = run((FIX / "summary_clean.txt").read_text())
    assert clean.events.is_empty() and clean.claimed.to_list() == [1, 3, 5, 7]


def test_intel_and_amd_mce_messages_and_aer_non_fatal() -> None:
    ex = run("No Memory errors.\n\nPCIe AER events:\n"
             "1 2025-01-02 03:04:05 +0100 0000:17:00.0 Uncorrected (Non-Fatal) error: Completion Timeout\n"
             "2 2025-01-02 03:04:06 +0100 0000:17:00.0 Corrected error: Receiver Error\n\nMCE events:\n"
             "1 2025-01-02 03:05:00 +0100 error: Fatal error, CPU 4, bank Memory Controller 1\n"
             "2 2025-01-02 03:05:01 +0100 error: Deferred error, no action required., CPU 4, bank Load Store Unit\n")
    assert codes(ex) == [(4, "pcie_uncorrected"), (5, "pcie_corrected"), (8, "mce_uncorrected"), (9, "mce_uncorrected")]
    assert ex.events["ts"][0] == datetime(2025, 1, 2, 2, 4, 5, tzinfo=UTC)


def test_rows_outside_a_report_are_not_read() -> None:
    """An `N date error: ...` line in a file with no ras-mc-ctl section is some other program's."""
    assert rasdaemon.sniff("1 2025-01-02 03:05:00 +0100 error: Fatal error, CPU 4\n") == 0.0
    assert run("1 2025-01-02 03:05:00 +0100 error: Fatal error, CPU 4\n").events.is_empty()
    lines = with_body(decode_lines(b"No MCE errors.\n1 2025-01-02 03:05:00 +0100 error: Fatal error, CPU 4\n").lines) \
        .with_columns(pl.Series("hint_host", ["a", "b"]), pl.Series("hint_rank", [None, None], dtype=pl.Int64),
                      pl.Series("hint_file", [0, 1]))
    assert rasdaemon.parse(lines, ParseContext(path="", batched=True)).events.is_empty()


def test_end_to_end_uncorrected_memory_names_the_node(job_of, tmp_path: Path) -> None:
    v = analyze(job_of({"gpu-node-4/ras-mc-ctl.txt": (FIX / "errors_mixed.txt").read_text()}),
                tmp_path / "a", html=False).report["verdict"]
    assert v["category"] == "host_hardware" and v["culprit"]["host"] == "gpu-node-4"
    assert v["evidence"][0]["signature"] == "ras-memory-uncorrected"


def test_end_to_end_corrected_only_is_no_interruption(job_of, tmp_path: Path) -> None:
    r = analyze(job_of({"n1/ras.txt": "MCE events:\n1 2024-12-19 03:52:38 +0000 error: Corrected error, no action "
                                      "required., CPU 2, bank Unified Memory Controller (bank=17)\n"}),
                tmp_path / "b", html=False).report
    assert r["verdict"]["kind"] == "none" and not r["interruptions"]

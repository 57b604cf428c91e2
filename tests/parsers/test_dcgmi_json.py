"""Tests for parsers.dcgmi_json (read by parsers.dcgm): `dcgmi health -c -j` and `dcgmi diag -j`."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forensics.analysis import analyze
from forensics.signatures import load_catalog, match
from parsers import dcgm, dcgmi_json
from parsers.lines import decode_lines
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "dcgm"


def run(text: str) -> Extraction:
    return dcgm.parse(decode_lines(text.encode()).lines, ParseContext(path="dcgmi.json", host_hint="node-05"))


def rows(ex: Extraction) -> list[tuple]:
    return [(r["line_no"], r["kind"], r["gpu"], r["code"], r["severity"]) for r in ex.events.iter_rows(named=True)]


def accounted(ex: Extraction, n: int) -> None:
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored and claimed | ignored == set(range(1, n + 1))


def test_health_check_json_warning_and_failure_systems_per_gpu() -> None:
    text = (FIX / "dcgmi_health_check.json").read_text()
    assert dcgm.sniff(text) == 0.95
    ex = run(text)
    assert dict(ex.events.schema) == EVENT_SCHEMA
    accounted(ex, len(text.splitlines()))
    assert rows(ex) == [(11, "dcgm_health", 0, "Warning", "warning"), (27, "dcgm_health", 3, "Failure", "error"),
                        (31, "dcgm_health", 3, "Warning", "warning")]
    assert ex.events["message"].to_list()[1] == (
        "Memory system: Failure - A volatile double-bit ECC error has occurred on GPU 3. "
        "Uncorrectable memory error: 2 pending row remaps on GPU 3")
    assert set(ex.events["source"].to_list()) == {"dcgm"} and set(ex.events["host"].to_list()) == {"node-05"}


def test_healthy_health_json_gives_no_event_but_is_read() -> None:
    text = (FIX / "dcgmi_health_check_healthy.json").read_text()
    ex = run(text)
    assert ex.events.is_empty() and not ex.warnings
    accounted(ex, len(text.splitlines()))


def test_diag_json_dcgm2_gpu_ids_and_string_warnings() -> None:
    text = (FIX / "dcgmi_diag_r2_v2.json").read_text()
    assert dcgm.sniff(text) == 0.95
    ex = run(text)
    accounted(ex, len(text.splitlines()))
    assert rows(ex) == [(27, "dcgm_diag", None, "Warn", "warning"), (54, "dcgm_diag", 1, "Fail", "error"),
                        (73, "dcgm_diag", 1, "Fail", "error")]  # Pass and Skip: no event
    assert ex.events["message"][1] == ("PCIe: Fail - GPU 1: GPU 1 host-to-device bandwidth 3.21 GB/s is below the "
                                       "minimum 8.00 GB/s")


def test_diag_json_dcgm4_entities_warning_objects_and_no_summary_duplicates() -> None:
    text = (FIX / "dcgmi_diag_r3_v4.json").read_text()
    ex = run(text)
    accounted(ex, len(text.splitlines()))
    assert rows(ex) == [(45, "dcgm_diag", 1, "Fail", "error"), (99, "dcgm_diag", 1, "Warn", "warning")]
    assert ex.events["message"][0].startswith("memory: Fail - GPU 1: A DBE occurred on GPU 1.")


def test_diag_json_events_meet_the_table_rows_signatures() -> None:
    ids = {}
    cat = load_catalog()
    for name in ("dcgmi_diag_r2_v2.json", "dcgmi_diag_r3_v4.json"):
        ev = run((FIX / name).read_text()).events.with_row_index("event_id")
        hits = match(cat, ev.with_columns(pl.col("event_id").cast(pl.Int64)))
        ids[name] = sorted(hits["signature"].unique().to_list())
    assert "dcgm-diag-memory-fail" in ids["dcgmi_diag_r2_v2.json"]
    assert "dcgm-diag-pcie-nvlink" in ids["dcgmi_diag_r2_v2.json"]
    assert "dcgm-diag-memory-fail" in ids["dcgmi_diag_r3_v4.json"]


def test_runtime_error_and_broken_json_are_warnings() -> None:
    ex = run('{\n   "DCGM GPU Diagnostic" : {\n      "runtime_error" : "Couldn\'t find the GPU 3",\n'
             '      "test_categories" : []\n   }\n}\n')
    assert ex.events.is_empty() and ex.warnings == ["dcgmi diag did not run: Couldn't find the GPU 3"]
    ex = run('{\n   "body" : {\n      "Overall Health" : "Healthy",\n   "header" : [ "Health Monitor Report" ]\n')
    assert ex.events.is_empty() and any("could not be read" in w for w in ex.warnings)


def test_oversized_json_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dcgmi_json, "MAX_JSON_BYTES", 50)
    ex = run((FIX / "dcgmi_health_check.json").read_text())
    assert ex.events.is_empty() and any("not read" in w for w in ex.warnings)


def test_prometheus_json_is_still_read_by_the_prometheus_reader() -> None:
    ex = run((FIX / "prometheus_query_range.json").read_text())
    assert not ex.tables["dcgm_samples"].is_empty()


def test_end_to_end_diag_memory_failure_names_the_node_and_gpu(job_of, tmp_path: Path) -> None:
    job = job_of({"node-05/dcgmi-diag.json": (FIX / "dcgmi_diag_r3_v4.json").read_text(),
                  "node-06/dcgmi-health.json": (FIX / "dcgmi_health_check_healthy.json").read_text()})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "gpu_memory"
    assert (v["culprit"]["host"], v["culprit"]["gpu"]) == ("node-05", 1)


def test_end_to_end_healthy_health_json_is_no_interruption(job_of, tmp_path: Path) -> None:
    job = job_of({"node-06/dcgmi-health.json": (FIX / "dcgmi_health_check_healthy.json").read_text()})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == "none" and v["culprit"]["host"] is None

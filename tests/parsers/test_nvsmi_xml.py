"""Tests for parsers.nvsmi_xml (read by parsers.nvsmi): `nvidia-smi -q -x` XML, whole or a fragment,
into the same events and samples as the text `nvidia-smi -q`; unsafe or oversized XML refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from forensics.analysis import analyze
from parsers import nvsmi, nvsmi_xml
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nvsmi"
REAL_223 = (Path(__file__).resolve().parents[2].parent / "shared" / "real-samples"
            / "223-healthy-nvidia-smi-q-x-ecc-counters-zero-job-exporter" / "nvidia-smi.txt")


def run(text: str) -> Extraction:
    lines = with_body(decode_lines(text.encode()).lines)
    return nvsmi.parse(lines, ParseContext(path="nvidia-smi.xml", host_hint="node-07"))


def rows(ex: Extraction) -> list[tuple]:
    return [(r["line_no"], r["kind"], r["gpu"], r["pci_bus_id"], r["code"], r["severity"])
            for r in ex.events.iter_rows(named=True)]


def sample(ex: Extraction, field: str, gpu: int) -> list[float]:
    t = ex.tables["dcgm_samples"]
    return t.filter((pl.col("field") == field) & (pl.col("gpu") == gpu))["value"].to_list()


def accounted(ex: Extraction, n: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert dict(ex.tables["dcgm_samples"].schema) == TABLE_SCHEMAS["dcgm_samples"]
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert claimed | ignored == set(range(1, n + 1))  # every line of the document read or ignored
    assert set(ex.events["line_no"].to_list()) <= claimed


def test_r555_h100_bad_gpu_gives_the_text_parsers_events_and_the_healthy_gpu_none() -> None:
    text = (FIX / "query_xml_h100_r555.xml").read_text()
    ex = run(text)
    accounted(ex, len(text.splitlines()))
    assert rows(ex) == [
        (202, "gpu_clock_event", 1, "0000:2a:00", "hw_slowdown", "warning"),
        (203, "gpu_clock_event", 1, "0000:2a:00", "hw_thermal", "warning"),
        (230, "gpu_ecc", 1, "0000:2a:00", "2", "error"),  # volatile dram_uncorrectable
        (237, "gpu_ecc", 1, "0000:2a:00", "2", "warning"),  # aggregate
        (256, "gpu_row_remap", 1, "0000:2a:00", "pending", "warning"),
    ]
    assert set(ex.events["source"].to_list()) == {"nvsmi"}
    assert set(ex.events["host"].to_list()) == {"node-07"}
    assert ex.events["ts"].unique().to_list() == [datetime(2024, 7, 16, 3, 12, 44, tzinfo=UTC)]
    # healthy values are samples: temperatures, power, replays, correctable counts, P-state
    assert sample(ex, "DCGM_FI_DEV_GPU_TEMP", 0) == [41.0]
    assert sample(ex, "DCGM_FI_DEV_GPU_TEMP", 1) == [87.0]
    assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 1) == [702.48]
    assert sample(ex, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 1) == [41.0]
    assert sample(ex, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 0) == [3.0]
    assert sample(ex, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1) == [2.0]
    assert sample(ex, "DCGM_FI_DEV_PSTATE", 0) == [0.0]
    assert sample(ex, "DCGM_FI_DEV_FAN_SPEED", 0) == []  # N/A is null, not a sample
    assert sample(ex, "nvsmi:xml/clocks_event_reasons/clocks_event_reason_sw_power_cap", 0) == [0.0]
    uuids = ex.tables["dcgm_samples"]["pci_bus_id"].unique().sort().to_list()
    assert uuids == ["0000:18:00", "0000:2a:00"]


def test_r470_v100_throttle_reasons_double_bit_tree_and_retired_pages() -> None:
    text = (FIX / "query_xml_v100_r470.xml").read_text()
    ex = run(text)
    accounted(ex, len(text.splitlines()))
    assert rows(ex) == [
        (31, "gpu_clock_event", 0, "0000:86:00", "hw_power_brake", "warning"),  # sw_power_cap is no event
        (82, "gpu_ecc", 0, "0000:86:00", "1", "warning"),  # aggregate double_bit/total
        (93, "gpu_retired_pages", 0, "0000:86:00", "1", "warning"),
        (98, "gpu_retired_pages", 0, "0000:86:00", "pending", "warning"),  # pending_blacklist (pre-R450 name)
        (99, "gpu_retired_pages", 0, "0000:86:00", "pending", "warning"),
    ]
    assert sample(ex, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 0) == [31.0]
    assert sample(ex, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0) == [0.0]
    assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 0) == [298.71]


def test_xml_and_text_reports_of_the_same_state_give_the_same_events() -> None:
    """The text `-q` fixture's GPU 0 (R535, `Clocks Event Reasons`, DRAM ECC, remap pending) written
    as the XML nvidia-smi prints for it: same kinds, codes, severities, GPU and PCI address."""
    xml = """<nvidia_smi_log>
<timestamp>Tue Jan  2 10:11:12 2024</timestamp>
<gpu id="00000000:18:00.0">
<clocks_event_reasons>
<clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
<clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>
<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
</clocks_event_reasons>
<ecc_errors><volatile>
<dram_uncorrectable>2</dram_uncorrectable>
</volatile><aggregate>
<dram_uncorrectable>2</dram_uncorrectable>
</aggregate></ecc_errors>
<remapped_rows>
<remapped_row_pending>Yes</remapped_row_pending>
<remapped_row_failure>No</remapped_row_failure>
</remapped_rows>
</gpu>
</nvidia_smi_log>
"""
    text_ev = nvsmi.parse(with_body(decode_lines((FIX / "query_modern.txt").read_bytes()).lines),
                          ParseContext(path="q.txt")).events.filter(pl.col("gpu") == 0)
    xml_ev = run(xml).events
    cols = ["kind", "code", "severity", "gpu", "pci_bus_id", "ts"]
    assert xml_ev.select(cols).to_dicts() == text_ev.select(cols).to_dicts()


def test_real_sample_223_fragment_without_root_cut_mid_block_is_read_and_healthy() -> None:
    if not REAL_223.is_file():
        pytest.skip("../shared/real-samples is missing")
    text = REAL_223.read_text()
    ex = run(text)
    accounted(ex, len(text.splitlines()))
    assert ex.events.is_empty()  # all counters zero: no fault
    t = ex.tables["dcgm_samples"]
    assert t.filter(pl.col("field") == "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")["value"].to_list() == [0.0]
    assert t["gpu"].null_count() == t.height  # a fragment names no GPU element
    assert any("ends early" in w and "<double_bit>" in w for w in ex.warnings)


def test_sram_uncorrectable_is_an_ecc_event_in_xml_and_in_text() -> None:
    xml = ('<gpu id="00000000:07:00.0">\n<ecc_errors>\n<volatile>\n<sram_uncorrectable>1</sram_uncorrectable>\n'
           '<dram_uncorrectable>0</dram_uncorrectable>\n</volatile>\n</ecc_errors>\n</gpu>\n')
    assert rows(run(xml)) == [(4, "gpu_ecc", 0, "0000:07:00", "1", "error")]
    txt = ("==============NVSMI LOG==============\n\nGPU 00000000:07:00.0\n    ECC Errors\n        Volatile\n"
           "            SRAM Correctable              : 0\n            SRAM Uncorrectable            : 1\n"
           "            DRAM Uncorrectable            : 0\n")
    assert rows(run(txt)) == [(7, "gpu_ecc", 0, "0000:07:00", "1", "error")]


@pytest.mark.parametrize("doc", [
    '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a "aaaaaaaaaa">\n]>\n'
    "<nvidia_smi_log>\n<ecc_errors><volatile><dram_uncorrectable>&a;</dram_uncorrectable></volatile></ecc_errors>\n"
    "</nvidia_smi_log>\n",
    '<nvidia_smi_log>\n<!ENTITY x SYSTEM "file:///etc/passwd">\n<ecc_errors>\n</ecc_errors>\n</nvidia_smi_log>\n',
])
def test_internal_dtd_and_entities_are_refused(doc: str) -> None:
    ex = run(doc)
    assert ex.events.is_empty() and ex.tables["dcgm_samples"].is_empty()
    assert any("refused" in w for w in ex.warnings)
    assert ex.claimed.is_empty()  # nothing of it counts as read


def test_nvidia_smis_own_doctype_line_is_accepted() -> None:
    doc = ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n'
           '<gpu id="00000000:07:00.0">\n<remapped_rows>\n<remapped_row_failure>Yes</remapped_row_failure>\n'
           "</remapped_rows>\n</gpu>\n</nvidia_smi_log>\n")
    ex = run(doc)
    assert rows(ex) == [(6, "gpu_row_remap", 0, "0000:07:00", "failure", "critical")]
    accounted(ex, 9)


def test_oversized_region_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvsmi_xml, "MAX_XML_BYTES", 100)
    ex = run((FIX / "query_xml_v100_r470.xml").read_text())
    assert ex.events.is_empty()
    assert any("not read" in w and "more than 100 bytes" in w for w in ex.warnings)


def test_broken_document_keeps_what_came_before_the_break() -> None:
    doc = ('<gpu id="00000000:07:00.0">\n<ecc_errors><volatile>\n<dram_uncorrectable>4</dram_uncorrectable>\n'
           "</aggregate>\n<dram_uncorrectable>9</dram_uncorrectable>\n</volatile></ecc_errors>\n</gpu>\n")
    ex = run(doc)
    assert rows(ex) == [(3, "gpu_ecc", 0, "0000:07:00", "4", "error")]
    assert any("mismatched tag at line 4" in w for w in ex.warnings)
    assert 5 not in set(ex.ignored.to_list()) | set(ex.claimed.to_list())  # after the break: unparsed


def test_sniff_root_and_fragment_but_not_other_xml() -> None:
    assert nvsmi.sniff((FIX / "query_xml_h100_r555.xml").read_text()) == 0.95
    assert nvsmi.sniff("<ecc_mode>\n<current_ecc>Enabled</current_ecc>\n</ecc_mode>\n<ecc_errors>\n") == 0.9
    assert nvsmi.sniff('<?xml version="1.0"?>\n<project><temperature>3</temperature></project>\n') == 0.0


def test_end_to_end_xml_with_uncorrectable_ecc_names_the_host_and_gpu(job_of, tmp_path: Path) -> None:
    job = job_of({"node-07/nvidia-smi-q-x.xml": (FIX / "query_xml_h100_r555.xml").read_text()})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "gpu_memory"
    assert v["culprit"]["host"] == "node-07"
    assert v["culprit"]["pci_bus_id"] == "0000:2a:00"


def test_end_to_end_healthy_fragment_is_no_interruption(job_of, tmp_path: Path) -> None:
    xml = (FIX / "query_xml_h100_r555.xml").read_text().split('    <gpu id="00000000:2A:00.0">')[0] + "</nvidia_smi_log>\n"
    job = job_of({"node-03/nvidia-smi.xml": xml})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == "none"
    assert v["culprit"]["host"] is None

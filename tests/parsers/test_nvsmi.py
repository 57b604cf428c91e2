"""Tests for parsers.nvsmi: nvidia-smi -q sections, the GPU table, dmon, NVML error lines."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import nvsmi
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nvsmi"


def run(text: str, **ctx: object) -> Extraction:
    lines = with_body(decode_lines(text.encode()).lines)
    return nvsmi.parse(lines, ParseContext(path="nvidia-smi.txt", host_hint="node-17", **ctx))  # type: ignore[arg-type]


def fixture(name: str, **ctx: object) -> Extraction:
    return run((FIX / name).read_text(), **ctx)


def rows(ex: Extraction) -> list[tuple]:
    return [(r["line_no"], r["kind"], r["gpu"], r["pci_bus_id"], r["code"], r["severity"])
            for r in ex.events.iter_rows(named=True)]


def sample(ex: Extraction, field: str, gpu: int) -> list[float]:
    t = ex.tables["dcgm_samples"]
    return t.filter((pl.col("field") == field) & (pl.col("gpu") == gpu))["value"].to_list()


def check_contract(ex: Extraction, n_lines: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert all(1 <= n <= n_lines for n in claimed | ignored)
    assert set(ex.events["line_no"].to_list()) <= claimed


def test_query_ecc_remapped_rows_and_clocks_event_reasons() -> None:
    ex = fixture("query_modern.txt")
    assert rows(ex) == [
        (18, "gpu_clock_event", 0, "0000:18:00", "hw_slowdown", "warning"),
        (19, "gpu_clock_event", 0, "0000:18:00", "hw_thermal", "warning"),
        (33, "gpu_ecc", 0, "0000:18:00", "2", "error"),
        (39, "gpu_ecc", 0, "0000:18:00", "2", "warning"),
        (48, "gpu_row_remap", 0, "0000:18:00", "pending", "warning"),
        (79, "gpu_row_remap", 1, "0000:2a:00", "failure", "critical"),
    ]
    assert ex.events["ts"].unique().to_list() == [datetime(2024, 1, 2, 10, 11, 12, tzinfo=UTC)]
    assert set(ex.events["ts_quality"].to_list()) == {"exact"}
    assert sample(ex, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 0) == [12.0]
    assert sample(ex, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 0) == [2.0]
    assert sample(ex, "DCGM_FI_DEV_GPU_TEMP", 1) == [38.0]
    assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 0) == [71.25]
    # N/A retired-page values are not samples; serial / minor numbers are identities, not samples
    assert sample(ex, "DCGM_FI_DEV_RETIRED_DBE", 0) == []
    assert not ex.tables["dcgm_samples"]["field"].str.contains("Serial|Minor").any()
    check_contract(ex, 81)


def test_query_old_driver_throttle_reasons_and_retired_pages() -> None:
    ex = fixture("query_old_throttle.txt")
    assert rows(ex) == [
        (18, "gpu_clock_event", 0, "0000:06:00", "sw_thermal", "warning"),
        (42, "gpu_ecc", 0, "0000:06:00", "1", "error"),
        (47, "gpu_ecc", 0, "0000:06:00", "1", "warning"),
        (50, "gpu_retired_pages", 0, "0000:06:00", "1", "warning"),
        (51, "gpu_retired_pages", 0, "0000:06:00", "pending", "warning"),
    ]
    assert sample(ex, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0) == [1.0]
    assert sample(ex, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 0) == [5.0]


def test_query_naive_timestamp_in_job_timezone() -> None:
    ex = fixture("query_old_throttle.txt", tz=ZoneInfo("Europe/Berlin"))
    assert ex.events["ts"][0] == datetime(2020, 3, 13, 7, 0, 1, tzinfo=UTC)


def test_table_lost_gpu_and_volatile_ecc() -> None:
    ex = fixture("table.txt")
    assert rows(ex) == [
        (13, "gpu_ecc", 1, "0000:2a:00", "3", "error"),
        (17, "gpu_lost", 2, "0000:3a:00", "ERR!", "critical"),
        (18, "gpu_lost", 2, "0000:3a:00", "ERR!", "critical"),
    ]
    assert ex.events["ts"][0] == datetime(2024, 1, 2, 10, 11, 12, tzinfo=UTC)
    assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 1) == [695.0]
    assert sample(ex, "DCGM_FI_DEV_FB_USED", 0) == [1024.0]
    check_contract(ex, 28)
    assert set(ex.claimed.to_list()) | set(ex.ignored.to_list()) == set(range(1, 29)) - {21}


def test_table_old_layout() -> None:
    ex = fixture("table_old.txt")
    assert rows(ex) == [(7, "gpu_ecc", 0, "0000:06:00", "1", "error")]
    assert sample(ex, "DCGM_FI_DEV_GPU_TEMP", 0) == [83.0]
    assert ex.events["ts_quality"].to_list() == ["missing"]


def test_dmon_without_and_with_date_time() -> None:
    ex = fixture("dmon.txt")
    assert ex.events.is_empty()
    assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 1) == [698.0]
    assert sample(ex, "DCGM_FI_DEV_SM_CLOCK", 1) == [1980.0]
    assert ex.tables["dcgm_samples"].filter(pl.col("field") == "nvsmi:dmon/jpg")["value"].to_list() == [0.0, None]
    assert ex.ignored.to_list() == [1, 2] and ex.claimed.to_list() == [3, 4]
    assert "sample ts left null" in ex.warnings[0]
    dt = fixture("dmon_dt.txt")
    t = dt.tables["dcgm_samples"].filter(pl.col("field") == "DCGM_FI_DEV_GPU_TEMP")
    assert t["ts"].to_list() == [datetime(2024, 1, 2, 10, 11, 12, tzinfo=UTC),
                                 datetime(2024, 1, 2, 10, 11, 13, tzinfo=UTC)]
    assert t["value"].to_list() == [61.0, 88.0]


def test_nvml_error_lines_in_a_job_log() -> None:
    ex = fixture("errors_in_job_log.log")
    assert rows(ex) == [
        (2, "gpu_lost", None, "0000:3b:00", "GPU is lost", "critical"),
        (3, "nvml_error", None, None, "Driver/library version mismatch", "error"),
        (4, "nvml_error", None, None, "driver_unreachable", "error"),
        (5, "nvml_error", None, None, "no_devices", "error"),
    ]
    assert ex.events["host"].unique().to_list() == ["node-17"]
    assert ex.events["ts_quality"].unique().to_list() == ["missing"]  # no time on the line: discovery derives


def test_gpu_lost_without_space_real_053_shape() -> None:
    ex = run("Unable to determine the device handle for GPU0000:03:00.0: Unknown Error\n")
    assert rows(ex) == [(1, "gpu_lost", None, "0000:03:00", "Unknown Error", "critical")]


def test_unrelated_key_value_text_is_not_read() -> None:
    ex = run("    Pending                           : Yes\n  ECC Errors : 4\n| 0 | 1 |\n# gpu is fine\n")
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()


def test_sniff() -> None:
    assert nvsmi.sniff((FIX / "query_modern.txt").read_text()) >= 0.9
    assert nvsmi.sniff((FIX / "table.txt").read_text()) >= 0.9
    assert nvsmi.sniff((FIX / "dmon.txt").read_text()) >= 0.9
    assert nvsmi.sniff("NCCL INFO hello\n") == 0.0


REAL_LINES = [ln for f in sorted(FIX.glob("*.txt")) + sorted(FIX.glob("*.log")) for ln in f.read_text().splitlines()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=120), max_size=15))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(lines)
    ex = run(text)
    check_contract(ex, max(1, len(decode_lines(text.encode()).lines)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 120), st.text(max_size=5)), max_size=40))
def test_property_mutated_real_lines(muts: list[tuple[str, int, str]]) -> None:
    head = ["==============NVSMI LOG==============", "| NVIDIA-SMI 550.90.07 |", "# gpu pwr", "# Idx W"]
    lines = head + [ln[:i] + junk + ln[i:] for ln, i, junk in muts]
    text = "\n".join(lines)
    ex = run(text)
    check_contract(ex, len(decode_lines(text.encode()).lines))


# ---- NVML agents (k8s device plugin, gpud) and NVLink status tables ---------------------------

def test_hadoop_ai_nodemanager_gpu_withdrawn_on_ecc_column() -> None:
    """OpenPAI Hadoop-AI's SysInfoLinux withdraws a GPU in its own words (microsoft/pai#2736's lines): a
    gpu_unhealthy event with the agent's reading as code, the index it read as gpu, the log4j yy/MM/dd stamp."""
    text = (
        "19/04/29 08:01:21 INFO nodemanager.NodeStatusUpdaterImpl: Sending out 0 NM container statuses: []\n"
        "19/04/29 08:02:23 ERROR util.SysInfoLinux: ignored error: gpu 0 ECC code is 56174, will make this gpu "
        "unavailable\n"
        "ERROR util.SysInfoLinux: ignored error: gpu 3 ECC code is 1, will make this gpu unavailable\n"
        "19/04/29 08:02:24 ERROR util.SysInfoLinux: ignored error: gpu 8 ECC\n"
    )
    ex = run(text)
    assert rows(ex) == [
        (2, "gpu_unhealthy", 0, None, "ecc 56174", "warning"),
        (3, "gpu_unhealthy", 3, None, "ecc 1", "warning"),
    ]
    assert ex.events["ts"].to_list() == [datetime(2019, 4, 29, 8, 2, 23, tzinfo=UTC), None]
    assert ex.events["ts_quality"].to_list() == ["exact", "missing"]
    check_contract(ex, 4)


def test_device_plugin_and_gpud_xid_lines() -> None:
    text = (
        "2024/03/01 10:00:00 Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock\n"
        "2024/03/01 10:05:07 XidCriticalError: Xid=48 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, "
        "the device will go unhealthy.\n"
        "2024/03/01 10:05:07 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8\n"
        "I0301 10:06:00.123456       1 health.go:171] XidCriticalError: Xid=79 on Device=GPU-1; marking device as unhealthy.\n"
        "XID 94(Contained ECC error) detected on PCI:0000:9b:00\n"
        "SXID 12028 detected on 0000:05:00.0\n"
        "failed to get remapped rows for GPU-ac896b35-5782-c478-4b2a-a661de07770f: failed to get device remapped rows: "
        "ERROR_GPU_IS_LOST\n"
    )
    ex = run(text)
    assert rows(ex) == [
        (2, "xid", None, None, "48", "critical"),
        (3, "gpu_unhealthy", None, None, "unhealthy", "warning"),
        (4, "xid", None, None, "79", "critical"),
        (5, "xid", None, "0000:9b:00", "94", "warning"),
        (7, "gpu_lost", None, None, "GPU is lost", "critical"),
    ]
    assert ex.events["ts"].to_list()[:2] == [datetime(2024, 3, 1, 10, 5, 7, tzinfo=UTC)] * 2
    check_contract(ex, 7)


def test_nvidia_smi_nvlink_status_inactive_links() -> None:
    text = (
        "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-0f0e7c2a-1111-2222-3333-444455556666)\n"
        "\t Link 0: 25.781 GB/s\n\t Link 1: 25.781 GB/s\n"
        "GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-1f0e7c2a-1111-2222-3333-444455556666)\n"
        "\t Link 0: 25.781 GB/s\n\t Link 3: <inactive>\n\t Link 4: 25.781 GB/s\n\t Link 5: <inactive>\n"
        "....\n"  # a headerless excerpt: link rows with no GPU line above
        "         Link 1: 25.781 GB/s\n         Link 2: <inactive>\n"
    )
    ex = run(text)
    ev = [(r["line_no"], r["kind"], r["gpu"], r["code"]) for r in ex.events.iter_rows(named=True)]
    assert ev == [(6, "nvlink_status", 3, "3,5"), (11, "nvlink_status", None, "2")]
    assert set(range(1, 9)) | {10, 11} <= set(ex.claimed.to_list()) | set(ex.ignored.to_list())
    check_contract(ex, 11)


def test_dcgmi_nvlink_link_status_down_links() -> None:
    text = (
        "+----------------------+\n|  NvLink Link Status  |\n+----------------------+\nGPUs:\n"
        "    gpuId 0:\n        U U U U U U D U U U U U X X _ _ _ _\n"
        "    gpuId 1:\n        U U U U U U U U U U U U U U U U U U\n"
        "NvSwitches:\n    No NvSwitches found.\n\nKey: Up=U, Down=D, Disabled=X, Not Supported=_\n"
    )
    ex = run(text)
    assert [(r["line_no"], r["kind"], r["gpu"], r["code"]) for r in ex.events.iter_rows(named=True)] == [
        (6, "nvlink_status", 0, "6")]
    assert {5, 7, 8} <= set(ex.ignored.to_list())
    check_contract(ex, 12)


# --------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv (property names and NVML error cells: `nvidia-smi --help-query-gpu`)


def test_query_csv_with_units_samples_and_state_starts() -> None:
    ex = fixture("query_csv_units.csv")
    check_contract(ex, 11)
    # one event where each state starts for GPU 1 (index column), not one per sample
    assert rows(ex) == [
        (5, "gpu_clock_event", 1, "0000:2a:00", "hw_slowdown", "warning"),
        (5, "gpu_clock_event", 1, "0000:2a:00", "hw_thermal", "warning"),
        (7, "gpu_ecc", 1, "0000:2a:00", "2", "error"),
        (7, "gpu_retired_pages", 1, "0000:2a:00", "pending", "warning"),
        (9, "gpu_lost", 1, None, "GPU is lost", "critical"),
    ]
    assert sample(ex, "DCGM_FI_DEV_GPU_TEMP", 1) == [43.0, 88.0, 89.0]
    assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 0) == [402.11, 401.02, 401.02, 401.02, 401.02]
    assert sample(ex, "DCGM_FI_DEV_FB_USED", 0)[0] == 61234.0
    t = ex.tables["dcgm_samples"]
    first = t.filter((pl.col("gpu") == 0) & (pl.col("field") == "DCGM_FI_DEV_SM_CLOCK")).row(0, named=True)
    assert first["ts"] == datetime(2024, 5, 14, 10, 21, 3, 412000, tzinfo=UTC)
    assert first["host"] == "node-17" and first["pci_bus_id"] == "0000:18:00"
    # the header and the repeated lost row (no reading, the state already started) are understood
    assert ex.ignored.to_list() == [1, 11]


def test_query_csv_nounits_inside_a_job_log_bitmask_and_reset_required() -> None:
    ex = fixture("query_csv_nounits_in_job_log.log")
    check_contract(ex, 9)
    # `.active` 0x68 = HwThermalSlowdown 0x40 | SwThermalSlowdown 0x20 | HwSlowdown 0x8 (nvml.h); 0x4
    # (SW power cap) and 0x1 (idle) are no slowdown events
    assert rows(ex) == [
        (7, "gpu_clock_event", 1, None, "hw_slowdown", "warning"),
        (7, "gpu_clock_event", 1, None, "hw_thermal", "warning"),
        (7, "gpu_clock_event", 1, None, "sw_thermal", "warning"),
        (9, "gpu_lost", 1, None, "GPU requires reset", "critical"),
    ]
    assert sample(ex, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1) == [1.0, 104.0]
    assert sample(ex, "DCGM_FI_DEV_SM_CLOCK", 1) == [1410.0, 1005.0]
    t = ex.tables["dcgm_samples"]
    assert t.filter(pl.col("gpu") == 0)["uuid"].unique().to_list() == ["GPU-4f1c2a3b-1111-2222-3333-444455556666"]
    # the command line is understood (it names the columns, `--format=csv` prints its own header too);
    # the training line is no row of the table
    assert 1 in ex.ignored.to_list() and 5 not in set(ex.claimed.to_list()) | set(ex.ignored.to_list())


def test_query_csv_real_unknown_error_in_one_property_is_no_lost_gpu() -> None:
    # https://github.com/Quake4/MindMiner/issues/627: `--format=csv,nounits`, the header with its units,
    # a blank line, and `[Unknown Error]` for power.default_limit only; the GPU itself answers
    ex = fixture("query_csv_mindminer627_unknown_error_one_field.csv")
    check_contract(ex, 3)
    assert ex.events.is_empty()
    t = ex.tables["dcgm_samples"]
    assert dict(zip(t["field"], t["value"], strict=True)) == {
        "DCGM_FI_DEV_GPU_UTIL": 100.0, "DCGM_FI_DEV_MEM_COPY_UTIL": 37.0, "DCGM_FI_DEV_GPU_TEMP": 56.0,
        "DCGM_FI_DEV_POWER_USAGE": 228.82, "nvsmi:query/power.limit": 210.0, "nvsmi:query/fan.speed": 56.0,
        "nvsmi:query/clocks.current.graphics": 1560.0, "DCGM_FI_DEV_MEM_CLOCK": 6800.0}
    assert t["gpu"].null_count() == t.height  # no index column: the GPU is unknown, never guessed


def test_query_csv_header_needs_known_properties() -> None:
    # comma-separated names that are no nvidia-smi readings, and a row under a header of another width
    ex = run("epoch, step, loss\n1, 200, 2.5\n"
             "timestamp, index, temperature.gpu\n2024/05/14 10:00:00.000, 0, 40, 7\n")
    assert ex.events.is_empty() and ex.tables["dcgm_samples"].is_empty()
    assert nvsmi.sniff("timestamp, index, temperature.gpu, power.draw [W]\n2024/05/14 10:00:00.000, 0, 40, 70 W\n") > 0.5
    assert nvsmi.sniff("epoch, step, loss\n1, 200, 2.5\n") == 0.0


def test_query_csv_noheader_rows_under_the_command_line_that_printed_them() -> None:
    # `--format=csv,noheader,nounits` prints no header; a job script under `set -x` (or a pasted command)
    # holds the `--query-gpu=` list that names the columns, in either option order
    for cmd in ("+ nvidia-smi --query-gpu=timestamp,index,temperature.gpu,power.draw,clocks.sm "
                "--format=csv,noheader,nounits -l 60",
                "$ nvidia-smi --format=csv,noheader -i 0,1 --query-gpu timestamp,index,temperature.gpu,power.draw,clocks.sm"):
        ex = run(cmd + "\n"
                 "2025/02/03 08:00:00.101, 0, 35, 70.12, 1410\n"
                 "2025/02/03 08:00:00.102, 1, 36, 71.40, 1410\n"
                 "step 100 loss 2.1\n"
                 "2025/02/03 08:01:00.102, 1, [GPU is lost], [GPU is lost], [GPU is lost]\n")
        check_contract(ex, 5)
        assert rows(ex) == [(5, "gpu_lost", 1, None, "GPU is lost", "critical")]
        assert sample(ex, "DCGM_FI_DEV_GPU_TEMP", 1) == [36.0]
        assert sample(ex, "DCGM_FI_DEV_POWER_USAGE", 0) == [70.12]
        assert ex.ignored.to_list() == [1] and 4 not in ex.claimed.to_list()
    # a query that prints no CSV (XML) names no rows; neither do rows without any command or header
    ex = run("nvidia-smi --query-gpu=index,temperature.gpu --format=xml\n0, 35\n2025/02/03 08:00:00.101, 0, 35\n")
    assert ex.events.is_empty() and ex.tables["dcgm_samples"].is_empty()


def test_a_query_section_pasted_without_the_log_header() -> None:
    """`nvidia-smi -q -d ROW_REMAPPER` / `PAGE_RETIREMENT` / `ECC` blocks posted alone (no `==NVSMI LOG==`):
    the section heading at the GPU block's indent opens a query block, read as under the header."""
    text = ("    Remapped Rows\n        Correctable Error                 : 0\n"
            "        Uncorrectable Error               : 4\n        Pending                           : Yes\n"
            "        Remapping Failure Occurred        : Yes\n")
    assert nvsmi.sniff(text) >= 0.8
    ex = run(text)
    got = [(r["line_no"], r["kind"], r["code"]) for r in ex.events.iter_rows(named=True)]
    assert got == [(4, "gpu_row_remap", "pending"), (5, "gpu_row_remap", "failure")]
    # a heading alone, or one in prose, is no query block
    assert nvsmi.sniff("    Remapped Rows\nsee the docs\n") == 0.0
    assert run("Remapped Rows were pending, said the admin\n").events.is_empty()

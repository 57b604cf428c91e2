"""Tests for parsers.dcgm: exporter text, long CSV, dmon tables, Prometheus JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from parsers import dcgm, kernel, sacct, slurm
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "dcgm"
REAL = ROOT.parent / "shared" / "real-samples"


def run(text: str, **ctx: object) -> Extraction:
    return dcgm.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="dcgm.txt", **ctx))  # type: ignore[arg-type]


def fixture(name: str, **ctx: object) -> Extraction:
    return run((FIX / name).read_text(), **ctx)


def samples(ex: Extraction) -> list[dict]:
    return ex.tables["dcgm_samples"].to_dicts()


def check_contract(ex: Extraction, n_lines: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert dict(ex.tables["dcgm_samples"].schema) == TABLE_SCHEMAS["dcgm_samples"]
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert all(1 <= n <= n_lines for n in claimed | ignored)


def test_dcgm_prometheus_exporter_text() -> None:
    ex = fixture("exporter_prometheus.prom")
    s = samples(ex)
    assert [(r["line_no"], r["field"], r["gpu"]) for r in s] == [
        (3, "DCGM_FI_DEV_SM_CLOCK", 0), (6, "DCGM_FI_DEV_MEMORY_TEMP", 0), (9, "DCGM_FI_DEV_XID_ERRORS", 0),
        (10, "DCGM_FI_DEV_XID_ERRORS", 3)]
    assert s[0]["value"] == 1980.0 and s[0]["host"] == "node-17" and s[0]["pci_bus_id"] == "0000:3b:00"
    assert s[0]["uuid"] == "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52" and s[0]["ts"] is None
    assert ex.ignored.to_list() == [1, 2, 4, 5, 7, 8]
    check_contract(ex, 10)


def test_dcgm_blank_sentinel_is_null() -> None:
    assert samples(fixture("exporter_prometheus.prom"))[1]["value"] is None
    assert samples(fixture("long_reordered_epoch.csv"))[1]["value"] is None


CLEAN_VALUE_CASES = [  # text as exported -> value (None: a DCGM blank or no number)
    ("1980", 1980.0), (" 5 ", 5.0), ("-3", -3.0), ("+7", 7.0), ("698.123", 698.123),
    ("N/A", None), ("", None), ("<<<NULL>>>", None), ("<<<NOT_SUPPORTED>>>", None), ("abc", None), (None, None),
    ("9223372036854775792", None), ("9223372036854775807", None),  # int64 blanks (>= 0x7ffffffffffffff0)
    ("2147483632", None), ("2147483635", None), ("2147483631", 2147483631.0), ("2147483636", 2147483636.0),
    ("2147483635.0", 2147483635.0),  # the int32 blanks are integers only
    ("1.40737488355328e14", None), ("1e300", None), ("140000000000000.0", 140000000000000.0),  # double blank
    ("inf", float("inf")), ("-inf", float("-inf")),
]


def test_dcgm_clean_value_table() -> None:
    raw = pl.DataFrame({"v": [c[0] for c in CLEAN_VALUE_CASES]}, schema={"v": pl.Utf8})
    got = raw.select(dcgm.clean_value(pl.col("v")))["v"].to_list()
    assert got == [c[1] for c in CLEAN_VALUE_CASES]
    # the same on a lazy frame and inside a longer select (the cleaning runs on whole columns)
    lazy = raw.lazy().select(pl.col("v").alias("raw"), dcgm.clean_value(pl.col("v")).alias("value")).collect()
    assert lazy["value"].to_list() == got and lazy["raw"].to_list() == raw["v"].to_list()


def test_dcgm_health_status_without_a_number_is_no_event() -> None:
    """A health status of nan / inf (found by the parse_bytes property test: it made the parser
    fail on the whole file) is a sample without an event."""
    ex = run("timestamp,metric,gpu,Hostname,value\n"
             "1600000000,DCGM_EXP_GPU_HEALTH_STATUS,0,node-1,nan\n"
             "1600000001,DCGM_EXP_GPU_HEALTH_STATUS,0,node-1,inf\n"
             "1600000002,DCGM_EXP_GPU_HEALTH_STATUS,0,node-1,20\n")
    assert [(r["code"], r["line_no"]) for r in ex.events.to_dicts()] == [("20", 4)]
    assert ex.tables["dcgm_samples"].height == 3 and not ex.warnings


def test_dcgm_prometheus_xid_event() -> None:
    (e,) = fixture("exporter_prometheus.prom").events.to_dicts()
    assert (e["kind"], e["code"], e["gpu"], e["line_no"], e["host"], e["pci_bus_id"]) == (
        "dcgm_xid", "79", 3, 10, "node-17", "0000:5d:00")
    assert e["severity"] == "critical" and e["ts_quality"] == "missing"


def test_dcgm_prometheus_hostname_lowercase_label() -> None:
    s = samples(fixture("exporter_hostname_lowercase.prom"))
    assert {r["host"] for r in s} == {"node-42"}
    assert s[1]["field"] == "DCGM_FI_DEV_POWER_USAGE" and s[1]["value"] == 698.123


def test_dcgm_prometheus_ms_timestamps_and_xid_changes() -> None:
    ex = fixture("exporter_timestamps.prom")
    assert samples(ex)[0]["ts"] == datetime(2024, 6, 10, 6, 13, 20, tzinfo=UTC)
    e = ex.events.to_dicts()
    assert [(r["line_no"], r["code"]) for r in e] == [(2, "48"), (4, "63")]
    assert e[0]["ts_quality"] == "exact"


def test_dcgm_new_and_old_field_names() -> None:
    s = samples(fixture("exporter_new_names.prom"))
    assert [r["field"] for r in s] == ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE",
                                       "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]


def test_dcgm_exporter_1x_lowercase_names() -> None:
    s = samples(fixture("exporter_1x_lowercase.prom"))
    assert [r["field"] for r in s] == ["DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP",
                                       "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"]
    assert s[0]["uuid"].startswith("GPU-604ac76c")


def test_dcgm_health_and_xid_count() -> None:
    e = fixture("exporter_health.prom").events.to_dicts()
    assert [(r["kind"], r["line_no"], r["code"], r["gpu"]) for r in e] == [
        ("dcgm_health", 1, "DCGM_FR_VOLATILE_DBE_DETECTED", 4), ("dcgm_xid", 3, "48", 4)]
    assert e[0]["severity"] == "error"


def test_dcgm_long_csv_timeseries() -> None:
    ex = fixture("long_timeseries.csv")
    s = samples(ex)
    assert [r["line_no"] for r in s] == [2, 3, 4]
    assert s[0]["ts"] == datetime(2024, 6, 10, 6, 13, 20, tzinfo=UTC) and s[1]["value"] is None
    (e,) = ex.events.to_dicts()
    assert (e["code"], e["line_no"]) == ("79", 4)
    assert ex.ignored.to_list() == [1]


def test_dcgm_long_csv_any_column_order_epoch() -> None:
    s = samples(fixture("long_reordered_epoch.csv"))
    assert s[0]["field"] == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" and s[0]["host"] == "node-2"
    assert s[1]["ts"] == datetime(2024, 6, 10, 6, 13, 35, 500000, tzinfo=UTC)
    assert s[0]["pci_bus_id"] == "0000:1b:00"


def test_dmon_table() -> None:
    ex = fixture("dmon.txt", host_hint="node-5")
    s = pl.DataFrame(samples(ex))
    assert s.filter((pl.col("gpu") == 1) & (pl.col("field") == "DCGM_FI_DEV_POWER_USAGE"))["value"].to_list() == [701.441]
    assert set(s["host"].to_list()) == {"node-5"}
    assert ex.claimed.to_list() == [3, 4, 5] and ex.ignored.to_list() == [1, 2, 6]


def test_dmon_na_values() -> None:
    ex = fixture("dmon.txt")
    s = pl.DataFrame(samples(ex)).filter(pl.col("gpu") == 7)
    assert s.filter(pl.col("field") == "DCGM_FI_DEV_SM_CLOCK")["value"].to_list() == [None]
    assert s.filter(pl.col("field") == "DCGM_FI_DEV_XID_ERRORS")["value"].to_list() == [79.0]
    assert [(e["gpu"], e["code"]) for e in ex.events.to_dicts()] == [(7, "79")]


def test_dcgm_prometheus_query_range_json() -> None:
    ex = fixture("prometheus_query_range.json")
    s = samples(ex)
    assert len(s) == 4 and s[1]["ts"] == datetime(2024, 6, 10, 6, 13, 35, tzinfo=UTC) and s[1]["value"] == 46.0
    assert [e["code"] for e in ex.events.to_dicts()] == ["119"]


def test_real_029_label_only_sample() -> None:
    if not REAL.exists():
        pytest.skip("../shared/real-samples is missing")
    f = next(REAL.glob("029*/dcgm.prom"))
    ex = run(f.read_text())
    (s,) = samples(ex)
    assert s["field"] == "DCGM_FI_DEV_XID_ERRORS" and s["value"] is None and s["line_no"] == 1
    assert any("without a value" in w for w in ex.warnings)
    assert [(e["line_no"], e["code"]) for e in ex.events.to_dicts()] == [(1, "45")]


def test_large_csv_is_vectorized() -> None:
    n = 200_000
    body = "\n".join(f"{1718000000 + i},DCGM_FI_DEV_GPU_TEMP,{i % 8},GPU-x,0000:3b:00.0,n1,{40 + i % 30}"
                     for i in range(n))
    ex = run("timestamp,metric,gpu,UUID,pci_bus_id,Hostname,value\n" + body)
    assert ex.tables["dcgm_samples"].height == n


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=100), max_size=12))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(ln.replace("\n", " ").replace("\r", " ") for ln in lines)
    check_contract(run(text), decode_lines(text.encode()).lines.height)


REAL_LINES = [ln for f in sorted(FIX.iterdir()) if f.name != "README.md" for ln in f.read_text().splitlines()]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 150), st.text(max_size=4)), max_size=10))
def test_property_mutated_real_lines(muts: list[tuple[str, int, str]]) -> None:
    text = "\n".join((ln[:i] + s + ln[i + len(s):]) for ln, i, s in muts)
    check_contract(run(text), decode_lines(text.encode()).lines.height)


def test_sniff_ranks_dcgm_fixtures_first() -> None:
    for f in sorted(FIX.iterdir()):
        if f.name == "README.md":
            continue
        head = f.read_text()
        assert dcgm.sniff(head) > max(m.sniff(head) for m in (kernel, sacct, slurm)), f.name


# ---- dcgmi health / diag -------------------------------------------------------------------


def test_dcgmi_health_old_tree_layout() -> None:
    ex = fixture("dcgmi_health_old.txt")
    got = [(r["line_no"], r["kind"], r["gpu"], r["code"], r["severity"]) for r in ex.events.iter_rows(named=True)]
    assert got == [(4, "dcgm_health", None, "Warning", "warning"), (8, "dcgm_health", 0, "Warning", "warning"),
                   (13, "dcgm_health", 3, "Failure", "error")]
    # the detail text under a subsystem belongs to it
    assert {9, 10, 14} <= set(ex.claimed.to_list())
    check_contract(ex, 15)
    assert dcgm.sniff((FIX / "dcgmi_health_old.txt").read_text()) >= 0.9


def test_dcgmi_health_new_gpu_id_layout() -> None:
    ex = fixture("dcgmi_health_new.txt")
    got = [(r["line_no"], r["gpu"], r["code"]) for r in ex.events.iter_rows(named=True)]
    assert got == [(3, None, "Failure"), (6, 1, "Warning"), (9, 5, "Failure")]
    assert "NVLink system: Warning" in ex.events["message"][1]
    check_contract(ex, 11)


def test_dcgmi_diag_failed_and_warned_tests() -> None:
    ex = fixture("dcgmi_diag.txt")
    got = [(r["line_no"], r["kind"], r["gpu"], r["code"], r["severity"]) for r in ex.events.iter_rows(named=True)]
    assert got == [(16, "dcgm_diag", 2, "Fail", "error"), (17, "dcgm_diag", 2, "detail", "error"),
                   (22, "dcgm_diag", 1, "Warn", "warning"), (23, "dcgm_diag", 1, "detail", "error")]
    assert 18 in ex.claimed.to_list()  # the wrapped second line of the warning
    assert set(ex.claimed.to_list()) | set(ex.ignored.to_list()) == set(range(1, 29))
    check_contract(ex, 28)


def test_dcgmi_diag_rows_without_the_table_header() -> None:
    """A diag table pasted from its middle (no `| Diagnostic | Result |` header): recognized by its
    section banner or by rows that name DCGM tests with a result; the same events as in a whole table."""
    tail = "\n".join((FIX / "dcgmi_diag.txt").read_text().splitlines()[13:]) + "\n"
    assert "Diagnostic" not in tail.split("\n")[0]
    assert dcgm.sniff(tail) >= 0.9
    whole = fixture("dcgmi_diag.txt")
    cut = run(tail)
    shift = 13
    assert [(r["line_no"] + shift, r["code"], r["gpu"]) for r in cut.events.iter_rows(named=True)] == \
        [(r["line_no"], r["code"], r["gpu"]) for r in whole.events.iter_rows(named=True)]
    rows_only = "| GPU Memory                | Fail - GPU: 3                                  |\n"
    assert dcgm.sniff(rows_only) >= 0.9
    assert run(rows_only).events["code"].to_list() == ["Fail"]
    for other in ("| Name | Value |\n| loss | 0.3 |\n", "| step | Pass rate |\n"):
        assert dcgm.sniff(other) == 0.0


_TS = (FIX / "long_timeseries.csv").read_text()
_HDR, *_ROWS = _TS.splitlines()
PARSE_BYTES_CASES = {  # name -> (file text, whether parse_bytes reads it itself)
    "fixture long_timeseries": (_TS, True),
    "fixture long_reordered_epoch (quoted model name)": ((FIX / "long_reordered_epoch.csv").read_text(), False),
    "no final newline": (_TS.rstrip("\n"), True),
    "cells padded with white space": (_TS.replace(",node-17,", ", node-17\t,").replace(",45\n", ", 45 \n"), True),
    "epoch ms stamps, an XID that changes": (
        "time,metric,gpu,Hostname,value\n" + "".join(
            f"{1718000000000 + 15000 * i},DCGM_FI_DEV_XID_ERRORS,{i % 2},node-3,{[0, 0, 79, 79, 48, 0][i]}\n"
            for i in range(6)), True),
    "ragged rows": (f"{_HDR}\n{_ROWS[0]}\n{_ROWS[1]},extra,cells\n{_ROWS[2].rsplit(',', 2)[0]}\n", True),
    "blank line": (f"{_HDR}\n{_ROWS[0]}\n\n{_ROWS[1]}\n", False),
    "whitespace-only line": (f"{_HDR}\n{_ROWS[0]}\n  \n{_ROWS[1]}\n", False),
    "comment before the header": (f"# dcgm export\n{_TS}", False),
    "header only": (f"{_HDR}\n", True),
    "a dmon table further down": (f"{_TS}#Entity   POWER\nGPU 0     85.2\n", False),
    "non-ASCII host": (_TS.replace("node-17", "nöde-17"), False),
}


def _assert_is_parse(got: Extraction, data: bytes, ctx: ParseContext) -> None:
    """`got` (from parse_bytes) is what `parse` gives on the lines of `data`."""
    want = dcgm.parse(with_body(decode_lines(data).lines), ctx)
    assert got.claimed.to_list() == want.claimed.to_list() and got.ignored.to_list() == want.ignored.to_list()
    assert got.events.equals(want.events) and got.warnings == want.warnings
    assert got.tables["dcgm_samples"].equals(want.tables["dcgm_samples"])


@pytest.mark.parametrize("name", list(PARSE_BYTES_CASES))
def test_parse_bytes_is_parse_or_declines(name: str) -> None:
    """`parse_bytes` (the whole-file fast path for long CSVs) reads what it takes exactly as `parse`
    does from the lines, and declines (None) the files whose lines need `parse`."""
    text, fast = PARSE_BYTES_CASES[name]
    data = text.encode()
    ctx = ParseContext(path="dcgm.csv", host_hint="hint-host")
    got = dcgm.parse_bytes(data, ctx)
    assert (got is not None) == fast
    if got is None:
        return
    _assert_is_parse(got, data, ctx)
    assert got.claimed.len() + got.ignored.len() == text.count("\n") + (0 if text.endswith("\n") else 1)


def test_parse_bytes_events_carry_their_lines_text() -> None:
    text = PARSE_BYTES_CASES["epoch ms stamps, an XID that changes"][0]
    ev = dcgm.parse_bytes(text.encode(), ParseContext(path="dcgm.csv")).events  # type: ignore[union-attr]
    assert [(r["line_no"], r["code"], r["message"]) for r in ev.to_dicts()] == [
        (4, "79", text.splitlines()[3]), (5, "79", text.splitlines()[4]), (6, "48", text.splitlines()[5])]


def test_parse_bytes_many_is_each_files_parse_bytes() -> None:
    """Many files at once (same header read together, another header apart, declined files left
    out): each file's part, line numbers made its own again, is what the file alone gives. Two
    files report the same host and GPU, so an XID change must be tracked per file."""
    xid = PARSE_BYTES_CASES["epoch ms stamps, an XID that changes"][0]
    files = [xid, PARSE_BYTES_CASES["fixture long_timeseries"][0], PARSE_BYTES_CASES["blank line"][0],
             xid.replace(",79\n", ",31\n"), PARSE_BYTES_CASES["cells padded with white space"][0],
             "timestamp,metric,gpu,value\n2024-06-10T06:13:20Z,DCGM_FI_DEV_GPU_TEMP,0,45\n"]  # host: the path's
    hosts = ["h0", "h1", "h2", "h3", "h4", "h5"]
    ctx = ParseContext(path="<batch>", batched=True)
    ext, taken = dcgm.parse_bytes_many([f.encode() for f in files], hosts, ctx)
    assert taken == [True, True, False, True, True, True]
    stride = dcgm.BYTES_STRIDE

    def part(df: pl.DataFrame, k: int) -> pl.DataFrame:
        return df.filter(pl.col("line_no") // stride == k).with_columns(pl.col("line_no") - k * stride)

    for k, text in enumerate(files):
        if not taken[k]:
            assert part(ext.tables["dcgm_samples"], k).is_empty()
            continue
        alone = dcgm.parse_bytes(text.encode(), ParseContext(path="x.csv", host_hint=hosts[k]))
        assert alone is not None
        assert part(ext.events, k).equals(alone.events), k
        assert part(ext.tables["dcgm_samples"], k).equals(alone.tables["dcgm_samples"]), k
        own = ext.claimed.filter(ext.claimed // stride == k) - k * stride
        assert own.to_list() == alone.claimed.to_list()
    assert part(ext.events, 3)["code"].to_list() == ["31", "31", "48"]
    assert part(ext.tables["dcgm_samples"], 5)["host"].to_list() == ["h5"]


_CELL = st.one_of(
    st.sampled_from(["45", "0", "-3", "1980", "698.123", "N/A", "", "<<<NULL>>>", "9223372036854775794",
                     "2147483632", "2147483636", "1.40737488355328e14", "1e300", "nan", " 7 ", "x"]),
    st.integers(-10**12, 10**12).map(str), st.floats(allow_nan=False).map(repr))
_STAMP = st.one_of(st.integers(1_600_000_000, 1_800_000_000).map(str),
                   st.integers(1_600_000_000_000, 1_800_000_000_000).map(str),
                   st.sampled_from(["2024-06-10T06:13:20Z", "2024-06-10 06:13:35", "2024-06-10T06:13:20.5+02:00",
                                    "not a time", ""]))
_ROW = st.tuples(_STAMP, st.sampled_from(["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "dcgm_sm_clock",
                                          "DCGM_EXP_GPU_HEALTH_STATUS", "DCGM_FI_DEV_POWER_USAGE"]),
                 st.sampled_from(["0", "1", "7", "", "x"]), st.sampled_from(["node-1", "node-2", ""]),
                 st.sampled_from(["00000000:3B:00.0", "0000:1b:00", ""]), _CELL)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(["timestamp", "metric", "gpu", "Hostname", "pci_bus_id", "value"]),
       st.lists(_ROW, max_size=25), st.booleans(), st.integers(0, 2))
def test_property_parse_bytes_is_parse(cols: list[str], rows: list[tuple], final_newline: bool, ragged: int) -> None:
    """Generated long CSVs (any column order, sentinels, bad stamps, empty cells, ragged rows):
    whenever `parse_bytes` takes the file, it gives what `parse` gives on its lines."""
    order = ["timestamp", "metric", "gpu", "Hostname", "pci_bus_id", "value"]
    lines = [",".join(cols)]
    for i, r in enumerate(rows):
        cells = dict(zip(order, r, strict=True))
        row = [cells[c] for c in cols]
        if ragged and i % 3 == 0:
            row = row[:-ragged] if ragged == 1 else row + ["extra"]
        lines.append(",".join(row))
    text = "\n".join(lines) + ("\n" if final_newline else "")
    data = text.encode()
    ctx = ParseContext(path="dcgm.csv", host_hint="hint")
    got = dcgm.parse_bytes(data, ctx)
    event("taken" if got is not None else "declined")
    if got is None:
        return
    _assert_is_parse(got, data, ctx)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([None, "", "1793606400", "1793606400.5", "1793606400123", "2026-11-02T08:00:00Z",
                                 "2026-11-02 08:00:01", "not a time", " 1793606401 "]), max_size=60),
       st.integers(1, 12))
def test_property_stamps_by_runs_are_stamps_by_value(values: list[str | None], repeat: int) -> None:
    """`_per_value(runs=True)` (one lookup per run of one value) gives what the per-distinct-value
    lookup gives, with nulls, blanks, unparsable and repeated stamps in runs of any length."""
    k = pl.Series("t", [v for v in values for _ in range(repeat)], dtype=pl.Utf8)
    df = pl.DataFrame({"t": k})
    ctx = ParseContext(path="dcgm.csv")
    for fn in (lambda r: dcgm._csv_ts(r, ctx), lambda r: dcgm._csv_ts(r, ctx).dt.epoch("us")):
        a = dcgm._per_value(df, pl.col("t"), fn, "o", runs=True)
        b = dcgm._per_value(df, pl.col("t"), fn, "o", runs=False)
        assert a.equals(b)


@pytest.mark.parametrize("join_below", [0, 1 << 30])
def test_parse_bytes_many_same_whether_files_are_read_alone_or_joined(join_below: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of one header are read from their own bytes (large ones: no copy) or joined under
    the header (small ones): either way the same Extraction, also when a file lacks its final
    newline or has only its header, and with the newline offsets given by the caller or not."""
    import numpy as np

    xid = PARSE_BYTES_CASES["epoch ms stamps, an XID that changes"][0]
    files = [xid, xid.replace(",79\n", ",31\n").rstrip("\n"), xid.split("\n", 1)[0] + "\n",
             PARSE_BYTES_CASES["fixture long_timeseries"][0], xid]
    datas = [f.encode() for f in files]
    hosts = [f"h{k}" for k in range(len(files))]
    ctx = ParseContext(path="<batch>", batched=True)
    monkeypatch.setattr(dcgm, "JOIN_BELOW", 1 << 30)
    ref, ref_taken = dcgm.parse_bytes_many(datas, hosts, ctx)
    monkeypatch.setattr(dcgm, "JOIN_BELOW", join_below)
    nls = [np.flatnonzero(np.frombuffer(d, dtype=np.uint8) == 10) for d in datas]
    for got, taken in (dcgm.parse_bytes_many(datas, hosts, ctx), dcgm.parse_bytes_many(datas, hosts, ctx, newlines=nls)):
        assert taken == ref_taken == [True] * len(files)
        assert got.events.equals(ref.events)
        assert got.tables["dcgm_samples"].equals(ref.tables["dcgm_samples"])
        assert got.claimed.to_list() == ref.claimed.to_list() and got.ignored.to_list() == ref.ignored.to_list()
    assert ref.events.height >= 6 and ref.tables["dcgm_samples"].height > 20


def _sort_unique(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """`df.sort(keys, nulls_last=True)` by `dcgm._sort_key` (rows unique by `keys`), as the readers use it."""
    key = dcgm._sort_key({c: (df[c].min(), df[c].max()) for c in keys})
    if key is None:
        return df.sort(keys, nulls_last=True)
    return df.with_columns(key.alias("_key")).sort("_key").drop("_key")


def test_sort_unique_is_the_four_column_sort() -> None:
    """The buckets' one-key sort orders as `sort(keys, nulls_last=True)` (nulls in any key, negative
    GPU ids), and falls back to that sort when the key ranges do not fit in 62 bits."""
    import random

    rng = random.Random(7)
    rows = {(rng.choice([None, *range(-3, 40)]), rng.choice([None, 0, 1, 2]), rng.choice([None, -1, *range(8)]),
             rng.choice([None, 0, 1, 2, 3])) for _ in range(3000)}
    df = pl.DataFrame(sorted(rows, key=str), schema={"t": pl.Int64, "h": pl.Int32, "gpu": pl.Int64, "f": pl.Int32},
                      orient="row").with_row_index("i")
    keys = ["t", "h", "gpu", "f"]
    assert _sort_unique(df, keys).equals(df.sort(keys, nulls_last=True))
    wide = df.with_columns(pl.when(pl.col("i") == 5).then(pl.lit(1 << 61)).otherwise(pl.col("t")).alias("t"))
    assert _sort_unique(wide, keys).equals(wide.sort(keys, nulls_last=True))


# --------------------------------------------------------------------------------------------
# the block reader (`read_csv_chunks`): its fast paths against the general ones


def _messy_long_csv(seed: int, ids: bool, rows: int = 1500, extreme: bool = False) -> str:
    """A long DCGM CSV as exporters and scripts write them, rows shuffled: quoted and bare cells,
    spaces around cells, blank cells, N/A, the int64/int32/double blank sentinels, an unparsable
    stamp, a bad GPU id, a host with a comma, an old and a lowercase field name and a field id
    (renamed to the classic name), a bit mask (old and new name in one bucket), a counter, Xids."""
    import random

    rng = random.Random(seed)
    fields = ["DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
              "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "dcgm_power_usage", "155", "DCGM_FI_DEV_GPU_TEMP",
              "DCGM_FI_DEV_XID_ERRORS", " DCGM_FI_DEV_GPU_TEMP "]
    values = ["1980", "1410.5", "64", "32", "0", "3", "N/A", "", "9223372036854775792", "2147483632",
              "1.5e15", " 12.25 ", "-7", "79", "1e3", "0.1", "2.675", "1e-7", "123456789.123"]
    hosts = ["n1", "n2", '"n,3"', "", " n1"]
    out = ['timestamp,"Hostname",gpu,"__name__",' + ('UUID,pci_bus_id,' if ids else "") + "value"]
    for _ in range(rows):
        ts = rng.choice([f"{1793606400 + rng.randrange(0, 95)}.{rng.randrange(10)}", "bad", "",
                         f"{1793606400000 + rng.randrange(0, 95000)}", "2026-11-02T08:00:03Z"])
        gpu = rng.choice(["0", "1", '"2"', " 3", "x", "", "-1", *(["9223372036854775807", "-9223372036854775807"]
                                                                  if extreme else [])])
        cells = [ts, rng.choice(hosts), gpu, rng.choice(fields)]
        if ids:
            g = gpu.strip(' "')
            cells += [rng.choice([f"GPU-{g}", ""]), rng.choice([f"00000000:{g or 0}a:00.0", "", "junk"])]
        v = rng.choice(values)
        cells.append(f'"{v}"' if rng.random() < 0.2 else v)
        out.append(",".join(cells))
    return "\n".join(out) + "\n"


def _read_blocks(text: str, cut: int | None, threads: int, monkeypatch: pytest.MonkeyPatch) -> tuple:
    data = text.encode()
    layout = dcgm.table_layout(text[:4096], 1 << 40, 1)
    assert layout is not None
    blocks = [data] if cut is None else [data[i:i + cut] for i in range(0, len(data), cut)]
    monkeypatch.setattr(dcgm.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(dcgm, "BLOCK_THREADS", threads)
    return dcgm.read_csv_chunks(blocks, layout, ParseContext(path="d.csv"))


def _bucketed_line_path(text: str) -> pl.DataFrame:
    """The general path: `parse` of the lines, its samples bucketed by polars' group_by over the
    four columns (mean as sum / count, OR of the bit mask, maximum of the counter) and sorted by
    them, nulls last. (Both paths name a numeric field id: `canonical_or_id`.)"""
    lines = pl.DataFrame({"line_no": range(1, text.count("\n") + 1), "text": text.split("\n")[:-1]})
    s = dcgm.parse(lines, ParseContext(path="d.csv")).tables["dcgm_samples"]
    f, v = pl.col("field"), pl.col("value")
    keys = ["ts", "host", "gpu", "field"]
    return s.with_columns(pl.col("ts").dt.truncate(f"{dcgm.BUCKET_S}s")).group_by(keys).agg(
        pl.col("uuid").drop_nulls().first(), pl.col("pci_bus_id").drop_nulls().first(),
        (v.sum() / v.count()).alias("_mean"), v.count().alias("_n"), v.max().alias("_max"),
        v.cast(pl.Int64, strict=False).bitwise_or().alias("_or"),
    ).select(*keys, "uuid", "pci_bus_id", pl.when(f.is_in(dcgm.BITMASK_FIELDS)).then(pl.col("_or").cast(pl.Float64))
             .when(f.is_in(dcgm.COUNTER_FIELDS)).then(pl.col("_max"))
             .when(pl.col("_n") > 0).then(pl.col("_mean")).alias("value")).sort(keys, nulls_last=True)


@pytest.mark.parametrize(("seed", "ids", "extreme"), [(1, False, False), (2, False, False), (3, False, True),
                                                     (1, True, False), (2, True, True), (3, True, False)])
def test_block_reader_is_the_line_path_bucketed(seed: int, ids: bool, extreme: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """One block: the reader's buckets (one-key grouping, the bit masks grouped apart, numpy's sort
    of the digits; with GPU ids at both ends of int64, the four-column group_by and sort they fall
    back to) are exactly the line path's samples bucketed by polars' four-column group_by and
    sort, value for value (the same sums in the same row order); its events are the line path's.
    Many blocks, in threads or not: the same buckets and order (values summed in parts: close)."""
    text = _messy_long_csv(seed, ids, extreme=extreme)
    want = _bucketed_line_path(text)
    cols = ["ts", "host", "gpu", "field", "uuid", "pci_bus_id", "value"]
    ext, n_lines, n_read = _read_blocks(text, None, 1, monkeypatch)
    got = ext.tables["dcgm_samples"]
    assert (n_lines, n_read) == (1501, 1500)
    assert got.select(cols).equals(want.select(cols))
    # what the data holds, so that the comparison means something
    assert got["ts"].null_count() and got["gpu"].null_count() and got["host"].null_count()
    assert got["value"].null_count() and got["field"].n_unique() == 6 and "n,3" in got["host"].to_list()
    masks = got.filter(pl.col("field") == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")["value"].drop_nulls()
    assert masks.len() > 20 and (masks == masks.round()).all()  # ORs, no means
    lines = pl.DataFrame({"line_no": range(1, 1502), "text": text.split("\n")[:-1]})
    lp = dcgm.parse(lines, ParseContext(path="d.csv"))
    ev_cols = ["line_no", "kind", "code", "host", "gpu", "ts", "message"]
    assert ext.events.height > 5 and ext.events.select(ev_cols).equals(lp.events.select(ev_cols))
    for cut, threads in ((4096, 1), (4096, 2), (977, 4)):
        ext2, _, _ = _read_blocks(text, cut, threads, monkeypatch)
        g2 = ext2.tables["dcgm_samples"]
        assert g2.select(cols[:-1]).equals(want.select(cols[:-1]))
        assert g2["value"].is_null().equals(want["value"].is_null())
        assert ((g2["value"] - want["value"]).abs() <= 1e-9 * want["value"].abs()).all()
        assert ext2.events.equals(ext.events)


def test_group_by_key_is_the_four_column_group_by() -> None:
    """`_group_by_key` (one Int64 key, the columns decoded from it) gives polars' four-column
    group_by: the same groups and aggregates (float sums exactly: each group's rows in the same
    order), nulls and negative values in any key, and falls back to it past 62 bits."""
    import random

    rng = random.Random(11)
    n = 5000
    df = pl.DataFrame({
        "t": [rng.choice([None, *range(-3, 3)]) for _ in range(n)],
        "h": [rng.choice([None, 0, 1, 2]) for _ in range(n)],
        "gpu": [rng.choice([None, -1, *range(8)]) for _ in range(n)],
        "f": [rng.choice([None, 0, 1, 2, 3]) for _ in range(n)],
        "v": [rng.choice([None, rng.uniform(-1e6, 1e6), rng.uniform(0, 1e-3)]) for _ in range(n)],
    }, schema={"t": pl.Int64, "h": pl.Int32, "gpu": pl.Int64, "f": pl.Int32, "v": pl.Float64})
    keys = ["t", "h", "gpu", "f"]
    aggs = [pl.col("v").sum().alias("s"), pl.col("v").count().alias("n"), pl.col("v").max().alias("m")]
    for frame in (df, df.with_columns(pl.col("t").fill_null(1 << 61)), df.with_columns(pl.lit(None, dtype=pl.Int64).alias("gpu"))):
        got = dcgm._group_by_key(frame, keys, aggs).sort(keys, nulls_last=True)
        want = frame.group_by(keys).agg(aggs).sort(keys, nulls_last=True)
        assert got.equals(want)
        assert got.height > 100 and got["n"].max() >= 6  # groups of several rows, each summed in order


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_xid_and_health_events_follow_each_series_changes(seed: int) -> None:
    """An Xid event is a non-zero Xid that differs from the one before it in its series (host, GPU,
    field), in time order (file order among equal stamps); a health event likewise for a positive
    status. Checked against that rule written out, on shuffled rows of many series where most have
    only zeros (those are left out before the sort) and a few have Xids, repeats, zeros and N/A."""
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(3000):
        host, gpu = rng.choice(["n1", "n2", "n3", "n4"]), rng.randrange(8)
        field = rng.choice([dcgm.XID_FIELD, dcgm.HEALTH_FIELD])
        hot = (host, gpu) in {("n2", 3), ("n4", 0), ("n1", 7)}
        value = rng.choice(["79", "79", "48", "0", "N/A"] if hot else ["0", "0", "N/A"]) if field == dcgm.XID_FIELD \
            else rng.choice(["0", "10", "20", "20", "N/A"] if hot else ["0"])
        rows.append((1793606400 + rng.randrange(600), host, gpu, field, value))
    text = "timestamp,Hostname,gpu,metric,value\n" + "".join(f"{t},{h},{g},{f},{v}\n" for t, h, g, f, v in rows)
    ext = run(text)
    want, prev = [], {}
    for i in sorted(range(len(rows)), key=lambda i: (rows[i][0], i)):
        t, h, g, f, v = rows[i]
        x = None if v == "N/A" else int(v)
        key = (h, g, f)
        if x not in (None, 0) and prev.get(key) != x:
            want.append((i + 2, "dcgm_xid" if f == dcgm.XID_FIELD else "dcgm_health", str(x), h, g))
        prev[key] = x
    got = ext.events.sort("line_no").select("line_no", "kind", "code", "host", "gpu").rows()
    assert got == sorted(want) and len(want) > 30
    assert {(h, g) for _, _, _, h, g in want} == {("n2", 3), ("n4", 0), ("n1", 7)}


@pytest.mark.parametrize(("header", "comment"), [
    ("timestamp,hostname,gpu,field,value", False),
    ("time,node,gpu_id,field_id,val", False),          # the block reader's other names for each role
    ("sample_time,instance,entityId,metric_name,value", True),   # the header after a comment line
])
def test_the_line_path_reads_every_long_csv_the_block_reader_does(header: str, comment: bool) -> None:
    """A small long CSV (read whole or by lines) is read as a large one (the block reader) is: the
    same column names for each role (`_COLS`), numeric DCGM field ids named (`dcgmi dmon -e 155,150`
    ids). Before, the line path kept "155" as it was, and a header it did not know (`field_id`,
    `val`, `node`) after a comment line gave no samples at all."""
    text = (("# exported by collect.sh\n" if comment else "") + header + "\n2026-11-02T08:00:00Z,node-1,0,155,301.5\n"
            "2026-11-02T08:00:00Z,node-1,0,150,71\n2026-11-02T08:00:00Z,node-1,0,99999,1\n")
    rows = text.split("\n")[:-1]
    lines = pl.DataFrame({"line_no": range(1, len(rows) + 1), "text": rows})
    s = dcgm.parse(lines, ParseContext(path="d.csv")).tables["dcgm_samples"]
    assert s.select("host", "gpu", "field", "value").rows() == [
        ("node-1", 0, "DCGM_FI_DEV_POWER_USAGE", 301.5), ("node-1", 0, "DCGM_FI_DEV_GPU_TEMP", 71.0),
        ("node-1", 0, "99999", 1.0)]  # an id the field table lacks stays as printed
    if not comment:  # the same file read by the block reader
        layout = dcgm.csv_layout(header)
        assert layout is not None
        ext, _, _ = dcgm.read_csv_chunks([text.encode()], layout, ParseContext(path="d.csv"))
        got = ext.tables["dcgm_samples"].sort("field").select("host", "gpu", "field", "value").rows()
        assert got == sorted(s.select("host", "gpu", "field", "value").rows(), key=lambda r: r[2])


def test_csv_layout_of_a_line_the_csv_module_refuses_is_none() -> None:
    # a "header" holding a lone CR (a CR-separated file read as one line; found by the ingest fuzzer):
    # no table layout, and no exception out of the sniff
    line = 'timestamp,gpu\r"error_category" : 1,\r2025/02/03 08:00:00.102, 1, 36'
    assert dcgm.csv_layout(line) is None
    assert dcgm.table_layout(line + "\n", 10 << 30, 1 << 20) is None
    assert dcgm.csv_layout("timestamp,Hostname,gpu,metric,value") is not None


HEADERLESS = (
    "2026-11-02T08:02:16Z,DCGM_FI_DEV_SM_CLOCK,7,GPU-767b2f2a-68eb-e5b4-124c-ef20e95ddc29,00000000:DB:00.0,node-000,1980\n"
    "2026-11-02T08:02:16Z,DCGM_FI_DEV_XID_ERRORS,7,GPU-767b2f2a-68eb-e5b4-124c-ef20e95ddc29,00000000:DB:00.0,node-000,0\n"
    "2026-11-02T08:02:17Z,DCGM_FI_DEV_SM_CLOCK,7,GPU-767b2f2a-68eb-e5b4-124c-ef20e95ddc29,00000000:DB:00.0,node-000,1975\n"
    "2026-11-02T08:02:17Z,DCGM_FI_DEV_XID_ERRORS,7,GPU-767b2f2a-68eb-e5b4-124c-ef20e95ddc29,00000000:DB:00.0,node-000,79\n"
    "2026-11-02T08:02:18Z,DCGM_FI_DEV_XID_ERRORS,0,GPU-086087eb-4dc0-ca7e-55a2-e548ec0755bf,00000000:18:00.0,node-000,0\n"
)


def test_headerless_long_csv_columns_told_by_their_cells() -> None:
    # rows cut from the middle of an export (`tail`): no header line; the columns are told by content
    lay = dcgm.headerless_layout(HEADERLESS.splitlines())
    assert lay is not None and lay.header_lines == 0
    assert lay.names == ("timestamp", "metric", "gpu", "uuid", "pci_bus_id", "hostname", "value")
    assert dcgm.sniff(HEADERLESS) >= 0.9
    # any order, epoch stamps, no uuid/pci; a column of digits is no host
    assert dcgm.headerless_layout(["1730534536.0,node-3,2,DCGM_FI_DEV_GPU_TEMP,71",
                                   "1730534537.0,node-3,2,DCGM_FI_DEV_GPU_TEMP,72"]).names == (
        "timestamp", "hostname", "gpu", "metric", "value")
    # two columns of small integers: which is the GPU is not known (null, never guessed)
    assert dcgm.headerless_layout(["2026-11-02T08:00:00Z,3,DCGM_FI_DEV_GPU_TEMP,1,71"]).names == (
        "timestamp", "column_2", "metric", "column_4", "value")
    # not a table: a log line that names a field, a value that is no number, rows of other widths
    assert dcgm.headerless_layout(["2026-11-02 08:00:00 DCGM_FI_DEV_XID_ERRORS is 79"]) is None
    assert dcgm.headerless_layout(["2026-11-02T08:00:00Z,DCGM_FI_DEV_GPU_TEMP,0,hot"]) is None
    assert dcgm.headerless_layout(["a,DCGM_FI_DEV_GPU_TEMP,1", "a,DCGM_FI_DEV_GPU_TEMP,1,2"]) is None


@pytest.mark.parametrize("reader", ["lines", "blocks"])
def test_headerless_long_csv_read_by_both_readers(reader: str) -> None:
    ctx = ParseContext(path="dcgm.csv", host_hint="node-000")
    if reader == "lines":
        rows = HEADERLESS.split("\n")[:-1]
        ext = dcgm.parse(pl.DataFrame({"line_no": range(1, len(rows) + 1), "text": rows}), ctx)
        assert ext.tables["dcgm_samples"].height == 5
    else:
        lay = dcgm.table_layout(HEADERLESS, 100, 1 << 20)  # (any size: the line path has no header to read by)
        assert lay is not None and lay.header_lines == 0
        ext, total, read = dcgm.read_csv_chunks([HEADERLESS.encode()], lay, ctx)
        assert (total, read) == (5, 5) and ext.ignored.len() == 0
    ev = ext.events
    assert ev.select("line_no", "kind", "code", "gpu", "host").rows() == [(4, "dcgm_xid", "79", 7, "node-000")]
    assert ev["pci_bus_id"].to_list() == ["0000:db:00"]
    assert any("without its header" in w for w in ext.warnings)


# nv-hostengine's log: DcgmHealthWatch::SetResponse logs each health incident as `Detected a {WARNING|FAILURE}
# in health system {system}: '{DCGM_FR message}'` (github:NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp)
HOSTENGINE = (
    "2024-02-01 14:12:01.207 ERROR [9596:9598] [[SysMon]] A runtime exception occured when creating module. "
    "Ex: Incompatible hardware vendor for sysmon. [/workspaces/dcgm/modules/DcgmModule.h:146] [{anonymous}::SafeWrapper]\n"
    "2024-02-01 15:40:10.512 ERROR [9596:9610] [[Health]] Detected a WARNING in health system Thermal: 'Detected clocks "
    "event due to thermal violation in GPU 2. Verify that the cooling on this machine is functional, including external, "
    "thermal material interface, fans, and any other components.'\n"
    "2024-02-01 15:41:10.512 ERROR [9596:9610] [[Health]] Detected a FAILURE in health system PCIe: 'GPU 7 is running at "
    "PCI link width 8X, which is below the minimum allowed link generation of 16 (parameter 'pcie.width')'\n"
    "ERROR [1514002:1514004] [[Health]] Detected a WARNING in health system Power: 'Detected clocks event due to power "
    "violation in GPU 5.\n"
)


def test_hostengine_health_incidents_are_dcgm_health_events_of_the_named_gpu() -> None:
    ex = run(HOSTENGINE, host_hint="node-3")
    check_contract(ex, 4)
    ev = ex.events.to_dicts()
    assert [(e["line_no"], e["kind"], e["code"], e["gpu"], e["severity"]) for e in ev] == [
        (2, "dcgm_health", "Warning", 2, "warning"), (3, "dcgm_health", "Failure", 7, "error"),
        (4, "dcgm_health", "Warning", 5, "warning")]
    assert ev[0]["message"].startswith("Thermal: Detected clocks event due to thermal violation in GPU 2.")
    assert ev[0]["ts"] == datetime(2024, 2, 1, 15, 40, 10, 512000, tzinfo=UTC) and ev[0]["ts_quality"] == "exact"
    assert ev[2]["ts"] is None and ev[2]["message"] == "Power: Detected clocks event due to power violation in GPU 5."
    assert {e["host"] for e in ev} == {"node-3"}
    # the module-loading line is no health incident: left unparsed (an error line for the signatures)
    assert 1 not in set(ex.claimed.to_list()) | set(ex.ignored.to_list())


def test_hostengine_health_log_is_sniffed_only_with_an_incident_line() -> None:
    assert dcgm.sniff(HOSTENGINE) == 0.6
    assert dcgm.sniff(HOSTENGINE.split("\n", 1)[0] + "\n") == 0.0
    assert dcgm.sniff("The Thermal watch in health system docs is described below\n") == 0.0


def test_dcgmi_diag_fail_all_takes_the_gpu_its_warnings_name() -> None:
    """`Fail - All` names no GPU; the test's Warning rows below it do (nvvs prints a test's result, then
    its warnings and infos): one GPU named there is the result's GPU. Info rows (the passing GPU's
    numbers) do not count; a test whose warnings name two GPUs keeps none."""
    text = ("+-----  Hardware  ----------+------------------------------------------------+\n"
            "| GPU Memory                | Pass - GPU: 1                                  |\n"
            "|                           | Fail - GPU: 0                                  |\n"
            "| Info                      | GPU 1 Allocated 15568304202 bytes (98.3%)      |\n"
            "| Diagnostic                | Fail - All                                     |\n"
            "| Warning                   | GPU 0 API call cuMemGetInfo failed: 'context   |\n"
            "|                           | is destroyed' Check DCGM and system logs for   |\n"
            "| Info                      | GPU 1 GPU 1 calculated at approximately 16.2   |\n"
            "+-----  Stress  ------------+------------------------------------------------+\n"
            "| Targeted Stress           | Fail - All                                     |\n"
            "| Warning                   | GPU 2 only achieved 812 Gflops                 |\n"
            "| Warning                   | GPU 3 only achieved 790 Gflops                 |\n")
    got = [(r["line_no"], r["gpu"], r["code"]) for r in run(text).events.iter_rows(named=True)]
    assert got == [(3, 0, "Fail"), (5, 0, "Fail"), (6, 0, "detail"), (10, None, "Fail"), (11, 2, "detail"),
                   (12, 3, "detail")]


def test_dcgmi_diag_json_excerpt_read_line_by_line() -> None:
    """A pasted part of `dcgmi diag -j` (no whole document, wrapped strings): the record's status and
    its warning, of the GPU its `gpu_id` names; the wrapped string's continuation is read, not an error."""
    text = ('{\n        "gpu_id" : "5",\n        "status" : "Fail",\n        "warnings" : \n        [\n'
            '                {\n                        "error_id" : 110,\n'
            '                        "warning" : "GPU 5 Detected 511.70 GFLOPs for GPU 5 which is below the threshold 1480.77 Please verify\n'
            ' tolerance is set appropriately; if so, and if errors are persistent, please run a field diagnostic."\n')
    assert dcgm.sniff(text) >= 0.9
    ex = run(text)
    got = [(r["line_no"], r["gpu"], r["code"]) for r in ex.events.iter_rows(named=True)]
    assert got == [(3, 5, "Fail"), (8, 5, "detail")]
    assert ex.events["message"][1].startswith("GPU 5 Detected 511.70 GFLOPs for GPU 5 which is below")
    assert set(ex.claimed.to_list()) | set(ex.ignored.to_list()) == set(range(1, 10))
    assert dcgm.sniff('{"status": "ok", "items": 3}\n') == 0.0

"""Tests for parsers.pytorch (variants of ../shared/reference/pytorch_dist.md §1-4)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import pytorch
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "pytorch"
REAL = ROOT.parent / "shared" / "real-samples"


def run(text: str, **ctx):
    ctx.setdefault("ref_year", 2025)
    lines = with_body(decode_lines(text.encode()).lines)
    return pytorch.parse(lines, ParseContext(path="train.log", **ctx))


def fixture(name: str, **ctx):
    return run((FIX / name).read_text(), **ctx)


def real(case: str, name: str) -> str:
    hits = sorted(REAL.glob(f"{case}-*/{name}")) if REAL.exists() else []
    if not hits:
        pytest.skip("../shared/real-samples not available")
    return hits[0].read_text()


def ev(ex, kind: str) -> pl.DataFrame:
    return ex.events.filter(pl.col("kind") == kind)


def check_accounting(ex, n_lines: int) -> None:
    c, i = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not c & i
    assert c | i <= set(range(1, n_lines + 1))
    assert set(ex.events["line_no"].to_list()) <= c
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]


def test_watchdog_1x_no_rank_prefix():
    ex = fixture("watchdog_1x_no_rank_prefix.log")
    assert ev(ex, "watchdog_timeout").select("line_no", "rank", "code", "ts_quality").rows() == \
        [(1, 1, "469508", "missing")]
    row = ex.tables["collective_timeouts"].row(0, named=True)
    assert (row["seq"], row["op_type"], row["numel_in"], row["timeout_ms"], row["ran_for_ms"]) == \
        (469508, "ALLREDUCE", None, 1800000, 1802212)
    assert ex.claimed.to_list() == [1, 2]


def test_watchdog_2_2_pg_rank_form_and_companions():
    ex = fixture("watchdog_2_2_pg_rank.log")
    assert ex.events.select("line_no", "kind", "rank").rows() == [
        (1, "watchdog_timeout", 3), (2, "watchdog_status", 3)]
    ct = ex.tables["collective_timeouts"]
    assert ct.select("seq", "op_type", "numel_in", "numel_out", "pg", "last_enqueued", "last_completed").rows() == [
        (2070, "ALLGATHER", 1024, 8192, None, None, None), (2070, None, None, None, "0", 2082, 2069)]
    assert ex.claimed.to_list() == list(range(1, 10))  # companions, frames, terminate, what()


def test_watchdog_pg_desc_form():
    ex = fixture("watchdog_pg_desc_form.log")
    e = ev(ex, "watchdog_timeout").row(0, named=True)
    assert e["rank"] == 7 and e["ts"] == datetime(2025, 8, 16, 1, 45, 40, 183009, tzinfo=UTC)
    assert e["ts_quality"] == "exact"
    st_row = ex.tables["collective_timeouts"].row(1, named=True)
    assert (st_row["pg"], st_row["seq"], st_row["last_enqueued"], st_row["last_completed"]) == ("0", 80078, 80078, 80077)


def test_watchdog_pg_guid_form():
    ex = fixture("watchdog_pg_guid_form.log")
    st_row = ex.tables["collective_timeouts"].row(1, named=True)
    assert (st_row["rank"], st_row["seq"], st_row["last_enqueued"], st_row["last_completed"]) == \
        (118, 2398459, 2398578, 2398458)


def test_glog_without_ref_year_keeps_raw():
    ex = fixture("watchdog_pg_guid_form.log", ref_year=None)
    e = ev(ex, "watchdog_timeout").row(0, named=True)
    assert e["ts"] is None and e["ts_quality"] == "missing" and e["ts_raw"].startswith("603 17:48:01")


def test_heartbeat_monitor():
    ex = fixture("heartbeat_monitor.log")
    assert ev(ex, "heartbeat_timeout").select("line_no", "code", "rank").rows() == [(1, None, 25), (3, "600", 25)]
    assert ex.claimed.to_list() == [1, 2, 3]


def test_victim_global_timeout():
    ex = fixture("victim_global_timeout.log")
    assert ev(ex, "watchdog_status").select("line_no", "code", "rank").rows() == [(1, "victim", 5), (2, "victim", 5)]


def test_dump_signal_and_flightrecorder_hint():
    ex = fixture("dump_signal.log")
    assert ex.events.select("line_no", "kind", "code").rows() == [(2, "watchdog_status", "dump")]
    row = ex.tables["collective_timeouts"].row(0, named=True)
    assert (row["last_enqueued"], row["last_completed"]) == (747, 715)
    assert ex.claimed.to_list() == [1, 2]


def test_desync_report():
    ex = fixture("desync_report.log")
    assert ev(ex, "watchdog_status").select("line_no", "code").rows() == [(4, "lagging:47"), (8, "lagging:12,13")]
    assert ex.claimed.to_list() == list(range(1, 9))


def test_dist_backend_error_with_last_error():
    ex = fixture("dist_backend_error.log")
    assert ex.events.select("line_no", "kind", "code").rows() == [
        (4, "dist_error", "ncclSystemError"), (4, "exception", "torch.distributed.DistBackendError"),
        (7, "dist_error", "ncclSystemError")]
    assert ex.claimed.to_list() == list(range(1, 8))


def test_cuda_errors_and_ecc():
    ex = fixture("cuda_errors.log")
    assert ex.events.select("line_no", "kind", "code").rows() == [
        (1, "cuda_error", "an illegal memory access was encountered"),
        (3, "cuda_error", "unspecified launch failure"),
        (4, "cuda_error", "device-side assert triggered"),
        (5, "cuda_error", "CUBLAS_STATUS_EXECUTION_FAILED"),
        (6, "ecc_error", "39"),
        (7, "ecc_error", "uncorrectable ECC error encountered")]


def test_oom_new_and_old_forms():
    ex = fixture("oom.log")
    assert ev(ex, "oom").select("line_no", "gpu", "code").rows() == [(1, 3, "2.00 GiB"), (2, 0, "20.00 MiB")]


def test_interleaved_tracebacks_segfault_nan():
    ex = fixture("interleaved_tracebacks.log")
    assert ex.events.select("line_no", "kind", "code", "rank").rows() == [
        (7, "exception", "KeyError", 0), (8, "exception", "ZeroDivisionError", 1),
        (9, "segfault", "SIGSEGV", None), (10, "segfault", "SIGSEGV", None), (11, "nan", "nan", None)]
    assert ex.claimed.to_list() == list(range(1, 12))


def test_rank_hint_fallback():
    ex = run("RuntimeError: CUDA error: unspecified launch failure\n", rank_hint=9)
    assert ex.events["rank"].to_list() == [9]


def test_real_007_pg1():
    ex = run(real("007", "nccl.log"))
    assert ex.events.select("line_no", "kind", "rank", "code").rows() == [
        (1, "watchdog_timeout", 0, "1580"), (2, "watchdog_timeout", 4, "1580"),
        (3, "watchdog_status", 0, "1580"), (4, "watchdog_status", 3, "1580")]
    assert ex.events["ts"][0] == datetime(2025, 3, 21, 2, 7, 8, 408271, tzinfo=UTC)
    ct = ex.tables["collective_timeouts"]
    assert ct["last_enqueued"].to_list() == [None, None, 1582, 1582]


def test_real_008_reduce_scatter():
    ex = run(real("008", "nccl.log"))
    ct = ex.tables["collective_timeouts"].filter(pl.col("op_type").is_not_null())
    assert ct.select("line_no", "rank", "op_type", "numel_in", "numel_out").rows() == [
        (1, 0, "_REDUCE_SCATTER_BASE", 544997376, 68124672), (3, 4, "_REDUCE_SCATTER_BASE", 544997376, 68124672),
        (5, 3, "_REDUCE_SCATTER_BASE", 544997376, 68124672)]


def test_real_009_pgid_guid():
    ex = run(real("009", "nccl.log"))
    assert ev(ex, "watchdog_timeout")["line_no"].to_list() == [1, 3, 5]
    assert ev(ex, "watchdog_status").select("line_no", "rank").rows() == [(2, 1), (4, 0)]


def test_real_010_old_format():
    ex = run(real("010", "nccl.log"))
    assert ev(ex, "watchdog_timeout").select("line_no", "rank").rows() == [(1, 1), (2, 3), (3, 2), (4, 6), (5, 7)]


def test_real_012_optype_mismatch():
    ex = run(real("012", "nccl.log"))
    ct = ex.tables["collective_timeouts"].filter(pl.col("op_type").is_not_null())
    assert ct.select("line_no", "rank", "seq", "op_type").rows() == [
        (1, 7, 80078, "BROADCAST"), (3, 3, 80078, "ALLREDUCE")]
    assert ev(ex, "watchdog_status")["line_no"].to_list() == [2]


def test_real_015_not_claiming_ras_lines():
    ex = run(real("015", "nccl.log"))
    assert ex.events.select("line_no", "kind", "rank").rows() == [(24, "watchdog_timeout", 118), (25, "watchdog_status", 118)]
    assert ex.claimed.to_list() == [24, 25]


def test_real_016_dump_signal():
    ex = run(real("016", "nccl.log"))
    assert ex.events.select("line_no", "kind", "code").rows() == [
        (1, "watchdog_status", "716"), (4, "watchdog_status", "dump")]
    assert ex.claimed.to_list() == [1, 2, 3, 4]


def test_real_019_thc_ecc():
    ex = run(real("019", "traceback.txt"))
    assert ex.events.select("line_no", "kind", "code").rows() == [(1, "ecc_error", "39")]
    assert ex.claimed.to_list() == [1, 2]


def test_real_044_headless_traceback_and_dist_error():
    ex = run(real("044", "traceback.txt"))
    assert ex.events.select("line_no", "kind", "code", "rank").rows() == [
        (5, "dist_error", "ncclRemoteError", 3), (5, "exception", "torch.distributed.DistBackendError", 3),
        (8, "dist_error", "ncclRemoteError", 3)]
    assert ex.claimed.to_list() == list(range(1, 15))


def test_sniff():
    assert pytorch.sniff((FIX / "watchdog_pg_guid_form.log").read_text()) >= 0.9
    assert pytorch.sniff("Traceback (most recent call last):\n  File \"x\"\n") > 0
    assert pytorch.sniff("n1:1:2 [0] NCCL INFO Channel 00\n") == 0.0


LINES = [ln for p in sorted(FIX.glob("*.log")) for ln in p.read_text().splitlines()]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=120), st.sampled_from(LINES)), max_size=30), st.randoms())
def test_property_never_raises_and_accounting(chunks, rnd):
    mutated = []
    for c in chunks:
        if c and rnd.random() < 0.3:
            i = rnd.randrange(len(c))
            c = c[:i] + rnd.choice(["", "(", ")", ":", " ", "[rank1]:", "\t", "=", "Traceback (most recent call last):"]) + c[i + 1:]
        mutated.append(c.replace("\n", " ").replace("\r", " "))
    text = "\n".join(mutated) + "\n"
    check_accounting(run(text), len(decode_lines(text.encode()).lines))


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.log")))
def test_fixture_accounting(name):
    text = (FIX / name).read_text()
    check_accounting(run(text), len(decode_lines(text.encode()).lines))

"""Incident features and first-error text (forensics/features.py) on small hand-made frames."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from forensics.features import (
    first_error_text,
    incident_features,
    normalise_line,
    signature_families,
)

T0 = datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)
EV_SCHEMA = {"event_id": pl.Int64, "source": pl.Utf8, "kind": pl.Utf8, "code": pl.Utf8, "ts": pl.Datetime("us", "UTC"),
             "ts_quality": pl.Utf8, "host": pl.Utf8, "rank": pl.Int64, "message": pl.Utf8}


def _events(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=EV_SCHEMA, orient="row")


def _hits(events: pl.DataFrame, hits: list[tuple]) -> pl.DataFrame:
    h = pl.DataFrame(hits, schema={"event_id": pl.Int64, "signature": pl.Utf8, "category": pl.Utf8,
                                   "role": pl.Utf8, "weight": pl.Int64}, orient="row")
    return h.join(events, on="event_id", how="inner")


@pytest.fixture
def gpu_lost_case() -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Xid 79 on node-002 (ranks 16-23 live there), then three peers' watchdogs and SIGABRTs."""
    s = timedelta(seconds=1)
    ev = _events([
        (0, "steps", "step", "1690", T0 - 5 * s, "exact", "node-003", 31, "iteration 1690/3000 | elapsed 2.0"),
        (1, "kernel", "xid", "79", T0, "exact", "node-002", None,
         "[Mon Nov  2 09:00:00 2026] NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        (2, "kernel", "xid", "154", T0, "exact", "node-002", None,
         "NVRM: Xid (PCI:0000:ab:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"),
        (3, "pytorch", "watchdog_timeout", "13603", T0 + 600 * s, "exact", "node-000", 0,
         "[rank0]:[E1102 09:10:00.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=13603, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600009 milliseconds before timing out."),
        (4, "pytorch", "watchdog_timeout", "13603", T0 + 600 * s, "exact", "node-001", 8,
         "[rank8]:[E1102 09:10:00.223456789 ProcessGroupNCCL.cpp:632] [Rank 8] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=13603, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600011 milliseconds before timing out."),
        (5, "pytorch", "watchdog_timeout", "13603", T0 + 601 * s, "exact", "node-003", 24,
         "[rank24]:[E1102 09:10:01.023456789 ProcessGroupNCCL.cpp:632] [Rank 24] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=13603, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."),
        (6, "elastic", "elastic_failure", "-6", T0 + 630 * s, "exact", "node-000", 0, "  exitcode  : -6 (pid: 2608031)"),
        (7, "elastic", "elastic_failure", "-6", T0 + 630 * s, "exact", "node-001", 8, "  exitcode  : -6 (pid: 1401571)"),
        (8, "elastic", "worker_failed", "-9", T0 + 630 * s, "exact", "node-002", 21, "failed (exitcode: -9) local_rank: 5"),
        (9, "sacct", "sched_state", "REQUEUED", T0 + 640 * s, "exact", None, None, "412345|REQUEUED|0:0"),
    ])
    hits = _hits(ev, [
        (1, "xid-79", "gpu_lost", "root", 5),
        (2, "xid-154", "gpu_driver_firmware", "root", 4),
        (3, "pt-watchdog-timeout", "comm_hang_unknown", "cascade", 1),
        (4, "pt-watchdog-timeout", "comm_hang_unknown", "cascade", 1),
        (5, "pt-watchdog-timeout", "comm_hang_unknown", "cascade", 1),
        (6, "elastic-sigabrt", "comm_hang_unknown", "cascade", 1),
        (7, "elastic-sigabrt", "comm_hang_unknown", "cascade", 1),
    ])
    attempt = {"index": 0, "start": T0 - timedelta(hours=1), "end": T0 + 631 * s, "first_step": 5, "last_step": 1690,
               "first_step_start": T0 - timedelta(minutes=58), "last_progress": T0 - 5 * s}
    return hits, ev, attempt


def test_signature_families() -> None:
    assert signature_families("xid-79") == ("xid", "xid:79")
    assert signature_families("nccl-ib-retry-exceeded") == ("nccl", "nccl-ib")
    assert signature_families("pt-watchdog-timeout") == ("pt", "pt-watchdog")
    assert signature_families("steps-nan-loss") == ("steps", "steps-nan")


def test_features_of_a_gpu_lost_incident(gpu_lost_case) -> None:
    hits, ev, attempt = gpu_lost_case
    f = incident_features(hits, ev, attempt)
    lg = math.log1p
    # signatures, families, groups
    assert f["sig:xid-79"] == pytest.approx(lg(1))
    assert f["sig:pt-watchdog-timeout"] == pytest.approx(lg(3))
    assert f["fam:xid:79"] == f["fam:xid:154"] == f["grp:xid"] == f["fam:pt-watchdog"] == 1.0
    # categories per role
    assert f["root_cat:gpu_lost"] == pytest.approx(lg(1))
    assert f["root_cat:gpu_driver_firmware"] == pytest.approx(lg(1))
    assert f["casc_cat:comm_hang_unknown"] == pytest.approx(lg(5))
    assert f["root_w:gpu_lost"] == 1.0 and f["root_w:gpu_driver_firmware"] == 0.8
    assert f["top_root_cat:gpu_lost"] == 1.0 and "top_root_cat:gpu_driver_firmware" not in f
    assert f["n_root_cats"] == 2.0
    # order: Xid 79 came first (same second as Xid 154, earlier in file order)
    assert f["first_root_sig:xid-79"] == 1.0
    assert f["first_casc_sig:pt-watchdog-timeout"] == 1.0
    assert f["order0:xid:79"] == f["order1:xid:154"] == f["order2:pt-watchdog"] == 1.0
    assert f["pair:xid:79>xid:154"] == 1.0
    assert f["first_src:kernel"] == 1.0
    # spread: 4 hosts / 5 ranks in the attempt; errors on 4 hosts (node-002 via the Xid) and 3 ranks
    assert f["hosts"] == pytest.approx(lg(4)) and f["ranks"] == pytest.approx(lg(5))
    assert f["err_hosts"] == pytest.approx(lg(4)) and f["err_ranks"] == pytest.approx(lg(3))
    assert f["err_host_share"] == 1.0 and f["err_rank_share"] == 0.6
    assert f["root_hosts"] == pytest.approx(lg(1)) and f["root_one_host"] == 1.0
    assert "root_ranks" not in f  # the kernel lines know no rank
    # phase, times
    assert f["phase:late"] == 1.0 and "phase:before_first_step" not in f
    assert f["steps_done"] == pytest.approx(lg(1686))
    assert f["t_error_to_end"] == pytest.approx(round(lg(631 / 60), 6))
    assert f["t_progress_to_end"] == pytest.approx(round(lg(636 / 60), 6))
    # exits, signals, scheduler, watchdog, sources
    assert f["exit:-6"] == pytest.approx(lg(2)) and f["exit:-9"] == pytest.approx(lg(1))
    assert "exit:-15" not in f
    assert f["sched:REQUEUED"] == 1.0
    assert f["watchdog"] == 1.0 and f["watchdog_ranks"] == pytest.approx(lg(3)) and f["watchdog_share"] == 0.6
    assert {k for k in f if k.startswith("src:")} == {"src:steps", "src:kernel", "src:pytorch", "src:elastic",
                                                      "src:sacct"}
    assert all(isinstance(v, float) for v in f.values())


def test_order_features_of_many_hits_are_those_of_the_first_hit_of_each_family() -> None:
    """order0..2 / pair / first_src read the hits in time order (stamped first, then file order): on
    thousands of hits the first hit of each family counts, an empty or null source is skipped."""
    rows, hits = [], []
    fams = ["pt-watchdog-timeout", "nccl-ib-retry", "xid-79-a", "pt-watchdog-x", "elastic-sigabrt"]
    for i in range(3000):
        # events 0-2 come first in the file but are stamped last (elastic-sigabrt first of all: not order0)
        sig = ["elastic-sigabrt", "xid-79-a", "nccl-ib-retry"][i] if i < 3 else fams[(i * 7) % len(fams)]
        ts = T0 + timedelta(seconds=5000 - i) if i < 3 else None if i % 11 == 0 else T0 + timedelta(seconds=i)
        src = "" if i == 3 else None if i == 4 else ("pytorch" if i % 2 else "nccl")
        rows.append((i, src, "k", None, ts, "exact", "h", i % 64, "m"))
        hits.append((i, sig, "comm_hang_unknown", "cascade", 1))
    ev = _events(rows)
    f = incident_features(_hits(ev, hits), ev, {"start": T0, "end": T0 + timedelta(hours=2)})
    # in time order: event 3 (3 s) nccl-ib-retry, 4 pt-watchdog-x, 5 pt-watchdog-timeout, 6 xid-79-a; the
    # first source that is neither empty (3) nor null (4) is event 5's (odd: pytorch)
    assert {k for k in f if k.startswith(("order", "pair:", "first_src:"))} == {
        "order0:nccl-ib", "order1:pt-watchdog", "order2:xid:79", "pair:nccl-ib>pt-watchdog", "first_src:pytorch"}


def test_features_before_first_step_and_recurrence() -> None:
    ev = _events([(0, "nccl", "nccl_warn", None, None, "missing", "node-001", 9,
                   "socketStartConnect: Connect to 10.64.0.11<45061> failed : Connection refused")])
    hits = _hits(ev, [(0, "nccl-socket-connect-failed", "nccl_config", "root", 2)])
    att = {"index": 1, "start": T0, "end": T0 + timedelta(seconds=40), "first_step": None, "last_step": None,
           "first_step_start": None, "last_progress": None}
    f = incident_features(hits, ev, att, recurrence={"same_code_as_previous": 1.0, "zero": 0.0})
    assert f["phase:before_first_step"] == 1.0 and "steps_done" not in f
    assert f["root_one_rank"] == 1.0 and f["root_cat:nccl_config"] == pytest.approx(math.log1p(1))
    assert f["rec:same_code_as_previous"] == 1.0 and "rec:zero" not in f
    assert "watchdog" not in f  # zero values are left out


def test_features_of_an_empty_attempt() -> None:
    ev = _events([])
    hits = _hits(ev, [])
    att = {"index": 0, "start": T0, "end": T0, "first_step": None, "last_step": None, "first_step_start": None,
           "last_progress": None}
    f = incident_features(hits, ev, att)
    assert f["no_root"] == 1.0 and f["no_error"] == 1.0 and f["phase:before_first_step"] == 1.0
    assert first_error_text(hits) == ""


def test_normalise_line() -> None:
    line = ("[Mon Nov  2 09:00:00 2026] NVRM: Xid (PCI:0000:ab:00): 79, pid=1234, name=python3, "
            "GPU has fallen off the bus. comm 0x55d02ad7b67e at /usr/local/lib/python3.11/site-packages/torch/x.py:12")
    got = normalise_line(line)
    assert got == "nvrm: xid (pci:pci): 0, pid=0, name=python0, gpu has fallen off the bus. comm x at x.py:0"
    assert normalise_line("2026-11-02T09:00:00.123Z host kernel: Out of memory: Killed process 4242 (python)") == \
        "host kernel: out of memory: killed process 0 (python)"
    assert normalise_line("GPU-59b92cd7-55b1-78de-12f5-5323738c51a7 deadbeef12") == "gpu-uuid x"


def test_first_error_text_roots_first(gpu_lost_case) -> None:
    hits, _, _ = gpu_lost_case
    text = first_error_text(hits)
    lines = text.split("\n")
    assert len(lines) == 2  # two roots: no cascades needed
    assert lines[0].startswith("nvrm: xid (pci:pci): 0, pid='<unknown>'")
    assert "watchdog" not in text
    # without roots, the cascades (one line per distinct shape)
    casc = hits.filter(pl.col("role") == "cascade")
    lines = first_error_text(casc).split("\n")
    assert lines[0].startswith("[rank0]:[ processgroupnccl.cpp:0] [rank 0] watchdog caught collective")
    assert "exitcode : -0 (pid: 0)" in lines
    assert len(lines) == len(set(lines)) <= 4

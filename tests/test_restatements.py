"""A DCGM gauge Xid that repeats the kernel's Xid of the same host and code (one sample later) is
context; one with no kernel line behind it, or a different Xid, or too late, keeps its role."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from forensics.restatements import GAUGE_LAG, demote_restatements
from forensics.signatures import HIT_SCHEMA

T0 = datetime(2026, 11, 10, 5, 12, 40, tzinfo=UTC)


def _ev(rows: list[tuple[int, str, str, str, datetime]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"event_id": pl.Int64, "kind": pl.Utf8, "host": pl.Utf8, "code": pl.Utf8,
                                      "ts": pl.Datetime("us", "UTC")}, orient="row")


def _hits(ids: list[int]) -> pl.DataFrame:
    return pl.DataFrame([{"event_id": i, "signature": "xid-74", "category": "nvlink", "role": "root",
                          "severity": "error", "summary": "", "weight": 4} for i in ids], schema=HIT_SCHEMA)


def test_gauge_restating_the_kernel_xid_is_context() -> None:
    ev = _ev([
        (0, "xid", "n1", "74", T0),
        (1, "dcgm_xid", "n1", "74", T0 + timedelta(minutes=3, seconds=20)),  # the next sample: restates 0
        (2, "dcgm_xid", "n2", "74", T0 + timedelta(minutes=3)),  # another host: its own fault
        (3, "dcgm_xid", "n1", "79", T0 + timedelta(minutes=3)),  # another Xid
        (4, "dcgm_xid", "n1", "74", T0 + GAUGE_LAG + timedelta(seconds=1)),  # too late to be that line
        (5, "dcgm_xid", "n1", "74", T0 - timedelta(seconds=5)),  # before the kernel line
    ])
    got = demote_restatements(ev, _hits([0, 1, 2, 3, 4, 5]))
    assert dict(zip(got["event_id"].to_list(), got["role"].to_list(), strict=True)) == {
        0: "root", 1: "context", 2: "root", 3: "root", 4: "root", 5: "root"}


def test_gauge_alone_keeps_its_role() -> None:
    ev = _ev([(1, "dcgm_xid", "n1", "74", T0)])
    assert demote_restatements(ev, _hits([1]))["role"].to_list() == ["root"]

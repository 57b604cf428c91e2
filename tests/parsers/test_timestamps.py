"""One clock, parser side: derive_missing fills unstamped lines from neighbours, keeps relative
(uptime, no boot time) stamps relative, and leaves a file without any stamp `missing`."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from parsers.records import events_frame
from parsers.timestamps import derive_missing


def _ev(rows: list[tuple[int, datetime | None, str]]) -> pl.DataFrame:
    return events_frame(pl.DataFrame({"line_no": [r[0] for r in rows], "ts": [r[1] for r in rows],
                                      "ts_quality": [r[2] for r in rows]},
                                     schema={"line_no": pl.Int64, "ts": pl.Datetime("us", "UTC"),
                                             "ts_quality": pl.Utf8}))


def test_unstamped_lines_inherit_neighbour_time_as_derived() -> None:
    t = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    out = derive_missing(_ev([(1, None, "missing"), (2, t, "exact"), (3, None, "missing")]))
    assert out["ts"].to_list() == [t, t, t]
    assert out["ts_quality"].to_list() == ["derived", "exact", "derived"]


def test_relative_stamps_stay_relative_and_null() -> None:
    t = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    out = derive_missing(_ev([(1, t, "exact"), (2, None, "relative")]))
    assert out["ts"].to_list() == [t, None]
    assert out["ts_quality"].to_list() == ["exact", "relative"]


def test_no_stamp_anywhere_stays_missing() -> None:
    out = derive_missing(_ev([(1, None, "missing"), (2, None, "missing")]))
    assert out["ts"].null_count() == 2 and out["ts_quality"].to_list() == ["missing", "missing"]

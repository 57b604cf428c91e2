"""forensics/store.py: frames in by column name, a LazyFrame streamed in by batches, read back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from forensics import store
from forensics.store import Store


def _samples(n: int) -> pl.DataFrame:
    return pl.DataFrame({
        "file_id": pl.Series([i % 3 for i in range(n)], dtype=pl.Int32),
        "line_no": list(range(2, n + 2)),
        "ts": [datetime(2026, 11, 2, 8, 0, i % 60, tzinfo=UTC) for i in range(n)],
        "host": [f"node-{i % 4}" for i in range(n)],
        "gpu": [i % 8 for i in range(n)],
        "field": ["DCGM_FI_DEV_SM_CLOCK"] * n,
        "value": [None if i % 7 == 0 else float(i) for i in range(n)],
    })


def test_lazy_frame_streams_in_by_batches_as_the_frame_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "INSERT_BATCH_ROWS", 7)  # many batches
    df = _samples(50)
    df.head(20).write_parquet(tmp_path / "a.parquet")
    df.tail(30).write_parquet(tmp_path / "b.parquet")
    lazy = pl.concat([pl.scan_parquet(tmp_path / "a.parquet"), pl.scan_parquet(tmp_path / "b.parquet")])
    a, b = Store(tmp_path / "lazy.duckdb"), Store(tmp_path / "eager.duckdb")
    a.insert("dcgm_samples", lazy)
    b.insert("dcgm_samples", df)
    got, want = a.frame("dcgm_samples", "line_no"), b.frame("dcgm_samples", "line_no")
    assert got.height == 50 and got.equals(want)
    assert got["value"].null_count() == 8 and got["host"].to_list()[:4] == ["node-0", "node-1", "node-2", "node-3"]
    a.close()
    b.close()


def test_empty_inputs_insert_nothing(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    st.insert("dcgm_samples", _samples(0))
    st.insert("dcgm_samples", _samples(0).lazy())
    assert st.sql("SELECT count(*) AS n FROM dcgm_samples")["n"][0] == 0
    st.close()

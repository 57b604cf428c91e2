"""forensics/parquet_tables.py: the store's Parquet tables are written with the store's columns, in
its schema's order, by one function (the early sink and the store's own write give the same file)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from forensics import parquet_tables
from forensics.store import Store


def test_columns_are_the_store_schema_of_each_parquet_table(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    try:
        for t in parquet_tables.PARQUET_TABLES:
            assert parquet_tables.columns(t) == st.sql(f"DESCRIBE {t}")["column_name"].to_list()
    finally:
        st.close()


def test_sink_keeps_the_store_columns_it_has_and_drops_the_rest(tmp_path: Path) -> None:
    lf = pl.LazyFrame({"extra": [1, 2], "value": [61.0, None], "field": ["gpu_temp", "gpu_temp"],
                       "ts": [datetime(2026, 1, 1, tzinfo=UTC)] * 2, "line_no": [2, 3], "host": ["n1", "n1"],
                       "file_id": pl.Series([4, 4], dtype=pl.Int32)})
    file = parquet_tables.sink("dcgm_samples", lf, tmp_path / "x.parquet")
    assert pq.read_schema(file).names == ["file_id", "line_no", "ts", "host", "field", "value"]
    assert pl.read_parquet(file)["value"].to_list() == [61.0, None]
    assert parquet_tables.parquet_file(tmp_path / "out" / "forensics.duckdb", "dcgm_samples") == \
        tmp_path / "out" / "dcgm_samples.parquet"

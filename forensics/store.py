"""The DuckDB store of one analysis (DESIGN §4): created from `schema.sql`, filled from polars
frames by column name, read back as polars frames."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

SCHEMA_SQL = resources.files("forensics").joinpath("schema.sql").read_text(encoding="utf-8")
INSERT_BATCH_ROWS = 200_000
MEMORY_LIMIT = "512MB"  # DuckDB's own buffers (it spills to a .tmp folder beside the database beyond it)


class Store:
    def __init__(self, path: Path | str = ":memory:", create: bool = True, read_only: bool = False) -> None:
        self.path = str(path)
        self.con = duckdb.connect(self.path, read_only=read_only)
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        if create:
            self.con.execute(SCHEMA_SQL)

    def insert(self, table: str, df: pl.DataFrame | pl.LazyFrame) -> None:
        """A LazyFrame (a table that waits on disk) streams in as one insert, INSERT_BATCH_ROWS rows
        in memory at a time (DuckDB writes large appends to the file as they come, within its
        memory limit)."""
        if isinstance(df, pl.LazyFrame):
            batches = iter(df.collect_batches(chunk_size=INSERT_BATCH_ROWS))
            first = next(batches, None)
            if first is None:
                return
            head = first.to_arrow()

            def arrow_batches() -> Iterator[pa.RecordBatch]:
                yield from head.to_batches()
                for b in batches:
                    yield from b.to_arrow().cast(head.schema).to_batches()

            self._insert_arrow(table, pa.RecordBatchReader.from_batches(head.schema, arrow_batches()))
            self.con.execute("CHECKPOINT")
            return
        if df.is_empty():
            return
        self._insert_arrow(table, df.to_arrow())

    def _insert_arrow(self, table: str, arrow: pa.Table | pa.RecordBatchReader) -> None:
        self.con.register("_incoming", arrow)
        try:
            self.con.execute(f'INSERT INTO "{table}" BY NAME SELECT * FROM _incoming')
        finally:
            self.con.unregister("_incoming")

    def frame(self, table: str, order_by: str | None = None) -> pl.DataFrame:
        q = f'SELECT * FROM "{table}"' + (f" ORDER BY {order_by}" if order_by else "")
        return self.sql(q)

    def sql(self, query: str) -> pl.DataFrame:
        rel = self.con.sql(query)
        if rel is None:
            return pl.DataFrame()
        return pl.from_arrow(rel.to_arrow_table())  # type: ignore[return-value]

    def close(self) -> None:
        self.con.close()

"""The DuckDB store of one analysis (DESIGN §4): created from `schema.sql`, filled from polars
frames by column name, read back as polars frames."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import duckdb
import polars as pl

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
        """A LazyFrame (a table that waits on disk) goes in by batches: memory stays bounded."""
        if isinstance(df, pl.LazyFrame):
            for batch in df.collect_batches(chunk_size=INSERT_BATCH_ROWS):
                self.insert(table, batch)
                self.con.execute("CHECKPOINT")  # to disk: appended rows stay in memory until then
            return
        if df.is_empty():
            return
        arrow = df.to_arrow()
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

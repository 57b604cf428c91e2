"""The store's tables that are Parquet files beside `forensics.duckdb` (a view over each in it): which
they are, where each file lies, and the one way their rows are written. polars only, no DuckDB: the
analysis writes such a file in a thread as soon as its rows are final, before the verdict (`EarlySinks`
in forensics/outputs.py), and the store then adopts it (docs/architecture.md "Store")."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from parsers.records import TABLE_SCHEMAS

PARQUET_TABLES = ("dcgm_samples",)  # tables that may be a view over a Parquet file beside the database
COMPRESSION = "zstd"


def parquet_file(db: Path | str, table: str) -> Path:
    """Where the rows of `table` lie when it is a view over Parquet: beside the database."""
    return Path(db).parent / f"{table}.parquet"


def columns(table: str) -> list[str]:
    """The store's columns of `table`, in its schema's order (schema.sql: file_id, then the parser's)."""
    return ["file_id", *TABLE_SCHEMAS[table]]


def sink(table: str, df: pl.DataFrame | pl.LazyFrame, file: Path) -> Path:
    """The rows of `df` (the store's columns it has) streamed into `file`: a LazyFrame's rows never all
    sit in memory."""
    names = set(df.collect_schema().names())
    df.lazy().select([pl.col(c) for c in columns(table) if c in names]).sink_parquet(file, compression=COMPRESSION)
    return file

"""The DuckDB store of one analysis (DESIGN §4): created from `schema.sql`, filled from polars
frames by column name, read back as polars frames. A large table (`PARQUET_TABLES`: the DCGM
samples of a job whose samples waited on disk) is kept as `<table>.parquet` beside the database
and is a view over that file in it, so that SQL sees it as before without DuckDB re-encoding
millions of rows (docs/architecture.md "Store")."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from forensics.parquet_tables import PARQUET_TABLES, parquet_file, sink

if TYPE_CHECKING:  # pyarrow loads only to stream a LazyFrame in and to read tables back, never for a small store
    import pyarrow as pa

SCHEMA_SQL = resources.files("forensics").joinpath("schema.sql").read_text(encoding="utf-8")
INSERT_BATCH_ROWS = 200_000
MEMORY_LIMIT = "512MB"  # DuckDB's own buffers (it spills to a .tmp folder beside the database beyond it)
__all__ = ["PARQUET_TABLES", "Store", "parquet_file", "point_views"]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _has_null_type(t: pl.DataType) -> bool:
    if t == pl.Null:
        return True
    if isinstance(t, pl.List | pl.Array):
        return _has_null_type(t.inner)
    if isinstance(t, pl.Struct):
        return any(_has_null_type(f.dtype) for f in t.fields)
    return False


def _typed(t: pl.DataType) -> pl.DataType:
    """`t` with polars' Null type, at any depth, made Utf8."""
    if t == pl.Null:
        return pl.Utf8()
    if isinstance(t, pl.List):
        return pl.List(_typed(t.inner))
    if isinstance(t, pl.Array):
        return pl.Array(_typed(t.inner), t.size)  # inner keeps the inner dimensions
    if isinstance(t, pl.Struct):
        return pl.Struct([pl.Field(f.name, _typed(f.dtype)) for f in t.fields])
    return t


class _ArrowStream:
    """A polars frame seen by DuckDB only through the Arrow PyCapsule stream interface: DuckDB reads
    it without pyarrow (a polars DataFrame itself it converts with `to_arrow`, which loads pyarrow:
    0.05 s and more of the import time of a small bundle's analysis)."""

    __slots__ = ("df",)

    def __init__(self, df: pl.DataFrame) -> None:
        # a column of polars' Null type (all null: e.g. no interruption has a time) goes out without a
        # validity bitmap, which DuckDB's stream reader refuses: as text, all null (any column casts it)
        casts = {c: _typed(t) for c, t in df.schema.items() if _has_null_type(t)}
        self.df = df.cast(casts) if casts else df

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.df.__arrow_c_stream__(requested_schema)


class Store:
    def __init__(self, path: Path | str = ":memory:", create: bool = True, read_only: bool = False) -> None:
        self.path = str(path)
        self.con = duckdb.connect(self.path, read_only=read_only)
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        if create:
            with self.transaction():  # one commit for the whole schema, not one per statement
                self.con.execute(SCHEMA_SQL)
        elif self.path != ":memory:":
            self._find_parquet()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Statements (`insert` of DataFrames) committed together, once (DuckDB commits each one on its
        own otherwise); rolled back on an error. Not around a LazyFrame `insert`: that one checkpoints."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def _find_parquet(self) -> None:
        """A view over a Parquet file names it by absolute path (`write_parquet`, `point_views`); this
        session always reads the file beside the database (a temporary view shadows the stored one),
        so a folder moved or copied since never reads another folder's file, even when the old path
        now holds a newer run's samples."""
        for table in PARQUET_TABLES:
            file = parquet_file(Path(self.path).resolve(), table)
            if file.exists() and self._is_view(table):
                self.con.execute(f'CREATE TEMP VIEW "{table}" AS {self._view_sql(table, file)}')

    def _is_view(self, table: str) -> bool:
        return bool(self.con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ? AND NOT temporary",
                                     [table]).fetchone()[0])

    def _columns(self, table: str) -> list[tuple[str, str]]:
        return self.con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_name = ? AND table_schema = 'main' AND table_catalog = current_database() "
                                "ORDER BY ordinal_position",
                                [table]).fetchall()

    def _view_sql(self, table: str, file: Path | str) -> str:
        """The schema's columns of `table` read from the Parquet file (null where it has none)."""
        source = f"read_parquet({_quote(str(file))})"
        has = {r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        cols = ", ".join(f'CAST({_ident(c) if c in has else "NULL"} AS {t}) AS {_ident(c)}'
                         for c, t in self._columns(table))
        return f"SELECT {cols} FROM {source}"

    def write_parquet(self, table: str, df: pl.DataFrame | pl.LazyFrame) -> Path:
        """The rows of `df` as `<table>.parquet` beside the database (`parquet_tables.sink`: a LazyFrame
        is streamed) and `table` a view over that file by its absolute path (DuckDB reads the file when
        the view is made), its columns those of the schema (a column `df` lacks is null). A folder
        renamed afterwards: `point_views`."""
        return self._view_over(table, sink(table, df, parquet_file(Path(self.path).resolve(), table)))

    def adopt_parquet(self, table: str, written: Path) -> Path:
        """`written` (a file `parquet_tables.sink` made elsewhere: `outputs.EarlySinks`) moved beside the
        database as `<table>.parquet`, and `table` a view over it, as `write_parquet` leaves them."""
        file = parquet_file(Path(self.path).resolve(), table)
        shutil.move(written, file)  # a rename on one file system, else a copy of the encoded bytes
        return self._view_over(table, file)

    def _view_over(self, table: str, file: Path) -> Path:
        view = self._view_sql(table, file)
        self.con.execute(f'DROP TABLE "{table}"')
        self.con.execute(f'CREATE VIEW "{table}" AS {view}')
        return file

    def insert(self, table: str, df: pl.DataFrame | pl.LazyFrame) -> None:
        """A LazyFrame (a table that waits on disk) streams in as one insert, INSERT_BATCH_ROWS rows
        in memory at a time (DuckDB writes large appends to the file as they come, within its
        memory limit)."""
        if isinstance(df, pl.LazyFrame):
            import pyarrow as pa  # noqa: PLC0415 - only for a table that waits on disk (a large job)

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
        self._insert_arrow(table, _ArrowStream(df))

    def _insert_arrow(self, table: str, arrow: pa.RecordBatchReader | _ArrowStream) -> None:
        self.con.register("_incoming", arrow)
        try:
            self.con.execute(f'INSERT INTO "{table}" BY NAME SELECT * FROM _incoming')
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # an aborted transaction refuses it until its rollback
                self.con.unregister("_incoming")
            raise
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


def point_views(db: Path | str) -> None:
    """The views over Parquet files of the database at `db` name the files beside it, by absolute
    path, so that any client opening it from any folder reads them. Called once the output folder
    has its final name (the views were made in a temporary one), or after moving a folder (`Store`
    itself reads the file beside a moved database without it)."""
    st = Store(db, create=False)
    try:
        for table in PARQUET_TABLES:
            file = parquet_file(Path(db).resolve(), table)
            if file.exists() and st._is_view(table):
                st.con.execute(f'CREATE OR REPLACE VIEW "{table}" AS {st._view_sql(table, file)}')
        st.con.execute("CHECKPOINT")
    finally:
        st.close()

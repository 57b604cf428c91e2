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


def _kind(db: Path, table: str) -> str:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()[0]
    finally:
        con.close()


def test_samples_as_parquet_read_back_as_the_table_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A LazyFrame written as Parquet beside the database: the view has the table's columns and types
    (a column the frame lacks is null) and the same rows, by absolute path, so a client started
    anywhere reads it; a moved folder still reads it through `Store`, and a plain client once
    `point_views` named the new place."""
    import duckdb

    df = _samples(50)
    df.head(20).write_parquet(tmp_path / "a.parquet")
    df.tail(30).write_parquet(tmp_path / "b.parquet")
    lazy = pl.concat([pl.scan_parquet(tmp_path / "a.parquet"), pl.scan_parquet(tmp_path / "b.parquet")])
    out = tmp_path / "out"
    out.mkdir()
    a, b = Store(out / "forensics.duckdb"), Store(tmp_path / "eager.duckdb")
    assert a.write_parquet("dcgm_samples", lazy) == out / "dcgm_samples.parquet"
    b.insert("dcgm_samples", df)
    got, want = a.frame("dcgm_samples", "line_no"), b.frame("dcgm_samples", "line_no")
    schema = a.sql("DESCRIBE dcgm_samples").select("column_name", "column_type").rows()
    assert schema == b.sql("DESCRIBE dcgm_samples").select("column_name", "column_type").rows()
    assert ("uuid", "VARCHAR") in schema and got["uuid"].null_count() == 50  # not in the frame: null
    a.close()
    b.close()
    assert got.height == 50 and got.equals(want)
    assert _kind(out / "forensics.duckdb", "dcgm_samples") == "VIEW"
    monkeypatch.chdir(tmp_path)  # not the database's folder
    con = duckdb.connect(str(out / "forensics.duckdb"), read_only=True)  # a plain client, elsewhere
    assert con.execute("SELECT count(*), count(value) FROM dcgm_samples").fetchone() == (50, 42)
    con.close()
    moved = tmp_path / "moved"
    out.rename(moved)
    st = Store(moved / "forensics.duckdb", create=False, read_only=True)
    try:
        assert st.frame("dcgm_samples", "line_no").equals(want)
        assert st.sql("SELECT count(*) AS n FROM dcgm_samples WHERE host = 'node-1'")["n"][0] == 13
    finally:
        st.close()


def test_moved_folder_can_be_pointed_again(tmp_path: Path) -> None:
    """`point_views` in a folder whose views name another place (it was moved) names its own file
    (any folder name: a comma, a quote)."""
    import duckdb

    out, moved = tmp_path / "out", tmp_path / "job, it's moved"
    out.mkdir()
    st = Store(out / "forensics.duckdb")
    st.write_parquet("dcgm_samples", _samples(12))
    st.close()
    store.point_views(out / "forensics.duckdb")
    out.rename(moved)
    store.point_views(moved / "forensics.duckdb")
    con = duckdb.connect(str(moved / "forensics.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM dcgm_samples").fetchone() == (12,)
        assert str(moved / "dcgm_samples.parquet").replace("'", "''") in con.execute(
            "SELECT sql FROM duckdb_views() WHERE view_name = 'dcgm_samples'").fetchone()[0]
    finally:
        con.close()


def test_a_copied_folder_reads_its_own_samples_when_the_old_path_holds_newer_ones(tmp_path: Path) -> None:
    """An output folder copied away, then the original rewritten by a newer run: `Store` on the copy
    reads the copy's own Parquet file, never the newer run's file its stored view names."""
    import shutil

    out = tmp_path / "out"
    out.mkdir()
    st = Store(out / "forensics.duckdb")
    st.write_parquet("dcgm_samples", _samples(12))
    st.close()
    store.point_views(out / "forensics.duckdb")
    shutil.copytree(out, tmp_path / "copy")
    shutil.rmtree(out)
    out.mkdir()
    st = Store(out / "forensics.duckdb")
    st.write_parquet("dcgm_samples", _samples(30))  # the newer run, at the path the copy's view names
    st.close()
    copy = Store(tmp_path / "copy" / "forensics.duckdb", create=False, read_only=True)
    try:
        assert copy.sql("SELECT count(*) AS n FROM dcgm_samples")["n"][0] == 12
    finally:
        copy.close()


def test_frames_go_in_without_pyarrow_null_typed_columns_too(tmp_path: Path) -> None:
    """A DataFrame reaches DuckDB through the Arrow stream interface, never through pyarrow (the
    store of a small bundle loads no pyarrow); columns of polars' Null type (no value known at all,
    at the top or inside a list) go in as nulls, the others as they are; a failed insert inside a
    transaction leaves nothing of it. In a fresh process: the test session may have loaded pyarrow."""
    import json
    import os
    import subprocess
    import sys

    script = f"""
import json, sys
from datetime import UTC, datetime
import polars as pl
from forensics.store import Store
st = Store({str(tmp_path / "s.duckdb")!r})
with st.transaction():
    st.insert("evidence", pl.DataFrame({{"interruption_id": ["i0", "i1"], "event_id": [3, None],
                                        "time": [None, None], "text": ["a [b] 'c'", None]}}))
    st.insert("files", pl.DataFrame({{"file_id": [0], "path": ["x/rank0.log"], "size": [10], "lines": [2],
        "parsed": [1], "ignored": [0], "unparsed": [1], "events": [1], "warnings": [[None]],
        "first_ts": [datetime(2026, 11, 2, 8, 0, 1, 500000, tzinfo=UTC)], "last_ts": [None]}}))
try:
    with st.transaction():
        st.insert("downtime", pl.DataFrame({{"bucket": ["lost_work"], "seconds": [1.5]}}))
        st.insert("files", pl.DataFrame({{"file_id": [1], "path": [None], "lines": [1]}}))  # NOT NULL path
except Exception as exc:
    failed = type(exc).__name__
rows = {{t: st.con.execute(f'SELECT * FROM "{{t}}"').fetchall() for t in ("evidence", "files", "downtime")}}
st.close()
print(json.dumps({{"pyarrow": "pyarrow" in sys.modules, "failed": failed, "rows": rows}}, default=str))
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["pyarrow"] is False and got["failed"] == "ConstraintException"
    assert got["rows"]["evidence"] == [["i0", 3, None, None, None, None, None, "a [b] 'c'"],
                                       ["i1", None, None, None, None, None, None, None]]
    assert got["rows"]["files"] == [[0, "x/rank0.log", 10, None, None, None, None, 2, 1, 0, 1, 1, [None], None,
                                     "2026-11-02 08:00:01.500000+00:00", None]]
    assert got["rows"]["downtime"] == []  # rolled back with the failed insert


def test_null_types_become_text_at_any_depth_and_arrays_keep_their_shape() -> None:
    """The stream into DuckDB sends polars' Null type as text (DuckDB's reader refuses Null columns):
    inside lists, structs and arrays of one or more dimensions too, the shape unchanged."""
    from forensics.store import _typed

    assert _typed(pl.Null) == pl.Utf8
    assert _typed(pl.List(pl.Null)) == pl.List(pl.Utf8)
    assert _typed(pl.Array(pl.Null, (3, 2))) == pl.Array(pl.Utf8, (3, 2))
    assert _typed(pl.Array(pl.Int64, 4)) == pl.Array(pl.Int64, 4)
    assert _typed(pl.Struct({"a": pl.Null, "b": pl.Float64})) == pl.Struct({"a": pl.Utf8, "b": pl.Float64})
    df = pl.DataFrame({"a": [None]}, schema={"a": pl.Array(pl.Null, (3, 2))})
    assert df.cast({"a": _typed(df.schema["a"])}).schema["a"] == pl.Array(pl.Utf8, (3, 2))

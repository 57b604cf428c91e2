"""forensics/ingest.py: a large CSV table (a DCGM export read by its block reader) is read in a
thread beside the line logs (BESIDE). The results are those of reading it after them, file for
file, whatever the threads' timing; only the files `parse_one` reads as a CSV table go beside (a
DCGM file read whole from its bytes stays after the line logs)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from forensics import ingest
from forensics.accounting import FileResult
from forensics.config import load_job_config
from forensics.discovery import Limits, ReadPath, discover, read_head
from parsers import registry

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 1 << 20  # the 1/100 scale DCGM export (~5 MB) is larger than a chunk: the block reader takes it


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, bench_module: Callable[[str], ModuleType]) -> Path:
    out = tmp_path_factory.mktemp("beside") / "case"
    bench_module("independent_job").generate(out, scale=0.01, seed=5)
    return out / "job"


def _ingest(job: Path, chunk: int | None, spill: Path | None = None,
            beside: bool = True) -> tuple[list[FileResult], dict[str, str]]:
    """Every file's result, and the thread that read each file with a CSV table's reader or whole."""
    limits = Limits(chunk_bytes=chunk, read=ReadPath(beside=beside)) if chunk else Limits(read=ReadPath(beside=beside))
    disc = discover(job, limits)
    readers: dict[str, str] = {}
    table, whole = ingest._parse_table, ingest._whole_group

    def spy_table(sf, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        readers[sf.rel_path] = threading.current_thread().name
        return table(sf, *a, **k)

    def spy_whole(ids, d, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        for i in ids:
            readers[d.files[i].rel_path] = threading.current_thread().name
        return whole(ids, d, *a, **k)

    ingest._parse_table, ingest._whole_group = spy_table, spy_whole
    try:
        got = ingest.ingest(disc, load_job_config(job, disc), limits, spill_dir=spill)
    finally:
        ingest._parse_table, ingest._whole_group = table, whole
    return got.files, readers


def _same(a: FileResult, b: FileResult) -> None:
    assert (a.rel_path, a.size, a.digest, a.parser, a.parsers, a.lines, a.parsed, a.ignored, a.unparsed,
            a.warnings, a.unparsed_error_lines, a.first_ts, a.last_ts) == (
        b.rel_path, b.size, b.digest, b.parser, b.parsers, b.lines, b.parsed, b.ignored, b.unparsed,
        b.warnings, b.unparsed_error_lines, b.first_ts, b.last_ts), a.rel_path
    assert_frame_equal(a.events, b.events)
    assert_frame_equal(a.unparsed_errors, b.unparsed_errors)
    assert sorted(a.tables) == sorted(b.tables) and sorted(a.spilled) == sorted(b.spilled)
    for name in a.tables:
        assert_frame_equal(a.tables[name], b.tables[name])


@pytest.mark.parametrize("chunk", [CHUNK, None], ids=["block-reader", "whole-bytes"])
def test_the_table_read_beside_gives_what_reading_it_after_gives(job: Path, tmp_path: Path, chunk: int | None) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    beside, where = _ingest(job, chunk, tmp_path / "a")
    after, where_after = _ingest(job, chunk, tmp_path / "b", beside=False)
    dcgm_files = [f for f in beside if f.rel_path.endswith(".csv")]
    assert len(dcgm_files) == 1 and dcgm_files[0].parser == "dcgm"
    csv = dcgm_files[0].rel_path
    assert dcgm_files[0].lines == (job / csv).read_bytes().count(b"\n")
    assert dcgm_files[0].parsed == dcgm_files[0].lines - 1  # every data row; the header ignored
    # the large CSV went beside the line logs (the `beside` thread), after them without it; the
    # one read whole from its bytes goes after them either way
    assert list(where) == [csv] and where[csv].startswith("beside") == (chunk is not None)
    assert list(where_after) == [csv] and not where_after[csv].startswith("beside")
    warned = any("read by polars' CSV reader in blocks" in w for w in dcgm_files[0].warnings)
    assert warned == (chunk is not None)  # which reader: the block reader past a chunk
    assert [f.rel_path for f in beside] == [f.rel_path for f in after] == sorted(f.rel_path for f in after)
    assert len(beside) >= 66  # 64 rank logs, the dmesg, the DCGM export (and the Slurm files)
    assert sum(f.lines for f in beside) > 100_000
    for a, b in zip(beside, after, strict=True):
        _same(a, b)
    # its samples spilled to Parquet (SPILL_ROWS), the same rows by either route
    spilled = [f for f in beside if f.spilled]
    assert [f.rel_path for f in spilled] == [csv]
    assert_frame_equal(pl.read_parquet(spilled[0].spilled["dcgm_samples"]),
                       pl.read_parquet(next(f for f in after if f.spilled).spilled["dcgm_samples"]))


def test_only_large_csv_tables_go_beside(job: Path) -> None:
    limits = Limits(chunk_bytes=CHUNK)
    disc = discover(job, limits)
    cfg = load_job_config(job, disc)
    parsers = registry()
    chosen = {sf.rel_path: ingest._beside_candidate(sf, read_head(sf, limits), cfg, parsers, limits)
              for sf in disc.files}
    assert [p for p, yes in chosen.items() if yes] == [p for p in chosen if p.endswith(".csv")]
    dmesg = next(sf for sf in disc.files if sf.rel_path.startswith("nodes/"))
    assert dmesg.size > CHUNK and not chosen[dmesg.rel_path]  # large, but a line log
    # at the default chunk the 5 MB export is one chunk: the bulk routes read it, nothing goes beside
    assert not any(ingest._beside_candidate(sf, read_head(sf, Limits()), cfg, parsers, Limits())
                   for sf in disc.files)

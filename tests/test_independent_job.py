"""The independent-job shape (bench/independent_job.py) at 1/100 scale: one quoted long-format DCGM
CSV, a pdsh dmesg of the partition, 64 INFO-level rank logs. Its DCGM file is recognized and read
whole (by the block reader when it is larger than a read chunk, by the line path otherwise), the two
throttling GPUs are found as stragglers and the verdict names the true host. And the block reader
(`dcgm.read_csv_chunks`, polars' CSV reader over blocks of the bytes) agrees with the line path on the CSVs both read, and reads the shapes the
line path does not (wide, field ids, another delimiter, any column order)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from forensics.analysis import analyze
from forensics.discovery import Limits
from parsers import dcgm
from parsers.records import ParseContext

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory, bench_module: Callable[[str], ModuleType]) -> Path:
    out = tmp_path_factory.mktemp("independent") / "case"
    bench_module("independent_job").generate(out, scale=0.01, seed=11)
    return out


def test_generator_writes_the_shape(case: Path) -> None:
    job = case / "job"
    truth = tomllib.loads((case / "truth.toml").read_text())
    csvs = list(job.rglob("*.csv"))
    assert [p.relative_to(job).as_posix() for p in csvs] == [truth["files"]["dcgm"]]
    head = csvs[0].read_text().split("\n", 2)
    assert head[0] == '"timestamp","Hostname","gpu","__name__","value"'
    assert head[1].count('"') == 6  # host, gpu label and metric name quoted; stamp and value bare
    assert len(list(job.rglob("rank-*.log"))) == truth["files"]["rank_logs"] == 64
    kernel = (job / truth["files"]["kernel"]).read_text().splitlines()
    hosts = {ln.split(":", 1)[0] for ln in kernel}
    assert len(hosts) == truth["files"]["kernel_hosts"] >= 16
    xid = [ln for ln in kernel if "Xid" in ln and ": 79," in ln]
    assert len(xid) == 1 and xid[0].startswith(truth["culprit"]["host"] + ": [")
    assert len(truth["stragglers"]) == 2 and len({s["host"] for s in truth["stragglers"]}) == 2


@pytest.mark.parametrize("chunk", [1 << 20, None], ids=["block-reader", "line-path"])
def test_analysis_finds_the_stragglers_and_the_true_culprit(case: Path, tmp_path: Path, chunk: int | None) -> None:
    truth = tomllib.loads((case / "truth.toml").read_text())
    limits = Limits(chunk_bytes=chunk) if chunk else None
    a = analyze(case / "job", tmp_path / "out", limits=limits, html=False)
    rep = a.report
    src = next(s for s in rep["sources"] if s["path"] == truth["files"]["dcgm"])
    n_lines = (case / "job" / truth["files"]["dcgm"]).read_bytes().count(b"\n")
    assert src["parser"] == "dcgm" and src["lines"] == n_lines
    assert src["parsed"] == n_lines - 1 and src["unparsed"] == 0  # every data line, the header ignored
    if chunk:
        assert any("read by polars' CSV reader in blocks" in w for w in src["warnings"])
    got = {(s["host"], s["gpu"], s["rank"], s["cause"]) for s in rep["stragglers"]}
    assert got == {(s["host"], s["gpu"], s["rank"], s["cause"]) for s in truth["stragglers"]}
    v = rep["verdict"]
    assert v["category"] == truth["culprit"]["category"]
    assert (v["culprit"]["host"], v["culprit"]["gpu"]) == (truth["culprit"]["host"], truth["culprit"]["gpu"])
    xid = a.sql("SELECT line_no, code FROM events WHERE kind = 'dcgm_xid' ORDER BY line_no")
    lines = (case / "job" / truth["files"]["dcgm"]).read_text().split("\n")
    for no, code in xid.iter_rows():  # each event at its own line, whichever path read it
        assert '"DCGM_FI_DEV_XID_ERRORS"' in lines[no - 1] and lines[no - 1].endswith(f",{code}.0")


LONG = """timestamp,metric,gpu,UUID,pci_bus_id,Hostname,value
2026-11-02T08:00:00Z,DCGM_FI_DEV_SM_CLOCK,0,GPU-a,00000000:18:00.0,n1,1980
2026-11-02T08:00:00Z,DCGM_FI_DEV_XID_ERRORS,0,GPU-a,00000000:18:00.0,n1,0
2026-11-02T08:00:03Z,DCGM_FI_DEV_SM_CLOCK,0,GPU-a,00000000:18:00.0,n1,1300
2026-11-02T08:00:03Z,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,0,GPU-a,00000000:18:00.0,n1,64
2026-11-02T08:00:05Z,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,0,GPU-a,00000000:18:00.0,n1,32
2026-11-02T08:00:05Z,DCGM_FI_DEV_SM_CLOCK,1,GPU-b,00000000:2a:00.0,n1,9223372036854775792
2026-11-02T08:00:06Z,DCGM_FI_DEV_XID_ERRORS,0,GPU-a,00000000:18:00.0,n1,79
2026-11-02T08:00:12Z,DCGM_FI_DEV_XID_ERRORS,0,GPU-a,00000000:18:00.0,n1,79
2026-11-02T08:00:14Z,DCGM_FI_DEV_SM_CLOCK,0,GPU-a,00000000:18:00.0,n1,N/A
"""


def _blocks(tmp_path: Path, text: str) -> tuple:
    path = tmp_path / "d.csv"
    path.write_text(text)
    layout = dcgm.table_layout(text[:4096], 1 << 40, 1)
    assert layout is not None
    data = path.read_bytes()
    blocks = [data[i:i + 7] for i in range(0, len(data), 7)]  # blocks cut anywhere, mid-line included
    return dcgm.read_csv_chunks(blocks, layout, ParseContext(path="d.csv", host_hint="h0"))


def test_block_reader_agrees_with_the_line_path(tmp_path: Path) -> None:
    ext, lines, read = _blocks(tmp_path, LONG)
    assert (lines, read) == (10, 9)
    lp = dcgm.parse(pl.DataFrame({"line_no": range(1, 11), "text": LONG.split("\n")[:10]}),
                    ParseContext(path="d.csv", host_hint="h0"))
    cols = ["line_no", "kind", "code", "host", "gpu", "ts", "message"]
    assert ext.events.select(cols).equals(lp.events.select(cols))
    assert ext.events["line_no"].to_list() == [8]  # the Xid 79 at its own line, once
    # the line path's samples, bucketed as the reader buckets them
    b = lp.tables["dcgm_samples"].with_columns(pl.col("ts").dt.truncate(f"{dcgm.BUCKET_S}s"))
    want = {(r["ts"], r["gpu"], r["field"]): r["value"] for r in b.group_by("ts", "gpu", "field").agg(
        pl.col("value").mean()).iter_rows(named=True)}
    want[(b["ts"][0], 0, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")] = 96.0  # a bit mask: OR, not mean
    got = {(r["ts"], r["gpu"], r["field"]): r["value"] for r in ext.tables["dcgm_samples"].iter_rows(named=True)}
    assert got == want
    s = ext.tables["dcgm_samples"]
    assert s["pci_bus_id"].drop_nulls().unique().sort().to_list() == ["0000:18:00", "0000:2a:00"]
    assert s.filter(pl.col("gpu") == 1)["value"].to_list() == [None]  # the blank sentinel is null


def test_block_reader_reads_wide_reordered_and_field_id_shapes(tmp_path: Path) -> None:
    wide = ('"gpu";"DCGM_FI_DEV_GPU_TEMP";"time";"155";"hostname"\n'
            '"0";61;1793606400;650.5;"n1"\n"1";"N/A";1793606400;600.0;"n2"\n')
    ext, lines, read = _blocks(tmp_path, wide)
    s = ext.tables["dcgm_samples"].sort("host", "field")
    assert (lines, read) == (3, 2)
    assert s.select("host", "gpu", "field", "value").rows() == [
        ("n1", 0, "DCGM_FI_DEV_GPU_TEMP", 61.0), ("n1", 0, "DCGM_FI_DEV_POWER_USAGE", 650.5),
        ("n2", 1, "DCGM_FI_DEV_GPU_TEMP", None), ("n2", 1, "DCGM_FI_DEV_POWER_USAGE", 600.0)]
    assert s["ts"].dt.epoch("s").unique().to_list() == [1793606400]
    long_ids = "Value\tFieldId\tGPU\tTimestamp\n1300\t100\t3\t1793606400123\n"
    ext, _, _ = _blocks(_fresh(tmp_path), long_ids)
    assert ext.tables["dcgm_samples"].select("host", "gpu", "field", "value").rows() == [
        ("h0", 3, "DCGM_FI_DEV_SM_CLOCK", 1300.0)]
    assert dcgm.sniff(wide) >= 0.9
    assert dcgm.table_layout("timestamp,metric,gpu,value\n", 10, 1 << 20) is None  # the line path reads it


def _fresh(tmp_path: Path) -> Path:
    d = tmp_path / "fresh"
    d.mkdir()
    return d


QUOTED = LONG.replace(",n1,79\n", ',"n1\nsecond line",79\n', 1)


@pytest.mark.parametrize("text", [LONG, QUOTED])
def test_blocks_read_in_threads_give_the_sequential_result(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """Blocks parsed several at a time (`BLOCK_THREADS`) and added in file order equal the reader that
    parses one block after another, also when a quoted cell holds a newline (its block then holds
    fewer records than lines, and the blocks after it are read again from their true first row)."""
    data = text.encode()
    cut = data.find(b"second line") + 40  # a quoted record whole in the first block; small ones after it
    blocks = [data[:cut]] + [data[i:i + 9] for i in range(cut, len(data), 9)]
    layout = dcgm.table_layout(text[:4096], 1 << 40, 1)
    monkeypatch.setattr(dcgm.os, "cpu_count", lambda: 4)
    got = {}
    for threads in (1, 2, 4):
        monkeypatch.setattr(dcgm, "BLOCK_THREADS", threads)
        got[threads] = dcgm.read_csv_chunks(blocks, layout, ParseContext(path="d.csv", host_hint="h0"))
    base, lines, read = got[1]
    assert (lines, read) == ((10, 9) if text == LONG else (11, 9))
    for threads in (2, 4):
        ext, n_lines, n_read = got[threads]
        assert (n_lines, n_read) == (lines, read)
        assert ext.events.equals(base.events) and ext.warnings == base.warnings
        assert ext.tables["dcgm_samples"].equals(base.tables["dcgm_samples"])
        assert ext.claimed.equals(base.claimed) and ext.ignored.equals(base.ignored)
    if text == QUOTED:  # after the two-line record, rows are numbered as records (line numbers approximate)
        assert any("do not match" in w for w in base.warnings)
        assert base.events["line_no"].to_list() == [8, 9]  # the host of the first is "n1\nsecond line"

"""forensics/ingest.py: the reference-year guess (counted with polars' regex engine) equals a plain
Python count over the same heads, ties included."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from forensics.ingest import _YEAR_RE, YEAR_HEAD_BYTES, _YearCount

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _python_guess(heads: list[bytes]) -> int | None:
    years: Counter[int] = Counter()
    for h in heads:
        for m in _YEAR_RE.finditer(h[:YEAR_HEAD_BYTES].decode("utf-8", "replace")):
            years[int(m.group(1) or m.group(2))] += 1
    return years.most_common(1)[0][0] if years else None


def _guess(heads: list[bytes]) -> int | None:
    yc = _YearCount()
    for h in heads:
        yc.add(h)
    return yc.most_common()


def test_year_guess_matches_python_on_every_fixture_folder() -> None:
    folders = [d for d in FIXTURES.rglob("*") if d.is_dir()]
    guessed = 0
    for d in folders:
        heads = [f.read_bytes()[:65536] for f in sorted(d.iterdir()) if f.is_file()]
        assert _guess(heads) == _python_guess(heads), d
        guessed += _guess(heads) is not None
    assert guessed > 10


def test_year_guess_ties_and_both_shapes() -> None:
    heads = [b"Sun Feb 23 16:24:18 2025 x\n2024-01-02 10:00:00 y\n", b"2024-03-04T10:00:00Z\n",
             b"Mon Mar  3 01:02:03 2025\n"]
    assert _guess(heads) == _python_guess(heads) == 2025  # 2 and 2: the first seen wins
    assert _guess([b"no dates here\n"]) is None
    assert _guess([b"x" * 300] * 300 + [b"2023-05-06 07:08:09\n"]) == 2023  # past a batch of 256


def test_pack_cuts_runs_at_the_limit() -> None:
    from forensics.ingest import _pack

    sizes = {1: 4, 2: 4, 3: 3, 4: 10, 5: 1}
    assert _pack([1, 2, 3, 4, 5], sizes.__getitem__, 8) == [[1, 2], [3], [4], [5]]
    assert _pack([], sizes.__getitem__, 8) == []


def test_query_csv_larger_than_a_chunk_keeps_its_header_for_every_chunk(tmp_path: Path) -> None:
    """An `nvidia-smi --query-gpu ... --format=csv -l 1` monitor too large for one read chunk: its
    header (`ParserSpec.header`) is handed to the parser again with each later chunk, so the rows of
    every chunk are read and the lost GPU near the end is found, at its own line, counted once."""
    from forensics.config import load_job_config
    from forensics.discovery import Limits, discover
    from forensics.ingest import ingest

    header = "timestamp, index, pci.bus_id, temperature.gpu, power.draw [W], clocks.sm [MHz]\n"
    rows = [f"2024/05/14 10:{m // 60:02d}:{m % 60:02d}.{g:03d}, {g}, 00000000:{0x18 + g:02X}:00.0, {40 + g}, "
            f"{400 - g}.5 W, 1980 MHz\n" for m in range(600) for g in range(2)]
    rows[-1] = "2024/05/14 10:09:59.001, 1, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]\n"
    job = tmp_path / "job"
    (job / "node-3").mkdir(parents=True)
    (job / "node-3" / "gpu.csv").write_text(header + "".join(rows))
    limits = Limits(chunk_bytes=8192, parse_rows=100)  # (ten chunks, each parsed on its own)
    disc = discover(job, limits)
    try:
        ing = ingest(disc, load_job_config(job), limits)
    finally:
        disc.close()
    (f,) = ing.files
    assert (f.lines, f.parsed, f.ignored, f.unparsed) == (1 + len(rows), len(rows), 1, 0)
    assert f.events.select("line_no", "kind", "code", "gpu").rows() == [(len(rows) + 1, "gpu_lost", "GPU is lost", 1)]
    temps = f.tables["dcgm_samples"].filter(pl.col("field") == "DCGM_FI_DEV_GPU_TEMP")
    assert temps.height == len(rows) - 1 and temps["line_no"].n_unique() == temps.height

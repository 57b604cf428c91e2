"""Inputs the fuzzer (tests/hostile/test_fuzz.py, `make fuzz`) found crashing, kept as explicit seeds.

Each `seeds/*.log` goes through every parser (no exception, claimed/ignored lines are input
lines, frames conform to the schemas) and through discovery + ingest as a file of a job (no
exception, lines == parsed + ignored + unparsed). `seeds/*.name` holds a file *name* that broke
the path hints. Add a new seed file per finding; the file name says what it exercises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.config import load_job_config
from forensics.discovery import discover, path_hints
from forensics.ingest import ingest
from parsers import registry
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, ParseContext, conform

SEEDS = Path(__file__).parent / "seeds"
PARSERS = registry()


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.glob("*.log")))
@pytest.mark.parametrize("parser", [p.name for p in PARSERS])
def test_seed_through_every_parser(seed: str, parser: str) -> None:
    p = next(x for x in PARSERS if x.name == parser)
    data = (SEEDS / seed).read_bytes()
    for first in (1, 1000):
        lines = with_body(decode_lines(data, first).lines)
        p.module.sniff(data.decode("utf-8", "replace"))
        ext = p.module.parse(lines, ParseContext(path="node-001/rank-3.log", host_hint="node-001", rank_hint=3,
                                                 ref_year=2024))
        ids = set(lines["line_no"].to_list())
        assert set(ext.claimed.to_list()) <= ids and set(ext.ignored.to_list()) <= ids
        conform(ext.events, EVENT_SCHEMA)
        for name, df in ext.tables.items():
            if name in TABLE_SCHEMAS:
                conform(df, TABLE_SCHEMAS[name])


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.glob("*.log")))
def test_seed_through_ingest(seed: str, tmp_path: Path) -> None:
    (tmp_path / "node-001").mkdir()
    (tmp_path / "node-001" / "rank-3.log").write_bytes((SEEDS / seed).read_bytes())
    d = discover(tmp_path)
    try:
        (f,) = ingest(d, load_job_config(tmp_path), workers=1).files
    finally:
        d.close()
    assert f.lines == f.parsed + f.ignored + f.unparsed
    assert not any("internal error" in w or "failed on this file" in w for w in f.warnings), f.warnings


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.glob("*.name")))
def test_seed_file_names(seed: str, tmp_path: Path) -> None:
    name = (SEEDS / seed).read_text().strip()
    host, rank, attempt = path_hints(name)
    assert rank is None or 0 <= rank < 2**31
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("[rank1]: hello\n")
    d = discover(tmp_path)
    try:
        (f,) = ingest(d, load_job_config(tmp_path), workers=1).files
    finally:
        d.close()
    assert f.lines == 1 and not any("internal error" in w for w in f.warnings)

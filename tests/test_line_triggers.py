"""The line parsers' trigger contract (`spec.trigger`: a frame with no line matching it gives
nothing), which lets `ingest.parse_one` and `bulk.parse_screened` skip a parser's call on a chunk or
batch without a trigger line (`bulk.triggered`). Checked on every fixture and real-sample file, on
the file as it is and on the frame of its lines that do not match (any file made of those lines
would have to give nothing), and end to end: the FileResults are the same with and without the skip."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import forensics.bulk as bulk_mod
import forensics.ingest as ingest_mod
from forensics.config import load_job_config
from forensics.discovery import Limits, ReadPath, discover
from parsers import registry
from parsers.lines import decode_lines, with_body
from parsers.records import Extraction, ParseContext

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
REAL = ROOT.parent.parent / "shared" / "real-samples"  # (worktree layout; /work/shared beside /work/main too)
if not REAL.is_dir():
    REAL = Path("/work/shared/real-samples")
TRIGGERED = [p for p in registry() if p.spec.trigger is not None and not p.exclusive]
MAX_BYTES = 4_000_000


def _files() -> list[Path]:
    roots = [FIXTURES] + ([REAL] if REAL.is_dir() else [])
    return sorted(f for r in roots for f in r.rglob("*")
                  if f.is_file() and f.suffix not in (".toml", ".md") and f.stat().st_size <= MAX_BYTES)


FILES = _files()


def _hit(p, lines: pl.DataFrame) -> pl.Series:  # noqa: ANN001 - a ParserInfo
    trig = p.spec.trigger
    body = lines["body"]
    return (body.str.contains_any(list(trig)) if isinstance(trig, tuple) else body.str.contains(trig)).fill_null(False)


def _empty(ext: Extraction) -> bool:
    return (ext.events.is_empty() and ext.claimed.len() == 0 and ext.ignored.len() == 0 and not ext.warnings
            and all(t.is_empty() for t in ext.tables.values()))


@pytest.mark.parametrize("parser", TRIGGERED, ids=lambda p: p.name)
def test_a_frame_without_a_trigger_line_gives_nothing(parser) -> None:  # noqa: ANN001
    """Events, claimed, ignored, tables and warnings all empty: on each whole file without a trigger
    line, and on each file's lines that miss the trigger, parsed as a frame of their own."""
    whole = rest = 0
    for f in FILES:
        lines = with_body(decode_lines(f.read_bytes()).lines)
        hit = _hit(parser, lines)
        ctx = ParseContext(path=f.name)
        if not hit.any():
            assert _empty(parser.module.parse(lines, ctx)), f
            whole += 1
        elif not hit.all():
            miss = lines.filter(~hit)
            assert _empty(parser.module.parse(miss, ctx)), f"{f}: lines without a trigger"
            rest += 1
    assert whole > 20, (whole, rest)  # (ipmi: its fixtures hold trigger lines only)


def test_triggered_reads_the_body() -> None:
    """The skip looks at the peeled text: a wrapper prefix neither hides nor makes a trigger line."""
    nccl = next(p for p in TRIGGERED if p.name == "nccl")
    lines = with_body(decode_lines(b"[rank3]: node-1:11:11 [0] NCCL WARN NET/IB : Got completion\n").lines)
    assert bulk_mod.triggered(nccl, lines)
    lines = with_body(decode_lines(b"[rank3]: plain text only\n").lines)
    assert not bulk_mod.triggered(nccl, lines)
    assert bulk_mod.triggered(nccl, lines.drop("body"))  # (no body: no skip)


def _ingest(job: Path, skip: bool, bulk: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(bulk_mod, "SKIP_UNTRIGGERED", skip)
    monkeypatch.setattr(bulk_mod, "TRIGGER_SCREEN_ROWS", 0)  # (the skip through the trigger screen on every batch)
    disc = discover(job)
    try:
        ing = ingest_mod.ingest(disc, load_job_config(job), Limits(read=ReadPath(bulk=bulk, screen_small_files=False)))
    finally:
        disc.close()
    return {f.rel_path: f for f in ing.files}


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns, nulls_last=True) if not df.is_empty() else df


def _same(a, b, where: str) -> None:  # noqa: ANN001 - FileResults
    assert (a.lines, a.parsed, a.ignored, a.unparsed, a.parser, a.parsers, a.digest, a.first_ts, a.last_ts) == \
        (b.lines, b.parsed, b.ignored, b.unparsed, b.parser, b.parsers, b.digest, b.first_ts, b.last_ts), where
    assert a.unparsed_error_lines == b.unparsed_error_lines and a.unparsed_errors.equals(b.unparsed_errors), where
    assert a.warnings == b.warnings, where
    assert _sorted(a.events).equals(_sorted(b.events)), where
    assert {k for k, v in a.tables.items() if not v.is_empty()} == {k for k, v in b.tables.items() if not v.is_empty()}
    for name, t in a.tables.items():
        if not t.is_empty():
            assert _sorted(t).equals(_sorted(b.tables[name])), f"{where} table {name}"


def _jobs() -> list[Path]:
    """Fixture folders of the triggered parsers and the real-sample jobs kept as fixtures."""
    names = {p.name for p in TRIGGERED} | {"wrapped", "kernel", "pytorch"}
    out = [d for d in sorted(FIXTURES.iterdir()) if d.is_dir() and d.name in names]
    return out + sorted(d for d in (FIXTURES / "jobs").iterdir() if d.is_dir())


@pytest.mark.parametrize("bulk", [False, True], ids=["parse_one", "parse_screened"])
def test_the_skip_changes_no_file_result(bulk: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fixture folder of a triggered parser and every real-sample job of fixtures/jobs (copied
    without its label), ingested file by file and in batches: the same FileResults with and without the skip."""
    checked = 0
    jobs = _jobs()
    for d in jobs if bulk else [d for i, d in enumerate(jobs) if d.parent == FIXTURES or i % 3 == 0]:  # (time)
        job = tmp_path / d.name
        shutil.copytree(d, job, ignore=shutil.ignore_patterns("case.toml"))
        on, off = _ingest(job, True, bulk, monkeypatch), _ingest(job, False, bulk, monkeypatch)
        assert on.keys() == off.keys(), d
        for path, a in on.items():
            _same(a, off[path], f"{d.name}/{path}")
            checked += 1
    assert checked > 100


def test_the_trigger_screen_keeps_every_trigger_line() -> None:
    """`bulk.trigger_screen`: every line matching a screened parser's trigger holds one of the
    screen's literals, so the screened lines give each parser the same `triggered` answer; checked
    on every fixture and real-sample file (and the screen leaves most lines of a dmesg out)."""
    names, expr = bulk_mod.trigger_screen(registry())
    assert expr is not None and {"steps", "nccl_tests", "pytorch", "slurm", "nccl"} <= names
    assert all(bulk_mod.trigger_literals(p) for p in TRIGGERED if p.name in names)
    kept = total = 0
    for f in FILES:
        lines = with_body(decode_lines(f.read_bytes()).lines)
        near = lines.filter(expr)
        kept, total = kept + near.height, total + lines.height
        for p in TRIGGERED:
            if p.name in names:
                assert not (_hit(p, lines) & ~lines.select(expr)[:, 0]).any(), (f, p.name)
                assert bulk_mod.triggered(p, near) == bulk_mod.triggered(p, lines), (f, p.name)
    assert kept < total
    dmesg = with_body(decode_lines(b"[  1.0] pci 0000:3b:00.0: PME# supported from D0 D3hot D3cold\n"
                                   b"[  2.0] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode.\n").lines)
    assert dmesg.filter(expr).is_empty()

"""The triage pass (forensics/triage.py): required literals are sound (every signature example and
every fixture line a parser TRIGGER matches holds one), both engines find the same survivor lines
and the same digest on every fixture file, read in any chunk size, as a plain Python reading of the
lines does; and the bulk chatter screen gives the same file results and reports with either
engine."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

import forensics.ingest as ingest_mod
from forensics import triage
from forensics.analysis import analyze
from forensics.config import load_job_config
from forensics.discovery import discover
from forensics.signatures import load_catalog, match
from forensics.simulate import load_scenario, simulate
from parsers import registry
from parsers.lines import decode_lines, with_body
from parsers.nccl import INFO_INTERESTING

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
FILES = sorted(f for f in FIXTURES.rglob("*") if f.is_file() and f.suffix not in (".toml", ".md")
               and "scenarios" not in f.parts and f.stat().st_size <= 4_000_000)
JOB_DIRS = sorted(d for d in (FIXTURES / "jobs").iterdir() if d.is_dir())
PARSER_DIRS = sorted(d for d in FIXTURES.iterdir() if d.is_dir() and d.name not in ("jobs", "scenarios", "scenarios-large"))
ENGINES = ["polars", pytest.param("hyperscan", marks=pytest.mark.skipif(
    not triage.hyperscan_available(), reason="hyperscan not installed"))]


@pytest.fixture(scope="module")
def catalog_set() -> triage.LiteralSet:
    lits, _ = triage.literal_set(triage.catalog_patterns(load_catalog(), registry()))
    return lits


def _has(text: str, lits: list[str], caseless: bool) -> bool:
    return any(lit.lower() in text.lower() for lit in lits) if caseless else any(lit in text for lit in lits)


def test_required_literals_of_patterns() -> None:
    assert triage.required_literals(r"(?i)NCCL WARN .*(?:timed out)") == (["NCCL WARN "], True)
    assert triage.required_literals(r"Xid \(PCI:[0-9a-f:.]+\): (?:79|74)\b|fell off the bus") == \
        (["Xid (PCI:", "fell off the bus"], False)
    assert triage.required_literals(r"foo(?: bar)?baz") == (["foo"], False)
    assert triage.required_literals(r"^\s*\d+ \w+$") is None  # no literal: cannot be prefiltered
    assert triage.required_literals(r"abcd?e") == (["abc"], False)  # 'd' is optional


def test_signature_examples_hold_a_required_literal() -> None:
    """A signature with required literals matches only lines holding one: each example does. The
    signatures without any match every message of an event kind ('.', with a kind or code filter):
    the parser's event, not a literal, selects their lines."""
    checked = 0
    for sig in load_catalog().signatures:
        got = triage.required_literals(sig.pattern)
        if got is None:
            assert sig.pattern != "." or sig.kind or sig.code, sig.id
            continue
        lits, ci = got
        for ex in sig.examples:
            if sig.matches_text(ex):
                assert _has(ex, lits, ci), (sig.id, ex, lits)
                checked += 1
    assert checked > 100


@pytest.mark.parametrize("name", sorted(triage.trigger_patterns(registry())))
def test_every_trigger_line_holds_a_required_literal(name: str) -> None:
    pats = triage.trigger_patterns(registry())[name]
    lits, missing = triage.literal_set(pats)
    assert not missing, missing
    hits = 0
    for f in FILES:
        body = with_body(decode_lines(f.read_bytes()).lines).select("body")
        matched = body.filter(pl.any_horizontal([pl.col("body").str.contains(p) for p in pats]))
        for line in matched["body"].to_list():
            assert _has(line, list(lits.exact), False) or _has(line, list(lits.caseless), True), (f, line)
            hits += 1
    assert hits > 0


def _reference(data: bytes, lits: triage.LiteralSet) -> tuple[list[int], list[int]]:
    """Line numbers and start offsets of the lines holding a literal, read the plain Python way."""
    nos, offs, off = [], [], 0
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()
    for no, raw in enumerate(parts, 1):
        text = raw.decode("utf-8", errors="replace")
        if _has(text, list(lits.exact), False) or _has(text, list(lits.caseless), True):
            nos.append(no)
            offs.append(off)
        off += len(raw) + 1
    return nos, offs


@pytest.mark.parametrize("engine", ENGINES)
def test_scan_finds_the_literal_lines_of_every_fixture_file(engine: str, catalog_set: triage.LiteralSet) -> None:
    m = triage.matcher(catalog_set, engine=engine)
    survivors = 0
    for f in FILES:
        data = f.read_bytes()
        whole = triage.scan([data], m)
        nos, offs = _reference(data, catalog_set)
        assert whole.line_nos.tolist() == nos and whole.offsets.tolist() == offs, f
        assert whole.lines == (len(decode_lines(data).lines) if data else 0), f
        small = triage.scan_file(f, m, chunk_bytes=97)  # lines cut across chunks
        assert (small.lines, small.line_nos.tolist(), small.offsets.tolist(), small.digest) == \
            (whole.lines, nos, offs, whole.digest), f
        survivors += len(nos)
    assert survivors > 500


@pytest.mark.skipif(not triage.hyperscan_available(), reason="hyperscan not installed")
def test_engines_agree_on_regexes_and_odd_bytes() -> None:
    plain = (b"host1:12:34 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
             b"host1:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P\n"
             b"host1:12:34 [0] NCCL INFO misc/socket.cc:540 -> 2\n"
             b"NCCL version 2.21\n"
             + "Grüße:1 -> 3\n".encode())
    data = plain.replace(b"NCCL version", b"bad \xff \x00 NCCL version")
    rx = (INFO_INTERESTING,)
    got = {e: triage.matcher(triage.LiteralSet((), ()), rx, engine=e).rows(plain).tolist() for e in triage.ENGINES}
    assert got["hyperscan"] == got["polars"] == [0, 2, 3, 4]  # not ASCII: both read it with polars
    ascii_part = plain[:plain.index("Grüße".encode())]
    got = {e: triage.matcher(triage.LiteralSet((), ()), rx, engine=e).rows(ascii_part).tolist() for e in triage.ENGINES}
    assert got["hyperscan"] == got["polars"] == [0, 2, 3]
    lits = triage.LiteralSet(("NCCL version",), ("p2p",))
    got = {e: triage.scan([data], triage.matcher(lits, engine=e)).line_nos.tolist() for e in triage.ENGINES}
    assert got["hyperscan"] == got["polars"] == [2, 4]


def test_digest_is_blake3_or_blake2b_and_says_which(tmp_path: Path) -> None:
    data = b"a line\n" * 10_000 + b"last without newline"
    m = triage.matcher(triage.LiteralSet(("line",), ()), engine="polars")
    b2 = triage.scan([data[:5000], data[5000:]], m, algo="blake2b-256")
    assert b2.digest_algo == "blake2b-256" and b2.digest == hashlib.blake2b(data, digest_size=32).hexdigest()
    assert b2.lines == 10_001 and b2.line_nos.tolist() == list(range(1, 10_002))  # the last line holds "line" too
    if triage.digest_algo() == "blake3":
        import blake3

        got = triage.scan([data], m)
        assert got.digest_algo == "blake3" and got.digest == blake3.blake3(data).hexdigest()


def test_an_unknown_engine_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(triage.ENGINE_ENV, "grep")
    with pytest.raises(ValueError, match="unknown triage engine 'grep'"):
        triage.engine_name()


# --- the bulk chatter screen: the same results with either engine ---------------------------------

def _results(job: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv(triage.ENGINE_ENV, engine)
    disc = discover(job)
    try:
        ing = ingest_mod.ingest(disc, load_job_config(job))
    finally:
        disc.close()
    out = {}
    for f in ing.files:
        ev = f.events.sort(f.events.columns, nulls_last=True) if not f.events.is_empty() else f.events
        out[f.rel_path] = (f.lines, f.parsed, f.ignored, f.unparsed, f.parser, f.parsers, f.digest,
                           f.first_ts, f.last_ts, f.unparsed_error_lines, sorted(f.warnings), ev.rows())
    return out


needs_hs = pytest.mark.skipif(not triage.hyperscan_available(), reason="hyperscan not installed")


@needs_hs
def test_bulk_results_equal_with_either_engine_on_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    events = 0
    for job in PARSER_DIRS + JOB_DIRS:
        a, b = _results(job, "hyperscan", monkeypatch), _results(job, "polars", monkeypatch)
        assert a == b, job.name
        events += sum(len(v[-1]) for v in a.values())
    assert events > 100


def _info_case(tmp: Path, scenario: str) -> Path:
    spec = load_scenario(FIXTURES / "scenarios" / f"{scenario}.toml")
    spec["job"]["nccl_debug"] = "INFO"
    spec["job"]["nccl_info_lines_per_rank"] = 300
    return simulate(spec, tmp / scenario, 5)


@needs_hs
@pytest.mark.parametrize("scenario", ["nccl_init_failure", "ib_link_error", "gpu_fell_off_bus"])
def test_reports_equal_with_either_engine_on_info_level_jobs(scenario: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefilter drops no line a parser or signature uses: the events (and every count) with the
    hyperscan screen are those of the polars regex, and so is report.json."""
    case = _info_case(tmp_path, scenario)
    a, b = _results(case, "hyperscan", monkeypatch), _results(case, "polars", monkeypatch)
    assert a == b
    assert sum(v[2] for v in a.values()) > 300  # chatter was screened out (counted ignored)
    reports = {}
    for engine in ("hyperscan", "polars"):
        monkeypatch.setenv(triage.ENGINE_ENV, engine)
        analyze(case, tmp_path / f"out-{engine}", html=False)
        reports[engine] = json.loads((tmp_path / f"out-{engine}" / "report.json").read_text())
    assert reports["hyperscan"] == reports["polars"]
    assert reports["polars"]["verdict"]["kind"] not in (None, "unknown")


def test_signature_hits_on_fixture_jobs_hold_a_required_literal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On real parsing of every fixture job, each event a signature with required literals matched
    holds one of them in its message: a literal prefilter keeps the lines those signatures use."""
    cat = load_catalog()
    lits = {s.id: triage.required_literals(s.pattern) for s in cat.signatures}
    checked = 0
    for job in JOB_DIRS:
        disc = discover(job)
        try:
            ing = ingest_mod.ingest(disc, load_job_config(job))
        finally:
            disc.close()
        parts = [f.events for f in ing.files if not f.events.is_empty()]
        if not parts:
            continue
        ev = pl.concat(parts).with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64))
        hits = match(cat, ev).join(ev.select("event_id", "message"), on="event_id")
        for sig, msg in hits.select("signature", "message").iter_rows():
            if lits[sig] is not None and msg is not None:
                assert _has(msg, *lits[sig]), (job.name, sig, msg)
                checked += 1
    assert checked > 20

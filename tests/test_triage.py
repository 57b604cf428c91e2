"""The triage pass (forensics/triage.py): required literals are sound (every signature example and
every fixture line a parser TRIGGER matches holds one), both engines find the same survivor lines
and the same digest on every fixture file, read in any chunk size, as a plain Python reading of the
lines does; and the bulk chatter screen gives the same file results and reports with either
engine."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics.ingest as ingest_mod
from forensics import triage
from forensics.analysis import analyze
from forensics.bulk import STAMP_HINT
from forensics.config import load_job_config
from forensics.discovery import discover
from forensics.signatures import literal_coverage, load_catalog, match
from forensics.simulate import load_scenario, simulate
from parsers import registry
from parsers.lines import decode_lines, is_plain, plain_lines, with_body
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
    rl = triage.required_literals
    assert rl(r"(?i)NCCL WARN .*(?:timed out)") == (["NCCL WARN "], True)
    assert rl(r"Xid \(PCI:[0-9a-f:.]+\): (?:79|74)\b|fell off the bus") == (["Xid (PCI:", "fell off the bus"], False)
    assert rl(r"foo(?: bar)?baz") == (["foo barbaz", "foobaz"], False)  # an optional part: both spellings
    assert rl(r"abcd?e") == (["abcde", "abce"], False)
    assert rl(r"^\s*\d+ \w+$") is None  # no literal: cannot be prefiltered
    # alternation inside a group: the union over its branches, carried into the run around it
    assert rl(r"NCCL (?:error|failure): \d+") == (["NCCL error: ", "NCCL failure: "], False)
    assert rl(r"\d+ (?:uncorrectable \w+|ECC page retired)") == ([" uncorrectable ", " ECC page retired"], False)
    assert rl(r"(?:abc|\d+) errors") == ([" errors"], False)  # a branch without a literal: the group gives none
    # classes, \s and \d end a literal; escaped punctuation is a character; [Ee] is two spellings
    assert rl(r"libcuda\.so\(\d+\)\s+failed") == (["libcuda.so("], False)
    assert rl(r"[Ee]rror 12") == (["Error 12", "error 12"], False)
    # *, {0,n} contribute nothing; {n,} requires n copies
    assert rl(r"ab(?:cdefgh){0,3}ijkl") == (["ijkl"], False)
    assert rl(r"ab(?:cd)*ef") is None
    assert rl(r"x(?:abc){2,}y") == (["xabcabc"], False)
    # a scoped (?i:...) makes the set caseless; a non-ASCII letter under (?i) ends the run
    assert rl(r"NVML_ERROR|(?i:version mismatch)") == (["NVML_ERROR", "version mismatch"], True)
    assert rl(r"(?i)straße kaputt") == (["e kaputt"], True)
    # what the Rust engine could read otherwise gets nothing: verbose mode, a nested set
    assert rl(r"(?x) foo \s bar") is None
    assert rl(r"[[:alpha:]]+ error failed") is None


def test_caseless_sets_hold_the_non_ascii_case_partners_of_their_letters() -> None:
    """(?i) matches a few non-ASCII characters to ASCII letters (the Kelvin sign to k, the long s
    to s in both engines; dotted and dotless I to i in Python's re); CASE_FOLDS lists every one
    (checked over every code point, in both engines) and a caseless set holds them as exact literals."""
    chars = [chr(i) for i in range(128, 0x110000) if not 0xD800 <= i < 0xE000]
    folds: dict[str, set[str]] = {}
    for c in chars:
        if re.fullmatch(r"(?i)[\x00-\x7f]", c):
            folds.setdefault(c, set()).update(a.lower() for a in map(chr, range(128)) if re.fullmatch("(?i)" + re.escape(a), c))
    s = pl.Series(chars)
    rust = s.filter(s.str.contains(r"(?i)^[\x00-\x7f]$")).to_list()
    assert set(rust) <= set(folds)
    assert {letter: "".join(sorted(c for c in folds if letter in folds[c])) for letter in "iks"} == \
        {k: "".join(sorted(v)) for k, v in triage.CASE_FOLDS.items()}
    got = triage.LiteralSet.of([("Kernel panic", True), ("Xid", False)])
    assert got == triage.LiteralSet(("Xid", "\u0130", "\u0131", "\u212a"), ("Kernel panic",))  # k and i
    msgs = pl.Series(["\u212aernel panic - not syncing", "kernel PANIC", "no"])
    assert pl.select(got.contains(pl.lit(msgs))).to_series().to_list() == [True, True, False]
    assert msgs.str.contains(r"(?i)kernel panic").to_list() == [True, True, False]


def _missing_literal_hint(sig) -> str:  # noqa: ANN001 - a Signature
    return (f"{sig.origin}: signature {sig.id!r}: forensics.triage finds no literal of {triage.MIN_LITERAL}+ "
            f"characters that every line its pattern {sig.pattern!r} matches contains. Add to its entry "
            "`literals = [\"<text>\", ...]` (texts one of which every line it matches holds; each example "
            "must hold one, checked at load), or rewrite the pattern around a fixed text.")


def test_every_signature_has_a_literal_set() -> None:
    """The prefilter in signatures.match is sound only for signatures with a literal set: every one
    has one, but the kind-only ones (`.` with a kind or code: the event's kind selects them)."""
    cat = load_catalog()
    missing = [_missing_literal_hint(s) for s in cat.signatures if not s.kind_only and s.literal_set() is None]
    assert not missing, "\n".join(missing)
    assert sum(s.literal_set() is not None for s in cat.signatures) == sum(not s.kind_only for s in cat.signatures)


def test_coverage_is_what_docs_architecture_points_to() -> None:
    """`python -m forensics.signatures` prints these counts (docs/architecture.md cites the command)."""
    cov = literal_coverage(load_catalog(), registry())
    assert cov["with_literal_set"] + cov["kind_only"] == cov["signatures"] > 300
    assert cov["without"] == [] and cov["triggers_without"] == []
    assert cov["trigger_parsers"] >= 6 and cov["trigger_patterns"] > 50
    assert cov["literals"]["exact"] + cov["literals"]["caseless"] > 300


def test_signature_examples_hold_a_literal_of_their_set() -> None:
    """Each example a signature matches (in Python's re or polars') is kept by its literal set,
    screened by the engine signatures.match uses (polars `str.contains_any`)."""
    cat = load_catalog()
    checked, bad = 0, []
    for sig in cat.signatures:
        lits = sig.literal_set()
        if lits is None or not sig.examples:
            continue
        ex = pl.Series(list(sig.examples))
        matched = [bool(a or b) for a, b in zip([re.search(sig.pattern, e) for e in ex], ex.str.contains(sig.pattern),
                                                 strict=True)]
        kept = pl.select(lits.contains(pl.lit(ex))).to_series().to_list()
        for e, m, k in zip(ex, matched, kept, strict=True):
            if m and not k:
                bad.append(f"{sig.origin}: {sig.id}: example {e!r} holds none of {lits}: declare `literals` "
                           "for it and report the pattern to forensics.triage.literal_factor's owner")
            checked += m
    assert not bad, "\n".join(bad)
    assert checked > 200


def _screened_patterns() -> list[str]:
    pats = [s.pattern for s in load_catalog().signatures if not s.kind_only and not s.literals]
    return sorted({*pats, *(p for v in triage.trigger_patterns(registry()).values() for p in v)})


_FOLD_IN = str.maketrans({"k": "\u212a", "K": "\u212a", "s": "\u017f", "S": "\u017f"})


@pytest.mark.parametrize("pattern", _screened_patterns())
@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(data=st.data())
def test_generated_matches_hold_a_literal(pattern: str, data: st.DataObject) -> None:
    """Property: strings generated from the pattern (hypothesis' from_regex, in random case under
    (?i), and again with k and s spelled as their non-ASCII case partners) that either engine
    matches hold a literal of the pattern's set, screened with polars as signatures.match does."""
    lits = triage.LiteralSet.of(triage.literal_factor(pattern))
    text = data.draw(st.from_regex(pattern))
    for s in (text, text.translate(_FOLD_IN)):
        if re.search(pattern, s) or pl.select(pl.lit(s).str.contains(pattern)).item():
            assert pl.select(lits.contains(pl.lit(s))).item(), (pattern, s, lits)


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


@pytest.mark.skipif(not triage.hyperscan_available(), reason="hyperscan not installed")
def test_rows_each_gives_each_regex_its_lines_in_either_engine() -> None:
    """`Matcher.rows_each` (bulk.screen: the interesting lines and the stamp hints in one pass):
    per regex, the lines `str.contains` finds, with hyperscan on ASCII input and polars otherwise,
    and on every fixture file."""
    rx = (INFO_INTERESTING, STAMP_HINT)
    data = (b"host1:12:34 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
            b"[2026-11-02 10:00:01] host1:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P\n"
            b"host1:12:34 [0] NCCL INFO misc/socket.cc:540 -> 2 at 10:00:02\n"
            b"| 1730541600000 | web export\n\n")
    got = {e: [r.tolist() for r in triage.matcher(triage.LiteralSet((), ()), rx, engine=e).rows_each(data)]
           for e in triage.ENGINES}
    assert got["hyperscan"] == got["polars"] == [[0, 2], [1, 2, 3]]
    n = 0
    for f in FILES:
        blob = f.read_bytes()
        if not blob or not is_plain(blob):
            continue
        lines = plain_lines(blob)
        want = [np.flatnonzero(lines.str.contains(r).fill_null(False).to_numpy()).tolist() for r in rx]
        for e in triage.ENGINES:
            assert [r.tolist() for r in triage.matcher(triage.LiteralSet((), ()), rx, engine=e).rows_each(blob)] \
                == want, (f, e)
        n += sum(map(len, want))
    assert n > 100


@pytest.mark.skipif(not triage.hyperscan_available(), reason="hyperscan not installed")
def test_once_patterns_report_their_first_match_beside_the_regexes() -> None:
    """A Matcher's `once` patterns (bulk.screen's unclean-byte classes) are reported once a scan,
    with ids after the regexes', and leave the regexes' matches as they were; the polars engine
    refuses them."""
    from forensics.bulk import _UNCLEAN_BYTES

    lits = triage.LiteralSet((), ())
    m = triage.matcher(lits, (INFO_INTERESTING,), engine="hyperscan", once=_UNCLEAN_BYTES)
    plain = triage.matcher(lits, (INFO_INTERESTING,), engine="hyperscan")
    data = b"a Using b\n\x1e\x1f\x00 \r \xc3\xa9 \xff\nUsing again\n"
    got = m.scan(data)
    assert got[0] == plain.scan(data)[0] == [7, 26]
    assert got[1] == [11] and got[2] == [17]  # the first 0x1e, the first byte over 0x7f
    assert m.rows_of(data, got[0]).tolist() == [0, 2]
    assert m.scan(b"clean ascii Using\n") == {0: [17]}
    with pytest.raises(ValueError):
        triage.Matcher(lits, (), engine="polars", once=_UNCLEAN_BYTES)


@pytest.mark.parametrize("engine", ENGINES)
def test_literal_gate_finds_the_literals_a_plain_search_finds(engine: str) -> None:
    """`LiteralGate.found` (ingest's sniff gate): the literals `in` finds (caseless ones ASCII
    case-insensitively), on odd bytes, on a head holding one literal thousands of times, and on
    every fixture file's head."""
    lits = (("DCGM_", False), ("jobid", True), (" '", False), ('"message"', False), ("state ", False))
    gate = triage.literal_gate(lits, engine=engine)

    def want(data: bytes) -> set[int]:
        return {k for k, (t, ci) in enumerate(lits) if (t.lower().encode() in data.lower() if ci else t.encode() in data)}

    cases = [b"", b"JOBID state \xff\x00 DCGM_", b"DCGM" + b"_" * 3, b"JobId" * 20000, b"x ' y", "Jöbid".encode(),
             b"a JoBiD\n" + b"dcgm_ state" + b"\n" * 5]
    for data in cases:
        assert gate.found(data) == want(data), data[:40]
    assert gate.found(b"JobId" * 20000) == {1}
    n = 0
    for f in FILES:
        head = f.read_bytes()[:65536]
        assert gate.found(head) == want(head), f
        n += bool(want(head))
    assert n > 20
    with pytest.raises(ValueError, match="ASCII"):
        triage.LiteralGate((("Grüße", False),), engine=engine)


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

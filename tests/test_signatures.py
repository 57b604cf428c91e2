"""Signature catalog: every example matches (in Python `re` and in polars), every counter-example
does not, and a bad catalog is rejected with every error listed."""

from __future__ import annotations

import polars as pl
import pytest

from forensics.signatures import CATEGORIES, CatalogError, load_catalog, match, parse_catalog
from forensics.taxonomy import taxonomy
from parsers.ascii_regex import ascii_classes
from parsers.records import EVENT_SCHEMA

CATALOG = load_catalog()
CASES = [(s.id, ex, True) for s in CATALOG.signatures for ex in s.examples] + [
    (s.id, ex, False) for s in CATALOG.signatures for ex in s.counter_examples]


def test_catalog_size_and_coverage() -> None:
    assert len(CATALOG.signatures) >= 120
    ids = {s.id for s in CATALOG.signatures}
    assert {"xid-79", "xid-48", "xid-74", "xid-119", "xid-173"} <= ids
    # every Xid of the reference table has a signature
    from forensics.signatures import xid_table
    assert {f"xid-{x}" for x in xid_table()["xid"].to_list()} <= ids
    assert set(CATEGORIES) == set(taxonomy())


@pytest.mark.parametrize(("sid", "text", "should"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_signature_examples(sid: str, text: str, should: bool) -> None:
    sig = CATALOG.by_id(sid)
    assert sig.matches_text(text) is should
    # the same decision through the polars (Rust regex) matcher used on real events
    ev = pl.DataFrame([{"line_no": 1, "source": sig.source, "kind": sig.kind[0] if sig.kind else "x",
                        "code": sig.code[0] if sig.code else None, "message": text}]).with_columns(
        pl.lit(0, dtype=pl.Int64).alias("event_id"))
    for k, v in EVENT_SCHEMA.items():
        if k not in ev.columns:
            ev = ev.with_columns(pl.lit(None, dtype=v).alias(k))
    single = type(CATALOG)([sig])
    assert (match(single, ev).height == 1) is should


def test_bad_catalog_lists_every_error() -> None:
    doc = {"signature": [
        {"id": "a", "source": "nccl", "pattern": "(?<=x)y", "category": "network_fabric", "role": "root",
         "severity": "error", "summary": "lookbehind is not valid in polars"},
        {"id": "b", "source": "nowhere", "pattern": "(", "category": "nope", "role": "boss",
         "severity": "loud", "summary": "everything wrong"},
        {"id": "c", "source": "nccl"},
    ]}
    with pytest.raises(CatalogError) as exc:
        parse_catalog({"bad.toml": doc})
    errs = exc.value.errors
    assert any("bad.toml: a: pattern not valid in the Rust regex engine" in e for e in errs)
    assert any("b: unknown source 'nowhere'" in e for e in errs)
    assert any("b: unknown category 'nope'" in e for e in errs)
    assert any("b: unknown role 'boss'" in e for e in errs)
    assert any("b: unknown severity 'loud'" in e for e in errs)
    assert any("b: pattern not a valid Python regex" in e for e in errs)
    assert any("c: missing pattern, category, role, severity, summary" in e for e in errs)


def test_literal_prefixes_of_a_pattern() -> None:
    from forensics.signatures import literal_prefixes

    assert literal_prefixes(r"(?i)status=12\b|error 12\b|RETRY_EXC_ERR") == ["status=12", "error 12", "RETRY_EXC_ERR"]
    assert literal_prefixes(r"Xid \(PCI:|foo\.bar|ab?c|a(b|c)") == ["Xid (PCI:", "foo.bar"]
    assert literal_prefixes(r"fallen off the bus|fallen off the bus") == ["fallen off the bus"]
    assert literal_prefixes(r"\d+ errors|ECC") == ["ECC"]


def test_catalog_literals_cover_the_catalog() -> None:
    from forensics.signatures import catalog_literals

    lits = catalog_literals(load_catalog())
    assert lits == sorted(set(lits))
    assert {"SXid", "fallen off the bus", "NODE FAIL", "out of memory"} <= set(lits)
    assert all(len(x.strip()) >= 3 for x in lits)


def _match_every_event(catalog, events: pl.DataFrame) -> list[tuple[int, str]]:  # noqa: ANN001 - a Catalog
    """The hits without any prefilter: every pattern over every event of its source."""
    from forensics.signatures import ANY

    out = []
    for sig in catalog.signatures:
        ev = events if sig.source == ANY else events.filter(pl.col("source") == sig.source)
        cond = pl.col("message").str.contains(ascii_classes(sig.pattern))  # the dialect polars is given
        if sig.kind:
            cond = cond & pl.col("kind").is_in(list(sig.kind))
        if sig.code:
            cond = cond & pl.col("code").is_in(list(sig.code))
        if sig.unless:
            cond = cond & ~pl.col("message").str.contains(ascii_classes(sig.unless))
        out += [(i, sig.id) for i in ev.filter(cond.fill_null(False))["event_id"].to_list()]
    return sorted(out)


def test_prefiltered_match_equals_every_pattern_over_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """signatures.match screens messages on the literal sets first; its hits are exactly those of
    every pattern run over every event of its source, on each catalog example and counter-example
    under its own source, kind and code and under others', in other cases (swapped, upper, the
    non-ASCII case partners of k and s), and on null messages."""
    sources = sorted({s.source for s in CATALOG.signatures})
    rows = []
    for i, s in enumerate(CATALOG.signatures):
        other = CATALOG.signatures[(i * 7 + 3) % len(CATALOG.signatures)]
        for text in (*s.examples, *s.counter_examples):
            for variant in (text, text.swapcase(), text.upper(), text.translate(str.maketrans("kKsS", "\u212a\u212a\u017f\u017f"))):
                for src, sig in ((s.source, s), (sources[i % len(sources)], other)):
                    rows.append({"source": src, "kind": sig.kind[0] if sig.kind else "error_line",
                                 "code": sig.code[0] if sig.code else None, "message": variant})
    rows += [{"source": "generic", "kind": "error_line", "code": None, "message": None}] * 3
    ev = pl.DataFrame(rows, schema={"source": pl.Utf8, "kind": pl.Utf8, "code": pl.Utf8, "message": pl.Utf8}) \
        .with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64))
    want = _match_every_event(CATALOG, ev)
    for prefilter in (True, False):
        got = match(CATALOG, ev, prefilter=prefilter)
        assert sorted(got.select("event_id", "signature").iter_rows()) == want, prefilter
    assert len(want) > 1000 and len({sid for _, sid in want}) > 300
    # by default (past the size threshold) the screen is used where a sample shows it pays
    import forensics.signatures as sigmod

    min_events = sigmod.PREFILTER_MIN_EVENTS
    monkeypatch.setattr(sigmod, "PREFILTER_MIN_EVENTS", 100)
    chatter = [f"host{i % 7}:1:2 [0] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(3 * ev.height)]
    noisy = pl.concat([ev, pl.DataFrame({"source": "nccl", "kind": "nccl_info", "code": None, "message": chatter},
                                        schema=dict(ev.drop("event_id").schema))
                       .with_row_index("event_id", offset=ev.height).with_columns(pl.col("event_id").cast(pl.Int64))])
    for frame, expect in ((ev, want), (noisy, _match_every_event(CATALOG, noisy))):
        got = match(CATALOG, frame)
        assert sorted(got.select("event_id", "signature").iter_rows()) == expect
    # a caseless signature hit through the Kelvin sign is kept by the screen
    kelvin = ev.filter(pl.col("message").str.contains("\u212a"))["event_id"].to_list()
    assert {eid for eid, _ in want} & set(kelvin)
    # a small frame (SMALL_SCREEN_EVENTS or fewer) drops in Python the signatures that cannot hit
    # before any regex runs: each slice of the same rows gets exactly the oracle's hits, and fewer
    # signatures are run than the catalog holds
    monkeypatch.setattr(sigmod, "PREFILTER_MIN_EVENTS", min_events)
    ran: list[int] = []
    by_source = sigmod._match_by_source

    def spy(catalog, events):  # noqa: ANN001, ANN202
        ran.append(len(catalog.signatures))
        return by_source(catalog, events)

    monkeypatch.setattr(sigmod, "_match_by_source", spy)
    step = 400
    assert step <= sigmod.SMALL_SCREEN_EVENTS < ev.height
    for lo in range(0, ev.height, step):
        part = ev.slice(lo, step)
        got = match(CATALOG, part)
        assert sorted(got.select("event_id", "signature").iter_rows()) == _match_every_event(CATALOG, part), lo
    assert len(ran) == -(-ev.height // step) and max(ran) < len(CATALOG.signatures) and min(ran) > 0


def test_declared_literals_are_checked_against_the_examples() -> None:
    """A signature whose pattern has no literal forensics.triage can derive may declare `literals`;
    each example the pattern matches must hold one (case-insensitively under (?i)), or the catalog
    is rejected naming the example."""
    base = {"source": "generic", "category": "unknown", "role": "context", "severity": "info", "summary": "s",
            "pattern": r"(?i)^\w+ \d+ (?:GiB|MiB)$"}
    good = {**base, "id": "a", "literals": ["gib", "mib"], "examples": ["free 12 GiB", "used 3 MiB"]}
    cat = parse_catalog({"x.toml": {"signature": [good]}})
    sig = cat.by_id("a")
    assert sig.literals == ("gib", "mib") and sig.literal_set() is not None
    assert sig.literal_set().caseless == ("gib", "mib")
    bad = {**base, "id": "b", "literals": ["GiB"], "examples": ["free 12 GiB", "used 3 MiB"]}
    with pytest.raises(CatalogError) as err:
        parse_catalog({"x.toml": {"signature": [bad]}})
    assert err.value.errors == ["x.toml: b: example 'used 3 MiB' holds none of its literals ['GiB']"]
    with pytest.raises(CatalogError, match="literals must be a list of non-empty strings"):
        parse_catalog({"x.toml": {"signature": [{**base, "id": "c", "literals": "GiB"}]}})

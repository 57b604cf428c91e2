"""Sniffing confusion test: every file under fixtures/<parser>/ (not scenarios), routed the way
discovery routes it, is dominated by that folder's parser (FileResult.parser)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import forensics.ingest as ingest_mod
from forensics import triage
from forensics.config import JobConfig
from forensics.discovery import HEAD_BYTES, Limits, SourceFile, path_hints
from forensics.ingest import parse_one
from parsers import dcgm, registry

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _route(path: Path) -> str | None:
    rel = path.relative_to(FIX).as_posix()
    h, r, a = path_hints(rel)
    sf = SourceFile(rel, path, None, path.stat().st_size, h, r, a)
    return parse_one(sf, JobConfig(), 2025, {}, registry(), Limits()).parser


def _matrix(pairs: list[tuple[str, str | None]]) -> str:
    cols = sorted({str(g) for _, g in pairs})
    rows = sorted({t for t, _ in pairs})
    c = Counter((t, str(g)) for t, g in pairs)
    w = max(len(x) for x in cols + rows + ["expected\\got"]) + 1
    out = ["expected\\got".ljust(w) + "".join(x.rjust(w) for x in cols)]
    out += [r.ljust(w) + "".join(str(c[(r, x)] or ".").rjust(w) for x in cols) for r in rows]
    return "\n".join(out)


def test_every_parser_has_fixtures() -> None:
    names = {p.name for p in registry()}
    folders = {d.name for d in FIX.iterdir() if d.is_dir() and d.name != "scenarios"}
    assert names <= folders, names - folders


def test_sniffing_confusion_over_all_fixtures() -> None:
    names = {p.name for p in registry()}
    pairs: list[tuple[str, str | None]] = []
    wrong: list[str] = []
    for d in sorted(FIX.iterdir()):
        if not d.is_dir() or d.name not in names:
            continue
        for f in sorted(d.iterdir()):
            if not f.is_file() or f.name == "README.md":
                continue
            got = _route(f)
            pairs.append((d.name, got))
            if got != d.name:
                wrong.append(f"{d.name}/{f.name} -> {got}")
    assert len(pairs) > 100
    assert not wrong, "\n" + "\n".join(wrong) + "\n\n" + _matrix(pairs)
    print(_matrix(pairs))


def test_line_parsers_never_sniff_above_the_declared_maximum() -> None:
    """ingest._choose hands a file to a structured format that sniffs LINE_SNIFF_MAX without asking
    the line parsers: none of them may ever say more, on any fixture head."""
    from forensics.ingest import LINE_SNIFF_MAX, sniff_text

    line_parsers = [p for p in registry() if not p.exclusive]
    best = 0.0
    for f in sorted(FIX.rglob("*")):
        if not f.is_file() or f.suffix == ".toml":
            continue
        head = sniff_text(f.read_bytes()[:65536].decode("utf-8", "replace"))
        for p in line_parsers:
            s = float(p.module.sniff(head))
            assert s <= LINE_SNIFF_MAX, (p.name, f)
            best = max(best, s)
    assert best == LINE_SNIFF_MAX  # the bound is reached, so it is the real maximum


HEADS = [f for f in sorted(FIX.rglob("*")) if f.is_file() and f.suffix not in (".toml", ".md")]


def _heads() -> list[bytes]:
    heads = [f.read_bytes()[:HEAD_BYTES] for f in HEADS]
    # the same formats behind wrappers, after blank runs, with a BOM and with invalid UTF-8
    heads += [b"\n \n\n" + h for h in heads[::7]] + [b"\xef\xbb\xbf" + h for h in heads[3::11]]
    heads += [h[:100] + b"\xff\xfe" + h[100:] for h in heads[5::13]]
    return heads


def test_sniff_gate_keeps_every_choice() -> None:
    """ingest skips a structured format's sniff on a head without its SNIFF_NEEDS literals (one
    `triage.LiteralGate` pass over the head): `_head_choice` is the same with and without the gate,
    on every fixture head and variants of them."""
    parsers, cfg = registry(), JobConfig()
    heads = _heads()
    assert len(heads) > 250
    got = {}
    for gate in (True, False):
        got[gate] = [[p.name for p in ingest_mod._head_choice(h, cfg, parsers, gate)] for h in heads]
    assert got[True] == got[False]
    structured = {p.name for p in parsers if p.exclusive}
    assert sum(1 for c in got[True] if len(c) == 1 and c[0] in structured) > 30


def test_an_unusable_triage_engine_leaves_every_sniff_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """$FORENSICS_TRIAGE_ENGINE naming no usable engine: the gate steps aside (every sniff runs, the
    choice is the one without the gate) instead of raising out of ingest's pass over the heads."""
    parsers, cfg = registry(), JobConfig()
    heads = _heads()[:80]
    plain = [[p.name for p in ingest_mod._head_choice(h, cfg, parsers, gate=False)] for h in heads]
    monkeypatch.setenv(triage.ENGINE_ENV, "no-such-engine")
    with pytest.raises(ValueError):
        triage.engine_name()
    assert ingest_mod._may_sniff(heads[0], parsers) == (None, True)
    assert [[p.name for p in ingest_mod._head_choice(h, cfg, parsers)] for h in heads] == plain


def _break(text: str, lits: tuple[tuple[str, bool], ...]) -> str:
    """`text` with every occurrence of `lits` broken by a NUL after its first character (until
    none is left: breaking one cannot make another, none holds a NUL)."""
    while True:
        new = text
        for lit, ci in lits:
            new = re.sub(re.escape(lit), lambda m: m.group(0)[0] + "\x00" + m.group(0)[1:], new,
                         flags=re.IGNORECASE | re.ASCII if ci else 0)
        if new == text:
            return text
        text = new


def test_sniff_needs_are_needed() -> None:
    """A structured parser's SNIFF_NEEDS holds a literal of every head its sniff scores: the
    fixture heads it scores above 0, with those literals broken, score 0."""
    from forensics.ingest import sniff_text

    checked = Counter()
    for p in registry():
        needs = getattr(p.module, "SNIFF_NEEDS", None)
        if not p.exclusive or needs is None:
            continue
        assert needs and all(t.isascii() and "\n" not in t and t.strip() for t, _ in needs), p.name
        for h in _heads():
            text = sniff_text(h.decode("utf-8", "replace"))
            if p.module.sniff(text) > 0:
                assert p.module.sniff(_break(text, needs)) == 0.0, p.name
                checked[p.name] += 1
    assert set(checked) == {"dcgm", "sacct", "ibstat"} and min(checked.values()) >= 3, checked


def test_dcgm_sniff_searches_need_their_words() -> None:
    """dcgm's sniff looks for a word before each `(?m)` search: every match of the search holds one."""
    for rx, words in ((dcgm.DIAG_SECTION_RE, dcgm.DIAG_SECTION_WORDS), (dcgm.DIAG_ROW_RE, dcgm.DIAG_ROW_WORDS),
                      (dcgm.DIAG_HDR_RE, ("Diagnostic",))):
        got = triage.literal_factor(rx)
        assert got is not None and {t for t, _ in got} <= set(words) and not any(ci for _, ci in got), rx

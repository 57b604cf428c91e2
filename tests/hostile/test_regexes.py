"""Regexes: every signature and every parser pattern stays fast on long adversarial lines.

Signatures and parser patterns run in polars (Rust `regex`: finite automata, no backtracking, linear
time); these tests bound them anyway, so a pattern moved to Python `re` or a pathological input
shows up. Python `re` on untrusted text is confined to parser sniffs on the 64 KiB head (checked
here on adversarial heads) and to the few lines of multi-line records (docs/hostile.md lists them).
"""

from __future__ import annotations

import re
import time

import polars as pl
import pytest

from forensics.ingest import sniff_text
from forensics.signatures import load_catalog
from parsers import registry
from parsers.lines import decode_lines, with_body
from parsers.records import ParseContext

N = 1 << 20  # 1 MiB lines
CATALOG = load_catalog().signatures
PARSERS = registry()
_META = set(".^$*+?{}[]|()\\")


def _literal_prefix(pattern: str) -> str:
    p = re.sub(r"^\(\?[a-zA-Z]+\)", "", pattern)
    out = []
    for ch in p:
        if ch in _META:
            break
        out.append(ch)
    return "".join(out) or "a"


def _adversarial(pattern: str) -> list[str]:
    pre = _literal_prefix(pattern)
    return ["a" * N, "(" * N, " " * N, "\t " * (N // 2), "0" * N, "a:" * (N // 2),
            (pre * (N // len(pre) + 1))[:N],  # repeated partial matches of the pattern's literal start
            (pre + " ") * (N // (len(pre) + 1))]


def _bounded(pattern: str, texts: list[str]) -> None:
    """Catastrophic backtracking takes minutes to hours on 8 MiB; a linear engine takes seconds.
    The bounds (contains < 10 s, extract with capture groups < 30 s) are loose on purpose: the
    suite runs in parallel on a shared 2-core machine, and they must only catch blow-ups."""
    s = pl.Series("t", texts)
    t0 = time.monotonic()
    s.str.contains(pattern).sum()
    t1 = time.monotonic()
    s.str.extract(f"({pattern})", 1).null_count()
    t2 = time.monotonic()
    assert t1 - t0 < 10.0 and t2 - t1 < 30.0, (pattern, t1 - t0, t2 - t1)


@pytest.mark.parametrize("sig", CATALOG, ids=[s.id for s in CATALOG])
def test_signature_linear_on_adversarial_lines(sig) -> None:  # noqa: ANN001
    _bounded(sig.pattern, _adversarial(sig.pattern))
    if sig.unless:
        _bounded(sig.unless, _adversarial(sig.unless))


def _parser_patterns() -> list[tuple[str, str]]:
    """Module-level regex strings of every parser (UPPER_CASE names), as the parsers hand them to polars."""
    out = []
    for p in PARSERS:
        for name, val in vars(p.module).items():
            if not name.isupper() or not isinstance(val, str) or len(val) < 3:
                continue
            try:
                pl.select(pl.lit("x").str.contains(val))
            except Exception:  # noqa: BLE001 - a plain constant, not a pattern
                continue
            out.append((f"{p.name}.{name}", val))
    return out


PARSER_PATTERNS = _parser_patterns()


def test_parser_patterns_found() -> None:
    assert len(PARSER_PATTERNS) > 20


@pytest.mark.parametrize(("name", "pattern"), PARSER_PATTERNS, ids=[n for n, _ in PARSER_PATTERNS])
def test_parser_pattern_linear_on_adversarial_lines(name: str, pattern: str) -> None:
    _bounded(pattern, _adversarial(pattern))


HEADS = {"newlines": "\n" * 65536, "spaces": " " * 65536, "space-lines": " \n" * 32768, "a": "a" * 65536,
         "a-slash": "a/" * 32768, "host-like": "a:1:2 " * 10000, "colons": ":" * 65536, "digits": "1" * 65536,
         "brackets": "[" * 65536, "parens": "(" * 65536, "rules": "=" * 65536, "pipes": "| " * 32768,
         "ws-mix": " \t\n" * 20000, "nccl": "NCCL " * 13000, "nccl-a": "NCCL INFO " + "a" * 65000,
         "steps": "steps: 1 loss: " * 4000, "iteration": "iteration " * 6500, "json": "{" + '"a":1,' * 10000,
         "dcgm": "DCGM_FI_X " * 6500, "dcgm-lines": "DCGM_FI_X\n" * 6500, "rank": "[rank1]:" * 8000,
         "titan": "[titan] " + "a " * 32000, "epoch": "Epoch 1:" + " " * 65000}


@pytest.mark.parametrize("parser", [p.name for p in PARSERS])
def test_sniff_bounded_on_adversarial_heads(parser: str) -> None:
    """sniff() runs (some in Python `re`) on every file's 64 KiB head (blank-line runs collapsed by
    ingest.sniff_text): it must stay fast."""
    p = next(x for x in PARSERS if x.name == parser)
    for name, head in HEADS.items():
        t0 = time.monotonic()
        s = p.module.sniff(sniff_text(head))  # as ingest calls it
        assert time.monotonic() - t0 < 10.0, (parser, name)
        assert 0.0 <= float(s) <= 1.0


@pytest.mark.parametrize("parser", [p.name for p in PARSERS])
def test_parse_bounded_on_adversarial_lines(parser: str) -> None:
    """The whole parse() of a few 1 MiB adversarial lines (what ingest hands a parser after cutting)."""
    p = next(x for x in PARSERS if x.name == parser)
    prefixes = ["", "[rank0]:", "node-1:12:34 [0] NCCL INFO ", "NVRM: Xid (PCI:0000:3b:00): ", "steps: 1 loss: ",
                "[2024-01-01 00:00:00,000] ", "  File \"", "Traceback (most recent call last):", "| ", "DCGM_FI_"]
    text = "\n".join(pre + ch * (N // 4) for pre in prefixes for ch in ("a", " ", "(")) + "\n"
    lines = with_body(decode_lines(text.encode()).lines)
    t0 = time.monotonic()
    ext = p.module.parse(lines, ParseContext(path="x.log", ref_year=2024))
    assert time.monotonic() - t0 < 60.0, parser
    assert set(ext.claimed.to_list()) <= set(lines["line_no"].to_list())

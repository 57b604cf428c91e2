"""Sniffing confusion test: every file under fixtures/<parser>/ (not scenarios), routed the way
discovery routes it, is dominated by that folder's parser (FileResult.parser)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from forensics.config import JobConfig
from forensics.discovery import Limits, SourceFile, path_hints
from forensics.ingest import parse_one
from parsers import registry

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

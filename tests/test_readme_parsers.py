"""README's parser table (between `<!-- parsers:start -->` and `<!-- parsers:end -->`) matches the
parser registry: every registered parser is listed, nothing else is, and the formats and extracts
columns are the modules' FORMATS and EXTRACTS."""

from __future__ import annotations

import re
from pathlib import Path

from parsers import registry

README = Path(__file__).resolve().parents[1] / "README.md"


def _table() -> dict[str, tuple[list[str], list[str]]]:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- parsers:start -->(.*?)<!-- parsers:end -->", text, re.S)
    assert m, "README has no parsers:start / parsers:end markers"
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        assert name not in rows, f"{name} listed twice"
        rows[name] = ([f.strip() for f in cells[1].split(";")],
                      [e.strip().strip("`") for e in cells[2].split(",")])
    return rows


def test_readme_lists_exactly_the_registered_parsers() -> None:
    table = _table()
    names = [p.name for p in registry()]
    assert sorted(table) == sorted(names)


def test_readme_formats_and_extracts_match_the_modules() -> None:
    table = _table()
    for p in registry():
        formats, extracts = table[p.name]
        assert formats == list(p.formats), p.name
        assert extracts == list(p.extracts), p.name

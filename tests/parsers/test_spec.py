"""The parser contract (parsers/spec.py): every registered parser ends with a valid `SPEC`, names
are unique, every role has exactly one holder, what a parser emits on its own fixtures is what it
declares, every list of source names elsewhere is derived from the registry, no parser name is
spelled out in forensics/, and each piece of "Adding a source" (docs/architecture.md) is there:
module, registry line, catalog signatures, fixtures, tests, README row."""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import polars as pl
import pytest

import parsers
from forensics import analysis, signatures, timeline
from parsers import PARSER_MODULES, legacy_spec, registry, source_names, source_with
from parsers.lines import decode_lines, with_body
from parsers.records import TABLE_SCHEMAS, ParseContext
from parsers.spec import ROLES, SCOPES, ParserSpec

ROOT = Path(__file__).resolve().parents[2]
PARSERS = registry()
IDS = [p.name for p in PARSERS]


def test_names_are_unique_and_are_the_module_names() -> None:
    assert len(set(PARSER_MODULES)) == len(PARSER_MODULES)
    assert [p.name for p in PARSERS] == list(PARSER_MODULES)
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("p", PARSERS, ids=IDS)
def test_every_parser_ends_with_a_valid_spec(p: parsers.ParserInfo) -> None:
    path = ROOT / "parsers" / f"{p.name}.py"
    assert isinstance(getattr(p.module, "SPEC", None), ParserSpec), \
        f"{path.name}: declare SPEC = ParserSpec(...) at the end of the module (docs/architecture.md 'Adding a source')"
    assert p.spec is p.module.SPEC
    last = ast.parse(path.read_text(encoding="utf-8")).body[-1]
    assert isinstance(last, ast.Assign) and [t.id for t in last.targets if isinstance(t, ast.Name)] == ["SPEC"], \
        f"{path.name}: SPEC must be the module's last statement"
    assert p.spec.problems(set(TABLE_SCHEMAS)) == []
    assert callable(getattr(p.module, "sniff", None)) and callable(getattr(p.module, "parse", None))
    has_bytes = callable(getattr(p.module, "parse_bytes_many", None)) and isinstance(
        getattr(p.module, "BYTES_STRIDE", None), int)
    assert p.spec.reads_bytes == has_bytes, "reads_bytes must say whether parse_bytes_many / BYTES_STRIDE exist"
    for old in ("NAME", "EXCLUSIVE", "DESCRIPTION", "FORMATS", "EXTRACTS", "BATCH", "TRIGGER"):
        assert not hasattr(p.module, old), f"{path.name}: {old} is now a field of SPEC"


@pytest.mark.parametrize("p", [p for p in PARSERS if p.spec.trigger is not None], ids=lambda p: p.name)
def test_triggers_are_valid_in_python_and_in_polars(p: parsers.ParserInfo) -> None:
    trig = p.spec.trigger
    body = pl.Series("body", ["", "plain text with nothing in it"])
    if isinstance(trig, str):
        re.compile(trig)
        pl.DataFrame([body]).select(pl.col("body").str.contains(trig))
    else:
        assert trig and all(isinstance(t, str) and t for t in trig)
        pl.DataFrame([body]).select(pl.col("body").str.contains_any(list(trig)))


def test_every_role_has_exactly_one_holder() -> None:
    for role in ROLES:
        holders = [p.name for p in PARSERS if role in p.spec.roles]
        assert len(holders) == 1, (role, holders)
        assert source_with(role) == holders[0]
    with pytest.raises(KeyError):
        source_with("no-such-role")


def test_the_derived_lists_equal_the_registry() -> None:
    assert signatures.SOURCES == tuple(IDS)
    assert timeline.PROCESS_SOURCES == tuple(p.name for p in PARSERS if p.spec.scope == "process")
    assert analysis.NODE_PARSERS == tuple(p.name for p in PARSERS if p.spec.scope != "process")
    assert set(timeline.PROCESS_SOURCES) | set(analysis.NODE_PARSERS) == set(IDS)
    assert {s: source_names(s) for s in SCOPES} == {
        s: tuple(p.name for p in PARSERS if p.spec.scope == s) for s in SCOPES}
    assert parsers.evidence_wanted() == {p.name: p.spec.evidence for p in PARSERS if p.spec.evidence}


def _fixture_files(name: str) -> list[Path]:
    return [f for f in sorted((ROOT / "fixtures" / name).rglob("*"))
            if f.is_file() and f.suffix not in (".md", ".toml") and f.stat().st_size <= 4_000_000]


@pytest.mark.parametrize("p", PARSERS, ids=IDS)
def test_what_a_parser_emits_on_its_fixtures_is_declared(p: parsers.ParserInfo) -> None:
    files = _fixture_files(p.name)
    seen_kinds: set[str] = set()
    for f in files:
        lines = with_body(decode_lines(f.read_bytes()).lines)
        ext = p.module.parse(lines, ParseContext(path=f.name))
        kinds = set(ext.events["kind"].to_list())
        assert kinds <= set(p.spec.kinds), (f.name, sorted(kinds - set(p.spec.kinds)))
        assert set(ext.events["source"].to_list()) <= {p.name}, f.name
        assert set(ext.tables) <= set(p.spec.tables), (f.name, sorted(set(ext.tables) - set(p.spec.tables)))
        seen_kinds |= kinds
    assert seen_kinds, f"no fixture of fixtures/{p.name}/ gives {p.name} an event"


@pytest.mark.parametrize("p", PARSERS, ids=IDS)
def test_every_piece_of_a_source_is_there(p: parsers.ParserInfo) -> None:
    """The six places of docs/architecture.md "Adding a source" (the module and its registry line
    are the two tests above; README's row: tests/test_readme_parsers.py)."""
    folder = ROOT / "fixtures" / p.name
    assert (folder / "README.md").is_file(), f"fixtures/{p.name}/README.md (what each sample shows, its source)"
    assert _fixture_files(p.name), f"fixtures/{p.name}/ holds no sample"
    assert (ROOT / "tests" / "parsers" / f"test_{p.name}.py").is_file(), f"tests/parsers/test_{p.name}.py"
    sources = {s.source for s in signatures.load_catalog().signatures}
    assert p.name in sources, f"no signature in forensics/signatures/*.toml has source = {p.name!r}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"| `{p.name}` |" in readme, f"README.md's parser table has no row for {p.name}"


def test_every_parser_module_is_registered() -> None:
    """A module with `sniff` and `parse` but no registry line would never see a file."""
    found = set()
    for f in sorted((ROOT / "parsers").glob("*.py")):
        names = {n.name for n in ast.parse(f.read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)}
        if {"sniff", "parse"} <= names:
            found.add(f.stem)
    assert found == set(PARSER_MODULES), f"parser modules not in parsers.PARSER_MODULES: {sorted(found - set(PARSER_MODULES))}"


# Strings in forensics/ that are spelled like a parser name and mean something else (the simulator,
# forensics/simulate*, writes each source's lines and is not checked).
NOT_PARSER_NAMES = {
    ("forensics/fleet.py", "slurm"),  # a folder name that marks a job directory (slurm/)
    ("forensics/outputs.py", "steps"),  # the plots' frame of train_steps rows
    ("forensics/plots.py", "steps"),  # the same frame, read back
    ("forensics/training.py", "dcgm"),  # a simulator scenario knob ([job] dcgm = true|false)
}


def test_no_parser_name_literal_in_forensics() -> None:
    names = set(IDS)
    found = set()
    for f in sorted((ROOT / "forensics").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith("forensics/simulate"):
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.add((rel, node.value, node.lineno))
    bad = sorted(x for x in found if (x[0], x[1]) not in NOT_PARSER_NAMES)
    assert not bad, ("use the registry (parsers.source_names / source_with, a scope or a role) instead of "
                     f"a parser's name: {[f'{r}:{n} {v!r}' for r, v, n in bad]}")


def test_a_module_in_the_old_constant_style_still_runs_but_fails_the_contract() -> None:
    old = types.ModuleType("parsers.oldstyle")
    old.NAME, old.EXCLUSIVE, old.DESCRIPTION = "oldstyle", False, "an old-style module"
    old.FORMATS, old.EXTRACTS, old.TRIGGER = ("x",), ("thing", "exits"), ["literal"]
    spec = legacy_spec(old)
    assert (spec.name, spec.kinds, spec.tables, spec.trigger) == ("oldstyle", ("thing",), ("exits",), ("literal",))
    assert spec.scope is None and "oldstyle" not in source_names("process")
    assert any("scope" in x for x in spec.problems(set(TABLE_SCHEMAS)))


def test_spec_problems_catch_each_rule() -> None:
    ok = ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("k",), batch=True)
    assert ok.problems(set(TABLE_SCHEMAS)) == []
    bad = {
        "scope": ParserSpec(name="x", scope="rack", description="d", formats=("f",), kinds=("k",), batch=True),  # type: ignore[arg-type]
        "table": ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("k",),
                            tables=("nope",), batch=True),
        "kind": ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("exits",), batch=True),
        "exclusive": ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("k",),
                                exclusive=True, trigger="a"),
        "batch=True or a trigger": ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("k",)),
        "reads_bytes": ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("k",), batch=True,
                                  reads_bytes=True),
        "role": ParserSpec(name="x", scope="node", description="d", formats=("f",), kinds=("k",), batch=True,
                           roles=("oracle",)),
    }
    for word, spec in bad.items():
        assert any(word in x for x in spec.problems(set(TABLE_SCHEMAS))), word

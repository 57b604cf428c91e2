"""parsers/ascii_regex.py: the Perl classes of a pattern in their ASCII forms, and the same matches on
ASCII text for every pattern of the catalog and of the parsers' tables."""
from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from forensics.signatures import load_catalog
from parsers import elastic, kernel, nccl, prefixes, pytorch, slurm, steps
from parsers.ascii_regex import ascii_classes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(("pattern", "want"), [
    (r"\d+", r"[0-9]+"),
    (r"\D\W", r"[^0-9][^0-9A-Za-z_]"),
    (r"\w+@\S+", r"[0-9A-Za-z_]+@\S+"),  # \s and \S stay Unicode
    (r"\bXid\b", r"(?-u:\b)Xid(?-u:\b)"),
    (r"\Bfoo", r"(?-u:\B)foo"),
    (r"[\d.]+", r"[0-9.]+"),  # inside a class: the range
    (r"[^\w-]", r"[^0-9A-Za-z_-]"),
    (r"[\D]", r"[\D]"),  # a negated Perl class inside a class stays as written
    (r"[]\d]", r"[]0-9]"),  # `]` first in a class is a member
    (r"[^]\d]\d", r"[^]0-9][0-9]"),
    (r"[[:alpha:]\d]\w", r"[[:alpha:]0-9][0-9A-Za-z_]"),  # nested / POSIX classes
    (r"\\d \\w", r"\\d \\w"),  # an escaped backslash, then a letter
    (r"\[\d\]", r"\[[0-9]\]"),  # escaped brackets are no class
    (r"(?i)cuda\s+error \d{1,3}", r"(?i)cuda\s+error [0-9]{1,3}"),
    (r"\x{41}\p{L}\.", r"\x{41}\p{L}\."),
    ("trailing\\", "trailing\\"),
])
def test_ascii_classes_rewrites_perl_classes(pattern: str, want: str) -> None:
    assert ascii_classes(pattern) == want


def test_non_ascii_letters_are_not_word_characters() -> None:
    s = pl.Series(["训练失败RuntimeError: boom", "node\u017f1 down", "rank ٣ failed", "Xid\u00a079"])
    got = {
        r"\bRuntimeError\b": [True, False, False, False],  # a boundary after 败 (not a word character)
        r"^node\w+ down": [False, False, False, False],  # ſ is not \w
        r"rank \d failed": [False, False, False, False],  # an Arabic-Indic digit is not \d
        r"Xid\s79": [False, False, False, True],  # \s stays Unicode: a no-break space is a space
    }
    for pattern, want in got.items():
        assert s.str.contains(ascii_classes(pattern)).to_list() == want, pattern
    # the Unicode forms say otherwise for the first three: the rewrite is what changes them
    assert s.str.contains(r"\bRuntimeError\b").to_list()[0] is False
    assert s.str.contains(r"^node\w+ down").to_list()[1] is True


def _ascii_lines() -> pl.Series:
    """Every line of the fixtures' ASCII files, and the catalog's examples and counter-examples."""
    lines: list[str] = []
    for f in sorted(FIXTURES.rglob("*")):
        if not f.is_file() or f.stat().st_size > 2_000_000:
            continue
        try:
            lines += f.read_text(encoding="ascii").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
    for s in load_catalog().signatures:
        lines += [t for t in (*s.examples, *s.counter_examples) if t.isascii()]
    return pl.Series("t", lines, dtype=pl.Utf8)


def _table_patterns() -> list[str]:
    cat = load_catalog()
    pats = [p for s in cat.signatures for p in (s.pattern, s.unless) if p]
    pats += [prefixes.PATTERN, *[w.regex for w in prefixes.WRAPPERS]]
    # every module-level `*_RE` string of the parsers that polars reads as a regex
    for mod in (kernel, nccl, pytorch, elastic, slurm, steps):
        pats += [v for k, v in vars(mod).items() if k.endswith("_RE") and isinstance(v, str)]
    return sorted(set(pats))


def test_every_catalog_and_table_pattern_matches_the_same_ascii_lines() -> None:
    """On ASCII text the ASCII forms are the Unicode ones: the catalog's and the parsers' patterns select
    the same lines of the fixtures both ways (the rewrite changes only what non-ASCII text matches)."""
    lines = _ascii_lines()
    assert lines.len() > 9_000
    pats = [p for p in _table_patterns() if re.search(r"\\[dDwWbB]", p)]
    assert len(pats) > 150
    df = lines.to_frame()
    for k in range(0, len(pats), 50):
        chunk = pats[k:k + 50]
        a = df.select([pl.col("t").str.contains(p).alias(str(i)) for i, p in enumerate(chunk)])
        b = df.select([pl.col("t").str.contains(ascii_classes(p)).alias(str(i)) for i, p in enumerate(chunk)])
        for i, p in enumerate(chunk):
            assert a[str(i)].equals(b[str(i)]), p
        assert sum(a.sum().row(0)) > 0


REGEX_METHODS = {"contains", "extract", "extract_groups", "replace", "replace_all", "count_matches", "extract_all",
                 "find"}
ROOT = Path(__file__).resolve().parents[2]


def _unwrapped_calls(src: str) -> list[int]:
    """Lines of `src` where a polars `.str` regex method gets a pattern not passed through `ascii_classes`
    (a string literal without Perl classes or boundaries needs none; `literal=True` is no regex)."""
    import ast

    bad = []
    for node in ast.walk(ast.parse(src)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REGEX_METHODS
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "str" and node.args):
            continue
        if any(k.arg == "literal" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "ascii_classes":
            continue
        texts = ([arg.value] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else
                 [v.value for v in arg.values if isinstance(v, ast.Constant)] if isinstance(arg, ast.JoinedStr)
                 else None)
        if texts is not None and not any(re.search(r"\\[dDwWbB]", t) for t in texts):
            continue
        if isinstance(arg, ast.List | ast.Tuple):  # contains_any-like lists are literals
            continue
        bad.append(node.lineno)
    return bad


def test_every_polars_regex_call_gets_the_ascii_dialect() -> None:
    offenders = {str(f.relative_to(ROOT)): lines for f in sorted([*ROOT.glob("forensics/**/*.py"),
                                                                   *ROOT.glob("parsers/**/*.py")])
                 if (lines := _unwrapped_calls(f.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_dialect_check_finds_an_unwrapped_pattern() -> None:
    src = ('import polars as pl\nX = r"\\d+"\n'
           'a = pl.col("t").str.contains(X)\n'  # a name: unwrapped
           'b = pl.col("t").str.contains(r"\\bfoo")\n'  # a literal with a boundary: unwrapped
           'c = pl.col("t").str.contains(r"[ab]+")\n'  # no Perl class: fine as it is
           'd = pl.col("t").str.contains(ascii_classes(X))\n'
           'e = pl.col("t").str.replace(X, "", literal=True)\n')
    assert _unwrapped_calls(src) == [3, 4]

"""The form in which a pattern is handed to polars: Perl classes as ASCII classes.

Rust's regex crate (polars' engine) reads `\\d`, `\\w` and `\\b` as their Unicode forms: `\\w` is a class
of some 770 ranges, `\\d` of some 70, and a Unicode word boundary cannot be run by the lazy DFA at all
once a line holds one non-ASCII byte (a tqdm bar's `█`, a Chinese path), so the whole search falls back
to a slower engine. Measured on 2,000,000 fixture lines (bench/README.md, sixteenth session): the prefix
table's regex 9.7 s → 0.3 s, the error-line screen 1.2 s → 0.25 s; compiling the 259 patterns a small
bundle needs 0.13 s → 0.07 s. Log lines carry ASCII digits, ASCII identifiers and ASCII host names,
and the catalog's literal engine (hyperscan, no UCP flag) already reads the same classes as ASCII, so
the project's patterns mean the ASCII forms (docs/architecture.md, "Regex dialect"):

- `\\d` → `[0-9]`, `\\D` → `[^0-9]`; `\\w` → `[0-9A-Za-z_]`, `\\W` → `[^0-9A-Za-z_]` (inside a class
  `\\d` and `\\w` become the ranges; `\\D` and `\\W` there stay as written);
- `\\b` → `(?-u:\\b)`, `\\B` → `(?-u:\\B)`: a non-ASCII letter is not a word character, so
  `失败RuntimeError` has a word boundary before `R`;
- `\\s` stays Unicode (a small class: a no-break space pasted into a log is still a space).

Patterns are written in the ordinary syntax (Python's `re` reads them too, for examples and literal
analysis); this rewrite is applied where a pattern becomes a polars expression.
"""

from __future__ import annotations

from functools import lru_cache

_DIGIT, _WORD = "0-9", "0-9A-Za-z_"
_OUTSIDE = {"d": f"[{_DIGIT}]", "D": f"[^{_DIGIT}]", "w": f"[{_WORD}]", "W": f"[^{_WORD}]",
            "b": r"(?-u:\b)", "B": r"(?-u:\B)"}
_INSIDE = {"d": _DIGIT, "w": _WORD}


@lru_cache(maxsize=4096)
def ascii_classes(pattern: str) -> str:
    """`pattern` (Rust regex syntax) with its Perl classes and word boundaries in their ASCII forms.
    Escapes are read in pairs (`\\\\d` is a backslash and a `d`); character classes, nested ones and
    POSIX `[:name:]` included, are tracked so that `\\d` inside `[...]` becomes a range, not a class."""
    out: list[str] = []
    depth = 0  # nesting of `[...]`
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            table = _INSIDE if depth else _OUTSIDE
            out.append(table.get(e, c + e))
            i += 2
            continue
        if c == "[":
            # `[` opens a class, or a nested class / POSIX `[:name:]` inside one
            depth += 1
            out.append(c)
            i += 1
            # a `]` right after the opening `[` or `[^` is a literal member
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("]")
                i += 1
            continue
        if c == "]" and depth:
            depth -= 1
        out.append(c)
        i += 1
    return "".join(out)

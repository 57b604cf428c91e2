"""The prefix layer's table: every example (wrapped line -> body and hints) and counter-example
runs here, one at a time and all together (one frame, as ingest peels a file)."""

from __future__ import annotations

import re

import polars as pl
import pytest

from parsers.lines import decode_lines, with_body
from parsers.prefixes import MAX_PEELS, PATTERN, WRAPPERS, peel

CASES = [(w.name, line, body, hints) for w in WRAPPERS for line, body, hints in w.examples]
KEYS = {"prefix_host": "host", "prefix_rank": "rank", "prefix_local_rank": "local_rank",
        "prefix_task": "task", "prefix_ts": "stamp"}


def _hints(row: dict) -> dict:
    return {KEYS[k]: v for k, v in row.items() if k in KEYS and v is not None}


@pytest.mark.parametrize(("name", "line", "body", "hints"), CASES, ids=[f"{c[0][:30]}:{c[1][:30]}" for c in CASES])
def test_example(name: str, line: str, body: str, hints: dict) -> None:
    row = peel(pl.Series([line], dtype=pl.Utf8)).row(0, named=True)
    assert row["body"] == body, name
    assert _hints(row) == hints, name


def test_examples_together_equal_alone() -> None:
    out = peel(pl.Series([c[1] for c in CASES], dtype=pl.Utf8))
    for row, (name, _line, body, hints) in zip(out.iter_rows(named=True), CASES, strict=True):
        assert (row["body"], _hints(row)) == (body, hints), name


def test_every_wrapper_has_a_peeling_example() -> None:
    for w in WRAPPERS:
        assert any(line != body for line, body, _ in w.examples), w.name


def test_patterns_valid_in_python_re() -> None:
    re.compile(PATTERN)
    for w in WRAPPERS:
        re.compile(w.regex + w.guard)
        if w.veto:
            re.compile(w.veto)


def test_nesting_in_any_order() -> None:
    """docker stamp, pdsh host, srun task, torchrun local rank, PyTorch rank: nested in several orders."""
    core = "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 9] Watchdog caught collective operation timeout"
    lines = [
        f"2024-05-01T10:00:00.5Z node-017: [rank9]:{core}",
        f"node-017: 2024-05-01T10:00:00.5Z 3: [default1]:[rank9]:{core}",
        f"3: node-017: [default1]:[rank9]:{core}",
    ]
    out = peel(pl.Series(lines))
    assert out["body"].to_list() == [core] * 3
    assert out["prefix_host"].to_list() == ["node-017"] * 3
    assert out["prefix_rank"].to_list() == [9] * 3
    assert out["prefix_ts"].to_list() == ["2024-05-01T10:00:00.5Z", "2024-05-01T10:00:00.5Z", None]
    assert out["prefix_task"].to_list() == [None, 3, 3]
    assert out["prefix_local_rank"].to_list() == [None, 1, 1]


def test_peels_are_bounded() -> None:
    deep = "[rank1]:" * (MAX_PEELS + 2) + "x"
    body = peel(pl.Series([deep]))["body"][0]
    assert body == "[rank1]:" * 2 + "x"


def test_inner_wrapper_wins() -> None:
    """mpirun's rank and PyTorch's own `[rankN]:` disagree: the inner one (PyTorch's) is taken."""
    out = peel(pl.Series(["[1,4]<stdout>:[rank12]:hello"]))
    assert out.row(0, named=True)["prefix_rank"] == 12


def test_with_body_columns_and_plain_lines() -> None:
    text = "plain line\n  File \"x.py\", line 3, in f\n[1,2]<stderr>:boom\n"
    lines = with_body(decode_lines(text.encode()).lines)
    assert lines.columns == ["line_no", "text", "body", "prefix_host", "prefix_rank", "prefix_local_rank",
                             "prefix_task", "prefix_ts"]
    assert lines["body"].to_list() == ["plain line", "  File \"x.py\", line 3, in f", "boom"]
    assert lines["prefix_rank"].to_list() == [None, None, 2]


def test_empty_and_unicode() -> None:
    assert peel(pl.Series([], dtype=pl.Utf8)).height == 0
    out = peel(pl.Series(["node-017: é [rank1]:ü", "ü: x"]))
    assert out["body"].to_list() == ["é [rank1]:ü", "ü: x"]


@pytest.mark.parametrize(("name", "line", "body", "hints"), CASES, ids=[f"{c[0][:30]}:{c[1][:30]}" for c in CASES])
def test_prefix_cut_without_the_guard_is_the_same(name: str, line: str, body: str, hints: dict) -> None:
    """`peel` cuts a prefix by the wrapper's pattern without its guard (no capture pass): on every
    example the first wrapper that matches (Python `re`, the whole table as one pattern) cuts the
    same text either way."""
    m = re.match(PATTERN, line)
    if m is None:
        return
    i = next(int(k[1:]) for k, v in m.groupdict().items() if v is not None and k[1:].isdigit())
    w = WRAPPERS[i]
    assert re.match("^(?:" + w.regex + ")", line).group(0) == m.group(f"w{i}"), name


def test_bounded_on_adversarial_lines() -> None:
    """Long hostile lines (1 MiB each) of the characters the wrappers start with: peeled quickly."""
    import time

    n = 1 << 20
    lines = ["[" * n, "(" * n, "1" * n, " " * n + "1: x", "a-" * (n // 2) + ": [x", "node-1: " * (n // 8),
             "[rank1]:" * (n // 8), "2024-05-01T10:00:00Z " * (n // 21), "[1,2]<stdout>:" * (n // 14),
             "a1." * (n // 3) + ": x", "      1 " * (n // 8)]
    t0 = time.monotonic()
    out = peel(pl.Series(lines))
    assert time.monotonic() - t0 < 30.0
    assert out["body"][5] == "node-1: " * (n // 8 - MAX_PEELS)
    assert out["prefix_host"][5] == "node-1"


def test_update_and_cut_equal_scatter_and_a_slice_by_column() -> None:
    # peel's copy-free helpers give what a scatter and a per-row slice give, on every path they take
    import random

    from parsers.prefixes import CUT_WIDTHS, _cut, _update

    rnd = random.Random(7)
    col = pl.Series("body", [f"line {k} " + "x" * rnd.randint(0, 30) for k in range(400)])
    for idx in ([*range(400)], rnd.sample(range(400), 50), sorted(rnd.sample(range(400), 350)),
                rnd.sample(range(400), 390), []):
        ix = pl.Series(idx, dtype=pl.Int64)
        vals = pl.Series([f"new {k}" if k % 7 else None for k in idx], dtype=pl.Utf8)
        other = pl.Series("h", [None] * 400, dtype=pl.Utf8)
        got = _update({"b": col, "h": other}, ix, {"b": vals, "h": vals.str.to_uppercase()})
        assert got["b"].equals(col.clone().scatter(ix, vals), null_equal=True)
        assert got["h"].equals(other.clone().scatter(ix, vals.str.to_uppercase()), null_equal=True)
    for n_widths in (1, 3, CUT_WIDTHS + 5):
        width = pl.Series([rnd.randrange(n_widths) for _ in range(400)], dtype=pl.UInt32)
        want = pl.DataFrame({"r": col, "n": width}).select(pl.col("r").str.slice(pl.col("n")))["r"]
        assert _cut(col, width).equals(want)

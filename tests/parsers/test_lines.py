"""parsers/lines.py: the fast split of plain text (polars' CSV reader) gives exactly the lines the
Python split gives; decode_lines is the same frame either way."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import lines as lines_mod
from parsers.lines import PLAIN_WINDOW, decode_lines, is_plain, plain_kind, plain_lines

CASES = [
    b"one\ntwo\n",
    b"no final newline",
    b"a\n\nb\n \n\n\tc\n",  # blank and white-space-only lines stay, as ""/" "
    b"\n\n\n",
    "ünïcödé ✓ line\nsecond, with a comma; and \"quotes\"\n".encode(),
    b"x" * 5000 + b"\nshort\n",
]


def _python_split(data: bytes) -> list[str]:
    text = data.decode()
    parts = text.split("\n")
    return parts[:-1] if text.endswith("\n") else parts


@pytest.mark.parametrize("data", CASES)
def test_plain_lines_is_the_python_split(data: bytes) -> None:
    assert is_plain(data)
    got = plain_lines(data)
    assert got is not None and got.to_list() == _python_split(data)
    assert got.null_count() == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\n\r\x00\x1b\x1f", blacklist_categories=("Cs",)),
                        max_size=30), min_size=1, max_size=40), st.booleans())
def test_plain_lines_property(parts: list[str], final_newline: bool) -> None:
    data = "\n".join(parts).encode() + (b"\n" if final_newline else b"")
    if not data:
        return
    got = plain_lines(data)
    assert got is not None and got.to_list() == _python_split(data)


def test_not_plain_bytes() -> None:
    for bad in (b"nul\x00", b"cr\r\n", b"\x1b[0m", b"unit\x1fsep", b"\xff\xfe"):
        assert not is_plain(bad)
    assert is_plain(b"ascii only") and is_plain("utf-8 ✓".encode())


def _python_kind(data: bytes, also: bytes = b"") -> str | None:
    if any(b in data for b in b"\x00\r\x1b\x1f" + also):
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "ascii" if data.isascii() else "utf-8"


def test_plain_kind_looks_at_every_window() -> None:
    """`plain_kind` (a window at a time) says what a whole-file check says, wherever the byte that
    decides lies: in the first window, the last, across a window's edge (a multi-byte character cut
    there is still valid UTF-8), or in the one-byte tail."""
    w = PLAIN_WINDOW
    body = bytearray(b"abcdefghi\n" * (3 * w // 10 + 7))
    for at in (0, 5, w - 1, w, w + 1, 2 * w - 2, len(body) - 1):
        for piece in (b"\x00", b"\r", b"\x1b", b"\x1f", b"\x1e", b"\xff", "\u2713".encode(), "\u00e9".encode(),
                      "\u2713".encode()[:2]):
            data = bytes(body[:at]) + piece + bytes(body[at:])
            for also in (b"", b"\x1e"):
                want = _python_kind(data, also)
                assert plain_kind(data, tuple(bytes([b]) for b in also)) == want, (at, piece, also)
                assert is_plain(data) == (_python_kind(data) is not None)
    assert plain_kind(bytes(body)) == "ascii" and plain_kind(b"") == "ascii"


def test_decode_lines_fast_and_slow_split_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"".join(CASES[:5]) * 40
    monkeypatch.setattr(lines_mod, "FAST_SPLIT_BYTES", 1)
    fast = decode_lines(data, 7).lines
    monkeypatch.setattr(lines_mod, "FAST_SPLIT_BYTES", 1 << 60)
    slow = decode_lines(data, 7).lines
    assert fast.equals(slow) and fast["line_no"][0] == 7

"""Turn raw bytes into a frame of numbered text lines, and peel launcher prefixes (`parsers.prefixes`).

Decoding never fails: invalid UTF-8 becomes U+FFFD (and is counted), CRLF and lone CR are
handled, ANSI colour codes are stripped. Line numbers are 1-based and count '\n'-terminated
lines, as editors show them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.prefixes import peel

ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"

@dataclass
class DecodedText:
    lines: pl.DataFrame  # line_no (Int64), text (Utf8)
    invalid_utf8: bool
    nul_bytes: int
    longest_line: int


MAX_LINE_CHARS = 1_000_000  # longer lines are cut (and counted) so one line cannot blow memory


FAST_SPLIT_BYTES = 1 << 20  # plain text this large is split by polars' CSV reader (many threads)
_NOT_PLAIN = (b"\x00", b"\r", b"\x1b", b"\x1f")
PLAIN_WINDOW = 1 << 18  # bytes `plain_kind` looks at at a time (a piece the cache holds)


def is_plain(data: bytes) -> bool:
    """UTF-8 text without the bytes `decode_lines` rewrites (NUL, CR, ESC) or \\x1f: its lines are
    its '\\n'-separated pieces exactly, which `plain_lines` reads."""
    return plain_kind(data) is not None


def plain_kind(data: bytes, also: tuple[bytes, ...] = ()) -> str | None:
    """"ascii" or "utf-8" for plain text (`is_plain`) without any of the single bytes `also`, None
    for other bytes. The bytes are looked at PLAIN_WINDOW at a time (each window's `in` scans and
    ASCII test read it from the cache: a large file is read from memory once, not once a scan);
    only text that is not ASCII is decoded, whole."""
    ascii_ = True
    for at in range(0, len(data), PLAIN_WINDOW):
        w = data[at:at + PLAIN_WINDOW] if len(data) > PLAIN_WINDOW else data
        if any(b in w for b in _NOT_PLAIN) or any(b in w for b in also):
            return None
        ascii_ = ascii_ and w.isascii()
    if ascii_:  # ASCII is UTF-8
        return "ascii"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "utf-8"


def plain_lines(data: bytes) -> pl.Series | None:
    """The lines of plain text (`is_plain`) read as a one-column CSV by polars (many threads);
    None when the rows do not match the newlines."""
    n = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10)) + (0 if data.endswith(b"\n") else 1)
    try:
        s = pl.read_csv(data, has_header=False, separator="\x1f", quote_char=None, infer_schema=False,
                        new_columns=["text"], empty_string_is_null=False)["text"]
    except Exception:  # noqa: BLE001 - Python's split reads anything
        return None
    return s if s.len() == n else None


def decode_lines(data: bytes, first_line_no: int = 1, plain: bool | None = None) -> DecodedText:
    """Split `data` into numbered lines. A final line without '\n' still counts. `plain`: whether
    `is_plain(data)`, when the caller knows (None: looked at here)."""
    fast = plain_lines(data) if len(data) >= FAST_SPLIT_BYTES and (is_plain(data) if plain is None else plain) \
        else None
    if fast is not None:
        longest = int(fast.str.len_chars().max() or 0)
        s = fast.str.slice(0, MAX_LINE_CHARS) if longest > MAX_LINE_CHARS else fast
        df = pl.DataFrame({"line_no": pl.int_range(first_line_no, first_line_no + s.len(), eager=True,
                                                   dtype=pl.Int64), "text": s})
        return DecodedText(df, False, 0, longest)
    nul = data.count(b"\x00")
    if nul:
        data = data.replace(b"\x00", b"")
    try:
        text = data.decode("utf-8")
        invalid = False
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        invalid = True
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    longest = max((len(p) for p in parts), default=0)
    s = pl.Series("text", parts, dtype=pl.Utf8)
    if longest > MAX_LINE_CHARS:
        s = s.str.slice(0, MAX_LINE_CHARS)
    df = pl.DataFrame({"line_no": pl.int_range(first_line_no, first_line_no + len(parts), eager=True,
                                               dtype=pl.Int64), "text": s})
    # CRLF: drop the trailing CR. Lone CR (progress bars): keep the last non-empty segment.
    # ANSI colour codes: stripped.
    df = df.with_columns(
        pl.col("text")
        .str.strip_chars_end("\r")
        .str.replace_all(ascii_classes(ANSI_RE), "")
        .str.replace(r"^(?s).*\r([^\r]+)$", "$1")
    )
    return DecodedText(df, invalid, nul, longest)


_RX_META = frozenset("\\.+*?()|[]{}^$#&-~")  # what Rust's `regex::escape` escapes (`\<` would be a word boundary)


def literal_regex(literals: Iterable[str]) -> str:
    """A regex (Rust syntax) matching where one of `literals` occurs, each escaped as `regex::escape`
    writes it: `str.contains` with it gives `str.contains_any(literals)`, and the regex engine's
    literal search reads a large column about twice as fast."""
    literals = list(literals)
    if not literals:
        raise ValueError("no literal: the empty alternation would match every line")
    return "|".join("".join("\\" + c if c in _RX_META else c for c in t) for t in literals)


def with_body(lines: pl.DataFrame) -> pl.DataFrame:
    """Add `body` (text without the wrappers launchers and collectors put in front of it, see
    `parsers.prefixes`) and the hints those wrappers carry: `prefix_host` (pdsh host, Ray ip,
    kubectl pod), `prefix_rank` (global rank from `[rankN]:`, mpirun `[1,N]`, Horovod `[N]<stdout>`,
    Lightning `[rank: N]`), `prefix_local_rank` (torchrun `[defaultN]:`), `prefix_task` (srun -l
    task id) and `prefix_ts` (a wrapper's stamp, as text `timestamps.iso` reads)."""
    return lines.with_columns(peel(lines["text"]).get_columns())

"""Where the CLI's text goes: rich (colour, progress bars, terminal width) only on a terminal;
piped into a file, `tee` or a CI log, plain text at full width (no wrapping: paths and log lines
stay whole). `--color` / `--no-color` override the guess; `NO_COLOR` (any value) turns colour off
unless `--color` is given."""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console

__all__ = ["PIPE_WIDTH", "console_for", "interactive"]

PIPE_WIDTH = 100_000  # "no wrapping": wider than any line the CLI prints


def interactive(stream: TextIO) -> bool:
    """A person is watching `stream` (progress bars and live status only then)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def console_for(stream: TextIO, color: bool | None = None) -> Console:
    tty = interactive(stream)
    styled = color if color is not None else (tty and not os.environ.get("NO_COLOR"))
    common = {"file": stream, "emoji": False, "highlight": False, "no_color": not styled}
    if tty:
        return Console(**common, force_terminal=True if styled else None)
    return Console(**common, force_terminal=bool(styled), width=PIPE_WIDTH, soft_wrap=True)

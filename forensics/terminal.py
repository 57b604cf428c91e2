"""Where the CLI's text goes: rich (colour, progress bars, terminal width) only on a terminal;
piped into a file, `tee` or a CI log, plain text at full width (no wrapping: paths and log lines
stay whole). `--color` / `--no-color` override the guess; `NO_COLOR` (any value) turns colour off
unless `--color` is given. A reader that goes away (`forensics analyze job | head -3`) silences the
rest of the text; the command still finishes its work and writes its outputs."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich.console import Console

__all__ = ["PIPE_WIDTH", "console_for", "interactive", "stdout_gone"]

PIPE_WIDTH = 100_000  # "no wrapping": wider than any line the CLI prints


def interactive(stream: TextIO) -> bool:
    """A person is watching `stream` (progress bars and live status only then)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def stdout_gone() -> None:
    """The reader of stdout went away (a closed pipe): what is left to print goes nowhere (the
    descriptor now points at /dev/null, so Python's flush at exit fails no more)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _Console(Console):
    def on_broken_pipe(self) -> None:  # rich's own exits the process (1), before the outputs are written
        self.quiet = True
        stdout_gone()


def console_for(stream: TextIO, color: bool | None = None) -> Console:
    tty = interactive(stream)
    styled = color if color is not None else (tty and not os.environ.get("NO_COLOR"))
    common = {"file": stream, "emoji": False, "highlight": False, "no_color": not styled}
    if tty:
        return _Console(**common, force_terminal=True if styled else None)
    return _Console(**common, force_terminal=bool(styled), width=PIPE_WIDTH, soft_wrap=True)

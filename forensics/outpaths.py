"""Output paths checked before any work starts: a command that would die writing its result after
minutes of analysis says so in one line at once instead.

Rules (the same for every command): an output *folder* (`--out`, `--store`) may exist as a folder
or not exist yet; then its nearest existing ancestor must be a writable folder (it is created). An
output *file* (`--json PATH`) must not be a folder, and its folder must already exist and be
writable; `-` means stdout. Each check returns the one-line reason a path is unusable, or None."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STDOUT", "dir_problem", "file_problem", "inside"]

STDOUT = "-"


def _nearest_existing(p: Path) -> Path:
    for q in (p, *p.parents):
        if q.exists():
            return q
    return Path(p.anchor or ".")


def _writable_dir(d: Path) -> bool:
    return os.access(d, os.W_OK | os.X_OK)


def dir_problem(path: Path | str, what: str = "--out") -> str | None:
    """Why the folder `path` cannot be written to (created if missing), or None."""
    p = Path(path).absolute()
    if p.exists():
        if not p.is_dir():
            return f"{what} {path}: exists and is not a directory"
        if not _writable_dir(p):
            return f"{what} {path}: directory is not writable"
        return None
    base = _nearest_existing(p.parent)
    if not base.is_dir():
        return f"{what} {path}: {base} is a file, not a directory"
    if not _writable_dir(base):
        return f"{what} {path}: cannot create it ({base} is not writable)"
    return None


def file_problem(path: Path | str, what: str = "--json") -> str | None:
    """Why the file `path` cannot be written (`-`, stdout, always can), or None."""
    if str(path) == STDOUT:
        return None
    p = Path(path).absolute()
    if p.is_dir():
        return f"{what} {path}: is a directory (give a file path, or - for stdout)"
    if p.exists() and not os.access(p, os.W_OK):
        return f"{what} {path}: file is not writable"
    parent = p.parent
    if not parent.exists():
        return f"{what} {path}: no such directory {parent}"
    if not parent.is_dir():
        return f"{what} {path}: {parent} is not a directory"
    if not _writable_dir(parent):
        return f"{what} {path}: directory {parent} is not writable"
    return None


def inside(path: Path | str, root: Path | str) -> bool:
    """True when `path` is `root` or lies under it (both resolved)."""
    p, r = Path(path).resolve(), Path(root).resolve()
    return p == r or r in p.parents

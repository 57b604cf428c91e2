"""Shared helpers for the hostile-input tests (tests/hostile/).

Test modules here cannot import each other (pytest runs with --import-mode=importlib), so the
helpers are fixtures. `FORENSICS_FUZZ=1` (set by `make fuzz`) turns the `fuzz`-marked tests
from a short deterministic smoke run into long random fuzzing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

FUZZ = os.environ.get("FORENSICS_FUZZ") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fuzz: property/mutation fuzzing; long only with FORENSICS_FUZZ=1")


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry below root (and root itself): type, mode, size, sha256 of content, link target."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames, "."]:
            p = Path(dirpath) / name if name != "." else Path(dirpath)
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_file():
                out[rel] = ("file", st.st_mode, st.st_size, st.st_mtime_ns,
                            hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[rel] = ("dir", st.st_mode, st.st_mtime_ns)
    return out


@pytest.fixture
def snapshot():
    """snapshot(root) -> a comparable record of names, modes, sizes, mtimes and sha256 of a tree."""
    return tree_state


def check_accounting(files) -> None:  # noqa: ANN001 - list of FileResult or report sources
    for f in files:
        d = f if isinstance(f, dict) else f.__dict__
        assert d["lines"] == d["parsed"] + d["ignored"] + d["unparsed"], d.get("rel_path", d.get("path"))
        assert min(d["parsed"], d["ignored"], d["unparsed"]) >= 0


@pytest.fixture
def accounting():
    """accounting(files): lines == parsed + ignored + unparsed for every FileResult / report source."""
    return check_accounting

"""Fixtures shared by the test modules of this layer (tests/hostile/ has its own conftest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def job_of(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """`job_of(files)`: tmp_path/job holding `files` ({relative path: text}, folders made as needed)."""
    def write(files: dict[str, str]) -> Path:
        job = tmp_path / "job"
        for rel, text in files.items():
            p = job / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        return job
    return write

"""The closed vocabularies of DESIGN §5 and the taxonomy defaults (data/taxonomy.csv, a copy of
reference/taxonomy.csv)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

KINDS = ("crash", "hang", "slowdown", "preemption", "completed", "unknown")
DOMAINS = ("hardware", "network", "system_software", "storage", "user", "scheduler", "unknown")
ACTIONS = ("restart", "exclude_node_and_restart", "stop_and_fix", "rollback_and_skip_data", "investigate", "none")
AUTO_RECOVERABLE = frozenset({"restart", "exclude_node_and_restart"})


@dataclass(frozen=True)
class CategoryInfo:
    category: str
    default_kind: str
    domain: str
    default_action: str
    typical_signals: str
    notes: str


@cache
def taxonomy() -> dict[str, CategoryInfo]:
    text = resources.files("forensics").joinpath("data/taxonomy.csv").read_text(encoding="utf-8")
    out = {}
    for row in csv.DictReader(io.StringIO(text)):
        out[row["category"]] = CategoryInfo(row["category"], row["default_kind"], row["domain"],
                                            row["default_action"], row["typical_signals"], row["notes"])
    return out


def info(category: str) -> CategoryInfo:
    return taxonomy().get(category, taxonomy()["unknown"])

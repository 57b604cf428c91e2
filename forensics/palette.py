"""The plots' colours and the GPUs they name, without matplotlib: report.html's swatches and
straggler section use them without importing the plotting stack."""

from __future__ import annotations

import re

__all__ = ["BUCKET_COLORS", "BUCKET_LABELS", "KIND_COLORS", "flagged_gpus", "host_order"]

BUCKET_COLORS = {
    "productive": "#4caf50", "startup": "#90a4ae", "checkpoint": "#1e88e5", "lost_work": "#fb8c00",
    "termination": "#e53935", "restart": "#8e24aa", "slowdown": "#fdd835", "running": "#c5e1a5",
}
BUCKET_LABELS = {"running": "running (not split: no attempt details)"}
KIND_COLORS = {"crash": "#b71c1c", "hang": "#6a1b9a", "preemption": "#37474f", "slowdown": "#f57f17",
               "unknown": "#455a64"}


def host_order(host: str) -> tuple:
    """Natural order of host names: node-2 before node-10."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", host or "") if t)


def flagged_gpus(report: dict) -> list[tuple[str, int]]:
    """The GPUs the report names, (host, gpu): stragglers and the culprits of interruptions (a
    dead GPU is a culprit, not a straggler). The heatmap labels these rows at any size."""
    out: list[tuple[str, int]] = []
    for s in report.get("stragglers") or []:
        out.append((s.get("host") or "?", s.get("gpu") if s.get("gpu") is not None else -1))
    for x in report.get("interruptions") or []:
        c = x.get("culprit") or {}
        if c.get("host") and c.get("gpu") is not None:
            out.append((c["host"], int(c["gpu"])))
    return list(dict.fromkeys(out))

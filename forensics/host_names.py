"""One name per host (a pure stage over frames): the host a file's path suggests against the name
its own lines give.

A file's path hint (`discovery.path_hints`: `worker-0` in `pods/llm-train-worker-0.log`,
`node-3` in `dmesg.node-3.log`) names the host of every line that names none; NCCL's own prefix
(`host:pid:tid`) and wrappers name the host the process saw. Where they disagree only by what the
path left out (a Kubernetes pod's job-name prefix, a domain), one machine would show as two hosts:
two rank-map rows per rank, twice the hosts, a culprit named by the shorter form. So a hint that is
a part of the one other name in its file's lines (that name ends in `-hint`, `_hint` or `.hint`,
or starts with `hint.`) is read as that name, everywhere; a hint that would map to two different
names is left alone. Content wins over the path, as everywhere else.
"""

from __future__ import annotations

import polars as pl

SEPARATORS = ("-", "_", ".")


def is_part_of(hint: str, name: str) -> bool:
    """Whether `name` is `hint` with a separated prefix (a pod's job name) or a domain added."""
    if hint == name or not hint:
        return False
    return any(name.endswith(s + hint) for s in SEPARATORS) or name.startswith(hint + ".")


def path_hint_names(events: pl.DataFrame, file_host: dict[int, str]) -> dict[str, str]:
    """hint -> the name the lines of its file give, for the hints `is_part_of` one other name in
    every file where both occur."""
    if events.is_empty() or not file_host:
        return {}
    seen = (events.filter(pl.col("host").is_not_null()).group_by("file_id")
            .agg(pl.col("host").unique().sort()).sort("file_id"))
    found: dict[str, set[str]] = {}
    for fid, hosts in seen.iter_rows():
        hint = file_host.get(fid)
        others = [h for h in hosts if h != hint]
        if hint is None or hint not in hosts or len(others) != 1:
            continue
        if is_part_of(hint, others[0]):
            found.setdefault(hint, set()).add(others[0])
    return {h: next(iter(n)) for h, n in sorted(found.items()) if len(n) == 1}


def rename(frame: pl.DataFrame | pl.LazyFrame, names: dict[str, str]) -> pl.DataFrame | pl.LazyFrame:
    """`frame` with its `host` column read through `names` (a frame without one unchanged)."""
    cols = frame.collect_schema().names() if isinstance(frame, pl.LazyFrame) else frame.columns
    if not names or "host" not in cols:
        return frame
    return frame.with_columns(pl.col("host").replace(names))


def describe(names: dict[str, str], shown: int = 3) -> list[str]:
    """One warning line for all the hints read as another name (the first `shown` named)."""
    if not names:
        return []
    pairs = ", ".join(f"{h!r} as {n!r}" for h, n in list(names.items())[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return [f"host names: {len(names)} host name{'s' if len(names) != 1 else ''} from file paths read as the longer "
            f"name{'s' if len(names) != 1 else ''} the files' own lines give ({pairs}{more})"]

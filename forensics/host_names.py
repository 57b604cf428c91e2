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

Kubernetes: inside a pod, NCCL and the launchers print the pod's hostname (the pod's name), while
dmesg, DCGM and node exporters name the node. Where kubectl output in the job dir says which node a
pod ran on (`pod_nodes`, parsers/k8s.py), the pod's name is read as its node's: one machine is one
host, and a rank links to the node whose Xid or DCGM samples name its GPU; the node is what an
operator cordons. The pod names stay in the warning and in the store's `pod_nodes` table. A pod
shown on two nodes (rescheduled) is left alone; a host that is a pod's name without the five
characters Kubernetes appends to generated names (a JobSet/Job pod's hostname) counts as that pod.
"""

from __future__ import annotations

import re

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


# k8s.io/apimachinery pkg/util/rand: the alphabet of the suffix generateName appends
GENERATED_SUFFIX = re.compile(r"^(?P<base>.+)-[bcdfghjklmnpqrstvwxz2456789]{5}$")


def pod_node_names(events: pl.DataFrame, pod_nodes: pl.DataFrame | None) -> tuple[dict[str, str], list[str]]:
    """host -> node for the hosts that are pods kubectl shows on exactly one node, and the pods it
    shows on several (left alone)."""
    if pod_nodes is None or pod_nodes.is_empty() or events.is_empty():
        return {}, []
    on = (pod_nodes.filter(pl.col("pod").is_not_null() & pl.col("node").is_not_null())
          .group_by("pod").agg(pl.col("node").unique().sort()).sort("pod"))
    nodes = {pod: ns for pod, ns in on.iter_rows()}
    hosts = set(events.filter(pl.col("host").is_not_null())["host"].unique().to_list())
    by_base: dict[str, list[str]] = {}
    for pod in nodes:
        m = GENERATED_SUFFIX.match(pod)
        if m and m["base"] in hosts and m["base"] not in nodes:
            by_base.setdefault(m["base"], []).append(pod)
    pod_of = {h: h for h in hosts if h in nodes}
    pod_of.update({base: pods[0] for base, pods in by_base.items() if len(pods) == 1})
    names = {h: nodes[pod][0] for h, pod in sorted(pod_of.items()) if len(nodes[pod]) == 1 and nodes[pod][0] != h}
    moved = sorted(pod for h, pod in pod_of.items() if len(nodes[pod]) > 1)
    return names, moved


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


def describe_pods(names: dict[str, str], moved: list[str], shown: int = 3) -> list[str]:
    """Warning lines for the pod names read as their nodes, and the pods shown on several nodes."""
    out = []
    if names:
        pairs = ", ".join(f"{h!r} on {n!r}" for h, n in list(names.items())[:shown])
        more = f" and {len(names) - shown} more" if len(names) > shown else ""
        out.append(f"host names: {len(names)} Kubernetes pod{'s' if len(names) != 1 else ''} read as the "
                   f"node{'s' if len(names) != 1 else ''} kubectl shows {'them' if len(names) != 1 else 'it'} on "
                   f"({pairs}{more})")
    if moved:
        out.append(f"host names: {len(moved)} Kubernetes pod{'s' if len(moved) != 1 else ''} shown on more than one "
                   f"node kept as named ({', '.join(repr(p) for p in moved[:shown])}"
                   f"{f' and {len(moved) - shown} more' if len(moved) > shown else ''})")
    return out

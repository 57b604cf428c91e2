"""The ground truth (expected.toml): verdict, interruptions, attempts, downtime, stragglers."""

from __future__ import annotations

import json
from typing import Any

from forensics.simulate.config import SPIKE_FAULTS, STRAGGLER_FAULTS, TAXONOMY, US
from forensics.simulate.timeline import Attempt, Case

BUCKETS = ("checkpoint", "termination", "startup", "restart", "lost_work", "slowdown", "productive")


def downtime_intervals(case: Case) -> list[tuple[int, int, str]]:
    """Labelled intervals of the ground-truth timeline (DESIGN §7); overlaps resolved by precedence."""
    ideal = case.step_time_us()
    out: list[tuple[int, int, str]] = []
    prev_end: int | None = None
    for a in case.attempts:
        if prev_end is not None:
            out.append((prev_end, a.start, "restart"))
        prev_end = a.end
        label = "startup" if a.index == 0 else "restart"
        failed = a.end_reason != "completed"
        init_end = a.first_step_start if a.steps or not failed else min(a.fault_t or a.end, a.end)
        out.append((a.start, max(a.start, init_end), label))
        for s in a.steps:
            if s.slow > 0 and s.end - s.start > ideal:
                out.append((s.start + ideal, s.end, "slowdown"))
            elif s.extra:
                out.append((s.end - s.extra, s.end, "slowdown"))
        for sv in a.saves:
            out.append((sv.start, min(sv.end, a.end), "checkpoint"))
        if failed:
            last = a.last_step_end
            progress = last if last is not None else min(a.fault_t or a.end, a.end)
            out.append((progress, a.end, "termination"))
            if last is not None:
                durable = [sv.end for sv in a.saves if sv.durable]
                lw_from = max(durable) if durable else a.first_step_start
                out.append((lw_from, last, "lost_work"))
    return [(s, e, lab) for s, e, lab in out if e > s]


def downtime(case: Case) -> dict[str, Any]:
    start, end = case.attempts[0].start, case.attempts[-1].end
    prio = {b: i for i, b in enumerate(BUCKETS)}
    points: dict[int, list[tuple[int, int]]] = {}
    for s, e, lab in downtime_intervals(case):
        points.setdefault(max(s, start), []).append((prio[lab], 1))
        points.setdefault(min(e, end), []).append((prio[lab], -1))
    points.setdefault(start, [])
    points.setdefault(end, [])
    active = [0] * len(BUCKETS)
    totals = [0] * len(BUCKETS)
    times = sorted(points)
    for i, t in enumerate(times[:-1]):
        for p, d in points[t]:
            active[p] += d
        lab = next((p for p in range(len(BUCKETS) - 1) if active[p] > 0), len(BUCKETS) - 1)
        totals[lab] += times[i + 1] - t
    wall = end - start
    assert sum(totals) == wall
    gpus = case.cfg.ranks
    res: dict[str, Any] = {"wall_s": wall / US}
    for b, v in zip(BUCKETS, totals, strict=True):
        res[f"{b}_s"] = v / US
    prod = totals[-1]
    res["goodput"] = round(prod / wall, 6) if wall else 0.0
    res["gpu_hours_lost"] = round((wall - prod) / US * gpus / 3600, 6)
    return res


def _culprit_keys(case: Case, host: str | None, rank: int | None, gpu: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if host is not None:
        out["culprit_host"] = host
    if rank is not None:
        out["culprit_rank"] = rank
    if gpu is not None:
        out["culprit_gpu"] = gpu
        out["culprit_pci_bus_id"] = case.ids.pci(gpu)
    return out


def _interruption(case: Case, a: Attempt) -> dict[str, Any]:
    assert a.fault is not None and a.fault_t is not None
    cat = a.fault.category
    _, domain, action = TAXONOMY[cat]
    out: dict[str, Any] = {"attempt": a.index, "time": case.clock.iso(a.fault_t), "kind": a.fault.kind,
                           "category": cat, "domain": domain, "action": action, "fault": a.fault.type}
    out.update(_culprit_keys(case, a.culprit_host, a.culprit_rank, a.culprit_gpu))
    return out


def truth(case: Case) -> dict[str, Any]:
    cfg, c = case.cfg, case.clock
    first, last = case.attempts[0], case.attempts[-1]
    gpn = cfg.gpus_per_node
    inter: list[dict[str, Any]] = []
    for a in case.attempts:
        if a.fault is not None and a.end_reason != "completed":
            inter.append(_interruption(case, a))
    for ep in case.slow:
        if ep.fault.type in SPIKE_FAULTS and ep.first_hit is None:
            continue  # no step was hit: nothing happened
        cat = ep.fault.category
        _, domain, action = TAXONOMY[cat]
        when = ep.first_hit if ep.fault.type in SPIKE_FAULTS and ep.first_hit is not None else ep.start
        item = {"attempt": ep.fault.attempt, "time": c.iso(when), "kind": "slowdown", "category": cat,
                "domain": domain, "action": action, "fault": ep.fault.type}
        if ep.straggler:
            item.update(_culprit_keys(case, ep.host, ep.rank, (ep.rank or 0) % gpn))
        inter.append(item)
    inter.sort(key=lambda x: x["time"])
    if last.end_reason == "completed" or last.fault is None:
        verdict: dict[str, Any] = {"kind": "completed", "action": "none"}
    else:
        verdict = {k: v for k, v in _interruption(case, last).items() if k not in {"attempt", "time"}}
    attempts = [{"index": a.index, "start": c.iso(a.start), "end": c.iso(a.end),
                 "first_step": a.resume_step + 1 if a.steps else 0,
                 "last_step": a.steps[-1].index if a.steps else 0, "end_reason": a.end_reason,
                 "hosts": list(a.hosts)} for a in case.attempts]
    stragglers = [{"host": ep.host, "gpu": (ep.rank or 0) % gpn, "rank": ep.rank, "start": c.iso(ep.start),
                   "end": c.iso(min(ep.end, last.end)), "slowdown": ep.slowdown,
                   "cause": str(ep.fault.params.get("cause", STRAGGLER_FAULTS[ep.fault.type][0]))}
                  for ep in case.slow if ep.straggler]
    out: dict[str, Any] = {
        "job": {"name": cfg.name, "hosts": case.hosts, "ranks": cfg.ranks, "gpus": cfg.ranks,
                "start": c.iso(first.start), "end": c.iso(last.end), "job_id": cfg.job_id,
                "framework": cfg.framework},
        "verdict": verdict,
        "interruptions": inter,
        "attempts": attempts,
        "downtime": downtime(case),
    }
    if stragglers:
        out["stragglers"] = stragglers
    return out


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps_toml(data: dict[str, Any]) -> str:
    """Minimal TOML writer: top-level tables and arrays of tables of scalars/lists."""
    out: list[str] = []
    for key, val in data.items():
        if isinstance(val, dict):
            out.append(f"[{key}]")
            out += [f"{k} = {toml_value(v)}" for k, v in val.items()]
            out.append("")
        elif isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            for item in val:
                out.append(f"[[{key}]]")
                out += [f"{k} = {toml_value(v)}" for k, v in item.items()]
                out.append("")
        elif isinstance(val, list):
            out.insert(0, f"{key} = {toml_value(val)}")
        else:
            out.insert(0, f"{key} = {toml_value(val)}")
    return "\n".join(out)

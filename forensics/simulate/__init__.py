"""Scenario simulator: turn a scenario (TOML) into a realistic job directory plus the truth.

`simulate(scenario, out_dir, seed)` writes `<out>/job/` (what a person would collect after the
job ended: per-rank logs, torchrun agent logs, per-node kernel logs and DCGM exports, Slurm
records) and `<out>/expected.toml` (the ground truth: verdict, interruptions, attempts, downtime
per DESIGN §7, stragglers). Line formats follow `reference/` (see docs/simulator.md).

Determinism: every random draw comes from `random.Random` instances seeded from `seed` (and from
stable string keys); no wall-clock time, no global RNG, sorted iteration. Times are integer
microseconds since the job start, so the downtime buckets sum to the wall time exactly.
"""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path
from typing import Any

from forensics.simulate.attempts import build_timeline
from forensics.simulate.clocks import elapsed, hostlist
from forensics.simulate.config import (
    JOB_WIDE_FAULTS,
    SPIKE_FAULTS,
    STRAGGLER_FAULTS,
    TAXONOMY,
    US,
    make_config,
    make_faults,
)
from forensics.simulate.frameworks import benign_noise, render_framework
from forensics.simulate.teardown import step_id
from forensics.simulate.timeline import Attempt, Case, SlowEpisode
from forensics.simulate.write_kernel import write_kernel_logs
from forensics.simulate.write_ranks import write_agent_logs, write_rank_logs

# ----------------------------------------------------------------------------- writers: DCGM


DCGM_METRICS = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_SM_ACTIVE",
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
DCGM_LINK_METRICS = ("DCGM_FI_DEV_PCIE_LINK_GEN", "DCGM_FI_DEV_PCIE_LINK_WIDTH")  # with dcgm_pcie_link = true
BLANK_INT = "9223372036854775792"
BLANK_DBL = "140737488355328.000"


def _link_values(state: str, ep: SlowEpisode | None) -> list[str]:
    """Current PCIe link generation and width (Gen5 x16 when healthy; idle GPUs drop to Gen1)."""
    if state == "lost":
        return [BLANK_INT, BLANK_INT]
    if state == "pcie" and ep is not None:
        return [str(int(ep.fault.params.get("link_gen", 4))), str(int(ep.fault.params.get("link_width", 8)))]
    return ["1" if state == "idle" else "5", "16"]


def _gpu_state_ep(case: Case, host: str, gpu: int, t: int) -> tuple[str, SlowEpisode | None]:
    """DCGM state of one GPU at t, with the straggler episode that causes it (if any)."""
    for s, _e, st in case.gpu_states.get((host, gpu), []):
        if st == "lost" and s <= t:
            return "lost", None
    for ep in case.slow:
        if (ep.straggler and ep.host == host and (ep.rank or 0) % case.cfg.gpus_per_node == gpu
                and ep.start <= t < ep.end):
            return STRAGGLER_FAULTS[ep.fault.type][1], ep
    st = _gpu_state_plain(case, host, gpu, t)
    return st, None


def _gpu_state_plain(case: Case, host: str, gpu: int, t: int) -> str:
    for s, e, st in case.gpu_states.get((host, gpu), []):
        if s <= t < e:
            return st
    for a in case.attempts:
        if host in a.hosts and a.start <= t < a.end:
            return "train" if t >= a.first_step_start else "init"
    return "idle"


def _slow_clock(slowdown: float, rng: random.Random) -> str:
    """SM clock of a GPU whose steps are `slowdown` slower (clocks drop more than step time rises)."""
    return str(int(1980 * (1.0 - min(0.6, 1.4 * slowdown))) + rng.randrange(-25, 26))


def straggler_values(state: str, ep: SlowEpisode, rng: random.Random, base_temp: int) -> tuple[str, ...]:
    """DCGM values of a straggler GPU other than thermal (power cap/brake, clocks stuck low, PCIe)."""
    p = ep.fault.params
    if state == "power":
        cap = float(p.get("power_limit_w", 450.0))
        bits = 0x84 if p.get("power_brake", False) else 0x4
        return (_slow_clock(ep.slowdown, rng), str(base_temp + rng.randrange(-2, 4)),
                f"{cap * rng.uniform(0.985, 1.0):.3f}", str(bits), "", f"{rng.uniform(0.80, 0.88):.4f}", "")
    if state == "clocks_low":
        return (_slow_clock(ep.slowdown, rng), str(base_temp - 3 + rng.randrange(-2, 3)),
                f"{rng.uniform(430, 500):.3f}", "0", "", f"{rng.uniform(0.80, 0.88):.4f}", "")
    # pcie: clocks and power as when training, the link retries (replay counter) and is downtrained
    return ("1980" if rng.random() < 0.8 else str(rng.randrange(1950, 1980)),
            str(base_temp + rng.randrange(-2, 4)), f"{rng.uniform(560, 640):.3f}",
            "4" if rng.random() < 0.2 else "0", "", f"{rng.uniform(0.66, 0.74):.4f}", "")


def dcgm_values(state: str, rng: random.Random, base_temp: int) -> tuple[str, ...]:
    if state == "lost":
        return (BLANK_INT, BLANK_INT, BLANK_DBL, BLANK_INT, "", BLANK_DBL, BLANK_INT)
    if state == "noisy":
        return (str(rng.randrange(1080, 1160)), str(base_temp + rng.randrange(-2, 4)),
                f"{rng.uniform(600, 690):.3f}", "0", "", f"{rng.uniform(0.74, 0.82):.4f}", "")
    if state == "thermal":
        return (str(rng.randrange(1260, 1340)), str(rng.randrange(88, 93)), f"{rng.uniform(480, 540):.3f}",
                str(0x60 | (4 if rng.random() < 0.3 else 0)), "", f"{rng.uniform(0.70, 0.80):.4f}", "")
    if state == "train":
        return ("1980" if rng.random() < 0.8 else str(rng.randrange(1950, 1980)),
                str(base_temp + rng.randrange(-2, 4)), f"{rng.uniform(600, 690):.3f}",
                "4" if rng.random() < 0.2 else "0", "", f"{rng.uniform(0.74, 0.82):.4f}", "")
    if state in ("hung", "init"):
        return ("1980", str(base_temp - 15 + rng.randrange(-1, 2)), f"{rng.uniform(110, 140):.3f}", "0", "",
                f"{rng.uniform(0.005, 0.03):.4f}", "")
    return ("345", str(32 + rng.randrange(0, 4)), f"{rng.uniform(65, 75):.3f}", "1", "", "0.0000", "")


def write_dcgm(case: Case, job: Path) -> None:
    if not case.cfg.dcgm:
        return
    start = case.attempts[0].start
    end = case.attempts[-1].end
    step = case.cfg.dcgm_interval_s * US
    for host in case.hosts:
        rng = random.Random(f"{case.seed}:dcgm:{host}")
        rows = ["timestamp,metric,gpu,UUID,pci_bus_id,Hostname,value"]
        gpus = range(case.cfg.gpus_per_node)
        meta = {g: (case.ids.uuid(host, g), f"0000{case.ids.pci(g).upper()}.0", 58 + rng.randrange(0, 8))
                for g in gpus}
        replay = dict.fromkeys(gpus, 0)
        metrics = DCGM_METRICS + (DCGM_LINK_METRICS if case.cfg.dcgm_pcie_link else ())
        wide = [ep for ep in case.slow if ep.fault.type in JOB_WIDE_FAULTS]
        t = start - start % step
        while t <= end + step:
            stamp = case.clock.iso_s(t)
            for g in gpus:
                uuid, pci, base = meta[g]
                replay[g] += sum(n for bt, n in case.replay_bumps.get((host, g), []) if t - step < bt <= t)
                state, ep = _gpu_state_ep(case, host, g, t)
                if ep is not None and state != "thermal":
                    vals = list(straggler_values(state, ep, rng, base))
                    if state == "pcie":
                        replay[g] += rng.randrange(40, 400)
                else:
                    vals = list(dcgm_values(state, rng, base))
                if state == "train" and wide:
                    # job-wide slowdown: every GPU waits longer in communication, none deviates
                    f = max((w.slowdown for w in wide if w.start <= t < w.end), default=0.0)
                    if f:
                        vals[5] = f"{float(vals[5]) / (1.0 + f):.4f}"
                xids = sorted(case.xids.get((host, g), []))
                vals[4] = str(next((x for bt, x in reversed(xids) if bt <= t), 0))
                if vals[6] == "":
                    vals[6] = str(replay[g])
                if case.cfg.dcgm_pcie_link:
                    vals += _link_values(state, ep)
                for metric, v in zip(metrics, vals, strict=True):
                    rows.append(f"{stamp},{metric},{g},{uuid},{pci},{host},{v}")
            t += step
        d = job / "nodes" / host
        d.mkdir(parents=True, exist_ok=True)
        (d / "dcgm.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------- writers: Slurm


SACCT_HEADER = "JobID|JobName|State|ExitCode|DerivedExitCode|Start|End|Elapsed|NodeList|FailedNode|Reason|Restarts"


def run_states(case: Case, a: Attempt, requeued: bool) -> tuple[str, str, str, str, str, str, str]:
    """(job state, job exit, batch state, batch exit, step state, step exit, failed node) of one run."""
    if a.end_reason == "completed":
        return "COMPLETED", "0:0", "COMPLETED", "0:0", "COMPLETED", "0:0", "None"
    ftype = a.fault.type if a.fault else ""
    failed = a.culprit_host if ftype == "node_fail" and a.culprit_host else "None"
    if ftype == "preemption":
        return "PREEMPTED", "0:15", "CANCELLED", "0:15", "CANCELLED", "0:15", failed
    if ftype == "node_fail":
        return "NODE_FAIL", "0:0", "CANCELLED", "0:15", "CANCELLED", "0:15", failed
    if ftype == "time_limit":
        return "TIMEOUT", "0:0", "CANCELLED", "0:15", "CANCELLED", "0:15", failed
    if ftype == "user_cancelled":
        return "CANCELLED by 1000", "0:0", "CANCELLED", "0:15", "CANCELLED", "0:15", failed
    step_state, step_exit = ("OUT_OF_MEMORY", "0:125") if ftype == "host_oom" else ("FAILED", "1:0")
    if requeued:
        return "REQUEUED", "0:0", "CANCELLED", "0:15", step_state, step_exit, failed
    return step_state if ftype == "host_oom" else "FAILED", step_exit, "FAILED", "1:0", step_state, step_exit, failed


def write_slurm(case: Case, job: Path) -> None:
    d = job / "slurm"
    d.mkdir(parents=True, exist_ok=True)
    jid, c = case.cfg.job_id, case.clock
    rows = [SACCT_HEADER]
    if case.cfg.retry_as_step:
        # one allocation; the batch script retries srun: steps .0, .1, ... of one job row
        first, last = case.attempts[0], case.attempts[-1]
        js, je, bs, be, _, _, fnode = run_states(case, last, False)
        start, end = c.slurm(first.start), c.slurm(last.end + US - 1)
        el = elapsed((last.end + US - 1) // US - first.start // US)
        nl = hostlist(case.hosts)
        rows.append(f"{jid}|{case.cfg.name}|{js}|{je}|{je}|{start}|{end}|{el}|{nl}|{fnode}|None|0")
        rows.append(f"{jid}.batch|batch|{bs}|{be}||{start}|{end}|{el}|{first.hosts[0]}|||")
        rows.append(f"{jid}.extern|extern|COMPLETED|0:0||{start}|{end}|{el}|{nl}|||")
        for a in case.attempts:
            _, _, _, _, ss, se, _ = run_states(case, a, False)
            s0, s1 = c.slurm(a.start), c.slurm(a.end + US - 1)
            sel = elapsed((a.end + US - 1) // US - a.start // US)
            rows.append(f"{jid}.{step_id(case, a)}|torchrun|{ss}|{se}||{s0}|{s1}|{sel}|{hostlist(a.hosts)}|||")
    for a in case.attempts if not case.cfg.retry_as_step else []:
        requeued = a.index < len(case.attempts) - 1
        js, je, bs, be, ss, se, fnode = run_states(case, a, requeued)
        start, end = c.slurm(a.start), c.slurm(a.end + US - 1)
        el = elapsed((a.end + US - 1) // US - a.start // US)
        nl = hostlist(a.hosts)
        derived = se if ss != "COMPLETED" else "0:0"
        rows.append(f"{jid}|{case.cfg.name}|{js}|{je}|{derived}|{start}|{end}|{el}|{nl}|{fnode}|None|{a.index}")
        rows.append(f"{jid}.batch|batch|{bs}|{be}||{start}|{end}|{el}|{a.hosts[0]}|||")
        rows.append(f"{jid}.extern|extern|COMPLETED|0:0||{start}|{end}|{el}|{nl}|||")
        rows.append(f"{jid}.0|torchrun|{ss}|{se}||{start}|{end}|{el}|{nl}|||")
    (d / "sacct.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    lines = [text for _, text in sorted(case.slurm_events, key=lambda e: e[0])]
    (d / f"slurm-{jid}.out").write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")


# ----------------------------------------------------------------------------- truth


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


# ----------------------------------------------------------------------------- entry points


def load_scenario(path: str | Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def simulate(scenario: dict[str, Any], out_dir: Path, seed: int) -> Path:
    """Write `<out_dir>/job/` and `<out_dir>/expected.toml` for the scenario; return out_dir."""
    out_dir = Path(out_dir)
    cfg = make_config(scenario.get("job", {}), seed)
    case = Case(cfg, make_faults(scenario.get("faults", [])), seed)
    build_timeline(case)
    for a in case.attempts:
        render_framework(case, a)
    benign_noise(case)
    job = out_dir / "job"
    job.mkdir(parents=True, exist_ok=True)
    meta = [f"name = {toml_value(cfg.name)}", f"gpus_per_node = {cfg.gpus_per_node}"]
    if cfg.timezone_set:
        meta.append(f"timezone = {toml_value(cfg.tz_name)}")
    if cfg.kernel_style == "syslog":
        meta.append(f"year = {cfg.start.astimezone(cfg.tz).year}")
    (job / "job.toml").write_text("\n".join(meta) + "\n", encoding="utf-8")
    write_slurm(case, job)
    write_agent_logs(case, job)
    write_kernel_logs(case, job)
    write_dcgm(case, job)
    write_rank_logs(case, job)
    (out_dir / "expected.toml").write_text(dumps_toml(truth(case)), encoding="utf-8")
    return out_dir

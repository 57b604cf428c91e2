"""Attempts: run each attempt to its end (fault, scheduler, completion) and build the timeline."""

from __future__ import annotations

import random

from forensics.simulate.config import (
    BENIGN_FAULTS,
    REQUEUE_FAULTS,
    SCHED_FAULTS,
    SLOW_FAULTS,
    TAXONOMY,
    US,
    Fault,
)
from forensics.simulate.teardown import apply_fault
from forensics.simulate.timeline import Attempt, Case, RankExit, last_durable, register_slow, run_steps
from forensics.simulate.write_ranks import agent_prefix


def _fault_for(case: Case, index: int) -> Fault | None:
    for f in case.faults:
        if f.attempt == index and f.type not in SLOW_FAULTS | BENIGN_FAULTS:
            return f
    return None


def finish_completed(case: Case, a: Attempt) -> None:
    ends = [s.end for s in a.saves] + [s.end for s in a.steps] + [a.first_step_start]
    a.end = max(ends)
    a.end_reason = "completed"
    a.fault = None
    a.fault_t = None
    for r in range(len(a.hosts) * case.cfg.gpus_per_node):
        a.exits[r] = RankExit(a.end, 0, "ok")
    for host in a.hosts:
        apid = case.ids.agent_pid(a.index, host)
        case.agent_line(a.index, host, a.end, agent_prefix(case, a.end, "I", apid, "agent/server/api.py", 864)
                        + "[default] worker group successfully finished. Waiting 300 seconds for other agents to "
                        "finish.")


def run_attempt(case: Case, index: int, start: int, hosts: list[str]) -> Attempt:
    cfg = case.cfg
    rng = random.Random(f"{case.seed}:attempt:{index}")
    init = cfg.startup_s if index == 0 else cfg.restart_init_s
    a = Attempt(index, start, list(hosts), last_durable(case), start + int(init * US * rng.uniform(0.98, 1.02)))
    case.attempts.append(a)
    register_slow(case, a)
    f = _fault_for(case, index)
    if f is not None and f.type == "storage_error":
        run_steps(case, a)
        later = [s for s in a.saves if s.start >= start + int(f.at_s * US)]
        a.steps, a.saves, a.finish_note = [], [], ""
        if later:
            a.fault, a.fault_t = f, later[0].start + (later[0].end - later[0].start) * 2 // 5
    elif f is not None:
        a.fault, a.fault_t = f, start + int(f.at_s * US)
    run_steps(case, a)
    if a.finish_note or a.fault is None:
        finish_completed(case, a)
    else:
        apply_fault(case, a)
    return a


def build_timeline(case: Case) -> None:
    cfg = case.cfg
    hosts = [case.ids.host(i) for i in range(cfg.nodes)]
    start = 0
    restarts = 0
    for index in range(32):
        a = run_attempt(case, index, start, hosts)
        if a.end_reason == "completed" or a.fault is None:
            return
        if a.fault.type in SCHED_FAULTS - REQUEUE_FAULTS:
            return
        if a.fault.type not in REQUEUE_FAULTS:
            if restarts >= cfg.max_restarts:
                return
            restarts += 1
        action = TAXONOMY.get(a.fault.category, TAXONOMY["unknown"])[2]
        if action == "exclude_node_and_restart" and a.culprit_host in hosts and not cfg.retry_as_step:
            spare = case.ids.host(cfg.nodes + case.spares)
            case.spares += 1
            hosts = [spare if h == a.culprit_host else h for h in hosts]
        start = (a.end + int(cfg.queue_s * US)) // US * US + US

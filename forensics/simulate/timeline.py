"""The timeline model: steps, saves, attempts, slow episodes, the `Case` and the step runner."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from forensics.simulate.clocks import Clock
from forensics.simulate.config import SLOW_FAULTS, SPIKE_FAULTS, STRAGGLER_FAULTS, US, Config, Fault
from forensics.simulate.dialects import Dialect
from forensics.simulate.identities import Identity


@dataclass
class Step:
    index: int
    start: int
    end: int
    slow: float  # injected slowdown fraction (0 when healthy)
    extra: int = 0  # injected additive delay in µs (GC pause, data-loader stall)
    cause: str = ""  # fault type of the slowdown of this step ("" when healthy)


@dataclass
class Save:
    step: int
    start: int
    end: int
    durable: bool


@dataclass
class RankExit:
    t: int
    code: int
    how: str  # exception | signal | watchdog | nccl_error | sigterm | sched | killed | vanished | ok


@dataclass
class Attempt:
    index: int
    start: int
    hosts: list[str]
    resume_step: int
    first_step_start: int
    steps: list[Step] = field(default_factory=list)
    saves: list[Save] = field(default_factory=list)
    fault: Fault | None = None
    fault_t: int | None = None
    end: int = 0
    end_reason: str = "completed"
    exits: dict[int, RankExit] = field(default_factory=dict)
    culprit_host: str | None = None
    culprit_rank: int | None = None
    culprit_gpu: int | None = None
    finish_note: str = ""  # completed | duration

    def host_of(self, rank: int, gpn: int) -> str:
        return self.hosts[rank // gpn]

    @property
    def last_step_end(self) -> int | None:
        return self.steps[-1].end if self.steps else None


@dataclass
class SlowEpisode:
    start: int
    end: int
    slowdown: float  # multiplicative step-time factor (0 for spike episodes)
    fault: Fault
    host: str | None  # the straggler GPU; None for job-wide and spike episodes
    rank: int | None
    first_hit: int | None = None  # start of the first step the episode slowed

    @property
    def straggler(self) -> bool:
        return self.host is not None


def _spike_us(case: Case, ep: SlowEpisode, attempt: int, index: int) -> int:
    """Additive delay of step `index` from a spike episode (0 for steps it does not hit)."""
    p = ep.fault.params
    rng = random.Random(f"{case.seed}:spike:{attempt}:{index}")
    if ep.fault.type == "periodic_gc":
        period = max(1, int(p.get("period_steps", 50)))
        if index % period or index <= 1:
            return 0
        return int(float(p.get("spike_s", 3.0)) * rng.uniform(0.95, 1.05) * US)
    # dataloader_stall: irregular but recurring (on average every `mean_interval_steps` steps)
    if rng.random() >= 1.0 / max(1.0, float(p.get("mean_interval_steps", 40))):
        return 0
    return int(rng.uniform(float(p.get("stall_min_s", 4.0)), float(p.get("stall_max_s", 12.0))) * US)


class Case:
    """Everything the renderers need, accumulated while simulating."""

    def __init__(self, cfg: Config, faults: list[Fault], seed: int) -> None:
        self.cfg = cfg
        self.faults = faults
        self.seed = seed
        self.rng = random.Random(seed)
        self.ids = Identity(seed, cfg)
        self.clock = Clock(cfg.start, cfg.tz)
        self.attempts: list[Attempt] = []
        self.slow: list[SlowEpisode] = []
        self.rank_events: dict[tuple[int, int], list[tuple[int, str]]] = {}
        self.agent_events: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self.kernel_events: dict[str, list[tuple[int, str]]] = {}
        self.slurm_events: list[tuple[int, str]] = []
        self.error_files: dict[tuple[int, str, int], dict[str, Any]] = {}
        self.xids: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.gpu_states: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        self.replay_bumps: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.sacct_states: dict[int, dict[str, str]] = {}
        self.spares = 0
        self.dialect: Dialect | None = None  # None: the scenario's own formats (dialects.py)

    # -- event helpers
    def rank_line(self, attempt: int, rank: int, t: int, text: str) -> None:
        self.rank_events.setdefault((attempt, rank), []).append((t, text))

    def agent_line(self, attempt: int, host: str, t: int, text: str) -> None:
        self.agent_events.setdefault((attempt, host), []).append((t, text))

    def kernel_line(self, host: str, t: int, text: str) -> None:
        self.kernel_events.setdefault(host, []).append((t, text))

    @property
    def hosts(self) -> list[str]:
        seen: dict[str, None] = {}
        for a in self.attempts:
            for h in a.hosts:
                seen.setdefault(h, None)
        return list(seen)

    def step_time_us(self) -> int:
        return int(self.cfg.step_time_s * US)


def _slow_factor(case: Case, t: int) -> tuple[float, str]:
    f, cause = 0.0, ""
    for ep in case.slow:
        if ep.slowdown > 0 and ep.start <= t < ep.end and ep.slowdown > f:
            f, cause = ep.slowdown, ep.fault.type
    return f, cause


def _slow_extra(case: Case, t: int, attempt: int, index: int) -> tuple[int, str, SlowEpisode | None]:
    for ep in case.slow:
        if ep.fault.type in SPIKE_FAULTS and ep.start <= t < ep.end:
            extra = _spike_us(case, ep, attempt, index)
            if extra:
                return extra, ep.fault.type, ep
    return 0, "", None


PERSISTENT_US = 10**15  # "until the end of the job"


def register_slow(case: Case, attempt: Attempt) -> None:
    for f in case.faults:
        if f.type in SLOW_FAULTS and f.attempt == attempt.index:
            start = attempt.start + int(f.at_s * US)
            if f.params.get("persistent", False) or ("duration_s" not in f.params and f.type != "thermal_straggler"):
                end = PERSISTENT_US
            else:
                end = start + int(float(f.params.get("duration_s", 1800)) * US)
            node = min(f.node, len(attempt.hosts) - 1)
            if f.type in STRAGGLER_FAULTS:
                host: str | None = attempt.hosts[node]
                rank: int | None = node * case.cfg.gpus_per_node + f.gpu % case.cfg.gpus_per_node
            else:
                host = rank = None
            slow = float(f.params.get("slowdown", 0.15)) if f.type not in SPIKE_FAULTS else 0.0
            case.slow.append(SlowEpisode(start, end, slow, f, host, rank))


def run_steps(case: Case, a: Attempt) -> None:
    """Steps back to back with jitter; blocking saves; stops at the fault, the plan or the deadline."""
    cfg = case.cfg
    rng = random.Random(f"{case.seed}:steps:{a.index}")
    ideal = case.step_time_us()
    deadline = int(cfg.duration_s * US)
    t = a.first_step_start
    i = a.resume_step + 1
    tf = a.fault_t
    if tf is not None and tf <= t:
        return
    while i <= cfg.train_steps:
        if t >= deadline:
            a.finish_note = "duration"
            break
        slow, cause = _slow_factor(case, t)
        dur = max(1, int(ideal * (1.0 + slow) * rng.gauss(1.0, 0.012)))
        extra, extra_cause, ep = _slow_extra(case, t, a.index, i) if case.slow else (0, "", None)
        dur += extra
        if tf is not None and t + dur > tf:
            return
        a.steps.append(Step(i, t, t + dur, slow, extra, extra_cause or cause))
        if ep is not None and ep.first_hit is None:
            ep.first_hit = t
        for sep in case.slow:
            if sep.slowdown > 0 and sep.first_hit is None and slow > 0 and sep.start <= t < sep.end:
                sep.first_hit = t
        t += dur
        last = i == cfg.train_steps
        if cfg.checkpoint_interval and (i % cfg.checkpoint_interval == 0 or last):
            cost = max(1, int(cfg.checkpoint_cost_s * US * rng.uniform(0.9, 1.1)))
            if tf is not None and t + cost > tf:
                a.saves.append(Save(i, t, tf, False))
                return
            a.saves.append(Save(i, t, t + cost, True))
            t += cost
        i += 1
    else:
        a.finish_note = "completed"
    if a.finish_note == "duration" and cfg.checkpoint_interval and a.steps and (
        not a.saves or a.saves[-1].step != a.steps[-1].index
    ):
        cost = max(1, int(cfg.checkpoint_cost_s * US * rng.uniform(0.9, 1.1)))
        a.saves.append(Save(a.steps[-1].index, t, t + cost, True))


def last_durable(case: Case) -> int:
    best = 0
    for a in case.attempts:
        for s in a.saves:
            if s.durable:
                best = max(best, s.step)
    return best

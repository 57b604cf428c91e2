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
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

US = 1_000_000
PCI_BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
NIC_BUS = ("19", "2b", "3b", "5e", "9b", "ac", "bb", "dc")
PY = "/usr/lib/python3/dist-packages"
TORCH = "/usr/local/lib/python3.11/site-packages/torch"
BINARY = "/usr/bin/python3"
ENTRY = "pretrain_gpt.py"

# category -> (default kind, domain, default action), from reference/taxonomy.csv
TAXONOMY: dict[str, tuple[str, str, str]] = {
    "gpu_lost": ("crash", "hardware", "exclude_node_and_restart"),
    "gpu_memory": ("crash", "hardware", "exclude_node_and_restart"),
    "nvlink": ("crash", "hardware", "exclude_node_and_restart"),
    "gpu_driver_firmware": ("crash", "system_software", "exclude_node_and_restart"),
    "gpu_other_hardware": ("crash", "hardware", "exclude_node_and_restart"),
    "network_fabric": ("crash", "network", "restart"),
    "host_hardware": ("crash", "hardware", "exclude_node_and_restart"),
    "storage": ("crash", "storage", "restart"),
    "nccl_config": ("crash", "user", "stop_and_fix"),
    "cuda_error": ("crash", "user", "stop_and_fix"),
    "oom": ("crash", "user", "stop_and_fix"),
    "user_code": ("crash", "user", "stop_and_fix"),
    "framework_bug": ("crash", "system_software", "stop_and_fix"),
    "numerics": ("crash", "user", "rollback_and_skip_data"),
    "collective_desync": ("hang", "user", "stop_and_fix"),
    "comm_hang_unknown": ("hang", "unknown", "restart"),
    "preemption": ("preemption", "scheduler", "restart"),
    "time_limit": ("preemption", "scheduler", "restart"),
    "user_cancelled": ("preemption", "user", "none"),
    "straggler_hardware": ("slowdown", "hardware", "exclude_node_and_restart"),
    "slowdown_transient": ("slowdown", "unknown", "none"),
    "slowdown_workload": ("slowdown", "user", "stop_and_fix"),
    "unknown": ("unknown", "unknown", "investigate"),
}

# fault type -> (category, verdict kind)
FAULTS: dict[str, tuple[str, str]] = {
    "gpu_fell_off_bus": ("gpu_lost", "crash"),
    "ib_link_error": ("network_fabric", "hang"),
    "user_exception": ("user_code", "crash"),
    "cuda_oom": ("oom", "crash"),
    "thermal_straggler": ("straggler_hardware", "slowdown"),
    "preemption": ("preemption", "preemption"),
    "ecc_uncorrectable": ("gpu_memory", "crash"),
    "nvlink_error": ("nvlink", "crash"),
    "gsp_timeout": ("gpu_driver_firmware", "hang"),
    "nccl_init_failure": ("nccl_config", "crash"),
    "host_oom": ("oom", "crash"),
    "storage_error": ("storage", "crash"),
    "nan_loss": ("numerics", "crash"),
    "collective_desync": ("collective_desync", "hang"),
    "comm_hang": ("comm_hang_unknown", "hang"),
    "time_limit": ("time_limit", "preemption"),
    "user_cancelled": ("user_cancelled", "preemption"),
    "node_fail": ("host_hardware", "crash"),
    "segfault": ("framework_bug", "crash"),
    "illegal_memory_access": ("cuda_error", "crash"),
    "gpu_microcontroller": ("gpu_other_hardware", "crash"),
    "silent_kill": ("unknown", "unknown"),  # taxonomy default kind; the attempt itself ends as a crash
    "power_straggler": ("straggler_hardware", "slowdown"),
    "clocks_low_straggler": ("straggler_hardware", "slowdown"),
    "pcie_straggler": ("straggler_hardware", "slowdown"),
    "job_wide_slowdown": ("slowdown_transient", "slowdown"),
    "network_congestion": ("slowdown_transient", "slowdown"),
    "periodic_gc": ("slowdown_workload", "slowdown"),
    "dataloader_stall": ("slowdown_workload", "slowdown"),
    "healthy": ("", "completed"),
    "noisy_dcgm_sample": ("", "completed"),
}
# one slow GPU: truth has a [[stragglers]] row; fault type -> (default cause, DCGM state of the GPU)
STRAGGLER_FAULTS: dict[str, tuple[str, str]] = {
    "thermal_straggler": ("thermal", "thermal"),
    "power_straggler": ("power", "power"),
    "clocks_low_straggler": ("clocks_low", "clocks_low"),
    "pcie_straggler": ("pcie_degraded", "pcie"),
}
JOB_WIDE_FAULTS = {"job_wide_slowdown", "network_congestion"}  # every rank (1 + slowdown) slower, no culprit
SPIKE_FAULTS = {"periodic_gc", "dataloader_stall"}  # single steps longer by a few seconds on all ranks
SLOW_FAULTS = set(STRAGGLER_FAULTS) | JOB_WIDE_FAULTS | SPIKE_FAULTS
BENIGN_FAULTS = {"healthy", "noisy_dcgm_sample"}
SCHED_FAULTS = {"preemption", "time_limit", "user_cancelled"}
REQUEUE_FAULTS = {"preemption", "node_fail"}


# ----------------------------------------------------------------------------- versions / config


def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in str(text).split("+")[0].split(".") if p.isdigit())


@dataclass
class Config:
    name: str
    nodes: int
    gpus_per_node: int
    framework: str
    start: datetime
    tz: ZoneInfo
    tz_name: str
    step_time_s: float
    train_steps: int
    log_interval: int
    checkpoint_interval: int
    checkpoint_cost_s: float
    startup_s: float
    restart_init_s: float
    nccl: tuple[int, ...]
    nccl_text: str
    torch: tuple[int, ...]
    driver: tuple[int, ...]
    driver_text: str
    nccl_debug: str
    nccl_info_lines: int
    kernel_style: str
    dcgm: bool
    dcgm_interval_s: int
    timeout_s: float
    max_restarts: int
    queue_s: float
    duration_s: float
    host_prefix: str
    launcher_prefix: str
    job_id: int
    timezone_set: bool
    megatron_timers: bool = False
    dcgm_pcie_link: bool = False
    attempt_dir: str = "attempt-{k}"  # folder of attempt k under logs/; "" = one folder, files appended
    retry_as_step: bool = False  # restarts are new steps (.0, .1, ...) of one Slurm job, not requeues
    hf_save_end: bool = True  # HF: print `Model weights saved in ...` at the end of a save
    kernel_in_logs: bool = False  # also dump each node's dmesg (since boot) beside its process logs

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


def _parse_start(value: Any) -> datetime:
    if isinstance(value, datetime):
        dt = value
    else:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def make_config(job: dict[str, Any], seed: int) -> Config:
    tz_name = str(job.get("timezone", "UTC"))
    return Config(
        name=str(job.get("name", "simulated-job")),
        nodes=int(job.get("nodes", 2)),
        gpus_per_node=int(job.get("gpus_per_node", 8)),
        framework=str(job.get("framework", "megatron")),
        start=_parse_start(job.get("start", "2026-11-02T08:00:00Z")),
        tz=ZoneInfo(tz_name),
        tz_name=tz_name,
        step_time_s=float(job.get("step_time_s", 2.0)),
        train_steps=int(job.get("train_steps", 20000)),
        log_interval=max(1, int(job.get("log_interval", 5))),
        checkpoint_interval=int(job.get("checkpoint_interval", 500)),
        checkpoint_cost_s=float(job.get("checkpoint_cost_s", 30.0)),
        startup_s=float(job.get("startup_s", 120.0)),
        restart_init_s=float(job.get("restart_init_s", 90.0)),
        nccl=_ver(str(job.get("nccl_version", "2.21.5"))),
        nccl_text=str(job.get("nccl_version", "2.21.5")),
        torch=_ver(str(job.get("pytorch_version", "2.4"))),
        driver=_ver(str(job.get("driver_version", "550.90.07"))),
        driver_text=str(job.get("driver_version", "550.90.07")),
        nccl_debug=str(job.get("nccl_debug", "INFO")).upper(),
        nccl_info_lines=int(job.get("nccl_info_lines_per_rank", 40)),
        kernel_style=str(job.get("kernel_log_style", "dmesg_T")),
        dcgm=bool(job.get("dcgm", False)),
        dcgm_interval_s=int(job.get("dcgm_interval_s", 30)),
        timeout_s=float(job.get("collective_timeout_s", 600.0)),
        max_restarts=int(job.get("max_restarts", 0)),
        queue_s=float(job.get("queue_s", 300.0)),
        duration_s=float(job.get("duration_s", 7200.0)),
        host_prefix=str(job.get("host_prefix", "node")),
        launcher_prefix=str(job.get("launcher_prefix", "none")),
        job_id=int(job.get("job_id", 400000 + random.Random(f"{seed}:jobid").randrange(99999))),
        timezone_set="timezone" in job,
        megatron_timers=bool(job.get("megatron_timers", False)),
        dcgm_pcie_link=bool(job.get("dcgm_pcie_link", False)),
        attempt_dir=str(job.get("attempt_dir", "attempt-{k}")),
        retry_as_step=bool(job.get("retry_as_step", False)),
        hf_save_end=bool(job.get("hf_save_end", True)),
        kernel_in_logs=bool(job.get("kernel_in_logs", False)),
    )


@dataclass
class Fault:
    type: str
    attempt: int
    at_s: float
    node: int
    gpu: int
    params: dict[str, Any]

    @property
    def category(self) -> str:
        return self.params.get("category", FAULTS[self.type][0])

    @property
    def kind(self) -> str:
        return self.params.get("kind", FAULTS[self.type][1])


def make_faults(raw: list[dict[str, Any]]) -> list[Fault]:
    out = []
    for f in raw:
        ftype = str(f["type"])
        if ftype not in FAULTS:
            raise ValueError(f"unknown fault type {ftype!r}")
        params = {k: v for k, v in f.items() if k not in {"type", "attempt", "at_s", "node", "gpu"}}
        out.append(Fault(ftype, int(f.get("attempt", 0)), float(f.get("at_s", 0.0)),
                         int(f.get("node", 0)), int(f.get("gpu", 0)), params))
    return out


# ----------------------------------------------------------------------------- clocks / formats


class Clock:
    """Converts integer microseconds since the job start into formatted stamps."""

    def __init__(self, start: datetime, tz: ZoneInfo) -> None:
        self.start = start
        self.tz = tz

    def utc(self, t: int) -> datetime:
        return self.start + timedelta(microseconds=t)

    def local(self, t: int) -> datetime:
        return self.utc(t).astimezone(self.tz)

    def iso(self, t: int) -> str:
        return self.utc(t).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def iso_s(self, t: int) -> str:
        return self.utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")

    def megatron(self, t: int) -> str:
        return self.local(t).strftime("%Y-%m-%d %H:%M:%S.%f")

    def comma_ms(self, t: int) -> str:
        d = self.local(t)
        return d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d}"

    def glog(self, t: int, extra_ns: int = 0) -> str:
        d = self.local(t)
        return d.strftime("%m%d %H:%M:%S") + f".{d.microsecond * 1000 + extra_ns:09d}"

    def glog_py(self, t: int) -> str:
        d = self.local(t)
        return d.strftime("%m%d %H:%M:%S") + f".{(d.microsecond // 1000) * 1000:06d}"

    def slurm(self, t: int) -> str:
        return self.local(t).strftime("%Y-%m-%dT%H:%M:%S")

    def table(self, t: int) -> str:
        return self.local(t).strftime("%Y-%m-%d_%H:%M:%S")

    def nccl_ts(self, t: int) -> str:
        return self.local(t).strftime("[%Y-%m-%d %H:%M:%S] ")


def _elapsed(seconds: int) -> str:
    d, rem = divmod(max(0, seconds), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def hostlist(hosts: Iterable[str]) -> str:
    """Slurm-compressed host list: node-000,node-001,node-003 -> node-[000-001,003]."""
    groups: dict[str, list[str]] = {}
    order: list[str] = []
    for h in hosts:
        prefix, _, num = h.rpartition("-")
        if not num.isdigit():
            groups.setdefault(h, [])
            order.append(h)
            continue
        key = prefix + "-"
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(num)
    parts = []
    for key in order:
        nums = groups[key]
        if not nums:
            parts.append(key)
            continue
        nums = sorted(set(nums), key=int)
        ranges: list[str] = []
        run = [nums[0]]
        for n in nums[1:]:
            if int(n) == int(run[-1]) + 1:
                run.append(n)
            else:
                ranges.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
                run = [n]
        ranges.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
        parts.append(key + (ranges[0] if len(nums) == 1 else "[" + ",".join(ranges) + "]"))
    return ",".join(parts)


# ----------------------------------------------------------------------------- identities


@dataclass
class Identity:
    """Stable names for hosts, GPUs, processes (derived from the seed)."""

    seed: int
    cfg: Config

    def host(self, node: int) -> str:
        return f"{self.cfg.host_prefix}-{node:03d}"

    def ip(self, host: str) -> str:
        idx = int(host.rpartition("-")[2]) if host.rpartition("-")[2].isdigit() else 0
        return f"10.64.{idx // 200}.{idx % 200 + 11}"

    def uuid(self, host: str, gpu: int) -> str:
        r = random.Random(f"{self.seed}:uuid:{host}:{gpu}")
        h = f"{r.getrandbits(128):032x}"
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def serial(self, host: str, gpu: int) -> str:
        return str(1650000000000 + random.Random(f"{self.seed}:sn:{host}:{gpu}").randrange(10**9))

    @staticmethod
    def pci(gpu: int) -> str:
        return f"0000:{PCI_BUS[gpu % len(PCI_BUS)]}:00"

    def agent_pid(self, attempt: int, host: str) -> int:
        return random.Random(f"{self.seed}:pid:{attempt}:{host}").randrange(2000, 3_900_000)

    def pid(self, attempt: int, host: str, local: int) -> int:
        return self.agent_pid(attempt, host) + 17 + local

    def boot(self, host: str) -> int:
        """Boot time of a host in microseconds relative to the job start (negative)."""
        r = random.Random(f"{self.seed}:boot:{host}")
        return -r.randrange(2 * 86400, 40 * 86400) * US

    def comm_id(self, attempt: int) -> str:
        return f"0x{random.Random(f'{self.seed}:comm:{attempt}').getrandbits(64):016x}"

    def comm_ptr(self, attempt: int, rank: int) -> str:
        return f"0x{0x55d000000000 + random.Random(f'{self.seed}:ptr:{attempt}:{rank}').getrandbits(36):x}"


# ----------------------------------------------------------------------------- timeline


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


def _register_slow(case: Case, attempt: Attempt) -> None:
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


def _last_durable(case: Case) -> int:
    best = 0
    for a in case.attempts:
        for s in a.saves:
            if s.durable:
                best = max(best, s.step)
    return best


# ----------------------------------------------------------------------------- line helpers


def nccl_prefix(host: str, pid: int, tid: int, dev: int) -> str:
    return f"{host}:{pid}:{tid} [{dev}]"


def nccl_warn(case: Case, t: int, host: str, pid: int, tid: int, dev: int, loc: str, msg: str,
              func: str = "") -> str:
    """A WARN line with the blank line NCCL prints before it (ts prefix from 2.26)."""
    ts = case.clock.nccl_ts(t) if case.cfg.nccl >= (2, 26) else ""
    where = f"{loc} ({func})" if func and case.cfg.nccl >= (2, 30, 7) else loc
    return f"\n{ts}{nccl_prefix(host, pid, tid, dev)} {where} NCCL WARN {msg}"


def py_prefix(case: Case, rank: int, lines: list[str]) -> str:
    """Python stderr lines; torchrun (PyTorch >= 2.2) prefixes them with `[rankN]: `."""
    if case.cfg.torch >= (2, 2):
        return "\n".join(f"[rank{rank}]: {ln}" for ln in lines)
    return "\n".join(lines)


def c10_prefix(case: Case, rank: int, t: int, level: str, src: str, rng: random.Random) -> str:
    """C++ (c10/glog) log prefix in the PyTorch version's shape."""
    if case.cfg.torch >= (2, 4):
        return f"[rank{rank}]:[{level}{case.clock.glog(t, rng.randrange(1000))} {src}] "
    if case.cfg.torch >= (2, 2):
        return f"[rank{rank}]:[{level} {src}] "
    return f"[{level} {src}] "


def pg_tag(case: Case, rank: int) -> str:
    v = case.cfg.torch
    if v >= (2, 6):
        return f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    if v >= (2, 4):
        return f"[PG 0 (default_pg) Rank {rank}]"
    if v >= (2, 2):
        return f"[PG 0 Rank {rank}]"
    return f"[Rank {rank}]"


def traceback_lines(frames: list[tuple[str, int, str, str]], last: list[str]) -> list[str]:
    out = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        out.append(f'  File "{path}", line {line}, in {func}')
        out.append(f"    {code}")
    return out + last


MEGATRON_FRAMES = [
    ("/workspace/Megatron-LM/pretrain_gpt.py", 301, "<module>", "pretrain("),
    ("/workspace/Megatron-LM/megatron/training/training.py", 386, "pretrain",
     "iteration, num_floating_point_operations_so_far = train("),
    ("/workspace/Megatron-LM/megatron/training/training.py", 1354, "train",
     "train_step(forward_step_func,"),
    ("/workspace/Megatron-LM/megatron/training/training.py", 719, "train_step",
     "losses_reduced = forward_backward_func("),
]
STARTUP_FRAMES = [
    ("/workspace/Megatron-LM/pretrain_gpt.py", 301, "<module>", "pretrain("),
    ("/workspace/Megatron-LM/megatron/training/training.py", 278, "pretrain",
     "model, optimizer, opt_param_scheduler = setup_model_and_optimizer("),
    ("/workspace/Megatron-LM/megatron/training/training.py", 664, "setup_model_and_optimizer",
     "model = get_model(model_provider_func, model_type)"),
    ("/workspace/Megatron-LM/megatron/training/training.py", 541, "get_model",
     "model = [DDP(config,"),
]
CUDA_BOILER = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "",
]


def cuda_error_lines(msg: str) -> list[str]:
    frames = MEGATRON_FRAMES + [
        (f"{TORCH}/_tensor.py", 626, "backward", "torch.autograd.backward("),
        (f"{TORCH}/autograd/graph.py", 823, "_engine_run_backward",
         "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass"),
    ]
    return traceback_lines(frames, [f"RuntimeError: CUDA error: {msg}"] + CUDA_BOILER)


def xid_line(case: Case, host: str, gpu: int, t: int, xid: int, body: str,
             pid: int | str | None = None, name: str | None = None) -> None:
    """Kernel Xid line in the driver era's shape, plus the GPU identity pair before the first one."""
    key = (host, gpu)
    pci = case.ids.pci(gpu)
    if key not in case.xids:
        case.kernel_line(host, t, f"NVRM: GPU at PCI:{pci}: {case.ids.uuid(host, gpu)}")
        case.kernel_line(host, t, f"NVRM: GPU Board Serial Number: {case.ids.serial(host, gpu)}")
    case.xids.setdefault(key, []).append((t, xid))
    major = case.cfg.driver[0] if case.cfg.driver else 550
    head = f"NVRM: Xid (PCI:{pci}): {xid}, "
    if major < 400:
        case.kernel_line(host, t, head + body)
        return
    pid_txt = "'<unknown>'" if pid is None else str(pid)
    if major < 500:
        case.kernel_line(host, t, head + f"pid={pid_txt}, " + body)
        return
    name_txt = "<unknown>" if name is None else name
    case.kernel_line(host, t, head + f"pid={pid_txt}, name={name_txt}, " + body)


# ----------------------------------------------------------------------------- fault plans


@dataclass
class Plan:
    exits: dict[int, RankExit] = field(default_factory=dict)
    hung: set[int] = field(default_factory=set)
    vanished: set[str] = field(default_factory=set)
    block: dict[int, int] = field(default_factory=dict)
    optype: dict[int, str] = field(default_factory=dict)
    early: dict[int, tuple[int, str]] = field(default_factory=dict)
    flush_peers: dict[int, str] = field(default_factory=dict)  # rank -> peer ip (status 5 at abort)
    sched: tuple[int, str] | None = None
    sched_scope: str = "job"  # job | step
    seq: int = 0
    oom_kill: bool = False


@dataclass
class Ctx:
    case: Case
    a: Attempt
    f: Fault
    plan: Plan
    tf: int
    rng: random.Random

    @property
    def gpn(self) -> int:
        return self.case.cfg.gpus_per_node

    @property
    def node(self) -> int:
        return min(self.f.node, len(self.a.hosts) - 1)

    @property
    def host(self) -> str:
        return self.a.hosts[self.node]

    @property
    def gpu(self) -> int:
        return self.f.gpu % self.gpn

    @property
    def rank(self) -> int:
        return self.node * self.gpn + self.gpu

    def pid(self, rank: int) -> int:
        return self.case.ids.pid(self.a.index, self.a.hosts[rank // self.gpn], rank % self.gpn)

    def culprit(self, host: bool = True, rank: bool = True, gpu: bool = True) -> None:
        self.a.culprit_host = self.host if host else None
        self.a.culprit_rank = self.rank if rank else None
        self.a.culprit_gpu = self.gpu if gpu else None

    def raise_exc(self, rank: int, t: int, lines: list[str], exc: str, code: int = 1) -> None:
        """Rank `rank` dies of an uncaught Python exception at t (error file written)."""
        self.case.rank_line(self.a.index, rank, t, py_prefix(self.case, rank, lines))
        self.plan.exits[rank] = RankExit(t + int(self.rng.uniform(0.2, 1.5) * US), code, "exception")
        host = self.a.hosts[rank // self.gpn]
        self.case.error_files[(self.a.index, host, rank)] = {
            "message": {
                "message": exc,
                "extraInfo": {"py_callstack": "\n".join(lines) + "\n",
                              "timestamp": str(int(self.case.clock.utc(t).timestamp()))},
            }
        }


def _ring_neighbors(ctx: Ctx) -> list[int]:
    """Ranks on the other nodes that exchange data with the culprit node over the network."""
    n = len(ctx.a.hosts)
    if n < 2:
        return []
    nodes = sorted({(ctx.node - 1) % n, (ctx.node + 1) % n} - {ctx.node})
    return [nd * ctx.gpn + g for nd in nodes for g in range(ctx.gpn)]


def _aer_lines(ctx: Ctx) -> None:
    root = f"0000:{int(PCI_BUS[ctx.gpu], 16) - 1:02x}:01.0"
    t0 = ctx.tf - int(ctx.rng.uniform(30, 300) * US)
    for k in range(int(ctx.f.params.get("aer_corrected", 3))):
        t = t0 + k * int(ctx.rng.uniform(2, 20) * US)
        for ln in (f"pcieport {root}: AER: Corrected error received: id=0010",
                   f"pcieport {root}: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=0010(Transmitter ID)",
                   f"pcieport {root}:   device [8086:347a] error status/mask=00001000/00002000",
                   f"pcieport {root}:    [12] Replay Timer Timeout"):
            ctx.case.kernel_line(ctx.host, t, ln)
        ctx.case.replay_bumps.setdefault((ctx.host, ctx.gpu), []).append((t, ctx.rng.randrange(20, 200)))
    t = ctx.tf - 80_000
    for ln in (f"pcieport {root}: AER: Uncorrected (Fatal) error received: id=0010",
               f"pcieport {root}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)",
               f"pcieport {root}:   device [8086:347a] error status/mask=00000020/00000000",
               f"pcieport {root}:    [ 5] Surprise Down Error    (First)"):
        ctx.case.kernel_line(ctx.host, t, ln)


def fault_gpu_fell_off_bus(ctx: Ctx) -> None:
    case, host, gpu = ctx.case, ctx.host, ctx.gpu
    # kernel = false: the node was rebooted to recover the GPU and its kernel ring buffer went
    # with it (the dmesg collected afterwards holds none of the fault's lines)
    kernel = bool(ctx.f.params.get("kernel", True))
    if kernel and ctx.f.params.get("aer", True):
        _aer_lines(ctx)
    if kernel and ctx.f.params.get("thread_check", True):
        case.kernel_line(host, ctx.tf - 40_000, "NVRM: _threadNodeCheckTimeout: API_GPU_ATTACHED_SANITY_CHECK failed!")
    if kernel:
        xid_line(case, host, gpu, ctx.tf, 79, "GPU has fallen off the bus.")
        case.kernel_line(host, ctx.tf + 300, f"NVRM: GPU {case.ids.pci(gpu)}.0: GPU has fallen off the bus.")
    if kernel and case.cfg.driver >= (535,):
        xid_line(case, host, gpu, ctx.tf + 9000, 154,
                 "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
    case.gpu_states.setdefault((host, gpu), []).append((ctx.tf, 1 << 62, "lost"))
    ctx.plan.hung.add(ctx.rank)
    ip = case.ids.ip(host)
    for r in _ring_neighbors(ctx):
        if r % ctx.gpn == gpu:
            ctx.plan.flush_peers[r] = ip
    ctx.culprit()


def _ib_warn_text(case: Case, ip: str, port: int, nic: int, status: int, verr: int) -> str:
    v = case.cfg.nccl
    peer = f"{ip}<{port}>"
    if v <= (2, 18, 99):
        return (f"NET/IB : Got completion from peer {peer} with error {status}, opcode 0, len 0, "
                f"vendor err {verr} (Recv)")
    if v < (2, 23):
        return f"NET/IB : Got completion from peer {peer} with status={status} opcode=0 len=0 vendor err {verr} (Recv)"
    return (f"NET/IB: Got completion from peer {peer} with status={status} opcode=0 len=0 vendor err {verr} "
            f"(Recv) hca mlx5_{nic}")


def _ib_loc(case: Case) -> str:
    return "transport/net_ib.cc:1696" if case.cfg.nccl >= (2, 19) else "transport/net_ib.cc:1295"


def fault_ib_link_error(ctx: Ctx) -> None:
    case, host = ctx.case, ctx.host
    nic = int(ctx.f.params.get("nic", ctx.gpu))
    bus = NIC_BUS[nic % len(NIC_BUS)]
    dev = f"mlx5_core 0000:{bus}:00.0"
    if ctx.f.params.get("kernel", True):  # false: the node's kernel log holds none of the fault's lines
        case.kernel_line(host, ctx.tf, f"{dev}: mlx5_port_module_event:1142:(pid 0): Port module event[error]: "
                         f"module {nic}, Cable error, Bus stuck (I2C or data shorted)")
        case.kernel_line(host, ctx.tf + 2000, f"{dev} ibp{int(bus, 16)}s0: Link down")
    ip = case.ids.ip(host)
    # culprit_reports = true: the node's own ranks see the dead link too, each with the peer its
    # channel connects to, on every other node in turn (many distinct peers)
    others = [h for h in ctx.a.hosts if h != host]
    own = [ctx.node * ctx.gpn + g for g in range(ctx.gpn)] if ctx.f.params.get("culprit_reports", False) and others else []
    peer_of = {r: case.ids.ip(others[k % len(others)]) for k, r in enumerate(own)}
    for r in _ring_neighbors(ctx) + own:
        t = ctx.tf + int(ctx.rng.uniform(18.0, 18.4) * US)
        rhost = ctx.a.hosts[r // ctx.gpn]
        pid, tid = ctx.pid(r), ctx.pid(r) + 211
        lr = r % ctx.gpn
        msg = _ib_warn_text(case, peer_of.get(r, ip), ctx.rng.randrange(40000, 60000), lr, 12, 129)
        text = nccl_warn(case, t, rhost, pid, tid, lr, _ib_loc(case), msg, "ncclIbTest")
        if case.cfg.nccl_debug == "INFO":
            p = nccl_prefix(rhost, pid, tid, lr)
            text += f"\n{p} NCCL INFO transport/net.cc:1298 -> 6\n{p} NCCL INFO proxy.cc:694 -> 6"
            text += f"\n{p} NCCL INFO proxy.cc:874 -> 6 [Progress Thread]"
        case.rank_line(ctx.a.index, r, t, text)
        ctx.plan.early[r] = (t + int(ctx.rng.uniform(0.05, 0.3) * US), msg)
    ctx.culprit(rank=False, gpu=False)


USER_EXC = {
    "KeyError": ("KeyError: 'labels'", [
        ("/workspace/Megatron-LM/pretrain_gpt.py", 187, "forward_step",
         "tokens, labels, loss_mask, attention_mask, position_ids = get_batch("),
        ("/workspace/Megatron-LM/pretrain_gpt.py", 112, "get_batch",
         "batch = get_batch_on_this_tp_rank(data_iterator)"),
        ("/workspace/Megatron-LM/megatron/training/utils.py", 299, "get_batch_on_this_tp_rank",
         "'labels': data[\"labels\"].cuda(non_blocking=True),"),
    ]),
    "AssertionError": ("AssertionError: sequence length 4097 exceeds max_position_embeddings 4096", [
        ("/workspace/Megatron-LM/pretrain_gpt.py", 187, "forward_step",
         "tokens, labels, loss_mask, attention_mask, position_ids = get_batch("),
        ("/workspace/custom/data/packing.py", 88, "pack_sequences",
         "assert len(seq) <= self.max_len, f\"sequence length {len(seq)} exceeds max_position_embeddings {self.max_len}\""),
    ]),
    "FileNotFoundError": ("FileNotFoundError: [Errno 2] No such file or directory: "
                          "'/data/tokenized/shard_00731.bin'", [
        ("/workspace/Megatron-LM/megatron/core/datasets/indexed_dataset.py", 412, "__init__",
         "self.bin_reader = _MMapBinReader(self.path_prefix + '.bin')"),
    ]),
}


def fault_user_exception(ctx: Ctx) -> None:
    name = str(ctx.f.params.get("exception", "KeyError"))
    last, frames = USER_EXC.get(name, USER_EXC["KeyError"])
    base = MEGATRON_FRAMES if ctx.a.steps or ctx.tf >= ctx.a.first_step_start else STARTUP_FRAMES
    lines = traceback_lines(base + frames, [last])
    ctx.raise_exc(ctx.rank, ctx.tf, lines, last)
    ctx.culprit(gpu=False)


def fault_cuda_oom(ctx: Ctx) -> None:
    extra = [int(r) for r in ctx.f.params.get("ranks", [])]
    ranks = [ctx.rank] + sorted(set(extra) - {ctx.rank})
    v = ctx.case.cfg.torch
    for k, r in enumerate(ranks):
        g = r % ctx.gpn
        free = ctx.rng.uniform(0.3, 1.5)
        if v >= (2, 1):
            msg = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {g} has a total "
                   f"capacity of 79.11 GiB of which {free:.2f} GiB is free. Including non-PyTorch memory, this "
                   f"process has {79.11 - free:.2f} GiB memory in use. Of the allocated memory 74.50 GiB is "
                   "allocated by PyTorch, and 2.10 GiB is reserved by PyTorch but unallocated. If reserved but "
                   "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
                   "avoid fragmentation.  See documentation for Memory Management  "
                   "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
            if v < (2, 5):
                msg = msg.replace("torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError")
        else:
            msg = (f"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU {g}; 79.11 GiB total "
                   f"capacity; 74.50 GiB already allocated; {free:.2f} GiB free; 76.60 GiB reserved in total by "
                   "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
                   "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")
        frames = STARTUP_FRAMES + [
            (f"{TORCH}/nn/modules/module.py", 1160, "to", "return self._apply(convert)"),
            (f"{TORCH}/nn/modules/module.py", 1158, "convert",
             "return t.to(device, dtype if t.is_floating_point() or t.is_complex() else None, non_blocking)"),
        ]
        t = ctx.tf + (0 if k == 0 else int(ctx.rng.uniform(0.05, 2.0) * US))
        ctx.raise_exc(r, t, traceback_lines(frames, [msg]), msg.split(". Tried")[0])
    ctx.culprit(gpu=False)


def fault_thermal_straggler(ctx: Ctx) -> None:  # registered as a slow episode, not an ending
    return None


def fault_sched(ctx: Ctx, reason: str) -> None:
    ctx.plan.sched = (ctx.tf, reason)


def fault_preemption(ctx: Ctx) -> None:
    fault_sched(ctx, "PREEMPTION")


def fault_time_limit(ctx: Ctx) -> None:
    fault_sched(ctx, "TIME LIMIT")


def fault_user_cancelled(ctx: Ctx) -> None:
    fault_sched(ctx, "")


def fault_node_fail(ctx: Ctx) -> None:
    case, host = ctx.case, ctx.host
    cpu = ctx.rng.randrange(0, 96)
    t = ctx.tf - 150_000
    for ln in (f"mce: [Hardware Error]: CPU {cpu}: Machine Check Exception: 5 Bank 4: b200000000070f0f",
               "mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff9a2a1b3c> {intel_idle+0x5c/0x120}",
               f"mce: [Hardware Error]: TSC 4fd6b8c2e1a ADDR fef1ce40 MISC 0 PROCESSOR 0:806f8 TIME "
               f"{int(case.clock.utc(ctx.tf).timestamp())} SOCKET {cpu // 48} APIC {cpu * 2:x} microcode 2b000571",
               "mce: [Hardware Error]: Run the above through 'mcelog --ascii'",
               "Kernel panic - not syncing: Fatal machine check"):
        case.kernel_line(host, t, ln)
    ctx.plan.vanished.add(host)
    slurmd_timeout = float(ctx.f.params.get("slurmd_timeout_s", 300))
    ctx.plan.sched = (ctx.tf + int(slurmd_timeout * US), "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS")
    ctx.culprit(rank=False, gpu=False)


def fault_host_oom(ctx: Ctx) -> None:
    case, host, pid = ctx.case, ctx.host, ctx.pid(ctx.rank)
    rss = ctx.rng.randrange(480_000_000, 900_000_000)
    t = ctx.tf
    for ln in ("python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
               "oom_score_adj=0",
               f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=step_0,mems_allowed=0-1,"
               f"oom_memcg=/slurm/uid_1000/job_{case.cfg.job_id},task_memcg=/slurm/uid_1000/job_{case.cfg.job_id}"
               f"/step_0/user/task_0,task=python,pid={pid},uid=1000",
               f"Memory cgroup out of memory: Killed process {pid} (python) total-vm:{rss + 91_234_512}kB, "
               f"anon-rss:{rss}kB, file-rss:{ctx.rng.randrange(100000, 900000)}kB, shmem-rss:0kB, UID:1000 "
               f"pgtables:{rss // 480}kB oom_score_adj:0"
               if ctx.f.params.get("cgroup", False) else
               f"Out of memory: Killed process {pid} (python) total-vm:{rss + 91_234_512}kB, anon-rss:{rss}kB, "
               f"file-rss:{ctx.rng.randrange(100000, 900000)}kB, shmem-rss:0kB, UID:1000 pgtables:{rss // 480}kB "
               "oom_score_adj:0"):
        case.kernel_line(host, t, ln)
    case.kernel_line(host, t + 900_000, f"oom_reaper: reaped process {pid} (python), now anon-rss:0kB, "
                     "file-rss:0kB, shmem-rss:0kB")
    ctx.plan.exits[ctx.rank] = RankExit(t + 20_000, -9, "signal")
    ctx.plan.oom_kill = True
    ctx.culprit(gpu=False)


def fault_storage_error(ctx: Ctx) -> None:
    errno = int(ctx.f.params.get("errno", 5))
    text = {5: "[Errno 5] Input/output error", 116: "[Errno 116] Stale file handle"}.get(
        errno, f"[Errno {errno}] Input/output error")
    step = ctx.a.saves[-1].step if ctx.a.saves else 0
    path = f"/ckpt/iter_{step:07d}/__{ctx.rank}_0.distcp"
    frames = MEGATRON_FRAMES[:3] + [
        ("/workspace/Megatron-LM/megatron/training/training.py", 1421, "train",
         "save_checkpoint_and_time(iteration, model, optimizer,"),
        ("/workspace/Megatron-LM/megatron/training/checkpointing.py", 421, "save_checkpoint",
         "dist_checkpointing.save(state_dict, checkpoint_name, save_strategy,"),
        (f"{TORCH}/distributed/checkpoint/filesystem.py", 356, "_write_files_from_queue",
         "with create_stream(file_name, \"wb\") as stream:"),
    ]
    msg = f"OSError: {text}: '{path}'"
    ctx.raise_exc(ctx.rank, ctx.tf, traceback_lines(frames, [msg]), msg)
    ctx.a.culprit_host = ctx.a.culprit_rank = ctx.a.culprit_gpu = None


def fault_nan_loss(ctx: Ctx) -> None:
    it = (ctx.a.steps[-1].index + 1) if ctx.a.steps else ctx.a.resume_step + 1
    for r in range(len(ctx.a.hosts) * ctx.gpn):
        host = ctx.a.hosts[r // ctx.gpn]
        msg = (f"RuntimeError: Rank {r}, node {host}, device {r % ctx.gpn}, iteration {it}: Unexpected result "
               "nan (message='found NaN in local forward loss calculation')")
        frames = MEGATRON_FRAMES + [
            ("/workspace/Megatron-LM/megatron/core/rerun_state_machine.py", 520, "validate_result",
             "raise RuntimeError(full_message)"),
        ]
        t = ctx.tf + int(ctx.rng.uniform(0.0, 0.4) * US)
        ctx.raise_exc(r, t, traceback_lines(frames, [msg]), msg)
    ctx.a.culprit_host = ctx.a.culprit_rank = ctx.a.culprit_gpu = None


def fault_collective_desync(ctx: Ctx) -> None:
    ctx.plan.optype[ctx.rank] = str(ctx.f.params.get("optype", "BROADCAST"))
    ctx.culprit(gpu=False)


def fault_comm_hang(ctx: Ctx) -> None:
    ctx.a.culprit_host = ctx.a.culprit_rank = ctx.a.culprit_gpu = None


def fault_gsp_timeout(ctx: Ctx) -> None:
    case, host, gpu = ctx.case, ctx.host, ctx.gpu
    funcs = [(76, "GSP_RM_CONTROL", "0x20803032 0x58c"), (103, "GSP_RM_ALLOC", "0x2081 0x4"),
             (10, "FREE", "0xa55a0040 0x0")]
    for k, (num, fname, args) in enumerate(funcs):
        t = ctx.tf + k * 6 * US
        proc = ("nvidia-smi", "nv-hostengine", "python")[k % 3]
        xid_line(case, host, gpu, t, 119,
                 f"Timeout after 6s of waiting for RPC response from GPU{gpu} GSP! Expected function {num} "
                 f"({fname}) ({args}).", pid=ctx.rng.randrange(1000, 4_000_000), name=proc)
        case.kernel_line(host, t + 100, f"NVRM: GPU{gpu} GSP RPC buffer contains function {num} ({fname}) "
                         "and data 0x0000000000000000 0x0000000000000000.")
    xid_line(case, host, gpu, ctx.tf + 19 * US, 154,
             "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    ctx.plan.hung.add(ctx.rank)
    ctx.culprit()


def fault_nvlink_error(ctx: Ctx) -> None:
    case, host, gpu = ctx.case, ctx.host, ctx.gpu
    link = int(ctx.f.params.get("link", 5))
    xid_line(case, host, gpu, ctx.tf, 74, f"NVLink: fatal error detected on link {link}")
    pid = ctx.pid(ctx.rank)
    text = nccl_warn(case, ctx.tf + 50_000, host, pid, pid, gpu, "enqueue.cc:1560",
                     "Cuda failure 'uncorrectable NVLink error detected during the execution'")
    case.rank_line(ctx.a.index, ctx.rank, ctx.tf + 50_000, text)
    lines = traceback_lines(MEGATRON_FRAMES, [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        f"unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version {case.cfg.nccl_text}",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "Last error:",
        "Cuda failure 'uncorrectable NVLink error detected during the execution'"])
    ctx.raise_exc(ctx.rank, ctx.tf + 60_000, lines, "DistBackendError: NCCL error: unhandled cuda error")
    ctx.culprit()


def fault_ecc_uncorrectable(ctx: Ctx) -> None:
    case, host, gpu = ctx.case, ctx.host, ctx.gpu
    pid = ctx.pid(ctx.rank)
    xid_line(case, host, gpu, ctx.tf, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in "
             "the framebuffer at physAddr 0x7fdf0de80 partition 5, subpartition 1", pid=None)
    xid_line(case, host, gpu, ctx.tf + 1000, 63, "Row Remapper: New row marked for remapping, reset gpu to activate.",
             pid=pid, name="python3")
    contained = bool(ctx.f.params.get("contained", False))
    xid = 94 if contained else 95
    body = ("Contained: SM (0x1). RST: No, D-RST: No" if contained
            else "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No")
    xid_line(case, host, gpu, ctx.tf + 2000, xid, body, pid=pid, name="python3")
    lines = cuda_error_lines("uncorrectable ECC error encountered")
    ctx.raise_exc(ctx.rank, ctx.tf + 150_000, lines, "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    ctx.culprit()


def fault_illegal_memory_access(ctx: Ctx) -> None:
    case, host, gpu = ctx.case, ctx.host, ctx.gpu
    pid = ctx.pid(ctx.rank)
    xid_line(case, host, gpu, ctx.tf, 31,
             "channel 0x00000012, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC3 GPCCLIENT_T1_7 faulted @ "
             "0x7f2a_bc000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ", pid=pid, name="python3")
    lines = cuda_error_lines("an illegal memory access was encountered")
    ctx.raise_exc(ctx.rank, ctx.tf + 120_000, lines,
                  "RuntimeError: CUDA error: an illegal memory access was encountered")
    ctx.culprit()


def fault_segfault(ctx: Ctx) -> None:
    case, host, pid = ctx.case, ctx.host, ctx.pid(ctx.rank)
    case.kernel_line(host, ctx.tf, f"python3[{pid}]: segfault at 0 ip 00007f3a2c1d4e10 sp 00007ffd4b2e8a30 "
                     "error 4 in libtorch_cuda.so[7f3a1a000000+2c000000] likely on CPU 17 (core 9, socket 0)")
    lines = ["Fatal Python error: Segmentation fault", "",
             f"Thread 0x{0x7f3a00000000 + pid:012x} (most recent call first):",
             f'  File "{TORCH}/autograd/graph.py", line 823 in _engine_run_backward',
             f'  File "{TORCH}/_tensor.py", line 626 in backward',
             '  File "/workspace/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 395 in backward_step',
             '  File "/workspace/Megatron-LM/megatron/training/training.py", line 719 in train_step',
             '  File "/workspace/Megatron-LM/pretrain_gpt.py", line 301 in <module>', ""]
    case.rank_line(ctx.a.index, ctx.rank, ctx.tf, py_prefix(case, ctx.rank, lines))
    ctx.plan.exits[ctx.rank] = RankExit(ctx.tf + 5000, -11, "signal")
    ctx.culprit(gpu=False)


def fault_nccl_init_failure(ctx: Ctx) -> None:
    case = ctx.case
    root_ip = case.ids.ip(ctx.a.hosts[0])
    port = ctx.rng.randrange(30000, 60000)
    last_t = ctx.tf
    for r in range(ctx.gpn, len(ctx.a.hosts) * ctx.gpn):
        host = ctx.a.hosts[r // ctx.gpn]
        pid, lr = ctx.pid(r), r % ctx.gpn
        t = ctx.tf + int(ctx.rng.uniform(0, 1.5) * US)
        msg = f"socketStartConnect: Connect to {root_ip}<{port}> failed : Connection refused"
        text = nccl_warn(case, t, host, pid, pid, lr, "misc/socket.cc:484", msg, "socketStartConnect")
        if case.cfg.nccl_debug == "INFO":
            p = nccl_prefix(host, pid, pid, lr)
            text += (f"\n{p} NCCL INFO misc/socket.cc:565 -> 2\n{p} NCCL INFO misc/socket.cc:619 -> 2"
                     f"\n{p} NCCL INFO bootstrap.cc:285 -> 2\n{p} NCCL INFO init.cc:1586 -> 2")
        case.rank_line(ctx.a.index, r, t, text)
        exc = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
               f"ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
               f"NCCL version {case.cfg.nccl_text}")
        if case.cfg.torch < (2, 1):
            exc = exc.replace("torch.distributed.DistBackendError", "RuntimeError")
        lines = traceback_lines(STARTUP_FRAMES[:3] + [
            (f"{TORCH}/distributed/distributed_c10d.py", 3936, "barrier",
             "work = default_pg.barrier(opts=opts)")],
            [exc, "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
             "error. ", "Last error:", msg])
        ctx.raise_exc(r, t + 30_000, lines, exc.split(": ", 1)[0] + ": NCCL error: unhandled system error")
        last_t = max(last_t, t)
    ctx.plan.sched = (last_t + int(ctx.rng.uniform(1, 3) * US), "TASK FAILURE")
    ctx.plan.sched_scope = "step"
    ctx.a.culprit_host = ctx.a.culprit_rank = ctx.a.culprit_gpu = None


def fault_healthy(ctx: Ctx) -> None:  # benign noise only; rendered in benign_noise
    return None


def fault_gpu_microcontroller(ctx: Ctx) -> None:
    """Xid 62 (internal micro-controller halt), then Xid 45 on the app's channels; the culprit dies of a
    CUDA `unspecified launch failure`."""
    case, host, gpu = ctx.case, ctx.host, ctx.gpu
    pid = ctx.pid(ctx.rank)
    words = f"{ctx.rng.getrandbits(16):04x}({ctx.rng.getrandbits(16):04x}) {ctx.rng.getrandbits(32):08x} " \
            f"{ctx.rng.getrandbits(32):08x}"
    xid_line(case, host, gpu, ctx.tf, 62, words)
    for k, ch in enumerate(int(c) for c in ctx.f.params.get("channels", [8, 9, 10])):
        xid_line(case, host, gpu, ctx.tf + 40_000 + k * 300, 45, f"Ch {ch:08x}", pid=pid, name="python3")
    if ctx.f.params.get("reset_required", False) and case.cfg.driver >= (535,):
        xid_line(case, host, gpu, ctx.tf + 60_000, 154,
                 "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    lines = cuda_error_lines("unspecified launch failure")
    ctx.raise_exc(ctx.rank, ctx.tf + 120_000, lines, "RuntimeError: CUDA error: unspecified launch failure")
    ctx.culprit()


def fault_silent_kill(ctx: Ctx) -> None:
    """Every worker of the attempt dies of SIGKILL within 0.25 s; no OOM, no scheduler reason, no traceback."""
    for r in range(len(ctx.a.hosts) * ctx.gpn):
        ctx.plan.exits[r] = RankExit(ctx.tf + int(ctx.rng.uniform(0.0, 0.25) * US), -9, "signal")
    ctx.a.culprit_host = ctx.a.culprit_rank = ctx.a.culprit_gpu = None


def _slow_noop(ctx: Ctx) -> None:  # slow episodes and benign noise never end an attempt
    return None


FAULT_FUNCS = {name: globals()[f"fault_{name}"] if name not in SLOW_FAULTS | BENIGN_FAULTS
               else globals().get(f"fault_{name}", _slow_noop) for name in FAULTS}


# ----------------------------------------------------------------------------- watchdog / teardown


def watchdog_text(case: Case, rank: int, fire: int, seq: int, op: str, ran_ms: int,
                  rng: random.Random) -> str:
    """The ProcessGroupNCCL watchdog timeout and its companions, in the PyTorch version's shape."""
    v = case.cfg.torch
    tmo = int(case.cfg.timeout_s * 1000)
    numel = "" if v < (2, 1) else ", NumelIn=466119168, NumelOut=466119168"
    work = f"WorkNCCL(SeqNum={seq}, OpType={op}{numel}, Timeout(ms)={tmo})"
    main = f"[Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran_ms} milliseconds " \
           "before timing out."
    src = "ProcessGroupNCCL.cpp"

    def pre(dt: int, line: int, lvl: str = "E") -> str:
        return c10_prefix(case, rank, fire + dt, lvl, f"{src}:{line}", rng)

    some = "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, " \
           "subsequent GPU operations might run on corrupted/incomplete data."
    if v < (2, 0):
        return "\n".join([pre(0, 737) + main,
                          pre(200, 414) + some + " To avoid this inconsistency, we are taking the entire process down.",
                          "terminate called after throwing an instance of 'std::runtime_error'",
                          f"  what():  {main}"])
    if v < (2, 2):
        out = [pre(0, 737) + main, pre(150, 455) + some,
               pre(160, 460) + "To avoid data inconsistency, we are taking the entire process down."]
        if v >= (2, 1):
            out.append(pre(170, 916) + f"[Rank {rank}] NCCL watchdog thread terminated with exception: {main}")
        return "\n".join(out + ["terminate called after throwing an instance of 'std::runtime_error'",
                                f"  what():  {main}"])
    tag = pg_tag(case, rank)
    line_main = 632 if v >= (2, 4) else 565
    out = [pre(0, line_main) + main]
    last_enq = seq + rng.randrange(0, 3)
    if v >= (2, 6):
        out.append(pre(300, 2268) + f"{tag}  failure detected by watchdog at work sequence id: {seq} PG status: "
                   f"last enqueued work: {last_enq}, last completed work: {seq - 1}")
        out.append(pre(350, 670) + "Stack trace of the failed collective not found, potentially because "
                   "FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a "
                   "non-zero value.")
    elif v >= (2, 4):
        out.append(pre(300, 1664) + f"{tag} Exception (either an error or timeout) detected by watchdog at "
                   f"work: {seq}, last enqueued NCCL work: {last_enq}, last completed NCCL work: {seq - 1}.")
    elif v >= (2, 3):
        out.append(pre(300, 1537) + f"{tag} Timeout at NCCL work: {seq}, last enqueued NCCL work: {last_enq}, "
                   f"last completed NCCL work: {seq - 1}.")
    out.append(pre(400, 577) + f"[Rank {rank}] {some}")
    out.append(pre(410, 583) + f"[Rank {rank}] To avoid data inconsistency, we are taking the entire process down.")
    exc = f"{tag} Process group watchdog thread terminated with exception: {main}"
    out.append(pre(500, 1418) + exc)
    frames = [
        f"Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{line_main} "
        "(most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1e4d6b9446 in "
        f"{TORCH}/lib/libc10.so)",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        f"std::ratio<1l, 1000l> > >) + 0x282 (0x7f1e4e9a8772 in {TORCH}/lib/libtorch_cuda.so)",
        f"frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f1e4e9af1b3 in {TORCH}/lib/libtorch_cuda.so)",
        f"frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f1e4e9b0b8d in {TORCH}/lib/libtorch_cuda.so)",
        "frame #4: <unknown function> + 0xdc253 (0x7f1e9c4b0253 in /lib/x86_64-linux-gnu/libstdc++.so.6)",
        "frame #5: <unknown function> + 0x94ac3 (0x7f1ea1a94ac3 in /lib/x86_64-linux-gnu/libc.so.6)",
        "frame #6: <unknown function> + 0x126850 (0x7f1ea1b26850 in /lib/x86_64-linux-gnu/libc.so.6)",
        "",
    ]
    out += frames
    out += ["terminate called after throwing an instance of 'c10::DistBackendError'", f"  what():  {exc}"]
    out += frames
    return "\n".join(out)


def nccl_error_text(case: Case, rank: int, t: int, last_warn: str, rng: random.Random) -> str:
    """Watchdog abort on an asynchronous NCCL error (ncclRemoteError)."""
    v = case.cfg.torch
    if v < (2, 2):
        return "\n".join(["terminate called after throwing an instance of 'std::runtime_error'",
                          f"  what():  NCCL error: remote process exited or there was a network error, NCCL version "
                          f"{case.cfg.nccl_text}",
                          "ncclRemoteError: A call failed possibly due to a network error or a remote process "
                          "exiting prematurely.", "Last error:", last_warn])
    tag = pg_tag(case, rank)
    head = (f"{tag} Process group watchdog thread terminated with exception: NCCL error: remote process exited or "
            f"there was a network error, NCCL version {case.cfg.nccl_text}")
    detail = ["ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
              "prematurely.", "Last error:", last_warn,
              "Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/"
              "ProcessGroupNCCL.cpp:1723 (most recent call first):"]
    return "\n".join([c10_prefix(case, rank, t, "E", "ProcessGroupNCCL.cpp:1423", rng) + head] + detail +
                     ["terminate called after throwing an instance of 'c10::DistBackendError'",
                      f"  what():  {head}"] + detail)


def abort_info(case: Case, a: Attempt, rank: int) -> str:
    host = a.hosts[rank // case.cfg.gpus_per_node]
    lr = rank % case.cfg.gpus_per_node
    pid = case.ids.pid(a.index, host, lr)
    bus = PCI_BUS[lr] + "000"
    return (f"{nccl_prefix(host, pid, pid + 97, lr)} NCCL INFO comm {case.ids.comm_ptr(a.index, rank)} rank {rank} "
            f"nranks {len(a.hosts) * case.cfg.gpus_per_node} cudaDev {lr} busId {bus} - Abort COMPLETE")


def seq_at(case: Case, a: Attempt) -> int:
    last = a.steps[-1].index if a.steps else a.resume_step
    done = last - a.resume_step
    return 24 + done * 8 + 3


@dataclass
class Pending:
    """A rank's natural end before torchelastic and Slurm act."""

    exit: RankExit | None
    fire: int = 0
    block: int = 0


def natural_ends(ctx: Ctx) -> dict[int, Pending]:
    case, a, plan, rng = ctx.case, ctx.a, ctx.plan, ctx.rng
    timeout = int(case.cfg.timeout_s * US)
    out: dict[int, Pending] = {}
    for r in range(len(a.hosts) * ctx.gpn):
        host = a.hosts[r // ctx.gpn]
        if host in plan.vanished:
            out[r] = Pending(RankExit(ctx.tf, -9, "vanished"))
            continue
        if r in plan.exits:
            out[r] = Pending(plan.exits[r])
        elif r in plan.hung:
            out[r] = Pending(None)
        elif r in plan.early:
            out[r] = Pending(RankExit(plan.early[r][0] + int(rng.uniform(0.05, 0.6) * US), -6, "nccl_error"),
                             fire=plan.early[r][0])
        else:
            block = plan.block.get(r, ctx.tf + int(rng.uniform(0.0, 0.1) * case.step_time_us()))
            fire = block + timeout + int(rng.uniform(0.02, 0.2) * US)
            out[r] = Pending(RankExit(fire + int(rng.uniform(0.05, 0.4) * US), -6, "watchdog"), fire, block)
        if plan.sched is not None:
            p = out[r]
            if p.exit is None or plan.sched[0] < p.exit.t:
                out[r] = Pending(RankExit(plan.sched[0] + int(rng.uniform(0.2, 2.0) * US), -15, "sched"))
    return out


def elastic_prefix(case: Case, t: int, level: str, agent_pid: int, line: int) -> str:
    v = case.cfg.torch
    names = {"E": "ERROR", "W": "WARNING", "I": "INFO"}
    if v >= (2, 4):
        return (f"{level}{case.clock.glog_py(t)} {agent_pid} site-packages/torch/distributed/elastic/"
                f"multiprocessing/api.py:{line}] ")
    if v >= (2, 1):
        return f"[{case.clock.comma_ms(t)}] torch.distributed.elastic.multiprocessing.api: [{names[level]}] "
    return f"{names[level]}:torch.distributed.elastic.multiprocessing.api:"


def child_failed_table(case: Case, a: Attempt, host: str, failures: list[tuple[int, RankExit]],
                       agent_dir: str) -> str:
    """The torchrun ChildFailedError summary (pytorch_dist.md §6.3)."""
    gpn = case.cfg.gpus_per_node
    rule = "=" * 60
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        f'  File "{TORCH}/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
        "    return f(*args, **kwargs)",
        f'  File "{TORCH}/distributed/run.py", line 919, in main',
        "    run(args)",
        f'  File "{TORCH}/distributed/run.py", line 910, in run',
        "    elastic_launch(",
        f'  File "{TORCH}/distributed/launcher/api.py", line 138, in __call__',
        "    return launch_agent(self._config, self._entrypoint, list(args))",
        f'  File "{TORCH}/distributed/launcher/api.py", line 269, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        rule, f"{ENTRY} FAILED", "-" * 60, "Failures:"]

    def entry(rank: int, ex: RankExit) -> list[str]:
        lr = rank % gpn
        pid = case.ids.pid(a.index, host, lr)
        err = case.error_files.get((a.index, host, rank))
        if ex.code < 0:
            sig = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 7: "SIGBUS"}.get(-ex.code, "SIG")
            efile, tb = "<N/A>", [f"Signal {-ex.code} ({sig}) received by PID {pid}"]
        elif err is not None:
            efile = f"{agent_dir}/attempt_0/{lr}/error.json"
            tb = err["message"]["extraInfo"]["py_callstack"].rstrip("\n").split("\n")
        else:
            efile, tb = "<N/A>", ["To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
        out = [f"[{rank}]:", f"  time      : {case.clock.table(ex.t)}", f"  host      : {host}",
               f"  rank      : {rank} (local_rank: {lr})", f"  exitcode  : {ex.code} (pid: {pid})",
               f"  error_file: {efile}", f"  traceback : {tb[0]}"]
        return out + [f"  {ln}" if ln else "" for ln in tb[1:]]

    root, others = failures[0], failures[1:]
    if not others:
        lines.append("  <NO_OTHER_FAILURES>")
    for r, ex in others:
        lines += entry(r, ex)
    lines += ["-" * 60, "Root Cause (first observed failure):"] + entry(*root) + [rule]
    return "\n".join(lines)


def resolve_node(ctx: Ctx, host: str, nat: dict[int, Pending]) -> int:
    """torchelastic on one node: reap, SIGTERM the rest, print the table. Returns the agent's end time."""
    case, a, rng = ctx.case, ctx.a, ctx.rng
    node = a.hosts.index(host)
    ranks = list(range(node * ctx.gpn, (node + 1) * ctx.gpn))
    apid = case.ids.agent_pid(a.index, host)
    sched = ctx.plan.sched
    failures = sorted((nat[r].exit.t, r) for r in ranks if nat[r].exit is not None and nat[r].exit.how != "sched")
    if sched is not None and (not failures or sched[0] <= failures[0][0]):
        t = sched[0] + int(rng.uniform(0.01, 0.1) * US)
        if case.cfg.torch >= (2, 4):
            pre = f"W{case.clock.glog_py(t)} {apid} site-packages/torch/distributed/elastic/agent/server/api.py:704] "
        else:
            pre = elastic_prefix(case, t, "W", apid, 704)
        case.agent_line(a.index, host, t, pre + "Received Signals.SIGTERM death signal, shutting down workers")
        for r in ranks:
            pid = case.ids.pid(a.index, host, r % ctx.gpn)
            case.agent_line(a.index, host, t + 1000, elastic_prefix(case, t + 1000, "W", apid, 897)
                            + f"Sending process {pid} closing signal SIGTERM")
            a.exits[r] = RankExit(max(t + 2000, nat[r].exit.t if nat[r].exit else 0), -15, "sched")
        end = max(a.exits[r].t for r in ranks) + int(rng.uniform(0.3, 1.2) * US)
        case.agent_line(a.index, host, end, "\n".join([
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            f'  File "{TORCH}/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler',
            "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)",
            f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {apid} got signal: 15"]))
        return end
    first = failures[0][0]
    poll = first + (5 * US if case.cfg.torch < (2, 2) else int(rng.uniform(0.3, 1.0) * US))
    table = [(r, nat[r].exit) for _, r in failures if nat[r].exit.t <= poll]  # type: ignore[union-attr]
    r0, ex0 = table[0]
    pid0 = case.ids.pid(a.index, host, r0 % ctx.gpn)
    case.agent_line(a.index, host, poll, elastic_prefix(case, poll, "E", apid, 869) +
                    f"failed (exitcode: {ex0.code}) local_rank: {r0 % ctx.gpn} (pid: {pid0}) of binary: {BINARY}")
    reaped = {r for r, _ in table}
    for r, ex in table:
        a.exits[r] = ex
    for r in ranks:
        if r in reaped:
            continue
        pid = case.ids.pid(a.index, host, r % ctx.gpn)
        ts = poll + 1000 + (r % ctx.gpn) * 50
        case.agent_line(a.index, host, ts, elastic_prefix(case, ts, "W", apid, 897)
                        + f"Sending process {pid} closing signal SIGTERM")
        p = nat[r].exit
        t_term = ts + int(rng.uniform(0.2, 1.5) * US)
        if p is None:
            tk = ts + 30 * US
            case.agent_line(a.index, host, tk, elastic_prefix(case, tk, "W", apid, 919)
                            + f"Unable to shutdown process {pid} via Signals.SIGTERM, forcefully exiting via "
                            "Signals.SIGKILL")
            a.exits[r] = RankExit(tk + 10_000, -9, "killed")
        elif p.t < t_term:
            a.exits[r] = p
        else:
            a.exits[r] = RankExit(t_term, -15, "sigterm")
    end = max(a.exits[r].t for r in ranks) + int(rng.uniform(0.3, 1.5) * US)
    agent_dir = f"/tmp/torchelastic_{random.Random(f'{case.seed}:{a.index}:{host}').getrandbits(40):010x}/none_x"
    case.agent_line(a.index, host, end, child_failed_table(case, a, host, table, agent_dir))
    return end


def render_rank_end(ctx: Ctx, r: int, p: Pending) -> None:
    """Lines a rank prints as it dies (watchdog, NCCL async error, abort, flush WARNs)."""
    case, a, rng = ctx.case, ctx.a, ctx.rng
    ex = a.exits.get(r)
    if ex is None or p.exit is None or p.exit.how not in ("watchdog", "nccl_error") or p.fire > ex.t:
        return
    host = a.hosts[r // ctx.gpn]
    lr = r % ctx.gpn
    pid = ctx.pid(r)
    if p.exit.how == "watchdog":
        op = ctx.plan.optype.get(r, "ALLREDUCE")
        ran = (p.fire - p.block) // 1000
        case.rank_line(a.index, r, p.fire, watchdog_text(case, r, p.fire, ctx.plan.seq, op, ran, rng))
    elif p.exit.how == "nccl_error":
        case.rank_line(a.index, r, p.fire, nccl_error_text(case, r, p.fire, ctx.plan.early[r][1], rng))
    else:
        return
    if r in ctx.plan.flush_peers:
        t = p.fire + 2000
        msg = _ib_warn_text(case, ctx.plan.flush_peers[r], rng.randrange(40000, 60000), lr, 5, 249)
        case.rank_line(a.index, r, t, nccl_warn(case, t, host, pid, pid + 211, lr, _ib_loc(case), msg, "ncclIbTest"))
    if case.cfg.nccl_debug == "INFO":
        case.rank_line(a.index, r, p.fire + 3000, abort_info(case, a, r))


def slurm_step_end(ctx: Ctx, node_end: dict[str, int], table_hosts: set[str]) -> None:
    case, a = ctx.case, ctx.a
    jid = case.cfg.job_id
    sid = step_id(case, a)
    if ctx.plan.sched is not None:
        t, reason = ctx.plan.sched
        stamp = case.clock.slurm(t)
        due = f" DUE TO {reason}" if reason else ""
        hosts = [h for h in a.hosts if h not in ctx.plan.vanished]
        if ctx.plan.sched_scope == "job":
            case.slurm_events.append((t, f"slurmstepd: error: *** JOB {jid} ON {a.hosts[0]} CANCELLED AT {stamp}{due} ***"))
        for h in hosts:
            if h in table_hosts:
                continue
            case.slurm_events.append((t + 1, f"slurmstepd: error: *** STEP {jid}.{sid} ON {h} CANCELLED AT {stamp}{due} ***"))
        case.slurm_events.append((t + 2, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."))
    if ctx.plan.oom_kill:
        case.slurm_events.append((ctx.tf + 5000, f"slurmstepd: error: Detected 1 oom_kill event in StepId={jid}.{sid}. "
                                  "Some of the step tasks have been OOM Killed."))
    for h in sorted(node_end, key=lambda x: node_end[x]):
        n = a.hosts.index(h)
        text = "Exited with exit code 1" if h in table_hosts else "Terminated"
        case.slurm_events.append((node_end[h], f"srun: error: {h}: task {n}: {text}"))


def step_id(case: Case, a: Attempt) -> int:
    """The Slurm step that runs attempt `a`: `.0` of each requeued run, or `.k` of one job."""
    return a.index if case.cfg.retry_as_step else 0


def apply_fault(case: Case, a: Attempt) -> None:
    assert a.fault is not None and a.fault_t is not None
    rng = random.Random(f"{case.seed}:fault:{a.index}")
    ctx = Ctx(case, a, a.fault, Plan(), a.fault_t, rng)
    ctx.plan.seq = seq_at(case, a)
    FAULT_FUNCS[a.fault.type](ctx)
    nat = natural_ends(ctx)
    node_end: dict[str, int] = {}
    table_hosts: set[str] = set()
    for host in a.hosts:
        if host in ctx.plan.vanished:
            for r in range(a.hosts.index(host) * ctx.gpn, (a.hosts.index(host) + 1) * ctx.gpn):
                a.exits[r] = RankExit(ctx.tf, -9, "vanished")
            continue
        node_end[host] = resolve_node(ctx, host, nat)
        if (a.index, host) in case.agent_events and "ChildFailedError" in case.agent_events[(a.index, host)][-1][1]:
            table_hosts.add(host)
    for r in sorted(nat):
        render_rank_end(ctx, r, nat[r])
    slurm_step_end(ctx, node_end, table_hosts)
    ends = list(node_end.values()) + ([ctx.plan.sched[0]] if ctx.plan.sched else [])
    a.end = max(ends)
    kind = a.fault.kind
    a.end_reason = {"crash": "crash", "hang": "hang", "preemption": "preempted", "unknown": "crash"}.get(kind, kind)
    for host in a.hosts:
        for g in range(ctx.gpn):
            case.gpu_states.setdefault((host, g), []).append((ctx.tf, a.end, "hung"))


# ----------------------------------------------------------------------------- attempts


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
    a = Attempt(index, start, list(hosts), _last_durable(case), start + int(init * US * rng.uniform(0.98, 1.02)))
    case.attempts.append(a)
    _register_slow(case, a)
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


# ----------------------------------------------------------------------------- framework lines


def _loss(step: int, rng: random.Random) -> float:
    return 2.05 + 8.4 * 2.718281828 ** (-step / 700.0) + rng.gauss(0.0, 0.02)


def _lr(cfg: Config, step: int) -> float:
    warm = 200
    if step < warm:
        return 3e-4 * step / warm
    import math

    return 3e-5 + 0.5 * (3e-4 - 3e-5) * (1 + math.cos(math.pi * min(1.0, step / max(cfg.train_steps, 1))))


def megatron_lines(case: Case, a: Attempt, emit: Any, last: int, rng: random.Random) -> None:
    cfg, c = case.cfg, case.clock
    first = a.first_step_start
    init_t = a.start + (first - a.start) // 3

    def stamp(t: int, what: str) -> None:
        emit(0, t, f"[{what}] datetime: {c.megatron(t)} ")

    stamp(init_t, "after megatron is initialized")
    if a.resume_step:
        emit(0, first - 9 * US, f" loading distributed checkpoint from /ckpt at iteration {a.resume_step}")
        emit(0, first - 5 * US, "  successfully loaded checkpoint from /ckpt [ t 1/8, gtp_remat 1/1, p 1/4 ] at "
             f"iteration {a.resume_step}\n(min, max) time across ranks (ms):\n    load-checkpoint "
             f"................................: ({rng.uniform(3000, 4000):.2f}, {rng.uniform(4000, 5000):.2f})")
    else:
        emit(0, first - 5 * US, "WARNING: could not find the metadata file /ckpt/latest_checkpointed_iteration.txt"
             "\n    will not load any checkpoints and will start from random")
    stamp(first - 4 * US, "after model, optimizer, and learning rate scheduler are built")
    stamp(first - 2 * US, "after dataloaders are built")
    emit(0, first - US, "done with setup ...\ntraining ...")
    stamp(first, "before the start of training step")
    gbs = 512
    prev_end = {0: first}
    window: list[int] = []
    steps: list[Step] = []
    for s in a.steps:
        window.append(s.end - s.start)
        steps.append(s)
        if s.index % cfg.log_interval:
            continue
        ms = sum(window) / len(window) / 1000
        window = []
        tflops = 400.0 * cfg.step_time_s * 1000 / ms
        emit(last, s.end, f" [{c.megatron(s.end)}] iteration {s.index:8d}/{cfg.train_steps:8d} | consumed samples: "
             f"{s.index * gbs:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): "
             f"{tflops:.1f} | learning rate: {_lr(cfg, s.index):.6E} | global batch size: {gbs:5d} | lm loss: "
             f"{_loss(s.index, rng):.6E} | loss scale: 1.0 | grad norm: {rng.uniform(0.2, 0.9):.3f} | number of "
             "skipped iterations:   0 | number of nan iterations:   0 |")
        if cfg.megatron_timers:
            emit(last, s.end + 200, megatron_timers(case, steps, rng))
        steps = []
        prev_end[0] = s.end
    for sv in a.saves:
        emit(0, sv.start, f"[{c.megatron(sv.start)}] saving checkpoint at iteration {sv.step:7d} to /ckpt in "
             "torch_dist format")
        if sv.durable:
            ms = (sv.end - sv.start) / 1000
            emit(0, sv.end, f"  [{c.megatron(sv.end)}] successfully saved checkpoint from iteration {sv.step:7d} to "
                 "/ckpt [ t 1/8, gtp_remat 1/1, p 1/4 ]\n(min, max) time across ranks (ms):\n    save-checkpoint "
                 f"................................: ({ms * 0.97:.2f}, {ms:.2f})")
    if a.end_reason == "completed":
        if a.finish_note == "duration":
            mins = int((a.end - 0) / US / 60)
            stamp(a.end, f"exiting program after {mins} minutes")
        else:
            stamp(a.end, "after training is done")


def megatron_timers(case: Case, steps: list[Step], rng: random.Random) -> str:
    """`--timing-log-level 2` block for one log interval (ms per iteration, min/max across ranks).

    The excess of a slow step goes where it is spent: the straggler computes longer (forward-backward
    max) while its peers wait in the gradient all-reduce (all-grads-sync min); congestion lengthens
    all-grads-sync on every rank; a data-loader stall is in batch-generator (max) and therefore in
    forward-backward; other pauses (GC, job-wide) are in forward-backward on every rank.
    """
    n = max(1, len(steps))
    fb = [0.0, 0.0]
    bg = [0.0, 0.0]
    ags = [0.0, 0.0]
    opt = [0.0, 0.0]
    for s in steps:
        d = (s.end - s.start) / 1000
        if s.extra:
            excess = s.extra / 1000
        elif s.slow:
            excess = d - d / (1.0 + s.slow)
        else:
            excess = 0.0
        base = d - excess
        lo = [base * 0.86, base * 0.0006, base * 0.07, base * 0.04]
        hi = [base * 0.862, base * 0.0012, base * 0.074, base * 0.041]
        if s.cause == "network_congestion":
            lo[2] += excess
            hi[2] += excess
        elif s.cause == "dataloader_stall":
            lo[0] += excess
            hi[0] += excess
            hi[1] += excess
        elif s.cause in STRAGGLER_FAULTS:
            hi[0] += excess
            lo[2] += excess
            hi[2] += excess
        else:
            lo[0] += excess
            hi[0] += excess
        for acc, i in ((fb, 0), (bg, 1), (ags, 2), (opt, 3)):
            acc[0] += lo[i]
            acc[1] += max(hi[i], lo[i])
    out = ["(min, max) time across ranks (ms):"]
    for name, (mn, mx) in (("forward-backward", fb), ("batch-generator", bg), ("all-grads-sync", ags),
                           ("optimizer", opt)):
        j = rng.uniform(0.997, 0.9995)
        out.append(f"    {(name + ' ').ljust(48, '.')}: ({min(mn * j, mx) / n:.2f}, {mx / n:.2f})")
    return "\n".join(out)


def deepspeed_lines(case: Case, a: Attempt, emit: Any, last: int, rng: random.Random) -> None:
    cfg, c = case.cfg, case.clock

    def log(t: int, where: str, msg: str) -> None:
        emit(0, t, f"[{c.comma_ms(t)}] [INFO] [{where}] {msg}")

    if a.resume_step:
        p = f"/ckpt/global_step{a.resume_step}/mp_rank_00_model_states.pt"
        log(a.first_step_start - 8 * US, "torch_checkpoint_engine.py:27:load", f"[Torch] Loading checkpoint from {p}...")
        log(a.first_step_start - 5 * US, "torch_checkpoint_engine.py:29:load", f"[Torch] Loaded checkpoint from {p}.")
    for s in a.steps:
        if s.index % cfg.log_interval:
            continue
        lr = _lr(cfg, s.index)
        log(s.end, "logging.py:128:log_dist", f"[Rank 0] step={s.index}, skipped=0, lr=[{lr:.6g}, {lr:.6g}], "
            "mom=[(0.9, 0.95), (0.9, 0.95)]")
        sps = 512 / ((s.end - s.start) / US)
        log(s.end + 500, "timer.py:264:stop", f"epoch=0/micro_step={s.index * 8}/global_step={s.index}, "
            f"RunningAvgSamplesPerSec={sps * rng.uniform(0.99, 1.01):.2f}, CurrSamplesPerSec={sps:.2f}, "
            "MemAllocated=41.27GB, MaxMemAllocated=63.90GB")
    for sv in a.saves:
        tag = f"global_step{sv.step}"
        log(sv.start, "logging.py:128:log_dist", f"[Rank 0] [Torch] Checkpoint {tag} is about to be saved!")
        log(sv.start + 2000, "logging.py:128:log_dist",
            f"[Rank 0] Saving model checkpoint: /ckpt/{tag}/mp_rank_00_model_states.pt")
        if sv.durable:
            log(sv.end, "torch_checkpoint_engine.py:33:commit", f"[Torch] Checkpoint {tag} is ready now!")


TITAN_COLORS = ("\x1b[31m", "\x1b[32m", "\x1b[38;2;180;60;0m", "\x1b[33m", "\x1b[34m", "\x1b[36m", "\x1b[35m",
                "\x1b[39m")


def torchtitan_lines(case: Case, a: Attempt, emit: Any, last: int, rng: random.Random) -> None:
    cfg, c = case.cfg, case.clock

    def log(t: int, msg: str) -> None:
        emit(0, t, f"[titan] {c.comma_ms(t)} - root - INFO - {msg}")

    if a.resume_step:
        log(a.first_step_start - 6 * US, f"Loading the checkpoint from ./outputs/checkpoint/step-{a.resume_step}.")
        log(a.first_step_start - 3 * US, f"Finished loading the checkpoint in {rng.uniform(2, 4):.2f} seconds.")
    else:
        log(a.first_step_start - 3 * US, "No checkpoint was provided, this is a fresh start.")
    log(a.first_step_start, f"Training starts at step {a.resume_step + 1}.")
    r, g, o, y, b, cy, m, e = TITAN_COLORS
    for s in a.steps:
        if s.cause == "periodic_gc" and s.extra:
            log(s.start + s.extra, f"[GC] Performing periodic GC collection took {s.extra / US:.2f} seconds")
        if s.index % cfg.log_interval:
            continue
        tps = int(3456 * cfg.step_time_s * US / (s.end - s.start))
        log(s.end, f"{r}step: {s.index:2}  {g}loss: {_loss(s.index, rng):8.5f}  {o}grad_norm: "
            f"{rng.uniform(0.2, 0.9):7.4f}  {y}memory: 30.12GiB(31.70%)  {b}tps: {tps:,}  {cy}tflops: 150.23  "
            f"{m}mfu: 15.19%{e}")
    for sv in a.saves:
        log(sv.start, "Saving the checkpoint.")
        if sv.durable:
            log(sv.end, f"Finished saving the checkpoint in {(sv.end - sv.start) / US:.2f} seconds.")


def hf_lines(case: Case, a: Attempt, emit: Any, last: int, rng: random.Random) -> None:
    cfg, c = case.cfg, case.clock

    def log(t: int, where: str, msg: str) -> None:
        emit(0, t, f"[INFO|{where}] {c.comma_ms(t)} >> {msg}")

    t0 = a.first_step_start - US
    log(t0, "trainer.py:2134", "***** Running training *****\n  Num examples = 4,096,000\n  Num Epochs = 1\n"
        "  Instantaneous batch size per device = 4\n  Total train batch size (w. parallel, distributed & "
        f"accumulation) = 512\n  Gradient Accumulation steps = 4\n  Total optimization steps = {cfg.train_steps:,}\n"
        "  Number of trainable parameters = 6,738,415,616")
    if a.resume_step:
        log(t0 + 1000, "trainer.py:2175", "  Continuing training from checkpoint, will skip to saved global_step\n"
            f"  Continuing training from epoch 0\n  Continuing training from global step {a.resume_step}")
    for s in a.steps:
        if s.index % cfg.log_interval:
            continue
        emit(0, s.end, f"{{'loss': {_loss(s.index, rng):.4f}, 'grad_norm': {rng.uniform(0.2, 0.9):.4f}, "
             f"'learning_rate': {_lr(cfg, s.index):.4e}, 'epoch': {s.index / cfg.train_steps:.2f}}}")
    for sv in a.saves:
        log(sv.start, "trainer.py:3410", f"Saving model checkpoint to /out/checkpoint-{sv.step}")
        if sv.durable and cfg.hf_save_end:
            log(sv.end, "modeling_utils.py:2627", f"Model weights saved in /out/checkpoint-{sv.step}/model.safetensors")
    if a.end_reason == "completed":
        log(a.end, "trainer.py:2420", "\n\nTraining completed. Do not forget to share your model on "
            "huggingface.co/models =)\n\n")


FRAMEWORKS = {"megatron": megatron_lines, "deepspeed": deepspeed_lines, "torchtitan": torchtitan_lines,
              "hf": hf_lines}


def render_framework(case: Case, a: Attempt) -> None:
    gpn = case.cfg.gpus_per_node
    last = len(a.hosts) * gpn - 1
    vanished_t = a.fault_t if a.fault is not None and a.fault.type == "node_fail" else None
    culprit_node = a.hosts.index(a.culprit_host) if vanished_t is not None and a.culprit_host in a.hosts else -1

    # A fault before the first step kills the ranks before the framework's start-of-training
    # lines: nothing the framework prints after the fault exists.
    early_t = a.fault_t if (a.fault_t is not None and not a.steps) else None

    def emit(rank: int, t: int, text: str) -> None:
        if vanished_t is not None and rank // gpn == culprit_node and t >= vanished_t:
            return
        if early_t is not None and t >= early_t:
            return
        case.rank_line(a.index, rank, t, text)

    FRAMEWORKS.get(case.cfg.framework, megatron_lines)(case, a, emit, last, random.Random(f"{case.seed}:fw:{a.index}"))


def benign_noise(case: Case) -> None:
    """Noise of `healthy` scenarios: one informational Xid 63, env-var deprecation warnings."""
    for f in case.faults:
        if f.type not in BENIGN_FAULTS or f.attempt >= len(case.attempts):
            continue
        a = case.attempts[f.attempt]
        node = min(f.node, len(a.hosts) - 1)
        host, gpu = a.hosts[node], f.gpu % case.cfg.gpus_per_node
        if f.type == "noisy_dcgm_sample":
            # one DCGM sample (the first at or after at_s) of one GPU reads a low SM clock; nothing else
            step = case.cfg.dcgm_interval_s * US
            t = a.start + int(f.at_s * US)
            t = -(-t // step) * step
            for k in range(max(1, int(f.params.get("samples", 1)))):
                ts = t + k * step
                case.gpu_states.setdefault((host, gpu), []).append((ts, ts + 1, "noisy"))
            continue
        pid = case.ids.pid(a.index, host, gpu)
        xid_line(case, host, gpu, a.start + int(f.at_s * US), 63,
                 "Row Remapper: New row marked for remapping, reset gpu to activate.", pid=pid, name="python3")
        rng = random.Random(f"{case.seed}:noise")
        for r in range(len(a.hosts) * case.cfg.gpus_per_node):
            t = a.start + 3 * US + r * 1000
            case.rank_line(a.index, r, t, c10_prefix(case, r, t, "W", "Utils.hpp:164", rng) +
                           "Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
                           "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())")


# ----------------------------------------------------------------------------- writers: per-rank logs


def agent_prefix(case: Case, t: int, level: str, apid: int, module: str, line: int) -> str:
    v = case.cfg.torch
    names = {"E": "ERROR", "W": "WARNING", "I": "INFO"}
    dotted = "torch.distributed.elastic." + module.removesuffix(".py").replace("/", ".")
    if v >= (2, 4):
        return f"{level}{case.clock.glog_py(t)} {apid} site-packages/torch/distributed/elastic/{module}:{line}] "
    if v >= (2, 1):
        return f"[{case.clock.comma_ms(t)}] {dotted}: [{names[level]}] "
    return f"{names[level]}:{dotted}:"


def _cuda_tag(case: Case) -> str:
    return "cuda11.8" if case.cfg.nccl < (2, 19) else "cuda12.4"


def nccl_init_block(case: Case, a: Attempt, rank: int) -> str:
    """NCCL start-up output of one rank (version, bootstrap, Init START, chatter, Init COMPLETE)."""
    cfg = case.cfg
    gpn = cfg.gpus_per_node
    host = a.hosts[rank // gpn]
    lr = rank % gpn
    nranks = len(a.hosts) * gpn
    pid = case.ids.pid(a.index, host, lr)
    out: list[str] = []
    if rank == 0:
        out.append(f"NCCL version {cfg.nccl_text}+{_cuda_tag(case)}")
    if cfg.nccl_debug != "INFO":
        return "\n".join(out)
    p = f"{nccl_prefix(host, pid, pid, lr)} NCCL INFO "
    ip = case.ids.ip(host)
    boot = "Bootstrap: Using" if cfg.nccl >= (2, 23) else "Bootstrap : Using"
    hcas = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(min(gpn, 8)))
    comm, ptr = case.ids.comm_id(a.index), case.ids.comm_ptr(a.index, rank)
    bus = PCI_BUS[lr % len(PCI_BUS)] + "000"
    api = "ncclCommInitRank " if cfg.nccl >= (2, 20) else ""
    head = [f"{boot} eth0:{ip}<0>", "NET/Plugin: No plugin found (libnccl-net.so)", "cudaDriverVersion 12040",
            f"NET/IB : Using {hcas} [RO]; OOB eth0:{ip}<0>", "Using network IB"]
    if cfg.nccl >= (2, 11):
        ident = f"comm {ptr} rank {rank} nranks {nranks} cudaDev {lr} nvmlDev {lr} busId {bus} commId {comm}"
        head.append(f"{api}{ident} - Init START")
    else:
        ident = f"comm {ptr} rank {rank} nranks {nranks} cudaDev {lr} busId {bus}"
    out += [p + h for h in head]
    n_chat = max(0, cfg.nccl_info_lines - len(head) - 1)
    nxt = (rank + 1) % nranks
    prv = (rank - 1) % nranks
    fixed = [f"Setting affinity for GPU {lr} to ffffffff,00000000,ffffffff",
             f"comm {ptr} rank {rank} nRanks {nranks} nNodes {len(a.hosts)} localRanks {gpn} localRank {lr} MNNVL 0",
             f"Trees [0] {nxt}/-1/-1->{rank}->{prv} [1] {nxt}/-1/-1->{rank}->{prv}",
             "P2P Chunksize set to 524288"]
    chat = fixed[:n_chat]
    k = 0
    while len(chat) < n_chat - 3:
        ch, conn = k % 32, k // 32
        if lr == gpn - 1 and len(a.hosts) > 1:
            chat.append(f"Channel {ch:02d}/{conn} : {rank}[{lr}] -> {nxt}[{nxt % gpn}] [send] via NET/IB/{lr}/GDRDMA")
        else:
            chat.append(f"Channel {ch:02d}/{conn} : {rank}[{lr}] -> {nxt}[{nxt % gpn}] via P2P/IPC")
        k += 1
    tail = ["Connected all rings", "Connected all trees",
            "32 coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"]
    chat += tail[: max(0, n_chat - len(chat))]
    out += [p + c for c in chat]
    out.append(f"{p}{api}{ident} - Init COMPLETE")
    return "\n".join(out)


def _launcher(case: Case, rank: int, text: str) -> str:
    mode = case.cfg.launcher_prefix
    if mode == "srun":
        pre = f"{rank}: "
    elif mode == "torchrun":
        pre = f"[default{rank % case.cfg.gpus_per_node}]:"
    else:
        return text
    return "\n".join(pre + ln for ln in text.split("\n"))


def attempt_folder(case: Case, job: Path, a: Attempt, host: str) -> Path:
    """`logs/<attempt folder>/<host>/`, or `logs/<host>/` when every attempt appends to the same files."""
    fmt = case.cfg.attempt_dir
    d = job / "logs" / fmt.format(k=a.index) / host if fmt else job / "logs" / host
    d.mkdir(parents=True, exist_ok=True)
    return d


def _write_or_append(path: Path, text: str, written: set[Path]) -> None:
    """Write `text` as the file's first run, or append it (a requeued run reopens the same file)."""
    with path.open("a" if path in written else "w", encoding="utf-8") as fh:
        fh.write(text)
    written.add(path)


def write_rank_logs(case: Case, job: Path) -> int:
    gpn = case.cfg.gpus_per_node
    count = 0
    written: set[Path] = set()
    for a in case.attempts:
        init_t = a.start + (a.first_step_start - a.start) // 4
        cut = a.fault_t if a.fault is not None and a.fault.type == "node_fail" else None
        for rank in range(len(a.hosts) * gpn):
            host = a.hosts[rank // gpn]
            events = list(case.rank_events.pop((a.index, rank), []))
            events.append((init_t, nccl_init_block(case, a, rank)))
            events.sort(key=lambda e: e[0])
            if cut is not None and a.culprit_host == host:
                events = [e for e in events if e[0] < cut]
            text = "\n".join(e[1] for e in events if e[1] or e[1] == "")
            path = attempt_folder(case, job, a, host) / f"rank-{rank}.log"
            count += path not in written
            _write_or_append(path, _launcher(case, rank, text) + "\n", written)
    return count


def write_agent_logs(case: Case, job: Path) -> None:
    written: set[Path] = set()
    for a in case.attempts:
        for host in a.hosts:
            apid = case.ids.agent_pid(a.index, host)
            pre = torchrun_banner_prefix(case, a.start, apid)
            banner = [pre, pre + "*" * 41,
                      pre + "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
                      "to avoid your system being overloaded, please further tune the variable for optimal "
                      "performance in your application as needed. ", pre + "*" * 41]
            events = [(a.start, "\n".join(banner))] + sorted(case.agent_events.get((a.index, host), []),
                                                             key=lambda e: e[0])
            d = attempt_folder(case, job, a, host)
            _write_or_append(d / "torchrun.log", "\n".join(e[1] for e in events) + "\n", written)
            for (ai, h, rank), payload in sorted(case.error_files.items()):
                if ai == a.index and h == host:
                    # appended attempts share the folder: a later run's error file replaces the earlier one
                    ed = d / "torchelastic" / str(rank % case.cfg.gpus_per_node)
                    ed.mkdir(parents=True, exist_ok=True)
                    (ed / "error.json").write_text(json.dumps(payload, sort_keys=True), encoding="utf-8")


def torchrun_banner_prefix(case: Case, t: int, apid: int) -> str:
    v = case.cfg.torch
    if v >= (2, 4):
        return f"W{case.clock.glog_py(t)} {apid} site-packages/torch/distributed/run.py:793] "
    if v >= (2, 1):
        return f"[{case.clock.comma_ms(t)}] torch.distributed.run: [WARNING] "
    return "WARNING:torch.distributed.run:"


# ----------------------------------------------------------------------------- writers: kernel


def kernel_stamp(case: Case, host: str, t: int) -> str:
    style = case.cfg.kernel_style
    up = t - case.ids.boot(host)
    upt = f"[{up // US:5d}.{up % US:06d}]"
    d = case.clock.local(t)
    if style == "dmesg_T":
        return f"[{d:%a %b} {d.day:2d} {d:%H:%M:%S %Y}] "
    if style == "journal_iso":
        return f"{d:%Y-%m-%dT%H:%M:%S%z} {host} kernel: "
    if style == "syslog":
        return f"{d:%b} {d.day:2d} {d:%H:%M:%S} {host} kernel: {upt} "
    return upt + " "


def boot_noise(case: Case, host: str) -> list[tuple[int, str]]:
    b = case.ids.boot(host)
    dv = case.cfg.driver_text
    lines = [(b, "Linux version 5.15.0-1063-nvidia (buildd@lcy02-amd64-080) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
                 "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #64-Ubuntu SMP Fri Aug  9 17:13:45 UTC 2024"),
             (b + 1, "Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-1063-nvidia root=UUID=3f1b2c4d ro "
                     "pci=realloc=off iommu=pt"),
             (b + 2, "x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'")]
    t = b + 21 * US
    lines += [(t, "nvidia: loading out-of-tree module taints kernel."),
              (t + 1, "nvidia-nvlink: Nvlink Core is being initialized, major device number 234"),
              (t + 2, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {dv}  Sat Jun  1 03:15:20 UTC 2024")]
    for i, bus in enumerate(NIC_BUS[: case.cfg.gpus_per_node]):
        lines.append((t + 4 * US + i, f"mlx5_core 0000:{bus}:00.0 ibp{int(bus, 16)}s0: Link up"))
    return lines


def write_kernel_logs(case: Case, job: Path) -> None:
    for host in case.hosts:
        events = boot_noise(case, host) + sorted(case.kernel_events.get(host, []), key=lambda e: e[0])
        d = job / "nodes" / host
        d.mkdir(parents=True, exist_ok=True)
        text = "\n".join(kernel_stamp(case, host, t) + msg for t, msg in events)
        (d / "dmesg.log").write_text(text + "\n", encoding="utf-8")
        if case.cfg.kernel_style == "uptime":
            boot = case.clock.local(case.ids.boot(host))
            (d / "uptime_since.txt").write_text(f"{boot:%Y-%m-%d %H:%M:%S}\n", encoding="utf-8")
        if not case.cfg.kernel_in_logs:
            continue
        # an epilog's `journalctl -b` at the end of each run, beside that run's process logs: the
        # node's journal since boot (days before the job: boot lines, an earlier job's slurmstepd
        # cancel), up to the run's end
        prev = -86400 * US
        jid = case.cfg.job_id - 913
        node = [(t, f"{host} kernel: {msg}") for t, msg in events]
        node.append((prev, f"{host} slurmstepd[{4100 + len(host)}]: error: *** JOB {jid} ON {host} CANCELLED AT "
                           f"{case.clock.slurm(prev)} DUE TO TIME LIMIT ***"))
        node.sort(key=lambda e: e[0])
        for a in case.attempts:
            if host not in a.hosts:
                continue
            upto = [f"{case.clock.local(t):%Y-%m-%dT%H:%M:%S%z} {msg}" for t, msg in node if t <= a.end]
            path = attempt_folder(case, job, a, host) / f"journal-{a.index}.log"
            path.write_text("\n".join(upto) + "\n", encoding="utf-8")


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
        el = _elapsed((last.end + US - 1) // US - first.start // US)
        nl = hostlist(case.hosts)
        rows.append(f"{jid}|{case.cfg.name}|{js}|{je}|{je}|{start}|{end}|{el}|{nl}|{fnode}|None|0")
        rows.append(f"{jid}.batch|batch|{bs}|{be}||{start}|{end}|{el}|{first.hosts[0]}|||")
        rows.append(f"{jid}.extern|extern|COMPLETED|0:0||{start}|{end}|{el}|{nl}|||")
        for a in case.attempts:
            _, _, _, _, ss, se, _ = run_states(case, a, False)
            s0, s1 = c.slurm(a.start), c.slurm(a.end + US - 1)
            sel = _elapsed((a.end + US - 1) // US - a.start // US)
            rows.append(f"{jid}.{step_id(case, a)}|torchrun|{ss}|{se}||{s0}|{s1}|{sel}|{hostlist(a.hosts)}|||")
    for a in case.attempts if not case.cfg.retry_as_step else []:
        requeued = a.index < len(case.attempts) - 1
        js, je, bs, be, ss, se, fnode = run_states(case, a, requeued)
        start, end = c.slurm(a.start), c.slurm(a.end + US - 1)
        el = _elapsed((a.end + US - 1) // US - a.start // US)
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


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps_toml(data: dict[str, Any]) -> str:
    """Minimal TOML writer: top-level tables and arrays of tables of scalars/lists."""
    out: list[str] = []
    for key, val in data.items():
        if isinstance(val, dict):
            out.append(f"[{key}]")
            out += [f"{k} = {_toml_value(v)}" for k, v in val.items()]
            out.append("")
        elif isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            for item in val:
                out.append(f"[[{key}]]")
                out += [f"{k} = {_toml_value(v)}" for k, v in item.items()]
                out.append("")
        elif isinstance(val, list):
            out.insert(0, f"{key} = {_toml_value(val)}")
        else:
            out.insert(0, f"{key} = {_toml_value(val)}")
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
    meta = [f"name = {_toml_value(cfg.name)}", f"gpus_per_node = {cfg.gpus_per_node}"]
    if cfg.timezone_set:
        meta.append(f"timezone = {_toml_value(cfg.tz_name)}")
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

"""Scenario knobs: fault and taxonomy tables, the job `Config` with its version-dependent formats, `Fault`."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
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

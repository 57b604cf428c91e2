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
    BENIGN_FAULTS,
    JOB_WIDE_FAULTS,
    NIC_BUS,
    SPIKE_FAULTS,
    STRAGGLER_FAULTS,
    TAXONOMY,
    US,
    Config,
    make_config,
    make_faults,
)
from forensics.simulate.lines import c10_prefix, xid_line
from forensics.simulate.teardown import step_id
from forensics.simulate.timeline import Attempt, Case, SlowEpisode, Step
from forensics.simulate.write_ranks import attempt_folder, write_agent_logs, write_rank_logs

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

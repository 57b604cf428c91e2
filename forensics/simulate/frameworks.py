"""Framework step lines (Megatron, DeepSpeed, torchtitan, HF Trainer, a custom loop, fairseq) and benign noise."""

from __future__ import annotations

import random
from typing import Any

from forensics.simulate.config import BENIGN_FAULTS, STRAGGLER_FAULTS, US, Config
from forensics.simulate.lines import c10_prefix, xid_line
from forensics.simulate.timeline import Attempt, Case, Step


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


def custom_lines(case: Case, a: Attempt, emit: Any, last: int, rng: random.Random) -> None:
    """A custom training loop that logs through Python `logging` (the dialect's `pylogging` step
    style): checkpoint loads and saves in plain words, one step line per log interval with the
    interval's mean step time."""
    cfg, c = case.cfg, case.clock
    head = case.dialect.steps.template if case.dialect is not None else "{stamp} - INFO - "

    def log(t: int, msg: str) -> None:
        emit(0, t, head.format(stamp=c.comma_ms(t)) + msg)

    if a.resume_step:
        path = f"/ckpt/step-{a.resume_step}"
        log(a.first_step_start - 8 * US, f"Loading checkpoint from {path}")
        log(a.first_step_start - 5 * US, f"Loaded checkpoint from {path} in {rng.uniform(2.5, 3.5):.1f} s")
    window: list[int] = []
    for s in a.steps:
        window.append(s.end - s.start)
        if s.index % cfg.log_interval:
            continue
        sec = sum(window) / len(window) / US
        window = []
        log(s.end, f"step {s.index}/{cfg.train_steps} | loss {_loss(s.index, rng):.4f} | lr {_lr(cfg, s.index):.3e} "
            f"| {sec:.2f} s/step")
    for sv in a.saves:
        path = f"/ckpt/step-{sv.step}"
        log(sv.start, f"Saving checkpoint to {path}")
        if sv.durable:
            log(sv.end, f"Saved checkpoint to {path} in {(sv.end - sv.start) / US:.1f} s")


FRAMEWORKS = {"megatron": megatron_lines, "deepspeed": deepspeed_lines, "torchtitan": torchtitan_lines,
              "hf": hf_lines}


def fairseq_lines(case: Case, a: Attempt, emit: Any, last: int, rng: random.Random) -> None:
    """fairseq-train's log (the dialect's `fairseq` step style): `train_inner` progress lines
    (`epoch 001:    120 / 5000 loss=..., ups=..., num_updates=120`, ups over the log interval),
    checkpoint_utils' `Preparing to save` / `Saved checkpoint ... (writing took X seconds)` and the
    trainer's `Loaded checkpoint` / `No existing checkpoint found`."""
    cfg, c = case.cfg, case.clock
    head = case.dialect.steps.template if case.dialect is not None else "{stamp} | INFO | {logger} | "

    def log(t: int, logger: str, msg: str) -> None:
        emit(0, t, head.format(stamp=f"{c.local(t):%Y-%m-%d %H:%M:%S}", logger=logger) + msg)

    last_ckpt = "/ckpt/checkpoint_last.pt"
    if a.resume_step:
        log(a.first_step_start - 5 * US, "fairseq.trainer", f"Loaded checkpoint {last_ckpt} (epoch 1 @ "
            f"{a.resume_step} updates)")
    else:
        log(a.first_step_start - 5 * US, "fairseq.trainer", f"No existing checkpoint found {last_ckpt}")
    window: list[int] = []
    for s in a.steps:
        window.append(s.end - s.start)
        if s.index % cfg.log_interval:
            continue
        ups = US * len(window) / sum(window)
        window = []
        log(s.end, "train_inner", f"epoch 001:  {s.index:5d} / {cfg.train_steps} loss={round(_loss(s.index, rng), 3):g}, "
            f"wps={round(ups * 262144):g}, ups={round(ups, 2):g}, wpb=262144, bsz=512, num_updates={s.index}, "
            f"lr={_lr(cfg, s.index):g}, gnorm={round(rng.uniform(0.2, 0.9), 3):g}, wall={(s.end - a.start) // US}")
    for sv in a.saves:
        log(sv.start, "fairseq.checkpoint_utils", f"Preparing to save checkpoint for epoch 1 @ {sv.step} updates")
        if sv.durable:
            log(sv.end, "fairseq.checkpoint_utils", f"Saved checkpoint /ckpt/checkpoint_1_{sv.step}.pt (epoch 1 @ "
                f"{sv.step} updates, score None) (writing took {(sv.end - sv.start) / US} seconds)")


STEP_STYLE_LINES = {"pylogging": custom_lines, "fairseq": fairseq_lines}  # the dialect's step styles other than `native`


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

    lines = FRAMEWORKS.get(case.cfg.framework, megatron_lines)
    if case.dialect is not None and case.dialect.steps.name != "native":
        lines = STEP_STYLE_LINES[case.dialect.steps.name]
    lines(case, a, emit, last, random.Random(f"{case.seed}:fw:{a.index}"))


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

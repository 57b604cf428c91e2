"""Line helpers shared by the fault plans and the framework lines: NCCL, c10, tracebacks, Xid."""

from __future__ import annotations

import random

from forensics.simulate.config import TORCH
from forensics.simulate.timeline import Case


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

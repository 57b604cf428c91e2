"""Fault plans: one `fault_<type>` function per fault type, registered in `FAULT_FUNCS`."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from forensics.simulate.config import BENIGN_FAULTS, FAULTS, NIC_BUS, PCI_BUS, SLOW_FAULTS, TORCH, US, Fault
from forensics.simulate.lines import (
    MEGATRON_FRAMES,
    STARTUP_FRAMES,
    cuda_error_lines,
    nccl_prefix,
    nccl_warn,
    py_prefix,
    traceback_lines,
    xid_line,
)
from forensics.simulate.timeline import Attempt, Case, RankExit


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


def ib_warn_text(case: Case, ip: str, port: int, nic: int, status: int, verr: int) -> str:
    v = case.cfg.nccl
    peer = f"{ip}<{port}>"
    if v <= (2, 18, 99):
        return (f"NET/IB : Got completion from peer {peer} with error {status}, opcode 0, len 0, "
                f"vendor err {verr} (Recv)")
    if v < (2, 23):
        return f"NET/IB : Got completion from peer {peer} with status={status} opcode=0 len=0 vendor err {verr} (Recv)"
    return (f"NET/IB: Got completion from peer {peer} with status={status} opcode=0 len=0 vendor err {verr} "
            f"(Recv) hca mlx5_{nic}")


def ib_loc(case: Case) -> str:
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
        msg = ib_warn_text(case, peer_of.get(r, ip), ctx.rng.randrange(40000, 60000), lr, 12, 129)
        text = nccl_warn(case, t, rhost, pid, tid, lr, ib_loc(case), msg, "ncclIbTest")
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

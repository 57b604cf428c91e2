"""Writers of the per-rank logs and the torchrun agent logs."""

from __future__ import annotations

import json
from pathlib import Path

from forensics.simulate.config import PCI_BUS
from forensics.simulate.lines import nccl_prefix
from forensics.simulate.timeline import Attempt, Case


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


def _dialect_lines(case: Case, a: Attempt, rank: int, events: list[tuple[int, str]]) -> str:
    """The rank's log with the dialect's prefix (drawn for its host) outside the scenario's own
    launcher prefix, each line stamped (where the prefix has a stamp) with its event's time."""
    gpn = case.cfg.gpus_per_node
    host = a.hosts[rank // gpn]
    v = case.dialect.rank_prefix[host] if case.dialect is not None else None
    out: list[str] = []
    for t, text in events:
        inner = _launcher(case, rank, text).split("\n")
        if v is None or not v.template:
            out += inner
            continue
        pid = case.ids.pid(a.index, host, rank % gpn)
        d = case.clock.local(t)
        pre = v.template.format(rank=rank, local_rank=rank % gpn, host=host, pid=pid, job=case.cfg.job_id,
                                iso=case.clock.utc(t).strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z",
                                stamp=f"{d:%Y-%m-%d %H:%M:%S}.{d.microsecond // 1000:03d}")
        out += [pre + ln for ln in inner]
    return "\n".join(out)


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
            path = attempt_folder(case, job, a, host) / f"rank-{rank}.log"
            count += path not in written
            if case.dialect is not None:
                _write_or_append(path, _dialect_lines(case, a, rank, events) + "\n", written)
                continue
            text = "\n".join(e[1] for e in events if e[1] or e[1] == "")
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

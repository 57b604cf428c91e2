"""Watchdog, NCCL error and teardown lines; how a fault ends an attempt."""

from __future__ import annotations

import random
from dataclasses import dataclass

from forensics.simulate.config import BINARY, ENTRY, PCI_BUS, TORCH, US
from forensics.simulate.faults import FAULT_FUNCS, Ctx, Plan, ib_loc, ib_warn_text
from forensics.simulate.lines import c10_prefix, nccl_prefix, nccl_warn, pg_tag
from forensics.simulate.timeline import Attempt, Case, RankExit


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
        msg = ib_warn_text(case, ctx.plan.flush_peers[r], rng.randrange(40000, 60000), lr, 5, 249)
        case.rank_line(a.index, r, t, nccl_warn(case, t, host, pid, pid + 211, lr, ib_loc(case), msg, "ncclIbTest"))
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

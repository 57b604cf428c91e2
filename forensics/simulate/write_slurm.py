"""Writer of the Slurm records (sacct, slurmctld, slurmd)."""

from __future__ import annotations

from pathlib import Path

from forensics.simulate.clocks import elapsed, hostlist
from forensics.simulate.config import US
from forensics.simulate.teardown import step_id
from forensics.simulate.timeline import Attempt, Case

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

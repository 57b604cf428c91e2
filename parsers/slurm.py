"""slurmstepd / srun messages found anywhere in a text file (job stderr, per-rank logs).

Kinds: `slurm_cancel` (`*** JOB|STEP n ON host CANCELLED AT t [DUE TO ...] ***`, `srun: Job step
aborted`, `srun: Force Terminated`), `slurm_task_exit` (`srun: error: host: task(s) N: ...`,
`*** STEP n ON host FAILED ... ***`), `slurm_oom` (`Detected N oom_kill event(s)`, `task N: Out Of
Memory`, code MEM_LIMIT for jobacct_gather's `Job|Step N exceeded memory limit (X > Y), being killed` and
slurmstepd's `Exceeded job|step memory limit`) and `slurm_node_fail` (`Node failure on host`, `STEPD TERMINATED ... JOB NOT ENDING WITH
SIGNALS`). `*** REASON: ... ***` detail lines are claimed with the record above; other `srun:`
informational lines are ignored.

The task/cgroup plugin's notice that a step or job touched its memory limit (`Exceeded step memory limit at
some point.`, `Step N hit memory limit at least once during execution. This may or may not result in some
failure.`) is `slurm_mem_pressure` (code MEM_LIMIT_HIT, a warning): context, not a kill.

Also `slurm_error` (code `EXECVE` for `slurmstepd: error: execve(): <path>: <why>`, `PROLOG_FAILED`
for prolog/epilog failures), `slurm_node_fail` code `NOT_RESPONDING` (`Nodes n[1-2] not responding`)
and the cgroup plugin's `oom-kill event count: N` as `slurm_oom`.

slurmctld's node-failure lines (src/slurmctld/job_mgr.c, every era of its job format: `JobId=N`,
`job_id N`, `job N`) are `slurm_node_fail` events naming the failed node: `Killing JobId=N on failed
node H` (code FAILED_NODE_KILL), `requeue [job] JobId=N due to failure of node H`
(FAILED_NODE_REQUEUE), `Removing failed node H from JobId=N` (FAILED_NODE_REMOVED). A node whose
slurmd registers fewer GPUs than slurm.conf gives it (src/interfaces/gres.c: `gres/gpu count
reported lower than configured (7 < 8)`, in slurmctld's `Setting node H state to INVAL with
reason:...`, in `scontrol show node`'s `Reason=` or `sinfo -R`) is `slurm_node_fail` code
GPU_COUNT_LOW: a GPU the node no longer sees; the host is the line's node, else the `NodeName=` of
the `scontrol show node` record above it.

submitit (the Slurm launcher's own logger in the job's stderr, core/job_environment.py): at the
requeue/timeout signal it decides by its own clock whether the job timed out and says so, `Caught signal
SIGUSR2 on H: this job is timed-out.` / `... this job is preempted.` (code SUBMITIT_TIMEOUT /
SUBMITIT_PREEMPTED), after `Job has timed out. Ran N minutes out of requested M minutes.` (SUBMITIT_TIMEOUT;
its `has not timed out` twin is claimed, no event); the `DUE TO JOB REQUEUE` cancel that follows is
submitit's own requeue. `slurm_cancel` events, host from the line, stamp from submitit's `(Y-m-d H:M:S,ms)`.

PBS / Torque notices (the job mail body and the `=>> PBS:` lines MOM writes into the job's
output) are `pbs_job` events: code `NODE_FAILURE` (`job preempted (node failure)`), `PREEMPTED`
(`Job was preempted`, `job preempted`), `WALLTIME` (`job killed: walltime N exceeded limit M`,
`Job exceeded its walltime limit`), `CPUT` (`job killed: cput N exceeded limit M`, the job's CPU-time limit),
`MEMLIMIT` (`job killed: mem|vmem|pmem N exceeded limit M`),
`DELETED` (`Job deleted at request of <who>`), `EXIT_STATUS=<n>` (`Exit_status=<n>`, qstat -f's `Exit_status = <n>`); Moab's job-mail
`MOAB_INFO:  job exceeded wallclock limit` is `pbs_job` WALLTIME (a memory resource: MEMLIMIT, others
MOAB_<RES>), and checkjob's `WARNING:  allocated node H is in state Down` is `slurm_node_fail` code NODE_DOWN
naming H. LSF's `TERM_*` lines say `job killed` and reach the catalog as error lines; its report's `Successfully
completed.` is an `lsf_job` DONE (info) event, so a finished job's report is read, not unknown content.

Flux (flux-core) lines: job exceptions as `flux run -v` / `flux job attach` print them (`<t>s: job.exception [id]
type=T severity=S note`, src/cmd/job/attach.c) or `flux job eventlog` does (`exception type="T" ...`) are
`flux_job` events, code the type upper-cased (TIMEOUT, CANCEL, EXEC, ...) or NODE_FAILURE for a `node-failure`
exception or job-exec's `node failure on H (rank N)` (host H; bulkexec.c/bgexec.c); the job shell's doom plugin
(src/shell/doom.c: `doom: [arg0: ][task ]rank N [on host H] failed|exited [(Exit N)|(<signal>)] and
exit-on-error is set|exit-timeout=T has expired`), the exec eventlog's `shell.task-exit {.."rank":N.."exitcode":C}`
and flux-job's `task(s) exited with exit code N` / `task(s) <signal>` are `slurm_task_exit` events (rank N; code the
exit code, the signal's name, FAILED or EXITED).
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, events_frame, line_host
from parsers.spec import ParserSpec
from parsers.timestamps import iso

# slurmstepd's banner (src/slurmd/slurmstepd/req.c `_handle_signal_container`): `*** %s ON %s CANCELLED AT %s[ DUE TO
# TIME LIMIT | PREEMPTION | NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS | JOB REQUEUE] ***` (%s: `JOB n` / `STEP n.m`,
# the node, the time). Slurm before the node was added (2.x req.c) printed `*** %s CANCELLED AT %s[ DUE TO TIME LIMIT |
# DUE TO NODE FAILURE] ***`, and srun's own step timeout (src/srun/srun_job.c / launch `_timeout_handler`) `*** STEP
# n.m CANCELLED AT %s DUE TO TIME LIMIT ***`; some releases put the node last (`... DUE TO TIME LIMIT on n447 ***`).
# The node is null where the banner names none.
CANCEL_RE = (
    r"\*\*\* (?P<what>JOB|STEP) (?P<id>\S+) (?:ON (?P<host>\S+) )?CANCELLED AT (?P<t>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
    r"(?: DUE (?:TO|to) (?P<due>.*?))??(?: on (?P<host2>[A-Za-z0-9][^\s*]*))?(?: \*\*\*|\s*$)"
)
STEP_FAIL_RE = r"\*\*\* STEP (?P<id>\S+) ON (?P<host>\S+) FAILED"
NOT_ENDING_RE = r"\*\*\* (?:JOB|STEP|STEPD) .*?TERMINATED ON (?P<host>\S+) AT (?P<t>\S+) DUE TO JOB NOT ENDING WITH SIGNALS"
TASK_RE = r"srun: error: (?P<host>[^\s:]+): tasks? (?P<tasks>[\d,\-\s]+?): (?P<what>.+?)\s*$"
OOM_RE = r"Detected (?P<n>\d+) oom[-_]kill events?"
# jobacct_gather's memory-limit kill (src/common/slurm_jobacct_gather.c, jobacct_gather_handle_mem_limit:
# `Step %s exceeded memory limit (%"PRIu64" > %"PRIu64"), being killed`, before 20.02 `Job %u ...` / `Step %u.%u
# ...`, and `exceeded virtual memory limit`), then slurmstepd's `Exceeded job memory limit` / `Exceeded step memory
# limit` summary in the job's stderr. The task/cgroup `... memory limit at some point.` notice says only that the
# limit was reached (memory.failcnt), not that a task was killed: not this.
MEMLIMIT_RE = (r"\b(?:Job|Step) \S+ exceeded (?:virtual )?memory limit \(\d+ > \d+\), being killed"
               r"|\bExceeded (?:job|step) memory limit\s*$")
# ... while the task/cgroup plugin's end-of-step check of the memory cgroup's failcnt (src/plugins/task/cgroup/
# task_cgroup_memory.c task_cgroup_memory_check_oom: memory.failcnt / memory.memsw.failcnt > 0, the limit was
# reached and the kernel reclaimed or swapped) says only that the step or job touched its limit: `Exceeded step
# memory limit at some point. Step may have been partially swapped out to disk.` / `Exceeded job memory limit at
# some point. Job may have been partially swapped out to disk.` (Slurm 2.x-14.x), `Exceeded step|job memory limit
# at some point.` (15.x-18.x, at error level), `Step %s hit memory limit at least once during execution. This may
# or may not result in some failure.` and its `memory+swap` and `Job %u` variants (19.05+, at info level). A kill
# is reported apart (`Detected N oom-kill event(s)`, OOM_RE); a step that touched its limit may well have
# completed (galaxyproject/galaxy#2359: state COMPLETED). Kind `slurm_mem_pressure`, a warning: context, never an
# interruption by itself.
MEMHIT_RE = (r"\bExceeded (?:job|step) memory limit at some point\.(?: (?:Job|Step) may have been partially swapped "
             r"out to disk\.)?\s*$|\b(?:Step|Job) \S+ hit memory(?:\+swap)? limit at least once during execution\.")
CG_OOM_RE = r"task/cgroup: .*oom[-_]kill event count: (?P<n>\d+)"
STEPD_HOST_RE = r"^\s*slurmstepd-([A-Za-z0-9][^\s:]*): "
EXECVE_RE = r"slurmstepd(?:-\S+)?: error: execve\(\): (?P<what>.*)$"
PROLOG_RE = r"(?i)\b(?:prolog|epilog)(?: |_)?(?:failed|failure)|Prolog/Epilog failure"
NOT_RESP_RE = r"error: Nodes? (?P<host>\S+) not responding"
PBS_RE = (r"job preempted \(node failure\)|[Jj]ob (?:was )?preempted|job killed: (?:walltime|cput|mem|vmem|pmem) \d+\S* exceeded"
          r"|exceeded its walltime limit|Job deleted at request of \S+|\bExit_status\s*=\s*-?\d+")
NODE_FAIL_RE = r"srun: error: Node failure on (?P<host>\S+)"
SUBMITIT_SIG_RE = r"Caught signal SIG[A-Z0-9]+ on (?P<host>\S+?): this job is (?P<case>timed-out|preempted)\."
SUBMITIT_RAN_RE = r"\bJob has (?P<not>not )?timed out\. Ran \d+ minutes out of requested \d+ minutes\."
SUBMITIT_TS_RE = r"^submitit [A-Z]+ \((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+\) - "
_JOB = r"(?:JobId=|job_id |job )?(?P<job>[^\s,]+)"
CTLD_KILL_RE = r"Killing " + _JOB + r" on failed node (?P<host>[^\s,]+)"
CTLD_REQUEUE_RE = r"requeue (?:job )?" + _JOB + r" due to failure of node (?P<host>[^\s,]+)"
CTLD_REMOVE_RE = r"Removing failed node (?P<host>[^\s,]+) from " + _JOB
GPU_LOW_RE = r"\bgpu count reported lower than configured \(\d+ < \d+\)"
INVAL_HOST_RE = r"Setting node (\S+) state to [A-Z_]+ with reason:"
# Flux (flux-core): the job's exceptions as `flux run -v` / `flux job attach` print them (src/cmd/job/attach.c
# `%.3fs: job.exception %s type=%s severity=%d %s`; older releases without the jobid) and as `flux job eventlog`
# prints the entry (`exception type="timeout" severity=0 note="..."`). Types (job-exec.c, job-manager,
# flux-cancel.py): `timeout` (`resource allocation expired`), `cancel`, `node-failure`, `exec` (the shell's fatal
# error: doom's task exit, `node failure on H (rank N)`), `alloc`, `depend`, ...
FLUX_EXC_RE = (r"(?:\bjob\.exception|^\s*\d+(?:\.\d+)? exception)(?: \S+)? type=\"?(?P<type>[a-z][a-z-]*)\"? "
               r"severity=(?P<sev>\d+)(?: (?:note=\")?(?P<note>.*?)\"?)?\s*$")
# the job shell's doom plugin (src/shell/doom.c): `doom: [<arg0>: ][task |shell ]rank N [on host H] failed|exited
# [(Exit N)|(<signal>)] and exit-on-error is set|and exit-timeout=T has expired`
FLUX_DOOM_RE = (r"\bdoom: (?:\S+: )?(?:task |shell )?rank (?P<rank>\d+)(?: on host (?P<host>[^\s(]+))? "
                r"(?P<what>failed|exited)(?: \((?P<disp>[^)]*)\))? and (?:exit-on-error is set|exit-timeout=\S+ has expired)")
# the exec eventlog's first task exit (doom.c `shell.task-exit`, printed `exec.shell.task-exit {json}`)
FLUX_TASKEXIT_RE = r"\bshell\.task-exit \{.*?\"rank\": ?(?P<rank>\d+).*?\"exitcode\": ?(?P<code>-?\d+)"
FLUX_NODEFAIL_RE = r"\bnode failure on (?P<host>[^\s(]+) \((?:shell )?rank \d+\)|\blost contact with job shell"
# Moab (with Torque): the job mail's `MOAB_INFO:  job exceeded wallclock limit` (RESOURCELIMITPOLICY's resources:
# WALLTIME, MEM/PMEM/VMEM/SWAP, PROC, DISK, CPUTIME ...) and checkjob's `WARNING:  allocated node H is in state Down`
MOAB_INFO_RE = r"MOAB_INFO:\s+job exceeded (?P<res>\w+) limit"
MOAB_DOWN_RE = r"WARNING:\s+allocated node\s+(?P<host>\S+) is in state (?P<state>Down|Drained|Flush)"
# LSF's job report: `Successfully completed.` (a job that exited 0); its `TERM_*:` lines stay error lines
LSF_DONE_RE = r"^\s*Successfully completed\.\s*$"

SIGNAL_NAMES = {
    "Killed": "SIGKILL", "Terminated": "SIGTERM", "Aborted": "SIGABRT", "Segmentation fault": "SIGSEGV",
    "Bus error": "SIGBUS", "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL",
    "Hangup": "SIGHUP", "Interrupt": "SIGINT", "Quit": "SIGQUIT", "User defined signal 1": "SIGUSR1",
    "User defined signal 2": "SIGUSR2", "Broken pipe": "SIGPIPE", "Trace/breakpoint trap": "SIGTRAP",
}


def _due_code(due: pl.Expr) -> pl.Expr:
    return (
        pl.when(due.is_null()).then(pl.lit("CANCELLED"))
        .when(due.str.starts_with("TIME LIMIT")).then(pl.lit("TIME_LIMIT"))
        .when(due.str.starts_with("PREEMPTION")).then(pl.lit("PREEMPTION"))
        .when(due.str.starts_with("NODE FAILURE")).then(pl.lit("NODE_FAILURE"))
        .when(due.str.starts_with("JOB REQUEUE")).then(pl.lit("JOB_REQUEUE"))
        .when(due.str.starts_with("TASK FAILURE")).then(pl.lit("TASK_FAILURE"))
        .when(due.str.to_uppercase().str.starts_with("SIGNAL")).then(pl.lit("SIGNAL"))
        .otherwise(due.str.to_uppercase().str.replace_all(r"[^A-Z0-9]+", "_"))
    )


def sniff(head: str) -> float:
    n = len(re.findall(r"slurmstepd(?:-\S+)?: error: \*\*\*|srun: error: |Detected \d+ oom[-_]kill event|"
                       r"\*\*\* (?:JOB|STEP) \S+ ON \S+ (?:CANCELLED|FAILED)|on failed node |due to failure of node "
                       r"|Removing failed node |gpu count reported lower than configured|job\.exception \S*\s*type=|\bdoom: "
                       r"|shell\.task-exit \{|MOAB_INFO:|allocated node\s+\S+ is in state|^\s*Successfully completed\."
                       r"|memory limit at some point\.|limit at least once during execution\.",
                       head, flags=re.M))
    if n == 0:
        return 0.3 if ("slurmstepd" in head or "srun:" in head) else 0.0
    return min(0.5 + 0.1 * n, 0.7)


# every line `parse` reads holds one of these (the rows it works on are those lines only): SPEC.trigger
CANDIDATES = ("***", "srun:", "oom", "slurmstepd", "Force Terminated", "rolog", "pilog", "not responding", "preempted",
              "walltime", "exceeded limit", "Job deleted at request", "Exit_status", "Exec host:", "failed node",
              "failure of node", "count reported lower", "NodeName=", "this job is", "timed out. Ran", "memory limit",
              "exception", "doom:", "task-exit", "node failure on", "lost contact with job shell", "MOAB_INFO:",
              "allocated node", "Successfully completed.", "flux-job: task(s)", "at least once during execution")


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    cand = lines.filter(b.str.contains_any(list(CANDIDATES)))
    cand = cand.with_columns(
        b.str.extract_groups(ascii_classes(CANCEL_RE)).alias("_c"),
        b.str.extract_groups(ascii_classes(STEP_FAIL_RE)).alias("_sf"),
        b.str.extract_groups(ascii_classes(NOT_ENDING_RE)).alias("_ne"),
        b.str.extract_groups(ascii_classes(TASK_RE)).alias("_t"),
        b.str.extract_groups(ascii_classes(OOM_RE)).alias("_o"),
        b.str.extract_groups(ascii_classes(NODE_FAIL_RE)).alias("_nf"),
        pl.coalesce(b.str.extract(ascii_classes(CTLD_KILL_RE), 2), b.str.extract(ascii_classes(CTLD_REQUEUE_RE), 2),
                    b.str.extract(ascii_classes(CTLD_REMOVE_RE), 1)).alias("_ctld_host"),
    )
    F = pl.col  # noqa: N806
    is_cancel = F("_c").struct.field("id").is_not_null()
    is_stepfail = F("_sf").struct.field("id").is_not_null()
    is_notend = F("_ne").struct.field("host").is_not_null()
    is_task = F("_t").struct.field("host").is_not_null()
    is_oom = F("_o").struct.field("n").is_not_null()
    is_memlimit = b.str.contains(ascii_classes(MEMLIMIT_RE))
    is_memhit = b.str.contains(ascii_classes(MEMHIT_RE))
    is_nodefail = F("_nf").struct.field("host").is_not_null()
    is_ctld = F("_ctld_host").is_not_null()
    ctld_code = (pl.when(b.str.contains(ascii_classes(CTLD_KILL_RE))).then(pl.lit("FAILED_NODE_KILL"))
                 .when(b.str.contains(ascii_classes(CTLD_REQUEUE_RE))).then(pl.lit("FAILED_NODE_REQUEUE"))
                 .otherwise(pl.lit("FAILED_NODE_REMOVED")))
    is_gpu_low = b.str.contains(ascii_classes(GPU_LOW_RE))
    is_aborted = b.str.contains(r"srun: Job step aborted", literal=False)
    is_force = b.str.contains(r"Force Terminated", literal=True)
    cg_oom = b.str.extract(ascii_classes(CG_OOM_RE), 1)
    is_execve = b.str.contains(ascii_classes(EXECVE_RE))
    is_prolog = b.str.contains(ascii_classes(PROLOG_RE)) & b.str.contains(r"(?i)error|slurm|fail")
    not_resp = b.str.extract(ascii_classes(NOT_RESP_RE), 1)
    is_pbs = b.str.contains(ascii_classes(PBS_RE))
    pbs_code = (
        pl.when(b.str.contains(r"job preempted \(node failure\)")).then(pl.lit("NODE_FAILURE"))
        .when(b.str.contains(r"[Jj]ob (?:was )?preempted")).then(pl.lit("PREEMPTED"))
        .when(b.str.contains(ascii_classes(r"walltime \d+\S* exceeded|exceeded its walltime limit"))).then(pl.lit("WALLTIME"))
        .when(b.str.contains(r"job killed: (?:mem|vmem|pmem) ")).then(pl.lit("MEMLIMIT"))
        .when(b.str.contains(ascii_classes(r"job killed: cput \d+\S* exceeded"))).then(pl.lit("CPUT"))
        .when(b.str.contains("Job deleted at request of", literal=True)).then(pl.lit("DELETED"))
        .otherwise(pl.concat_str([pl.lit("EXIT_STATUS="), b.str.extract(ascii_classes(r"\bExit_status\s*=\s*(-?\d+)"), 1)]))
    )
    sub_sig = b.str.extract_groups(ascii_classes(SUBMITIT_SIG_RE))
    sub_ran = b.str.extract_groups(ascii_classes(SUBMITIT_RAN_RE))
    is_sub = sub_sig.struct.field("host").is_not_null()
    is_sub_timeout = sub_ran.struct.field("not").is_null() & b.str.contains(ascii_classes(SUBMITIT_RAN_RE))
    sub_code = (pl.when(is_sub & (sub_sig.struct.field("case") == "preempted")).then(pl.lit("SUBMITIT_PREEMPTED"))
                .when(is_sub | is_sub_timeout).then(pl.lit("SUBMITIT_TIMEOUT")))
    is_reason = b.str.contains(r"\*\*\* REASON: ") | (b.str.contains(ascii_classes(SUBMITIT_RAN_RE)) & ~is_sub_timeout)
    fx = b.str.extract_groups(ascii_classes(FLUX_EXC_RE))
    fx_type = fx.struct.field("type")
    is_fx = fx_type.is_not_null()
    fx_nodefail = b.str.contains(ascii_classes(FLUX_NODEFAIL_RE))
    fx_code = (pl.when(fx_nodefail | (fx_type == "node-failure")).then(pl.lit("NODE_FAILURE"))
               .otherwise(fx_type.str.to_uppercase().str.replace_all("-", "_")))
    doom = b.str.extract_groups(ascii_classes(FLUX_DOOM_RE))
    is_doom = doom.struct.field("rank").is_not_null()
    doom_disp = doom.struct.field("disp")
    doom_code = pl.coalesce(doom_disp.str.extract(ascii_classes(r"^Exit (-?\d+)$"), 1),
                            doom_disp.replace_strict(SIGNAL_NAMES, default=None, return_dtype=pl.Utf8),
                            pl.when(doom.struct.field("what") == "failed").then(pl.lit("FAILED")),
                            pl.lit("EXITED"))
    fte = b.str.extract_groups(ascii_classes(FLUX_TASKEXIT_RE))
    is_fte = fte.struct.field("rank").is_not_null()
    ftasks = b.str.extract(r"^\s*flux-job: task\(s\) (.+?)\s*$", 1)
    is_ftasks = ftasks.is_not_null()
    ftasks_code = pl.coalesce(ftasks.str.extract(ascii_classes(r"^exited with exit code (\d+)"), 1),
                              ftasks.replace_strict(SIGNAL_NAMES, default=None, return_dtype=pl.Utf8),
                              ftasks.str.to_uppercase().str.replace_all(r"[^A-Z0-9]+", "_"))
    is_fnode = fx_nodefail & ~is_fx
    moab_res = b.str.extract(ascii_classes(MOAB_INFO_RE), 1).str.to_lowercase()
    is_moab = moab_res.is_not_null()
    moab_code = (pl.when(moab_res.is_in(["wallclock", "walltime", "wall"])).then(pl.lit("WALLTIME"))
                 .when(moab_res.is_in(["mem", "memory", "pmem", "vmem", "swap", "jobmem"])).then(pl.lit("MEMLIMIT"))
                 .otherwise(pl.concat_str([pl.lit("MOAB_"), moab_res.str.to_uppercase()])))
    moab_down = b.str.extract(ascii_classes(MOAB_DOWN_RE), 1)
    is_moab_down = moab_down.is_not_null()
    is_lsf_done = b.str.contains(ascii_classes(LSF_DONE_RE))
    what = F("_t").struct.field("what")
    what_core = what.str.replace(r"\s*\(core dumped\)$", "")
    exit_code = what.str.extract(ascii_classes(r"^Exited with exit code (\d+)"), 1)
    task_oom = what.str.contains(r"(?i)^out of memory")
    tasks = F("_t").struct.field("tasks").str.strip_chars()
    single_task = tasks.str.contains(ascii_classes(r"^\d+$"))
    task_code = pl.coalesce(exit_code, what_core.replace_strict(SIGNAL_NAMES, default=None, return_dtype=pl.Utf8),
                            what_core.str.to_uppercase().str.replace_all(r"[^A-Z0-9]+", "_"))
    kind = (
        pl.when(is_cancel).then(pl.lit("slurm_cancel"))
        .when(is_notend | is_nodefail | is_ctld | is_gpu_low).then(pl.lit("slurm_node_fail"))
        .when(is_stepfail).then(pl.lit("slurm_task_exit"))
        .when(is_oom | (is_task & task_oom) | is_memlimit).then(pl.lit("slurm_oom"))
        .when(is_task).then(pl.lit("slurm_task_exit"))
        .when(is_force | is_aborted).then(pl.lit("slurm_cancel"))
        .when(cg_oom.is_not_null()).then(pl.lit("slurm_oom"))
        .when(not_resp.is_not_null()).then(pl.lit("slurm_node_fail"))
        .when(is_execve | is_prolog).then(pl.lit("slurm_error"))
        .when(is_pbs).then(pl.lit("pbs_job"))
        .when(sub_code.is_not_null()).then(pl.lit("slurm_cancel"))
        .when(is_fx).then(pl.lit("flux_job"))
        .when(is_fnode | is_moab_down).then(pl.lit("slurm_node_fail"))
        .when(is_doom | is_fte | is_ftasks).then(pl.lit("slurm_task_exit"))
        .when(is_moab).then(pl.lit("pbs_job"))
        .when(is_lsf_done).then(pl.lit("lsf_job"))
        .when(is_memhit).then(pl.lit("slurm_mem_pressure"))
    )
    cancel_code = _due_code(F("_c").struct.field("due").str.strip_chars())
    code = (
        pl.when(is_cancel).then(cancel_code)
        .when(is_notend).then(pl.lit("NOT_ENDING_WITH_SIGNALS"))
        .when(is_nodefail).then(pl.lit("NODE_FAILURE"))
        .when(is_ctld).then(ctld_code)
        .when(is_gpu_low).then(pl.lit("GPU_COUNT_LOW"))
        .when(is_stepfail).then(pl.lit("STEP_FAILED"))
        .when(is_oom).then(F("_o").struct.field("n"))
        .when(is_task & task_oom).then(pl.lit("OUT_OF_MEMORY"))
        .when(is_memlimit).then(pl.lit("MEM_LIMIT"))
        .when(is_task).then(task_code)
        .when(is_force).then(pl.lit("FORCE_TERMINATED"))
        .when(is_aborted).then(pl.lit("STEP_ABORTED"))
        .when(cg_oom.is_not_null()).then(cg_oom)
        .when(not_resp.is_not_null()).then(pl.lit("NOT_RESPONDING"))
        .when(is_execve).then(pl.lit("EXECVE"))
        .when(is_prolog).then(pl.lit("PROLOG_FAILED"))
        .when(is_pbs).then(pbs_code)
        .when(sub_code.is_not_null()).then(sub_code)
        .when(is_fx).then(fx_code)
        .when(is_fnode).then(pl.lit("NODE_FAILURE"))
        .when(is_moab_down).then(pl.lit("NODE_DOWN"))
        .when(is_doom).then(doom_code)
        .when(is_fte).then(fte.struct.field("code"))
        .when(is_ftasks).then(ftasks_code)
        .when(is_moab).then(moab_code)
        .when(is_lsf_done).then(pl.lit("DONE"))
        .when(is_memhit).then(pl.lit("MEM_LIMIT_HIT"))
    )
    severity = (
        pl.when(is_cancel & cancel_code.is_in(["TIME_LIMIT", "PREEMPTION", "JOB_REQUEUE", "SIGNAL", "CANCELLED"]))
        .then(pl.lit("warning"))
        .when(is_cancel).then(pl.lit("error"))
        .when(is_notend | is_nodefail | is_ctld).then(pl.lit("critical"))
        .when(is_aborted).then(pl.lit("warning"))
        .when(is_task & (exit_code == "0")).then(pl.lit("info"))
        .when(is_pbs & pbs_code.str.starts_with("EXIT_STATUS=")).then(pl.lit("info"))
        .when(is_pbs & pbs_code.is_in(["DELETED", "PREEMPTED", "WALLTIME", "CPUT"])).then(pl.lit("warning"))
        .when(sub_code.is_not_null()).then(pl.lit("warning"))
        .when(is_fx & fx_code.is_in(["TIMEOUT", "CANCEL"])).then(pl.lit("warning"))
        .when(is_fnode | is_moab_down | (is_fx & (fx_code == "NODE_FAILURE"))).then(pl.lit("critical"))
        .when(is_fte & (fte.struct.field("code") == "0")).then(pl.lit("info"))
        .when(is_doom & (doom_code == "0")).then(pl.lit("warning"))
        .when(is_moab & (moab_code == "WALLTIME")).then(pl.lit("warning"))
        .when(is_lsf_done).then(pl.lit("info"))
        .when(is_memhit).then(pl.lit("warning"))
        .otherwise(pl.lit("error"))
    )
    # where the line was logged: slurmstepd built with MULTIPLE_SLURMD names its node in its log
    # prefix (`slurmstepd-<NodeName>: `, slurmstepd.c log_set_argv0), before a wrapper's host or the path's
    where = pl.coalesce(b.str.extract(ascii_classes(STEPD_HOST_RE), 1), line_host(ctx))
    # a host the poster redacted (`ON ... CANCELLED`, `ON <node> CANCELLED`) names no node: null
    c_host = pl.coalesce(F("_c").struct.field("host"), F("_c").struct.field("host2"))
    host = pl.coalesce(*[pl.when(h.str.contains(r"^[A-Za-z0-9]")).then(h) for h in (
        c_host, F("_sf").struct.field("host"), F("_ne").struct.field("host"),
        F("_t").struct.field("host"), F("_nf").struct.field("host"), F("_ctld_host"),
        sub_sig.struct.field("host"))], where)
    # a PBS mail names the job's first execution host above its notices (`Exec host:  gpu-2-17/5`)
    keys = [k for k in ("hint_file",) if k in cand.columns]
    # the memory-limit kill names the job (`Job 7518 exceeded ...`, `Step 7518.0 ...`), not the node; the
    # `*** JOB 7518 ON host CANCELLED ***` banner slurmstepd prints for that kill names it
    mem_job = b.str.extract(ascii_classes(r"\b(?:Job|Step) (\d+)[.\d]* exceeded (?:virtual )?memory limit"), 1)
    cancel_job = F("_c").struct.field("id").str.extract(ascii_classes(r"^(\d+)"), 1)
    cancel_host = pl.when(c_host.str.contains(r"^[A-Za-z0-9]")).then(c_host)
    job_host = (pl.when(cancel_job == mem_job.drop_nulls().first()).then(cancel_host).drop_nulls().first()
                .over(keys) if keys else
                pl.when(cancel_job == mem_job.drop_nulls().first()).then(cancel_host).drop_nulls().first())
    exec_host = b.str.extract(r"^\s*Exec host:\s+([^/\s+]+)", 1)
    exec_host = exec_host.forward_fill().over(keys) if keys else exec_host.forward_fill()
    # a `scontrol show node` record names its node on its first line (`NodeName=H Arch=...`)
    node_name = b.str.extract(r"^\s*NodeName=(\S+)", 1)
    node_name = node_name.forward_fill().over(keys) if keys else node_name.forward_fill()
    flux_host = pl.coalesce(doom.struct.field("host"), b.str.extract(ascii_classes(FLUX_NODEFAIL_RE), 1))
    host = (pl.when(is_pbs | is_moab).then(pl.coalesce(exec_host, line_host(ctx)))
            .when(is_moab_down).then(moab_down)
            .when(is_fx | is_fnode | is_doom).then(pl.coalesce(flux_host, line_host(ctx)))
            .when(is_gpu_low).then(pl.coalesce(b.str.extract(ascii_classes(INVAL_HOST_RE), 1), b.str.extract(ascii_classes(r"\bnode=(\S+?):?\s"), 1),
                                               node_name, where))
            .when(not_resp.is_not_null()).then(not_resp.str.extract(r"^([^\[,]+)$", 1))  # a node list: no one host
            .when(mem_job.is_not_null()).then(pl.coalesce(where, job_host))
            .otherwise(host))
    # slurmctld/slurmd's own line stamp (LogTimeFormat iso8601[_ms] or rfc5424[_ms]): `[2026-05-01T12:00:00.101] `
    own = b.str.extract(ascii_classes(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\] "), 1)
    t_raw = pl.coalesce(F("_c").struct.field("t"), F("_ne").struct.field("t"), own, b.str.extract(ascii_classes(SUBMITIT_TS_RE), 1))
    ts = iso(t_raw.str.replace("T", " "), ctx.tz)
    cand = cand.with_columns(kind.alias("kind"), code.alias("code"), severity.alias("severity"),
                             host.alias("host"), ts.alias("ts"), t_raw.alias("ts_raw"),
                             pl.when(is_task & single_task).then(tasks.cast(pl.Int64, strict=False))
                             .when(is_doom).then(doom.struct.field("rank").cast(pl.Int64, strict=False))
                             .when(is_fte).then(fte.struct.field("rank").cast(pl.Int64, strict=False))
                             .otherwise(pl.lit(None, dtype=pl.Int64)).alias("rank"),
                             is_reason.alias("_reason"),
                             (b.str.contains(r"^\s*srun: ") & ~b.str.contains(r"srun: error: ")).alias("_srun_info"))
    ev = cand.filter(pl.col("kind").is_not_null())
    events = events_frame(ev.with_columns(
        pl.lit(SPEC.name).alias("source"),
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.coalesce(pl.col("rank"), pl.col("prefix_rank")).alias("rank"),
        pl.col("body").alias("message"),
    ))
    claimed = pl.concat([ev["line_no"], cand.filter(pl.col("kind").is_null() & pl.col("_reason"))["line_no"]])
    ignored = cand.filter(pl.col("kind").is_null() & ~pl.col("_reason") & pl.col("_srun_info"))["line_no"]
    return Extraction(events=events, claimed=claimed.unique().sort().alias("line_no"),
                      ignored=ignored.unique().sort().alias("line_no"))


SPEC = ParserSpec(
    name="slurm",
    scope="process",
    description="slurmstepd/srun messages: cancellations (time limit, preemption, node failure), task exits, OOM",
    formats=("slurmstepd *** JOB/STEP ... *** banners", "srun: error: task exit lines", "cgroup oom_kill notices",
             "slurmctld failed-node and GPU-count lines"),
    kinds=("slurm_cancel", "slurm_task_exit", "slurm_oom", "slurm_node_fail", "slurm_error", "pbs_job", "flux_job",
           "lsf_job", "slurm_mem_pressure"),
    batch=True,
    trigger=CANDIDATES,  # `parse` reads only the lines holding one
)

"""Tests for parsers.slurm: slurmstepd / srun messages."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import dcgm, kernel, sacct, slurm
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "slurm"


def run(text: str, **ctx: object) -> Extraction:
    return slurm.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="job.err", **ctx))  # type: ignore[arg-type]


def fixture(name: str, **ctx: object) -> Extraction:
    return run((FIX / name).read_text(), **ctx)


def check_contract(ex: Extraction, n_lines: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert all(1 <= n <= n_lines for n in claimed | ignored)


def test_cancel_due_to_time_limit() -> None:
    ex = fixture("time_limit.log", tz=ZoneInfo("Europe/Paris"))
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["kind"], x["code"]) for x in e] == [
        (2, "slurm_cancel", "TIME_LIMIT"), (3, "slurm_cancel", "TIME_LIMIT"), (4, "slurm_cancel", "STEP_ABORTED")]
    assert e[0]["ts"] == datetime(2026, 5, 1, 10, 0, tzinfo=UTC) and e[0]["host"] == "node01"
    assert e[0]["ts_quality"] == "exact" and e[0]["ts_raw"] == "2026-05-01T12:00:00"
    assert 1 not in ex.claimed.to_list() and 1 not in ex.ignored.to_list()


def test_cancel_reasons() -> None:
    e = fixture("cancel_reasons.log").events.to_dicts()
    assert [x["code"] for x in e] == ["PREEMPTION", "NODE_FAILURE", "JOB_REQUEUE", "TASK_FAILURE", "SIGNAL",
                                      "CANCELLED"]
    assert [x["host"] for x in e] == ["gpu-7", "gpu-8", "gpu-9", "gpu-10", "gpu-11", "gpu-12"]
    assert e[5]["ts"] == datetime(2026, 5, 2, 3, 4, 10, tzinfo=UTC)


def test_cancel_banner_without_on_host_forms() -> None:
    """The banner's older forms (Slurm 2.x slurmstepd req.c, srun's own step timeout): no `ON <node>`, or the node
    last (`... DUE TO TIME LIMIT on n447 ***`, marbl/canu#1067); the reason is read the same, the node only where the
    line names one."""
    text = (
        "slurmstepd: error: *** JOB 1234 CANCELLED AT 2012-05-01T12:00:00 DUE TO TIME LIMIT ***\n"
        "srun: error: *** STEP 1234.0 CANCELLED AT 2012-05-01T12:00:00 DUE TO TIME LIMIT ***\n"
        "slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***\n"
        "slurmstepd: error: *** JOB 1234 CANCELLED AT 2012-05-01T12:00:00 DUE TO NODE FAILURE ***\n"
        "slurmstepd: error: *** JOB 1234 CANCELLED AT 2012-05-01T12:00:00 ***\n"
        "slurmstepd: error: *** JOB 1234 ON node01 CANCELLED AT 2026-05-01T12:00:00 DUE TO NODE FAILURE, SEE SLURMCTLD "
        "LOG FOR DETAILS ***\n")
    e = run(text).events.to_dicts()
    assert [(x["line_no"], x["kind"], x["code"], x["host"]) for x in e] == [
        (1, "slurm_cancel", "TIME_LIMIT", None), (2, "slurm_cancel", "TIME_LIMIT", None),
        (3, "slurm_cancel", "TIME_LIMIT", "n447"), (4, "slurm_cancel", "NODE_FAILURE", None),
        (5, "slurm_cancel", "CANCELLED", None), (6, "slurm_cancel", "NODE_FAILURE", "node01")]
    assert e[2]["ts"] == datetime(2018, 8, 6, 17, 21, 44, tzinfo=UTC)


def test_cancel_due_to_signal_lowercase_to() -> None:
    (e,) = run("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-01-02T03:04:05 DUE to SIGNAL Killed ***").events.to_dicts()
    assert e["code"] == "SIGNAL"


def test_step_failed_and_reason_line() -> None:
    ex = fixture("step_failed.log")
    (e,) = ex.events.to_dicts()
    assert (e["kind"], e["code"], e["host"]) == ("slurm_task_exit", "STEP_FAILED", "node05")
    assert ex.claimed.to_list() == [1, 2]


def test_srun_task_exits() -> None:
    ex = fixture("task_exits.log")
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["kind"], x["code"], x["host"], x["rank"]) for x in e] == [
        (1, "slurm_task_exit", "1", "node01", 3), (2, "slurm_task_exit", "143", "node02", None),
        (3, "slurm_task_exit", "SIGKILL", "node03", 0), (4, "slurm_task_exit", "SIGSEGV", "node03", 1),
        (5, "slurm_task_exit", "SIGABRT", "node04", 2), (6, "slurm_oom", "OUT_OF_MEMORY", "node04", 5)]
    assert ex.ignored.to_list() == [7]


def test_oom_force_terminated_unkillable_node_failure() -> None:
    e = fixture("oom_and_unkillable.log").events.to_dicts()
    assert [(x["kind"], x["code"]) for x in e] == [
        ("slurm_oom", "1"), ("slurm_oom", "3"), ("slurm_cancel", "FORCE_TERMINATED"),
        ("slurm_node_fail", "NOT_ENDING_WITH_SIGNALS"), ("slurm_node_fail", "NODE_FAILURE")]
    assert e[3]["ts"] == datetime(2026, 5, 5, 6, 7, 8, tzinfo=UTC) and e[4]["host"] == "node09"


def test_srun_label_prefix_and_rank_prefix() -> None:
    ex = run("[rank3]:srun: error: node07: task 3: Exited with exit code 2\n")
    (e,) = ex.events.to_dicts()
    assert (e["rank"], e["code"], e["message"]) == (3, "2", "srun: error: node07: task 3: Exited with exit code 2")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=100), max_size=12))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(ln.replace("\n", " ").replace("\r", " ") for ln in lines)
    check_contract(run(text), decode_lines(text.encode()).lines.height)


REAL_LINES = [ln for f in sorted(FIX.glob("*.log")) for ln in f.read_text().splitlines()]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 120), st.text(max_size=4)), max_size=10))
def test_property_mutated_real_lines(muts: list[tuple[str, int, str]]) -> None:
    text = "\n".join((ln[:i] + s + ln[i + len(s):]) for ln, i, s in muts)
    check_contract(run(text), decode_lines(text.encode()).lines.height)


def test_sniff_ranks_slurm_fixtures_first() -> None:
    for f in sorted(FIX.glob("*.log")):
        head = f.read_text()
        assert slurm.sniff(head) > max(m.sniff(head) for m in (kernel, dcgm, sacct)), f.name


def test_slurmstepd_slurmd_slurmctld_errors() -> None:
    text = (
        "slurmstepd: error: execve(): /tmp/slurmd/job00089/slurm_script: No such file or directory\n"
        "srun: error: Task launch for StepId=1234.0 failed on node gpu-07: Prolog failed\n"
        "slurmctld[11]: error: Nodes gpu-[01-02] not responding\n"
        "slurmctld[11]: error: Node gpu-07 not responding, setting DOWN\n"
        "slurmstepd: error: task/cgroup: _oom_event_monitor: StepId=1234.0 oom-kill event count: 2\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["host"]) for e in ex.events.iter_rows(named=True)] == [
        (1, "slurm_error", "EXECVE", None), (2, "slurm_error", "PROLOG_FAILED", None),
        (3, "slurm_node_fail", "NOT_RESPONDING", None), (4, "slurm_node_fail", "NOT_RESPONDING", "gpu-07"),
        (5, "slurm_oom", "2", None)]
    check_contract(ex, 5)


def test_pbs_torque_mail_and_mom_lines() -> None:
    text = (
        "PBS Job Id: 2600365.mskcc-fe1.local\nJob Name:   STDIN\nExec host:  gpu-2-17/5\njob deleted\n"
        "Job deleted at request of root@mskcc-fe1.local\njob preempted (node failure)\n"
        "=>> PBS: job killed: walltime 3610 exceeded limit 3600\n"
        "=>> PBS: job killed: vmem 9123456kb exceeded limit 8388608kb\nJob was preempted\nExit_status=-11\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["code"], e["host"]) for e in ex.events.iter_rows(named=True)] == [
        (5, "DELETED", "gpu-2-17"), (6, "NODE_FAILURE", "gpu-2-17"), (7, "WALLTIME", "gpu-2-17"),
        (8, "MEMLIMIT", "gpu-2-17"), (9, "PREEMPTED", "gpu-2-17"), (10, "EXIT_STATUS=-11", "gpu-2-17")]
    assert set(ex.events["kind"].to_list()) == {"pbs_job"}
    check_contract(ex, 10)


def test_pbs_pro_cput_kill_and_qstat_exit_status() -> None:
    """PBS Pro / OpenPBS MOM's CPU-time kill (`job killed: cput N exceeded limit M`) and `qstat -xf`'s spaced
    `Exit_status = -29` (JOB_EXEC_KILL_WALLTIME) read like the walltime line and the accounting `Exit_status=-11`."""
    text = ("=>> PBS: job killed: cput 7205 exceeded limit 7200\n    Exit_status = -29\n"
            "    Exit_status = 0\nResource_List.walltime = 05:00:00\n")
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["severity"]) for e in ex.events.iter_rows(named=True)] == [
        (1, "pbs_job", "CPUT", "warning"), (2, "pbs_job", "EXIT_STATUS=-29", "info"),
        (3, "pbs_job", "EXIT_STATUS=0", "info")]
    check_contract(ex, 4)


def test_slurmctld_failed_node_lines_name_the_node() -> None:
    ex = fixture("slurmctld_failed_node.log")
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["kind"], x["code"], x["host"]) for x in e] == [
        (2, "slurm_node_fail", "NOT_RESPONDING", "gpu-017"),
        (3, "slurm_node_fail", "FAILED_NODE_KILL", "gpu-017"),
        (4, "slurm_node_fail", "FAILED_NODE_REQUEUE", "gpu-017"),
        (5, "slurm_node_fail", "FAILED_NODE_REMOVED", "gpu-018"),
        (6, "slurm_node_fail", "GPU_COUNT_LOW", "gpu-021"),
        (7, "slurm_node_fail", "FAILED_NODE_KILL", "gpu-019")]
    # slurmctld's own line stamp
    assert e[1]["ts"] == datetime(2026, 5, 1, 12, 0, 0, 102000, tzinfo=UTC) and e[1]["ts_quality"] == "exact"
    assert e[5]["ts"] == datetime(2017, 5, 1, 12, 0, 0, 104000, tzinfo=UTC)
    check_contract(ex, 7)


def test_scontrol_show_node_reason_gpu_count_low_takes_the_record_node() -> None:
    e = fixture("scontrol_show_node_gpu_low.txt").events.to_dicts()
    assert [(x["line_no"], x["code"], x["host"]) for x in e] == [(6, "GPU_COUNT_LOW", "gpu-022")]


def test_submitit_signal_verdicts() -> None:
    """submitit's own word at the requeue signal (its has_timed_out clock): `timed-out` and `Job has timed
    out` are SUBMITIT_TIMEOUT, `preempted` SUBMITIT_PREEMPTED, each a slurm_cancel with the host and the
    stamp of its line; `Job has not timed out` is claimed without an event, `Bypassing signal` is not claimed."""
    ex = run(
        "submitit INFO (2021-04-01 02:26:27,643) - Job has not timed out. Ran 61 minutes out of requested 120 minutes.\n"
        "submitit WARNING (2021-04-01 02:26:27,643) - Caught signal SIGUSR1 on learnfair4096: this job is preempted.\n"
        "submitit INFO (2021-04-01 04:20:00,000) - Job has timed out. Ran 118 minutes out of requested 120 minutes.\n"
        "submitit WARNING (2021-04-01 04:20:00,001) - Caught signal SIGUSR2 on learnfair0293: this job is timed-out.\n"
        "submitit WARNING (2021-04-01 04:20:00,299) - Bypassing signal SIGCONT\n")
    check_contract(ex, 5)
    assert ex.events.select("line_no", "kind", "code", "severity", "host").rows() == [
        (2, "slurm_cancel", "SUBMITIT_PREEMPTED", "warning", "learnfair4096"),
        (3, "slurm_cancel", "SUBMITIT_TIMEOUT", "warning", None),
        (4, "slurm_cancel", "SUBMITIT_TIMEOUT", "warning", "learnfair0293")]
    assert ex.events["ts"][0] == datetime(2021, 4, 1, 2, 26, 27, tzinfo=UTC)
    assert ex.claimed.to_list() == [1, 2, 3, 4]


def test_memory_limit_kill_every_wording_names_the_cancelled_node() -> None:
    text = ("Epoch 0 |   Training | Steps: 93 | Loss: 24.580695\n"
            "slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), being killed\n"
            "slurmstepd: error: Exceeded job memory limit\n"
            "slurmstepd: error: *** JOB 7518 ON xantipa CANCELLED AT 2022-06-10T17:11:35 ***\n"
            "slurmstepd: error: Step 7518.0 exceeded virtual memory limit (9437184 > 8388608), being killed\n"
            "slurmstepd: error: Exceeded step memory limit\n"
            "slurmstepd: error: Exceeded step memory limit at some point.\n")
    ex = run(text)
    check_contract(ex, 7)
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["kind"], x["code"]) for x in e] == [
        (2, "slurm_oom", "MEM_LIMIT"), (3, "slurm_oom", "MEM_LIMIT"), (4, "slurm_cancel", "CANCELLED"),
        (5, "slurm_oom", "MEM_LIMIT"), (6, "slurm_oom", "MEM_LIMIT"), (7, "slurm_mem_pressure", "MEM_LIMIT_HIT")]
    # the kill line names job 7518, whose cancel banner names the node; the summary lines name no job
    assert [x["host"] for x in e] == ["xantipa", None, "xantipa", "xantipa", None, None]


def test_memory_limit_touched_notices_every_wording_are_warnings_not_kills() -> None:
    # task/cgroup's end-of-step failcnt check (task_cgroup_memory.c): the limit was reached, no task was killed
    text = ("slurmstepd: error: Exceeded step memory limit at some point. Step may have been partially swapped out to disk.\n"
            "slurmstepd: Exceeded job memory limit at some point. Job may have been partially swapped out to disk.\n"
            "slurmstepd: error: Exceeded step memory limit at some point.\n"
            "slurmstepd-node07: error: Exceeded job memory limit at some point.\n"
            "slurmstepd: info: Step 4242.0 hit memory limit at least once during execution. This may or may not result"
            " in some failure.\n"
            "[2019-07-01T10:00:00.000] Step 4242.batch hit memory+swap limit at least once during execution. This may or"
            " may not result in some failure.\n"
            "slurmstepd: Job 4242 hit memory limit at least once during execution. This may or may not result in some"
            " failure.\n"
            # an OOM kill is its own line, and stays one
            "slurmstepd: error: Detected 1 oom-kill event(s) in step 4242.0 cgroup.\n")
    ex = run(text)
    check_contract(ex, 8)
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["kind"], x["code"], x["severity"]) for x in e] == (
        [(n, "slurm_mem_pressure", "MEM_LIMIT_HIT", "warning") for n in range(1, 8)]
        + [(8, "slurm_oom", "1", "error")])
    assert e[3]["host"] == "node07"
    assert set(ex.claimed.to_list()) == set(range(1, 9))
    assert slurm.sniff("slurmstepd: error: Exceeded step memory limit at some point.\n") >= 0.5


def test_memory_limit_kill_of_another_job_takes_no_host() -> None:
    (e, c) = run("slurmstepd: error: Step 99.0 exceeded memory limit (2 > 1), being killed\n"
                 "slurmstepd: error: *** JOB 7518 ON xantipa CANCELLED AT 2022-06-10T17:11:35 ***\n").events.to_dicts()
    assert (e["code"], e["host"], c["host"]) == ("MEM_LIMIT", None, "xantipa")


def test_multiple_slurmd_stepd_prefix_names_the_node() -> None:
    # slurmstepd built with MULTIPLE_SLURMD logs as `slurmstepd-<NodeName>: ` (slurmstepd.c): the node
    # every such line was logged on, unless the message names its own (a banner, srun's task line)
    text = ("slurmstepd-gpu-st-p4d-3: error: Detected 1 oom_kill event in StepId=1234.batch. "
            "Some of the step tasks have been OOM Killed.\n"
            "slurmstepd-gpu-st-p4d-3: error: Exceeded step memory limit\n"
            "slurmstepd-gpu-st-p4d-3: error: *** STEP 1234.0 ON gpu-st-p4d-9 CANCELLED AT 2024-03-01T10:00:00 ***\n"
            "slurmstepd-gpu-st-p4d-3: error: execve(): /tmp/slurm_script: No such file or directory\n"
            "slurmstepd: error: Detected 1 oom_kill event in StepId=1235.batch.\n")
    ex = run(text, host_hint="login-1")
    check_contract(ex, 5)
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["kind"], x["host"]) for x in e] == [
        (1, "slurm_oom", "gpu-st-p4d-3"), (2, "slurm_oom", "gpu-st-p4d-3"), (3, "slurm_cancel", "gpu-st-p4d-9"),
        (4, "slurm_error", "gpu-st-p4d-3"), (5, "slurm_oom", "login-1")]


def test_flux_job_exceptions_doom_and_task_exits() -> None:
    """flux-core: job.exception as `flux run -v` and `flux job eventlog` print it (type timeout / cancel /
    node-failure / exec), the doom plugin's first-task-exit fatal error (old and new wording), the exec eventlog's
    shell.task-exit and flux-job's task status."""
    text = (
        "5.035s: job.exception type=timeout severity=0 resource allocation expired\n"
        "60.052s: job.exception f8AVminB type=timeout severity=0 resource allocation expired\n"
        '1712345678.123456 exception type="cancel" severity=0 note="" userid=1001\n'
        "12.345s: job.exception type=exec severity=0 node failure on fluke42 (rank 3)\n"
        "12.344s: job.exception type=node-failure severity=1 node failure on fluke43 (shell rank 4)\n"
        "flux-shell[0]: FATAL: doom: sh: rank 3 on host frontier10490 exited and exit-timeout=30s has expired\n"
        "flux-shell[0]: FATAL: doom: python: task rank 7 on host tioga12 exited (Exit 1) and exit-timeout=30s has "
        "expired\n"
        "0.133s: flux-shell[0]: FATAL: doom: rank 3 failed and exit-on-error is set\n"
        '0.132s: exec.shell.task-exit {"localid":0,"rank":3,"state":"Exited","pid":173362,"wait_status":10752,'
        '"signaled":0,"exitcode":42}\n'
        "flux-job: task(s) exited with exit code 142\n"
        "flux-job: task(s) Terminated\n"
        "raise RuntimeError('an exception type=foo')\n"
    )
    ex = run(text)
    got = [(e["line_no"], e["kind"], e["code"], e["host"], e["rank"]) for e in ex.events.iter_rows(named=True)]
    assert got == [
        (1, "flux_job", "TIMEOUT", None, None), (2, "flux_job", "TIMEOUT", None, None),
        (3, "flux_job", "CANCEL", None, None), (4, "flux_job", "NODE_FAILURE", "fluke42", None),
        (5, "flux_job", "NODE_FAILURE", "fluke43", None),
        (6, "slurm_task_exit", "EXITED", "frontier10490", 3), (7, "slurm_task_exit", "1", "tioga12", 7),
        (8, "slurm_task_exit", "FAILED", None, 3), (9, "slurm_task_exit", "42", None, 3),
        (10, "slurm_task_exit", "142", None, None), (11, "slurm_task_exit", "SIGTERM", None, None)]
    assert ex.events["severity"].to_list()[:5] == ["warning", "warning", "warning", "critical", "critical"]
    check_contract(ex, 12)
    assert slurm.sniff(text) >= 0.5


def test_moab_wallclock_checkjob_node_down_and_lsf_done() -> None:
    text = (
        "PBS Job Id: 26066307.gpc-sched-ib0\nExec host:  gpc-f142n056-ib0/0+gpc-f142n056-ib0/1\n"
        "MOAB_INFO:  job exceeded wallclock limit\nMOAB_INFO:  job exceeded memory limit\n"
        "WARNING:  allocated node           cu25-0 is in state Down\n"
        "Successfully completed.\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["host"], e["severity"]) for e in ex.events.iter_rows(named=True)] == [
        (3, "pbs_job", "WALLTIME", "gpc-f142n056-ib0", "warning"), (4, "pbs_job", "MEMLIMIT", "gpc-f142n056-ib0", "error"),
        (5, "slurm_node_fail", "NODE_DOWN", "cu25-0", "critical"), (6, "lsf_job", "DONE", None, "info")]
    check_contract(ex, 6)
    assert slurm.sniff("Sender: LSF System <lsfadmin@n1>\n\nSuccessfully completed.\n") >= 0.5

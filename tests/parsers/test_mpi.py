"""Tests for parsers.mpi: Open MPI launcher reports (mpirun's process exits, MPI_ABORT, lost daemons)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import mpi
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "mpi"


def run(text: str) -> Extraction:
    return mpi.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="job.err"))


def rows(ex: Extraction) -> list[tuple]:
    return [(e["line_no"], e["kind"], e["code"], e["host"], e["rank"]) for e in ex.events.to_dicts()]


def test_noticed_signal_lines_every_launcher_name_and_signal() -> None:
    ex = run("mpirun noticed that process rank 0 with PID 21183 on node host01 exited on signal 9 (Killed).\n"
             "mpiexec noticed that process rank 4 with PID 0 on node localhost exited on signal 6 (Aborted).\n"
             "prterun noticed that process rank 12 with PID 77 on node gpu-3 exited on signal 7 (Bus error).\n"
             "orterun noticed that process rank 1 with PID 5 on node n1 exited on signal 31.\n"
             "mpirun noticed that process rank 2 with PID 9 on node n2 exited with status 3\n")
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert rows(ex) == [(1, "mpi_proc_exit", "SIGKILL", "host01", 0), (2, "mpi_proc_exit", "SIGABRT", "localhost", 4),
                        (3, "mpi_proc_exit", "SIGBUS", "gpu-3", 12), (4, "mpi_proc_exit", "SIGNAL_31", "n1", 1),
                        (5, "mpi_proc_exit", "EXIT_3", "n2", 2)]
    assert ex.events["pid"].to_list() == [21183, 0, 77, 5, 9]
    exits = ex.tables["exits"]
    assert exits["signal"].to_list() == ["SIGKILL", "SIGABRT", "SIGBUS", "SIGNAL_31", None]
    assert exits["exitcode"].to_list() == [None, None, None, None, 3] and set(exits["origin"]) == {"mpi"}


def test_lost_daemon_names_the_lost_node_both_help_text_eras() -> None:
    # OpenMPI 1.x/2.0 [node-died] (`with its daemon located on node:` / `hostname:`), leading space as an
    # SGE log shows it, and the 2.1+ wording (`with a remote daemon.` / `HNP daemon` / `Remote daemon`)
    old = run('error: commlib error: got read error (closing "ip-10-15-20-17.ec2.internal/shepherd_ijs/1")\n'
              " --------------------------------------------------------------------------\n"
              " ORTE has lost communication with its daemon located on node:\n\n"
              "   hostname:  ip-10-15-20-17.ec2.internal\n\n"
              " This is usually due to either a failure of the TCP network\n")
    assert rows(old) == [(3, "mpi_daemon_lost", "NODE_DIED", "ip-10-15-20-17.ec2.internal", None)]
    assert {5, 7} <= set(old.claimed.to_list()) and 1 not in set(old.claimed.to_list())
    new = run((FIX / "orte_remote_daemon_lost.log").read_text())
    assert rows(new) == [(3, "mpi_daemon_lost", "NODE_DIED", "mpijob-0-worker-0", None)]
    prte = run("PRTE has lost communication with a remote daemon.\n\n"
               "  HNP daemon   : [prterun-node0-1234@0,0] on node node0\n"
               "  Remote daemon: [[4,0],3] on node node3\n")
    assert rows(prte) == [(1, "mpi_daemon_lost", "NODE_DIED", "node3", None)]


def test_first_failing_process_abort_and_daemon_launch_failure() -> None:
    ex = run((FIX / "proc_exits.log").read_text())
    assert rows(ex) == [(7, "mpi_proc_exit", "SIGSEGV", "fl98", 0), (10, "mpi_abort", "MPI_ABORT", None, 3),
                        (17, "mpi_proc_exit", "EXIT_1", None, 2)]
    assert {3, 4, 11, 13, 16} <= set(ex.claimed.to_list())
    (e,) = run("An ORTE daemon has unexpectedly failed after launch and before communicating back to mpirun.\n"
               ).events.to_dicts()
    assert (e["kind"], e["code"], e["host"]) == ("mpi_daemon_lost", "DAEMON_LAUNCH_FAILED", None)


def test_exit_code_without_a_process_name_is_no_event() -> None:
    ex = run("  Exit code:    1\nall done\n")
    assert ex.events.is_empty()


def test_sniff() -> None:
    assert mpi.sniff((FIX / "proc_exits.log").read_text()) >= 0.5
    assert mpi.sniff("INFO:tensorflow:loss = 3.7, step = 10300\n") == 0.0


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["mpirun noticed that process rank 0 with PID 1 on node a exited on signal 9 (Killed).",
                                 "ORTE has lost communication with a remote daemon.", "  Remote daemon: [[1,0],1] on node b",
                                 "hostname:  c", "  Process name: [[1,1],0]", "  Exit code: 2", ""]) | st.text(max_size=60),
                max_size=12))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    ex = run(text)
    assert dict(ex.events.schema) == EVENT_SCHEMA
    # a generated item may hold line breaks of its own (`\r`, `\n`): the bound is the file's lines as split
    n = decode_lines(text.encode()).lines.height
    assert all(1 <= k <= n for k in ex.claimed.to_list())


def test_renamed_launcher_binaries_name_themselves() -> None:
    """ORTE prints its argv[0] basename: Horovod / MPI Operator images wrap Open MPI as `mpirun.real`,
    Debian installs `mpirun.openmpi`; the notice is read the same way (mpi-operator#90's launcher log)."""
    ex = run("mpirun.real noticed that process rank 1 with PID 39 on node mpi-test-2-mpijob-worker-1 exited on "
             "signal 9 (Killed).\n"
             "mpirun.openmpi noticed that process rank 3 with PID 812 on node gpu-07 exited on signal 11 "
             "(Segmentation fault).\n"
             "orterun.openmpi noticed that process rank 0 with PID 7 on node n0 exited with status 2\n"
             "mpirun.real detected that one or more processes exited with non-zero status, thus causing\n")
    assert rows(ex)[:3] == [(1, "mpi_proc_exit", "SIGKILL", "mpi-test-2-mpijob-worker-1", 1),
                            (2, "mpi_proc_exit", "SIGSEGV", "gpu-07", 3), (3, "mpi_proc_exit", "EXIT_2", "n0", 0)]
    assert 4 in ex.claimed.to_list()


def test_mvapich2_mpispawn_child_reports_name_the_rank_and_its_node() -> None:
    # MVAPICH2 mpispawn.c child_handler / wait_for_errors, prefix `[<hostname>:mpispawn_<id>][<function>] `
    # (peridigm#12's run on Stampede: rank 16 on c557-203 dies, the other nodes' mpispawns only see it go)
    ex = run("[c557-203.stampede.tacc.utexas.edu:mpispawn_1][readline] Unexpected End-Of-File on file descriptor 9. "
             "MPI process died?\n"
             "[c557-203.stampede.tacc.utexas.edu:mpispawn_1][child_handler] MPI process (rank: 16, pid: 107546) "
             "terminated with signal 9 -> abort job\n"
             "[c557-201.stampede.tacc.utexas.edu:mpirun_rsh][process_mpispawn_connection] mpispawn_1 from node "
             "c557-203 aborted: Error while reading a PMI socket (4)\n"
             "[gpu12:mpispawn_0][child_handler] MPI process (rank: 3, pid: 4242) exited with status 1\n"
             "[gpu12:mpispawn_0][wait_for_errors] Abort signaled by rank 3: 'application called MPI_Abort'\n"
             "[gpu12:mpispawn_0][child_handler] MPI process (rank: 3, pid: 4242) stopped with signal 19\n"
             "[gpu12:mpispawn_0][child_handler] Process with pid 4243 terminated with signal 9 -> abort job\n")
    assert rows(ex) == [(2, "mpi_proc_exit", "SIGKILL", "c557-203.stampede.tacc.utexas.edu", 16),
                        (4, "mpi_proc_exit", "EXIT_1", "gpu12", 3), (5, "mpi_abort", "MPI_ABORT", "gpu12", 3)]
    assert ex.events["pid"].to_list()[:2] == [107546, 4242]
    exits = ex.tables["exits"]
    assert exits["signal"].to_list() == ["SIGKILL", None] and exits["exitcode"].to_list() == [None, 1]
    # the survivors' `MPI process died?` notices are no exit of their own: left to the error-line screen
    assert 1 not in ex.claimed.to_list() and 3 not in ex.claimed.to_list()
    assert mpi.sniff("[gpu12:mpispawn_0][child_handler] MPI process (rank: 3, pid: 4242) exited with status 1\n") > 0

"""Tests for parsers.nccl (format variants of ../shared/reference/nccl_log.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nccl
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "nccl"
REAL = ROOT.parent / "shared" / "real-samples"


def run(text: str, **ctx):
    lines = with_body(decode_lines(text.encode()).lines)
    return nccl.parse(lines, ParseContext(path="nccl.log", **ctx))


def fixture(name: str):
    return run((FIX / name).read_text())


def real(case: str, name: str) -> str:
    hits = sorted(REAL.glob(f"{case}-*/{name}")) if REAL.exists() else []
    if not hits:
        pytest.skip("../shared/real-samples not available")
    return hits[0].read_text()


def ev(ex, kind: str) -> pl.DataFrame:
    return ex.events.filter(pl.col("kind") == kind)


def check_accounting(ex, n_lines: int) -> None:
    c, i = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not c & i
    assert c | i <= set(range(1, n_lines + 1))
    assert set(ex.events["line_no"].to_list()) <= c
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]


def test_ib_completion_le218_form():
    ex = fixture("ib_completion_le218.log")
    e = ev(ex, "nccl_ib_error")
    assert e["line_no"].to_list() == [1]
    assert e.row(0, named=True)["host"] == "gpu-a" and e["pid"][0] == 1234 and e["gpu"][0] == 2
    assert e["code"][0] == "12" and e["ts_quality"][0] == "missing"
    row = ex.tables["nccl_errors"].row(0, named=True)
    assert (row["status"], row["vendor_err"], row["peer_ip"], row["peer_port"], row["result"]) == \
        (12, 129, "10.0.0.2", 45074, 6)
    assert ex.claimed.to_list() == [1, 2, 3]  # -> 6 propagation lines folded into the WARN


def test_ib_completion_2_19_form():
    row = fixture("ib_completion_2_19.log").tables["nccl_errors"].row(0, named=True)
    assert (row["status"], row["vendor_err"], row["peer_ip"], row["peer_port"]) == (5, 249, "10.0.0.7", 51234)


def test_ib_completion_2_23_hca_and_timestamp():
    ex = fixture("ib_completion_2_23_hca.log")
    row = ex.tables["nccl_errors"].row(0, named=True)
    assert row["hca"] == "mlx5_3" and row["status"] == 12
    e = ev(ex, "nccl_ib_error").row(0, named=True)
    assert e["ts"] == datetime(2026, 5, 5, 6, 16, 47, tzinfo=UTC) and e["ts_quality"] == "exact"


def test_ib_completion_master_form():
    ex = fixture("ib_completion_master.log")
    row = ex.tables["nccl_errors"].row(0, named=True)
    assert (row["status"], row["vendor_err"], row["peer_ip"], row["hca"], row["gpu"]) == \
        (12, 129, "10.0.1.1", "mlx5_1", 7)
    assert ev(ex, "nccl_ib_error")["host"][0] == "gpu-d"


def test_ib_completion_gin_form():
    row = fixture("ib_completion_gin.log").tables["nccl_errors"].row(0, named=True)
    assert (row["status"], row["vendor_err"], row["hca"]) == (10, 136, "mlx5_0")


def test_ib_async_events_and_modify_qp():
    ex = fixture("ib_async_events.log")
    e = ev(ex, "nccl_ib_error")
    assert e["line_no"].to_list() == [1, 2, 3]
    assert e["severity"].to_list() == ["critical", "warning", "error"]
    assert e["code"].to_list() == ["port error", "GID table change", "ibv_modify_qp"]
    assert ex.tables["nccl_errors"]["hca"].to_list()[:2] == ["mlx5_2", "mlx5_2"]



# The per-object fatal async events (NCCL master src/transport/net_ib/common.cc:126-150): on QP (2.19-2.2x:
# pointer only; master: qpn/handle/cq/state/psn fields), on CQ, on SRQ, and the device-level event (121-124),
# under a collector's and the app's timestamps (b7sys nccl1905). The event string is the code; the QP ones
# are read by nccl-ib-async-qp-fatal, the device one by nccl-ib-async-fatal.
def test_ib_async_fatal_event_family():
    from forensics.signatures import load_catalog

    lines = [
        "2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1219 [0] transport/net_ib.cc:180 NCCL WARN "
        "NET/IB : mlx5_ib0:1 async fatal event on QP (0x7f69f01519a8): local access violation work queue error",
        "node-0:139577:139678 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_1:1 async fatal event on QP "
        "(0x7309dc3bb338): invalid request local work queue error",
        "gpu7:2211:2290 [3] transport/net_ib/common.cc:140 NCCL WARN NET/IB : mlx5_3:1 async fatal event on QP "
        "(0x5581e0) qpn=4711 handle=3 send_cq=1 recv_cq=1 state=6 sq_psn=12 rq_psn=9: local work queue catastrophic error",
        "gpu7:2211:2290 [3] transport/net_ib/common.cc:127 NCCL WARN NET/IB : mlx5_3:1 async fatal event on CQ "
        "(0x7f00aa10) handle=2 cqe=4096: CQ error",
        "gpu7:2211:2290 [3] transport/net_ib/common.cc:123 NCCL WARN NET/IB : mlx5_3:1 async fatal event: local "
        "catastrophic error",
    ]
    ex = run("\n".join(lines) + "\n")
    e = ev(ex, "nccl_ib_error")
    assert e["line_no"].to_list() == [1, 2, 3, 4, 5]
    assert e["code"].to_list() == ["local access violation work queue error", "invalid request local work queue error",
                                   "local work queue catastrophic error", "CQ error", "local catastrophic error"]
    assert e["host"].to_list()[:2] == ["h100-28", "node-0"]
    cat = {s.id: s for s in load_catalog().signatures}
    qp, dev = cat["nccl-ib-async-qp-fatal"], cat["nccl-ib-async-fatal"]
    got = [(qp.matches_text(m), dev.matches_text(m)) for m in e["message"].to_list()]
    assert got == [(True, False)] * 4 + [(False, True)]

def test_ofi_undeliverable():
    row = fixture("ofi_undeliverable.log").tables["nccl_errors"].row(0, named=True)
    assert (row["kind"], row["status"], row["vendor_err"]) == ("nccl_ib_error", 113, 2)


def test_socket_errors():
    ex = fixture("socket_errors.log")
    e = ev(ex, "nccl_socket_error")
    assert e["code"].to_list() == ["connection_closed", "connection_reset", "connection_refused",
                                   "message_truncated", "service_thread", "proxy_call_failed", "no_interface",
                                   "local_rank_closed"]
    errs = ex.tables["nccl_errors"]
    assert errs["peer_ip"].to_list()[:4] == ["gpu-node1.example.org", "10.1.1.1", "10.1.1.2", "10.1.1.3"]
    assert errs.filter(pl.col("line_no") == 5)["result"].to_list() == [3]
    assert errs.height == 7  # the INFO service-thread line is an event, not a WARN row


def test_cuda_errors():
    e = ev(fixture("cuda_errors.log"), "nccl_cuda_error")
    assert e["code"].to_list() == ["out of memory", "an illegal memory access was encountered", "cuda_alloc_failed"]
    assert e["gpu"].to_list() == [4, 4, 4]


def test_bare_warn_lines_without_host_prefix():
    """WARN lines as posted without `host:pid:tid [dev]` (issues, re-wrapped logs): still WARN
    events of the right kind, host / pid / gpu null, the bracketed collector stamp read."""
    ex = fixture("bare_warn.log")
    got = ex.events.select("line_no", "kind", "code", "host", "pid", "gpu").rows()
    assert got == [
        (1, "nccl_warn", None, None, None, None),
        (2, "nccl_warn", None, None, None, None),
        (3, "nccl_cuda_error", "invalid device ordinal", None, None, None),
        (4, "nccl_warn", None, None, None, None),
        (5, "nccl_cuda_error", "the operation cannot be performed in the present state", None, None, None),
        (6, "nccl_ib_error", "12", None, None, None),
    ]
    assert ex.events["message"][0] == "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device"
    assert ex.events.filter(pl.col("line_no") == 4)["ts"].to_list() == [datetime(2024, 3, 2, 10, 11, 12, tzinfo=UTC)]
    errs = ex.tables["nccl_errors"]
    assert errs.filter(pl.col("line_no") == 6).select("status", "vendor_err", "peer_ip").rows() == [(12, 129, "10.0.0.2")]
    assert errs["text"][1].startswith("Error while creating shared memory segment nccl-shm-recv-")
    # the host-less `-> 2` propagation line cannot be tied to a process: left unparsed, not invented
    assert 7 not in ex.claimed.to_list()


def test_bare_warn_host_from_file_hint():
    ex = run("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n",
             host_hint="node-07")
    assert ex.events.select("kind", "host").rows() == [("nccl_warn", "node-07")]


def test_real_251_shm_warns_without_prefix():
    ex = run(real("251", "nccl.log"))
    assert ex.events.select("line_no", "kind").rows() == [(1, "nccl_warn"), (2, "nccl_warn")]
    assert ex.claimed.to_list() == [1, 2]


def test_abort_lines():
    ex = fixture("abort_lines.log")
    assert ev(ex, "nccl_abort")["line_no"].to_list() == [1, 2, 3]
    comms = ex.tables["nccl_comms"]
    assert comms["event"].to_list() == ["abort", "destroy"]
    assert comms["pci_bus_id"].to_list() == ["0000:1b:00", "0000:1b:00"]


def test_init_complete_2_10_no_nvmldev():
    ex = fixture("init_2_10.log")
    assert ev(ex, "nccl_version")["code"].to_list() == ["2.10.3"]
    row = ex.tables["nccl_comms"].row(0, named=True)
    assert (row["rank"], row["nranks"], row["cuda_dev"], row["nvml_dev"], row["pci_bus_id"], row["comm_id"]) == \
        (0, 2, 0, None, "0000:18:00", None)
    iface = ev(ex, "nccl_iface").row(0, named=True)
    assert (iface["code"], iface["host"], iface["line_no"]) == ("10.29.40.157", "gpu-k", 2)
    assert ex.ignored.to_list() == [3]


def test_init_complete_2_11_to_2_19():
    ex = fixture("init_2_11_to_2_19.log")
    row = ex.tables["nccl_comms"].row(0, named=True)
    assert (row["rank"], row["nranks"], row["nvml_dev"], row["bus_id"], row["pci_bus_id"], row["comm_id"]) == \
        (11, 16, 3, "7000", "0000:07:00", "0x2114bc51af4fb978")
    e = ev(ex, "nccl_init").row(0, named=True)
    assert e["rank"] == 11 and e["code"] == "0x2114bc51af4fb978"


def test_init_complete_2_20_api_name_and_split():
    ex = fixture("init_2_20_plus.log")
    comms = ex.tables["nccl_comms"]
    assert comms["event"].to_list() == ["init_start", "init_complete", "init_complete"]
    assert comms["comm_id"].to_list() == ["0x2114bc51af4fb978", "0x2114bc51af4fb978", None]
    # the rank of the process is its rank in the largest communicator, for every event of host:pid
    assert set(ex.events["rank"].to_list()) == {24}
    assert ev(ex, "nccl_iface")["code"].to_list() == ["10.0.0.1", "10.0.0.1"]
    assert ex.ignored.to_list() == [6]  # TRACE line


def test_ras_error_report():
    ex = fixture("ras_error_report.log")
    e = ev(ex, "nccl_ras")
    assert e["line_no"].to_list() == [17, 22]
    assert e["code"].to_list() == ["RUNNING/INCOMPLETE", "INCOMPLETE"]
    assert ex.claimed.to_list() == list(range(1, 24))


def test_info_chatter_is_ignored_not_events():
    text = "\n".join(f"n1:10:11 [0] NCCL INFO Channel {i:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(50))
    ex = run(text + "\n")
    assert ex.events.is_empty() and len(ex.ignored) == 50 and ex.claimed.is_empty()


def test_unrelated_nccl_mentions_untouched():
    ex = run("[rank0]:[E ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught collective operation timeout\n")
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()


def test_real_001_ib_status12():
    ex = run(real("001", "nccl.log"))
    e = ev(ex, "nccl_ib_error")
    assert e["line_no"].to_list() == [1, 6, 11]
    errs = ex.tables["nccl_errors"]
    assert errs["status"].to_list() == [12, 12, 12] and errs["vendor_err"].to_list() == [129] * 3
    assert errs["peer_ip"].to_list() == ["10.216.210.236"] * 3 and errs["result"].to_list() == [6, 6, 6]
    assert e["host"].to_list() == ["kp-ddp-worker-0"] * 3 and e["gpu"].to_list() == [4] * 3
    assert ex.claimed.to_list() == [1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13]
    assert ex.ignored.to_list() == [5, 10]


def test_real_015_ras_healthy():
    ex = run(real("015", "nccl.log"))
    assert ex.events.select("line_no", "kind", "code", "severity").rows() == [
        (1, "nccl_version", "2.26.2", "info"), (16, "nccl_ras", "OK", "info")]
    assert ex.claimed.to_list() == list(range(1, 23))


def test_real_031_async_catastrophic_mpirun():
    ex = run(real("031", "nccl.log"))
    e = ev(ex, "nccl_ib_error")
    assert e["line_no"].to_list() == [1, 3, 5, 7, 9, 11]
    assert e["rank"].to_list() == [12, 12, 14, 14, 13, 13]
    assert e["code"][0] == "local catastrophic error" and e["severity"][0] == "critical"
    assert e["ts"][0] == datetime(2019, 6, 2, 16, 13, 44, 884000, tzinfo=UTC)
    assert ex.ignored.to_list() == [2, 4, 6, 8, 10]


def test_real_044_bare_ofi_text():
    ex = run(real("044", "traceback.txt"))
    assert ex.events.select("line_no", "kind", "code", "rank").rows() == [(8, "nccl_ib_error", "113", 3)]


def test_sniff():
    assert nccl.sniff((FIX / "ib_completion_le218.log").read_text()) >= 0.9
    assert nccl.sniff((FIX / "ras_error_report.log").read_text()) >= 0.8
    assert nccl.sniff("hello world\nTraceback (most recent call last):\n") == 0.0


LINES = [p.read_text() for p in sorted(FIX.glob("*.log"))]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=120), st.sampled_from(
    [ln for t in LINES for ln in t.splitlines()])), max_size=30), st.randoms())
def test_property_never_raises_and_accounting(chunks, rnd):
    mutated = []
    for c in chunks:
        if c and rnd.random() < 0.3:
            i = rnd.randrange(len(c))
            c = c[:i] + rnd.choice(["", "<", ":", " ", "\u00e9", "0x", "(", "NCCL "]) + c[i + 1:]
        mutated.append(c.replace("\n", " ").replace("\r", " "))
    text = "\n".join(mutated) + "\n"
    ex = run(text)
    check_accounting(ex, len(decode_lines(text.encode()).lines))


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.log")))
def test_fixture_accounting(name):
    text = (FIX / name).read_text()
    check_accounting(run(text), len(decode_lines(text.encode()).lines))


def _ras_report(groups: str, func: str = "AllReduce") -> str:
    return ("NCCL version 2.26.2 compiled with CUDA 12.6\n\n"
            "Communicators... (0.00s)\n=============\n\n"
            "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
            "    #  in group  per comm  per node  per comm  in group\n"
            "    0         1         2         8        16        16   RUNNING  MISMATCH\n\n"
            "Warnings\n========\n\n"
            "#0-0 (27a079b828ff1a75) MISMATCH\n"
            f"  Communicator ranks have different {func} operation counts\n" + groups + "\n")


def test_ras_repeated_unchanged_mismatch_is_stuck():
    """client_support.cc's op-count mismatch block, every member shape; a later query of the same file
    repeating a communicator's counts unchanged is STUCK (NCCL's RAS guide), naming the lagging rank when
    it is listed alone; counts that moved, or a single query, are no STUCK."""
    alone = ("  15 ranks have launched up to operation 6650\n"
             "  Rank 9 has launched up to operation 6649 -- GPU 1 managed by process 483081 on node 172.16.64.212\n")
    ex = run(_ras_report(alone) + _ras_report(alone))
    stuck = ev(ex, "nccl_ras").filter(pl.col("code") == "STUCK")
    assert stuck.select("line_no", "rank", "gpu", "host").rows() == [(30, 9, 1, "172.16.64.212")]
    assert "unchanged since line 13" in stuck["message"][0]
    # the listed group is ahead of the others (nccl#1911): stuck, but nobody named
    ahead = ("  14 ranks have launched up to operation 640\n  2 ranks have launched up to operation 641\n"
             "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124\n"
             "  Rank 13 -- GPU 5 managed by process 323033 on node 10.137.190.124\n")
    stuck = ev(run(_ras_report(ahead, "AllGather") * 2), "nccl_ras").filter(pl.col("code") == "STUCK")
    assert stuck.select("rank", "host").rows() == [(None, None)]
    # ranks that launched nothing, process information missing, the pre-2.26 wording
    none = ("  15 ranks have launched up to operation 12\n"
            "  Rank 3 has not launched any operations -- [process information not found]\n")
    stuck = ev(run(_ras_report(none, "collective") * 2), "nccl_ras").filter(pl.col("code") == "STUCK")
    assert stuck.select("rank", "host").rows() == [(3, None)]
    # the counts moved between the queries, or one query alone: collectives outpacing RAS, no STUCK
    moved = alone.replace("6650", "6702").replace("6649", "6701")
    for text in (_ras_report(alone) + _ras_report(moved), _ras_report(alone)):
        assert ev(run(text), "nccl_ras").filter(pl.col("code") == "STUCK").is_empty()


def test_terminal_padded_rows_are_split_into_records():
    """A terminal pane pasted flat: rows space-padded to the pane width, line breaks lost. Each `host:pid:tid
    [dev] ` head behind a run of spaces starts a record of its own (NCCL prints one record per line), with the
    line's number; a WARN glued behind INFO chatter is not dropped as chatter."""
    pad = " " * 61
    ex = run("node7:311:402 [2] NCCL INFO Channel 00/0 : 2[2] -> 10[2] [send] via NET/IB/2/GDRDMA" + pad +
             "node7:311:402 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
             "10.0.0.9<4421> with error 12, opcode 0, len 0, vendor err 129 (Send)" + pad +
             "node7:311:402 [2] NCCL INFO transport/net.cc:1137 -> 6" + pad +
             "node8:77:91 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
             "node7<5001>\n")
    ib = ev(ex, "nccl_ib_error")
    assert ib["line_no"].to_list() == [1] and ib["host"].to_list() == ["node7"] and ib["gpu"].to_list() == [2]
    assert ib["code"].to_list() == ["12"] and ib["message"][0].endswith("vendor err 129 (Send)")
    sock = ev(ex, "nccl_socket_error")
    assert sock["host"].to_list() == ["node8"] and sock["code"].to_list() == ["connection_closed"]
    err = ex.tables["nccl_errors"]
    assert err.filter(pl.col("host") == "node7")["result"].to_list() == [6]


def test_single_spaces_or_one_record_per_line_are_not_split():
    """A record whose message holds a `host:pid:tid`-like token after single spaces is one record."""
    ex = run("n1:10:11 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
             "n1:10:12 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
             "n2:20:21 [1] x<4>\n")
    assert ev(ex, "nccl_socket_error").height == 1 and ev(ex, "nccl_init").height == 1


def test_rccl_version_banner_is_a_version_event():
    """RCCL's banner (ROCm/rccl src/init.cc VERSION_STRING `RCCL version : X.Y.Z<suffix>`, then the HIP / ROCm
    lines) is the library version, as NCCL's `NCCL version X.Y.Z+cudaN` is; the HIP / ROCm lines are not."""
    ex = run("RCCL version : 2.21.5-HEAD:9a0e6a1\nHIP version  : 6.3.42134-a9a80e791\n"
             "ROCm version : 6.3.3.0-74-cbc70b5\nz292:58192:58192 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n")
    v = ev(ex, "nccl_version")
    assert v["line_no"].to_list() == [1, 4] and v["code"].to_list() == ["2.21.5", "2.18.3"]


def test_rccl_hip_failures_are_cuda_errors():
    """RCCL's hipified checks (src/include/checks.h CUCHECK `HIP failure '%s' at %s:%d`, transport/p2p.cc
    `hipIpcGetMemHandle failed : %s`): nccl_cuda_error events with the error string as code, like `Cuda failure`."""
    ex = run(
        "RCCL version 2.18.3+hip5.5 develop:6ecf771+\n"
        "node1:3812:3901 [2] NCCL WARN HIP failure 'an illegal memory access was encountered' at "
        "/src/rccl/build/hipify/src/transport/p2p.cc:612\n"
        "node1:3812:3901 [2] NCCL WARN HIP failure 'out of memory' at /src/rccl/build/hipify/src/misc/alloc.cc:80\n")
    assert ev(ex, "nccl_cuda_error").select("line_no", "code").rows() == [
        (2, "an illegal memory access was encountered"), (3, "out of memory")]


# NCCL_DEBUG_SUBSYS=COLL trace (src/enqueue.cc `%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d
# root %d comm %p [nranks=%d] stream %p`): the lines of NVIDIA/nccl#147 as the maintainer quoted them (grep's
# `LOG1.<r>.txt:` file prefix in front of each process's line)
COLL_147 = """\
LOG1.0.txt:learnfair062:32615:32615 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f88e4000000 recvbuff 0x7f88e4000000 count 25503912 datatype 6 op 0 root 0 comm 0x7f88e005a260 [nranks=8] stream 0x55f20d2f5db0
LOG1.1.txt:learnfair062:32617:32617 [1] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f3bfe7f5400 recvbuff 0x7f3bfe7f5400 count 53 datatype 4 op 0 root 0 comm 0x7f3bf405a260 [nranks=8] stream 0x55d5ffb73110
LOG1.2.txt:learnfair062:32619:32619 [2] NCCL INFO Broadcast: opCount 0 sendbuff 0x7fc1407f5400 recvbuff 0x7fc1407f5400 count 53 datatype 4 op 0 root 0 comm 0x7fc13805a260 [nranks=8] stream 0x55cefcc3b0e0
LOG1.3.txt:learnfair062:32621:32621 [3] NCCL INFO Broadcast: opCount 0 sendbuff 0x7efb7e7f5400 recvbuff 0x7efb7e7f5400 count 53 datatype 4 op 0 root 0 comm 0x7efb7405a260 [nranks=8] stream 0x5604f5ef4de0
"""


def test_coll_trace_one_process_differs_is_a_mismatch_on_its_line():
    ex = run(COLL_147)
    e = ev(ex, "nccl_coll")
    assert e.select("line_no", "code", "severity", "host", "pid", "gpu").rows() == [
        (1, "MISMATCH", "error", "learnfair062", 32615, 0)]
    assert e["message"][0] == (
        "collective parameters differ across ranks at opCount 0 [nranks=8]: this process Broadcast count 25503912 "
        "datatype 6 op 0 root 0, 3 other processes Broadcast count 53 datatype 4 op 0 root 0")
    assert sorted(ex.claimed.to_list()) == [1, 2, 3, 4]
    check_accounting(ex, 4)


def test_coll_trace_agreeing_calls_are_no_event():
    # NVIDIA/nccl#531's worker0 lines: every process AllGather count 512 datatype 0 at opCount f7 (the comm
    # pointers differ per process, which says nothing)
    text = """\
n136-081-019:212537:212537 [5] NCCL INFO AllGather: opCount f7 sendbuff 0x7fe4147b2a00 recvbuff 0x7fe4147b4000 count 512 datatype 0 op 0 root 0 comm 0x7fe40c030110 [nranks=16] stream 0x762db40
n136-081-019:212540:212540 [6] NCCL INFO AllGather: opCount f7 sendbuff 0x7efcba78da00 recvbuff 0x7efcba78ee00 count 512 datatype 0 op 0 root 0 comm 0x7efcb4030110 [nranks=16] stream 0x64d2f60
n136-081-019:212528:212528 [0] NCCL INFO AllGather: opCount f7 sendbuff 0x7f0f0078a600 recvbuff 0x7f0f0078c600 count 512 datatype 0 op 0 root 0 comm 0x7f0efc001060 [nranks=16] stream 0x6f12340
n136-081-019:212529:212529 [1] NCCL INFO AllGather: opCount f7 sendbuff 0x7fa128786c00 recvbuff 0x7fa128791e00 count 512 datatype 0 op 0 root 0 comm 0x7fa124030110 [nranks=16] stream 0x72cff40
"""
    ex = run(text)
    assert ev(ex, "nccl_coll").is_empty()
    assert sorted(ex.claimed.to_list()) == [1, 2, 3, 4]


def test_coll_trace_process_with_two_calls_at_one_opcount_is_not_judged():
    # NVIDIA/nccl#740 (an LL128 corruption, not a desync): process 3874082 traces opCount 0 twice (two
    # communicators of 8), so its calls at opCount 0 cannot be paired with the others'; the wrapped `stream`
    # value is kept as posted
    text = """\
se01gn002:3874082:3874082 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x15548bc00000 recvbuff 0x15548bc00000 count 16384 datatype 0 op 0 root 7 comm 0x155468002fb0 [nranks=8] stream
 0x55558997f7b0
se01gn002:3874077:3874077 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x15548bc00000 recvbuff 0x15548bc00000 count 16384 datatype 0 op 0 root 7 comm 0x155468002fb0 [nranks=8] stream
 0x55558997fbe0
se01gn002:3874078:3874078 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x15548bc00000 recvbuff 0x15548bc00000 count 16384 datatype 0 op 0 root 7 comm 0x155468002fb0 [nranks=8] stream
 0x55558997f520
se01gn002:3874082:3874082 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x15548bc04000 recvbuff 0x15548bc04000 count 32768 datatype 0 op 0 root 0 comm 0x155468002fb0 [nranks=8] stream
"""
    assert ev(run(text), "nccl_coll").is_empty()


def test_coll_trace_send_recv_and_two_sided_disagreement_are_not_judged():
    p2p = "".join(
        f"h:{pid}:{pid} [{d}] NCCL INFO {op}: opCount 3 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root {peer} "
        f"comm 0x2 [nranks=4] stream 0x3\n"
        for pid, d, op, peer in ((10, 0, "Send", 1), (11, 1, "Recv", 0), (12, 2, "Send", 3), (13, 3, "Recv", 2)))
    assert ev(run(p2p), "nccl_coll").is_empty()
    two = "".join(
        f"h:{pid}:{pid} [{d}] NCCL INFO AllReduce: opCount 3 sendbuff 0x1 recvbuff 0x1 count {n} datatype 7 op 0 "
        f"root 0 comm 0x2 [nranks=2] stream 0x3\n" for pid, d, n in ((10, 0, 8), (11, 1, 9)))
    assert ev(run(two), "nccl_coll").is_empty()


def test_coll_trace_rccl_globalrank_names_the_rank():
    text = "".join(
        f"h:{pid}:{pid} [{d}] NCCL INFO AllReduce: opCount 1a sendbuff 0x1 recvbuff 0x1 count {n} datatype 7 op 0 "
        f"root 0 comm 0x2 [nranks=4] stream 0x3 task 0 globalrank {d}\n"
        for pid, d, n in ((10, 0, 8), (11, 1, 8), (12, 2, 16), (13, 3, 8)))
    e = ev(run(text), "nccl_coll")
    assert e.select("line_no", "rank", "gpu").rows() == [(3, 2, 2)]

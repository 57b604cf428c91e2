"""Precedence and causality as data (forensics/signatures/precedence.toml): each rule deciding on
a small job directory of lines as their emitters print them, beside the control where the rule
does not apply."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.precedence import PrecedenceError, load_precedence, parse_precedence
from forensics.signatures import load_catalog

ROOT = Path(__file__).resolve().parents[1]
BOOT = "[Tue Dec  1 08:00:00 2026] Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP\n"


def dmesg(*lines: tuple[str, str]) -> str:
    """(HH:MM:SS, message) pairs as `dmesg -T` prints them."""
    return BOOT + "".join(f"[Tue Dec  1 {t} 2026] {m}\n" for t, m in lines)


XID13 = "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address"
XID48 = "NVRM: Xid (PCI:0000:3b:00): 48, pid=4242, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
XID94 = "NVRM: Xid (PCI:0000:3b:00): 94, pid=4242, name=python3, Contained: SM (0x1). RST: No, D-RST: No"
XID74 = "NVRM: Xid (PCI:0000:3b:00): 74, pid=4242, name=python3, NVLink: fatal error detected on link 3(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)"
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def verdict(job: Path, tmp: Path) -> dict:
    return analyze(job, tmp / "out", html=False).report["verdict"]


def test_the_rules_name_only_signatures_the_catalog_has() -> None:
    prec = load_precedence()
    ids = {s.id for s in load_catalog().signatures}
    assert prec.signature_ids() and prec.signature_ids() <= ids, sorted(prec.signature_ids() - ids)
    assert {r.name for r in prec.outranks} == {"hardware-over-application-xid", "uncorrectable-over-contained",
                                               "fabric-manager-cause-over-cuda-not-ready", "shm-exhaustion-over-enospc",
                                               "eintr-over-its-failed-call", "netfs-over-eintr",
                                               "application-fault-over-ctxsw-timeout"}


def test_a_broken_precedence_file_is_refused_with_every_problem() -> None:
    doc = tomllib.loads((ROOT / "forensics" / "signatures" / "precedence.toml").read_text(encoding="utf-8"))
    doc["tie_break"] = ["weight", "file_order"]
    doc["outranks"][0]["winner_categories"] = ["gpu_exploded"]
    doc["action"]["xid-94"] = "reboot"
    with pytest.raises(PrecedenceError) as e:
        parse_precedence(doc)
    msg = str(e.value)
    assert "file_order" in msg and "path and line" in msg and "gpu_exploded" in msg and "reboot" in msg


@pytest.mark.parametrize("xid48_host", ["node-01", "node-02"])
def test_a_hardware_xid_outranks_an_earlier_application_xid_on_its_host(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path, xid48_host: str) -> None:
    """Xid 13 first, the DBE a minute later (beyond the tie window): on the same host the DBE is
    the cause; on another host the earliest root stands."""
    files = {"node-01/dmesg.log": dmesg(("09:10:00", XID13))}
    other = dmesg(("09:11:00", XID48))
    files[f"{xid48_host}/dmesg.log"] = other if xid48_host != "node-01" else dmesg(("09:10:00", XID13), ("09:11:00", XID48))
    v = verdict(job_of(files), tmp_path)
    if xid48_host == "node-01":
        assert (v["category"], v["action"]) == ("gpu_memory", "exclude_node_and_restart"), v["summary"]
        assert "rule hardware-over-application-xid" in v["summary"]
        assert (v["evidence"][0]["path"], v["evidence"][0]["line"]) == ("node-01/dmesg.log", 3)
    else:
        assert v["category"] == "cuda_error", v["summary"]
        assert (v["evidence"][0]["path"], v["evidence"][0]["line"]) == ("node-01/dmesg.log", 2)
    assert v["culprit"]["host"] == "node-01"


@pytest.mark.parametrize("with_nvlink", [True, False])
def test_an_nvlink_xid_outranks_the_contained_xid_it_causes(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path, with_nvlink: bool) -> None:
    lines = [("09:10:00", XID94)] + ([("09:10:30", XID74)] if with_nvlink else [])
    v = verdict(job_of({"node-03/dmesg.log": dmesg(*lines)}), tmp_path)
    if with_nvlink:
        assert (v["category"], v["action"]) == ("nvlink", "exclude_node_and_restart"), v["summary"]
        assert "xid-74 outranks xid-94" in v["summary"]
    else:
        # alone, the contained error keeps its own action from precedence.toml: restart the application
        assert (v["category"], v["action"], v["auto_recoverable"]) == ("gpu_memory", "restart", True), v["summary"]


@pytest.mark.parametrize(("xid", "other_node", "recovers"), [
    (XID79, False, False),  # the GPU is off the bus and the job has no other node: a human must act
    (XID79, True, True),    # another node of the job is there: restart without node-01
    (XID48, False, False),  # uncorrectable memory stays in the device
    (XID74, False, True),   # an NVLink error is cleared by a GPU reset: restart in place
])
def test_a_fault_that_stays_in_its_node_needs_another_node_to_restart_on(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path, xid: str, other_node: bool, recovers: bool) -> None:
    files = {"node-01/dmesg.log": dmesg(("09:10:00", xid))}
    if other_node:
        files["node-02/dmesg.log"] = dmesg(("09:09:00", "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode."))
    v = verdict(job_of(files), tmp_path)
    assert v["action"] == "exclude_node_and_restart" and v["culprit"]["host"] == "node-01", v["summary"]
    assert v["auto_recoverable"] is recovers, v["summary"]
    assert ("no other node to restart on" in v["summary"]) is not recovers
    assert load_precedence().needs_spare_node == ("gpu_lost", "gpu_memory", "gpu_other_hardware")


XID13_OTHER_GPU = XID13.replace("0000:3b:00", "0000:86:00")


@pytest.mark.parametrize(("later", "rank_log", "want"), [
    ("11:20:00", False, ("cuda_error", "0000:86:00", 3)),  # 2 h 10 min later: a second incident, the latest
    ("10:40:00", False, ("gpu_lost", "0000:3b:00", 2)),    # 1 h 30 min: one incident, its earliest root
    ("11:20:00", True, ("gpu_lost", "0000:3b:00", 2)),     # a rank log spans both: one attempt of one job
])
def test_node_only_records_take_the_latest_incident(job_of: Callable[[dict[str, str]], Path], tmp_path: Path,
                                                    later: str, rank_log: bool, want: tuple) -> None:
    """A node's dmesg alone (precedence.toml node_incident_gap_s): roots more than two hours apart
    are separate incidents and the latest is the verdict; the earlier one is named in the summary.
    A process log that spans both (steps every 20 minutes) bounds one job, whose earliest root stands."""
    files = {"node-01/dmesg.log": dmesg(("09:10:00", XID79), (later, XID13_OTHER_GPU))}
    if rank_log:
        step = ("[2026-12-01 {t}] iteration {i:8d}/    1000 | consumed samples: {n:12d} | elapsed time per iteration "
                "(ms): 2000.1 | learning rate: 3.000E-04 | global batch size:   128 | lm loss: 7.123456E+00 |")
        files["node-01/train.log"] = "".join(step.format(t=t, i=i, n=128 * i) + "\n"
                                             for i, t in enumerate([f"{9 + m // 60:02d}:{m % 60:02d}:00" for m in range(0, 170, 20)], 1))
    v = verdict(job_of(files), tmp_path)
    assert (v["category"], v["culprit"]["pci_bus_id"], v["evidence"][0]["line"]) == want, v["summary"]
    split = want[0] == "cuda_error"
    assert ("the latest incident is taken; 1 earlier root signal, from 2026-12-01 09:10:00 (xid-79, "
            "node-01/dmesg.log:2), lies more than 2 h before it") in v["summary"] if split else \
        "latest incident" not in v["summary"]


STEPS = ("[2026-12-01 09:01:{s:02d}] iteration {i:8d}/    1000 | consumed samples: {n:12d} | elapsed time per iteration "
         "(ms): 2000.1 | learning rate: 3.000E-04 | global batch size:   128 | lm loss: 7.123456E+00 | loss scale: 1.0 |")
CONNECT = ("[2026-12-01 09:05:00] node-a:3016:3235 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
           "10.0.0.7<43213> failed : Connection refused")


@pytest.mark.parametrize("trained", [False, True])
def test_a_socket_failure_is_configuration_before_the_first_step_and_the_network_after(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path, trained: bool) -> None:
    steps = "".join(STEPS.format(s=10 * k, i=10 * (k + 1), n=1280 * (k + 1)) + "\n" for k in range(3)) if trained else ""
    v = verdict(job_of({"node-a/train.log": steps + CONNECT + "\n"}), tmp_path)
    assert v["category"] == ("network_fabric" if trained else "nccl_config"), v["summary"]
    ev = v["evidence"][0]
    assert (ev["path"], ev["line"], ev["signature"]) == ("node-a/train.log", 4 if trained else 1,
                                                         "nccl-socket-connect-failed")


def test_teardown_only_names_no_category(job_of: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    """A peer closing its socket and a clean communicator abort say that something failed, not
    what: no network_fabric verdict from them."""
    log = ("[2026-12-01 09:05:00] node-a:3016:3240 [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed "
           "by remote peer node-b<45074>\n"
           "[2026-12-01 09:05:01] node-a:3016:3016 [0] NCCL INFO comm 0x5610 rank 1 nranks 2 cudaDev 0 busId 100000 - "
           "Abort COMPLETE\n")
    v = verdict(job_of({"node-a/nccl.log": log}), tmp_path)
    assert v["category"] == "unknown" and v["action"] == "investigate", v["summary"]
    assert v["summary"].startswith("Only teardown was seen") and "node-a/nccl.log:1" in v["summary"]
    assert "also seen" not in v["summary"]  # no hint among these lines


def test_teardown_only_says_the_hint_beside_it(job_of: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    """The launcher's SIGTERM to the others, then the worker it found SIGKILLed (torchelastic's order,
    real excerpt fixtures/fresh/b8elastic/colossalai3172): still no category (a SIGKILL proves no OOM),
    but the summary says what was seen beside the teardown, with its line."""
    log = ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2410413 closing signal SIGTERM\n"
           "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 2410412) of "
           "binary: /usr/bin/python\n")
    v = verdict(job_of({"torchrun.log": log}), tmp_path)
    assert v["category"] == "unknown" and v["auto_recoverable"] is False, v["summary"]
    assert v["summary"].startswith("Only teardown was seen (Launcher tearing down workers")
    assert v["summary"].endswith("also seen, not proof: Worker killed (SIGKILL): host OOM killer, cgroup limit or a "
                                 "hard kill (torchrun.log:2)")


def test_a_same_time_tie_breaks_by_the_stated_keys_not_by_file_order(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    """The driver's Xid 79 and its own 'GPU has fallen off the bus' line, in the same second, of
    equal weight, on one host and GPU: the Xid comes first in the file, yet the stated rule (then
    signature id) picks kernel-gpu-fell-off-bus; swapping the lines does not change the pick."""
    keys = load_precedence().tie_break
    assert keys.index("signature") < keys.index("line")
    bus = "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."
    picks = []
    for order in ((XID79, bus), (bus, XID79)):
        v = verdict(job_of({"node-a/dmesg.log": dmesg(*(("09:10:00", m) for m in order))}), tmp_path / str(len(picks)))
        assert v["category"] == "gpu_lost", v["summary"]
        picks.append((v["evidence"][0]["signature"], v["evidence"][0]["text"].strip().endswith(bus)))
    assert picks[0] == picks[1] == ("kernel-gpu-fell-off-bus", True)


def _nccl_rank_log(host: str, ip: str, peers: list[str]) -> str:
    pre = f"{host}:4242:4242 [0]"
    text = (f"[2026-12-01 09:00:00] {pre} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:{ip}<0>\n")
    for k, p in enumerate(peers):
        text += (f"[2026-12-01 09:05:{k:02d}] {host}:4242:4300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB: Got "
                 f"completion from peer {p}<5{k}123> with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_0\n")
    return text


IPS = {"node-a": "10.0.0.1", "node-b": "10.0.0.2", "node-c": "10.0.0.3", "node-d": "10.0.0.4"}


@pytest.mark.parametrize("a_reports", [True, False])
def test_culprit_graph_on_nccl_lines(job_of: Callable[[dict[str, str]], Path], tmp_path: Path, a_reports: bool) -> None:
    """node-a reports completion errors with three distinct peers: node-a is named, not the peers.
    Without node-a's own reports, node-b and node-c both reporting node-a name it too."""
    reports = {"node-a": ["10.0.0.2", "10.0.0.3", "10.0.0.4"] if a_reports else [],
               "node-b": ["10.0.0.1"], "node-c": ["10.0.0.1"], "node-d": []}
    job = job_of({f"{h}/rank-0.log": _nccl_rank_log(h, IPS[h], reports[h]) for h in IPS})
    v = verdict(job, tmp_path)
    assert v["category"] == "network_fabric" and v["culprit"]["host"] == "node-a", v["summary"]
    rule = "it reports failures with 3 distinct peers" if a_reports else "2 hosts report it (node-b, node-c)"
    assert f"culprit node-a: {rule}" in v["summary"]


def test_fabric_manager_version_mismatch_outranks_the_cuda_802_it_causes(tmp_path: Path) -> None:
    """precedence.toml fabric-manager-cause-over-cuda-not-ready: the node's journal says why Fabric
    Manager is not up (its package and the driver differ); the job's 802, in another file and without a
    host, is its consequence (b7sys dstack2348, with the journal line the excerpt cut)."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "journal.log").write_text(
        "Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager NVIDIA GPU driver interface "
        "version 535.183.01 don't match with driver version 535.216.01. Please update with matching NVIDIA driver "
        "package.\n")
    (job / "task.log").write_text(
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized\n")
    v = verdict(job, tmp_path)
    assert (v["category"], v["evidence"][0]["signature"], v["culprit"]["host"]) == (
        "gpu_driver_firmware", "fabric-manager-driver-mismatch", "ip-172-31-92-157"), v["summary"]
    assert "cuda-system-not-ready" in {e["signature"] for e in v["evidence"]}
    # without Fabric Manager's own line the 802 stays what the catalog reads it as
    (job / "journal.log").unlink()
    assert verdict(job, tmp_path / "b")["evidence"][0]["signature"] == "cuda-system-not-ready"


@pytest.mark.parametrize(("line", "server"), [
    ("May  3 09:30:47 backup kernel: [74505.779405] nfs: server rprshnas01.camh.ca not responding, still trying",
     "rprshnas01.camh.ca"),
    ("May  3 09:31:02 backup kernel: [74520.100000] lockd: server 10.20.0.5 not responding, timed out", "10.20.0.5"),
])
def test_a_network_filesystem_client_is_not_blamed_for_its_silent_server(tmp_path: Path, line: str,
                                                                         server: str) -> None:
    """The client that logs `<prog>: server X not responding` is a victim: the culprit is X."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "syslog").write_text(line + "\n")
    v = verdict(job, tmp_path)
    assert (v["category"], v["culprit"]["host"]) == ("storage", server), v["summary"]
    assert "reported by the client backup" in v["summary"]


def test_after_completion_names_the_rendezvous_closed_signal() -> None:
    """precedence.toml [after_completion]: the signals that also tell a late agent the job is done."""
    assert load_precedence().after_completion == ("pt-rendezvous-closed",)
    doc = tomllib.loads((ROOT / "forensics" / "signatures" / "precedence.toml").read_text(encoding="utf-8"))
    del doc["after_completion"]
    assert parse_precedence(doc).after_completion == ()


@pytest.mark.parametrize(("app", "kernel", "where"), [
    # RELION's HANDLE_ERROR beside the kernel's Xid 13 on one GPU (syslog prefix): the Xid names the GPU
    ("ERROR: an illegal instruction was encountered in /opt/relion/src/acc/cuda/custom_allocator.cuh at line 176 "
     "(error-code 73)\n",
     "Feb 15 17:37:45 gpu-node-3 kernel: [82659.755933] NVRM: Xid (PCI:0000:41:00): 13, Graphics SM Warp Exception "
     "on (GPC 1, TPC 0, SM 0): Illegal Instruction Encoding\n", {"host": "gpu-node-3", "pci_bus_id": "0000:41:00"}),
    # PyTorch's CUDA error string with an Xid 31 MMU fault of the same process (dmesg -T)
    ("RuntimeError: CUDA error: an illegal memory access was encountered\n",
     dmesg(("08:10:00", "NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000010, intr 00000000. MMU "
            "Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f29_5b8c9000. Fault is of type FAULT_PDE "
            "ACCESS_TYPE_VIRT_READ")), {"pci_bus_id": "0000:3b:00"}),
])
def test_an_unlocated_cuda_error_takes_the_gpu_of_its_kernel_xid(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path, app: str, kernel: str, where: dict) -> None:
    v = verdict(job_of({"run.err": app, "kern.log": kernel}), tmp_path)
    assert v["category"] == "cuda_error", v["summary"]
    assert {k: v["culprit"][k] for k in where} == where, v["culprit"]
    # the application's line decides when the Xid has no wall-clock time; else the stamped Xid is the root
    assert v["evidence"][0]["path"].endswith("kern.log") or "located by xid-13" in v["summary"], v["summary"]


def test_an_unlocated_cuda_error_with_xids_on_two_gpus_stays_unlocated(
        job_of: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    """Two GPUs report the same kind of fault: which one the application's error came from is unknown."""
    kern = f"[82659.755933] {XID13}\n[82659.756011] {XID13.replace('0000:3b:00', '0000:86:00')}\n"
    v = verdict(job_of({"run.err": "RuntimeError: CUDA error: an illegal instruction was encountered\n",
                        "kern.log": kern}), tmp_path)
    assert v["category"] == "cuda_error" and v["evidence"][0]["path"].endswith("run.err"), v["summary"]
    assert "located by" not in v["summary"] and v["culprit"]["pci_bus_id"] is None, v["summary"]


def test_a_root_event_that_also_matches_a_context_signature_cites_the_deciding_one(job_of, tmp_path: Path) -> None:
    # a DCGM health incident matches the catalog-wide `dcgm-health` context and the clocks-slowdown root:
    # the verdict's first evidence row is the root's (github:NVIDIA/DCGM DcgmHealthWatch SetResponse format)
    job = job_of({"nv-hostengine.log": (
        "2024-02-01 15:40:10.512 ERROR [9596:9610] [[Health]] Detected a WARNING in health system Thermal: "
        "'Detected clocks event due to thermal violation in GPU 6.'\n")})
    v = verdict(job, tmp_path)
    assert v["category"] == "straggler_hardware" and v["culprit"]["gpu"] == 6
    assert (v["evidence"][0]["signature"], v["evidence"][0]["role"]) == ("dcgm-health-clocks-slowdown", "root")


TOPO = ("{h}:{pid}:{tid} [{g}] graph/xml.cc:332 NCCL WARN Could not find real path of "
        "/sys/class/pci_bus/0000:0{g}/../../0000:0{g}:00.0\n{h}:{pid}:{tid} [{g}] NCCL INFO init.cc:916 -> 2\n")


@pytest.mark.parametrize(("files", "culprit"), [
    # [jobwide]: every rank's topology detection fails alike (WSL2): the platform, no culprit rank
    ({"rank0.log": TOPO.format(h="ce1a35ee222c", pid=687, tid=748, g=0),
      "rank1.log": TOPO.format(h="ce1a35ee222c", pid=688, tid=745, g=1)}, (None, None)),
    # two hosts alike (the same image on both): no culprit either
    ({"a/train.log": TOPO.format(h="vm-gpu-1", pid=10, tid=11, g=0),
      "b/train.log": TOPO.format(h="vm-gpu-2", pid=20, tid=21, g=0)}, (None, None)),
    # one rank alone: its host and rank stay the culprit (a single misconfigured node)
    ({"rank3.log": TOPO.format(h="vm-gpu-7", pid=30, tid=31, g=3)}, ("vm-gpu-7", 3)),
])
def test_a_configuration_root_every_rank_reports_has_no_culprit(job_of: Callable[[dict[str, str]], Path],
                                                                   tmp_path: Path, files: dict, culprit: tuple) -> None:
    v = verdict(job_of(files), tmp_path)
    assert v["category"] == "nccl_config" and v["evidence"][0]["signature"] == "nccl-topo-pci-path"
    assert (v["culprit"]["host"], v["culprit"]["rank"]) == culprit, v["summary"]


def test_jobwide_applies_only_to_its_categories(job_of: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    """An OOM on two ranks keeps the first rank as the culprit (taxonomy.csv oom: "culprit is the rank that
    hit it first"): [jobwide] names nccl_config only."""
    oom = "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a total capacity of 79.15 GiB\n"
    v = verdict(job_of({"rank0.log": oom.format(r=0), "rank1.log": oom.format(r=1)}), tmp_path)
    assert v["category"] == "oom" and v["culprit"]["rank"] == 0, v["summary"]


@pytest.mark.parametrize(("name", "text", "signature"), [
    # srun -l + torch's [rankN]: prefix on urllib3's read timeout from the Hub (awsome-distributed-ai#445 shape)
    ("slurm.out", " 7: [rank80]: urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', "
     "port=443): Read timed out. (read timeout=10)\n", "remote-store-unreachable"),
    # the same family against S3, behind a bare [rankN]: prefix
    ("train.log", "[rank3]: urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='my-bucket.s3.us-west-2."
     "amazonaws.com', port=443): Read timed out.\n", "remote-store-unreachable"),
    # the Hub's rate limit, raised on one rank
    ("train.log", "[rank5]: huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
     "https://huggingface.co/api/datasets/allenai/c4/paths-info/1588ec4\n", "hf-hub-rate-limited"),
    # the object store a checkpoint is written to, throttling one rank's upload (botocore ClientError)
    ("train.log", "[rank5]: botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the "
     "PutObject operation (reached max retries: 4): Please reduce your request rate.\n", "ckpt-object-store-error"),
    # ... unreachable from one rank of an srun -l job (botocore EndpointConnectionError)
    ("slurm.out", " 3: [rank3]: botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL: "
     "\"https://ckpt.s3.us-east-1.amazonaws.com/run7/step_4000/__0_0.distcp\"\n", "ckpt-object-store-error"),
    # ... timing out a read through TF's GCS file system, on one host of a pdsh run
    ("pdsh.log", "node-07: 2019-05-02 10:11:12.000001: W tensorflow/core/platform/cloud/gcs_file_system.cc:1037] "
     "Error executing an HTTP request: libcurl code 28 meaning 'Timeout was reached', error details: Operation "
     "timed out\n", "ckpt-object-store-error"),
])
def test_a_remote_store_failure_blames_no_rank_of_the_job(tmp_path: Path, name: str, text: str,
                                                           signature: str) -> None:
    """precedence.toml [outside_job]: the rank whose read of a remote data store failed is a victim of the store."""
    job = tmp_path / "job"
    job.mkdir()
    (job / name).write_text(text)
    v = verdict(job, tmp_path)
    assert (v["category"], v["evidence"][0]["signature"]) == ("storage", signature), v["summary"]
    assert (v["culprit"]["host"], v["culprit"]["rank"]) == (None, None), v["summary"]
    assert "names a service outside the job" in v["summary"]


def test_a_local_file_system_failure_keeps_its_host(tmp_path: Path) -> None:
    """A TF checkpoint op failing on a file system the host mounts (tf-checkpoint-op-failed) is not [outside_job]:
    the reporting host stays the culprit, unlike the object store's."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "pdsh.log").write_text("node-07: 2020-03-02 10:11:12.345678: W tensorflow/core/framework/op_kernel.cc:1651] "
                                  "OP_REQUIRES failed at save_restore_v2_ops.cc:109 : Permission denied: "
                                  "/ckpt/model.ckpt-100_temp; Permission denied\n")
    v = verdict(job, tmp_path)
    assert (v["category"], v["evidence"][0]["signature"]) == ("storage", "tf-checkpoint-op-failed"), v["summary"]
    assert v["culprit"]["host"] == "node-07", v["summary"]


def test_outside_job_names_the_remote_store_signals() -> None:
    """precedence.toml [outside_job] parses, and a file without it names none."""
    assert set(load_precedence().outside_job) == {"hf-hub-rate-limited", "remote-store-unreachable",
                                                  "ckpt-object-store-error"}
    doc = tomllib.loads((ROOT / "forensics" / "signatures" / "precedence.toml").read_text(encoding="utf-8"))
    del doc["outside_job"]
    assert parse_precedence(doc).outside_job == ()


@pytest.mark.parametrize(("text", "restart"), [
    ("tensorflow.python.framework.errors_impl.DataLossError: truncated record at 40960\n", False),
    ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
     "    for batch in loader:\nEOFError: Compressed file ended before the end-of-stream marker was reached\n", False),
    ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
     "    img = Image.open(p).convert('RGB')\nOSError: image file is truncated (57 bytes not processed)\n", False),
])
def test_a_corrupt_data_file_is_storage_and_a_restart_reads_it_again(tmp_path: Path, text: str,
                                                                     restart: bool) -> None:
    """pytorch.toml data-file-corrupt outranks the generic user traceback; precedence [action] stop_and_fix."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text(text)
    v = verdict(job, tmp_path)
    assert (v["category"], v["evidence"][0]["signature"]) == ("storage", "data-file-corrupt"), v["summary"]
    assert v["auto_recoverable"] is restart


@pytest.mark.parametrize(("files", "category", "signature"), [
    # a DataLoader worker's SIGBUS beside the bare ENOSPC of the next SemLock: one /dev/shm exhaustion
    ({"train.log": "RuntimeError: DataLoader worker (pid 56811) is killed by signal: Bus error. It is possible "
                   "that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n",
      "worker.log": "    sl = self._semlock = _multiprocessing.SemLock(\nOSError: [Errno 28] No space left on device\n"},
     "oom", "pt-shm-exhausted"),
    ({"train.log": "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                   "memory (shm).\nOSError: [Errno 28] No space left on device\n"}, "oom", "pt-shm-exhausted"),
    # with no shared-memory sign, ENOSPC stays a full disk
    ({"train.log": "OSError: [Errno 28] No space left on device\n"}, "storage", "pt-storage-full"),
])
def test_enospc_beside_shm_exhaustion_is_the_shm(tmp_path: Path, files: dict[str, str], category: str,
                                                 signature: str) -> None:
    """precedence.toml shm-exhaustion-over-enospc: a bare ENOSPC in an attempt that shows /dev/shm exhausted."""
    job = tmp_path / "job"
    job.mkdir()
    for name, text in files.items():
        (job / name).write_text(text)
    v = verdict(job, tmp_path)
    assert (v["category"], v["evidence"][0]["signature"]) == (category, signature), v["summary"]

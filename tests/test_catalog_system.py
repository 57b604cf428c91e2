"""End to end: the kernel / GPU-agent / scheduler / Kubernetes / cloud families of the catalog
(docs/catalog-cat-system.md). Each case is a small job directory holding the lines as their
emitter prints them, with the prefixes real logs carry; the verdict's category and the evidence
line (path:line) are checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from forensics.analysis import analyze

T = "[Tue Dec  1 09:10:{s:02d} 2026] "  # dmesg -T


def dmesg(*lines: str) -> str:
    head = "[Tue Dec  1 08:00:00 2026] Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP\n"
    return head + "".join(T.format(s=i) + ln + "\n" for i, ln in enumerate(lines))


# (case id, {path: text}, category, evidence path, evidence line, culprit host or None)
CASES = [
    ("oom-memcg-partial-record", {"node-07/dmesg.log": dmesg(
        "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        "memory: usage 524288000kB, limit 524288000kB, failcnt 1234",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/"
        "job_7,task_memcg=/slurm/uid_1000/job_7/step_0/task_0,task=python3,pid=4242,uid=1000")},
     "oom", "node-07/dmesg.log", 4, "node-07"),
    ("soft-lockup", {"node-03/dmesg.log": dmesg(
        "watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python3:4242]",
        "Modules linked in: nvidia_uvm(POE) nvidia_drm(POE) nvidia(POE)",
        "CPU: 12 PID: 4242 Comm: python3 Tainted: P           OEL     6.8.0-45-generic #45-Ubuntu")},
     "host_hardware", "node-03/dmesg.log", 2, "node-03"),
    ("hung-task-on-nfs", {"node-05/dmesg.log": dmesg(
        "nfs: server fs01 not responding, still trying",
        "INFO: task python3:4242 blocked for more than 122 seconds.",
        "      Tainted: P           OE     6.8.0-45-generic #45-Ubuntu",
        '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.')},
     "storage", "node-05/dmesg.log", 2, "fs01"),  # (the NFS server the client names: b7sys, tigrlab525)
    # a hung task's trace in a FUSE client (s3fs / gcsfuse / blobfuse ...), no server line: kernel-hung-task-netfs
    ("hung-task-in-fuse-client", {"node-04/dmesg.log": dmesg(
        "INFO: task python3:4242 blocked for more than 122 seconds.",
        "      Not tainted 6.8.0-45-generic #45-Ubuntu",
        '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
        "task:python3         state:D stack:0     pid:4242  tgid:4242  ppid:4100   flags:0x00004002",
        "Call Trace:",
        " <TASK>",
        " __schedule+0x27c/0x6b0",
        " schedule+0x33/0x110",
        " request_wait_answer+0xce/0x260 [fuse]",
        " fuse_simple_request+0x1d1/0x2e0 [fuse]")},
     "storage", "node-04/dmesg.log", 10, "node-04"),
    # an NFS `intr` mount returns EINTR when a signal interrupts a call stalled on the silent server (nfs(5)):
    # the outage outranks the EINTR it caused (precedence.toml netfs-over-eintr)
    ("eintr-on-a-stalled-nfs-mount", {"node-05/dmesg.log": dmesg("nfs: server fs01 not responding, still trying"),
                                      "node-05/train.log": (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 88, in <module>\n'
        "    batch = next(it)\n"
        "InterruptedError: [Errno 4] Interrupted system call\n")},
     "storage", "node-05/dmesg.log", 2, "fs01"),
    ("ext4-remount-read-only", {"node-02/dmesg.log": dmesg(
        "EXT4-fs error (device nvme0n1p2): ext4_journal_check_start:83: comm python3: Detected aborted journal",
        "EXT4-fs (nvme0n1p2): Remounting filesystem read-only")},
     "storage", "node-02/dmesg.log", 2, "node-02"),
    ("power-key", {"node-09/syslog": (
        "Dec  1 09:10:00 node-09 systemd-logind[1200]: Power key pressed.\n"
        "Dec  1 09:10:00 node-09 systemd-logind[1200]: Powering Off...\n"
        "Dec  1 09:10:01 node-09 systemd[1]: Stopping Session 3 of User alice...\n")},
     "preemption", "node-09/syslog", 1, "node-09"),
    ("gsp-heartbeat-not-gpu-lost", {"node-01/dmesg.log": (
        "[   14.650646] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.71.05  Release Build\n"
        "[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat "
        "1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200\n"
        "[   84.300451] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: currentTime: f420db7018cc0 >= "
        "f420db7018cc0\n"
        "[   84.300463] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: Timeout was set to: 4000 msecs!\n"
        "[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ****************** GSP Timeout ******************\n")},
     "gpu_driver_firmware", "node-01/dmesg.log", 2, "node-01"),
    ("nvrm-init-adapter-failed", {"node-11/dmesg.log": dmesg(
        "NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x26:0x56:1474)",
        "NVRM: GPU 0000:3b:00.0: rm_init_adapter failed, device minor number 2")},
     "gpu_driver_firmware", "node-11/dmesg.log", 2, "node-11"),
    ("nvrm-gpu-not-supported-by-driver", {"node-12/dmesg.log": dmesg(
        "NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330)",
        "NVRM: installed in this system is not supported by the",
        "NVRM: NVIDIA 470.239.06 driver release.")},
     "gpu_driver_firmware", "node-12/dmesg.log", 2, "node-12"),
    ("raw-kmsg-level-prefix-panic", {"node-13/dmesg.log": (
        "<6>[    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP\n"
        "<0>[2315424.098863] Kernel panic - not syncing: hung_task: blocked tasks\n"
        "<4>[2315424.099010] CPU: 24 PID: 1364 Comm: khungtaskd Tainted: P           OE     5.15.0-1053-nvidia\n")},
     "host_hardware", "node-13/dmesg.log", 2, "node-13"),
    ("dmesg-decode-iso-xid79", {"node-14/dmesg.log": (
        "kern  :info  : 2026-12-01T09:00:00,000100+00:00 Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu\n"
        "kern  :err   : 2026-12-01T09:10:00,089671+00:00 NVRM: Xid (PCI:0000:04:00): 79, pid=4242, name=python3, "
        "GPU has fallen off the bus.\n")},
     "gpu_lost", "node-14/dmesg.log", 2, "node-14"),
    ("mlx5-health-compromised", {"node-15/dmesg.log": dmesg(
        "mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838:(pid 2131): ACCESS_REG(0x805) op_mod(0x1) failed, status bad "
        "operation(0x2), syndrome (0x15c356), err(-22)",
        "mlx5_core 0000:5e:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count",
        "mlx5_core 0000:5e:00.0: mlx5_health_try_recover:335:(pid 2131): handling bad device here")},
     "network_fabric", "node-15/dmesg.log", 3, "node-15"),
    ("pcie-uncorrected-completion-timeout", {"node-04/dmesg.log": dmesg(
        "pcieport 0000:00:03.1: AER: Uncorrected (Non-Fatal) error received: 0000:03:00.0",
        "nvidia 0000:03:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, "
        "(Requester ID)",
        "nvidia 0000:03:00.0:   device [10de:2330] error status/mask=00004000/00000000",
        "nvidia 0000:03:00.0:    [14] CmpltTO                (First)")},
     "gpu_other_hardware", "node-04/dmesg.log", 2, "node-04"),
    ("machine-check-exception", {"node-06/dmesg.log": dmesg(
        "mce: [Hardware Error]: CPU 3: Machine Check Exception: 5 Bank 5: be00000000800400",
        "mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff8103ee0a> {intel_idle+0x5a/0x90}",
        "mce: [Hardware Error]: TSC 1b9a3e1c2f4 ADDR fe7f0000 MISC 0",
        "Kernel panic - not syncing: Fatal machine check")},
     "host_hardware", "node-06/dmesg.log", 2, "node-06"),
    ("mlx5-cable-error", {"node-08/dmesg.log": dmesg(
        "mlx5_core 0000:1a:00.0: Port module event[error]: module 0, Cable error, Bad or shorted cable/module",
        "mlx5_core 0000:1a:00.0 ibp26s0: Link down")},
     "network_fabric", "node-08/dmesg.log", 2, "node-08"),
    ("dcgm-exporter-xid-79", {"node-11/dcgm.prom": (
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-265c9814-6156-355b-e589-ff2064894f16",device="nvidia0",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="node-11"} 0\n'
        'DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49",device="nvidia1",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="node-11"} 79\n')},
     "gpu_lost", "node-11/dcgm.prom", 4, "node-11"),
    ("device-plugin-xid-48", {"k8s/device-plugin.log": (
        "2024/03/01 10:00:00 Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock\n"
        "2024/03/01 10:05:07 XidCriticalError: Xid=48 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the "
        "device will go unhealthy.\n"
        "2024/03/01 10:05:07 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8\n")},
     "gpu_memory", "k8s/device-plugin.log", 2, None),
    ("gpud-xid-79", {"gpud.log": (
        "XID 79(GPU has fallen off the bus) detected on PCI:0000:ae:00\n"
        "failed to get remapped rows for GPU-ac896b35-5782-c478-4b2a-a661de07770f: failed to get device remapped "
        "rows: ERROR_GPU_IS_LOST\n")},
     "gpu_lost", "gpud.log", 1, None),
    ("nvidia-smi-nvlink-inactive", {"node-12/nvlink.txt": (
        "GPU 2: Tesla V100-SXM2-32GB (UUID: GPU-0f0e7c2a-1111-2222-3333-444455556666)\n"
        "\t Link 0: 25.781 GB/s\n\t Link 1: 25.781 GB/s\n\t Link 2: 25.781 GB/s\n"
        "GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-1f0e7c2a-1111-2222-3333-444455556666)\n"
        "\t Link 0: 25.781 GB/s\n\t Link 1: 25.781 GB/s\n\t Link 2: 25.781 GB/s\n\t Link 3: <inactive>\n"
        "\t Link 4: 25.781 GB/s\n\t Link 5: <inactive>\n")},
     "nvlink", "node-12/nvlink.txt", 9, "node-12"),
    ("dcgmi-nvlink-down", {"node-13/dcgmi_nvlink.txt": (
        "+----------------------+\n|  NvLink Link Status  |\n+----------------------+\nGPUs:\n"
        "    gpuId 0:\n        U U U U U U U U U U U U U U U U U U\n"
        "    gpuId 1:\n        U U U U D D U U U U U U U U U U U U\n"
        "NvSwitches:\n    No NvSwitches found.\n\nKey: Up=U, Down=D, Disabled=X, Not Supported=_\n")},
     "nvlink", "node-13/dcgmi_nvlink.txt", 8, "node-13"),
    ("slurm-execve-spool-script", {"slurm-89.err": (
        "slurmstepd: error: execve(): /tmp/slurmd/job00089/slurm_script: No such file or directory\n")},
     "storage", "slurm-89.err", 1, None),
    ("slurm-prolog-failed", {"slurm-1234.out": (
        "srun: error: Task launch for StepId=1234.0 failed on node gpu-07: Prolog failed\n"
        "srun: error: Application launch failed: Prolog failed\n")},
     "host_hardware", "slurm-1234.out", 1, None),
    ("pbs-node-failure-mail", {"scheduler/mail.txt": (
        "PBS Job Id: 2600365.fe1.local\nJob Name:   train\nExec host:  gpu-2-17/5\njob deleted\n"
        "Job deleted at request of root@fe1.local\njob preempted (node failure)\n")},
     "host_hardware", "scheduler/mail.txt", 6, "gpu-2-17"),
    ("pbs-walltime", {"train.o123": (
        "step 100 loss 2.31\n=>> PBS: job killed: walltime 86420 exceeded limit 86400\n")},
     "time_limit", "train.o123", 2, None),
    ("lsf-runlimit", {"lsf.out": (
        "Sender: LSF System <lsfadmin@gpu-a01>\nSubject: Job 4711: <train> in cluster <c1> Exited\n"
        "TERM_RUNLIMIT: job killed after reaching LSF run time limit.\nExited with exit code 140.\n")},
     "time_limit", "lsf.out", 3, None),
    ("aws-spot-interruption", {"nth/termination-handler.log": (
        "2024/05/01 10:00:00 INF Adding new event to the event store event={\"Description\":\"Spot ITN received. "
        "Instance will be interrupted at 2024-05-01T10:02:00Z \\n\",\"Kind\":\"SPOT_ITN\"}\n"
        "2024/05/01 10:00:01 INF Cordoning the node\n")},
     "preemption", "nth/termination-handler.log", 1, None),
    ("k8s-node-shutdown", {"pod.txt": (
        "Name:             trainer-worker-3\nNamespace:        default\nNode:             gke-pool-1-abcd/10.0.0.5\n"
        "Status:           Failed\nReason:           NodeShutdown\n"
        "Message:          Pod was terminated in response to imminent node shutdown.\n")},
     "preemption", "pod.txt", 5, "gke-pool-1-abcd"),
    # kubelet node-pressure eviction (pkg/kubelet/eviction/helpers.go): the newer message with the
    # threshold, and the admission refusal naming the node condition in an events table
    ("k8s-evicted-memory-threshold", {"pod.txt": (
        "Name:             trainer-worker-1\nNamespace:        default\nNode:             gpu-node-12/10.0.0.7\n"
        "Status:           Failed\nReason:           Evicted\n"
        "Message:          The node was low on resource: memory. Threshold quantity: 100Mi, available: 81240Ki. "
        "Container trainer was using 62Gi, request is 32Gi, has larger consumption of memory. \n")},
     "oom", "pod.txt", 6, "gpu-node-12"),
    ("k8s-evicted-disk-condition", {"events.txt": (
        "LAST SEEN   TYPE      REASON    OBJECT                 MESSAGE\n"
        "2m          Warning   Evicted   pod/trainer-worker-0   The node had condition: [DiskPressure].\n")},
     "storage", "events.txt", 2, None),
]


@pytest.mark.parametrize(("files", "category", "path", "line", "host"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_family_end_to_end(tmp_path: Path, job_of: Callable[[dict[str, str]], Path], files: dict[str, str], category: str, path: str, line: int,
                           host: str | None) -> None:
    rep = analyze(job_of(files), tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert v["category"] == category
    cited = {(e["path"], e["line"]) for i in rep["interruptions"] for e in i["evidence"] if e["role"] == "root"}
    assert (path, line) in cited
    if host is not None:
        assert v["culprit"]["host"] == host


def test_zero_xid_gauge_and_corrected_errors_name_no_root(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    """A DCGM Xid gauge of 0 is no Xid; `Machine check events logged` and corrected AER/EDAC records
    are context: none of them is a root."""
    files = {
        "node-21/dcgm.prom": (
            "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
            'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-265c9814-6156-355b-e589-ff2064894f16",Hostname="node-21"} 0\n'
            'DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49",Hostname="node-21"} 0\n'),
        "node-21/dmesg.log": dmesg(
            "mce: [Hardware Error]: Machine check events logged",
            "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x12345)",
            "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0",
            "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)",
            # an mlx5 command failing with a firmware syndrome: printed by healthy adapters too
            "mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838:(pid 2131): ACCESS_REG(0x805) op_mod(0x1) failed, status "
            "bad operation(0x2), syndrome (0x15c356), err(-22)"),
    }
    a = analyze(job_of(files), tmp_path / "out", html=False)
    hits = a.sql("select h.signature, h.role from signature_hits h")
    assert "kernel-ib-nic-syndrome" in hits["signature"].to_list()
    assert not hits.filter(hits["signature"].str.starts_with("xid-")).height
    assert set(hits["role"].to_list()) == {"context"}
    assert a.report["verdict"]["category"] not in ("host_hardware", "gpu_lost", "gpu_other_hardware")


def test_cascade_xid_in_the_dcgm_gauge_names_no_root(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    """The gauge keeps the last Xid: a 45 there hides the Xid that caused it (NVIDIA/DCGM issue 235)."""
    files = {"node-22/dcgm.prom": (
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        'DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49",Hostname="node-22",'
        'err_code="45",err_msg="Preemptive cleanup, due to previous errors"} 45\n')}
    a = analyze(job_of(files), tmp_path / "out", html=False)
    hits = a.sql("select h.signature, h.role from signature_hits h")
    assert hits.rows() == [("dcgm-xid-cascade", "context")]
    assert a.report["verdict"]["category"] == "unknown"


def test_lone_kernel_xid45_is_teardown_and_names_no_category(tmp_path: Path,
                                                             job_of: Callable[[dict[str, str]], Path]) -> None:
    """Xid 45 is the driver's preemptive channel cleanup (after an earlier error, or because the process
    was killed): alone it says the cause is elsewhere, as the DCGM gauge's 45 does; beside its cause
    (here Xid 79 on the same GPU) it is that cause's cascade."""
    lone = {"node-23/dmesg.log": dmesg("NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000010")}
    v = analyze(job_of(lone), tmp_path / "lone", html=False).report["verdict"]
    assert v["category"] == "unknown"
    assert "Only teardown was seen" in v["summary"]
    with_cause = {"node-24/dmesg.log": dmesg(
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000010")}
    v = analyze(job_of(with_cause), tmp_path / "cause", html=False).report["verdict"]
    assert (v["category"], v["culprit"]["host"]) == ("gpu_lost", "node-24")


def test_nvlink5_nonfatal_xid_is_context_and_fatal_is_the_root(tmp_path: Path,
                                                                job_of: Callable[[dict[str, str]], Path]) -> None:
    """Xid 144-150 print `<UNIT> Fatal|Nonfatal XC0|XC1 iN Link NN (...)` (xid_formats.md): a Nonfatal event alone is
    no failure (kernel-xid-nvlink5-nonfatal, context); a Fatal one of the same family is the NVLink root."""
    nonfatal = {"node-25/dmesg.log": dmesg(
        "NVRM: Xid (PCI:0000:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02 (0x00000001 0x00000008 0x00000000 "
        "0x00000000 0x00000000 0x00000000)")}
    a = analyze(job_of(nonfatal), tmp_path / "nonfatal", html=False)
    assert a.sql("select signature, role from signature_hits").rows() == [("kernel-xid-nvlink5-nonfatal", "context")]
    assert (a.report["verdict"]["kind"], a.report["interruptions"]) == ("none", [])
    # a line cut after the word (or a driver that drops the XC field) is read by the same word the roots skip on
    cut = {"node-25/dmesg.log": dmesg("NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal")}
    a = analyze(job_of(cut), tmp_path / "cut", html=False)
    assert a.sql("select signature, role from signature_hits").rows() == [("kernel-xid-nvlink5-nonfatal", "context")]
    assert (a.report["verdict"]["kind"], a.report["interruptions"]) == ("none", [])
    fatal = {"node-26/dmesg.log": dmesg(
        "NVRM: Xid (PCI:0000:1b:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 "
        "0x00000000 0x00000000 0x00000000)")}
    v = analyze(job_of(fatal), tmp_path / "fatal", html=False).report["verdict"]
    assert (v["category"], v["culprit"]["host"], v["culprit"]["pci_bus_id"]) == ("nvlink", "node-26", "0000:1b:00")


def test_ctxsw_timeout_after_an_mmu_fault_of_the_same_gpu_is_its_consequence(
        tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    """precedence.toml application-fault-over-ctxsw-timeout: a 109 right after a 31 on the same GPU loses to it;
    a 109 alone, or on another GPU, is still the driver root."""
    mmu = ("NVRM: Xid (PCI:0000:3b:00): 31, pid=37803, name=python3, channel 0x00000201, intr 00000000. MMU Fault: "
           "ENGINE GRAPHICS GPC0 GPCCLIENT_T1_0 faulted @ 0x70a2_c8000000. Fault is of type FAULT_PDE "
           "ACCESS_TYPE_VIRT_WRITE")
    both = {"node-27/dmesg.log": dmesg(mmu, "NVRM: Xid (PCI:0000:3b:00): 109, pid=37803, name=python3, "
                                       "errorString CTX SWITCH TIMEOUT, Info 0x1c000")}
    v = analyze(job_of(both), tmp_path / "both", html=False).report["verdict"]
    assert (v["category"], v["culprit"]["pci_bus_id"]) == ("cuda_error", "0000:3b:00")
    other = {"node-28/dmesg.log": dmesg(mmu, "NVRM: Xid (PCI:0000:86:00): 109, pid=1234, name=python3, "
                                        "errorString CTX SWITCH TIMEOUT, Info 0x1c000")}
    v = analyze(job_of(other), tmp_path / "other", html=False).report["verdict"]
    assert (v["category"], v["culprit"]["pci_bus_id"]) == ("gpu_driver_firmware", "0000:86:00")

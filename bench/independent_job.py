"""A job shaped like the independent 1.4 GB job of issue 14 (see bench/README.md), generated here.

    python bench/independent_job.py OUT [--scale 1.0] [--seed 11]

At scale 1 it writes under OUT/job/ (about 1.4 GB):

- 64 INFO-level NCCL rank logs (and the launcher and Slurm files) of an 8-node x 8-GPU Megatron
  job, from the project's simulator (`forensics.simulate`, public names only): two GPUs on two
  hosts throttle thermally for an hour (so the job's steps slow down), then a GPU falls off the bus
  and the other ranks' watchdogs time out naming their peers (the crash cascade: most reporting
  ranks are not on the bad node).
- `nodes/pdsh-dmesg.log`: `pdsh -w node-[000-127] dmesg` over the whole 128-node partition, every
  line `host: [  uptime] msg` with pdsh's interleaving of the hosts' output; a server's boot
  sequence (CPUs, memory map, PCI devices, IOMMU groups, NICs, NVMe, NVIDIA driver) and runtime
  noise on every node, and the one real fault (Xid 79, fallen off the bus) on the job's bad node.
  The boot times are in job.toml (`boot_times`), as a user who ran `pdsh uptime -s` would put them.
- `telemetry/dcgm-export.csv`: ONE long-format DCGM CSV of the partition's first 64 hosts x 8 GPUs
  over 7,200 s. Its shape is a Prometheus `/api/v1/query_range` result of dcgm-exporter metrics
  (reference/dcgm_formats.md §1: "Some teams export the same data as CSV with columns
  timestamp,metric,<labels...>,value"), one row per sample, written as Python's
  `csv.writer(quoting=csv.QUOTE_NONNUMERIC)` writes it: every string quoted (the header, the
  metric name, the `Hostname` and `gpu` labels, which Prometheus holds as strings), numbers bare
  (the float unix time, the value as a float). SM clock and board power at 1 Hz; GPU temperature,
  clock event reasons and the Xid field every 15 s. Hosts outside the job run other work at full
  clocks. The bad GPU's series stop carrying values once it is lost (DCGM blank sentinels), its
  Xid field reads 79.

Everything is deterministic from the seed; the DCGM CSV is written in vectorized chunks of time
(numpy + polars), never a Python loop per row. `OUT/truth.toml` holds what an analysis must find
(culprit host, GPU and category, the straggler GPUs and their ranks), beside the simulator's
`OUT/expected.toml`. `--scale` shrinks every part (rank-log chatter, kernel noise and hosts,
DCGM hosts and sampling rate) for tests: 0.01 writes a few MB in seconds.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from forensics.simulate import (  # noqa: E402
    Case,
    build_timeline,
    load_scenario,
    make_config,
    make_faults,
    simulate,
)

SCENARIO = ROOT / "bench" / "independent_job.toml"
US = 1_000_000
FULL_INFO_LINES = 175_000  # NCCL INFO lines per rank at scale 1 (about 14 MB per rank log)
PARTITION_NODES = 128  # nodes in the pdsh kernel log at scale 1
DCGM_HOSTS = 64  # hosts in the DCGM export at scale 1 (x 8 GPUs = 512)
DCGM_SPAN_S = 7200
SLOW_EVERY = 15  # temperature, clock event reasons and Xid: one sample per 15 sampling periods
FAST = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE")
SLOW = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_XID_ERRORS")
BLANK_INT_F = "9.223372036854776e+18"  # DCGM's int64 blank, as Prometheus (a float) carries it
BLANK_DBL_F = "140737488355328.0"
IDLE, INIT, TRAIN, HUNG, THERMAL, LOST = range(6)
DCGM_HEADER = '"timestamp","Hostname","gpu","__name__","value"'


# ----------------------------------------------------------------------------- sizes


def sizes(scale: float) -> dict[str, int]:
    s = max(min(scale, 1.0), 1e-4)
    dcgm_hosts = max(8, round(DCGM_HOSTS * math.sqrt(s)))
    return {
        "info_lines": max(40, round(FULL_INFO_LINES * s)),
        "partition_nodes": max(16, round(PARTITION_NODES * math.sqrt(s))),
        "runtime_noise": max(20, round(2600 * s)),  # runtime kernel lines per node
        "dcgm_hosts": dcgm_hosts,
        "dcgm_interval_s": max(1, round(dcgm_hosts / (DCGM_HOSTS * s))),
    }


# ----------------------------------------------------------------------------- kernel


def _boot_lines(host: str, rng: random.Random, cpus: int = 192) -> list[tuple[float, str]]:
    """A large server's boot: (uptime s, message). Messages carry no fault."""
    out: list[tuple[float, str]] = []
    t = 0.0

    def add(msg: str, dt: float = 0.000013) -> None:
        nonlocal t
        t += dt * rng.uniform(0.5, 1.5)
        out.append((t, msg))

    add("Linux version 5.15.0-1063-nvidia (buildd@lcy02-amd64-080) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, "
        "GNU ld (GNU Binutils for Ubuntu) 2.38) #64-Ubuntu SMP Fri Aug  9 17:13:45 UTC 2024", 0)
    add("Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-1063-nvidia root=UUID=3f1b2c4d ro pci=realloc=off iommu=pt")
    for i, feat in enumerate(("x87 floating point registers", "SSE registers", "AVX registers",
                              "MPX bounds registers", "AVX-512 opmask", "AVX-512 Hi256", "AVX-512 ZMM_Hi256")):
        add(f"x86/fpu: Supporting XSAVE feature 0x{1 << i:03x}: '{feat}'")
    add("signal: max sigframe size: 3632")
    add("BIOS-provided physical RAM map:")
    base = 0
    for _ in range(24):
        size = rng.choice((0x9f000, 0x1000, 0x5f000000, 0x100000, 0x3e000000))
        kind = rng.choice(("usable", "reserved", "ACPI data", "ACPI NVS", "usable"))
        add(f"BIOS-e820: [mem 0x{base:016x}-0x{base + size - 1:016x}] {kind}")
        base += size
    add("NX (Execute Disable) protection: active")
    add("SMBIOS 3.3.0 present.")
    add("DMI: NVIDIA DGXH100/DGXH100, BIOS 1.4.4 04/11/2024")
    add("tsc: Detected 2000.000 MHz processor")
    for name in ("FACP", "DSDT", "FACS", "SSDT", "MCFG", "SRAT", "SLIT", "HMAT", "APIC", "BERT", "HEST", "ERST"):
        add(f"ACPI: {name} 0x00000000{rng.randrange(0x5e000000, 0x6f000000):08X} {rng.randrange(0x40, 0x9000):06X} "
            f"(v{rng.randrange(1, 6):02d} NVIDIA DGXH100  00000001 INTL 20200925)")
    for node in range(2):
        add(f"NUMA: Node {node} [mem 0x{node << 36:x}-0x{(node + 1 << 36) - 1:x}] set up")
    add(f"smp: Bringing up secondary CPUs ... ({cpus} CPUs)")
    add("x86: Booting SMP configuration:")
    for c in range(1, cpus):
        if c % 16 == 1:
            add(f".... node  #{c * 2 // cpus}, CPUs:    " + " ".join(f"#{k}" for k in range(c, min(c + 16, cpus))))
        add(f"smpboot: CPU {c} Converting physical {c % 2} to logical die {c % 2}", 0.0004)
    add(f"smp: Brought up 2 nodes, {cpus} CPUs")
    add(f"smpboot: Max logical packages: 2 Total of {cpus} processors activated (801238.52 BogoMIPS)")
    add("devtmpfs: initialized")
    add("x86/mm: Memory block size: 2048MB")
    add("clocksource: jiffies: mask: 0xffffffff max_cycles: 0xffffffff, max_idle_ns: 7645041785100000 ns")
    add("NET: Registered PF_NETLINK/PF_ROUTE protocol family")
    add("audit: initializing netlink subsys (disabled)")
    add("thermal_sys: Registered thermal governor 'fair_share'")
    add("ACPI: Added _OSI(Module Device)")
    add("ACPI: Interpreter enabled")
    for seg in range(16):
        add(f"ACPI: PCI Root Bridge [PC{seg:02d}] (domain 0000 [bus {seg * 16:02x}-{seg * 16 + 15:02x}])")
        add(f"acpi PNP0A08:{seg:02x}: _OSC: OS supports [ExtendedConfig ASPM ClockPM Segments MSI EDR HPX-Type3]")
    dev = 0
    for bus in range(0, 256, 2):
        for fn in range(rng.randrange(2, 7)):
            vid = rng.choice(("8086:09a2", "8086:09a4", "8086:09a3", "8086:0998", "15b3:1021", "10de:22a3",
                              "1000:00b2", "144d:a80a"))
            cls = rng.choice((0x088000, 0x060400, 0x020700, 0x010802, 0x068000))
            add(f"pci 0000:{bus:02x}:{fn:02x}.0: [{vid}] type 00 class 0x{cls:06x}")
            add(f"pci 0000:{bus:02x}:{fn:02x}.0: reg 0x10: [mem 0x{rng.randrange(1 << 40, 1 << 44):x}-"
                f"0x{rng.randrange(1 << 44, 1 << 45):x} 64bit pref]")
            add(f"pci 0000:{bus:02x}:{fn:02x}.0: PME# supported from D0 D3hot D3cold")
            dev += 1
    for g in range(dev):
        add(f"pci 0000:{g % 256:02x}:{g % 7:02x}.0: Adding to iommu group {g}", 0.00002)
    add("iommu: Default domain type: Passthrough (set via kernel command line)")
    add("PCI: Using ACPI for IRQ routing")
    add("clocksource: Switched to clocksource tsc-early")
    add("Freeing unused kernel image (initmem) memory: 3368K", 1.2)
    add("Run /init as init process", 0.01)
    for i in range(8):
        add(f"nvme nvme{i}: pci function 0000:{0x60 + i:02x}:00.0", 0.01)
        add(f"nvme nvme{i}: 64/0/0 default/read/poll queues")
        add(f" nvme{i}n1: p1 p2")
    add("EXT4-fs (md0): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.", 0.8)
    add("systemd[1]: systemd 249.11-0ubuntu3.12 running in system mode", 0.3)
    add("systemd[1]: Detected architecture x86-64.")
    add("systemd[1]: Set hostname to <" + host + ">.")
    for i in range(8):
        add(f"mlx5_core 0000:{0x19 + i * 0x12:02x}:00.0: firmware version: 28.39.1002", 0.2)
        add(f"mlx5_core 0000:{0x19 + i * 0x12:02x}:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)")
        add(f"mlx5_core 0000:{0x19 + i * 0x12:02x}:00.0: Port module event: module 0, Cable plugged")
    add("nvidia: loading out-of-tree module taints kernel.", 4.0)
    add("nvidia-nvlink: Nvlink Core is being initialized, major device number 234")
    add("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Sat Jun  1 03:15:20 UTC 2024")
    add("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.90.07  "
        "Sat Jun  1 02:46:42 UTC 2024")
    for i in range(8):
        add(f"mlx5_core 0000:{0x19 + i * 0x12:02x}:00.0 ibp{0x19 + i * 0x12}s0: Link up", 2.0)
    add("nvidia-fabricmanager: Successfully initialized fabric manager", 3.0)
    return out


RUNTIME_NOISE = (
    "audit: type=1400 audit({t:.3f}:{n}): apparmor=\"DENIED\" operation=\"open\" class=\"file\" "
    "profile=\"snap.lxd.activate\" name=\"/proc/{n}/mounts\" pid={n} comm=\"snap-exec\" requested_mask=\"r\" "
    "denied_mask=\"r\" fsuid=0 ouid=0",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ibp{bus}s0: link becomes ready",
    "loop{k}: detected capacity change from 0 to {n}",
    "EXT4-fs (nvme{k}n1p2): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.",
    "nvidia-uvm: Loaded the UVM driver, major device number 510.",
    "Lustre: Mounted lfs01-client",
    "perf: interrupt took too long (2{k}61 > 2{k}50), lowering kernel.perf_event_max_sample_rate to 7{k}000",
    "docker0: port {k}(veth{n:x}) entered forwarding state",
    "systemd-journald[{n}]: Data hash table of /var/log/journal/system.journal has a fill level at 75.0, "
    "suggesting rotation.",
    "nfs: server storage01 OK",
)


def _runtime_lines(rng: random.Random, up0: float, up1: float, n: int) -> list[tuple[float, str]]:
    ts = sorted(rng.uniform(up0, up1) for _ in range(n))
    out = []
    for t in ts:
        tmpl = rng.choice(RUNTIME_NOISE)
        out.append((t, tmpl.format(t=t, n=rng.randrange(1000, 900000), k=rng.randrange(0, 8),
                                   bus=0x19 + rng.randrange(0, 8) * 0x12)))
    return out


def _parse_uptime_dmesg(text: str) -> list[tuple[float, str]]:
    out = []
    for ln in text.splitlines():
        close = ln.index("]")
        out.append((float(ln[1:close]), ln[close + 2:]))
    return out


def write_kernel(case: Case, job: Path, sz: dict[str, int], seed: int) -> list[str]:
    """Replace the simulator's per-node dmesg files by one pdsh log over the partition; return the
    hosts it covers. Boot times go to job.toml."""
    job_hosts = case.hosts
    hosts = [case.ids.host(i) for i in range(max(sz["partition_nodes"], len(job_hosts)))]
    end_t = max(a.end for a in case.attempts) + 300 * US
    per_host: dict[str, list[tuple[float, str]]] = {}
    for host in hosts:
        rng = random.Random(f"{seed}:kernel:{host}")
        boot = case.ids.boot(host)
        up_end = (end_t - boot) / US
        lines = [(t, m) for t, m in _boot_lines(host, rng)]
        sim = job / "nodes" / host / "dmesg.log"
        if sim.is_file():  # the job's own kernel events (the fault), without the simulator's boot lines
            lines += [(t, m) for t, m in _parse_uptime_dmesg(sim.read_text()) if t > 60.0]
        lines += _runtime_lines(rng, 120.0, up_end, sz["runtime_noise"])
        lines.sort(key=lambda e: e[0])
        per_host[host] = lines
    shutil.rmtree(job / "nodes", ignore_errors=True)
    out = job / "nodes"
    out.mkdir(parents=True)
    # pdsh prints each host's output as it arrives: runs of a host's lines, the hosts interleaved
    rng = random.Random(f"{seed}:pdsh")
    cursors = {h: 0 for h in hosts}
    with (out / "pdsh-dmesg.log").open("w", encoding="utf-8") as fh:
        live = list(hosts)
        while live:
            h = rng.choice(live)
            lines = per_host[h]
            i = cursors[h]
            j = min(len(lines), i + rng.randrange(1, 400))
            fh.write("".join(f"{h}: [{t:12.6f}] {m}\n" for t, m in lines[i:j]))
            cursors[h] = j
            if j >= len(lines):
                live.remove(h)
    boots = [f'"{h}" = {(case.clock.utc(case.ids.boot(h))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}' for h in hosts]
    toml = job / "job.toml"
    toml.write_text(toml.read_text() + "\n[boot_times]\n" + "\n".join(boots) + "\n", encoding="utf-8")
    return hosts


# ----------------------------------------------------------------------------- DCGM


def _states(case: Case, hosts: list[str], gpn: int, t_us: np.ndarray) -> np.ndarray:
    """State of every (time, GPU) in the simulator's precedence: lost, straggler episode, windows
    of gpu_states (hung), the attempt (init/train), else idle, or other work off the job's hosts."""
    st = np.full((t_us.size, len(hosts) * gpn), TRAIN, dtype=np.int8)
    t = t_us[:, None]
    job_hosts = set(case.hosts)
    for hi, host in enumerate(hosts):
        if host not in job_hosts:
            continue
        cols = slice(hi * gpn, (hi + 1) * gpn)
        s = np.full((t_us.size, gpn), IDLE, dtype=np.int8)
        for a in case.attempts:
            if host in a.hosts:
                s[((t >= a.start) & (t < a.first_step_start))[:, 0]] = INIT
                s[((t >= a.first_step_start) & (t < a.end))[:, 0]] = TRAIN
        for g in range(gpn):
            for s0, e0, name in case.gpu_states.get((host, g), []):
                if name == "hung":
                    s[(t[:, 0] >= s0) & (t[:, 0] < e0), g] = HUNG
            for ep in case.slow:
                if ep.host == host and (ep.rank or 0) % gpn == g:
                    s[(t[:, 0] >= ep.start) & (t[:, 0] < ep.end), g] = THERMAL
            for s0, _e0, name in case.gpu_states.get((host, g), []):
                if name == "lost":
                    s[t[:, 0] >= s0, g] = LOST
        st[:, cols] = s
    return st


def _xid(case: Case, hosts: list[str], gpn: int, t_us: np.ndarray) -> np.ndarray:
    x = np.zeros((t_us.size, len(hosts) * gpn), dtype=np.int64)
    for (host, g), events in case.xids.items():
        if host in hosts:
            for bt, code in sorted(events):
                x[t_us >= bt, hosts.index(host) * gpn + g] = code
    return x


def _fmt(values: np.ndarray, decimals: int) -> pl.Series:
    s = pl.Series(np.round(values, decimals))
    return s.cast(pl.Utf8)


def write_dcgm(case: Case, job: Path, hosts: list[str], interval_s: int, seed: int) -> Path:
    gpn = case.cfg.gpus_per_node
    n_gpu = len(hosts) * gpn
    rng = np.random.default_rng(seed)
    base_temp = rng.integers(58, 66, n_gpu)
    t0_epoch = case.cfg.start.timestamp()
    steps = np.arange(0, DCGM_SPAN_S, interval_s, dtype=np.int64)
    host_col = np.repeat(np.array([f'"{h}"' for h in hosts]), gpn)
    gpu_col = np.tile(np.array([f'"{g}"' for g in range(gpn)]), len(hosts))
    path = job / "telemetry" / "dcgm-export.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = max(1, 40_000 // n_gpu)  # sample times per chunk
    with path.open("w", encoding="utf-8") as fh:
        fh.write(DCGM_HEADER + "\n")
        for c0 in range(0, steps.size, chunk):
            k = steps[c0:c0 + chunk]
            t_us = k * US
            st = _states(case, hosts, gpn, t_us)
            shape = st.shape
            u = rng.random(shape)
            clock = np.where(u < 0.8, 1980, rng.integers(1950, 1981, shape)).astype(np.float64)
            clock = np.where(st == THERMAL, rng.integers(1260, 1341, shape), clock)
            clock = np.where(st == IDLE, 345.0, clock)
            power = np.where(st == TRAIN, rng.uniform(600, 690, shape), rng.uniform(110, 140, shape))
            power = np.where(st == THERMAL, rng.uniform(480, 540, shape), power)
            power = np.where(st == IDLE, rng.uniform(65, 75, shape), power)
            temp = base_temp[None, :] + rng.integers(-2, 4, shape)
            temp = np.where((st == INIT) | (st == HUNG), base_temp[None, :] - 15 + rng.integers(-1, 2, shape), temp)
            temp = np.where(st == THERMAL, rng.integers(88, 93, shape), temp)
            temp = np.where(st == IDLE, 32 + rng.integers(0, 4, shape), temp)
            reasons = np.where((st == TRAIN) & (rng.random(shape) < 0.2), 4, 0)
            reasons = np.where(st == THERMAL, 0x60 | np.where(rng.random(shape) < 0.3, 4, 0), reasons)
            reasons = np.where(st == IDLE, 1, reasons)
            xid = _xid(case, hosts, gpn, t_us)
            lost = (st == LOST).ravel()
            stamp = np.repeat(np.array([f"{t0_epoch + s:.1f}" for s in k]), n_gpu)
            fields = [(FAST[0], _fmt(clock.ravel(), 0), BLANK_INT_F), (FAST[1], _fmt(power.ravel(), 3), BLANK_DBL_F)]
            slow = (k % (interval_s * SLOW_EVERY) == 0)
            if slow.any():
                rows = np.repeat(slow, n_gpu)
                fields += [(SLOW[0], _fmt(temp.ravel().astype(np.float64), 0), BLANK_INT_F),
                           (SLOW[1], _fmt(reasons.ravel().astype(np.float64), 0), BLANK_INT_F),
                           (SLOW[2], _fmt(xid.ravel().astype(np.float64), 0), None)]
            else:
                rows = None
            n = len(k) * n_gpu
            t_idx = np.repeat(np.arange(len(k)), n_gpu)
            g_idx = np.tile(np.arange(n_gpu), len(k))
            parts = []
            for i, (name, vals, blank) in enumerate(fields):
                v = vals if blank is None else pl.select(
                    pl.when(pl.Series(lost)).then(pl.lit(blank)).otherwise(vals)).to_series()
                df = pl.DataFrame({"ts": stamp, "h": np.tile(host_col, len(k)), "g": np.tile(gpu_col, len(k)),
                                   "m": np.full(n, f'"{name}"'), "v": v, "_t": t_idx, "_g": g_idx,
                                   "_f": np.full(n, i)})
                parts.append(df.filter(pl.Series(rows)) if i >= 2 and rows is not None else df)
            # one row per sample, by time, then GPU, then field
            out = pl.concat(parts).sort("_t", "_g", "_f").select(
                pl.concat_str(["ts", "h", "g", "m", "v"], separator=","))
            out.write_csv(fh, include_header=False, quote_style="never")
    return path


# ----------------------------------------------------------------------------- truth


def write_truth(case: Case, out: Path, dcgm: Path, kernel_hosts: list[str]) -> None:
    a = next(a for a in case.attempts if a.fault is not None and a.culprit_host)
    gpn = case.cfg.gpus_per_node
    lines = ["# what an analysis of this job must find (bench/independent_job.py)", "[culprit]",
             f'host = "{a.culprit_host}"', f"gpu = {a.culprit_gpu}", f"rank = {a.culprit_rank}",
             'category = "gpu_lost"', 'fault = "gpu_fell_off_bus"',
             f'time = "{case.clock.iso(a.fault_t or 0)}"', "", "[files]",
             f'dcgm = "{dcgm.relative_to(out / "job")}"', 'kernel = "nodes/pdsh-dmesg.log"',
             f"kernel_hosts = {len(kernel_hosts)}", f"rank_logs = {len(a.hosts) * gpn}", ""]
    for ep in case.slow:
        if ep.host is None:
            continue
        lines += ["[[stragglers]]", f'host = "{ep.host}"', f"gpu = {(ep.rank or 0) % gpn}", f"rank = {ep.rank}",
                  'cause = "thermal"', f'start = "{case.clock.iso(ep.start)}"', f'end = "{case.clock.iso(ep.end)}"', ""]
    (out / "truth.toml").write_text("\n".join(lines), encoding="utf-8")


def generate(out: Path, scale: float = 1.0, seed: int = 11) -> Path:
    """Write OUT/job/, OUT/expected.toml and OUT/truth.toml; return OUT/job."""
    sz = sizes(scale)
    spec = load_scenario(SCENARIO)
    spec["job"]["nccl_info_lines_per_rank"] = sz["info_lines"]
    shutil.rmtree(out, ignore_errors=True)
    simulate(spec, out, seed)
    case = Case(make_config(spec["job"], seed), make_faults(spec.get("faults", [])), seed)
    build_timeline(case)  # the same timeline simulate drew (deterministic from the seed)
    job = out / "job"
    kernel_hosts = write_kernel(case, job, sz, seed)
    dcgm_hosts = [case.ids.host(i) for i in range(max(sz["dcgm_hosts"], len(case.hosts)))]
    dcgm = write_dcgm(case, job, dcgm_hosts, sz["dcgm_interval_s"], seed)
    write_truth(case, out, dcgm, kernel_hosts)
    return job


def measure(out: Path, repeat: int) -> dict:
    """`forensics analyze` of OUT/job against `cat` and `grep -E -c` with the catalog's literals over
    the same files, in the same run, timed as bench/run.py times them (output read through a pipe,
    CPU beside wall, peak RSS from os.wait4); whether the DCGM file was read, the stragglers and the
    culprit are right (OUT/truth.toml)."""
    import json
    import os
    import tomllib

    sys.path.insert(0, str(ROOT / "bench"))
    import run as bench  # bench/run.py: the same timing and baselines

    job = out / "job"
    files = sorted(str(p) for p in job.rglob("*") if p.is_file())
    size = sum(os.path.getsize(f) for f in files)
    cat = bench.timed(["cat", *files], repeat, bench.BASELINE_ENV)
    if cat.pop("output") is not None and cat["output_bytes"] != size:
        raise SystemExit("cat did not read every byte")
    grep = bench.timed(["grep", "-E", "-c", "-e", bench.grep_pattern(), *files], repeat, bench.BASELINE_ENV)
    if len(bench.grep_counts(grep.pop("output"))) != len(files):
        raise SystemExit("grep -c did not report every file")
    res = out / "analysis"
    shutil.rmtree(res, ignore_errors=True)
    fx = bench.timed([sys.executable, "-m", "forensics.cli", "analyze", str(job), "--out", str(res), "--quiet"],
                     repeat)
    fx.pop("output")
    rep = json.loads((res / "report.json").read_text())
    truth = tomllib.loads((out / "truth.toml").read_text())
    src = next(s for s in rep["sources"] if s["path"] == truth["files"]["dcgm"])
    want = {(s["host"], s["gpu"]) for s in truth["stragglers"]}
    got = {(s["host"], s["gpu"]) for s in rep["stragglers"]}
    v = rep["verdict"] or {}
    row = {"files": len(files), "bytes": size, "load_avg": os.getloadavg(), "forensics": fx, "cat": cat,
           "grep": grep, "ratio_to_grep": round(fx["wall_s"] / max(grep["wall_s"], 1e-6), 2),
           "cpu_ratio_to_grep": round(fx["cpu_s"] / max(grep["cpu_s"], 1e-6), 2),
           "dcgm_read": src["parser"] == "dcgm" and src["unparsed"] == 0 and src["parsed"] == src["lines"] - 1,
           "stragglers_right": got == want,
           "culprit_right": (v.get("culprit") or {}).get("host") == truth["culprit"]["host"]
           and v.get("category") == truth["culprit"]["category"]}
    row["targets"] = {"le_2x_grep_wall": row["ratio_to_grep"] <= 2.0,
                      "peak_rss_le_1GiB": fx["peak_rss_mb"] <= 1024,  # ru_maxrss in MiB
                      "verdict_and_stragglers_right": row["culprit_right"] and row["stragglers_right"]}
    (out / "measure.json").write_text(json.dumps(row, indent=2) + "\n")
    # its part of bench/results.json (bench/run.py keeps it when it rewrites the file)
    data = json.loads(bench.RESULTS.read_text()) if bench.RESULTS.is_file() else {}
    data["independent"] = {"machine": bench.machine(), "job": str(job), **row}
    bench.RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--measure", action="store_true", help="then time analyze, cat and grep -E -c over it")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    if not (args.measure and (args.out / "truth.toml").is_file()):  # --measure reuses a generated job
        job = generate(args.out, args.scale, args.seed)
        size = sum(p.stat().st_size for p in job.rglob("*") if p.is_file())
        print(f"wrote {job} ({size / 1e6:,.0f} MB) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.measure:
        import json

        print(json.dumps(measure(args.out, args.repeat)))


if __name__ == "__main__":
    main()

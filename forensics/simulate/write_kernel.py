"""Writer of the per-node kernel logs."""

from __future__ import annotations

from pathlib import Path

from forensics.simulate.config import NIC_BUS, US
from forensics.simulate.dialects import KERNEL_STAMPS
from forensics.simulate.timeline import Case
from forensics.simulate.write_ranks import attempt_folder


def kernel_style(case: Case, host: str) -> str:
    """The kernel-log stamp of `host`: the dialect's draw, else the scenario's `kernel_log_style`."""
    return case.dialect.kernel[host].name if case.dialect is not None else case.cfg.kernel_style


def kernel_stamp(case: Case, host: str, t: int) -> str:
    style = kernel_style(case, host)
    up = t - case.ids.boot(host)
    upt = f"[{up // US:5d}.{up % US:06d}]"
    d = case.clock.local(t)
    template = next((v.template for v in KERNEL_STAMPS if v.name == style), "{upt} ")
    return template.format(upt=upt, ctime=f"{d:%a %b} {d.day:2d} {d:%H:%M:%S %Y}", iso=f"{d:%Y-%m-%dT%H:%M:%S%z}",
                           mon=f"{d:%b}", day=f"{d.day:2d}", hms=f"{d:%H:%M:%S}", host=host)


def boot_noise(case: Case, host: str) -> list[tuple[int, str]]:
    b = case.ids.boot(host)
    dv = case.cfg.driver_text
    lines = [(b, "Linux version 5.15.0-1063-nvidia (buildd@lcy02-amd64-080) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
                 "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #64-Ubuntu SMP Fri Aug  9 17:13:45 UTC 2024"),
             (b + 1, "Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-1063-nvidia root=UUID=3f1b2c4d ro "
                     "pci=realloc=off iommu=pt"),
             (b + 2, "x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'")]
    t = b + 21 * US
    lines += [(t, "nvidia: loading out-of-tree module taints kernel."),
              (t + 1, "nvidia-nvlink: Nvlink Core is being initialized, major device number 234"),
              (t + 2, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {dv}  Sat Jun  1 03:15:20 UTC 2024")]
    for i, bus in enumerate(NIC_BUS[: case.cfg.gpus_per_node]):
        lines.append((t + 4 * US + i, f"mlx5_core 0000:{bus}:00.0 ibp{int(bus, 16)}s0: Link up"))
    return lines


def write_kernel_logs(case: Case, job: Path) -> None:
    for host in case.hosts:
        events = boot_noise(case, host) + sorted(case.kernel_events.get(host, []), key=lambda e: e[0])
        d = job / "nodes" / host
        d.mkdir(parents=True, exist_ok=True)
        text = "\n".join(kernel_stamp(case, host, t) + msg for t, msg in events)
        (d / "dmesg.log").write_text(text + "\n", encoding="utf-8")
        if kernel_style(case, host) == "uptime":
            boot = case.clock.local(case.ids.boot(host))
            (d / "uptime_since.txt").write_text(f"{boot:%Y-%m-%d %H:%M:%S}\n", encoding="utf-8")
        if not case.cfg.kernel_in_logs:
            continue
        # an epilog's `journalctl -b` at the end of each run, beside that run's process logs: the
        # node's journal since boot (days before the job: boot lines, an earlier job's slurmstepd
        # cancel), up to the run's end
        prev = -86400 * US
        jid = case.cfg.job_id - 913
        node = [(t, f"{host} kernel: {msg}") for t, msg in events]
        node.append((prev, f"{host} slurmstepd[{4100 + len(host)}]: error: *** JOB {jid} ON {host} CANCELLED AT "
                           f"{case.clock.slurm(prev)} DUE TO TIME LIMIT ***"))
        node.sort(key=lambda e: e[0])
        for a in case.attempts:
            if host not in a.hosts:
                continue
            upto = [f"{case.clock.local(t):%Y-%m-%dT%H:%M:%S%z} {msg}" for t, msg in node if t <= a.end]
            path = attempt_folder(case, job, a, host) / f"journal-{a.index}.log"
            path.write_text("\n".join(upto) + "\n", encoding="utf-8")

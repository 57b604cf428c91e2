"""Clocks and formats: microseconds since the job start to stamps, Slurm elapsed, hostlists."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo


class Clock:
    """Converts integer microseconds since the job start into formatted stamps."""

    def __init__(self, start: datetime, tz: ZoneInfo) -> None:
        self.start = start
        self.tz = tz

    def utc(self, t: int) -> datetime:
        return self.start + timedelta(microseconds=t)

    def local(self, t: int) -> datetime:
        return self.utc(t).astimezone(self.tz)

    def iso(self, t: int) -> str:
        return self.utc(t).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def iso_s(self, t: int) -> str:
        return self.utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")

    def megatron(self, t: int) -> str:
        return self.local(t).strftime("%Y-%m-%d %H:%M:%S.%f")

    def comma_ms(self, t: int) -> str:
        d = self.local(t)
        return d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d}"

    def glog(self, t: int, extra_ns: int = 0) -> str:
        d = self.local(t)
        return d.strftime("%m%d %H:%M:%S") + f".{d.microsecond * 1000 + extra_ns:09d}"

    def glog_py(self, t: int) -> str:
        d = self.local(t)
        return d.strftime("%m%d %H:%M:%S") + f".{(d.microsecond // 1000) * 1000:06d}"

    def slurm(self, t: int) -> str:
        return self.local(t).strftime("%Y-%m-%dT%H:%M:%S")

    def table(self, t: int) -> str:
        return self.local(t).strftime("%Y-%m-%d_%H:%M:%S")

    def nccl_ts(self, t: int) -> str:
        return self.local(t).strftime("[%Y-%m-%d %H:%M:%S] ")


def elapsed(seconds: int) -> str:
    d, rem = divmod(max(0, seconds), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def hostlist(hosts: Iterable[str]) -> str:
    """Slurm-compressed host list: node-000,node-001,node-003 -> node-[000-001,003]."""
    groups: dict[str, list[str]] = {}
    order: list[str] = []
    for h in hosts:
        prefix, _, num = h.rpartition("-")
        if not num.isdigit():
            groups.setdefault(h, [])
            order.append(h)
            continue
        key = prefix + "-"
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(num)
    parts = []
    for key in order:
        nums = groups[key]
        if not nums:
            parts.append(key)
            continue
        nums = sorted(set(nums), key=int)
        ranges: list[str] = []
        run = [nums[0]]
        for n in nums[1:]:
            if int(n) == int(run[-1]) + 1:
                run.append(n)
            else:
                ranges.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
                run = [n]
        ranges.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
        parts.append(key + (ranges[0] if len(nums) == 1 else "[" + ",".join(ranges) + "]"))
    return ",".join(parts)

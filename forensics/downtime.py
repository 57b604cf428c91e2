"""Downtime accounting (DESIGN §7): split the job's wall time W exactly into
productive + startup + checkpoint + lost_work + termination + restart + slowdown.

Each instant gets one label, by precedence checkpoint > termination > startup > restart >
lost_work > (productive). `slowdown` is then carved out of productive time (the excess of slow
steps over the ideal step time), so the buckets always sum to W and none is negative.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

BUCKETS = ("productive", "startup", "checkpoint", "lost_work", "termination", "restart", "slowdown")
PRECEDENCE = ("checkpoint", "termination", "startup", "restart", "lost_work")
# Past this many attempts the plots draw them together, not one row or marker each, and the report
# warns: so many restarts are rare, and usually mean restarts in the logs were misread.
MANY_ATTEMPTS = 200


@dataclass
class AttemptSpan:
    index: int
    start: float  # seconds (any common epoch)
    end: float
    first_step_start: float | None  # None: it never started a step
    last_progress: float | None  # end of its last completed (logged) step
    failed: bool
    fault: float | None = None  # time of the interruption, when known
    saves: list[tuple[float, float]] = field(default_factory=list)  # blocking checkpoint saves
    durable: list[float] = field(default_factory=list)  # end times of completed saves
    slowdown_s: float = 0.0
    interruption_id: str | None = None


@dataclass
class Downtime:
    wall_s: float
    buckets: dict[str, float]
    by_interruption: dict[tuple[str, str | None], float]  # (bucket, interruption id) -> seconds
    gpus: int | None
    # (bucket, attempt index) -> seconds: each attempt's share; the wait before an attempt and its
    # restart belong to it, productive time to the attempt whose span holds it
    by_attempt: dict[tuple[str, int], float] = field(default_factory=dict)
    # the labelled intervals before precedence: (start, end, bucket, interruption id, attempt index)
    intervals: list[tuple[float, float, str, str | None, int]] = field(default_factory=list)
    # False when no attempt has a time span (no line carried a time): the wall time and every bucket
    # are unknown (null in the report), not zero
    measured: bool = True

    @property
    def goodput(self) -> float | None:
        return self.buckets["productive"] / self.wall_s if self.wall_s > 0 else None

    def as_report(self) -> dict:
        if not self.measured:
            return {"wall_s": None, **{f"{b}_s": None for b in BUCKETS}, "goodput": None, "gpu_hours_lost": None}
        out: dict = {"wall_s": round(self.wall_s, 3)}
        for b in BUCKETS:
            out[f"{b}_s"] = round(self.buckets[b], 3)
        # rounding must not break the identity: productive takes the rounding remainder
        others = sum(out[f"{b}_s"] for b in BUCKETS if b != "productive")
        out["productive_s"] = round(max(out["wall_s"] - others, 0.0), 3)
        out["goodput"] = round(self.goodput, 4) if self.goodput is not None else None
        lost = self.wall_s - self.buckets["productive"]
        out["gpu_hours_lost"] = round(lost * self.gpus / 3600.0, 3) if self.gpus else None
        return out


def _intervals(spans: list[AttemptSpan]) -> list[tuple[float, float, str, str | None]]:
    """Labelled intervals (start, end, bucket, interruption id) before precedence is applied."""
    return [iv[:4] for iv in attempt_intervals(spans)]


def attempt_intervals(spans: list[AttemptSpan]) -> list[tuple[float, float, str, str | None, int]]:
    """Labelled intervals (start, end, bucket, interruption id, attempt index) before precedence
    is applied; the wait between two attempts belongs to the later one."""
    out: list[tuple[float, float, str, str | None, int]] = []
    spans = sorted(spans, key=lambda s: s.start)
    for k, s in enumerate(spans):
        init = "startup" if k == 0 else "restart"
        cause_prev = spans[k - 1].interruption_id if k > 0 else None
        cur: list[tuple[float, float, str, str | None]] = []
        if k > 0 and s.start > spans[k - 1].end:
            cur.append((spans[k - 1].end, s.start, "restart", cause_prev))
        first = s.first_step_start
        if first is None:
            stop = s.fault if (s.failed and s.fault is not None) else s.end
            stop = min(max(stop, s.start), s.end)
            cur.append((s.start, stop, init, None if k == 0 else cause_prev))
            if s.failed:
                cur.append((stop, s.end, "termination", s.interruption_id))
        else:
            first = min(max(first, s.start), s.end)
            cur.append((s.start, first, init, None if k == 0 else cause_prev))
            if s.failed:
                lp = s.last_progress if s.last_progress is not None else (s.fault if s.fault is not None else first)
                lp = min(max(lp, first), s.end)
                cur.append((lp, s.end, "termination", s.interruption_id))
                durable = [d for d in s.durable if first <= d <= lp]
                lost_from = max(durable) if durable else first
                cur.append((lost_from, lp, "lost_work", s.interruption_id))
        for a, b in s.saves:
            a, b = max(a, s.start), min(b, s.end)
            if b > a:
                cur.append((a, b, "checkpoint", None))
        out += [(*iv, s.index) for iv in cur]
    return out


def label_pieces(ivs: Sequence[tuple], cuts: list[float]) -> list[tuple[float, float, int | None]]:
    """For each piece between consecutive `cuts` (sorted, distinct, holding both ends of every
    interval): (lo, hi, j) with j the index in `ivs` ((start, end, bucket, ...) rows, start < end)
    of the covering interval whose bucket comes first in PRECEDENCE (of equals, the first in
    `ivs`), or None where none covers it. A sweep with one heap per bucket, so thousands of
    attempts cost O(n log n), not n² (every interval tested for every piece)."""
    pos = {c: k for k, c in enumerate(cuts)}
    rank = {lab: i for i, lab in enumerate(PRECEDENCE)}
    opening: dict[int, list[int]] = {}
    for j, iv in enumerate(ivs):
        opening.setdefault(pos[iv[0]], []).append(j)
    heaps: list[list[int]] = [[] for _ in PRECEDENCE]
    out: list[tuple[float, float, int | None]] = []
    for k in range(len(cuts) - 1):
        lo, hi = cuts[k], cuts[k + 1]
        for j in opening.get(k, ()):
            heapq.heappush(heaps[rank[ivs[j][2]]], j)
        best = None
        for h in heaps:
            while h and ivs[h[0]][1] < hi:  # ended before this piece ends: covers nothing from here on
                heapq.heappop(h)
            if h:
                best = h[0]
                break
        out.append((lo, hi, best))
    return out


def account(spans: list[AttemptSpan], gpus: int | None,
            slowdown_ids: dict[int, str | None] | None = None) -> Downtime:
    if not spans:
        return Downtime(0.0, {b: 0.0 for b in BUCKETS}, {}, gpus, measured=False)
    t0 = min(s.start for s in spans)
    t1 = max(s.end for s in spans)
    wall = max(t1 - t0, 0.0)
    raw = attempt_intervals(spans)
    ivs = [(max(a, t0), min(b, t1), lab, iid, k) for a, b, lab, iid, k in raw if b > a]
    cuts = sorted({t0, t1, *[iv[0] for iv in ivs], *[iv[1] for iv in ivs]})
    buckets = {b: 0.0 for b in BUCKETS}
    by_int: dict[tuple[str, str | None], float] = {}
    by_att: dict[tuple[str, int], float] = {}
    order = sorted(spans, key=lambda s: s.start)
    for lo, hi, j in label_pieces(ivs, cuts):
        lab, iid = (ivs[j][2], ivs[j][3]) if j is not None else ("productive", None)
        buckets[lab] += hi - lo
        if lab != "productive":
            by_int[(lab, iid)] = by_int.get((lab, iid), 0.0) + hi - lo
        k = ivs[j][4] if j is not None else _holder(order, lo, hi)
        if k is not None:
            by_att[(lab, k)] = by_att.get((lab, k), 0.0) + hi - lo
    slow = sum(max(s.slowdown_s, 0.0) for s in spans)
    slow = min(slow, buckets["productive"])
    if slow > 0:
        buckets["slowdown"] = slow
        buckets["productive"] -= slow
        for s in spans:
            if s.slowdown_s > 0:
                iid = (slowdown_ids or {}).get(s.index)
                by_int[("slowdown", iid)] = by_int.get(("slowdown", iid), 0.0) + min(s.slowdown_s, slow)
                mine = min(s.slowdown_s, by_att.get(("productive", s.index), 0.0))
                by_att[("slowdown", s.index)] = mine
                by_att[("productive", s.index)] = by_att.get(("productive", s.index), 0.0) - mine
    # exactness: absorb float rounding into productive
    diff = wall - sum(buckets.values())
    buckets["productive"] = max(buckets["productive"] + diff, 0.0)
    return Downtime(wall, buckets, by_int, gpus, by_att, raw)


def _holder(spans: list[AttemptSpan], lo: float, hi: float) -> int | None:
    """The attempt (the last to start) whose span holds the piece [lo, hi]; spans by start."""
    for s in reversed(spans):
        if s.start <= lo and hi <= s.end:
            return s.index
    return None


def to_seconds(t: datetime | None, epoch: datetime) -> float | None:
    return None if t is None else (t - epoch).total_seconds()


def save_intervals(c: pl.DataFrame, epoch: datetime, open_ends: dict | None = None
                   ) -> tuple[list[tuple[float, float]], list[float]]:
    """Blocking save intervals and durable (completed) save end times of one attempt.
    `open_ends` ((file_id, line_no) of a save start -> (time, failed)): a save that printed a
    start and no end (HF Trainer's `Saving model checkpoint to …`) ends at the next line of its
    writer; it is durable unless that line is an error."""
    saves, durable = [], []
    ended = {r["step"] for r in c.filter(pl.col("event") == "save_end").iter_rows(named=True)}
    for r in c.filter(pl.col("event") == "save_start").iter_rows(named=True) if open_ends else []:
        nxt = open_ends.get((r.get("file_id"), r["line_no"]))
        if r["ts"] is None or r["step"] in ended or nxt is None or nxt[0] is None or nxt[0] <= r["ts"]:
            continue
        ended.add(r["step"])
        a, b = to_seconds(r["ts"], epoch), to_seconds(nxt[0], epoch)
        saves.append((a, b))
        if not nxt[1]:
            durable.append(b)
    starts = {r["step"]: r["ts"] for r in c.filter(pl.col("event") == "save_start").iter_rows(named=True)
              if r["ts"] is not None}
    for r in c.filter(pl.col("event") == "save_end").iter_rows(named=True):
        if r["ts"] is None:
            continue
        end = to_seconds(r["ts"], epoch)
        durable.append(end)
        if r["step"] in starts:
            saves.append((to_seconds(starts[r["step"]], epoch), end))
        elif r["duration_s"] is not None:
            saves.append((end - r["duration_s"], end))
    return saves, durable

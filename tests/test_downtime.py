"""Downtime accounting: hand-computed cases and a property test against an independent
second-by-second reference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.downtime import BUCKETS, PRECEDENCE, AttemptSpan, account


def test_crash_then_completed_restart() -> None:
    a0 = AttemptSpan(0, 0, 1000, first_step_start=100, last_progress=800, failed=True, fault=810,
                     saves=[(500, 530)], durable=[530], interruption_id="a0")
    a1 = AttemptSpan(1, 1100, 2000, first_step_start=1200, last_progress=2000, failed=False)
    d = account([a0, a1], gpus=16)
    b = d.buckets
    assert d.wall_s == 2000
    assert b["startup"] == 100
    assert b["checkpoint"] == 30
    assert b["lost_work"] == 800 - 530
    assert b["termination"] == 200
    assert b["restart"] == 100 + 100
    assert b["productive"] == 2000 - 100 - 30 - 270 - 200 - 200
    assert abs(sum(b.values()) - 2000) < 1e-9
    assert d.by_interruption[("restart", "a0")] == 200
    rep = d.as_report()
    assert rep["goodput"] == round(b["productive"] / 2000, 4)
    assert rep["gpu_hours_lost"] == round((2000 - b["productive"]) * 16 / 3600, 3)


def test_failed_before_first_step() -> None:
    d = account([AttemptSpan(0, 0, 300, first_step_start=None, last_progress=None, failed=True, fault=200)], gpus=8)
    assert d.buckets["startup"] == 200 and d.buckets["termination"] == 100 and d.buckets["productive"] == 0


def test_slowdown_carved_from_productive() -> None:
    d = account([AttemptSpan(0, 0, 1000, first_step_start=100, last_progress=1000, failed=False, slowdown_s=50)], 8)
    assert d.buckets["slowdown"] == 50 and d.buckets["productive"] == 850


def _reference(spans: list[AttemptSpan]) -> dict[str, float]:
    """Independent reference: label every integer second by brute force."""
    spans = sorted(spans, key=lambda s: s.start)
    t0, t1 = spans[0].start, max(s.end for s in spans)
    out = {b: 0.0 for b in BUCKETS}
    for t in range(int(t0), int(t1)):
        x = t + 0.5
        labels = []
        for k, s in enumerate(spans):
            if k > 0 and spans[k - 1].end <= x < s.start:
                labels.append("restart")
            if not (s.start <= x < s.end):
                continue
            init = "startup" if k == 0 else "restart"
            if any(a <= x < b for a, b in s.saves):
                labels.append("checkpoint")
            if s.first_step_start is None:
                stop = s.fault if (s.failed and s.fault is not None) else s.end
                labels.append(init if x < stop else "termination")
                continue
            if x < s.first_step_start:
                labels.append(init)
            elif s.failed:
                lp = s.last_progress
                if x >= lp:
                    labels.append("termination")
                else:
                    durable = [d for d in s.durable if s.first_step_start <= d <= lp]
                    if x >= (max(durable) if durable else s.first_step_start):
                        labels.append("lost_work")
        best = min(labels, key=PRECEDENCE.index) if labels else "productive"
        out[best] += 1
    return out


@st.composite
def job(draw) -> list[AttemptSpan]:
    n = draw(st.integers(1, 4))
    t = 0
    spans = []
    for k in range(n):
        start = t + (draw(st.integers(0, 50)) if k else 0)
        length = draw(st.integers(20, 400))
        end = start + length
        has_steps = draw(st.booleans())
        failed = k < n - 1 or draw(st.booleans())
        fss = start + draw(st.integers(0, length)) if has_steps else None
        lp = draw(st.integers(fss, end)) if has_steps else None
        fault = draw(st.integers(start, end))
        saves, durable = [], []
        if has_steps:
            for _ in range(draw(st.integers(0, 3))):
                a = draw(st.integers(fss, end))
                b = min(end, a + draw(st.integers(1, 30)))
                saves.append((a, b))
                durable.append(b)
        spans.append(AttemptSpan(k, start, end, fss, lp, failed, fault, saves, durable, interruption_id=f"a{k}"))
        t = end
    return spans


@settings(max_examples=150, deadline=None)
@given(job())
def test_property_buckets_sum_exactly_and_match_reference(spans: list[AttemptSpan]) -> None:
    d = account(spans, gpus=8)
    total = sum(d.buckets.values())
    assert abs(total - d.wall_s) < 1e-6
    assert all(v >= 0 for v in d.buckets.values())
    ref = _reference(spans)
    for b in BUCKETS:
        assert abs(d.buckets[b] - ref[b]) < 1e-6, (b, d.buckets, ref)


def test_save_intervals_pair_starts_and_ends() -> None:
    from datetime import UTC, datetime

    import polars as pl

    from forensics.downtime import save_intervals

    t0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    ck = pl.DataFrame({
        "event": ["save_start", "save_end", "save_end", "save_end"],
        "step": [100, 100, 200, 300],
        "ts": [datetime(2026, 11, 2, 8, 1, tzinfo=UTC), datetime(2026, 11, 2, 8, 1, 30, tzinfo=UTC),
               datetime(2026, 11, 2, 8, 5, tzinfo=UTC), None],
        "duration_s": [None, None, 12.0, 5.0],
    })
    saves, durable = save_intervals(ck, t0)
    assert saves == [(60.0, 90.0), (288.0, 300.0)]  # paired with its start; else end minus duration
    assert durable == [90.0, 300.0]  # an end without a time stamp is skipped


def test_no_timed_attempt_is_unknown_not_zero() -> None:
    # no line carried a time: the wall time and every bucket are unknown (null), never 0 s
    d = account([], gpus=8)
    assert not d.measured
    rep = d.as_report()
    assert rep == {"wall_s": None, **{f"{b}_s": None for b in BUCKETS}, "goodput": None, "gpu_hours_lost": None}
    timed = account([AttemptSpan(0, 0.0, 100.0, 10.0, 100.0, False)], gpus=8).as_report()
    assert timed["wall_s"] == 100.0 and timed["startup_s"] == 10.0 and timed["productive_s"] == 90.0

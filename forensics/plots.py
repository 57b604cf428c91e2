"""Plots of one analysis: pure functions over report.json (a dict) and the analysis frames that
return matplotlib Figures.

They use the Agg canvas directly (no pyplot state, no GUI) with fixed sizes, dpi and fonts, so the
same analysis gives the same PNG bytes (`png_bytes` strips the software and date metadata).

- `timeline(report, attempts, checkpoints)`: attempts as bars over time, coloured by downtime
  bucket (DESIGN §7), interruptions marked with their category.
- `step_time(steps, report, checkpoints)`: step time per logged step, with checkpoint saves,
  slow episodes and restarts.
- `straggler_heatmap(dcgm_samples, report)`: SM clock of every GPU over time, stragglers outlined.
- `downtime_breakdown(report)`: seconds per bucket, goodput and GPU-hours lost.
"""

from __future__ import annotations

import io
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=False)

import matplotlib.dates as mdates  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.colors import Normalize, to_rgba_array  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from forensics import downtime as dt  # noqa: E402
from forensics.palette import BUCKET_COLORS, BUCKET_LABELS, KIND_COLORS, flagged_gpus, host_order  # noqa: E402
from forensics.stragglers import slow_episodes  # noqa: E402

__all__ = ["BUCKET_COLORS", "KIND_COLORS", "figure", "flagged_gpus", "host_order", "style", "timeline", "step_time", "straggler_heatmap", "downtime_breakdown", "segments",
           "png_bytes", "save_png", "render_all", "PLOT_NAMES"]

DPI = 100
WIDTH = 10.0
PLOT_NAMES = ("timeline", "step_time", "straggler_heatmap", "downtime")
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
IDLE_SHARE = 0.2  # SM clock under this share of the busy median: the GPU is idle, not slow
IDLE_RGBA = (to_rgba_array("#cfd8dc") * 255).round().astype(np.uint8)[0]  # idle GPUs' grey
MAX_HEATMAP_COLS = 240
MARKS = 3  # interruptions named on a timeline of more than downtime.MANY_ATTEMPTS attempts
MAX_ALL_LABELS = 48  # up to this many GPUs every heatmap row is named; above, the flagged and worst rows
NOTE_FITS = 80  # characters of a note that fit the figure's width at its font size
WORST_LABELLED = 8  # rows named at scale besides the flagged ones: the lowest relative SM clock


def _style(fig: Figure) -> None:
    for ax in fig.axes:
        ax.tick_params(labelsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)


def _fig(height: float) -> Figure:
    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure(height: float) -> Figure:
    """A blank figure of the report's width, dpi and layout (for plots of other reports)."""
    return _fig(height)


def style(fig: Figure) -> Figure:
    """The report's look on a finished figure: small tick labels, no top or right spines."""
    _style(fig)
    return fig


def _note(fig: Figure, text: str) -> Figure:
    """The figure holds only `text`, centred: no axes and no layout to run (a hidden axes under a
    constrained layout put it in the same place, for twice the drawing). Wrapped only when it
    may not fit the width (about 80 characters at this size fit): measuring every word for the
    wrap costs more than drawing the line."""
    fig.set_layout_engine("none")
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, color="#555555", wrap=len(text) > NOTE_FITS)
    return fig


def _dt(v: str | datetime | None) -> datetime | None:
    """ISO-8601 string or aware/naive datetime -> naive UTC datetime (what matplotlib plots)."""
    if v is None:
        return None
    if isinstance(v, str):
        v = datetime.fromisoformat(v.replace("Z", "+00:00"))
    if v.tzinfo is not None:
        v = v.astimezone(UTC).replace(tzinfo=None)
    return v


def _date_nums(ts: pl.Series) -> np.ndarray:
    """matplotlib date numbers of a datetime column, as `date2num(_dt(t))` gives them one by one
    (naive UTC, microseconds), in one call."""
    if getattr(ts.dtype, "time_zone", None):
        ts = ts.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    return mdates.date2num(ts.dt.cast_time_unit("us").to_numpy())


def _time_axis(ax, lo: datetime, hi: datetime) -> None:
    span = (hi - lo).total_seconds()
    fmt = "%H:%M:%S" if span < 600 else ("%H:%M" if span < 2 * 86400 else "%m-%d %H:%M")
    ax.xaxis.set_major_formatter(mdates.DateFormatter(fmt))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=4, maxticks=10))
    ax.set_xlabel(f"time (UTC), {lo:%Y-%m-%d}", fontsize=8)


def _crash_like(report: dict) -> dict[int, dict]:
    return {x["attempt"]: x for x in report.get("interruptions", []) if x.get("kind") != "slowdown"
            and x.get("attempt") is not None}


def _attempt_of(ts: pl.Series, report: dict) -> pl.Series:
    """Attempt index of each timestamp: the last attempt that started at or before it (of attempts
    starting at the same instant, the last in report order by start). One binary search per row
    over the sorted starts, however many attempts there are."""
    starts = sorted(((d, a["index"]) for a in report.get("attempts", []) if (d := _dt(a["start"])) is not None),
                    key=lambda x: x[0])  # stable: equal starts keep their order
    if not starts:
        return pl.Series(ts.name, [None] * len(ts), dtype=pl.Int64)
    tz = getattr(ts.dtype, "time_zone", None)
    key = pl.Series([d.replace(tzinfo=UTC) if tz else d for d, _ in starts]).cast(ts.dtype)
    idx = pl.Series([i for _, i in starts], dtype=pl.Int64)
    pos = key.search_sorted(ts, side="right").cast(pl.Int64)
    got = idx.gather((pos - 1).clip(lower_bound=0))
    return pl.select(pl.when((pos > 0) & ts.is_not_null()).then(got).otherwise(None).alias(ts.name)).to_series()


# ---------------------------------------------------------------- downtime segments in time


def segments(report: dict, attempts: pl.DataFrame | None = None,
             checkpoints: pl.DataFrame | None = None) -> list[tuple[datetime, datetime, str, int]]:
    """(start, end, bucket, attempt) intervals covering the job's wall time, labelled by the
    precedence of DESIGN §7. With the attempts frame (first_step_start, last_progress) and the
    checkpoints table every bucket is placed; from report.json alone only restarts and
    termination (from the fault) are, the rest is 'running'. Slowdown has no place in time (it is
    the excess of slow steps spread over them) and is not drawn here."""
    reps = report.get("attempts") or []
    if not reps:
        return []
    crash = _crash_like(report)
    have_detail = attempts is not None and not attempts.is_empty() and "first_step_start" in attempts.columns
    epoch = min(_dt(a["start"]) for a in reps if a["start"]) if any(a["start"] for a in reps) else None
    if epoch is None:
        return []
    if not have_detail:
        out = []
        ordered = sorted(reps, key=lambda a: a["start"] or "")
        for k, a in enumerate(ordered):
            s, e = _dt(a["start"]), _dt(a["end"])
            if s is None or e is None:
                continue
            if k > 0 and ordered[k - 1]["end"] and _dt(ordered[k - 1]["end"]) < s:
                out.append((_dt(ordered[k - 1]["end"]), s, "restart", a["index"]))
            x = crash.get(a["index"])
            f = _dt(x["time"]) if x and x.get("time") else None
            if f is not None and s < f < e and a["end_reason"] != "completed":
                out += [(s, f, "running", a["index"]), (f, e, "termination", a["index"])]
            else:
                out.append((s, e, "running", a["index"]))
        return out
    ep = epoch.replace(tzinfo=UTC)
    ck = checkpoints if checkpoints is not None and not checkpoints.is_empty() else None
    if ck is not None:
        ck = ck.filter(pl.col("ts").is_not_null())
        ck = ck.with_columns(_attempt_of(ck["ts"], report).alias("_att"))
        ck_by = {k[0]: g for k, g in ck.partition_by("_att", as_dict=True, maintain_order=True).items()}
    spans = []
    reasons = {a["index"]: a.get("end_reason") for a in reps}
    for a in attempts.sort("start").iter_rows(named=True):
        if a["start"] is None or a["end"] is None:
            continue
        i = a["index"]
        x = crash.get(i)
        reason = a.get("end_reason") or reasons.get(i)
        saves, durable = dt.save_intervals(ck_by.get(i, ck.clear()), ep) if ck is not None else ([], [])
        spans.append(dt.AttemptSpan(
            index=i, start=dt.to_seconds(a["start"], ep), end=dt.to_seconds(a["end"], ep),
            first_step_start=dt.to_seconds(a["first_step_start"], ep),
            last_progress=dt.to_seconds(a["last_progress"], ep),
            failed=reason != "completed" and x is not None,
            fault=dt.to_seconds(_dt(x["time"]).replace(tzinfo=UTC), ep) if x and x.get("time") else None,
            saves=saves, durable=durable))
    if not spans:
        return []
    ivs = [(a, b, lab) for a, b, lab, _ in dt._intervals(spans) if b > a]
    t0, t1 = min(s.start for s in spans), max(s.end for s in spans)
    cuts = sorted({t0, t1, *[a for a, _, _ in ivs], *[b for _, b, _ in ivs]})
    by_start = sorted(spans, key=lambda s: (s.start, s.index))
    starts = [s.start for s in by_start]
    reach = list(accumulate((s.end for s in by_start), max))  # latest end of the attempts started so far
    out: list[tuple[datetime, datetime, str, int]] = []
    for lo, hi, j in dt.label_pieces(ivs, cuts):
        lab = ivs[j][2] if j is not None else "productive"
        # the row: the attempt that has started by `lo` (a gap belongs to the next attempt)
        k = bisect_right(starts, lo) - 1
        att = by_start[max(k, 0)].index
        if lab == "restart" and not (k >= 0 and reach[k] > lo):  # in no attempt: the next one's
            nxt = bisect_left(starts, hi)
            att = by_start[nxt].index if nxt < len(by_start) else att
        a_dt, b_dt = epoch + timedelta(seconds=lo), epoch + timedelta(seconds=hi)
        if out and out[-1][2] == lab and out[-1][3] == att and out[-1][1] == a_dt:
            out[-1] = (out[-1][0], b_dt, lab, att)
        else:
            out.append((a_dt, b_dt, lab, att))
    return out


# ---------------------------------------------------------------- the four plots


def timeline(report: dict, attempts: pl.DataFrame | None = None, checkpoints: pl.DataFrame | None = None) -> Figure:
    reps = [a for a in report.get("attempts") or [] if a.get("start") and a.get("end")]
    n = len(reps)
    if n > dt.MANY_ATTEMPTS:
        return _timeline_together(report, reps, attempts, checkpoints)
    fig = _fig(1.9 + 0.45 * min(max(n, 1), 12))
    if not reps:
        return _note(fig, "No attempts could be reconstructed from the logs: no timeline to draw.")
    ax = fig.add_subplot()
    order = sorted(a["index"] for a in reps)
    row = {idx: k for k, idx in enumerate(order)}
    segs = segments(report, attempts, checkpoints)
    used = []
    for s, e, lab, att in segs:
        y = row.get(att, 0)
        ax.broken_barh([(mdates.date2num(s), mdates.date2num(e) - mdates.date2num(s))], (y - 0.35, 0.7),
                       facecolors=BUCKET_COLORS[lab], edgecolors="none")
        if lab not in used:
            used.append(lab)
    for a in reps:
        s, e = mdates.date2num(_dt(a["start"])), mdates.date2num(_dt(a["end"]))
        ax.add_patch(Rectangle((s, row[a["index"]] - 0.35), e - s, 0.7, fill=False, edgecolor="#333333", lw=0.6))
    lo = min(_dt(a["start"]) for a in reps)
    hi = max(_dt(a["end"]) for a in reps)
    marks = [x for x in report.get("interruptions", []) if x.get("time")]
    for k, x in enumerate(marks):
        t = _dt(x["time"])
        color = KIND_COLORS.get(x.get("kind"), "#455a64")
        ax.axvline(mdates.date2num(t), color=color, lw=1.2, ls="--")
        label = f"{x.get('id') or ''} {x.get('category') or x.get('kind')}".strip()
        ax.annotate(label, (mdates.date2num(t), 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -9 - 9 * (k % 3)), textcoords="offset points", fontsize=8, color=color,
                    annotation_clip=False)
    ax.set_yticks(range(n), [f"attempt {i}" for i in order], fontsize=8)
    ax.set_ylim(n - 0.5, -0.5 - 0.25 * min(len(marks), 3) - 0.3)
    ax.set_xlim(mdates.date2num(lo), mdates.date2num(hi))
    _time_axis(ax, lo, hi)
    handles = [Patch(color=BUCKET_COLORS[b], label=BUCKET_LABELS.get(b, b)) for b in BUCKET_COLORS if b in used]
    handles += [Patch(facecolor="white", edgecolor=KIND_COLORS[k], label=f"{k} (dashed line)")
                for k in KIND_COLORS if any(x.get("kind") == k for x in marks)]
    ax.legend(handles=handles, fontsize=7, ncol=min(len(handles), 5), loc="upper center",
              bbox_to_anchor=(0.5, -0.28), frameon=False)
    d = report.get("downtime") or {}
    title = "Attempts and where the time went"
    if d.get("goodput") is not None:
        title += f" (goodput {d['goodput']:.1%})"
    ax.set_title(title, fontsize=10, loc="left")
    _style(fig)
    return fig


def _timeline_together(report: dict, reps: list[dict], attempts: pl.DataFrame | None,
                       checkpoints: pl.DataFrame | None) -> Figure:
    """More than MANY_ATTEMPTS attempts: every attempt on one row, one artist per bucket and per
    interruption kind (not one per attempt), the first MARKS interruptions labelled."""
    fig = _fig(2.8)
    ax = fig.add_subplot()
    ends: dict[str, tuple[list[datetime], list[datetime]]] = {}
    for s, e, lab, _ in segments(report, attempts, checkpoints):
        a, b = ends.setdefault(lab, ([], []))
        a.append(s)
        b.append(e)
    by_bucket: dict[str, list[tuple[float, float]]] = {}
    for lab, (a, b) in ends.items():  # two date2num calls per bucket, not three per segment
        xa, xb = mdates.date2num(a), mdates.date2num(b)
        by_bucket[lab] = list(zip(xa.tolist(), (xb - xa).tolist(), strict=True))
    for lab in BUCKET_COLORS:
        if lab in by_bucket:
            ax.broken_barh(by_bucket[lab], (-0.35, 0.7), facecolors=BUCKET_COLORS[lab], edgecolors="none")
    starts = mdates.date2num([_dt(a["start"]) for a in reps])  # one call, not one per attempt
    ax.vlines(starts, -0.35, 0.35, colors="#333333", lw=0.3)
    lo, hi = min(_dt(a["start"]) for a in reps), max(_dt(a["end"]) for a in reps)
    marks = sorted((x for x in report.get("interruptions", []) if x.get("time")), key=lambda x: x["time"])
    for kind in KIND_COLORS:
        ts = [_dt(x["time"]) for x in marks if (x.get("kind") or "unknown") == kind]
        if ts:
            ts = mdates.date2num(ts)
            ax.vlines(ts, -0.5, 0.5, colors=KIND_COLORS[kind], lw=0.8, linestyles="dashed")
    for k, x in enumerate(marks[:MARKS]):
        ax.annotate(f"{x.get('id') or ''} {x.get('category') or x.get('kind')}".strip(),
                    (mdates.date2num(_dt(x["time"])), 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -9 - 9 * k), textcoords="offset points", fontsize=8,
                    color=KIND_COLORS.get(x.get("kind"), "#455a64"), annotation_clip=False)
    ax.set_yticks([0], [f"{len(reps)} attempts"], fontsize=8)
    ax.set_ylim(0.5, -0.5 - 0.25 * min(len(marks), MARKS) - 0.3)
    ax.set_xlim(mdates.date2num(lo), mdates.date2num(hi))
    _time_axis(ax, lo, hi)
    ax.set_xlabel(ax.get_xlabel() + f"; {len(reps)} attempts (more than {dt.MANY_ATTEMPTS}) drawn on one row, "
                  f"thin lines at their starts; {len(marks)} interruptions, the first {min(len(marks), MARKS)} named",
                  fontsize=8)
    handles = [Patch(color=BUCKET_COLORS[b], label=BUCKET_LABELS.get(b, b)) for b in BUCKET_COLORS if b in by_bucket]
    handles += [Patch(facecolor="white", edgecolor=KIND_COLORS[k], label=f"{k} (dashed line)")
                for k in KIND_COLORS if any((x.get("kind") or "unknown") == k for x in marks)]
    ax.legend(handles=handles, fontsize=7, ncol=min(max(len(handles), 1), 5), loc="upper center",
              bbox_to_anchor=(0.5, -0.45), frameon=False)
    d = report.get("downtime") or {}
    title = f"{len(reps)} attempts and where the time went"
    if d.get("goodput") is not None:
        title += f" (goodput {d['goodput']:.1%})"
    ax.set_title(title, fontsize=10, loc="left")
    _style(fig)
    return fig


def _step_series(steps: pl.DataFrame, report: dict) -> pl.DataFrame:
    """One step-time series per attempt: the reporting rank with the most rows, one row per step."""
    s = steps.filter(pl.col("ts").is_not_null() & pl.col("step_time_s").is_not_null())
    if s.is_empty():
        return s
    if "attempt" not in s.columns or s["attempt"].null_count() == s.height:
        s = s.drop("attempt", strict=False).with_columns(_attempt_of(s["ts"], report).alias("attempt"))
    s = s.with_columns(pl.col("host").fill_null(""), pl.col("rank").fill_null(-1))
    who = (s.group_by("attempt", "host", "rank").len().sort(["attempt", "len", "rank", "host"],
                                                            descending=[False, True, False, False])
           .unique("attempt", keep="first", maintain_order=True).drop("len"))
    return (s.join(who, on=["attempt", "host", "rank"], how="semi").sort("ts")
            .unique(["attempt", "step"], keep="last", maintain_order=True).sort("ts"))


def step_time(steps: pl.DataFrame | None, report: dict, checkpoints: pl.DataFrame | None = None) -> Figure:
    fig = _fig(3.6)
    s = _step_series(steps, report) if steps is not None and not steps.is_empty() else None
    if s is None or s.is_empty():
        return _note(fig, "No training step times were found in the logs: no step-time plot.")
    ax = fig.add_subplot()
    handles = []
    reps = sorted(report.get("attempts") or [], key=lambda a: a["start"] or "")
    together = len(reps) > dt.MANY_ATTEMPTS or s["attempt"].n_unique() > dt.MANY_ATTEMPTS
    if together:  # one line for every attempt: a gap (NaN) between two attempts, not one artist each
        new = s["attempt"].ne_missing(s["attempt"].shift(1)).to_numpy()
        cut = np.flatnonzero(new[1:]) + 1  # a NaN before the first step of each later attempt
        xs = np.insert(_date_nums(s["ts"]), cut, np.nan)
        ys = np.insert(s["step_time_s"].cast(pl.Float64).to_numpy(), cut, np.nan)
        ax.plot(xs, ys, lw=0.9, color="#37474f", marker=".", ms=2)
    else:
        for _, g in s.group_by("attempt", maintain_order=True):
            ax.plot(_date_nums(g["ts"]), g["step_time_s"].to_list(), lw=0.9, color="#37474f", marker=".", ms=2)
    med = float(s["step_time_s"].median())
    ax.axhline(med, color="#9e9e9e", lw=0.8, ls=":")
    handles.append(ax.lines[-1])
    handles[-1].set_label(f"median {med:.3g} s")
    eps = slow_episodes(s)
    if len(eps) > dt.MANY_ATTEMPTS:  # one artist for all of them
        p = ax.broken_barh([(mdates.date2num(_dt(e.start)), mdates.date2num(_dt(e.end)) - mdates.date2num(_dt(e.start)))
                            for e in eps], (0, 1), transform=ax.get_xaxis_transform(),
                           facecolors=BUCKET_COLORS["slowdown"], alpha=0.35, lw=0)
        p.set_label(f"slow episode ({len(eps)})")
        handles.append(p)
        eps = []
    for k, e in enumerate(eps):
        p = ax.axvspan(mdates.date2num(_dt(e.start)), mdates.date2num(_dt(e.end)), color=BUCKET_COLORS["slowdown"],
                       alpha=0.35, lw=0)
        if k == 0:
            p.set_label("slow episode")
            handles.append(p)
    if checkpoints is not None and not checkpoints.is_empty():
        ck = checkpoints.filter(pl.col("ts").is_not_null())
        saves = (ck.filter(pl.col("event").is_in(["save_end", "save_failed"]))
                 .unique(["event", "step"], keep="first", maintain_order=True).sort("ts"))
        if saves.height > dt.MANY_ATTEMPTS:  # one artist per kind of save, not one per save
            for event, color, label in (("save_end", BUCKET_COLORS["checkpoint"], "checkpoint saved"),
                                        ("save_failed", "#d32f2f", "failed save")):
                ts = _date_nums(saves.filter(pl.col("event") == event)["ts"])
                if ts.size:
                    ln = ax.vlines(ts, 0, 1, transform=ax.get_xaxis_transform(), colors=color, lw=0.8, alpha=0.8)
                    ln.set_label(f"{label} ({len(ts)})")
                    handles.append(ln)
            saves = saves.clear()
        for k, r in enumerate(saves.iter_rows(named=True)):
            bad = r["event"] == "save_failed"
            ln = ax.axvline(mdates.date2num(_dt(r["ts"])), color="#d32f2f" if bad else BUCKET_COLORS["checkpoint"],
                            lw=0.8, alpha=0.8)
            if k == 0 or (bad and not any(h.get_label() == "failed save" for h in handles)):
                ln.set_label("failed save" if bad else "checkpoint saved")
                handles.append(ln)
    if together:
        ts = [_dt(a["start"]) for a in reps[1:] if a.get("start")]
        if ts:
            ts = mdates.date2num(ts)
            ln = ax.vlines(ts, 0, 1, transform=ax.get_xaxis_transform(), colors=BUCKET_COLORS["restart"], lw=0.6,
                           linestyles="dashed")
            ln.set_label(f"restart ({len(ts)}; more than {dt.MANY_ATTEMPTS} attempts: not named)")
            handles.append(ln)
    for k, a in enumerate(reps[1:] if not together else []):
        if a.get("start"):
            ln = ax.axvline(mdates.date2num(_dt(a["start"])), color=BUCKET_COLORS["restart"], lw=1.4, ls="--")
            ax.annotate(f"restart: attempt {a['index']}" + (f" from step {a['resumed_from']}" if a.get("resumed_from")
                                                              is not None else ""),
                        (mdates.date2num(_dt(a["start"])), 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -10), textcoords="offset points", fontsize=7, color=BUCKET_COLORS["restart"])
            if k == 0:
                ln.set_label("restart")
                handles.append(ln)
    lo, hi = _dt(s["ts"].min()), _dt(s["ts"].max())
    if reps and reps[0].get("start"):
        lo = min(lo, _dt(reps[0]["start"]))
    if reps and reps[-1].get("end"):
        hi = max(hi, _dt(reps[-1]["end"]))
    ax.set_xlim(mdates.date2num(lo), mdates.date2num(hi))
    top = float(s["step_time_s"].max())
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.set_ylabel("step time (s)", fontsize=8)
    _time_axis(ax, lo, hi)
    ax.legend(handles=handles, fontsize=7, loc="lower right", ncol=len(handles), frameon=False)
    who = s.select("host", "rank").unique().sort("host", "rank").head(3).rows()
    src = ", ".join(f"{h or '?'} rank {r if r >= 0 else '?'}" for h, r in who)
    ax.set_title(f"Step time ({s.height} logged steps; from {src})", fontsize=10, loc="left")
    _style(fig)
    return fig


def _column_medians(a: np.ndarray) -> np.ndarray:
    """`np.nanmedian(a, axis=0)` for columns with at least one finite value, by one sort (NaN sorts
    last) instead of numpy's loop over the columns of a tall array: the same values (the middle
    one, or the mean of the two middle ones)."""
    s = np.sort(a.T, axis=1)
    k = np.isfinite(s).sum(axis=1)
    r = np.arange(s.shape[0])
    return (s[r, (k - 1) // 2] + s[r, k // 2]) / 2


def _worst_rows(busy: np.ndarray, k: int) -> list[int]:
    """The k rows furthest below their time bin's median clock (a missing sample where most GPUs
    report counts as the worst), worst first; rows never below are left out."""
    if busy.size == 0 or k <= 0:
        return []
    present = np.isfinite(busy)
    live = present.sum(axis=0) >= max(1, busy.shape[0] // 2)  # bins where most GPUs report
    if not live.any():
        return []
    with np.errstate(all="ignore"):
        med = _column_medians(busy[:, live])
        short = np.where(present[:, live], np.clip(1.0 - busy[:, live] / med, 0.0, 1.0), 1.0)
    score = np.nan_to_num(short.mean(axis=1))
    order = [int(i) for i in np.argsort(-score, kind="stable") if score[i] > 0.02]
    return order[:k]


def straggler_heatmap(dcgm_samples: pl.DataFrame | None, report: dict) -> Figure:
    if dcgm_samples is None:
        return _note(_fig(1.6), "No DCGM SM-clock telemetry in the job directory: no straggler heatmap.")
    # lazily (the samples may wait on disk): SM clock only, binned before anything is held in memory
    clk = dcgm_samples.lazy().filter((pl.col("field") == SM_CLOCK) & pl.col("value").is_not_null()
                                     & pl.col("ts").is_not_null()).select(
        "ts", pl.col("host").fill_null("?"), pl.col("gpu").fill_null(-1), "value")
    span_row = clk.select(pl.col("ts").min().alias("lo"), pl.col("ts").max().alias("hi"),
                          pl.col("ts").n_unique().alias("n")).collect(engine="streaming").row(0)
    if span_row[0] is None:
        return _note(_fig(1.6), "No DCGM SM-clock telemetry in the job directory: no straggler heatmap.")
    t0 = span_row[0]
    span = max((span_row[1] - t0).total_seconds(), 1.0)
    ncol = min(MAX_HEATMAP_COLS, max(1, span_row[2]))
    width = span / ncol
    binned = (clk.with_columns(((pl.col("ts") - t0).dt.total_microseconds() / 1e6 / width).floor()
                               .clip(0, ncol - 1).cast(pl.Int64).alias("_bin"))
              .group_by("host", "gpu", "_bin").agg(pl.col("value").mean())).collect(engine="streaming")
    keys = sorted(binned.select("host", "gpu").unique().rows(), key=lambda k: (host_order(k[0]), k[1]))
    gpu_rows = pl.DataFrame(keys, schema={"host": binned.schema["host"], "gpu": binned.schema["gpu"]},
                            orient="row").with_row_index("_row")
    gpus = gpu_rows.select("host", "gpu").rows()
    row = {g: k for k, g in enumerate(gpus)}
    cells = binned.join(gpu_rows, on=["host", "gpu"])
    grid = np.full((len(gpus), ncol), np.nan)
    grid[cells["_row"].to_numpy(), cells["_bin"].to_numpy()] = cells["value"].to_numpy()
    n = len(gpus)
    fig = _fig(min(2.2 + 0.16 * n, 12.0))
    ax = fig.add_subplot()
    lo = _dt(t0)
    hi = lo + timedelta(seconds=span)
    # Idle GPUs (clock near 0 before, between and after attempts) are drawn grey, not as the
    # slowest colour; the colour range spans the busy samples, from the slowest (or 80% of the
    # median, whichever is lower, so healthy jitter stays one colour) to the fastest.
    finite = grid[np.isfinite(grid)]
    busy_med = float(np.median(finite[finite > 0])) if (finite > 0).any() else 0.0
    idle = np.isfinite(grid) & (grid < IDLE_SHARE * busy_med)
    busy = np.where(idle, np.nan, grid)
    vals = busy[np.isfinite(busy)]
    vmin, vmax = (min(float(vals.min()), 0.8 * busy_med), float(vals.max())) if vals.size else (None, None)
    if vmin is not None and vmax <= vmin:
        vmin, vmax = vmin - 1.0, vmax + 1.0
    ext = (mdates.date2num(lo), mdates.date2num(hi), n - 0.5, -0.5)
    # one RGBA image, coloured here (busy: viridis; idle: grey; no sample: transparent): with
    # nearest-neighbour sampling that is the picture of a grey layer under a colour-mapped one, at
    # a quarter of the resampling (one uint8 layer, no per-pixel norm or mask in matplotlib)
    scale = ScalarMappable(norm=Normalize(vmin, vmax), cmap="viridis")
    scale.set_array(busy)
    scale.autoscale_None()
    rgba = scale.to_rgba(busy, bytes=True)
    rgba[idle] = IDLE_RGBA
    ax.imshow(rgba, aspect="auto", interpolation="nearest", extent=ext)
    cb = fig.colorbar(scale, ax=ax, pad=0.01)
    cb.set_label("SM clock (MHz)", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    strag = {(s.get("host") or "?", s.get("gpu") if s.get("gpu") is not None else -1): s
             for s in report.get("stragglers") or []}
    flagged = {k for k in flagged_gpus(report) if k in row}
    labels = [f"{h} GPU {g}" if g >= 0 else h for h, g in gpus]
    if n <= MAX_ALL_LABELS:
        ax.set_yticks(range(n), labels, fontsize=6 if n > 24 else 7)
    else:  # thousands of rows: name the flagged GPUs and the worst others, sorted by host
        ticks = sorted({row[k] for k in flagged} | set(_worst_rows(busy, WORST_LABELLED)))
        ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=6)
    for tick, (h, g) in zip(ax.get_yticklabels(), [gpus[int(round(t))] for t in ax.get_yticks()], strict=False):
        if (h, g) in flagged:
            tick.set_color("#d32f2f")
            tick.set_fontweight("bold")
    for key, s in strag.items():
        if key not in row:
            continue
        y = row[key]
        a = mdates.date2num(_dt(s["start"])) if s.get("start") else mdates.date2num(lo)
        b = mdates.date2num(_dt(s["end"])) if s.get("end") else mdates.date2num(hi)
        ax.add_patch(Rectangle((a, y - 0.5), max(b - a, 1e-6), 1.0, fill=False, edgecolor="#ff1744", lw=1.8))
    _time_axis(ax, lo, hi)
    ax.set_xlabel(ax.get_xlabel() + "; grey: idle (clock near 0); white: no samples", fontsize=8)
    n_gpus = sum(1 for _, g in gpus if g >= 0)
    job_gpus = (report.get("job") or {}).get("gpus")
    title = (f"SM clock per GPU ({n_gpus} GPUs)" if job_gpus in (None, n_gpus)
             else f"SM clock per GPU ({n_gpus} of the job's {job_gpus} GPUs report it)")
    others = [f"{h} GPU {g}" for h, g in flagged_gpus(report) if (h, g) in flagged and (h, g) not in strag]
    if others:
        title += "; named in red: " + ", ".join(others[:4]) + ("…" if len(others) > 4 else "")
    if strag:
        title += "; straggler" + ("s" if len(strag) > 1 else "") + " outlined in red: " + ", ".join(
            f"{h} GPU {g}" for h, g in strag)
    ax.set_title(title, fontsize=10, loc="left")
    _style(fig)
    return fig


def downtime_breakdown(report: dict) -> Figure:
    d = report.get("downtime") or {}
    fig = _fig(2.8)
    if not d.get("wall_s"):
        return _note(fig, "No wall time could be measured: no downtime breakdown.")
    order = [b for b in dt.BUCKETS if b != "productive"] + ["productive"]
    vals = [float(d.get(f"{b}_s") or 0.0) for b in order]
    wall = float(d["wall_s"])
    ax = fig.add_subplot()
    unit, div = ("h", 3600.0) if wall >= 3 * 3600 else ("min", 60.0)
    ys = list(range(len(order)))
    ax.barh(ys, [v / div for v in vals], color=[BUCKET_COLORS[b] for b in order], edgecolor="#333333", lw=0.4)
    for y, v in zip(ys, vals, strict=True):
        ax.annotate(f"{v / div:.2f} {unit} ({v / wall:.1%})", (v / div, y), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.set_yticks(ys, [b.replace("_", " ") for b in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals) / div * 1.25 if max(vals) > 0 else 1)
    ax.set_xlabel(unit, fontsize=8)
    title = f"Wall time {wall / div:.2f} {unit}"
    if d.get("goodput") is not None:
        title += f"; goodput {d['goodput']:.1%}"
    if d.get("gpu_hours_lost") is not None:
        title += f"; GPU-hours lost {d['gpu_hours_lost']:.1f}"
    ax.set_title(title, fontsize=10, loc="left")
    _style(fig)
    return fig


# ---------------------------------------------------------------- output


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes on a white background, without the software and date metadata.

    What `savefig` would give, for less: the constrained layout runs once and the figure is drawn
    once (`savefig` first draws it with rendering disabled to run the layout, then draws it again),
    and a figure whose pixels are all opaque (every figure here: white face) is written as RGB, not
    RGBA (the same pixels, a quarter fewer bytes to compress)."""
    engine = fig.get_layout_engine()
    face = fig.get_facecolor()
    fig.set_facecolor("white")
    try:
        if engine is not None:
            engine.execute(fig)
            fig.set_layout_engine("none")
        fig.canvas.draw()
        rgba = np.asarray(fig.canvas.buffer_rgba())
    finally:
        fig.set_facecolor(face)
        if engine is not None:
            fig.set_layout_engine(engine)
    opaque = bool((rgba[..., 3] == 255).all())
    img = (PILImage.fromarray(np.ascontiguousarray(rgba[..., :3]), "RGB") if opaque
           else PILImage.frombuffer("RGBA", (rgba.shape[1], rgba.shape[0]), np.ascontiguousarray(rgba), "raw", "RGBA", 0, 1))
    buf = io.BytesIO()
    img.save(buf, format="png", dpi=(fig.dpi, fig.dpi))
    return buf.getvalue()


def save_png(fig: Figure, path: Path | str) -> None:
    Path(path).write_bytes(png_bytes(fig))


def render_all(report: dict, frames: dict[str, pl.DataFrame | None] | None = None,
               errors: dict[str, str] | None = None) -> dict[str, bytes]:
    """PNG bytes of every plot, by name (PLOT_NAMES). `frames`: attempts, steps, checkpoints,
    dcgm_samples (any may be missing). A plot that fails is left out (its error goes to
    `errors`), never the report."""
    f = frames or {}
    makers = {
        "timeline": lambda: timeline(report, f.get("attempts"), f.get("checkpoints")),
        "step_time": lambda: step_time(f.get("steps"), report, f.get("checkpoints")),
        "straggler_heatmap": lambda: straggler_heatmap(f.get("dcgm_samples"), report),
        "downtime": lambda: downtime_breakdown(report),
    }
    out: dict[str, bytes] = {}
    for name, make in makers.items():
        try:
            out[name] = png_bytes(make())
        except Exception as exc:  # noqa: BLE001 - a plot must never cost the user the report
            if errors is not None:
                errors[name] = f"{type(exc).__name__}: {exc}"
    return out

"""The weekly fleet reliability report: DuckDB over the Parquet store that `forensics fleet ingest`
writes (forensics/fleet.py), rendered as weekly.json (the contract), weekly.md and a
self-contained weekly.html (docs/fleet.md)."""

from __future__ import annotations

import base64
import html
import json
import math
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb

from forensics.fleet import BUCKETS, TABLES, UNKNOWN_WEEK, parquet_files
from forensics.signatures import load_catalog

__all__ = ["SIZE_BUCKETS", "WeeklyError", "build_weekly", "connect", "previous_weeks", "trend_figures",
           "write_weekly"]

SCHEMA_VERSION = 1
# job size buckets by GPU count: (label, lowest, highest)
SIZE_BUCKETS = (("1-8", 1, 8), ("9-64", 9, 64), ("65-256", 65, 256), ("257-1024", 257, 1024),
                ("1025-4096", 1025, 4096), (">4096", 4097, None))
LOOKBACK_WEEKS = 4  # "new" signatures: not seen in these many previous weeks
TREND_WEEKS = 8
# an interruption implicates its culprit host/GPU (lemon candidates) when its cause lies in the
# machine: hardware or network domain, or an action that excludes the node
IMPLICATING_DOMAINS = ("hardware", "network")
IMPLICATING_ACTION = "exclude_node_and_restart"
MAX_EVIDENCE_TEXT = 300


class WeeklyError(Exception):
    """The store cannot give a weekly report (message is for the user)."""


# --------------------------------------------------------------------------- weeks

def week_monday(week: str) -> date:
    y, w = week.split("-W")
    return date.fromisocalendar(int(y), int(w), 1)


def week_label(d: date) -> str:
    y, w, _ = d.isocalendar()
    return f"{y}-W{w:02d}"


def previous_weeks(week: str, n: int) -> list[str]:
    """The n ISO weeks before `week`, oldest first."""
    m = week_monday(week)
    return [week_label(m - timedelta(weeks=k)) for k in range(n, 0, -1)]


def _valid_week(week: str) -> bool:
    try:
        week_monday(week)
    except (ValueError, TypeError):
        return False
    return True


# --------------------------------------------------------------------------- queries

def connect(store: Path | str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's tables (jobs, interruptions, stragglers,
    node_health) as views over its Parquet files, for ad-hoc SQL."""
    store = Path(store)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for t, schema in TABLES.items():
        files = parquet_files(store, t)
        if files:
            con.read_parquet(files, union_by_name=True, hive_partitioning=False).create_view(t)
        else:  # an empty table with the store's columns
            con.register(f"_empty_{t}", schema.empty_table())
            con.execute(f"CREATE TABLE {t} AS SELECT * FROM _empty_{t}")
    return con


def _rows(con: duckdb.DuckDBPyConnection, q: str, params: list | None = None) -> list[dict]:
    cur = con.execute(q, params or [])
    cols = [d[0] for d in cur.description]
    return [{c: _iso(v) for c, v in zip(cols, r, strict=True)} for r in cur.fetchall()]


def _iso(v: object) -> object:
    if isinstance(v, datetime):
        return v.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return v


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), nd)


def _size_case(col: str = "gpus") -> str:
    parts = [f"WHEN {col} BETWEEN {lo} AND {hi} THEN '{lab}'" if hi else f"WHEN {col} >= {lo} THEN '{lab}'"
             for lab, lo, hi in SIZE_BUCKETS]
    return "CASE " + " ".join(parts) + " ELSE 'unknown' END"


def _summary(con, weeks: list[str]) -> dict[str, dict]:
    """Per week: jobs, GPU-hours, goodput (GPU-time weighted), interruptions, rates."""
    jobs = _rows(con, """
        SELECT week, count(*) AS jobs, count(gpus) AS jobs_with_gpus,
               sum(gpu_hours) AS gpu_hours,
               sum(CASE WHEN gpus IS NOT NULL THEN gpu_hours_lost END) AS gpu_hours_lost,
               sum(productive_s * gpus) / nullif(sum(CASE WHEN productive_s IS NOT NULL THEN wall_s * gpus END), 0)
                   AS goodput,
               avg(goodput) AS mean_job_goodput, sum(attempts) AS attempts
        FROM jobs WHERE week IN (SELECT unnest(?)) GROUP BY week""", [weeks])
    inter = _rows(con, """
        SELECT week, count(*) FILTER (WHERE stopping) AS interruptions,
               count(*) FILTER (WHERE kind = 'slowdown') AS slowdowns,
               count(*) FILTER (WHERE stopping AND auto_recoverable) AS auto_recoverable
        FROM interruptions WHERE week IN (SELECT unnest(?)) GROUP BY week""", [weeks])
    by_week = {w: {"week": w, "jobs": 0, "jobs_with_gpus": 0, "gpu_hours": 0.0, "gpu_hours_lost": 0.0,
                   "goodput": None, "mean_job_goodput": None, "attempts": 0, "interruptions": 0, "slowdowns": 0,
                   "auto_recoverable": 0} for w in weeks}
    for r in jobs:
        by_week[r["week"]].update({k: v for k, v in r.items() if v is not None})
    for r in inter:
        by_week[r["week"]].update(r)
    for s in by_week.values():
        n, gh = s["interruptions"], s["gpu_hours"] or 0.0
        s["gpu_hours"] = _r(gh, 3)
        s["gpu_hours_lost"] = _r(s["gpu_hours_lost"], 3)
        s["goodput"] = _r(s["goodput"])
        s["mean_job_goodput"] = _r(s["mean_job_goodput"])
        s["interruptions_per_1000_gpu_hours"] = _r(n * 1000.0 / gh, 3) if gh > 0 else None
        s["mtbi_gpu_hours"] = _r(gh / n, 3) if n else None
        s["auto_recoverable_share"] = _r(s["auto_recoverable"] / n) if n else None
    return by_week


def _by_size(con, week: str) -> list[dict]:
    rows = _rows(con, f"""
        WITH j AS (SELECT *, {_size_case()} AS size FROM jobs WHERE week = ?),
             i AS (SELECT j.size, count(*) FILTER (WHERE x.stopping) AS interruptions
                   FROM interruptions x JOIN j USING (job_key) GROUP BY j.size)
        SELECT j.size, count(*) AS jobs, sum(j.gpu_hours) AS gpu_hours, sum(j.gpu_hours_lost) AS gpu_hours_lost,
               sum(j.productive_s * j.gpus) / nullif(sum(CASE WHEN j.productive_s IS NOT NULL
                                                          THEN j.wall_s * j.gpus END), 0) AS goodput,
               sum(j.wall_s) AS wall_s, coalesce(any_value(i.interruptions), 0) AS interruptions,
               median(j.checkpoint_cost_s) AS checkpoint_cost_s, median(j.checkpoint_interval_s) AS checkpoint_interval_s,
               count(j.checkpoint_cost_s) AS jobs_with_checkpoint_cost
        FROM j LEFT JOIN i USING (size) GROUP BY j.size""", [week])
    order = {lab: k for k, (lab, _, _) in enumerate(SIZE_BUCKETS)}
    rows.sort(key=lambda r: order.get(r["size"], len(order)))
    for r in rows:
        for k in ("gpu_hours", "gpu_hours_lost", "wall_s", "checkpoint_cost_s", "checkpoint_interval_s"):
            r[k] = _r(r[k], 3)
        r["goodput"] = _r(r["goodput"])
    return rows


def _by(con, week: str, cols: str) -> list[dict]:
    rows = _rows(con, f"""
        SELECT {cols}, count(*) AS interruptions, count(DISTINCT job_key) AS jobs,
               count(*) FILTER (WHERE auto_recoverable) AS auto_recoverable,
               sum(gpu_hours_lost) AS gpu_hours_lost
        FROM interruptions WHERE week = ? GROUP BY {cols}
        ORDER BY gpu_hours_lost DESC NULLS LAST, interruptions DESC, {cols}""", [week])
    for r in rows:
        r["gpu_hours_lost"] = _r(r["gpu_hours_lost"], 3)
    return rows


def _downtime(con, week: str) -> dict:
    cols = ", ".join(f"sum({b}_s * gpus) / 3600.0 AS {b}" for b in BUCKETS)
    r = _rows(con, f"SELECT {cols} FROM jobs WHERE week = ? AND gpus IS NOT NULL", [week])[0]
    return {f"{b}_gpu_hours": _r(r[b] or 0.0, 3) for b in BUCKETS}


def _implications(con, weeks: list[str]) -> list[dict]:
    """Every (job, host, gpu) a hardware/network interruption or a straggler implicates."""
    return _rows(con, f"""
        SELECT x.week, x.job_key, j.name AS job_name, x.culprit_host AS host, x.culprit_gpu AS gpu,
               x.id AS interruption, x.category, x.kind, x.time AS time, x.evidence_signature AS signature,
               x.evidence_path AS path, x.evidence_line AS line, coalesce(x.evidence_text, x.summary) AS text
        FROM interruptions x JOIN jobs j USING (job_key)
        WHERE x.week IN (SELECT unnest(?)) AND x.culprit_host IS NOT NULL
          AND (x.domain IN {IMPLICATING_DOMAINS} OR x.action = '{IMPLICATING_ACTION}')
        UNION ALL
        SELECT s.week, s.job_key, j.name, s.host, s.gpu, NULL, 'straggler_hardware', 'straggler', s.start,
               NULL, NULL, NULL, s.cause || ': ' || coalesce(s.evidence, '')
        FROM stragglers s JOIN jobs j USING (job_key)
        WHERE s.week IN (SELECT unnest(?)) AND s.host IS NOT NULL
        ORDER BY 1, 4, 3, 6 NULLS LAST""", [weeks, weeks])


def _offenders(con, week: str) -> dict:
    this = _implications(con, [week])
    before = _implications(con, previous_weeks(week, LOOKBACK_WEEKS))
    xids = _rows(con, """
        SELECT host, gpu, code, sum(count) AS count, count(DISTINCT job_key) AS jobs
        FROM node_health WHERE week = ? AND signal = 'xid' GROUP BY host, gpu, code ORDER BY host, gpu, code""",
                 [week])

    def group(keyf) -> list[dict]:
        by: dict[tuple, list[dict]] = {}
        for r in this:
            k = keyf(r)
            if None in k:
                continue
            by.setdefault(k, []).append(r)
        out = []
        for k, rs in by.items():
            jobs: dict[str, dict] = {}
            for r in rs:
                j = jobs.setdefault(r["job_key"], {"job_key": r["job_key"], "job_name": r["job_name"], "evidence": []})
                text = r["text"]
                if text and len(text) > MAX_EVIDENCE_TEXT:
                    text = text[: MAX_EVIDENCE_TEXT - 1] + "…"
                j["evidence"].append({"interruption": r["interruption"], "category": r["category"], "kind": r["kind"],
                                      "time": r["time"], "signature": r["signature"], "path": r["path"],
                                      "line": r["line"], "text": text})
            if len(jobs) < 2:
                continue
            prev = {r["job_key"] for r in before if keyf(r) == k}
            item = {"host": k[0]} if len(k) == 1 else {"host": k[0], "gpu": k[1]}
            item.update({
                "jobs": len(jobs), "jobs_previous_weeks": len(prev),
                "categories": sorted({r["category"] for r in rs}),
                "xids": [{"gpu": x["gpu"], "xid": x["code"], "count": int(x["count"]), "jobs": int(x["jobs"])}
                         for x in xids if x["host"] == k[0] and (len(k) == 1 or x["gpu"] == k[1])],
                "implicated_by": sorted(jobs.values(), key=lambda j: (j["job_name"] or "", j["job_key"])),
            })
            out.append(item)
        out.sort(key=lambda x: (-x["jobs"], x["host"], x.get("gpu", -1)))
        return out

    return {"rule": (f"implicated (culprit of a {'/'.join(IMPLICATING_DOMAINS)} interruption or of one whose "
                     f"action is {IMPLICATING_ACTION}, or a straggler) in at least 2 jobs this week"),
            "hosts": group(lambda r: (r["host"],)), "gpus": group(lambda r: (r["host"], r["gpu"]))}


def _signatures(con, weeks: list[str]) -> list[dict]:
    """Error signatures seen in `weeks` (root/cascade hits and interruption evidence)."""
    return _rows(con, """
        WITH s AS (
            SELECT week, job_key, code AS signature, category, count, example_path AS path,
                   example_line AS line, example_text AS text, host
            FROM node_health WHERE signal = 'signature' AND role IN ('root', 'cascade') AND week IN (SELECT unnest(?))
            UNION ALL
            SELECT week, job_key, evidence_signature, category, 1, evidence_path, evidence_line, evidence_text,
                   culprit_host
            FROM interruptions WHERE evidence_signature IS NOT NULL AND week IN (SELECT unnest(?)))
        SELECT signature, first(category ORDER BY job_key, path, line) AS category,
               count(DISTINCT job_key) AS jobs, sum(count) AS hits,
               first(job_key ORDER BY job_key, path, line) AS job_key,
               first(path ORDER BY job_key, path, line) AS path,
               first(line ORDER BY job_key, path, line) AS line,
               first(text ORDER BY job_key, path, line) AS text
        FROM s GROUP BY signature ORDER BY jobs DESC, signature""", [weeks, weeks])


def _new_signatures(con, week: str) -> list[dict]:
    """Root-cause signatures first seen this week. Cascade and context signatures (the teardown
    every failure prints: sacct FAILED, SIGABRT, NCCL abort, ...) are not news, whatever week."""
    not_news = {s.id for s in load_catalog().signatures if s.role != "root"}
    seen = {r["signature"] for r in _signatures(con, previous_weeks(week, LOOKBACK_WEEKS))}
    out = []
    for r in _signatures(con, [week]):
        if r["signature"] in seen or r["signature"] in not_news:
            continue
        name = _rows(con, "SELECT name FROM jobs WHERE job_key = ?", [r["job_key"]])
        r["example_job"] = name[0]["name"] if name else None
        out.append(r)
    return out


def _jobs(con, store: Path, week: str) -> list[dict]:
    """The week's jobs with their verdict and the path of their own report (report.html, or
    report.md when the fleet ran with --no-job-html), absolute."""
    rows = _rows(con, "SELECT job_key, name, verdict_kind, verdict_category, verdict_culprit_host, goodput, "
                      "gpu_hours, n_interruptions FROM jobs WHERE week = ? ORDER BY name, job_key", [week])
    for r in rows:
        d = store.resolve() / "jobs" / r["job_key"]
        r["report"] = next((str(d / f) for f in ("report.html", "report.md") if (d / f).is_file()), None)
    return rows


def _checkpoint_advice(by_size: list[dict]) -> list[dict]:
    """Young/Daly: interval = sqrt(2 x save cost x MTBI), per job size; MTBI is wall-clock
    seconds of the size's jobs per stopping interruption."""
    out = []
    for b in by_size:
        item = {"size": b["size"], "jobs": b["jobs"], "interruptions": b["interruptions"],
                "mtbi_s": _r(b["wall_s"] / b["interruptions"], 1) if b["interruptions"] and b["wall_s"] else None,
                "checkpoint_cost_s": b["checkpoint_cost_s"], "current_interval_s": b["checkpoint_interval_s"],
                "advised_interval_s": None, "note": None}
        if item["mtbi_s"] is None:
            item["note"] = "no interruptions this week: MTBI unknown, no advice"
        elif item["checkpoint_cost_s"] is None:
            item["note"] = "no checkpoint save cost in these jobs' reports: advice omitted"
        else:
            item["advised_interval_s"] = _r(math.sqrt(2.0 * item["checkpoint_cost_s"] * item["mtbi_s"]), 1)
        out.append(item)
    return out


# --------------------------------------------------------------------------- the report

def build_weekly(store: Path | str, week: str | None = None) -> dict:
    """The weekly report (the weekly.json dict) for `week` (default: the latest week in the store)."""
    store = Path(store)
    if not store.is_dir() or not parquet_files(store, "jobs"):
        raise WeeklyError(f"no fleet store with jobs at {store} (run `forensics fleet ingest` first)")
    con = connect(store)
    try:
        weeks = [r["week"] for r in _rows(con, "SELECT DISTINCT week FROM jobs WHERE week <> ? ORDER BY week",
                                          [UNKNOWN_WEEK])]
        unknown = _rows(con, "SELECT count(*) AS n FROM jobs WHERE week = ?", [UNKNOWN_WEEK])[0]["n"]
        if week is None:
            if not weeks:
                raise WeeklyError("no job in the store has a start time")
            week = weeks[-1]
        if not _valid_week(week):
            raise WeeklyError(f"not an ISO week: {week!r} (expected e.g. 2026-W48)")
        trend_weeks = previous_weeks(week, TREND_WEEKS - 1) + [week]
        summ = _summary(con, trend_weeks)
        this = summ[week]
        by_size = _by_size(con, week)
        if this["jobs"] == 0:  # an empty report would read as a quiet week
            raise WeeklyError(f"no jobs in week {week}; weeks in the store: {', '.join(weeks) or 'none'}")
        notes = []
        if this["jobs"] > this["jobs_with_gpus"]:
            notes.append(f"{this['jobs'] - this['jobs_with_gpus']} job(s) without a known GPU count are "
                         "left out of GPU-hours and goodput")
        if unknown:
            notes.append(f"{unknown} job(s) in the store have no start time (week 'unknown') and are in no week")
        advice = _checkpoint_advice(by_size)
        if any(a["advised_interval_s"] is None for a in advice):
            notes.append("checkpoint advice is omitted for sizes without interruptions or without a save cost")
        jobs = _jobs(con, store, week)
        cats = _rows(con, "SELECT week, category, count(*) AS n FROM interruptions WHERE week IN (SELECT unnest(?)) "
                          "AND stopping GROUP BY week, category ORDER BY week, category", [trend_weeks])
        return {
            "schema_version": SCHEMA_VERSION,
            "week": week,
            "week_start": week_monday(week).isoformat(),
            "store": str(store.resolve()),
            "weeks_in_store": weeks,
            "summary": this,
            "jobs": jobs,
            "downtime": _downtime(con, week),
            "by_size": by_size,
            "by_category": _by(con, week, "category, domain, kind"),
            "by_domain": _by(con, week, "domain"),
            "repeat_offenders": _offenders(con, week),
            "new_signatures": {"lookback_weeks": previous_weeks(week, LOOKBACK_WEEKS),
                               "signatures": _new_signatures(con, week)},
            "checkpoint_advice": advice,
            "trend": [summ[w] for w in trend_weeks],
            "trend_categories": cats,
            "notes": notes,
        }
    finally:
        con.close()


# --------------------------------------------------------------------------- plots

def trend_figures(rep: dict) -> dict:
    """Week-over-week figures of a weekly report, at the job report's size and in its style
    (forensics.plots: width, dpi, fonts, spines): name -> matplotlib Figure."""
    # lazy: matplotlib loads only when the trend figures are drawn
    import matplotlib

    from forensics import plots

    trend = rep["trend"]
    labels = [t["week"][5:] for t in trend]
    x = list(range(len(trend)))
    figs: dict = {}
    fig = plots.figure(3.2)
    ax = fig.add_subplot()
    ys = [t["goodput"] for t in trend]
    ax.plot([i for i, y in zip(x, ys, strict=True) if y is not None], [y for y in ys if y is not None], marker="o",
            color=plots.BUCKET_COLORS["productive"])
    ax.set_ylim(0, 1)
    ax.set_xticks(x, labels)
    ax.set_ylabel("goodput", fontsize=9)
    ax.set_title("Goodput (GPU-time weighted) by week", fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    figs["trend_goodput.png"] = plots.style(fig)

    fig = plots.figure(3.2)
    ax = fig.add_subplot()
    lost = [t["gpu_hours_lost"] or 0.0 for t in trend]
    prod = [max((t["gpu_hours"] or 0.0) - lo, 0.0) for t, lo in zip(trend, lost, strict=True)]
    ax.bar(x, prod, label="productive", color=plots.BUCKET_COLORS["productive"])
    ax.bar(x, lost, bottom=prod, label="lost", color=plots.BUCKET_COLORS["termination"])
    ax.set_xticks(x, labels)
    ax.set_ylabel("GPU-hours", fontsize=9)
    ax.set_title("GPU-hours by week", fontsize=10, loc="left")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    figs["trend_gpu_hours.png"] = plots.style(fig)

    fig = plots.figure(3.6)
    ax = fig.add_subplot()
    cats = sorted({c["category"] or "unknown" for c in rep["trend_categories"]})
    bottom = [0.0] * len(trend)
    idx = {t["week"]: i for i, t in enumerate(trend)}
    cmap = matplotlib.colormaps["tab20"]
    for k, cat in enumerate(cats):
        ys = [0.0] * len(trend)
        for c in rep["trend_categories"]:
            if (c["category"] or "unknown") == cat:
                ys[idx[c["week"]]] += c["n"]
        ax.bar(x, ys, bottom=bottom, label=cat, color=cmap(k % 20))
        bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
    rate = [t["interruptions_per_1000_gpu_hours"] for t in trend]
    ax2 = ax.twinx()
    ax2.plot([i for i, r in zip(x, rate, strict=True) if r is not None], [r for r in rate if r is not None],
             color="black", marker="o", label="per 1,000 GPU-hours")
    ax2.set_ylabel("per 1,000 GPU-hours", fontsize=9)
    ax2.set_ylim(bottom=0)
    ax.set_xticks(x, labels)
    ax.set_ylabel("interruptions", fontsize=9)
    ax.set_title("Interruptions by category and rate", fontsize=10, loc="left")
    if cats:
        ax.legend(loc="upper left", fontsize=7, ncol=2, frameon=False)
    figs["trend_interruptions.png"] = plots.style(fig)
    ax2.spines["right"].set_visible(True)  # the rate's own axis
    return figs


def _plots(rep: dict) -> dict[str, bytes]:
    """The trend figures as PNG bytes (no timestamps or software tags: same report, same bytes)."""
    # lazy: matplotlib loads only when the trend figures are drawn
    from forensics import plots

    return {name: plots.png_bytes(fig) for name, fig in trend_figures(rep).items()}


# --------------------------------------------------------------------------- markdown and HTML

def _md(text: object) -> str:
    s = "" if text is None else str(text)
    s = s.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "|`*_[]#":
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


def _fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.1%}"


def _sections(rep: dict) -> list[tuple[str, list[str], list[list[object]], str | None]]:
    """(title, header, rows, note) tables shared by the Markdown and the HTML renderings."""
    s = rep["summary"]
    out = []
    out.append(("Summary", ["measure", "value"], [
        ["jobs", s["jobs"]], ["GPU-hours", s["gpu_hours"]], ["GPU-hours lost", s["gpu_hours_lost"]],
        ["goodput (GPU-time weighted)", _pct(s["goodput"])], ["mean job goodput", _pct(s["mean_job_goodput"])],
        ["interruptions (stopping an attempt)", s["interruptions"]], ["slowdowns", s["slowdowns"]],
        ["interruptions per 1,000 GPU-hours", s["interruptions_per_1000_gpu_hours"]],
        ["mean GPU-hours between interruptions", s["mtbi_gpu_hours"]],
        ["auto-recoverable share", _pct(s["auto_recoverable_share"])]], None))
    out.append(("Goodput by job size", ["GPUs", "jobs", "GPU-hours", "GPU-hours lost", "goodput", "interruptions"],
                [[b["size"], b["jobs"], b["gpu_hours"], b["gpu_hours_lost"], _pct(b["goodput"]), b["interruptions"]]
                 for b in rep["by_size"]], None))
    out.append(("Where the GPU-hours went", ["bucket", "GPU-hours"],
                [[k.replace("_gpu_hours", ""), v] for k, v in rep["downtime"].items()], None))
    out.append(("Interruptions by category", ["category", "domain", "kind", "count", "jobs", "auto-recoverable",
                                              "GPU-hours lost"],
                [[c["category"], c["domain"], c["kind"], c["interruptions"], c["jobs"], c["auto_recoverable"],
                  c["gpu_hours_lost"]] for c in rep["by_category"]],
                "GPU-hours lost: a job's lost-work, termination and restart time is shared by its stopping "
                "interruptions, its slowdown time by its slowdowns; startup and checkpoint time are overhead."))
    out.append(("Interruptions by domain", ["domain", "count", "jobs", "auto-recoverable", "GPU-hours lost"],
                [[c["domain"], c["interruptions"], c["jobs"], c["auto_recoverable"], c["gpu_hours_lost"]]
                 for c in rep["by_domain"]], None))
    ro = rep["repeat_offenders"]
    out.append(("Repeat-offender hosts (lemon candidates)", ["host", "jobs", "jobs in previous 4 weeks", "categories",
                                                             "Xids"],
                [[h["host"], h["jobs"], h["jobs_previous_weeks"], ", ".join(h["categories"]),
                  ", ".join(f"{x['xid']}×{x['count']}" for x in h["xids"])] for h in ro["hosts"]],
                "Rule: " + ro["rule"] + "."))
    out.append(("Repeat-offender GPUs", ["host", "GPU", "jobs", "jobs in previous 4 weeks", "categories"],
                [[g["host"], g["gpu"], g["jobs"], g["jobs_previous_weeks"], ", ".join(g["categories"])]
                 for g in ro["gpus"]], None))
    ns = rep["new_signatures"]
    out.append(("Error signatures new this week", ["signature", "category", "jobs", "example"],
                [[n["signature"], n["category"], n["jobs"],
                  f"{n['example_job']}: {n['path']}:{n['line']} {(n['text'] or '').strip()[:160]}"]
                 for n in ns["signatures"]],
                f"Not seen in {', '.join(ns['lookback_weeks'])}."))
    out.append(("Checkpoint-interval advice by job size (Young/Daly)",
                ["GPUs", "interruptions", "MTBI s", "save cost s", "current interval s", "advised interval s", "note"],
                [[a["size"], a["interruptions"], a["mtbi_s"], a["checkpoint_cost_s"], a["current_interval_s"],
                  a["advised_interval_s"], a["note"]] for a in rep["checkpoint_advice"]],
                "advised interval = √(2 × save cost × MTBI); MTBI = wall-clock seconds of the size's jobs "
                "per stopping interruption."))
    out.append(("Week over week", ["week", "jobs", "GPU-hours", "goodput", "interruptions", "per 1,000 GPU-hours",
                                   "auto-recoverable"],
                [[t["week"], t["jobs"], t["gpu_hours"], _pct(t["goodput"]), t["interruptions"],
                  t["interruptions_per_1000_gpu_hours"], _pct(t["auto_recoverable_share"])] for t in rep["trend"]],
                None))
    return out


def render_markdown(rep: dict, plots: dict[str, str], base: Path | None = None) -> str:
    lines = [f"# Weekly fleet reliability report: {rep['week']}", "",
             f"Week of {rep['week_start']} (ISO week, UTC). Store: {_md(rep['store'])}", ""]
    for note in rep["notes"]:
        lines.append(f"> {_md(note)}")
    if rep["notes"]:
        lines.append("")
    lines += ["## Jobs", ""]
    if rep.get("jobs"):
        lines += ["| job | verdict | culprit host | goodput | GPU-hours | report |", "|---|---|---|---|---|---|"]
        for j in rep["jobs"]:
            href = _link(j.get("report"), base)
            verdict = " · ".join(str(v) for v in (j.get("verdict_kind"), j.get("verdict_category")) if v)
            lines.append(f"| {_md(j.get('name'))} | {_md(verdict)} | {_md(_fmt(j.get('verdict_culprit_host')))} | "
                         f"{_pct(j.get('goodput'))} | {_fmt(j.get('gpu_hours'))} | "
                         + (f"[{Path(j['report']).name}]({href})" if href else "not written") + " |")
    else:
        lines.append("None.")
    lines.append("")
    for title, head, rows, note in _sections(rep):
        lines += [f"## {title}", ""]
        if rows:
            lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(_md(_fmt(v)) for v in r) + " |" for r in rows]
        else:
            lines.append("None.")
        lines.append("")
        if note:
            lines += [_md(note), ""]
        if title.startswith("Repeat-offender hosts"):
            for h in rep["repeat_offenders"]["hosts"]:
                lines += [f"### {_md(h['host'])}", ""]
                for j in h["implicated_by"]:
                    for e in j["evidence"]:
                        where = f"`{e['path'].replace('`', '')}:{e['line']}` " if e["path"] else ""
                        lines.append(f"- {_md(j['job_name'])} ({j['job_key']}), {_md(e['category'])}: "
                                     f"{where}{_md((e['text'] or '').strip())}")
                lines.append("")
    lines += ["## Trends", ""] + [f"![{n}]({p})" for n, p in plots.items()] + [""]
    return "\n".join(lines)


CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;
text-align:left;vertical-align:top}th{background:#f3f3f3}.note{color:#555;font-size:.85em}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px solid #ccc;border-radius:6px;padding:.6em 1em;
min-width:9em}.card b{display:block;font-size:1.4em}code,pre{font-family:ui-monospace,monospace;font-size:.85em}
pre{white-space:pre-wrap;word-break:break-all;background:#f7f7f7;padding:.3em;margin:.2em 0}
img{max-width:100%;height:auto;display:block;margin:.5em 0}"""


def _link(report: str | None, base: Path | None) -> str | None:
    """The job report's path as a link from the folder the weekly report is written to."""
    if not report:
        return None
    return Path(os.path.relpath(report, base)).as_posix() if base is not None else Path(report).as_uri()


def _jobs_html(rep: dict, base: Path | None) -> list[str]:
    e = html.escape
    out = ['<h2 id="jobs">Jobs</h2>']
    if not rep.get("jobs"):
        return out + ["<p>None.</p>"]
    out.append("<table><tr><th>job</th><th>verdict</th><th>culprit host</th><th>goodput</th><th>GPU-hours</th>"
               "<th>interruptions</th><th>report</th></tr>")
    for j in rep["jobs"]:
        href = _link(j.get("report"), base)
        link = f'<a href="{e(href)}">{e(Path(j["report"]).name)}</a>' if href else "not written"
        verdict = " · ".join(str(v) for v in (j.get("verdict_kind"), j.get("verdict_category")) if v)
        out.append(f"<tr><td>{e(str(j.get('name')))}</td><td>{e(verdict)}</td>"
                   f"<td>{e(_fmt(j.get('verdict_culprit_host')))}</td><td>{e(_pct(j.get('goodput')))}</td>"
                   f"<td>{e(_fmt(j.get('gpu_hours')))}</td><td>{e(_fmt(j.get('n_interruptions')))}</td>"
                   f"<td>{link}</td></tr>")
    out.append("</table>")
    return out


def render_html(rep: dict, images: dict[str, bytes], base: Path | None = None) -> str:
    """weekly.html; `base`: the folder it is written to (job report links are relative to it)."""
    e = html.escape
    s = rep["summary"]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>Weekly fleet reliability report {e(rep['week'])}</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>Weekly fleet reliability report: {e(rep['week'])}</h1>",
             f"<p class=\"note\">Week of {e(rep['week_start'])} (ISO week, UTC). Store: {e(rep['store'])}</p>"]
    for note in rep["notes"]:
        parts.append(f'<p class="note">{e(note)}</p>')
    parts.append('<div class="cards" id="summary">')
    for label, val in (("jobs", _fmt(s["jobs"])), ("GPU-hours", _fmt(s["gpu_hours"])),
                       ("goodput", _pct(s["goodput"])), ("interruptions", _fmt(s["interruptions"])),
                       ("per 1,000 GPU-hours", _fmt(s["interruptions_per_1000_gpu_hours"])),
                       ("auto-recoverable", _pct(s["auto_recoverable_share"])),
                       ("lemon candidates", _fmt(len(rep["repeat_offenders"]["hosts"])))):
        parts.append(f'<div class="card">{e(label)}<b>{e(val)}</b></div>')
    parts.append("</div>")
    parts += _jobs_html(rep, base)
    for title, head, rows, note in _sections(rep):
        parts.append(f"<h2>{e(title)}</h2>")
        if rows:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>")
            for r in rows:
                parts.append("<tr>" + "".join(f"<td>{e(_fmt(v))}</td>" for v in r) + "</tr>")
            parts.append("</table>")
        else:
            parts.append("<p>None.</p>")
        if note:
            parts.append(f'<p class="note">{e(note)}</p>')
        if title.startswith("Repeat-offender hosts"):
            for h in rep["repeat_offenders"]["hosts"]:
                parts.append(f"<h3>{e(h['host'])}</h3><ul>")
                for j in h["implicated_by"]:
                    for ev in j["evidence"]:
                        where = f"<code>{e(ev['path'])}:{e(str(ev['line']))}</code> " if ev["path"] else ""
                        parts.append(f"<li>{e(j['job_name'] or '')} ({e(j['job_key'])}), {e(ev['category'] or '')}: "
                                     f"{where}<pre>{e((ev['text'] or '').strip())}</pre></li>")
                parts.append("</ul>")
    parts.append("<h2>Trends</h2>")
    for name, data in images.items():
        b64 = base64.b64encode(data).decode("ascii")
        parts.append(f'<img alt="{e(name)}" src="data:image/png;base64,{b64}">')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_weekly(store: Path | str, out: Path | str, week: str | None = None) -> dict:
    """Write weekly.json, weekly.md, weekly.html and plots/*.png into `out`; return the report."""
    rep = build_weekly(store, week)
    out = Path(out)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    images = _plots(rep)
    for name, data in images.items():
        (out / "plots" / name).write_bytes(data)
    (out / "weekly.json").write_text(json.dumps(rep, indent=2, default=str) + "\n", encoding="utf-8")
    base = out.resolve()
    (out / "weekly.md").write_text(render_markdown(rep, {n: f"plots/{n}" for n in images}, base), encoding="utf-8")
    (out / "weekly.html").write_text(render_html(rep, images, base), encoding="utf-8")
    return rep

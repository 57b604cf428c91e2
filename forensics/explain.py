"""The lines behind each attempt's downtime, for `forensics explain-time` (forensics/explain_time.py).

`attempt_evidence` runs inside the analysis: for every attempt it names the lines (path:line)
that set its start and end, its first and last logged step, the checkpoint it resumed from, its
last durable checkpoint, its saves and the fault that ended it. The report carries them with
each attempt's share of every bucket (`report.json` attempts: `downtime`, `intervals`,
`evidence`). `forensics.explain_time` reads only the report.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from forensics.downtime import BUCKETS, Downtime
from forensics.timeline import PROCESS_SOURCES, SAVE_KINDS, SCHEDULER, saves_of

MAX_SAVES_LISTED = 3  # saves named one by one per attempt (first and last ones); the rest counted


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def _where(path_of: dict[int, str], r: dict) -> dict:
    return {"path": path_of.get(r.get("file_id")), "line": r.get("line_no")}


def _line_at(ev: pl.DataFrame, t: datetime | None, path_of: dict[int, str], last: bool) -> dict | None:
    """The stamped event line of the attempt at time `t` (the first such in file order; `last`:
    the last one)."""
    if t is None or ev.is_empty():
        return None
    hit = ev.filter((pl.col("ts") == t) & (pl.col("ts_quality") != "derived")).sort("file_id", "line_no")
    if hit.is_empty():
        return None
    r = hit.row(-1 if last else 0, named=True)
    return {**_where(path_of, r), "kind": r["kind"], "source": r["source"]}


def _sched_at(sched: pl.DataFrame | None, t: datetime | None, col: str, path_of: dict[int, str]) -> dict | None:
    if sched is None or sched.is_empty() or t is None:
        return None
    hit = sched.filter(pl.col(col) == t).sort("file_id", "line_no")
    if hit.is_empty():
        return None
    r = hit.row(0, named=True)
    step = r.get("step_id") or ""
    return {**_where(path_of, r), "kind": f"scheduler {'step ' + step if step else 'job'} {col}",
            "source": SCHEDULER}


def _file_at(files: pl.DataFrame, fids: list[int], t: datetime | None, col: str) -> dict | None:
    """A file of the attempt whose first (last) stamped line is at `t`: that line is no event
    (a launcher banner), so only the file is named."""
    if t is None or files.is_empty() or not fids:
        return None
    hit = files.filter(pl.col("file_id").is_in(fids) & (pl.col(col) == t)).sort("file_id")
    if hit.is_empty():
        return None
    return {"path": hit["path"][0], "line": None, "kind": f"{'first' if col == 'first_ts' else 'last'} stamped line",
            "source": "file"}


def _bound(which: str, t: datetime | None, ev: pl.DataFrame, sched: pl.DataFrame | None, files: pl.DataFrame,
           fids: list[int], path_of: dict[int, str], witnesses: str | None) -> dict:
    col = "start" if which == "start" else "end"
    found = (_sched_at(sched, t, col, path_of) or _line_at(ev, t, path_of, last=which == "end")
             or _file_at(files, fids, t, "first_ts" if which == "start" else "last_ts"))
    if found is None:
        found = {"path": None, "line": None, "source": "boundary",
                 "kind": f"launch placed by {witnesses}" if witnesses and which == "start" else "not found"}
    return {"time": _iso(t), **found}


def _step_row(s: pl.DataFrame, k: int, path_of: dict[int, str], source: str) -> dict | None:
    if s.is_empty():
        return None
    r = s.row(k, named=True)
    return {"step": r["step"], "time": _iso(r["ts"]), "from": source, **_where(path_of, r)}


def attempt_evidence(attempts: pl.DataFrame, events: pl.DataFrame, tables: dict[str, pl.DataFrame],
                     files: pl.DataFrame, inters: dict) -> dict[int, dict]:
    """attempt index -> the lines behind its boundaries and buckets (see the module doc).
    `inters`: attempt index -> the interruption that ended it."""
    path_of = dict(zip(files["file_id"].to_list(), files["path"].to_list(), strict=True))
    sched = tables.get("sched_records")
    steps = tables.get("train_steps")
    ck = tables.get("checkpoints")
    step_ev = events.filter(pl.col("kind") == "step").select("file_id", "line_no", "attempt")
    ck_ev = events.select("file_id", "line_no", "attempt").unique(["file_id", "line_no"], keep="first")
    cka = ck.join(ck_ev, on=["file_id", "line_no"], how="left") if ck is not None and not ck.is_empty() else None
    out: dict[int, dict] = {}
    for a in attempts.iter_rows(named=True):
        i = a["index"]
        ev = events.filter((pl.col("attempt") == i) & pl.col("ts").is_not_null())
        proc = ev.filter(pl.col("source").is_in(PROCESS_SOURCES))
        fids = sorted(set(proc["file_id"].to_list()))
        d: dict = {"start": _bound("start", a["start"], proc, sched, files, fids, path_of, a.get("witnesses")),
                   "end": _bound("end", a["end"], proc, sched, files, fids, path_of, a.get("witnesses"))}
        s = pl.DataFrame()
        if steps is not None and not steps.is_empty():
            s = steps.join(step_ev.filter(pl.col("attempt") == i), on=["file_id", "line_no"]).filter(
                pl.col("step").is_not_null()).sort("ts", "line_no")  # the order timeline._attempt_rows reads
        source = "step line"
        if s.is_empty() and ck is not None and not ck.is_empty():  # as timeline._attempt_rows: the saves' steps
            s = saves_of(ck, events.filter(pl.col("kind").is_in(SAVE_KINDS)).select("file_id", "line_no", "attempt"), i)
            source = "save line"
        d["first_step"] = _step_row(s, 0, path_of, source)
        d["last_step"] = _step_row(s, -1, path_of, source)
        mine = cka.filter(pl.col("attempt") == i) if cka is not None else None
        d["resumed_from"] = None
        if mine is not None and a.get("resumed_from") is not None:
            ld = mine.filter(pl.col("event").is_in(["load_start", "load_end"]) & (pl.col("step") == a["resumed_from"]))
            if not ld.is_empty():
                d["resumed_from"] = {"step": a["resumed_from"], "time": _iso(ld["ts"][-1]),
                                     **_where(path_of, ld.row(-1, named=True))}
        d["last_durable_checkpoint"] = _durable(mine, a.get("last_durable_checkpoint"), path_of)
        d["saves"] = _saves(mine, path_of)
        x = inters.get(i)
        d["fault"] = None
        if x is not None:
            roots = [e for e in x.evidence if e.get("role") == "root"] or list(x.evidence)
            first = roots[0] if roots else {}
            d["fault"] = {"interruption": x.id, "kind": x.kind, "time": _iso(x.time),
                          "path": first.get("path"), "line": first.get("line")}
        out[i] = d
    return out


def _durable(ck: pl.DataFrame | None, t: datetime | None, path_of: dict[int, str]) -> dict | None:
    """The save behind the attempt's last durable checkpoint: the save end logged at `t`, else
    the last save start before it (a save with no end line ends at its writer's next line)."""
    if ck is None or ck.is_empty() or t is None:
        return None
    end = ck.filter((pl.col("event") == "save_end") & (pl.col("ts") == t)).sort("file_id", "line_no")
    if not end.is_empty():
        r = end.row(0, named=True)
        return {"step": r["step"], "time": _iso(t), "how": "save end logged", **_where(path_of, r)}
    st = ck.filter((pl.col("event") == "save_start") & (pl.col("ts") < t)).sort("ts", "file_id", "line_no")
    if st.is_empty():
        return {"step": None, "time": _iso(t), "how": "save end", "path": None, "line": None}
    r = st.row(-1, named=True)
    return {"step": r["step"], "time": _iso(t), "how": "save start logged, no end: ends at its writer's next line",
            **_where(path_of, r)}


def _saves(ck: pl.DataFrame | None, path_of: dict[int, str]) -> dict:
    """The attempt's saves (one per writer file and step): how many, and the first and last ones
    by time with their start and end lines."""
    if ck is None or ck.is_empty():
        return {"count": 0, "listed": []}
    sv = ck.filter(pl.col("event").is_in(["save_start", "save_end"]) & pl.col("ts").is_not_null())
    if sv.is_empty():
        return {"count": 0, "listed": []}
    one = sv.sort("ts", "line_no").group_by("file_id", "step", maintain_order=True).agg(
        pl.col("ts").first(), pl.col("line_no").filter(pl.col("event") == "save_start").first().alias("start_line"),
        pl.col("line_no").filter(pl.col("event") == "save_end").first().alias("end_line")).sort("ts", "file_id")
    rows = one.to_dicts()
    pick = rows if len(rows) <= MAX_SAVES_LISTED else [*rows[:MAX_SAVES_LISTED - 1], rows[-1]]
    return {"count": len(rows), "listed": [{"step": r["step"], "time": _iso(r["ts"]), "path": path_of.get(r["file_id"]),
                                            "start_line": r["start_line"], "end_line": r["end_line"]} for r in pick]}


def attempt_downtime(down: Downtime, epoch: datetime | None) -> tuple[dict[int, dict], dict[int, list[dict]]]:
    """(attempt index -> its share of every bucket, rounded as report.json's downtime;
    attempt index -> its labelled intervals before precedence, as times)."""
    shares: dict[int, dict] = {}
    for (b, k), v in sorted(down.by_attempt.items(), key=lambda kv: (kv[0][1], BUCKETS.index(kv[0][0]))):
        shares.setdefault(k, {f"{x}_s": 0.0 for x in BUCKETS})[f"{b}_s"] = round(v, 3)
    ivs: dict[int, list[dict]] = {}
    if epoch is not None:
        for a, b, lab, iid, k in down.intervals:
            if b > a:
                ivs.setdefault(k, []).append({
                    "bucket": lab, "from": _iso(epoch + timedelta(seconds=a)), "to": _iso(epoch + timedelta(seconds=b)),
                    "seconds": round(b - a, 3), "interruption": iid})
    return shares, ivs

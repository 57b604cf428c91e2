"""Timeline: the rank <-> host <-> GPU map, and the job's attempts.

Attempts come from, in order of trust: per-attempt folders or files (`attempt-1/`), training
step counters going back, torchelastic restarts. Events without an attempt of their own (kernel
logs, DCGM, scheduler records) are placed in the attempt whose time span holds them.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from parsers import source_names, source_with
from parsers.ascii_regex import ascii_classes
from parsers.records import UTC_DT

PROCESS_SOURCES = source_names("process")  # a rank's or launcher's own output: it makes and stretches attempts
COLLECTIVES, LAUNCHER, SCHEDULER, UPTIME_CLOCK = (source_with(r) for r in ("collectives", "launcher", "scheduler",
                                                                         "uptime_clock"))
POST_SLACK = timedelta(minutes=5)
PRE_SLACK = timedelta(minutes=35)
SCHED_OVERLAP = timedelta(seconds=5)  # sacct rounds End up to the second
LAUNCH_CLUSTER = timedelta(minutes=2)  # launcher banners of one attempt (one per node) come within this
MERGE_WINDOW = timedelta(minutes=5)  # witnesses of one boundary (no step logged between them)
SILENCE = timedelta(seconds=60)  # a gap this long before a boundary corroborates it
LONG_SILENCE = timedelta(hours=2)  # longer than any collective timeout: alone, a new attempt (if it logs steps)

RANK_MAP_SCHEMA = {"rank": pl.Int64, "host": pl.Utf8, "local_rank": pl.Int64, "gpu": pl.Int64,
                   "pci_bus_id": pl.Utf8, "source": pl.Utf8}

ATTEMPT_SCHEMA = {
    "index": pl.Int32, "start": UTC_DT, "end": UTC_DT, "first_step": pl.Int64, "last_step": pl.Int64,
    "resumed_from": pl.Int64, "end_reason": pl.Utf8, "first_step_start": UTC_DT, "last_progress": UTC_DT,
    "witnesses": pl.Utf8,
}


def rank_map(events: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    parts = []
    comms = tables.get("nccl_comms")
    if comms is not None and not comms.is_empty():
        c = comms.filter(pl.col("event") == "init_complete", pl.col("rank").is_not_null())
        if not c.is_empty():
            gmax = c["nranks"].max()
            c = c.filter(pl.col("nranks") == gmax)
            parts.append(c.select(
                "rank", "host", pl.lit(None, dtype=pl.Int64).alias("local_rank"),
                pl.coalesce("nvml_dev", "cuda_dev").alias("gpu"), "pci_bus_id", pl.lit(COLLECTIVES).alias("source")))
    exits = tables.get("exits")
    if exits is not None and not exits.is_empty():
        parts.append(exits.filter(pl.col("rank").is_not_null()).select(
            "rank", "host", "local_rank", pl.lit(None, dtype=pl.Int64).alias("gpu"),
            pl.lit(None, dtype=pl.Utf8).alias("pci_bus_id"), pl.lit(LAUNCHER).alias("source")))
    if not events.is_empty():
        parts.append(events.filter(pl.col("rank").is_not_null() & pl.col("host").is_not_null()).select(
            "rank", "host", "local_rank", pl.lit(None, dtype=pl.Int64).alias("gpu"),
            pl.lit(None, dtype=pl.Utf8).alias("pci_bus_id"), pl.lit("logs").alias("source")).unique())
    if not parts:
        return pl.DataFrame(schema=RANK_MAP_SCHEMA)
    allp = pl.concat([p.select([pl.col(k).cast(v) for k, v in RANK_MAP_SCHEMA.items()]) for p in parts])
    prio = pl.col("source").replace_strict({COLLECTIVES: 0, LAUNCHER: 1, "logs": 2}, return_dtype=pl.Int64)
    # A rank can live on different hosts in different attempts (a restart without the bad
    # node puts a spare in its slot): one row per (rank, host).
    allp = allp.filter(pl.col("host").is_not_null()).with_columns(prio.alias("_p")).sort("rank", "host", "_p")
    out = allp.group_by("rank", "host", maintain_order=True).agg(
        pl.col("local_rank").drop_nulls().first(),
        pl.col("gpu").drop_nulls().first(),
        pl.col("pci_bus_id").drop_nulls().first(),
        pl.col("source").first(),
    )
    return out.with_columns(pl.coalesce("local_rank", "gpu").alias("local_rank")).select(
        list(RANK_MAP_SCHEMA)).sort("rank", "host")


def _step_time(steps: pl.DataFrame) -> float | None:
    """Median seconds per step: from the logged step time, else from stamps of consecutive lines."""
    st = steps["step_time_s"].drop_nulls()
    if st.len() > 0:
        return float(st.median())
    s = steps.filter(pl.col("ts").is_not_null()).sort("ts")
    if s.height < 2:
        return None
    d = s.select(
        (pl.col("ts").diff().dt.total_microseconds() / 1e6).alias("dt"), pl.col("step").diff().alias("ds")
    ).filter((pl.col("ds") > 0) & (pl.col("dt") > 0)).select((pl.col("dt") / pl.col("ds")).alias("per"))["per"]
    return float(d.median()) if d.len() else None


def assign_attempts(events: pl.DataFrame, tables: dict[str, pl.DataFrame],
                    file_attempt: dict[int, int],
                    file_spans: pl.DataFrame | None = None,
                    node_files: set[int] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (events with an `attempt` column, attempts frame). `file_spans` (file_id,
    first_ts, last_ts) of process logs widen an attempt to the first and last stamped line of
    its files (a launcher banner is the attempt's first line but no event). `node_files` are
    files of node-level records (kernel logs, journals, telemetry): whatever they hold, even a
    scheduler line of an earlier job, never makes or stretches an attempt. Spans are clipped to
    the scheduler's job window where there is one."""
    node_files = set(node_files or ())
    for c in ("_next_ts", "_prev_ts"):
        if c not in events.columns:
            events = events.with_columns(pl.lit(None, dtype=UTC_DT).alias(c))
    ev = events.with_columns(
        pl.col("file_id").replace_strict(file_attempt, default=None, return_dtype=pl.Int32).alias("attempt"))
    is_proc = pl.col("source").is_in(PROCESS_SOURCES) & ~pl.col("file_id").is_in(list(node_files))
    sched = tables.get("sched_records")
    window = sched_window(sched)
    proc_attempts = set(ev.filter(is_proc & pl.col("attempt").is_not_null())["attempt"].unique().to_list())
    witnesses: dict[int, str] = {}
    folder_mode = len(proc_attempts) >= 2
    if folder_mode:
        # attempt folders (attempt-1/, s0/s1, try-2, retry_3): only process logs say which
        # attempt they belong to; node-level files in such a folder are placed by time
        ev = ev.with_columns(pl.when(is_proc).then(pl.col("attempt")).otherwise(None).alias("attempt"))
    else:
        proc = ev.filter(is_proc & pl.col("ts").is_not_null() & (pl.col("ts_quality") != "derived"))
        cuts = boundaries(proc, tables.get("train_steps"), sched)
        if window is not None:
            cuts = [(t, w) for t, w in cuts if window[0] <= t and (window[1] is None or t <= window[1])]
        cut_times = pl.Series("b", [t for t, _ in cuts], dtype=UTC_DT)
        # a derived line that opens an attempt (a checkpoint load before the first step) belongs
        # with the stamped line after it, not with the end of the previous attempt
        # a derived line that closes one (a traceback, an abort) with the stamped line before it
        derived = pl.col("ts_quality") == "derived"
        opens = pl.col("kind").is_in(START_KINDS) & derived & pl.col("_next_ts").is_not_null()
        closes = ~pl.col("kind").is_in(START_KINDS) & derived & pl.col("_prev_ts").is_not_null()
        key = ev.select(pl.when(opens).then(pl.col("_next_ts")).when(closes).then(pl.col("_prev_ts"))
                        .otherwise(pl.col("ts")).alias("k"))["k"]
        # lines with no time at all keep the (single) attempt folder they were found in; with no boundary at
        # all the job has one attempt, so a process log without stamps (a traceback saved on its own beside a
        # stamped train log) belongs to it as well
        single = len(cuts) == 0
        ev = ev.with_columns(
            pl.when(is_proc & pl.col("ts").is_not_null()).then(cut_times.search_sorted(key, side="right"))
            .when(is_proc & pl.col("ts").is_null() & (pl.col("attempt").is_not_null() | pl.lit(single)))
            .then(pl.lit(0))
            .otherwise(None).cast(pl.Int32).alias("attempt"))
        witnesses = {k + 1: w for k, (_, w) in enumerate(cuts)}
    # spans from stamped lines; derived times only for an attempt that has nothing else
    exact = pl.col("ts_quality") != "derived"
    spans = (ev.filter(pl.col("attempt").is_not_null() & pl.col("ts").is_not_null() & is_proc)
             .group_by("attempt").agg(
                 pl.col("ts").filter(exact).min().fill_null(pl.col("ts").min()).alias("start"),
                 pl.col("ts").filter(exact).max().fill_null(pl.col("ts").max()).alias("end"))
             .sort("attempt"))
    if not folder_mode and witnesses and not spans.is_empty():
        # an attempt starts at its launch (a scheduler step's start precedes its first line)
        launch = pl.DataFrame({"attempt": list(witnesses), "_l": [t for t, _ in cuts]},
                              schema={"attempt": pl.Int32, "_l": UTC_DT})
        spans = spans.join(launch, on="attempt", how="left").with_columns(
            pl.min_horizontal("start", "_l").alias("start")).drop("_l")
    if file_spans is not None and not file_spans.is_empty() and folder_mode and not spans.is_empty():
        fs = file_spans.filter(~pl.col("file_id").is_in(list(node_files))).with_columns(
            pl.col("file_id").replace_strict(file_attempt, default=None, return_dtype=pl.Int32).alias("attempt")
        ).filter(pl.col("attempt").is_not_null()).group_by("attempt").agg(
            pl.col("first_ts").min().alias("f0"), pl.col("last_ts").max().alias("f1"))
        spans = spans.join(fs, on="attempt", how="left").with_columns(
            pl.min_horizontal("start", "f0").alias("start"), pl.max_horizontal("end", "f1").alias("end")
        ).drop("f0", "f1")
    if folder_mode and not spans.is_empty():
        witnesses = {int(a): "folder" for a in spans["attempt"].to_list()}
    if spans.is_empty():
        # Only node-level evidence (dmesg, DCGM, scheduler): one attempt over the scheduler's job
        # window, else over the records that are not boot-time noise.
        t = ev.filter(pl.col("ts").is_not_null() & (pl.col("kind") != "boot"))
        if window is not None:
            t = t.filter(pl.col("ts") >= window[0])
            if window[1] is not None:
                t = t.filter(pl.col("ts") <= window[1])
        if t.is_empty() and window is None:
            # No time stamps at all (a pasted excerpt): everything is one attempt of unknown span.
            if ev.is_empty():
                return (ev.drop("_next_ts", "_prev_ts").with_columns(pl.lit(None, dtype=pl.Int32).alias("attempt")),
                        pl.DataFrame(schema=ATTEMPT_SCHEMA))
            # its first and last steps are still those of its step lines, in file order
            ev = ev.drop("_next_ts", "_prev_ts").with_columns(pl.lit(0, dtype=pl.Int32).alias("attempt"))
            span = pl.DataFrame({"index": [0], "start": [None], "end": [None]},
                                schema={"index": pl.Int32, "start": UTC_DT, "end": UTC_DT})
            return ev, _attempt_rows(span, ev, tables)
        t0 = window[0] if window is not None else t["ts"].min()
        t1 = window[1] if window is not None and window[1] is not None else t["ts"].max()
        spans = pl.DataFrame({"attempt": [0], "start": [t0], "end": [t1]},
                             schema={"attempt": pl.Int32, "start": UTC_DT, "end": UTC_DT})
        ev = ev.with_columns(pl.lit(0, dtype=pl.Int32).alias("attempt"))
    spans = _sched_starts(spans, sched)
    if window is not None:
        lo, hi = window
        spans = spans.with_columns(pl.max_horizontal("start", pl.lit(lo, dtype=UTC_DT)).alias("start"))
        if hi is not None:
            spans = spans.with_columns(pl.min_horizontal("end", pl.lit(hi, dtype=UTC_DT)).alias("end"))
        spans = spans.with_columns(pl.max_horizontal("start", "end").alias("end"))
    # renumber 0..n-1 in time order
    spans = spans.sort("start").with_row_index("index").with_columns(pl.col("index").cast(pl.Int32))
    remap = dict(zip(spans["attempt"].to_list(), spans["index"].to_list(), strict=True))
    wit = {remap[a]: w for a, w in witnesses.items() if a in remap}
    ev = ev.with_columns(pl.col("attempt").replace_strict(remap, default=None, return_dtype=pl.Int32))
    # Events without an attempt (node-level logs): the attempt whose span holds them; else the
    # attempt that ended at most POST_SLACK before; else the next one to start within PRE_SLACK
    # (a root cause can precede the first rank-log line of a short excerpt by a whole collective
    # timeout).
    starts, ends = spans["start"].to_list(), spans["end"].to_list()

    def place(t):  # noqa: ANN001, ANN202
        if t is None:
            return None
        for i in range(len(starts) - 1, -1, -1):
            if starts[i] <= t <= ends[i]:
                return i
        for i in range(len(starts) - 1, -1, -1):
            if ends[i] < t <= ends[i] + POST_SLACK:
                return i
        for i in range(len(starts)):
            if starts[i] - PRE_SLACK <= t < starts[i]:
                return i
        return None

    missing = ev["attempt"].is_null() & ev["ts"].is_not_null()
    if missing.any():
        placed = [place(t) if m else a for t, m, a in zip(ev["ts"].to_list(), missing.to_list(),
                                                          ev["attempt"].to_list(), strict=True)]
        ev = ev.with_columns(pl.Series("attempt", placed, dtype=pl.Int32))
    # a derived time stays inside its attempt
    lo = dict(zip(spans["index"].to_list(), spans["start"].to_list(), strict=True))
    hi = dict(zip(spans["index"].to_list(), spans["end"].to_list(), strict=True))
    ev = ev.with_columns(pl.col("attempt").replace_strict(lo, default=None, return_dtype=UTC_DT).alias("_s"),
                         pl.col("attempt").replace_strict(hi, default=None, return_dtype=UTC_DT).alias("_e"))
    ev = ev.with_columns(
        pl.when(pl.col("ts_quality") == "derived").then(pl.col("ts").clip(pl.col("_s"), pl.col("_e")))
        .otherwise(pl.col("ts")).alias("ts")).drop("_s", "_e", "_next_ts", "_prev_ts")
    rows = _attempt_rows(spans, ev, tables)
    return ev, rows.with_columns(pl.Series("witnesses", [wit.get(i) for i in rows["index"].to_list()],
                                           dtype=pl.Utf8))


def sched_window(sched: pl.DataFrame | None) -> tuple | None:
    """(first start, last end or None) of the scheduler's job rows (its steps when there are no
    job rows): no attempt of this job runs outside it."""
    if sched is None or sched.is_empty():
        return None
    job = sched.filter((pl.col("step_id").is_null() | (pl.col("step_id") == "")) & pl.col("start").is_not_null())
    if job.is_empty():
        job = sched.filter(pl.col("step_id").str.contains(ascii_classes(r"^\d+$")).fill_null(False) & pl.col("start").is_not_null())
    if job.is_empty():
        return None
    end = job["end"]
    return job["start"].min(), (None if end.null_count() else end.max())


def sched_launches(sched: pl.DataFrame | None) -> list:
    """Start times of the scheduler runs that follow an earlier one: requeued runs of the job
    (one job row each) and job steps that start after every earlier step ended (a batch script
    that retries srun). Steps that overlap an earlier one (helpers beside the trainer) are not
    launches."""
    if sched is None or sched.is_empty():
        return []
    rows = sched.filter(pl.col("step_id").str.contains(ascii_classes(r"^\d+$")).fill_null(False) & pl.col("start").is_not_null())
    if rows.height < 2:
        rows = sched.filter((pl.col("step_id").is_null() | (pl.col("step_id") == "")) & pl.col("start").is_not_null())
    out = []
    last_end = None
    for r in rows.sort("start").iter_rows(named=True):
        if last_end is not None and r["start"] >= last_end - SCHED_OVERLAP:
            if not out or r["start"] - out[-1] > SCHED_OVERLAP:
                out.append(r["start"])
        e = r["end"] if r["end"] is not None else r["start"]
        last_end = e if last_end is None else max(last_end, e)
    return out


def boundaries(proc: pl.DataFrame, steps: pl.DataFrame | None, sched: pl.DataFrame | None) -> list[tuple]:
    """Launch times of the attempts after the first, each with the witnesses that place it
    (comma-separated: sacct, launcher, elastic_restart, step_reset, silence). Boundaries sit at
    the launch of the new attempt: a scheduler run's start, the launcher banner, else the first
    process line after the previous attempt's last error (or after the longest silence)."""
    proc = proc.sort("ts", "file_id", "line_no")
    if proc.is_empty():
        return []
    t_first = proc["ts"].min()
    cands: list[tuple] = [(t, SCHEDULER) for t in sched_launches(sched)]
    launches = proc.filter(pl.col("kind") == "launch")["ts"]
    if launches.len():
        lt = launches.sort().to_list()
        groups = [lt[0]]
        for a, b in zip(lt, lt[1:], strict=False):
            if b - a > LAUNCH_CLUSTER:
                groups.append(b)
        cands += [(t, "launcher") for t in groups]
    cands += [(t, "elastic_restart") for t in proc.filter(pl.col("kind") == "restart")["ts"].to_list()]
    times = proc["ts"]
    sev = proc["severity"].to_list()
    tl = times.to_list()
    if steps is not None and not steps.is_empty():
        s = steps.filter(pl.col("ts").is_not_null()).sort("ts")
        if s.height > 1:
            prev = s["ts"].shift(1)
            # a counter within the epoch goes back at each new epoch: no restart
            wrap = (pl.col("epoch") > pl.col("epoch").shift(1)).fill_null(False)
            back = s.with_columns(prev.alias("_prev")).filter((pl.col("step") < pl.col("step").shift(1)) & ~wrap)
            for r in back.iter_rows(named=True):
                cands.append((_launch_after(tl, sev, r["_prev"], r["ts"]), "step_reset"))
    if len(tl) > 1:
        gaps = proc.select(pl.col("ts"), pl.col("ts").diff().alias("gap"))
        long = gaps.filter(pl.col("gap") > LONG_SILENCE)
        step_ts = proc.filter(pl.col("kind") == "step")["ts"]
        for t in long["ts"].to_list():
            if step_ts.len() and (step_ts >= t).any():
                cands.append((t, "silence"))
    cands = sorted((t, w) for t, w in cands if t is not None and t > t_first)
    out: list[list] = []
    for t, w in cands:
        if out and t - out[-1][0] <= MERGE_WINDOW and not _progress_between(proc, out[-1][0], t):
            if w not in out[-1][1]:
                out[-1][1].append(w)
            continue
        out.append([t, [w]])
    # a silence before a boundary corroborates it
    res = []
    for t, ws in out:
        before = times.filter(times < t)
        if "silence" not in ws and before.len() and t - before.max() >= SILENCE:
            ws.append("silence")
        res.append((t, ",".join(sorted(set(ws)))))
    return res


def _launch_after(tl: list, sev: list, lo, hi):  # noqa: ANN001, ANN202
    """The first process line of a new attempt whose step counter went back between the step
    lines at `lo` and `hi`: the first line after the previous attempt's last error line in that
    interval; with no error line, the first after the longest silence."""
    idx = [i for i, t in enumerate(tl) if lo < t <= hi]
    if not idx:
        return hi
    errs = [i for i in idx if sev[i] in ("error", "critical")]
    if errs and errs[-1] != idx[-1]:
        return tl[errs[-1] + 1]
    best, at = None, idx[0]
    for a, b in zip([idx[0] - 1, *idx], idx, strict=False):
        if a < 0:
            continue
        g = tl[b] - tl[a]
        if best is None or g > best:
            best, at = g, b
    return tl[at]


def _progress_between(proc: pl.DataFrame, a, b) -> bool:  # noqa: ANN001
    return proc.filter((pl.col("kind") == "step") & (pl.col("ts") > a) & (pl.col("ts") < b)).height > 0


def _sched_starts(spans: pl.DataFrame, sched: pl.DataFrame | None) -> pl.DataFrame:
    """An attempt starts no later than the scheduler step that ran it: Slurm's step start is
    the launch, before the launcher prints anything with a time stamp (older torchrun banners
    carry none). Only steps that overlap the attempt and start after the previous attempt's end
    count."""
    if sched is None or sched.is_empty() or spans.is_empty():
        return spans
    steps = sched.filter(pl.col("step_id").str.contains(ascii_classes(r"^\d+$")).fill_null(False) & pl.col("start").is_not_null())
    if steps.is_empty():
        steps = sched.filter((pl.col("step_id").is_null() | (pl.col("step_id") == "")) & pl.col("start").is_not_null())
    if steps.is_empty():
        return spans
    spans = spans.sort("start")
    starts = spans["start"].to_list()
    ends = spans["end"].to_list()
    new = []
    for k, (s0, e0) in enumerate(zip(starts, ends, strict=True)):
        prev_end = ends[k - 1] if k else None
        cand = steps.filter((pl.col("start") <= e0) & (pl.col("end").is_null() | (pl.col("end") >= s0)))
        if prev_end is not None:
            cand = cand.filter(pl.col("start") >= prev_end)
        t = cand["start"].min() if not cand.is_empty() else None
        new.append(min(s0, t) if t is not None else s0)
    return spans.with_columns(pl.Series("start", new, dtype=UTC_DT))


def _attempt_rows(spans: pl.DataFrame, ev: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    steps = tables.get("train_steps")
    ckpts = tables.get("checkpoints")
    rows = []
    step_ev = ev.filter(pl.col("kind") == "step").select("file_id", "line_no", "attempt")
    load_ev = ev.filter(pl.col("kind") == "checkpoint_load").select("file_id", "line_no", "attempt")
    save_ev = ev.filter(pl.col("kind").is_in(SAVE_KINDS)).select("file_id", "line_no", "attempt")
    for r in spans.iter_rows(named=True):
        i = r["index"]
        first_step = last_step = resumed = None
        fss = lp = None
        if steps is not None and not steps.is_empty():
            s = steps.join(step_ev.filter(pl.col("attempt") == i), on=["file_id", "line_no"]).filter(
                pl.col("step").is_not_null()).sort("ts", "line_no")
            if not s.is_empty():
                first_step, last_step = int(s["step"][0]), int(s["step"][-1])
                lp = s["ts"][-1]
                if ckpts is not None and not ckpts.is_empty():
                    ld = ckpts.join(load_ev.filter(pl.col("attempt") == i), on=["file_id", "line_no"])
                    ld = ld.filter(pl.col("step").is_not_null())
                    if not ld.is_empty():
                        resumed = int(ld["step"][-1])
                base = resumed
                if base is None:
                    # a fresh start: the first attempt, or a later one whose first logged step
                    # comes within two logging intervals of step 0 (nothing was loaded)
                    inc = s["step"].diff().drop_nulls()
                    inc = int(inc.median()) if inc.len() else first_step
                    if i == 0 or first_step <= 2 * max(inc, 1):
                        base = 0
                per = _step_time(s)
                if base is not None and per is not None and s["ts"][0] is not None:
                    fss = s["ts"][0] - timedelta(seconds=per * max(first_step - base, 0))
                    fss = max(fss, r["start"])
                elif s["ts"].drop_nulls().is_empty():
                    # step lines without stamps (HF Trainer dicts): training began at the
                    # framework's start-of-training line when there is one
                    st = ev.filter((pl.col("attempt") == i) & (pl.col("kind") == "train_start")
                                   & pl.col("ts").is_not_null())["ts"]
                    fss = st.min() if st.len() else None
        if first_step is None and ckpts is not None and not ckpts.is_empty():
            # no step line, but saves that name the step they save (Lightning's `Epoch 0, global
            # step 2048: ... saving model to`): the attempt reached those steps
            sv = saves_of(ckpts, save_ev, i)
            if not sv.is_empty():
                first_step, last_step = int(sv["step"][0]), int(sv["step"][-1])
        rows.append({"index": i, "start": r["start"], "end": r["end"], "first_step": first_step,
                     "last_step": last_step, "resumed_from": resumed, "end_reason": None,
                     "first_step_start": fss, "last_progress": lp, "witnesses": None})
    return pl.DataFrame(rows, schema=ATTEMPT_SCHEMA)


def saves_of(ckpts: pl.DataFrame, save_ev: pl.DataFrame, attempt: int) -> pl.DataFrame:
    """The checkpoint save rows of `attempt` that name a step, in time then line order (`save_ev`:
    file_id, line_no, attempt of the save events)."""
    return ckpts.join(save_ev.filter(pl.col("attempt") == attempt), on=["file_id", "line_no"]).filter(
        pl.col("step").is_not_null() & pl.col("event").is_in(["save_start", "save_end"])).sort("ts", "line_no")


SAVE_KINDS = ("checkpoint_save_start", "checkpoint_save_end")
START_KINDS = ("checkpoint_load", "train_start", "nccl_init", "nccl_version", "launch")  # open an attempt
# Typed tables that take the derived times. None by default: HF loss dicts interpolated between
# sparse stamps (save lines, a watchdog line 10 minutes after the fault) made false slow episodes
# and a wrong last step; steps without stamps keep the framework's start-of-training rule.
DERIVED_TABLES: tuple[str, ...] = ()


def derive_times(events: pl.DataFrame, tables: dict[str, pl.DataFrame], files: pl.DataFrame | None = None,
                 table_names: tuple[str, ...] = DERIVED_TABLES) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
    """Times for unstamped lines (checkpoint loads, HF Trainer loss dicts, tracebacks): between
    the stamped events around them in the same file, in proportion to their line distance
    (`ts_quality = derived`); after the last stamped event, up to the file's last stamped line.
    Lines of an uptime-stamped log with no boot time (`relative`) stay without a time. The typed
    tables named in `table_names` get the same times for the same lines. `_next_ts` (the next stamp in the file) says
    which attempt a line that opens one belongs to."""
    if events.is_empty():
        return events.with_columns(pl.lit(None, dtype=UTC_DT).alias("_next_ts")), tables
    # a time the parsers carried forward from the line above (`derived`, not a kernel uptime
    # conversion) is replaced by the bracketed estimate
    carried = (pl.col("ts_quality") == "derived") & (pl.col("source") != UPTIME_CLOCK)
    e = events.with_row_index("_i").with_columns(
        pl.when(carried).then(None).otherwise(pl.col("ts")).alias("ts"),
        pl.when(carried).then(pl.lit("missing")).otherwise(pl.col("ts_quality")).alias("ts_quality"),
    ).sort("file_id", "line_no", "_i")
    us = pl.col("ts").dt.epoch("us")
    stamped = pl.col("ts").is_not_null()
    e = e.with_columns(
        pl.when(stamped).then(us).otherwise(None).forward_fill().over("file_id").alias("_pt"),
        pl.when(stamped).then(pl.col("line_no")).otherwise(None).forward_fill().over("file_id").alias("_pl"),
        pl.when(stamped).then(us).otherwise(None).backward_fill().over("file_id").alias("_nt"),
        pl.when(stamped).then(pl.col("line_no")).otherwise(None).backward_fill().over("file_id").alias("_nl"),
    )
    if files is not None and not files.is_empty():
        f = files.select("file_id", pl.col("last_ts").dt.epoch("us").alias("_ft"),
                         (pl.col("lines") + 1).alias("_fl"))
        e = e.join(f, on="file_id", how="left").with_columns(
            pl.when(pl.col("_nt").is_null() & (pl.col("_ft") > pl.col("_pt"))).then(pl.col("_ft"))
            .otherwise(pl.col("_nt")).alias("_nt"),
            pl.when(pl.col("_nt").is_null() & (pl.col("_ft") > pl.col("_pt"))).then(pl.col("_fl"))
            .otherwise(pl.col("_nl")).alias("_nl")).drop("_ft", "_fl")
    frac = ((pl.col("line_no") - pl.col("_pl")) / (pl.col("_nl") - pl.col("_pl"))).fill_nan(0.0)
    guess = pl.when(pl.col("_nt").is_not_null() & (pl.col("_nl") > pl.col("_pl"))).then(
        pl.col("_pt") + (frac.clip(0.0, 1.0) * (pl.col("_nt") - pl.col("_pt"))).cast(pl.Int64)
    ).otherwise(pl.coalesce("_pt", "_nt"))
    todo = pl.col("ts").is_null() & (pl.col("ts_quality").fill_null("missing") != "relative")
    e = e.with_columns(
        pl.when(todo).then(pl.from_epoch(guess, time_unit="us").dt.replace_time_zone("UTC"))
        .otherwise(pl.col("ts")).cast(UTC_DT).alias("ts"),
        pl.when(todo & guess.is_not_null()).then(pl.lit("derived")).otherwise(pl.col("ts_quality")).alias("ts_quality"),
        pl.from_epoch(pl.col("_nt"), time_unit="us").dt.replace_time_zone("UTC").cast(UTC_DT).alias("_next_ts"),
        pl.from_epoch(pl.col("_pt"), time_unit="us").dt.replace_time_zone("UTC").cast(UTC_DT).alias("_prev_ts"),
    ).sort("_i").drop("_i", "_pt", "_pl", "_nt", "_nl")
    derived = e.filter(pl.col("ts_quality") == "derived").select("file_id", "line_no", pl.col("ts").alias("_d")) \
        .unique(["file_id", "line_no"], keep="first")
    out = dict(tables)
    for name in table_names:
        t = tables.get(name)
        if t is None or isinstance(t, pl.LazyFrame) or t.is_empty() or derived.is_empty():
            continue
        out[name] = t.join(derived, on=["file_id", "line_no"], how="left").with_columns(
            pl.coalesce("ts", "_d").alias("ts")).drop("_d")
    return e, out

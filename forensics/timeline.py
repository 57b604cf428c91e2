"""Timeline: the rank <-> host <-> GPU map, and the job's attempts.

Attempts come from, in order of trust: per-attempt folders or files (`attempt-1/`), training
step counters going back, torchelastic restarts. Events without an attempt of their own (kernel
logs, DCGM, scheduler records) are placed in the attempt whose time span holds them.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from parsers.records import UTC_DT

PROCESS_SOURCES = ("nccl", "pytorch", "elastic", "steps", "slurm")
POST_SLACK = timedelta(minutes=5)
PRE_SLACK = timedelta(minutes=35)

RANK_MAP_SCHEMA = {"rank": pl.Int64, "host": pl.Utf8, "local_rank": pl.Int64, "gpu": pl.Int64,
                   "pci_bus_id": pl.Utf8, "source": pl.Utf8}

ATTEMPT_SCHEMA = {
    "index": pl.Int32, "start": UTC_DT, "end": UTC_DT, "first_step": pl.Int64, "last_step": pl.Int64,
    "resumed_from": pl.Int64, "end_reason": pl.Utf8, "first_step_start": UTC_DT, "last_progress": UTC_DT,
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
                pl.coalesce("nvml_dev", "cuda_dev").alias("gpu"), "pci_bus_id", pl.lit("nccl").alias("source")))
    exits = tables.get("exits")
    if exits is not None and not exits.is_empty():
        parts.append(exits.filter(pl.col("rank").is_not_null()).select(
            "rank", "host", "local_rank", pl.lit(None, dtype=pl.Int64).alias("gpu"),
            pl.lit(None, dtype=pl.Utf8).alias("pci_bus_id"), pl.lit("elastic").alias("source")))
    if not events.is_empty():
        parts.append(events.filter(pl.col("rank").is_not_null() & pl.col("host").is_not_null()).select(
            "rank", "host", "local_rank", pl.lit(None, dtype=pl.Int64).alias("gpu"),
            pl.lit(None, dtype=pl.Utf8).alias("pci_bus_id"), pl.lit("logs").alias("source")).unique())
    if not parts:
        return pl.DataFrame(schema=RANK_MAP_SCHEMA)
    allp = pl.concat([p.select([pl.col(k).cast(v) for k, v in RANK_MAP_SCHEMA.items()]) for p in parts])
    prio = pl.col("source").replace_strict({"nccl": 0, "elastic": 1, "logs": 2}, return_dtype=pl.Int64)
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
                    file_spans: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (events with an `attempt` column, attempts frame). `file_spans` (file_id,
    first_ts, last_ts) of process logs widen an attempt to the first and last stamped line of
    its files (a launcher banner is the attempt's first line but no event)."""
    ev = events.with_columns(
        pl.col("file_id").replace_strict(file_attempt, default=None, return_dtype=pl.Int32).alias("attempt"))
    steps = tables.get("train_steps", pl.DataFrame(schema={"file_id": pl.Int32, "ts": UTC_DT, "step": pl.Int64}))
    boundaries: list = []
    if not file_attempt:
        # No attempt folders: a new attempt starts where the step counter goes back, or where
        # torchelastic restarts the worker group.
        s = steps.filter(pl.col("ts").is_not_null()).sort("ts")
        if s.height > 1:
            back = s.filter(pl.col("step") < pl.col("step").shift(1))
            boundaries += back["ts"].to_list()
        restarts = ev.filter((pl.col("kind") == "restart") & pl.col("ts").is_not_null())["ts"].to_list()
        boundaries += restarts
        boundaries = sorted(set(boundaries))
        # attempt = number of boundaries at or before the event's time
        cuts = pl.Series("b", boundaries, dtype=UTC_DT)
        is_proc = pl.col("source").is_in(PROCESS_SOURCES) & pl.col("ts").is_not_null()
        ev = ev.with_columns(
            pl.when(is_proc).then(cuts.search_sorted(ev["ts"], side="right"))
            .otherwise(None).cast(pl.Int32).alias("attempt"))
    spans = (ev.filter(pl.col("attempt").is_not_null() & pl.col("ts").is_not_null()
                       & pl.col("source").is_in(PROCESS_SOURCES))
             .group_by("attempt").agg(pl.col("ts").min().alias("start"), pl.col("ts").max().alias("end"))
             .sort("attempt"))
    if file_spans is not None and not file_spans.is_empty() and file_attempt and not spans.is_empty():
        fs = file_spans.with_columns(
            pl.col("file_id").replace_strict(file_attempt, default=None, return_dtype=pl.Int32).alias("attempt")
        ).filter(pl.col("attempt").is_not_null()).group_by("attempt").agg(
            pl.col("first_ts").min().alias("f0"), pl.col("last_ts").max().alias("f1"))
        spans = spans.join(fs, on="attempt", how="left").with_columns(
            pl.min_horizontal("start", "f0").alias("start"), pl.max_horizontal("end", "f1").alias("end")
        ).drop("f0", "f1")
    if spans.is_empty():
        # Only node-level evidence (dmesg, DCGM, scheduler): one attempt spanning it all.
        t = ev.filter(pl.col("ts").is_not_null())
        if t.is_empty():
            # No time stamps at all (a pasted excerpt): everything is one attempt of unknown span.
            if ev.is_empty():
                return ev.with_columns(pl.lit(None, dtype=pl.Int32).alias("attempt")), pl.DataFrame(schema=ATTEMPT_SCHEMA)
            one = pl.DataFrame([{"index": 0, "start": None, "end": None, "first_step": None, "last_step": None,
                                 "resumed_from": None, "end_reason": None, "first_step_start": None,
                                 "last_progress": None}], schema=ATTEMPT_SCHEMA)
            return ev.with_columns(pl.lit(0, dtype=pl.Int32).alias("attempt")), one
        spans = pl.DataFrame({"attempt": [0], "start": [t["ts"].min()], "end": [t["ts"].max()]},
                             schema={"attempt": pl.Int32, "start": UTC_DT, "end": UTC_DT})
        ev = ev.with_columns(pl.lit(0, dtype=pl.Int32).alias("attempt"))
    spans = _sched_starts(spans, tables.get("sched_records"))
    # renumber 0..n-1 in time order
    spans = spans.sort("start").with_row_index("index").with_columns(pl.col("index").cast(pl.Int32))
    remap = dict(zip(spans["attempt"].to_list(), spans["index"].to_list(), strict=True))
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
    return ev, _attempt_rows(spans, ev, tables)


def _sched_starts(spans: pl.DataFrame, sched: pl.DataFrame | None) -> pl.DataFrame:
    """An attempt starts no later than the scheduler step that ran it: Slurm's step start is
    the launch, before the launcher prints anything with a time stamp (older torchrun banners
    carry none). Only steps that overlap the attempt and start after the previous attempt's end
    count."""
    if sched is None or sched.is_empty() or spans.is_empty():
        return spans
    steps = sched.filter(pl.col("step_id").str.contains(r"^\d+$").fill_null(False) & pl.col("start").is_not_null())
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
        rows.append({"index": i, "start": r["start"], "end": r["end"], "first_step": first_step,
                     "last_step": last_step, "resumed_from": resumed, "end_reason": None,
                     "first_step_start": fss, "last_progress": lp})
    return pl.DataFrame(rows, schema=ATTEMPT_SCHEMA)

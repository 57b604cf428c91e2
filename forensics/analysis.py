"""The Python API: `analyze(path)` runs every stage and returns an `Analysis` whose frames,
report and DuckDB store a notebook can use; the CLI is a thin layer over it."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from forensics import advice, clock, explain, host_names, interrupts
from forensics import downtime as dt
from forensics.attribution import Interruption, attribute
from forensics.config import load_job_config
from forensics.discovery import JobDirError, Limits, discover, is_archive
from forensics.error_lines import error_line_events
from forensics.ingest import Ingested, ingest
from forensics.line_classifier import classify_lines
from forensics.outputs import EarlySinks, write_outputs
from forensics.precedence import load_precedence
from forensics.report import build_report
from forensics.restatements import demote_restatements
from forensics.signatures import load_catalog, match
from forensics.stragglers import (
    data_bound,
    dcgm_stragglers,
    pcie_stragglers,
    reported_stragglers,
    slow_episodes,
    spike_pattern,
)
from forensics.taxonomy import AUTO_RECOVERABLE, info
from forensics.timeline import assign_attempts, derive_times, rank_map
from parsers import source_names
from parsers.ascii_regex import ascii_classes
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, UTC_DT

if TYPE_CHECKING:  # DuckDB and pyarrow load only when the store is written or read, after the verdict
    from forensics.store import Store

__all__ = ["Analysis", "analyze", "JobDirError", "OutputDirError"]


NODE_PARSERS = source_names(not_scope="process")  # files of node/job-level records: they never make an attempt


class OutputDirError(Exception):
    """The output directory cannot be used (message is for the user)."""


@dataclass
class Analysis:
    job_dir: Path
    out_dir: Path
    report: dict
    store_path: Path

    def _store(self) -> Store:
        # lazy: DuckDB and pyarrow load only when the store is read
        from forensics.store import Store

        return Store(self.store_path, create=False, read_only=True)

    def sql(self, query: str) -> pl.DataFrame:
        st = self._store()
        try:
            return st.sql(query)
        finally:
            st.close()

    def _table(self, name: str) -> pl.DataFrame:
        return self.sql(f'SELECT * FROM "{name}"')

    @property
    def events(self) -> pl.DataFrame:
        return self.sql("SELECT * FROM events ORDER BY event_id")

    @property
    def sources(self) -> pl.DataFrame:
        return self.sql("SELECT * FROM files ORDER BY file_id")

    @property
    def interruptions(self) -> pl.DataFrame:
        return self.sql("SELECT * FROM interruptions ORDER BY time NULLS LAST, id")

    @property
    def steps(self) -> pl.DataFrame:
        return self.sql("SELECT * FROM train_steps ORDER BY ts NULLS LAST, file_id, line_no")

    @property
    def stragglers(self) -> pl.DataFrame:
        return self._table("stragglers")

    @property
    def attempts(self) -> pl.DataFrame:
        return self.sql('SELECT * FROM attempts ORDER BY "index"')

    @property
    def downtime(self) -> pl.DataFrame:
        return self._table("downtime")

    @property
    def verdict(self) -> dict:
        return self.report["verdict"]

    @classmethod
    def open(cls, out_dir: Path | str) -> Analysis:
        out = Path(out_dir)
        rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
        return cls(Path(rep["job"]["dir"]), out, rep, out / "forensics.duckdb")

    # plots (matplotlib Figures; forensics.plots has the functions behind them)

    def plot_timeline(self):
        """Attempts as bars over time coloured by downtime bucket, interruptions marked."""
        # lazy: matplotlib loads only when a plot is drawn
        from forensics import plots

        return plots.timeline(self.report, self.attempts, self._table("checkpoints"))

    def plot_step_time(self):
        """Step time per logged step with checkpoint saves, slow episodes and restarts."""
        # lazy: matplotlib loads only when a plot is drawn
        from forensics import plots

        return plots.step_time(self.steps, self.report, self._table("checkpoints"))

    def plot_straggler_heatmap(self):
        """SM clock of every GPU over time (DCGM), stragglers outlined."""
        # lazy: matplotlib loads only when a plot is drawn
        from forensics import plots

        return plots.straggler_heatmap(self.sql(f"SELECT * FROM dcgm_samples WHERE field = '{plots.SM_CLOCK}'"),
                                       self.report)

    def plot_downtime(self):
        """Seconds per downtime bucket, goodput and GPU-hours lost."""
        # lazy: matplotlib loads only when a plot is drawn
        from forensics import plots

        return plots.downtime_breakdown(self.report)


def default_out(job_dir: Path, name: str) -> Path:
    return Path("forensics-out") / name


def resolve_job_name(root: Path, cfg_name: str | None) -> str:
    if cfg_name:
        return cfg_name
    name = root.resolve().name
    for suf in (".tar.gz", ".tgz", ".tar", ".gz"):
        if name.endswith(suf):
            name = name[: -len(suf)]
    return name or "job"


OUTPUT_MARK = "report.json"  # every output folder holds it (outputs.write_outputs swaps in whole folders)


def _check_out(root: Path, out: Path) -> None:
    """The output folder is replaced as a whole when the run ends (forensics/outputs.py): refuse one
    inside the job directory, one that holds the job (directory or archive), and an existing folder
    that is neither empty nor an earlier output (no report.json): replacing it would delete it."""
    r, o = root.resolve(), out.resolve()
    if root.is_dir() and (o == r or r in o.parents):
        raise OutputDirError(f"refusing to write inside the job directory (it is evidence): {out}")
    if o in r.parents:
        raise OutputDirError(f"refusing to write to {out}: it holds the job {root} (evidence), and the output "
                             "folder is replaced when the run ends; give a folder outside it")
    if o.exists() and not o.is_dir():
        raise OutputDirError(f"output path exists and is not a directory: {out}")
    if o.is_dir() and not (o / OUTPUT_MARK).is_file() and any(o.iterdir()):
        raise OutputDirError(f"refusing to replace {out}: it is not empty and is no forensics output (it has no "
                             f"{OUTPUT_MARK}); give a new or empty folder, or an earlier output folder")


def analyze(path: Path | str, out: Path | str | None = None,
            progress: Callable[[int, int], None] | None = None, limits: Limits | None = None,
            html: bool = True, on_report: Callable[[dict, Path], None] | None = None,
            stage: Callable[[str], None] | None = None) -> Analysis:
    """Analyze the job directory (or .tar/.tar.gz) at `path`, write report.json, report.md,
    forensics.duckdb and (unless `html=False`) report.html with plots/ under `out` (default
    ./forensics-out/<job-name>/), return the Analysis. `progress(done, total)` follows the reading
    of the files; `stage(name)` is told when each later step starts (for a status line).
    `on_report(report, out_dir)` is called with the finished report before any output is written
    (the CLI prints the verdict there): until then neither matplotlib nor DuckDB has been imported."""
    root = Path(path)
    if not root.exists():
        raise JobDirError(f"no such file or directory: {root}")
    if not (root.is_dir() or (root.is_file() and is_archive(root))):
        raise JobDirError(f"not a directory or archive: {root}")
    if root.is_dir():  # an archive's job.toml is read from its discovery (one unpacking, not two)
        cfg = load_job_config(root)
        name = resolve_job_name(root, cfg.name)
        out_dir = Path(out) if out is not None else default_out(root, name)
        _check_out(root, out_dir)
        disc = discover(root, limits)
    else:
        if out is not None:
            _check_out(root, Path(out))
        disc = discover(root, limits)
        try:
            cfg = load_job_config(root, disc)
            name = resolve_job_name(root, cfg.name)
            out_dir = Path(out) if out is not None else default_out(root, name)
            _check_out(root, out_dir)
        except BaseException:
            disc.close()
            raise
    # an interrupt (SIGINT/SIGTERM: the CLI raises in its handler) that came while the spill folder was
    # being made, after the folder exists but before its name is kept, would leave it behind: held
    # until `spill` names it, then raised inside the `try`, whose `finally` removes it
    spill = None
    try:
        with interrupts.held():
            spill = tempfile.TemporaryDirectory(prefix="forensics-spill-")  # never inside the job dir
        return _analyze_discovered(root, cfg, name, out_dir, disc, limits, progress, html, Path(spill.name),
                                   on_report, stage or _quiet)
    finally:
        if spill is not None:
            spill.cleanup()


def _quiet(_: str) -> None:
    return None


def _analyze_discovered(root: Path, cfg, name: str, out_dir: Path, disc, limits: Limits | None,  # noqa: ANN001
                        progress: Callable[[int, int], None] | None, html: bool, spill_dir: Path,
                        on_report: Callable[[dict, Path], None] | None = None,
                        stage: Callable[[str], None] = _quiet) -> Analysis:
    try:
        ing = ingest(disc, cfg, limits, progress=progress, spill_dir=spill_dir)
        ordered = sorted(disc.files, key=lambda s: s.rel_path)
        file_attempt_hint = {i: sf.attempt_hint for i, sf in enumerate(ordered) if sf.attempt_hint is not None}
        file_host = {i: cfg.host_aliases.get(sf.host_hint, sf.host_hint) for i, sf in enumerate(ordered)
                     if sf.host_hint is not None}
        file_rank = {i: sf.rank_hint for i, sf in enumerate(ordered) if sf.rank_hint is not None}
    finally:
        disc.close()
    with EarlySinks(spill_dir) as sinks:  # a large job's samples encoded beside attribution (outputs.EarlySinks)
        result = _analyze_ingested(ing, file_attempt_hint, root, name, file_host, file_rank, cfg.timezone, stage,
                                   on_tables=sinks.start)
        result["early_sinks"] = sinks.files
        if on_report is not None:
            on_report(result["report"], out_dir)
        write_outputs(out_dir, result, html, stage)
    return Analysis(root, out_dir, result["report"], out_dir / "forensics.duckdb")


def _frames(ing: Ingested) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, pl.DataFrame], pl.DataFrame]:
    file_rows, ev_parts, unparsed_parts = [], [], []
    tparts: dict[str, list[tuple[int, pl.DataFrame | pl.LazyFrame]]] = {}
    for fid, f in enumerate(ing.files):
        file_rows.append({"file_id": fid, "path": f.rel_path, "size": f.size, "digest": f.digest, "digest_algo": f.digest_algo,
                          "parser": f.parser, "parsers": f.parsers, "lines": f.lines, "parsed": f.parsed,
                          "ignored": f.ignored, "unparsed": f.unparsed, "events": f.events.height,
                          "warnings": f.warnings, "first_ts": f.first_ts, "last_ts": f.last_ts})
        if not f.events.is_empty():
            ev_parts.append((fid, f.events))
        for t, df in f.tables.items():
            tparts.setdefault(t, []).append((fid, df))
        for t, path in f.spilled.items():  # on disk (ingest.SPILL_ROWS): read lazily, file order kept
            tparts.setdefault(t, []).append((fid, pl.scan_parquet(path)))
        if not f.unparsed_errors.is_empty():
            unparsed_parts.append((fid, f.unparsed_errors))
    files = pl.DataFrame(file_rows, schema={
        "file_id": pl.Int32, "path": pl.Utf8, "size": pl.Int64, "digest": pl.Utf8, "digest_algo": pl.Utf8, "parser": pl.Utf8,
        "parsers": pl.Utf8, "lines": pl.Int64, "parsed": pl.Int64, "ignored": pl.Int64, "unparsed": pl.Int64,
        "events": pl.Int64, "warnings": pl.List(pl.Utf8), "first_ts": UTC_DT, "last_ts": UTC_DT})
    ev_schema = {**EVENT_SCHEMA, "file_id": pl.Int32, "path": pl.Utf8}
    if ev_parts:
        events = _concat(ev_parts)
        events = events.with_columns(files["path"].gather(events["file_id"]).alias("path"))
    else:
        events = pl.DataFrame(schema=ev_schema)
    events = events.sort("file_id", "line_no", maintain_order=True).with_row_index("event_id").with_columns(
        pl.col("event_id").cast(pl.Int64))
    tables = {t: _concat(p) for t, p in tparts.items()}
    for f in ing.files:  # memory: the concatenated tables replace the per-file parts
        f.tables = {}
    for t in TABLE_SCHEMAS:
        tables.setdefault(t, pl.DataFrame(schema={**TABLE_SCHEMAS[t], "file_id": pl.Int32}))
    unparsed = _concat(unparsed_parts) if unparsed_parts else pl.DataFrame(
        schema={"line_no": pl.Int64, "text": pl.Utf8, "file_id": pl.Int32})
    return files, events, tables, unparsed  # type: ignore[return-value]


def _with_error_lines(events: pl.DataFrame, unparsed: pl.DataFrame, files: pl.DataFrame,
                      file_host: dict[int, str], file_rank: dict[int, int], ref_year: int | None,
                      tz: ZoneInfo | None) -> pl.DataFrame:
    """The parsers' events plus an `error_line` event per kept unparsed error-like line
    (forensics/error_lines.py), renumbered in (file, line) order."""
    paths = dict(zip(files["file_id"].to_list(), files["path"].to_list(), strict=True))
    extra = error_line_events(unparsed, paths, file_host, file_rank, events, ref_year, tz or ZoneInfo("UTC"))
    if extra.is_empty():
        return events
    both = pl.concat([events.drop("event_id"), extra.select(events.drop("event_id").columns)], how="vertical_relaxed")
    return both.sort("file_id", "line_no", maintain_order=True).with_row_index("event_id").with_columns(
        pl.col("event_id").cast(pl.Int64))


def _concat(parts: list[tuple[int, pl.DataFrame | pl.LazyFrame]]) -> pl.DataFrame | pl.LazyFrame:
    """One frame of per-file parts (file_id, frame), the file_id column added; a LazyFrame when
    any part waits on disk."""
    if all(isinstance(p, pl.DataFrame) for _, p in parts):
        df = pl.concat([p for _, p in parts], rechunk=True)  # one chunk: thousands of tiny ones are slow
        ids = np.repeat(np.array([fid for fid, _ in parts], dtype=np.int32), [p.height for _, p in parts])
        return df.with_columns(pl.Series("file_id", ids, dtype=pl.Int32))
    return pl.concat([p.lazy().with_columns(pl.lit(fid, dtype=pl.Int32).alias("file_id")) for fid, p in parts],
                     how="vertical_relaxed")


def _fill_ranks(events: pl.DataFrame, rmap: pl.DataFrame) -> pl.DataFrame:
    """Events that know their host and local rank (error files, agent lines) get the global rank."""
    if rmap.is_empty() or events.is_empty():
        return events
    m = rmap.filter(pl.col("local_rank").is_not_null()).select(
        "host", "local_rank", pl.col("rank").alias("_grank")).unique(["host", "local_rank"], keep="first")
    return events.join(m, on=["host", "local_rank"], how="left").with_columns(
        pl.coalesce("rank", "_grank").alias("rank")).drop("_grank")


def _completed_attempts(events: pl.DataFrame, attempts: pl.DataFrame, tables: dict[str, pl.DataFrame],
                        hits: pl.DataFrame) -> set[int]:
    """Attempts that ended because training finished: an end-of-training line, or the planned
    number of steps reached, or the scheduler's COMPLETED for the job's last attempt; and no
    root or cascade signal in them."""
    done: set[int] = set()
    if attempts.is_empty():
        return done
    bad = hits.filter(pl.col("role").is_in(["root", "cascade"])).join(events.select("event_id", "attempt"), on="event_id")
    ends = set(events.filter(pl.col("kind") == "train_end")["attempt"].drop_nulls().to_list())
    # precedence.toml [after_completion]: no failure where the attempt's training is seen to end
    late = load_precedence().after_completion
    bad = bad.filter(~(pl.col("signature").is_in(list(late)) & pl.col("attempt").is_in(list(ends))))
    bad_attempts = set(bad["attempt"].drop_nulls().to_list())
    steps = tables.get("train_steps")
    total = None
    if steps is not None and not steps.is_empty() and steps["total_steps"].drop_nulls().len():
        total = int(steps["total_steps"].drop_nulls().max())
    sched = tables.get("sched_records")
    last = int(attempts["index"].max())
    sched_completed = False
    if sched is not None and not sched.is_empty():
        job_rows = sched.filter(pl.col("step_id").is_null() | (pl.col("step_id") == ""))
        rows = job_rows if not job_rows.is_empty() else sched
        sched_completed = rows.sort("end", nulls_last=True)["state"][-1] == "COMPLETED"
    for a in attempts.iter_rows(named=True):
        i = a["index"]
        if i in bad_attempts:
            continue
        reached = total is not None and a["last_step"] is not None and a["last_step"] >= total
        if i in ends or reached or (i == last and sched_completed):
            done.add(i)
    return done


def _analyze_ingested(ing: Ingested, file_attempt_hint: dict[int, int], root: Path, name: str,
                      file_host: dict[int, str] | None = None, file_rank: dict[int, int] | None = None,
                      tz: ZoneInfo | None = None, stage: Callable[[str], None] = _quiet,
                      on_tables: Callable[[dict[str, pl.DataFrame]], None] | None = None) -> dict:
    """Frames, clocks, attempts, attribution, stragglers, downtime and the report of what `ingest` read.
    `on_tables(tables)` is told once the tables have their final rows (nothing below changes them)."""
    stage("aligning clocks and attempts")
    files, events, tables, unparsed = _frames(ing)
    events = _with_error_lines(events, unparsed, files, file_host or {}, file_rank or {}, ing.ref_year, tz)
    names = host_names.path_hint_names(events, file_host or {})
    if names:  # one name per host: what a file's lines call it over the part its path names
        events = host_names.rename(events, names)
        tables = {t: host_names.rename(df, names) for t, df in tables.items()}
        file_host = {f: names.get(h, h) for f, h in (file_host or {}).items()}
        ing.warnings.extend(host_names.describe(names))
    pods, moved = host_names.pod_node_names(events, tables.get("pod_nodes"))
    if pods:  # a Kubernetes pod's name is read as the node it ran on
        events = host_names.rename(events, pods)
        tables = {t: host_names.rename(df, pods) for t, df in tables.items()}
        file_host = {f: pods.get(h, h) for f, h in (file_host or {}).items()}
    ing.warnings.extend(host_names.describe_pods(pods, moved))
    files = files.with_columns(pl.col("file_id").replace_strict(file_host or {}, default=None,
                                                                return_dtype=pl.Utf8).alias("host"))
    hints = sorted(set(file_attempt_hint.values()))
    file_attempt = {fid: hints.index(h) for fid, h in file_attempt_hint.items()}
    offsets = clock.estimate_offsets(tables, files, file_attempt)
    events, tables, files = clock.correct(events, tables, files, offsets)
    ing.warnings.extend(clock.describe(offsets))
    rmap = rank_map(events, tables)
    events = _fill_ranks(events, rmap)
    # process logs: everything with an attempt of its own but node-level telemetry and records
    node_level = pl.col("parser").is_in(NODE_PARSERS).fill_null(False)
    proc_files = files.filter(pl.col("file_id").is_in(list(file_attempt)) & pl.col("first_ts").is_not_null()
                              & ~node_level)
    node_files = set(files.filter(node_level)["file_id"].to_list())
    events, tables = derive_times(events, tables, files)
    events, attempts = assign_attempts(events, tables, file_attempt, proc_files.select("file_id", "first_ts", "last_ts"),
                                       node_files)
    if on_tables is not None:
        on_tables(tables)
    if attempts.height > dt.MANY_ATTEMPTS:
        ing.warnings.append(f"{attempts.height} attempts were reconstructed, more than {dt.MANY_ATTEMPTS}: the plots draw "
                            "them together; so many restarts are rare, check that each one is real (attempts table)")
    stage("matching signatures and attributing")
    catalog = load_catalog()
    hits = match(catalog, events)
    hits = pl.concat([hits, classify_lines(events, hits)]).sort("event_id", "signature")
    hits = demote_restatements(events, hits)
    completed = _completed_attempts(events, attempts, tables, hits)
    inters = attribute(events, hits, attempts, rmap, tables, completed)
    stage("stragglers, slow episodes and downtime")
    # steps with their attempt, for slow episodes
    steps = tables["train_steps"].join(events.filter(pl.col("kind") == "step").select("file_id", "line_no", "attempt"),
                                       on=["file_id", "line_no"], how="left")
    ck = tables["checkpoints"]
    starts = {(r["file_id"], r["step"]): r["ts"] for r in ck.filter(pl.col("event") == "save_start").iter_rows(named=True)}
    saves = [(starts.get((r["file_id"], r["step"]), r["ts"]), r["ts"]) for r in
             ck.filter((pl.col("event") == "save_end") & pl.col("ts").is_not_null()).iter_rows(named=True)]
    saves += [(t, t) for t in ck.filter((pl.col("event") == "save_start") & pl.col("ts").is_not_null())["ts"].to_list()]
    paths = dict(zip(files["file_id"].to_list(), files["path"].to_list(), strict=True))
    episodes, stragglers, slow_inters, slow_ids = _slowdowns(steps, tables.get("dcgm_samples"), rmap,
                                                             [(a or b, b) for a, b in saves], paths)
    seen_st = {(x.host, x.rank) for x in stragglers}
    stragglers += [x for x in reported_stragglers(events, paths) if (x.host, x.rank) not in seen_st]
    inters.extend(slow_inters)
    inters.sort(key=lambda x: (x.time is None, x.time or datetime.max.replace(tzinfo=UTC), x.id))
    by_attempt = {x.attempt: x for x in inters if x.kind != "slowdown"}
    attempts = attempts.with_columns(pl.Series("end_reason", [
        ("completed" if i in completed else (by_attempt[i].kind if i in by_attempt else "unknown"))
        for i in attempts["index"].to_list()], dtype=pl.Utf8))
    gpus = _gpu_count(rmap, tables, files, file_attempt)
    down, spans = _downtime(attempts, tables, events, by_attempt, episodes, slow_ids, gpus)
    attempts = _with_last_durable(attempts, spans)
    report = build_report(name, root, files, events, attempts, inters, stragglers, down, ing, rmap, unparsed, completed)
    _explain_attempts(report, attempts, events, tables, files, by_attempt, down)
    report["advice"] = {
        "checkpoint": advice.checkpoint_advice(
            down.wall_s, report["interruptions"], [b - a for sp in spans for a, b in sp.saves],
            [], gpus) if not spans else _ckpt_advice(down, report, spans, gpus),
        "collective_timeout": advice.timeout_advice(report["interruptions"], tables.get("collective_timeouts"), gpus),
    }
    return {"report": report, "files": files, "events": events, "tables": tables, "unparsed": unparsed,
            "rank_map": rmap, "attempts": attempts, "hits": hits, "interruptions": inters,
            "stragglers": stragglers, "downtime": down}


def _gpu_count(rmap: pl.DataFrame, tables: dict[str, pl.DataFrame], files: pl.DataFrame,
               file_attempt: dict[int, int]) -> int | None:
    """GPUs of the job: the most of the ranks seen, the size of the largest NCCL communicator,
    and one per-rank log per rank in the largest attempt."""
    cands = []
    if not rmap.is_empty():
        cands.append(int(rmap["rank"].n_unique()))
    comms = tables.get("nccl_comms")
    if comms is not None and not comms.is_empty() and comms["nranks"].drop_nulls().len():
        cands.append(int(comms["nranks"].max()))
    rank_files = files.filter(pl.col("path").str.contains(ascii_classes(r"(?i)(?:^|/)rank[-_]?\d+[^/]*$")))
    if file_attempt and not rank_files.is_empty():
        per = rank_files.with_columns(pl.col("file_id").replace_strict(file_attempt, default=None,
                                                                        return_dtype=pl.Int32).alias("a"))
        cands.append(int(per.group_by("a").len()["len"].max()))
    return max(cands) if cands else None


def _slowdowns(steps: pl.DataFrame, samples: pl.DataFrame | None, rmap: pl.DataFrame, saves: list[tuple],
               paths: dict[int, str] | None = None) -> tuple[list, list, list[Interruption], dict[int, str | None]]:
    """Slow episodes, stragglers and the slowdown interruptions they make. Returns the episodes
    whose excess counts in the slowdown bucket: sustained ones, and spikes when they recur
    (GC, data-loader stalls)."""
    found = slow_episodes(steps, saves)
    sustained = [e for e in found if not e.spike]
    spikes = [e for e in found if e.spike]
    pattern = spike_pattern(spikes)
    counted = sustained + (spikes if pattern else [])
    stragglers = dcgm_stragglers(samples, found)
    seen = {(x.host, x.gpu) for x in stragglers}
    stragglers += [x for x in pcie_stragglers(samples, found) if (x.host, x.gpu) not in seen]
    for x in stragglers:
        if x.host is not None and x.gpu is not None and not rmap.is_empty():
            m = rmap.filter((pl.col("host") == x.host) & (pl.coalesce("gpu", "local_rank") == x.gpu))
            if m.height:
                x.rank = int(m["rank"][0])
    inters: list[Interruption] = []
    slow_ids: dict[int, str | None] = {}

    def add(iid: str, attempt: int | None, time: datetime | None, cat: str, culprit, conf: float, summary: str) -> None:  # noqa: ANN001
        ci = info(cat)
        inters.append(Interruption(
            id=iid, attempt=attempt, time=time, kind="slowdown", category=cat, domain=ci.domain,
            action=ci.default_action, auto_recoverable=ci.default_action in AUTO_RECOVERABLE, recurring=False,
            culprit_host=culprit.host if culprit else None, culprit_rank=culprit.rank if culprit else None,
            culprit_gpu=culprit.gpu if culprit else None, culprit_pci_bus_id=culprit.pci_bus_id if culprit else None,
            confidence=conf, method="rules", summary=summary))
        slow_ids.setdefault(attempt if attempt is not None else 0, iid)

    for k, ep in enumerate(sustained):
        culprit = next((x for x in stragglers if x.start is not None and x.end is not None
                        and x.start <= ep.end and x.end >= ep.start), None)
        cat = "straggler_hardware" if culprit else "slowdown_transient"
        add(f"s{k}", ep.attempt, ep.start, cat, culprit, 0.8 if culprit else 0.5,
            f"Steps {ep.slowdown:.0%} slower for {ep.steps} steps"
            + (f"; straggler {culprit.host} GPU {culprit.gpu} ({culprit.cause}: {culprit.evidence})" if culprit
               else "; no single GPU deviates: a job-wide slowdown"))
    if pattern:
        first = min(spikes, key=lambda e: e.start)
        what = "at a regular period (garbage collection or other periodic work)" if pattern == "gc_or_periodic" \
            else "at irregular intervals (data loading or storage stalls)"
        add("w0", first.attempt, first.start, "slowdown_workload", None, 0.6,
            f"{len(spikes)} single-step spikes {what}, costing {sum(e.excess_s for e in spikes):.0f} s")
    bound = data_bound(steps)
    if bound is not None:
        add("d0", bound.attempt, bound.start, "slowdown_workload", None, 0.6,
            f"The loop waits on its data loader {bound.share:.0%} of each step (median over {bound.rows} logged "
            f"interval{'s' if bound.rows != 1 else ''}; {bound.data_s:.3g} s of {bound.step_s:.3g} s at the one cited): "
            "input-bound (data loading, decoding or storage), not a GPU fault")
        inters[-1].evidence = [{"event_id": None, "path": (paths or {}).get(bound.file_id), "line": bound.line_no,
                                "time": bound.start, "signature": None, "role": "root",
                                "text": "data-loader wait dominates the step time"}]
    if stragglers and not sustained:
        x = stragglers[0]
        add("s0", None, x.start, "straggler_hardware", x, 0.6,
            f"Straggler {x.host} GPU {x.gpu} ({x.cause}: {x.evidence}); no step-time series to size the slowdown")
    return counted, stragglers, inters, slow_ids


def _ckpt_advice(down: dt.Downtime, report: dict, spans: list[dt.AttemptSpan], gpus: int | None) -> dict:
    """Young/Daly advice; save-to-save intervals are measured inside attempts only."""
    durations = [b - a for sp in spans for a, b in sp.saves]
    best: list[float] = []
    for sp in spans:
        if len(sp.durable) > len(best):
            best = sorted(sp.durable)
    return advice.checkpoint_advice(down.wall_s, report["interruptions"], durations, best, gpus)


def _downtime(attempts: pl.DataFrame, tables: dict[str, pl.DataFrame], events: pl.DataFrame,
              by_attempt: dict, episodes: list, slow_ids: dict,
              gpus: int | None) -> tuple[dt.Downtime, list[dt.AttemptSpan]]:
    attempts = attempts.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
    if attempts.is_empty():
        return dt.account([], gpus), []
    epoch = attempts["start"].min()
    ck = tables["checkpoints"].join(events.select("file_id", "line_no", "attempt", pl.col("kind").alias("ekind")),
                                    on=["file_id", "line_no"], how="left")
    open_ends = _open_save_ends(ck, events)
    spans = []
    by = {k[0]: g for k, g in ck.partition_by("attempt", as_dict=True, maintain_order=True).items()}
    for a in attempts.iter_rows(named=True):
        i = a["index"]
        inter = by_attempt.get(i)
        c = by.get(i, ck.clear())
        saves, durable = dt.save_intervals(c, epoch, open_ends)
        spans.append(dt.AttemptSpan(
            index=i, start=dt.to_seconds(a["start"], epoch), end=dt.to_seconds(a["end"], epoch),
            first_step_start=dt.to_seconds(a["first_step_start"], epoch),
            last_progress=dt.to_seconds(a["last_progress"], epoch),
            failed=a["end_reason"] not in ("completed",) and inter is not None,
            fault=dt.to_seconds(inter.time, epoch) if inter is not None else None,
            saves=saves, durable=durable,
            slowdown_s=sum(e.excess_s for e in episodes if e.attempt == i),
            interruption_id=inter.id if inter is not None else None,
        ))
    return dt.account(spans, gpus, slow_ids), spans


def _open_save_ends(ck: pl.DataFrame, events: pl.DataFrame) -> dict:
    """(file_id, line_no) of each save start whose step has no end line in its file -> (time of
    the next timed line of the same file, whether that line is an error)."""
    starts = ck.filter(pl.col("event") == "save_start")
    ends = ck.filter(pl.col("event") == "save_end").select("file_id", "step").unique()
    opened = starts.join(ends, on=["file_id", "step"], how="anti").select("file_id", "line_no")
    if opened.is_empty():
        return {}
    ev = events.filter(pl.col("ts").is_not_null()).select("file_id", "line_no", "ts", "severity").sort(
        "file_id", "line_no").unique(["file_id", "line_no"], keep="first", maintain_order=True).with_columns(
        pl.col("ts").shift(-1).over("file_id").alias("_nts"),
        pl.col("severity").shift(-1).over("file_id").is_in(["error", "critical"]).alias("_bad"))
    got = opened.join(ev, on=["file_id", "line_no"], how="inner")
    return {(r["file_id"], r["line_no"]): (r["_nts"], bool(r["_bad"])) for r in got.iter_rows(named=True)}


def _with_last_durable(attempts: pl.DataFrame, spans: list[dt.AttemptSpan]) -> pl.DataFrame:
    """Each attempt's last durable checkpoint: the end of its last completed save."""
    timed = attempts.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())  # as _downtime
    epoch = timed["start"].min() if not timed.is_empty() else None
    last = {sp.index: max(sp.durable) for sp in spans if sp.durable}
    vals = [epoch + timedelta(seconds=last[i]) if epoch is not None and i in last else None
            for i in attempts["index"].to_list()]
    return attempts.with_columns(pl.Series("last_durable_checkpoint", vals, dtype=UTC_DT))


def _explain_attempts(report: dict, attempts: pl.DataFrame, events: pl.DataFrame, tables: dict[str, pl.DataFrame],
                      files: pl.DataFrame, by_attempt: dict, down: dt.Downtime) -> None:
    """Each attempt of report.json gets its share of every bucket (`downtime`), its labelled
    intervals (`intervals`) and the lines behind them (`evidence`): what explain-time reads."""
    timed = attempts.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())  # as _downtime
    epoch = timed["start"].min() if not timed.is_empty() else None
    shares, ivs = explain.attempt_downtime(down, epoch)
    evidence = explain.attempt_evidence(attempts, events, tables, files, by_attempt)
    timed_ids = set(timed["index"].to_list()) if down.measured else set()
    for a in report["attempts"]:
        i = a["index"]
        # an attempt with no time span has an unknown share (null), not a share of zero
        a["downtime"] = shares.get(i, {f"{b}_s": 0.0 if i in timed_ids else None for b in dt.BUCKETS})
        a["intervals"] = ivs.get(i, [])
        a["evidence"] = evidence.get(i, {})



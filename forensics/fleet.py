"""Fleet ingest: analyze many job directories and keep their per-job results in a Parquet store
partitioned by ISO week, for the weekly reliability report (DESIGN §10, docs/fleet.md).

Store layout (`DIR` = the store):

    DIR/week=2026-W45/jobs/<key>.parquet            one row per job
    DIR/week=2026-W45/interruptions/<key>.parquet   one row per interruption
    DIR/week=2026-W45/stragglers/<key>.parquet      one row per straggler
    DIR/week=2026-W45/node_health/<key>.parquet     Xid counts and error signatures per host/GPU
    DIR/jobs/<key>/                                 the job's analysis (report.json, report.md, forensics.duckdb)
    DIR/ingest.jsonl                                one line per job and ingest: ok or the error

Every job writes exactly one file per table (zero rows when it has none), named by its key, so
re-ingesting a job replaces its rows (its old files are removed from every week) and never
duplicates them. The key is a stable id of the resolved job path and the job name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import statistics
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from forensics import __version__
from forensics.config import load_job_config

__all__ = ["ENGINES", "EngineError", "IngestResult", "TABLES", "find_job_dirs", "ingest", "iso_week", "job_key"]

# directories (other than `job.toml` holders) that make their parent a job directory
JOB_MARKER_DIRS = ("logs", "slurm", "nodes")
LOG_SUFFIXES = (".log", ".out", ".err", ".log.gz", ".log.zst", ".out.gz", ".err.gz")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.xz", ".tar.bz2", ".zip")
UNKNOWN_WEEK = "unknown"
MAX_TEXT = 500

TS = pa.timestamp("us", tz="UTC")
BUCKETS = ("productive", "startup", "checkpoint", "lost_work", "termination", "restart", "slowdown")

TABLES: dict[str, pa.Schema] = {
    "jobs": pa.schema([
        ("job_key", pa.string()), ("name", pa.string()), ("dir", pa.string()), ("week", pa.string()),
        ("start", TS), ("end", TS), ("hosts", pa.list_(pa.string())), ("n_hosts", pa.int64()),
        ("ranks", pa.int64()), ("gpus", pa.int64()), ("attempts", pa.int64()), ("wall_s", pa.float64()),
        *[(f"{b}_s", pa.float64()) for b in BUCKETS],
        ("goodput", pa.float64()), ("gpu_hours", pa.float64()), ("gpu_hours_lost", pa.float64()),
        ("verdict_kind", pa.string()), ("verdict_category", pa.string()), ("verdict_domain", pa.string()),
        ("verdict_action", pa.string()), ("verdict_culprit_host", pa.string()), ("verdict_culprit_gpu", pa.int64()),
        ("n_interruptions", pa.int64()), ("checkpoint_cost_s", pa.float64()), ("checkpoint_interval_s", pa.float64()),
        ("n_saves", pa.int64()), ("warnings", pa.int64()), ("out_dir", pa.string()), ("analyzer_version", pa.string()),
    ]),
    "interruptions": pa.schema([
        ("job_key", pa.string()), ("week", pa.string()), ("id", pa.string()), ("attempt", pa.int64()),
        ("time", TS), ("kind", pa.string()), ("category", pa.string()), ("domain", pa.string()),
        ("action", pa.string()), ("auto_recoverable", pa.bool_()), ("recurring", pa.bool_()),
        ("stopping", pa.bool_()), ("culprit_host", pa.string()), ("culprit_rank", pa.int64()),
        ("culprit_gpu", pa.int64()), ("culprit_pci_bus_id", pa.string()), ("confidence", pa.float64()),
        ("summary", pa.string()), ("lost_s", pa.float64()), ("gpu_hours_lost", pa.float64()),
        ("evidence_signature", pa.string()), ("evidence_path", pa.string()), ("evidence_line", pa.int64()),
        ("evidence_text", pa.string()),
    ]),
    "stragglers": pa.schema([
        ("job_key", pa.string()), ("week", pa.string()), ("host", pa.string()), ("rank", pa.int64()),
        ("gpu", pa.int64()), ("start", TS), ("end", TS), ("slowdown", pa.float64()), ("cause", pa.string()),
        ("evidence", pa.string()),
    ]),
    "node_health": pa.schema([
        ("job_key", pa.string()), ("week", pa.string()), ("host", pa.string()), ("gpu", pa.int64()),
        ("pci_bus_id", pa.string()), ("signal", pa.string()), ("code", pa.string()), ("category", pa.string()),
        ("role", pa.string()), ("count", pa.int64()), ("first_time", TS), ("example_path", pa.string()),
        ("example_line", pa.int64()), ("example_text", pa.string()),
    ]),
}

# interruptions that stop an attempt (a slowdown does not)
STOPPING_KINDS = ("crash", "hang", "preemption", "unknown")


# --------------------------------------------------------------------------- discovery

def _is_archive_name(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _is_job_dir(d: Path) -> bool:
    try:
        entries = list(d.iterdir())
    except OSError:
        return False
    for e in entries:
        if e.name == "job.toml" and e.is_file():
            return True
        if e.name in JOB_MARKER_DIRS and e.is_dir() and not e.is_symlink():
            return True
        if e.is_file() and e.name.lower().endswith(LOG_SUFFIXES):
            return True
    return False


def find_job_dirs(root: Path | str, exclude: Iterable[Path | str] = ()) -> list[Path]:
    """Job directories under `root`, sorted. The rule (docs/fleet.md):
    a directory is a job directory when it holds `job.toml`, or a `logs/`, `slurm/` or `nodes/`
    folder, or a log file (*.log, *.out, *.err, optionally .gz/.zst) directly; a job directory is
    not searched further. A .tar/.tar.gz/.tgz file outside job directories is a job bundle.
    Hidden entries, symlinks and the `exclude` paths (the store) are skipped. For simulator cases
    (`<case>/job/` beside `<case>/expected.toml`) this finds `<case>/job`."""
    root = Path(root)
    excl = {Path(p).resolve() for p in exclude}
    if root.is_file():
        return [root] if _is_archive_name(root.name) else []
    if not root.is_dir():
        return []
    found: list[Path] = []

    def walk(d: Path) -> None:
        if d.resolve() in excl:
            return
        if _is_job_dir(d):
            found.append(d)
            return
        try:
            entries = sorted(d.iterdir(), key=lambda p: p.name)
        except OSError:
            return
        for e in entries:
            if e.name.startswith(".") or e.is_symlink():
                continue
            if e.is_dir():
                walk(e)
            elif e.is_file() and _is_archive_name(e.name) and e.resolve() not in excl:
                found.append(e)

    walk(root)
    return found


# --------------------------------------------------------------------------- keys and weeks

def job_name(path: Path) -> str:
    # lazy: the analyzer loads only where a job is analyzed or named, not to read the fleet store (weekly)
    from forensics.analysis import resolve_job_name

    return resolve_job_name(path, load_job_config(path).name)


def job_key(path: Path | str, name: str | None = None) -> str:
    """Stable id of a job: sha256 of its resolved path and its name (first 16 hex digits)."""
    p = Path(path)
    if name is None:
        name = job_name(p)
    return hashlib.sha256(f"{p.resolve()}\n{name}".encode()).hexdigest()[:16]


def _ts(v: str | None) -> datetime | None:
    if not v:
        return None
    t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def iso_week(t: datetime | str | None) -> str:
    """'2026-W45' for a time (UTC), 'unknown' for None."""
    if isinstance(t, str):
        t = _ts(t)
    if t is None:
        return UNKNOWN_WEEK
    y, w, _ = t.astimezone(UTC).isocalendar()
    return f"{y}-W{w:02d}"


# --------------------------------------------------------------------------- one job -> rows

def _clip(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.rstrip("\n")
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _checkpoint_stats(an) -> tuple[float | None, float | None, int]:
    """(median blocking save cost s, median interval between save starts s, saves) from the
    analysis store; the report's own `checkpoint` section wins when it has one."""
    ck = an.report.get("checkpoint") or {}
    cost = ck.get("save_cost_s") if isinstance(ck, dict) else None
    try:
        df = an.sql('SELECT event, step, ts, duration_s, file_id FROM checkpoints WHERE ts IS NOT NULL ORDER BY ts')
    except Exception:  # noqa: BLE001 - a store without the table: no checkpoint numbers
        return cost, None, 0
    starts: dict[int, datetime] = {}
    durations: list[float] = []
    start_times: list[datetime] = []
    for r in df.iter_rows(named=True):
        if r["event"] == "save_start":
            starts[r["step"]] = r["ts"]
            start_times.append(r["ts"])
        elif r["event"] == "save_end":
            if r["step"] in starts:
                durations.append((r["ts"] - starts[r["step"]]).total_seconds())
            elif r["duration_s"] is not None:
                durations.append(float(r["duration_s"]))
    gaps = [(b - a).total_seconds() for a, b in zip(start_times, start_times[1:], strict=False)]
    gaps = [g for g in gaps if g > 0]
    if cost is None and durations:
        cost = round(statistics.median(durations), 3)
    interval = round(statistics.median(gaps), 3) if gaps else None
    return cost, interval, len(durations)


def _node_health(an, key: str, week: str) -> list[dict]:
    rows: list[dict] = []
    q_xid = """
        WITH m AS (SELECT host, pci_bus_id, min(coalesce(gpu, local_rank)) AS gpu FROM rank_map
                   WHERE pci_bus_id IS NOT NULL GROUP BY host, pci_bus_id),
             x AS (SELECT x.*, f.path, row_number() OVER (PARTITION BY x.host, x.pci_bus_id, x.xid
                                                         ORDER BY x.ts NULLS LAST, x.file_id, x.line_no) AS rn
                   FROM xid_events x JOIN files f USING (file_id))
        SELECT x.host, m.gpu, x.pci_bus_id, CAST(x.xid AS VARCHAR) AS code, count(*) AS count, min(x.ts) AS first_time,
               any_value(CASE WHEN rn = 1 THEN x.path END) AS example_path,
               any_value(CASE WHEN rn = 1 THEN x.line_no END) AS example_line,
               any_value(CASE WHEN rn = 1 THEN x.body END) AS example_text
        FROM x LEFT JOIN m ON m.host = x.host AND m.pci_bus_id = x.pci_bus_id
        GROUP BY x.host, m.gpu, x.pci_bus_id, x.xid ORDER BY x.host, x.pci_bus_id, x.xid"""
    q_sig = """
        WITH h AS (SELECT s.signature, s.category, s.role, e.host, e.gpu, e.pci_bus_id, e.ts, e.line_no,
                          e.message, f.path,
                          row_number() OVER (PARTITION BY e.host, e.gpu, s.signature
                                             ORDER BY e.ts NULLS LAST, e.file_id, e.line_no) AS rn
                   FROM signature_hits s JOIN events e USING (event_id) JOIN files f ON f.file_id = e.file_id)
        SELECT host, gpu, any_value(pci_bus_id) AS pci_bus_id, signature AS code, any_value(category) AS category,
               any_value(role) AS role, count(*) AS count, min(ts) AS first_time,
               any_value(CASE WHEN rn = 1 THEN path END) AS example_path,
               any_value(CASE WHEN rn = 1 THEN line_no END) AS example_line,
               any_value(CASE WHEN rn = 1 THEN message END) AS example_text
        FROM h GROUP BY host, gpu, signature ORDER BY host NULLS LAST, gpu NULLS LAST, signature"""
    for signal, q in (("xid", q_xid), ("signature", q_sig)):
        try:
            df = an.sql(q)
        except Exception:  # noqa: BLE001 - an older store without a table: no signal of that kind
            continue
        for r in df.iter_rows(named=True):
            rows.append({"job_key": key, "week": week, "host": r["host"], "gpu": r["gpu"],
                         "pci_bus_id": r["pci_bus_id"], "signal": signal, "code": r["code"],
                         "category": r.get("category"), "role": r.get("role"), "count": int(r["count"]),
                         "first_time": r["first_time"], "example_path": r["example_path"],
                         "example_line": r["example_line"], "example_text": _clip(r["example_text"])})
    return rows


def _share_lost(rep: dict, inters: list[dict], gpus: int | None) -> list[tuple[float, float | None]]:
    """(lost seconds, GPU-hours lost) per interruption: the job's lost_work + termination +
    restart time is shared equally by its stopping interruptions, its slowdown time by its
    slowdowns. Startup and checkpoint time are overhead, attributed to no interruption."""
    d = rep["downtime"]
    stop_lost = sum(d.get(k) or 0.0 for k in ("lost_work_s", "termination_s", "restart_s"))
    slow_lost = d.get("slowdown_s") or 0.0
    n_stop = sum(1 for x in inters if x["kind"] in STOPPING_KINDS)
    n_slow = sum(1 for x in inters if x["kind"] == "slowdown")
    out = []
    for x in inters:
        if x["kind"] == "slowdown":
            s = slow_lost / n_slow
        elif x["kind"] in STOPPING_KINDS:
            s = stop_lost / n_stop
        else:
            s = 0.0
        out.append((round(s, 3), round(s * gpus / 3600.0, 4) if gpus else None))
    return out


def rows_for(an, key: str) -> dict[str, list[dict]]:
    """The store rows of one analyzed job (an `Analysis`)."""
    rep = an.report
    j, d, v = rep["job"], rep["downtime"], rep["verdict"]
    week = iso_week(j.get("start"))
    gpus = j.get("gpus") if j.get("gpus") is not None else j.get("ranks")
    wall = d.get("wall_s")
    cost, interval, n_saves = _checkpoint_stats(an)
    job = {
        "job_key": key, "name": j["name"], "dir": j["dir"], "week": week, "start": _ts(j.get("start")),
        "end": _ts(j.get("end")), "hosts": list(j.get("hosts") or []), "n_hosts": len(j.get("hosts") or []),
        "ranks": j.get("ranks"), "gpus": gpus, "attempts": len(rep.get("attempts") or []), "wall_s": wall,
        **{f"{b}_s": d.get(f"{b}_s") for b in BUCKETS},
        "goodput": d.get("goodput"),
        "gpu_hours": round(wall * gpus / 3600.0, 4) if (wall is not None and gpus) else None,
        "gpu_hours_lost": d.get("gpu_hours_lost"),
        "verdict_kind": v.get("kind"), "verdict_category": v.get("category"), "verdict_domain": v.get("domain"),
        "verdict_action": v.get("action"), "verdict_culprit_host": (v.get("culprit") or {}).get("host"),
        "verdict_culprit_gpu": (v.get("culprit") or {}).get("gpu"),
        "n_interruptions": len(rep.get("interruptions") or []), "checkpoint_cost_s": cost,
        "checkpoint_interval_s": interval, "n_saves": n_saves, "warnings": len(rep.get("warnings") or []),
        "out_dir": str(an.out_dir), "analyzer_version": __version__,
    }
    inters = rep.get("interruptions") or []
    shares = _share_lost(rep, inters, gpus)
    irows = []
    for x, (lost_s, lost_gh) in zip(inters, shares, strict=True):
        c = x.get("culprit") or {}
        ev = (x.get("evidence") or [None])[0] or {}
        irows.append({
            "job_key": key, "week": week, "id": x.get("id"), "attempt": x.get("attempt"), "time": _ts(x.get("time")),
            "kind": x.get("kind"), "category": x.get("category"), "domain": x.get("domain"),
            "action": x.get("action"), "auto_recoverable": x.get("auto_recoverable"),
            "recurring": x.get("recurring"), "stopping": x.get("kind") in STOPPING_KINDS,
            "culprit_host": c.get("host"), "culprit_rank": c.get("rank"), "culprit_gpu": c.get("gpu"),
            "culprit_pci_bus_id": c.get("pci_bus_id"), "confidence": x.get("confidence"),
            "summary": _clip(x.get("summary")), "lost_s": lost_s, "gpu_hours_lost": lost_gh,
            "evidence_signature": ev.get("signature"), "evidence_path": ev.get("path"),
            "evidence_line": ev.get("line"), "evidence_text": _clip(ev.get("text")),
        })
    srows = [{"job_key": key, "week": week, "host": s.get("host"), "rank": s.get("rank"), "gpu": s.get("gpu"),
              "start": _ts(s.get("start")), "end": _ts(s.get("end")), "slowdown": s.get("slowdown"),
              "cause": s.get("cause"), "evidence": _clip(s.get("evidence"))} for s in rep.get("stragglers") or []]
    return {"jobs": [job], "interruptions": irows, "stragglers": srows, "node_health": _node_health(an, key, week)}


def analyze_one(job_dir: str, store: str, options: dict | None = None) -> dict:
    """Analyze one job dir into `store/jobs/<key>/` and return its rows; never raises (runs in a
    worker process): a failure comes back as {"ok": False, "error": ...}. `options`: {"html":
    False} skips the job's report.html and plots."""
    # lazy: the analyzer loads only where a job is analyzed, not to read the fleet store (weekly)
    from forensics.analysis import analyze

    path = Path(job_dir)
    try:
        name = job_name(path)
        key = job_key(path, name)
        out = Path(store) / "jobs" / key
        an = analyze(path, out, html=(options or {}).get("html", True))
        if not any(src.get("parser") for src in an.report["sources"]):  # random bytes, a wrong folder
            shutil.rmtree(out, ignore_errors=True)
            n = len(an.report["sources"])
            return {"ok": False, "dir": job_dir, "error": f"not ingested: nothing recognizable ({n} file(s), "
                    "none recognized as a log this tool reads)"}
        return {"ok": True, "dir": job_dir, "key": key, "name": name, "rows": rows_for(an, key)}
    except Exception as exc:  # noqa: BLE001 - one bad job must not stop the fleet
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"ok": False, "dir": job_dir, "error": tb}


# --------------------------------------------------------------------------- engines

Engine = Callable[[list[str], str, int, dict], Iterator[dict]]


def _worker_init(threads: int) -> None:
    # several analyses share the CPUs: keep each one's polars pool small (before polars loads)
    os.environ.setdefault("POLARS_MAX_THREADS", str(threads))


def _run_local(job_dirs: list[str], store: str, workers: int, options: dict) -> Iterator[dict]:
    """Local engine: a process pool (spawned workers, so no forked thread pools); workers=1
    runs in this process."""
    if workers <= 1 or len(job_dirs) <= 1:
        for d in job_dirs:
            yield analyze_one(d, store, options)
        return
    ctx = multiprocessing.get_context("spawn")
    n = min(workers, len(job_dirs))
    threads = max(1, (os.cpu_count() or 1) // n)
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_worker_init, initargs=(threads,)) as pool:
        futs = {pool.submit(analyze_one, d, store, options): d for d in job_dirs}
        for f in as_completed(futs):
            try:
                yield f.result()
            except BrokenProcessPool as exc:  # a worker died (killed, out of memory)
                yield {"ok": False, "dir": futs[f], "error": f"worker process died: {exc}"}


class EngineError(RuntimeError):
    """An engine cannot run (e.g. Ray is not installed); the message is for the user."""


def _ray_analyze(job_dir: str, store: str, options: dict, threads: int) -> dict:
    """One Ray task: `analyze_one` with the polars pool sized like a local worker's."""
    _worker_init(threads)
    return analyze_one(job_dir, store, options)


def _absolute(p: str) -> str:
    return p if os.path.isabs(p) else os.path.join(os.getcwd(), p)


def _run_ray(job_dirs: list[str], store: str, workers: int, options: dict) -> Iterator[dict]:
    """Ray engine: one `analyze_one` task (1 CPU) per job dir, at most `workers` in flight (0:
    the cluster's CPUs), results yielded as they complete; the caller writes the Parquet files.
    `options["address"]`: None starts a local Ray with `workers` CPUs (default: all), else
    `ray.init(address=...)` ("auto", "ray://head:10001"). A Ray this process already had
    initialized is used as it is. Ray is shut down (or disconnected) afterwards only if we
    started it. Ray is imported here, so nothing else needs it."""
    try:
        import ray
    except ImportError:
        raise EngineError("the ray engine needs Ray, which is not installed: pip install 'forensics[ray]'") from None
    if not job_dirs:
        return iter(())
    return _ray_results(ray, job_dirs, store, workers, options)


def _ray_results(ray, job_dirs: list[str], store: str, workers: int, options: dict) -> Iterator[dict]:
    address = options.get("address")
    task_options = {"html": options.get("html", True)}
    started = not ray.is_initialized()
    if started:
        if address is None:
            # a private, offline Ray on this machine: no dashboard, no usage stats; its workers run
            # this Python and find this package (installed or not) through PYTHONPATH
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            pkg_root = str(Path(__file__).resolve().parents[1])
            pythonpath = os.pathsep.join(x for x in (pkg_root, os.environ.get("PYTHONPATH")) if x)
            ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False,
                     logging_level=logging.WARNING, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
        else:
            try:
                ray.init(address=address, logging_level=logging.WARNING)
            except ImportError as exc:  # ray:// needs the Ray Client (grpcio)
                raise EngineError(f"cannot connect to Ray at {address}: {exc} "
                                  "(ray:// addresses need pip install 'ray[client]')") from None
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EngineError(f"cannot connect to Ray at {address}: {exc}") from None
    pending: dict = {}
    try:
        limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        threads = max(1, (os.cpu_count() or 1) // limit) if (started and address is None) else 1
        task = ray.remote(num_cpus=1)(_ray_analyze)
        # workers see absolute paths (a Ray worker's working directory is not ours); results carry
        # the paths as given, so the store rows are those of the local engine
        abs_store = _absolute(store)
        todo = iter(job_dirs)
        while True:
            while len(pending) < limit and (d := next(todo, None)) is not None:
                pending[task.remote(_absolute(d), abs_store, task_options, threads)] = d
            if not pending:
                break
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            d = pending.pop(ref)
            try:
                out = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the task's worker died (killed, out of memory)
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                yield {"ok": False, "dir": d, "error": f"ray task failed: {type(exc).__name__}: {msg}"}
                continue
            if out["dir"] != d:
                out["dir"] = d
                if not out["ok"]:
                    out["error"] = out["error"].replace(_absolute(d), d)
            if out["ok"] and abs_store != store:
                for row in out["rows"]["jobs"]:
                    row["out_dir"] = str(Path(store) / "jobs" / out["key"])
            yield out
    finally:
        for ref in pending:  # stopped early: do not leave analyses running on a cluster
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - best effort
                pass
        if started:
            ray.shutdown()


ENGINES: dict[str, Engine] = {"local": _run_local, "ray": _run_ray}


# --------------------------------------------------------------------------- the store

@dataclass
class IngestResult:
    store: Path
    ingested: list[dict] = field(default_factory=list)  # {"key", "name", "dir", "week"}
    failed: list[dict] = field(default_factory=list)  # {"dir", "error"}


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.table(cols, schema=schema)


def _remove_key(store: Path, key: str) -> None:
    for t in TABLES:
        for p in store.glob(f"week=*/{t}/{key}.parquet"):
            p.unlink()


def write_job(store: Path, key: str, rows: dict[str, list[dict]]) -> str:
    """Replace every row of job `key` in the store with `rows`; returns its week."""
    week = rows["jobs"][0]["week"]
    _remove_key(store, key)
    for t, schema in TABLES.items():
        d = store / f"week={week}" / t
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.parquet.tmp-{os.getpid()}"
        pq.write_table(_table(rows.get(t, []), schema), tmp, compression="zstd")
        os.replace(tmp, d / f"{key}.parquet")
    return week


def ingest(roots: Iterable[Path | str], store: Path | str, workers: int | None = None, engine: str = "local",
           progress: Callable[[dict], None] | None = None, job_html: bool = True,
           address: str | None = None) -> IngestResult:
    """Find the job dirs under every root, analyze them with `engine` and write their rows into the
    store (replacing earlier rows of the same jobs). A job that fails is reported, not fatal.
    `job_html=False` skips each job's report.html and plots (faster; report.json/md are kept).
    `engine="ray"` runs the analyses as Ray tasks: on a local Ray it starts (`address=None`) or on
    the cluster at `address` ("auto", "ray://head:10001"); raises `EngineError` without Ray."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")
    if address is not None and engine != "ray":
        raise ValueError(f"address is for the ray engine, not engine={engine!r}")
    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    dirs: list[str] = []
    seen: set[Path] = set()
    for root in roots:
        for d in find_job_dirs(root, exclude=[store]):
            r = d.resolve()
            if r not in seen:
                seen.add(r)
                dirs.append(str(d))
    if engine == "ray":
        workers = workers or 0  # 0: the engine's default (all CPUs of the local Ray or the cluster)
    else:
        workers = workers or max(1, min(os.cpu_count() or 1, 8))
    options: dict = {"html": job_html}
    if address is not None:
        options["address"] = address
    results = ENGINES[engine](dirs, str(store), workers, options)  # an engine that cannot run fails here
    res = IngestResult(store)
    with open(store / "ingest.jsonl", "a", encoding="utf-8") as log:
        for done, out in enumerate(results, 1):
            if out["ok"]:
                week = write_job(store, out["key"], out["rows"])
                item = {"key": out["key"], "name": out["name"], "dir": out["dir"], "week": week}
                res.ingested.append(item)
                log.write(json.dumps({"ok": True, **item}) + "\n")
            else:
                item = {"dir": out["dir"], "error": out["error"]}
                res.failed.append(item)
                log.write(json.dumps({"ok": False, **item}) + "\n")
            log.flush()
            if progress:
                progress({**out, "done": done, "total": len(dirs)})
    res.ingested.sort(key=lambda x: x["dir"])
    res.failed.sort(key=lambda x: x["dir"])
    return res


def parquet_files(store: Path | str, table: str) -> list[str]:
    return sorted(str(p) for p in Path(store).glob(f"week=*/{table}/*.parquet"))

"""The outputs of an analysis (DESIGN §8): report.json, report.md, forensics.duckdb and (unless
`html=False`) plots/*.png and report.html, written into a temporary sibling of the output folder
that replaces it only when everything was written. The store is written by a worker thread while
the main thread writes the report files (docs/architecture.md "Outputs in parallel").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from forensics import interrupts, parquet_tables
from forensics.report import write_markdown

if TYPE_CHECKING:  # DuckDB and pyarrow load only when the store is written, after the verdict
    from forensics.store import Store

STALE_TMP_S = 3600  # a temporary output directory older than this belongs to no running analysis


def _quiet(_: str) -> None:
    return None


def _remove_leftovers(out_dir: Path) -> None:
    """A run killed between the two renames of `_write_outputs` leaves `.NAME.old-PID` (the
    previous report) or `.NAME.tmp-*` (a half-written one) beside the output: remove them, but
    only those of processes that no longer run."""
    for p in out_dir.parent.glob(f".{out_dir.name}.*"):
        tag = p.name[len(out_dir.name) + 2:]
        if not (tag.startswith("old-") or tag.startswith("tmp-")) or not p.is_dir() or p.is_symlink():
            continue
        pid = tag[4:]
        if tag.startswith("old-") and pid.isdigit() and _running(int(pid)):
            continue
        if tag.startswith("tmp-") and time.time() - p.stat().st_mtime < STALE_TMP_S:
            continue  # may belong to a run in progress
        shutil.rmtree(p, ignore_errors=True)


def _running(pid: int) -> bool:
    """Another live process (this one's own leftovers are stale: it is not writing them now)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_outputs(out_dir: Path, result: dict, html: bool = True, stage: Callable[[str], None] = _quiet) -> None:
    """Write into a temporary sibling directory, then swap it in: an interrupted run never
    leaves a half report that looks complete."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(out_dir)
    tmp: Path | None = None
    try:
        with interrupts.held():  # an interrupt before `tmp` names the new folder would leave it behind
            tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
        rep = result["report"]
        stage("writing the store and the report")
        # the store is written by one worker thread (DuckDB works outside the GIL) while this one
        # renders the report and its plots; its errors surface here when it is joined
        parquet = any(isinstance(df, pl.LazyFrame) for df in result["tables"].values())
        with ThreadPoolExecutor(max_workers=1) as pool:
            stored = pool.submit(_write_store, tmp / "forensics.duckdb", result)
            try:
                _write_report_files(tmp, result, rep, html, stage)
                stored.result()
            except BaseException:
                stored.cancel()
                with contextlib.suppress(BaseException):
                    stored.result()
                raise
        old = None
        if out_dir.exists():
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
            out_dir.rename(old)
        tmp.rename(out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if parquet:
        _point_views(out_dir / "forensics.duckdb")


def _point_views(db: Path) -> None:
    """The store's views over Parquet name their files in the folder's final place (they were made in
    the temporary one); if that fails, `forensics.store`'s readers still find the files beside the
    database."""
    from forensics import store  # lazy: DuckDB loads only for the store

    with contextlib.suppress(Exception):
        store.point_views(db)


class EarlySinks:
    """The store's Parquet tables (`parquet_tables.PARQUET_TABLES`: a large job's samples, waiting on
    disk) written by polars in one thread of their own as soon as the analysis has their final rows
    (`start`), beside attribution and the report; the store then adopts each file instead of reading the
    samples back and encoding them after the verdict. polars only, no DuckDB. Leaving the `with` waits
    for the thread, so nothing is written after the folder `where` is removed."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.files: dict[str, Future[Path]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sink")

    def __enter__(self) -> EarlySinks:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def start(self, tables: dict[str, pl.DataFrame | pl.LazyFrame]) -> None:
        for t in parquet_tables.PARQUET_TABLES:
            df = tables.get(t)
            if isinstance(df, pl.LazyFrame):  # in memory (a small job): inserted with the rest
                self.files[t] = self._pool.submit(parquet_tables.sink, t, df, self.where / f"early-{t}.parquet")


def _early_file(result: dict, table: str) -> Path | None:
    """The file `EarlySinks` wrote for `table`, or None (none started, or it failed: the store then writes
    the rows itself, and says why if that fails too)."""
    fut = result.get("early_sinks", {}).get(table)
    if fut is None:
        return None
    try:
        return fut.result()
    except Exception:  # noqa: BLE001 - e.g. the spill folder's disk full: the output folder may have room
        return None


def _write_store(path: Path, result: dict) -> None:
    # lazy: DuckDB and pyarrow load only when the store is written (after the verdict)
    from forensics.store import PARQUET_TABLES, Store

    st = Store(path)
    try:
        lazy = {t: df for t, df in result["tables"].items() if isinstance(df, pl.LazyFrame)}
        with st.transaction():  # the frames in memory: one commit (a small bundle's store: 20 tables)
            st.insert("files", result["files"])
            st.insert("events", result["events"].drop("path", "attempt", strict=False))
            for t, df in result["tables"].items():
                if t not in lazy:
                    st.insert(t, df)
            st.insert("unparsed_lines", result["unparsed"])
            st.insert("rank_map", result["rank_map"])
            st.insert("attempts", result["attempts"])
            st.insert("signature_hits", result["hits"].drop("weight"))
            _insert_results(st, result["report"])
        for t, df in lazy.items():  # tables that wait on disk, each streamed in on its own
            if t in PARQUET_TABLES:  # samples: Parquet beside the database, a view over it
                early = _early_file(result, t)
                if early is not None:
                    st.adopt_parquet(t, early)
                else:
                    st.write_parquet(t, df)
            else:
                st.insert(t, df)
    finally:
        st.close()


def _write_report_files(tmp: Path, result: dict, rep: dict, html: bool,
                        stage: Callable[[str], None] = _quiet) -> None:
    """report.json, report.md and (html) the plots and report.html."""
    (tmp / "report.json").write_text(json.dumps(rep, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    write_markdown(rep, tmp / "report.md")
    if html:
        # matplotlib loads only here, when the plots are drawn (after the verdict)
        from forensics import html_report, plots

        tables = result["tables"]
        frames = {"attempts": result["attempts"], "steps": tables.get("train_steps"),
                  "checkpoints": tables.get("checkpoints"), "dcgm_samples": tables.get("dcgm_samples")}
        plot_errors: dict[str, str] = {}
        stage("drawing the plots")
        pngs = plots.render_all(rep, frames, plot_errors)
        stage("writing report.html")
        (tmp / "plots").mkdir()
        for name, png in pngs.items():
            (tmp / "plots" / f"{name}.png").write_bytes(png)
        html_report.write_html(rep, tmp / "report.html", pngs=pngs, plot_errors=plot_errors)


def _insert_results(st: Store, rep: dict) -> None:
    def ts(v: str | None) -> datetime | None:
        return datetime.fromisoformat(v) if v else None

    rows, ev_rows = [], []
    for x in rep["interruptions"]:
        c = x["culprit"]
        rows.append({"id": x["id"], "attempt": x["attempt"], "time": ts(x["time"]), "kind": x["kind"],
                     "category": x["category"], "domain": x["domain"], "action": x["action"],
                     "auto_recoverable": x["auto_recoverable"], "recurring": x["recurring"],
                     "culprit_host": c["host"], "culprit_rank": c["rank"], "culprit_gpu": c["gpu"],
                     "culprit_pci_bus_id": c["pci_bus_id"], "confidence": x["confidence"], "method": x["method"],
                     "summary": x["summary"], "missing_evidence": "; ".join(x.get("missing_evidence", []))})
        for e in x["evidence"]:
            ev_rows.append({"interruption_id": x["id"], "event_id": e.get("event_id"), "path": e["path"],
                            "line": e["line"], "time": ts(e["time"]), "signature": e["signature"],
                            "role": e["role"], "text": e["text"]})
    if rows:
        st.insert("interruptions", pl.DataFrame(rows, infer_schema_length=None))
    if ev_rows:
        st.insert("evidence", pl.DataFrame(ev_rows, infer_schema_length=None))
    if rep["stragglers"]:
        st.insert("stragglers", pl.DataFrame([{**s, "start": ts(s["start"]), "end": ts(s["end"])}
                                              for s in rep["stragglers"]], infer_schema_length=None))
    d = rep["downtime"]
    st.insert("downtime", pl.DataFrame([{"bucket": k[:-2], "seconds": v, "interruption_id": None}
                                        for k, v in d.items() if k.endswith("_s") and k != "wall_s" and v is not None]))

"""Time the signature matching step (`forensics.signatures.match`) on a large events frame.

The frame is built from real parsing: every fixture job's and every real sample's events (ingest,
as `analyze` reads them), repeated with fresh event ids until it holds `--rows` events. Prints one
JSON line: rows, hits, the wall and CPU seconds of `match` (median of `--repeat` runs after one
warm-up), the load average, and a digest of the hits (equal digests: equal results). `--save`
writes the frame as Parquet, `--frame` reads one back (the same input before and after a change).

    PYTHONPATH=$PWD .venv/bin/python bench/signature_match.py --rows 1000000 --save /tmp/ev.parquet
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forensics import ingest as ingest_mod  # noqa: E402
from forensics.config import load_job_config  # noqa: E402
from forensics.discovery import discover  # noqa: E402
from forensics.signatures import load_catalog, match  # noqa: E402

COLUMNS = ("source", "kind", "code", "message")


def real_events() -> pl.DataFrame:
    jobs = sorted(d for d in (ROOT / "fixtures" / "jobs").iterdir() if d.is_dir())
    samples = ROOT.parent.parent / "shared" / "real-samples"
    if samples.is_dir():
        jobs += sorted(d for d in samples.iterdir() if d.is_dir())
    parts = []
    for job in jobs:
        disc = discover(job)
        try:
            ing = ingest_mod.ingest(disc, load_job_config(job))
        finally:
            disc.close()
        parts += [f.events.select(COLUMNS) for f in ing.files if not f.events.is_empty()]
    return pl.concat(parts, how="vertical_relaxed")


def log_lines(root: Path, rows: int) -> pl.DataFrame:
    """Up to `rows` lines of the text files under `root` as `generic` events (what error_line
    events would be if every line of a job's logs were one): mostly lines no signature matches."""
    parts, n = [], 0
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".out", "")):
        s = pl.Series("message", f.read_bytes().decode("utf-8", errors="replace").splitlines(), dtype=pl.Utf8)
        parts.append(s.to_frame())
        n += s.len()
        if n >= rows:
            break
    return pl.concat(parts).head(rows).with_columns(
        pl.lit("generic").alias("source"), pl.lit("error_line").alias("kind"), pl.lit(None, dtype=pl.Utf8).alias("code")
    ).select(COLUMNS)


def build(rows: int, lines: Path | None = None) -> pl.DataFrame:
    base = real_events()
    if lines is not None:  # a job's log lines, with the real events among them
        return pl.concat([base, log_lines(lines, rows - base.height)], how="vertical_relaxed").with_row_index(
            "event_id").with_columns(pl.col("event_id").cast(pl.Int64))
    reps = -(-rows // base.height)
    return pl.concat([base] * reps).head(rows).with_row_index("event_id").with_columns(
        pl.col("event_id").cast(pl.Int64))


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frame", type=Path, help="read the events frame from this Parquet file")
    ap.add_argument("--save", type=Path, help="write the events frame to this Parquet file")
    ap.add_argument("--lines", type=Path, help="fill the frame with the log lines of this job directory")
    ap.add_argument("--no-prefilter", action="store_true", help="match without the literal screen")
    args = ap.parse_args()
    ev = pl.read_parquet(args.frame) if args.frame else build(args.rows, args.lines)
    if args.save:
        ev.write_parquet(args.save)
    cat = load_catalog()
    kw = {"prefilter": False} if args.no_prefilter else {}
    hits = match(cat, ev, **kw)  # warm-up (and the result)
    walls, cpus = [], []
    for _ in range(args.repeat):
        w, c = time.perf_counter(), cpu()
        match(cat, ev, **kw)
        walls.append(time.perf_counter() - w)
        cpus.append(cpu() - c)
    digest = hashlib.sha256(hits.select("event_id", "signature").write_csv().encode()).hexdigest()[:16]
    print(json.dumps({"rows": ev.height, "prefilter": not args.no_prefilter, "signatures": len(cat.signatures), "hits": hits.height,
                      "wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3),
                      "loadavg": [round(x, 2) for x in os.getloadavg()], "hits_digest": digest}))


if __name__ == "__main__":
    main()

"""What any analyzer built on this project's stack (Python, polars, DuckDB) pays before it
classifies a single line, timed by bench/run.py beside `forensics analyze`, `cat` and `grep`.

    python bench/floor.py JOB_DIR [--hash]

It only:
1. starts Python and imports polars and DuckDB;
2. loads every DCGM CSV into a DuckDB table with typed columns (stamp, GPU index, value) in one
   `read_csv` over all files: the "DCGM straight into DuckDB" of issue 8, DuckDB's own parallel
   reader, no cleaning, no sentinel rules, no field names;
3. reads every other file whole and counts its lines and its NCCL INFO lines with `bytes.count`
   (C speed, no per-line work): less than deciding, line by line, what is chatter;
4. with --hash only: hashes every file (sha256), as the store's `files` table does (DESIGN §4).
   It is timed apart (`hash_s`) and is off by default: hashing is a choice of this project (chain
   of custody), not a cost of the stack; at about 0.7 GB/s per core (measured on the bench
   machine) it costs about as much CPU as the grep baseline does on the same bytes.

No parser, no attribution, no report. Prints one JSON line: the seconds of each step and the
counts (so a reader can check it did touch every file). bench/run.py also records its CPU
seconds: on C cores no schedule of this work ends sooner than CPU / C.

This is a reference point, not a lower bound on any analyzer: an analyzer need not load the
DCGM samples into DuckDB, nor read through Python's `bytes`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
import duckdb  # noqa: E402
import polars  # noqa: E402, F401 - imported as the analyzer does

DCGM_COLUMNS = {"timestamp": "TIMESTAMPTZ", "metric": "VARCHAR", "gpu": "INTEGER", "UUID": "VARCHAR",
                "pci_bus_id": "VARCHAR", "Hostname": "VARCHAR", "value": "DOUBLE"}


def main(job: Path, hash_files: bool = False) -> dict:
    t_import = time.perf_counter() - T0
    files = sorted(p for p in job.rglob("*") if p.is_file())
    dcgm = [str(p) for p in files if p.name == "dcgm.csv"]
    t = time.perf_counter()
    con = duckdb.connect()
    samples = 0
    if dcgm:
        con.execute("CREATE TABLE s AS SELECT * FROM read_csv($files, header = true, columns = $cols)",
                    {"files": dcgm, "cols": DCGM_COLUMNS})
        samples = con.execute("SELECT count(*) FROM s").fetchone()[0]  # type: ignore[index]
    t_dcgm = time.perf_counter() - t
    t = time.perf_counter()
    lines = info = 0
    for p in files:
        if p.name != "dcgm.csv":
            data = p.read_bytes()
            lines += data.count(b"\n")
            info += data.count(b" NCCL INFO ")
    t_rest = time.perf_counter() - t
    t = time.perf_counter()
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in files] if hash_files else []
    t_hash = time.perf_counter() - t
    return {"import_s": round(t_import, 3), "dcgm_to_duckdb_s": round(t_dcgm, 3),
            "read_count_s": round(t_rest, 3), "hash_s": round(t_hash, 3) if hash_files else None,
            "dcgm_files": len(dcgm), "dcgm_samples": samples, "other_files": len(files) - len(dcgm),
            "other_lines": lines, "nccl_info_lines": info, "files_hashed": len(digests)}


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--hash"]
    if len(args) != 1:
        raise SystemExit("usage: python bench/floor.py JOB_DIR [--hash]")
    print(json.dumps(main(Path(args[0]), hash_files="--hash" in sys.argv[1:])))

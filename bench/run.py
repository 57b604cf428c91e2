"""Benchmark: `forensics analyze` end to end against `cat` and `grep -E -c` over the same files,
measured in the same run (so ratios hold when the machine's speed drifts).

    python bench/run.py [--ranks 64 1024 4096] [--info-lines 400] [--repeat 3] [--work bench/work]

For each size it simulates a job (fixtures/scenarios/gpu_fell_off_bus.toml scaled to RANKS ranks
with NCCL INFO chatter), then times each command REPEAT times as a separate process (median wall
time; peak RSS of the process from getrusage). Writes bench/results.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forensics.simulate import load_scenario, simulate  # noqa: E402


def literal_prefixes() -> list[str]:
    """The alternation grep runs: literals that the lines the signature catalog looks for carry
    (a hand-kept list of the catalog's key words; see forensics/signatures/*.toml)."""
    return sorted({"NVRM", "NCCL WARN", "Watchdog caught", "Traceback", "exitcode", "CUDA error", "out of memory",
                   "CANCELLED", "Xid", "fallen off", "ECC", "Segmentation fault", "iteration"})


def make_job(work: Path, ranks: int, info_lines: int) -> Path:
    spec = load_scenario(ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml")
    gpn = spec["job"].get("gpus_per_node", 8)
    spec["job"]["nodes"] = max(2, ranks // gpn)
    spec["job"]["nccl_debug"] = "INFO"
    spec["job"]["nccl_info_lines_per_rank"] = info_lines
    case = work / f"job-{ranks}"
    if not (case / "job").is_dir():
        simulate(spec, case, 1)
    return case / "job"


def timed(cmd: list[str], repeat: int, shell: bool = False) -> dict:
    """Median wall time and the peak RSS of that process alone (os.wait4's rusage)."""
    walls, rss = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(" ".join(cmd) if shell else cmd, shell=shell,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - t0)
        rss.append(usage.ru_maxrss)
    return {"wall_s": round(statistics.median(walls), 3), "peak_rss_mb": round(max(rss) / 1024, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[64])
    ap.add_argument("--info-lines", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    pattern = "|".join(p.replace(" ", "\\ ") for p in literal_prefixes())
    rows = []
    for ranks in args.ranks:
        job = make_job(args.work, ranks, args.info_lines)
        files = sorted(str(p) for p in job.rglob("*") if p.is_file())
        size = sum(os.path.getsize(f) for f in files)
        out = args.work / f"out-{ranks}"
        shutil.rmtree(out, ignore_errors=True)
        fx = timed([sys.executable, "-m", "forensics.cli", "analyze", str(job), "--out", str(out), "--quiet"],
                   args.repeat)
        cat = timed(["cat", *files, ">", "/dev/null"], args.repeat, shell=True)
        grep = timed(["grep", "-E", "-c", f"'{pattern}'", *files, ">", "/dev/null"], args.repeat, shell=True)
        rows.append({"ranks": ranks, "files": len(files), "bytes": size, "forensics": fx, "cat": cat, "grep": grep,
                     "mb_per_s": round(size / 1e6 / fx["wall_s"], 1),
                     "ratio_to_cat": round(fx["wall_s"] / max(cat["wall_s"], 1e-6), 1),
                     "ratio_to_grep": round(fx["wall_s"] / max(grep["wall_s"], 1e-6), 1)})
        print(json.dumps(rows[-1]))
    res = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
           "grep_pattern": pattern, "results": rows}
    (ROOT / "bench" / "results.json").write_text(json.dumps(res, indent=2) + "\n")
    print(f"{'ranks':>6} {'MB':>8} {'forensics s':>12} {'cat s':>7} {'grep s':>7} {'x cat':>6} {'x grep':>7} {'RSS MB':>7}")
    for r in rows:
        print(f"{r['ranks']:>6} {r['bytes'] / 1e6:>8.1f} {r['forensics']['wall_s']:>12.2f} {r['cat']['wall_s']:>7.2f} "
              f"{r['grep']['wall_s']:>7.2f} {r['ratio_to_cat']:>6.1f} {r['ratio_to_grep']:>7.1f} "
              f"{r['forensics']['peak_rss_mb']:>7.1f}")


if __name__ == "__main__":
    main()

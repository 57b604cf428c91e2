"""Benchmark: small bundles (issue 17). `forensics analyze` on five real excerpts of
`../shared/real-samples/`, each as a fresh process, `--no-html` and full (plots and report.html).

    python bench/small.py [--repeat 10] [--samples DIR] [--label current] [--work bench/work/small]

Each case folder is copied without its label (`case.toml`), as `score_real_samples.py` does, into
WORK/<case>/job; then every run is a new `python -m forensics.cli analyze JOB --out OUT`
(OUT removed before each run; its terminal summary goes to a file; one untimed run first, so
bytecode and page cache are warm, as for any installed tool), timed by wall clock and by CPU (user + system of the child,
`os.wait4`), with the 1-minute load average read before it: the machine is shared, so wall times
move with the load and CPU times much less. Per case and mode it keeps the median and the minimum
of REPEAT runs. Then `python -X importtime` of one `--no-html` run gives where the import time goes
(the modules' own microseconds, summed per top-level package). Writes its part of bench/results.json (the key
`small`, one entry per LABEL, the other keys left alone) and the table between the `small:` markers
in bench/README.md. Targets (issue 17): `--no-html` <= 0.5 s and full <= 1.2 s wall, median of 10.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from run import replace_block  # noqa: E402 - bench/run.py: one writer of the README's tables

RESULTS = ROOT / "bench" / "results.json"
README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- small:begin -->", "<!-- small:end -->"
CASES = (  # varied sources: NCCL IB, three files of an H200 fabric-manager failure, Horovod over
    # mpirun (two files, the largest excerpt), a JAX traceback, a PBS scheduler e-mail
    "001-nccl-ib-status12-vendor129-kp-ddp",
    "207-h200-fabric-manager-failures-three-symptoms-nvls-hpl-segv",
    "256-horovod-mpirun-duplicate-gpu-all-ranks-cuda-device-1000",
    "260-jax-xla-resource-exhausted-bufferassignment-3080ti-afprofile",
    "275-pbs-job-preempted-node-failure-gpu-2-17-email",
)
MODES = {"no_html": ["--no-html"], "full": []}
TARGET_S = {"no_html": 0.5, "full": 1.2}
# report.json fields that may differ between two runs of the same input: none are timings today;
# the job and output folders are where the case was copied to
VOLATILE = ("dir",)


def default_samples() -> Path | None:
    """`shared/real-samples` beside the project or beside one of its parent folders (a worktree)."""
    for p in ROOT.parents:
        if (p / "shared" / "real-samples").is_dir():
            return p / "shared" / "real-samples"
    return None


def stage_case(samples: Path, case: str, work: Path) -> Path:
    """A copy of the case without its label, so the analyzer reads only the logs."""
    job = work / case / "job"
    shutil.rmtree(job, ignore_errors=True)
    job.mkdir(parents=True)
    for f in sorted((samples / case).iterdir()):
        if f.is_file() and f.name != "case.toml":
            shutil.copy2(f, job / f.name)
    return job


def run_once(cmd: list[str], env: dict[str, str]) -> dict:
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as errf, tempfile.TemporaryFile() as outf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=outf, stderr=errf, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        if proc.returncode != 0:
            errf.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {errf.read().decode(errors='replace')[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "load1": load,
            "peak_rss_mb": usage.ru_maxrss / 1024}


def report_digest(out: Path) -> str:
    """sha256 of report.json with the job folder blanked: equal digests, equal reports."""
    rep = json.loads((out / "report.json").read_text())
    for k in VOLATILE:
        rep["job"][k] = None
    return hashlib.sha256(json.dumps(rep, sort_keys=True).encode()).hexdigest()


def summarize(runs: list[dict]) -> dict:
    walls, cpus = [r["wall_s"] for r in runs], [r["cpu_s"] for r in runs]
    return {"wall_median_s": round(statistics.median(walls), 3), "wall_min_s": round(min(walls), 3),
            "cpu_median_s": round(statistics.median(cpus), 3), "cpu_min_s": round(min(cpus), 3),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
            "load1": [round(min(r["load1"] for r in runs), 2), round(max(r["load1"] for r in runs), 2)],
            "runs": [{k: round(v, 3) for k, v in r.items()} for r in runs]}


_IMPORT = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", re.M)


def import_profile(job: Path, out: Path, env: dict[str, str]) -> dict:
    """Import time (us) of one `--no-html` run: each module's own time summed per top-level package
    (polars, numpy, duckdb, forensics, parsers, ...), largest first, and the total."""
    shutil.rmtree(out, ignore_errors=True)
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "forensics.cli", "analyze", str(job), "--out",
                          str(out), "--no-html"], capture_output=True, text=True, env=env, check=True)
    per: dict[str, int] = {}
    for m in _IMPORT.finditer(run.stderr):
        top = m.group(4).split(".")[0]
        per[top] = per.get(top, 0) + int(m.group(1))
    return {"self_total_us": sum(per.values()), "self_us_by_package": dict(sorted(per.items(), key=lambda kv: -kv[1]))}


def child_env(tree: Path, work: Path) -> dict[str, str]:
    """The tree's code on PYTHONPATH, and bytecode cached as in any installation (pip compiles
    it): a PYTHONDONTWRITEBYTECODE in the caller's environment would make every run compile every
    module from source (0.3-0.6 s here). The cache goes under WORK, never into the source tree."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": str(work / "pycache")}


def measure(samples: Path, work: Path, repeat: int, tree: Path) -> dict:
    env = child_env(tree, work)
    cases = {}
    for case in CASES:
        job = stage_case(samples, case, work)
        row: dict = {"files": len(list(job.iterdir())), "bytes": sum(f.stat().st_size for f in job.iterdir())}
        for mode, flags in MODES.items():
            out = work / case / f"out-{mode}"
            runs, digests = [], set()
            shutil.rmtree(out, ignore_errors=True)  # one untimed run first: bytecode and page cache warm
            run_once([sys.executable, "-m", "forensics.cli", "analyze", str(job), "--out", str(out), *flags], env)
            for _ in range(repeat):
                shutil.rmtree(out, ignore_errors=True)
                runs.append(run_once([sys.executable, "-m", "forensics.cli", "analyze", str(job), "--out", str(out),
                                      *flags], env))
                digests.add(report_digest(out))
            if len(digests) != 1:
                raise SystemExit(f"{case} {mode}: report.json differs between runs")
            row[mode] = summarize(runs)
            row[mode]["report_sha256"] = digests.pop()
        if row["no_html"]["report_sha256"] != row["full"]["report_sha256"]:
            raise SystemExit(f"{case}: report.json of --no-html differs from the full analysis")
        print(f"{case}: --no-html {row['no_html']['wall_median_s']:.2f} s, full {row['full']['wall_median_s']:.2f} s "
              f"(CPU {row['no_html']['cpu_median_s']:.2f} / {row['full']['cpu_median_s']:.2f} s)", file=sys.stderr)
        cases[case] = row
    imports = import_profile(stage_case(samples, CASES[0], work), work / CASES[0] / "out-importtime", env)
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    return {"commit": head or None, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "repeat": repeat,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "cases": cases, "importtime_no_html": {"case": CASES[0], **imports},
            "targets": {m: all(c[m]["wall_median_s"] <= t for c in cases.values()) for m, t in TARGET_S.items()}}


def table(entries: dict[str, dict]) -> str:
    cols = ["run", "case", "files", "bytes", "--no-html wall median / min (s)", "--no-html CPU median / min (s)",
            "full wall median / min (s)", "full CPU median / min (s)", "load avg (1 min)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for label, e in entries.items():
        for case, c in e["cases"].items():
            a, b = c["no_html"], c["full"]
            lo, hi = min(a["load1"][0], b["load1"][0]), max(a["load1"][1], b["load1"][1])
            lines.append(f"| {label} ({e['commit']}) | {case[:3]} | {c['files']} | {c['bytes']:,} | "
                         f"{a['wall_median_s']:.2f} / {a['wall_min_s']:.2f} | {a['cpu_median_s']:.2f} / {a['cpu_min_s']:.2f} | "
                         f"{b['wall_median_s']:.2f} / {b['wall_min_s']:.2f} | {b['cpu_median_s']:.2f} / {b['cpu_min_s']:.2f} | "
                         f"{lo:.1f}–{hi:.1f} |")
    text = "\n".join(lines) + "\n"
    for label, e in entries.items():
        imp = e["importtime_no_html"]
        # an entry of the first version of this script kept cumulative times of the outermost imports
        per, how = (imp["self_us_by_package"], "own time per top-level package") if "self_us_by_package" in imp \
            else (imp["cumulative_us_by_package"], "cumulative time of the outermost imports")
        top = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in list(per.items())[:10])
        text += (f"\n{label}: {e['repeat']} runs per case and mode, {e['date']}, {e['machine']['cpus']} cores; "
                 f"`-X importtime` of `--no-html` on {imp['case'][:3]}: {imp['self_total_us'] / 1e6:.2f} s of imports "
                 f"in all (wall clock, at that moment's load); {how} (s): {top}.\n")
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--samples", type=Path, default=default_samples())
    ap.add_argument("--label", default="current", help="the key of this run in results.json's `small` (e.g. before, after)")
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "work" / "small")
    ap.add_argument("--tree", type=Path, default=ROOT,
                    help="the source tree to measure (its forensics/ and parsers/ on PYTHONPATH); default this one")
    ap.add_argument("--commit", default=None, help="the commit TREE holds, when it is no git checkout")
    ap.add_argument("--table-only", action="store_true", help="rewrite the table from results.json, measure nothing")
    ap.add_argument("--no-readme", action="store_true", help="do not rewrite the table in bench/README.md")
    args = ap.parse_args()
    if not args.table_only and (args.samples is None or not all((args.samples / c).is_dir() for c in CASES)):
        msg = f"the real samples ({', '.join(CASES)}) are not at {args.samples}: pass --samples DIR"
        if "--samples" in sys.argv:
            raise SystemExit(msg)
        print(f"bench/small.py skipped: {msg}", file=sys.stderr)  # `make bench` in a checkout without them
        return
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if not args.table_only:
        res = measure(args.samples, args.work, args.repeat, args.tree.resolve())
        if args.commit:
            res["commit"] = args.commit
        data.setdefault("small", {})[args.label] = res
        RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    res = data["small"][args.label]
    text = table(data["small"])
    print(text)
    print(json.dumps(res["targets"]))
    if not args.no_readme:
        replace_block(README, BEGIN, END, text)


if __name__ == "__main__":
    main()

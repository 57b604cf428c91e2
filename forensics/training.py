"""Training the attribution classifier (DESIGN §6.3, docs/classifier.md): the training set is
built from simulated scenarios (format variants drawn per seed, each case simulated, analyzed, and
its store read back exactly as attribution saw it), cross-validated grouped by seed and fitted
(`forensics.fitting`) into the shipped artifact (`forensics train`). The one module that runs the
analyzer on simulated jobs, so nothing the analyzer imports depends on it.
"""

from __future__ import annotations

import os
import random
import shutil
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import polars as pl

from forensics import plots
from forensics.analysis import NODE_PARSERS, analyze
from forensics.classifier import MAX_VOCAB, MIN_DF, NGRAM_RANGE, RANDOM_STATE, TRAIN_SEEDS, C, Model
from forensics.discovery import path_hints
from forensics.features import first_error_text, incident_features
from forensics.fitting import cross_validate, train
from forensics.signatures import load_catalog
from forensics.simulate import load_scenario, simulate
from forensics.timeline import assign_attempts

# Format variants for training seeds after the first: each knob changes with probability 1/2.
# The first training seed of every scenario keeps the scenario as written.
VARIANTS: dict[str, tuple] = {
    "nccl_version": ("2.10.3", "2.18.3", "2.21.5", "2.23.4", "2.27.3"),
    "pytorch_version": ("1.13", "2.1", "2.3", "2.4", "2.6"),
    "driver_version": ("470.82.01", "535.129.03", "550.90.07"),
    "kernel_log_style": ("dmesg_T", "journal_iso", "syslog", "uptime"),
    "nccl_debug": ("INFO", "WARN"),
    "launcher_prefix": ("none", "srun", "torchrun"),
    "framework": ("megatron", "deepspeed", "torchtitan", "hf"),
    "dcgm": (True, False),
}


def scenario_variant(scenario: dict, name: str, seed: int, plain: bool) -> dict:
    """The scenario with its `[job]` format knobs redrawn (deterministically from name + seed)."""
    if plain:
        return scenario
    rng = random.Random(f"classifier-variant:{name}:{seed}")
    job = dict(scenario.get("job", {}))
    for knob in sorted(VARIANTS):
        values = VARIANTS[knob]
        if rng.random() < 0.5:
            job[knob] = values[rng.randrange(len(values))]
    return {**scenario, "job": job}


@contextmanager
def _no_plots():
    """Training reads only the DuckDB store: skip drawing the report's PNGs (half the time)."""
    saved = plots.render_all
    plots.render_all = lambda *a, **k: {}  # noqa: ARG005
    try:
        yield
    finally:
        plots.render_all = saved


def store_frames(analysis) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:  # noqa: ANN001
    """(events with `attempt`, hits with `weight`, attempts) rebuilt from an analysis' DuckDB
    store, exactly as attribution saw them. The store keeps neither the events' attempt nor the
    hits' weight: the weight comes back from the signature catalog, and the attempt from the same
    pure steps the analysis ran (`discovery.path_hints` on each file's path for attempt folders,
    then `timeline.assign_attempts` on the stored, clock-corrected events and tables)."""
    events = analysis.sql("SELECT * FROM events ORDER BY event_id")
    files = analysis.sql("SELECT file_id, path, parser, first_ts, last_ts FROM files ORDER BY file_id")
    hint = {fid: path_hints(p)[2] for fid, p in files.select("file_id", "path").iter_rows()}
    hint = {k: v for k, v in hint.items() if v is not None}
    order = sorted(set(hint.values()))
    file_attempt = {fid: order.index(h) for fid, h in hint.items()}
    tables = {t: analysis.sql(f'SELECT * FROM "{t}"') for t in ("train_steps", "sched_records", "checkpoints")}
    proc = files.filter(pl.col("file_id").is_in(list(file_attempt)) & pl.col("first_ts").is_not_null()
                        & ~pl.col("parser").is_in(list(NODE_PARSERS)).fill_null(False))
    events, _ = assign_attempts(events, tables, file_attempt, proc.select("file_id", "first_ts", "last_ts"))
    attempts = analysis.attempts
    hits = analysis.sql("SELECT * FROM signature_hits ORDER BY event_id, signature")
    weights = {s.id: s.weight for s in load_catalog().signatures}
    hits = hits.with_columns(pl.col("signature").replace_strict(weights, default=1, return_dtype=pl.Int64)
                             .alias("weight"))
    return events, hits, attempts


def attempt_samples(events: pl.DataFrame, hits: pl.DataFrame, attempts: pl.DataFrame,
                    labels: dict[int, str]) -> list[tuple[dict[str, float], str, str, int]]:
    """(features, text, label, attempt) for every labelled attempt present in the analysis."""
    joined = hits.join(events, on="event_id", how="inner")
    out = []
    rows = {r["index"]: r for r in attempts.iter_rows(named=True)}
    for i in sorted(labels):
        if i not in rows:
            continue
        aj = joined.filter(pl.col("attempt") == i)
        ae = events.filter(pl.col("attempt") == i)
        out.append((incident_features(aj, ae, rows[i]), first_error_text(aj), labels[i], i))
    return out


def expected_labels(expected: dict) -> dict[int, str]:
    """attempt -> category of every interruption that ended an attempt (slow episodes excluded)."""
    out: dict[int, str] = {}
    for x in expected.get("interruptions", []):
        if x.get("kind") == "slowdown" or x.get("attempt") is None or not x.get("category"):
            continue
        out.setdefault(int(x["attempt"]), str(x["category"]))
    return out


@dataclass
class Sample:
    features: dict[str, float]
    text: str
    label: str
    scenario: str
    seed: int
    attempt: int
    variant: bool


def _case(args: tuple[str, int, str, bool]) -> tuple[list[Sample], str | None]:
    path, seed, workdir, plain = args
    name = Path(path).stem
    case_dir = Path(workdir) / f"{name}-{seed}"
    try:
        scen = scenario_variant(load_scenario(path), name, seed, plain)
        simulate(scen, case_dir, seed)
        expected = tomllib.loads((case_dir / "expected.toml").read_text(encoding="utf-8"))
        labels = expected_labels(expected)
        if not labels:
            return [], None
        with _no_plots():
            a = analyze(case_dir / "job", case_dir / "out")
        ev, hits, att = store_frames(a)
        return [Sample(f, t, y, name, seed, i, not plain) for f, t, y, i in attempt_samples(ev, hits, att, labels)], None
    except Exception as exc:  # noqa: BLE001 - a variant the simulator or analyzer cannot handle is skipped
        return [], f"{name} seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


def build_samples(scenario_paths: Sequence[Path | str], seeds: Sequence[int], workdir: Path | str, *,
                  jobs: int | None = None, variants: bool = True,
                  progress: Callable[[int, int], None] | None = None) -> tuple[list[Sample], list[str]]:
    """Simulate every scenario with every seed, analyze it, and return one sample per labelled
    interruption (sorted by scenario, seed, attempt) plus the cases that failed."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    seeds = list(seeds)
    tasks = [(str(p), s, str(workdir), (not variants) or k == 0)
             for p in sorted(map(str, scenario_paths)) for k, s in enumerate(seeds)]
    jobs = jobs or min(4, os.cpu_count() or 1)
    results: list[tuple[list[Sample], str | None]] = []
    if jobs <= 1 or len(tasks) <= 1:
        for k, t in enumerate(tasks):
            results.append(_case(t))
            if progress:
                progress(k + 1, len(tasks))
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as ex:
            for k, r in enumerate(ex.map(_case, tasks)):
                results.append(r)
                if progress:
                    progress(k + 1, len(tasks))
    samples = [s for r, _ in results for s in r]
    samples.sort(key=lambda s: (s.scenario, s.seed, s.attempt))
    return samples, [e for _, e in results if e]


def build_training_set(scenario_paths: Sequence[Path | str], seeds: Sequence[int], workdir: Path | str,
                       **kw) -> tuple[list[dict[str, float]], list[str], list[str]]:  # noqa: ANN003
    """(features, texts, labels) of every labelled interruption of the simulated cases."""
    samples, _ = build_samples(scenario_paths, seeds, workdir, **kw)
    return [s.features for s in samples], [s.text for s in samples], [s.label for s in samples]


def train_from_scenarios(scenario_paths: Sequence[Path | str], n_seeds: int, workdir: Path | str, *,
                         jobs: int | None = None, folds: int = 5,
                         progress: Callable[[int, int], None] | None = None) -> tuple[Model, dict]:
    """Build the training set, cross-validate (grouped by seed), fit on everything; returns the
    model (with the report in `meta`) and the report."""
    if not 1 <= n_seeds <= len(TRAIN_SEEDS):
        raise ValueError(f"seeds must be between 1 and {len(TRAIN_SEEDS)}")
    seeds = list(TRAIN_SEEDS[:n_seeds])
    samples, failed = build_samples(scenario_paths, seeds, workdir, jobs=jobs, progress=progress)
    if len({s.label for s in samples}) < 2:
        raise ValueError("the training set needs at least two categories")
    f = [s.features for s in samples]
    t = [s.text for s in samples]
    y = [s.label for s in samples]
    cv = cross_validate(f, t, y, [s.seed for s in samples], folds=folds) if n_seeds >= 2 else {}
    counts: dict[str, int] = {}
    for lab in y:
        counts[lab] = counts.get(lab, 0) + 1
    report = {
        "samples": len(samples), "scenarios": sorted({s.scenario for s in samples}), "seeds": seeds,
        "per_category": dict(sorted(counts.items())), "failed_cases": failed,
        "cv_accuracy": cv.get("accuracy"), "cv_brier": cv.get("brier"), "cv_folds": cv.get("folds"),
        "cv_errors": [f"{samples[i].scenario} seed {samples[i].seed} attempt {samples[i].attempt}: "
                      f"{samples[i].label} -> {p}" for i, p in cv.get("wrong", [])],
    }
    meta = {"training": {**{k: v for k, v in report.items() if k not in ("cv_errors", "failed_cases")},
                         "failed_cases": [e.split(":")[0] for e in failed]},
            "params": {"ngram_range": list(NGRAM_RANGE), "max_vocab": MAX_VOCAB, "min_df": MIN_DF, "C": C,
                       "class_weight": "balanced", "random_state": RANDOM_STATE}}
    model = train(f, t, y, meta=meta)
    return model, report

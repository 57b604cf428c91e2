"""`forensics eval`: run the analyzer over labelled cases and score it.

A case is a directory holding `expected.toml` and the job: either in `job/` (what the
simulator writes) or beside expected.toml. A real sample (`../shared/real-samples/NNN-*/`) is a
directory holding `case.toml` and the excerpt files beside it: its label uses a coarser category
vocabulary (`COARSE`, as the samples' README maps it), a healthy control (`expected_interruption =
false`) is right only with a `none` / `completed` verdict, no interruption and no culprit, and the
restart decision is scored against `recoverable_by_restart` where it is true or false. The primary interruption is compared: the verdict,
or for a job that completed after an interruption, its first interruption. Fields: kind,
category, domain, action, culprit host, culprit rank (each scored only where the case states
it). Calibration: Brier score of the confidence against category correctness, and a
reliability table.
"""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from forensics.analysis import analyze

FIELDS = ("kind", "category", "domain", "action", "culprit_host", "culprit_rank")
# the real samples' coarse categories (../shared/real-samples/README.md): project category -> the
# coarse labels it answers
COARSE: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    "gpu_lost": {"gpu_hardware"}, "gpu_other_hardware": {"gpu_hardware"}, "gpu_memory": {"gpu_memory_ecc"},
    "nvlink": {"nvlink"}, "gpu_driver_firmware": {"driver_firmware"}, "network_fabric": {"network_fabric"},
    "host_hardware": {"host_hardware"}, "storage": {"storage_filesystem"}, "nccl_config": {"nccl_config"},
    "cuda_error": {"unknown", "user_code"}, "oom": {"oom"}, "user_code": {"user_code"},
    "framework_bug": {"user_code"}, "numerics": {"user_code"}, "collective_desync": {"user_code"},
    "comm_hang_unknown": {"comm_hang_unknown"}, "preemption": {"scheduler_preemption"},
    "time_limit": {"scheduler_preemption"}, "user_cancelled": {"scheduler_preemption"},
    "straggler_hardware": {"straggler_slowdown"}, "slowdown_transient": {"straggler_slowdown"},
    "slowdown_workload": {"straggler_slowdown"}, "unknown": {"unknown"},
}.items()}


@dataclass
class CaseResult:
    name: str
    expected: dict
    got: dict
    correct: dict[str, bool]
    confidence: float
    error: str | None = None


@dataclass
class EvalResult:
    cases: list[CaseResult]
    accuracy: dict[str, float | None] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    confusion: pl.DataFrame = field(default_factory=pl.DataFrame)
    brier: float | None = None
    reliability: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if c.error or not all(c.correct.values())]

    def as_dict(self) -> dict:
        return {
            "cases": len(self.cases), "accuracy": self.accuracy, "scored": self.counts, "brier": self.brier,
            "confusion": self.confusion.to_dicts(), "reliability": self.reliability.to_dicts(),
            "failures": [{"case": c.name, "error": c.error, "expected": c.expected, "got": c.got,
                          "wrong": sorted(k for k, ok in c.correct.items() if not ok)} for c in self.failures],
        }


def find_cases(root: Path) -> list[Path]:
    if (root / "expected.toml").is_file() or (root / "case.toml").is_file():
        return [root]
    return sorted({p.parent for p in root.rglob("expected.toml")} | {p.parent for p in root.rglob("case.toml")
                                                                     if not (p.parent / "expected.toml").is_file()})


@dataclass
class RealSampleResult:
    name: str
    label: str  # coarse category, or "healthy"
    confidence: str  # of the label: high | medium | low
    got: str  # kind/category
    right: bool
    restart_want: str | None  # "true" / "false" / None (unknown)
    restart_got: bool | None
    error: str | None = None

    @property
    def restart_right(self) -> bool | None:
        if self.restart_want not in ("true", "false") or self.restart_got is None:
            return None
        return (self.restart_want == "true") == self.restart_got


def score_real_sample(name: str, meta: dict, rep: dict) -> RealSampleResult:
    gt = meta.get("ground_truth", {})
    v = rep.get("verdict") or {}
    healthy = meta.get("expected_interruption") is False
    cat = v.get("category")
    if healthy:
        quiet = v.get("kind") in ("none", "completed") and not rep.get("interruptions") \
            and not any((v.get("culprit") or {}).values())
        right = quiet or "straggler_slowdown" in COARSE.get(cat or "", frozenset())
    else:
        right = gt.get("category") in COARSE.get(cat or "", frozenset())
    want = gt.get("recoverable_by_restart")
    return RealSampleResult(name, "healthy" if healthy else str(gt.get("category")), str(gt.get("confidence", "low")),
                            f"{v.get('kind')}/{cat}", right, want if want in ("true", "false") else None,
                            v.get("auto_recoverable"))


def is_real_samples(root: Path) -> bool:
    """A folder of real samples (case.toml per case) rather than labelled jobs (expected.toml)."""
    return not any(root.rglob("expected.toml")) and any(root.rglob("case.toml"))


def evaluate_real_samples(root: Path | str, out: Path | str | None = None) -> list[RealSampleResult]:
    """Every real sample under `root` (folders with case.toml), analyzed from a copy of its excerpt
    files (case.toml left out: it is the label, not a log), scored as unseen real logs are."""
    results = []
    for case in sorted(p.parent for p in Path(root).rglob("case.toml")):
        meta = tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))
        with tempfile.TemporaryDirectory(prefix="forensics-eval-") as tmp:
            job = Path(tmp) / case.name[:3]
            job.mkdir()
            for f in case.iterdir():
                if f.is_file() and f.name != "case.toml":
                    shutil.copy(f, job / f.name)
            dest = Path(out) / case.name if out is not None else Path(tmp) / "out"
            try:
                rep = analyze(job, dest, html=False).report
            except Exception as exc:  # noqa: BLE001 - one broken case is a failure to report, not a crash
                gt = meta.get("ground_truth", {})
                results.append(RealSampleResult(case.name, str(gt.get("category")), str(gt.get("confidence", "low")),
                                                "error", False, None, None, f"{type(exc).__name__}: {exc}"))
                continue
        results.append(score_real_sample(case.name, meta, rep))
    return results


def real_sample_summary(results: list[RealSampleResult]) -> dict:
    firm = [r for r in results if r.confidence in ("high", "medium")]  # healthy controls included
    healthy = [r for r in results if r.label == "healthy"]
    rs = [r.restart_right for r in results if r.restart_right is not None]
    return {"cases": len(results), "right": sum(r.right for r in results),
            "category_high_medium": [sum(r.right for r in firm), len(firm)],
            "healthy_quiet": [sum(r.right for r in healthy), len(healthy)],
            "restart_agreement": [sum(rs), len(rs)]}


def real_sample_table(results: list[RealSampleResult]) -> str:
    """The per-case table (markdown) of docs/real-samples.md."""
    rows = ["| case | label (confidence) | verdict | right | restart (want / got) |", "|---|---|---|---|---|"]
    for r in results:
        restart = f"{r.restart_want or '?'} / {'-' if r.restart_got is None else str(r.restart_got).lower()}"
        rows.append(f"| {r.name} | {r.label} ({r.confidence}) | {r.got} | {'yes' if r.right else 'no'} | {restart} |")
    return "\n".join(rows) + "\n"


def expected_target(exp: dict) -> dict:
    """The interruption a case is judged on, as flat fields."""
    v = exp.get("verdict", {})
    if v.get("kind") == "completed" and exp.get("interruptions"):
        v = exp["interruptions"][0]
    return {k: v[k] for k in FIELDS if k in v}


def got_target(rep: dict) -> dict:
    v = rep["verdict"]
    if v["kind"] == "completed" and rep["interruptions"]:
        v = rep["interruptions"][0]
    c = v.get("culprit") or {}
    return {"kind": v.get("kind"), "category": v.get("category"), "domain": v.get("domain"),
            "action": v.get("action"), "culprit_host": c.get("host"), "culprit_rank": c.get("rank"),
            "confidence": v.get("confidence") or 0.0, "summary": v.get("summary")}


def score_case(name: str, exp: dict, rep: dict) -> CaseResult:
    want, got = expected_target(exp), got_target(rep)
    correct = {}
    for k in FIELDS:
        if k not in want:
            continue
        if k == "category" and want.get("kind") == "completed":
            continue
        correct[k] = got.get(k) == want[k]
    return CaseResult(name, want, got, correct, float(got["confidence"]))


def evaluate(cases_dir: Path | str, out: Path | str | None = None) -> EvalResult:
    root = Path(cases_dir)
    out_root = Path(out) if out is not None else None
    results: list[CaseResult] = []
    for case in find_cases(root):
        if not (case / "expected.toml").is_file():
            continue  # a real sample (case.toml): evaluate_real_samples scores it
        name = case.relative_to(root).as_posix() if case != root else case.name
        exp = tomllib.loads((case / "expected.toml").read_text(encoding="utf-8"))
        job = case / "job" if (case / "job").is_dir() else case
        dest = (out_root / name) if out_root else Path("forensics-out") / "eval" / name
        try:
            rep = analyze(job, dest, html=False).report
        except Exception as exc:  # noqa: BLE001 - one broken case is a failure to report, not a crash
            results.append(CaseResult(name, expected_target(exp), {}, dict.fromkeys(expected_target(exp), False),
                                      0.0, f"{type(exc).__name__}: {exc}"))
            continue
        results.append(score_case(name, exp, rep))
    return summarize(results)


def summarize(results: list[CaseResult]) -> EvalResult:
    res = EvalResult(results)
    for k in FIELDS:
        scored = [c.correct[k] for c in results if k in c.correct]
        res.counts[k] = len(scored)
        res.accuracy[k] = round(sum(scored) / len(scored), 4) if scored else None
    rows = [{"expected": c.expected.get("category") or c.expected.get("kind"),
             "got": (c.got.get("category") or c.got.get("kind")) if c.got else "error"} for c in results]
    if rows:
        df = pl.DataFrame(rows)
        res.confusion = df.group_by("expected", "got").len("n").sort("expected", "got")
    judged = [(c.confidence, float(c.correct.get("category", c.correct.get("kind", False)))) for c in results
              if "category" in c.correct or "kind" in c.correct]
    if judged:
        res.brier = round(sum((p - y) ** 2 for p, y in judged) / len(judged), 4)
        df = pl.DataFrame({"confidence": [p for p, _ in judged], "correct": [y for _, y in judged]})
        res.reliability = (df.with_columns((pl.col("confidence") * 5).floor().clip(0, 4).alias("bin"))
                           .group_by("bin").agg(pl.len().alias("n"), pl.col("confidence").mean().alias("mean_confidence"),
                                                pl.col("correct").mean().alias("accuracy")).sort("bin")
                           .with_columns((pl.col("bin") / 5).alias("from"), ((pl.col("bin") + 1) / 5).alias("to"))
                           .drop("bin").select("from", "to", "n", "mean_confidence", "accuracy"))
    return res

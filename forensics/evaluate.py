"""`forensics eval`: run the analyzer over labelled cases and score it.

A case is a directory holding `expected.toml` and the job: either in `job/` (what the
simulator writes) or beside expected.toml. The primary interruption is compared: the verdict,
or for a job that completed after an interruption, its first interruption. Fields: kind,
category, domain, action, culprit host, culprit rank (each scored only where the case states
it). Calibration: Brier score of the confidence against category correctness, and a
reliability table.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from forensics.analysis import analyze

FIELDS = ("kind", "category", "domain", "action", "culprit_host", "culprit_rank")


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
    if (root / "expected.toml").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("expected.toml"))


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

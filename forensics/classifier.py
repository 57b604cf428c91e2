"""The attribution classifier (DESIGN §6.3, docs/classifier.md).

Incident features (`forensics.features.incident_features`, one-hot/log counts through a
DictVectorizer) plus TF-IDF over character n-grams of the first error lines
(`first_error_text`) feed a multinomial LogisticRegression with balanced class weights. Training
uses scikit-learn and is deterministic (sorted samples, fixed random_state, sorted vocabularies).

The shipped artifact (`forensics/data/classifier.json`) is plain JSON: classes, feature names,
n-gram vocabulary, idf, coefficients and intercepts. `Model.predict_proba` re-implements the
pipeline with numpy from those numbers, so loading never unpickles anything and does not even
import scikit-learn.

Attribution asks `classify_incident(...)` for a `Prediction` and `arbitrate(...)` for the final
(category, confidence, method): the classifier names a category only where the rules found none.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import polars as pl

from forensics.features import first_error_text, incident_features

FORMAT = "forensics-classifier"
FORMAT_VERSION = 1
# Training seeds. The evaluation corpus uses seeds < 1000: keep them disjoint (a test checks).
TRAIN_SEEDS: tuple[int, ...] = tuple(range(1000, 1032))
DEFAULT_SEEDS = 3  # seeds per scenario for the shipped artifact (`forensics train --seeds`)
NGRAM_RANGE = (3, 5)
MAX_VOCAB = 2000
MIN_DF = 2
C = 4.0
TEXT_WEIGHT = 1.0
RANDOM_STATE = 0
SIG_DIGITS = 7  # coefficients / idf are stored with 7 significant digits

# arbitration (`arbitrate`, docs/classifier.md)
CLASSIFIER_TAKES_OVER = 0.8  # the probability at which the classifier names a category the rules could not
CLASSIFIER_DISCOUNT = 0.8  # its confidence is scaled by this when it alone decided

_WS = re.compile(r"\s\s+")


def char_wb_ngrams(text: str, ngram_range: tuple[int, int] = NGRAM_RANGE) -> list[str]:
    """Character n-grams inside word boundaries, words padded with a space (the same as
    scikit-learn's `char_wb` analyzer, after lower-casing). Used both by training (as the
    TfidfVectorizer analyzer) and by `Model.predict_proba`."""
    doc = _WS.sub(" ", (text or "").lower())
    lo, hi = ngram_range
    out: list[str] = []
    for w in doc.split():
        w = " " + w + " "
        n_w = len(w)
        for n in range(lo, hi + 1):
            off = 0
            out.append(w[off:off + n])
            while off + n < n_w:
                off += 1
                out.append(w[off:off + n])
            if off == 0:
                break
    return out


def _analyzer(text: str) -> list[str]:  # picklable, module level
    return char_wb_ngrams(text, NGRAM_RANGE)


def _round(x: float, digits: int = SIG_DIGITS) -> float:
    return float(f"{x:.{digits}g}")


# ---------------------------------------------------------------------------------- the model


@dataclass
class Model:
    classes: list[str]
    feature_names: list[str]  # DictVectorizer columns
    vocabulary: list[str]  # n-gram columns, in column order (after the feature columns)
    idf: list[float]
    coef: list[list[float]]  # one row per class (one row only for a two-class model)
    intercept: list[float]
    ngram_range: tuple[int, int] = NGRAM_RANGE
    sublinear_tf: bool = True
    text_weight: float = TEXT_WEIGHT
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._fidx = {n: i for i, n in enumerate(self.feature_names)}
        self._vidx = {g: i for i, g in enumerate(self.vocabulary)}
        self._idf = np.asarray(self.idf, dtype=np.float64)
        self._coef = np.asarray(self.coef, dtype=np.float64)
        self._b = np.asarray(self.intercept, dtype=np.float64)

    # numpy re-implementation of DictVectorizer + TfidfVectorizer + LogisticRegression
    def transform(self, features: Sequence[dict[str, float]], texts: Sequence[str]) -> np.ndarray:
        nf, nv = len(self.feature_names), len(self.vocabulary)
        x = np.zeros((len(features), nf + nv), dtype=np.float64)
        for row, (feats, text) in enumerate(zip(features, texts, strict=True)):
            for k, v in feats.items():
                j = self._fidx.get(k)
                if j is not None:
                    x[row, j] += float(v)
            if nv:
                tf = np.zeros(nv, dtype=np.float64)
                for g in char_wb_ngrams(text, self.ngram_range):
                    j = self._vidx.get(g)
                    if j is not None:
                        tf[j] += 1.0
                if self.sublinear_tf:
                    nz = tf > 0
                    tf[nz] = np.log(tf[nz]) + 1.0
                tf *= self._idf
                norm = float(np.sqrt(np.dot(tf, tf)))
                if norm > 0:
                    tf /= norm
                x[row, nf:] = tf * self.text_weight
        return x

    def predict_proba(self, features: Sequence[dict[str, float]], texts: Sequence[str]) -> np.ndarray:
        z = self.transform(features, texts) @ self._coef.T + self._b
        if self._coef.shape[0] == 1:  # binary: sklearn's one row is the second class
            p1 = 1.0 / (1.0 + np.exp(-z[:, 0]))
            return np.column_stack([1.0 - p1, p1])
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    # plain JSON, no pickle
    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "version": FORMAT_VERSION, "classes": list(self.classes),
            "features": list(self.feature_names),
            "text": {"analyzer": "char_wb", "lowercase": True, "ngram_range": list(self.ngram_range),
                     "sublinear_tf": self.sublinear_tf, "norm": "l2", "weight": self.text_weight,
                     "vocabulary": list(self.vocabulary), "idf": list(self.idf)},
            "coef": [list(r) for r in self.coef], "intercept": list(self.intercept), "meta": self.meta,
        }

    def to_json(self, path: Path | str) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n",
                     encoding="utf-8")
        return p

    @classmethod
    def from_dict(cls, d: dict) -> Model:
        if d.get("format") != FORMAT or d.get("version") != FORMAT_VERSION:
            raise ValueError(f"not a {FORMAT} v{FORMAT_VERSION} artifact")
        t = d["text"]
        if t.get("analyzer") != "char_wb" or t.get("norm") != "l2":
            raise ValueError("unsupported text vectorizer in the artifact")
        m = cls(classes=list(d["classes"]), feature_names=list(d["features"]), vocabulary=list(t["vocabulary"]),
                idf=[float(v) for v in t["idf"]], coef=[[float(v) for v in r] for r in d["coef"]],
                intercept=[float(v) for v in d["intercept"]], ngram_range=tuple(t["ngram_range"]),
                sublinear_tf=bool(t["sublinear_tf"]), text_weight=float(t["weight"]), meta=dict(d.get("meta", {})))
        ncol = len(m.feature_names) + len(m.vocabulary)
        nrow = 1 if len(m.classes) == 2 else len(m.classes)
        if m._coef.shape != (nrow, ncol) or len(m.intercept) != nrow or len(m.idf) != len(m.vocabulary):
            raise ValueError("artifact shapes do not match")
        return m

    @classmethod
    def from_json(cls, path: Path | str) -> Model:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


@dataclass
class Prediction:
    category: str
    confidence: float
    proba: dict[str, float]


def predict(model: Model, features: dict[str, float], text: str) -> tuple[str, float, dict[str, float]]:
    """(category, confidence = its probability, {category: probability})."""
    p = model.predict_proba([features], [text])[0]
    proba = {c: float(v) for c, v in zip(model.classes, p, strict=True)}
    best = max(sorted(proba), key=lambda c: proba[c])
    return best, proba[best], proba


def default_path():  # noqa: ANN201 - an importlib Traversable
    return resources.files("forensics").joinpath("data/classifier.json")


@lru_cache(maxsize=1)
def load_default() -> Model | None:
    """The shipped model (forensics/data/classifier.json), or None when it is missing."""
    p = default_path()
    if not p.is_file():
        return None
    return Model.from_dict(json.loads(p.read_text(encoding="utf-8")))


def classify_incident(hits_events: pl.DataFrame, attempt_events: pl.DataFrame, attempt: dict,
                      recurrence: dict[str, float] | None = None, model: Model | None = None) -> Prediction | None:
    """Classify one attempt's incident from the frames attribution holds (see
    forensics.features). None when no model is available."""
    m = model if model is not None else load_default()
    if m is None:
        return None
    cat, conf, proba = predict(m, incident_features(hits_events, attempt_events, attempt, recurrence),
                               first_error_text(hits_events))
    return Prediction(cat, conf, proba)


def arbitrate(rules_category: str, rules_confidence: float, prediction: Prediction | None) -> tuple[str, float, str]:
    """Final (category, confidence, method) of an interruption: the one policy attribution uses.

    The classifier names the category only where the rules could not (category `unknown`) and it
    is at least CLASSIFIER_TAKES_OVER sure (method "classifier", confidence scaled by
    CLASSIFIER_DISCOUNT); where it agrees with the rules it raises their confidence to its own
    ("rules+classifier"); otherwise the rules stand ("rules"). It does not override a rule:
    trained on a few simulated jobs per category, it confused comm_hang_unknown with
    collective_desync on the real samples (the difference is one line of evidence the rules
    read), so the rules keep the last word (measured with `forensics eval fixtures/jobs`)."""
    if prediction is None:
        return rules_category, rules_confidence, "rules"
    if (rules_category == "unknown" and prediction.category != "unknown"
            and prediction.confidence >= CLASSIFIER_TAKES_OVER):
        return prediction.category, round(prediction.confidence * CLASSIFIER_DISCOUNT, 2), "classifier"
    if prediction.category == rules_category:
        return rules_category, round(max(rules_confidence, prediction.confidence), 2), "rules+classifier"
    return rules_category, rules_confidence, "rules"


# ---------------------------------------------------------------------------------- training


@dataclass
class Fitted:
    """The scikit-learn objects of a training run (kept for tests and cross-validation)."""
    dv: object
    tfidf: object
    lr: object

    def matrix(self, features: Sequence[dict[str, float]], texts: Sequence[str]):  # noqa: ANN201
        from scipy.sparse import hstack

        xf = self.dv.transform(list(features))
        xt = self.tfidf.transform(list(texts)) * TEXT_WEIGHT
        return hstack([xf, xt]).tocsr()

    def predict_proba(self, features: Sequence[dict[str, float]], texts: Sequence[str]) -> np.ndarray:
        return self.lr.predict_proba(self.matrix(features, texts))


def fit_sklearn(features: Sequence[dict[str, float]], texts: Sequence[str], labels: Sequence[str], *,
                max_vocab: int = MAX_VOCAB, min_df: int = MIN_DF, c: float = C) -> Fitted:
    from scipy.sparse import hstack
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # one BLAS thread: same numbers everywhere, and no oversubscription
        return _fit(features, texts, labels, max_vocab, min_df, c, DictVectorizer, TfidfVectorizer,
                    LogisticRegression, hstack)


def _fit(features, texts, labels, max_vocab, min_df, c, DictVectorizer, TfidfVectorizer,  # noqa: ANN001, N803
         LogisticRegression, hstack) -> Fitted:  # noqa: ANN001, N803
    dv = DictVectorizer(sparse=True, sort=True)
    xf = dv.fit_transform(list(features))
    tfidf = TfidfVectorizer(analyzer=_analyzer, lowercase=False, sublinear_tf=True, norm="l2",
                            max_features=max_vocab, min_df=min(min_df, max(1, len(texts))), dtype=np.float64)
    try:
        xt = tfidf.fit_transform(list(texts))
    except ValueError:  # no text at all (empty vocabulary)
        tfidf = TfidfVectorizer(analyzer=_analyzer, lowercase=False, sublinear_tf=True, norm="l2", dtype=np.float64)
        xt = tfidf.fit_transform([t or "empty" for t in texts])
    x = hstack([xf, xt * TEXT_WEIGHT]).tocsr()
    lr = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, random_state=RANDOM_STATE, tol=1e-6)
    lr.fit(x, list(labels))
    return Fitted(dv, tfidf, lr)


def model_from_sklearn(fitted: Fitted, meta: dict | None = None) -> Model:
    """Export the fitted objects as plain numbers (rounded to SIG_DIGITS significant digits)."""
    dv, tfidf, lr = fitted.dv, fitted.tfidf, fitted.lr
    vocab = sorted(tfidf.vocabulary_, key=lambda g: tfidf.vocabulary_[g])
    return Model(
        classes=[str(c) for c in lr.classes_], feature_names=[str(n) for n in dv.feature_names_],
        vocabulary=vocab, idf=[_round(v) for v in tfidf.idf_],
        coef=[[_round(v) for v in row] for row in lr.coef_], intercept=[_round(v) for v in lr.intercept_],
        ngram_range=NGRAM_RANGE, sublinear_tf=True, text_weight=TEXT_WEIGHT, meta=dict(meta or {}),
    )


def train(features: Sequence[dict[str, float]], texts: Sequence[str], labels: Sequence[str],
          meta: dict | None = None, **kw) -> Model:  # noqa: ANN003
    """Fit on the samples in a canonical order (so the artifact does not depend on input order)."""
    order = sorted(range(len(labels)), key=lambda i: (labels[i], texts[i], json.dumps(features[i], sort_keys=True)))
    f = [features[i] for i in order]
    t = [texts[i] for i in order]
    y = [labels[i] for i in order]
    return model_from_sklearn(fit_sklearn(f, t, y, **kw), meta)


def brier(proba: np.ndarray, classes: Sequence[str], labels: Sequence[str]) -> float:
    """Multi-class Brier score: mean over samples of sum over classes of (p - y)^2."""
    idx = {c: i for i, c in enumerate(classes)}
    y = np.zeros_like(proba)
    for r, lab in enumerate(labels):
        if lab in idx:
            y[r, idx[lab]] = 1.0
    return float(np.mean(np.sum((proba - y) ** 2, axis=1)))


def cross_validate(features: Sequence[dict[str, float]], texts: Sequence[str], labels: Sequence[str],
                   groups: Sequence[object], folds: int = 5, **kw) -> dict:  # noqa: ANN003
    """Grouped K-fold (a group = one seed, so no simulated job is on both sides): accuracy,
    Brier score (probabilities of the JSON model), and the misclassified samples' indices."""
    from sklearn.model_selection import GroupKFold

    n = len(labels)
    keys = sorted(set(groups), key=str)
    folds = max(2, min(folds, len(keys)))
    gid = [keys.index(g) for g in groups]
    correct, briers, wrong = 0, [], []
    for tr, te in GroupKFold(n_splits=folds).split(np.zeros(n), labels, gid):
        m = train([features[i] for i in tr], [texts[i] for i in tr], [labels[i] for i in tr], **kw)
        p = m.predict_proba([features[i] for i in te], [texts[i] for i in te])
        # a class unseen in training gets probability 0
        full = [str(c) for c in sorted(set(labels))]
        pf = np.zeros((len(te), len(full)))
        for j, c in enumerate(m.classes):
            pf[:, full.index(c)] = p[:, j]
        briers.append(brier(pf, full, [labels[i] for i in te]) * len(te))
        for k, i in enumerate(te):
            pred = m.classes[int(np.argmax(p[k]))]
            if pred == labels[i]:
                correct += 1
            else:
                wrong.append((int(i), pred))
    return {"samples": n, "folds": folds, "accuracy": round(correct / n, 4) if n else None,
            "brier": round(sum(briers) / n, 4) if n else None, "wrong": sorted(wrong)}


# ------------------------------------------------------------------------- training data

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
    from forensics import plots

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
    from forensics.discovery import path_hints
    from forensics.signatures import load_catalog
    from forensics.timeline import assign_attempts

    events = analysis.sql("SELECT * FROM events ORDER BY event_id")
    files = analysis.sql("SELECT file_id, path, parser, first_ts, last_ts FROM files ORDER BY file_id")
    hint = {fid: path_hints(p)[2] for fid, p in files.select("file_id", "path").iter_rows()}
    hint = {k: v for k, v in hint.items() if v is not None}
    order = sorted(set(hint.values()))
    file_attempt = {fid: order.index(h) for fid, h in hint.items()}
    tables = {t: analysis.sql(f'SELECT * FROM "{t}"') for t in ("train_steps", "sched_records", "checkpoints")}
    proc = files.filter(pl.col("file_id").is_in(list(file_attempt)) & pl.col("first_ts").is_not_null()
                        & ~pl.col("parser").is_in(["kernel", "dcgm", "sacct"]).fill_null(False))
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
    from forensics.analysis import analyze
    from forensics.simulate import load_scenario, simulate

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

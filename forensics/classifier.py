"""The attribution classifier (DESIGN §6.3, docs/classifier.md).

Incident features (`forensics.features.incident_features`, one-hot/log counts through a
DictVectorizer) plus TF-IDF over character n-grams of the first error lines
(`first_error_text`) feed a multinomial LogisticRegression with balanced class weights. Training
uses scikit-learn and is deterministic (sorted samples, fixed random_state, sorted vocabularies):
the fit is `forensics.fitting`, the training set from simulated scenarios `forensics.training`;
this module holds the model, its parameters, the artifact and arbitration, and imports neither.

The shipped artifact (`forensics/data/classifier.json`) is plain JSON: classes, feature names,
n-gram vocabulary, idf, coefficients and intercepts. `Model.predict_proba` re-implements the
pipeline with numpy from those numbers, so loading never unpickles anything and does not even
import scikit-learn.

Attribution asks `classify_incident(...)` for a `Prediction` and `arbitrate(...)` for the final
(category, confidence, method): the classifier names a category only where the rules found none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
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

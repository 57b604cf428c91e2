"""Fitting (DESIGN §6.3, docs/classifier.md): scikit-learn objects fitted on samples, exported as
the plain-JSON `classifier.Model`, plus the Brier score and grouped cross-validation. Used by the
attribution classifier's training (`forensics.training`) and by the line classifier
(`forensics.line_classifier`). Only training imports scikit-learn; `classifier.Model` predicts
with numpy from the exported numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from forensics.classifier import (
    MAX_VOCAB,
    MIN_DF,
    NGRAM_RANGE,
    RANDOM_STATE,
    SIG_DIGITS,
    TEXT_WEIGHT,
    C,
    Model,
    char_wb_ngrams,
)


def _analyzer(text: str) -> list[str]:  # picklable, module level
    return char_wb_ngrams(text, NGRAM_RANGE)


def _round(x: float, digits: int = SIG_DIGITS) -> float:
    return float(f"{x:.{digits}g}")


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

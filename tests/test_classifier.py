"""The attribution classifier: plain-JSON artifact, numpy inference equal to scikit-learn's,
deterministic training, the shipped model, and a smoke prediction on a simulated case."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from forensics import classifier as clf
from forensics import fitting, training

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "forensics" / "data" / "classifier.json"

# hand-made incidents: (features, first error text, label)
SAMPLES = [
    ({"sig:xid-79": 0.69, "root_cat:gpu_lost": 0.69, "watchdog": 1.0, "exit:-6": 2.1}, "nvrm: xid (pci:pci): 0, gpu has fallen off the bus.", "gpu_lost"),
    ({"sig:xid-79": 1.1, "root_cat:gpu_lost": 1.1, "watchdog": 1.0}, "nvrm: gpu pci: gpu has fallen off the bus.", "gpu_lost"),
    ({"sig:xid-79": 0.69, "root_cat:gpu_lost": 0.69, "exit:-9": 0.69}, "nvrm: xid (pci:pci): 0, pid=0, gpu has fallen off the bus.", "gpu_lost"),
    ({"sig:pt-cuda-oom": 1.4, "root_cat:oom": 1.4, "exit:1": 0.69}, "torch.outofmemoryerror: cuda out of memory. tried to allocate 0.00 gib", "oom"),
    ({"sig:pt-cuda-oom": 0.69, "root_cat:oom": 0.69, "exit:1": 0.69, "phase:before_first_step": 1.0}, "runtimeerror: cuda out of memory. tried to allocate 0 mib", "oom"),
    ({"sig:kernel-host-oom-kill": 0.69, "root_cat:oom": 0.69, "exit:-9": 0.69}, "out of memory: killed process 0 (python)", "oom"),
    ({"watchdog": 1.0, "casc_cat:comm_hang_unknown": 3.0, "no_root": 1.0}, "[rank0]: watchdog caught collective operation timeout: worknccl(seqnum=0, optype=allreduce)", "comm_hang_unknown"),
    ({"watchdog": 1.0, "casc_cat:comm_hang_unknown": 2.5, "no_root": 1.0, "exit:-6": 1.0}, "watchdog caught collective operation timeout ran for 0 milliseconds", "comm_hang_unknown"),
    ({"watchdog": 1.0, "casc_cat:comm_hang_unknown": 2.0, "no_root": 1.0}, "", "comm_hang_unknown"),
]
F = [s[0] for s in SAMPLES]
T = [s[1] for s in SAMPLES]
Y = [s[2] for s in SAMPLES]


def test_train_seeds_are_disjoint_from_the_evaluation_seeds() -> None:
    assert clf.TRAIN_SEEDS and min(clf.TRAIN_SEEDS) >= 1000
    assert len(set(clf.TRAIN_SEEDS)) == len(clf.TRAIN_SEEDS)
    assert clf.DEFAULT_SEEDS <= len(clf.TRAIN_SEEDS)


def test_char_wb_ngrams_match_scikit_learn() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    text = "RuntimeError:  CUDA error: an illegal memory access\nwas encountered  x"
    sk = TfidfVectorizer(analyzer="char_wb", ngram_range=clf.NGRAM_RANGE).build_analyzer()
    assert clf.char_wb_ngrams(text) == sk(text)


@pytest.mark.parametrize("labels", [Y, [y if y == "oom" else "gpu_lost" for y in Y]], ids=["multiclass", "binary"])
def test_json_round_trip_gives_the_scikit_learn_probabilities(tmp_path: Path, labels: list[str]) -> None:
    fitted = fitting.fit_sklearn(F, T, labels, min_df=1)
    model = fitting.model_from_sklearn(fitted)
    path = model.to_json(tmp_path / "m.json")
    back = clf.Model.from_json(path)
    queries_f = F + [{"sig:xid-79": 0.5, "unseen-feature": 3.0}, {}]
    queries_t = T + ["gpu has fallen off the bus, never seen n-grams: qqqzzz", ""]
    want = fitted.predict_proba(queries_f, queries_t)
    got = back.predict_proba(queries_f, queries_t)
    assert list(back.classes) == [str(c) for c in fitted.lr.classes_]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0)
    # the JSON holds only plain numbers and strings
    d = json.loads(path.read_text())
    assert set(d) == {"format", "version", "classes", "features", "text", "coef", "intercept", "meta"}
    assert all(isinstance(v, float) for row in d["coef"] for v in row)


def test_predict_returns_category_confidence_and_probabilities() -> None:
    model = fitting.train(F, T, Y, min_df=1)
    cat, conf, proba = clf.predict(model, F[0], T[0])
    assert cat == "gpu_lost" and conf == proba["gpu_lost"] == max(proba.values())
    assert set(proba) == {"gpu_lost", "oom", "comm_hang_unknown"}
    assert sum(proba.values()) == pytest.approx(1.0)


def test_training_is_deterministic(tmp_path: Path) -> None:
    a = fitting.train(F, T, Y, min_df=1, meta={"x": 1}).to_json(tmp_path / "a.json")
    order = [5, 2, 8, 0, 7, 1, 3, 6, 4]  # input order does not matter either
    b = fitting.train([F[i] for i in order], [T[i] for i in order], [Y[i] for i in order], min_df=1,
                  meta={"x": 1}).to_json(tmp_path / "b.json")
    assert a.read_bytes() == b.read_bytes()


def test_from_json_rejects_a_foreign_or_broken_artifact(tmp_path: Path) -> None:
    d = fitting.train(F, T, Y, min_df=1).to_dict()
    with pytest.raises(ValueError):
        clf.Model.from_dict({**d, "format": "something-else"})
    with pytest.raises(ValueError):
        clf.Model.from_dict({**d, "intercept": d["intercept"][:-1]})


def test_no_unpickling_anywhere_in_the_classifier() -> None:
    imported = set()
    for name in ("classifier.py", "fitting.py", "training.py", "line_classifier.py"):
        tree = ast.parse((ROOT / "forensics" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    assert not imported & {"pickle", "cPickle", "joblib", "skops", "dill", "cloudpickle", "shelve"}


def test_the_shipped_artifact_is_plain_json_and_loads() -> None:
    assert SHIPPED.is_file(), "run `forensics train` to build forensics/data/classifier.json"
    assert SHIPPED.stat().st_size < 2_000_000
    d = json.loads(SHIPPED.read_text(encoding="utf-8"))
    assert d["format"] == clf.FORMAT
    clf.load_default.cache_clear()
    m = clf.load_default()
    assert m is not None and len(m.classes) >= 15
    tr = m.meta["training"]
    assert set(tr["seeds"]) <= set(clf.TRAIN_SEEDS)
    assert tr["samples"] >= 50


def test_arbitrate_is_the_policy_attribution_uses() -> None:
    import inspect

    from forensics import attribution
    assert "arbitrate(" in inspect.getsource(attribution._attribute_attempt)
    pred = clf.Prediction("gpu_lost", 0.85, {"gpu_lost": 0.85, "comm_hang_unknown": 0.1, "cuda_error": 0.05})
    # the rules found no cause and the classifier is sure: it names the category, discounted
    assert clf.arbitrate("unknown", 0.3, pred) == ("gpu_lost", round(0.85 * clf.CLASSIFIER_DISCOUNT, 2), "classifier")
    # below the take-over probability the rules' unknown stands
    weak = clf.Prediction("gpu_lost", 0.6, {"gpu_lost": 0.6, "comm_hang_unknown": 0.4})
    assert clf.arbitrate("unknown", 0.3, weak) == ("unknown", 0.3, "rules")
    # the rules named a category: the classifier never overrides it, agreement raises the confidence
    assert clf.arbitrate("comm_hang_unknown", 0.6, pred) == ("comm_hang_unknown", 0.6, "rules")
    assert clf.arbitrate("gpu_lost", 0.7, pred) == ("gpu_lost", 0.85, "rules+classifier")
    assert clf.arbitrate("gpu_lost", 0.95, pred) == ("gpu_lost", 0.95, "rules+classifier")
    assert clf.arbitrate("cuda_error", 0.7, None) == ("cuda_error", 0.7, "rules")


def test_smoke_prediction_on_a_simulated_gpu_lost_case(tmp_path: Path) -> None:
    """The training-data path (simulate -> analyze -> store frames -> features) on one case, then
    the shipped model's verdict on it."""
    samples, failed = training.build_samples([ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"], [3], tmp_path,
                                             jobs=1, variants=False)
    assert not failed
    assert [(s.label, s.attempt) for s in samples] == [("gpu_lost", 0)]
    s = samples[0]
    assert s.features["sig:xid-79"] > 0 and s.features["root_cat:gpu_lost"] > 0
    assert "surprise down error" in s.text  # the PCIe AER lines precede the Xid 79
    clf.load_default.cache_clear()
    model = clf.load_default()
    assert model is not None
    cat, conf, proba = clf.predict(model, s.features, s.text)
    assert cat == "gpu_lost" and conf > 0.5, proba

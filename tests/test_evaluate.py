"""The evaluation corpus and its bar (issue 4): at least 80 labelled jobs, every taxonomy
category at least twice, simulated at test time with seeds disjoint from the classifier's
training seeds, plus the labelled real-sample jobs; >= 95 % category and >= 90 % culprit-host
accuracy."""

from __future__ import annotations

import shutil
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from forensics.evaluate import evaluate, expected_target, score_case, summarize
from forensics.simulate import load_scenario, simulate
from forensics.taxonomy import taxonomy

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml"))
EVAL_SEEDS = (11, 12)


def test_eval_seeds_disjoint_from_training_seeds() -> None:
    from forensics.classifier import TRAIN_SEEDS
    assert not set(EVAL_SEEDS) & set(TRAIN_SEEDS)
    assert 101 not in TRAIN_SEEDS  # tests/test_e2e.py's seed


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eval-corpus")
    for scen in SCENARIOS:
        spec = load_scenario(scen)
        for seed in EVAL_SEEDS:
            simulate(spec, root / "sim" / f"{scen.stem}-{seed}", seed)
    shutil.copytree(ROOT / "fixtures" / "jobs", root / "real")
    return root


@pytest.mark.corpus
def test_corpus_covers_every_category_twice(corpus: Path) -> None:
    cats: Counter[str] = Counter()
    n = 0
    for exp_path in corpus.rglob("expected.toml"):
        n += 1
        want = expected_target(tomllib.loads(exp_path.read_text()))
        cats[want.get("category") or ("completed" if want.get("kind") == "completed" else "?")] += 1
    assert n >= 80
    missing = {c: cats[c] for c in taxonomy() if cats[c] < 2}
    assert not missing, missing


@pytest.mark.corpus
def test_eval_accuracy_bar(corpus: Path, tmp_path: Path) -> None:
    res = evaluate(corpus, tmp_path / "out")
    assert len(res.cases) >= 80
    wrong = [(c.name, c.expected, {k: c.got.get(k) for k in ("category", "culprit_host")}) for c in res.failures
             if not c.correct.get("category", True) or not c.correct.get("culprit_host", True) or c.error]
    assert res.accuracy["category"] >= 0.95, wrong
    assert res.accuracy["culprit_host"] >= 0.90, wrong
    assert res.counts["culprit_host"] >= 30
    assert res.brier is not None and 0 <= res.brier <= 1
    assert set(res.confusion.columns) == {"expected", "got", "n"}


def test_scoring_rules() -> None:
    exp = {"verdict": {"kind": "completed"}, "interruptions": [
        {"kind": "preemption", "category": "preemption", "culprit_host": "node-001"}]}
    rep = {"verdict": {"kind": "completed", "culprit": {}}, "interruptions": [
        {"kind": "preemption", "category": "preemption", "domain": "scheduler", "action": "restart",
         "culprit": {"host": "node-002", "rank": None}, "confidence": 0.9, "summary": "x"}]}
    c = score_case("x", exp, rep)
    assert c.correct == {"kind": True, "category": True, "culprit_host": False}
    res = summarize([c])
    assert res.accuracy["category"] == 1.0 and res.accuracy["culprit_host"] == 0.0
    assert res.brier == pytest.approx((0.9 - 1.0) ** 2)


def test_real_samples_are_scored_as_unseen_logs(tmp_path: Path) -> None:
    from forensics.evaluate import (
        evaluate_real_samples,
        is_real_samples,
        real_sample_summary,
        real_sample_table,
    )

    root = tmp_path / "samples"
    xid = root / "901-dmesg-xid79"
    xid.mkdir(parents=True)
    (xid / "dmesg.log").write_text(
        "[Mon May  6 10:00:01 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
        "[Mon May  6 10:00:01 2024] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n")
    (xid / "case.toml").write_text('source_url = "x"\n[ground_truth]\ncategory = "gpu_hardware"\n'
                                   'recoverable_by_restart = "false"\nconfidence = "high"\n')
    healthy = root / "902-healthy-steps"
    healthy.mkdir()
    (healthy / "train.log").write_text("".join(
        f"2024-05-06 10:{i:02d}:00 | INFO | step {i}/50 | loss {3 - i / 50:.3f} | 0.84 s/step\n" for i in range(1, 40)))
    (healthy / "case.toml").write_text('source_url = "x"\nexpected_interruption = false\n[ground_truth]\n'
                                       'category = "unknown"\nconfidence = "medium"\n')
    assert is_real_samples(root)
    labelled = tmp_path / "labelled" / "case"
    labelled.mkdir(parents=True)
    (labelled / "expected.toml").write_text('[verdict]\nkind = "crash"\n')
    assert not is_real_samples(tmp_path / "labelled")
    res = {r.name: r for r in evaluate_real_samples(root)}
    assert res["901-dmesg-xid79"].got == "crash/gpu_lost" and res["901-dmesg-xid79"].right
    # case.toml is the label, not a log: the analyzer never read it (no error line taken from it)
    assert res["901-dmesg-xid79"].restart_want == "false"
    assert res["902-healthy-steps"].label == "healthy"
    summary = real_sample_summary(list(res.values()))
    assert summary["cases"] == 2 and summary["category_high_medium"][1] == 2
    table = real_sample_table(list(res.values()))
    assert "| 901-dmesg-xid79 | gpu_hardware (high) | crash/gpu_lost | yes |" in table

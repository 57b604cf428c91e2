"""Fixtures shared by the test modules of this layer (tests/hostile/ has its own conftest)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def job_of(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """`job_of(files)`: tmp_path/job holding `files` ({relative path: text}, folders made as needed)."""
    def write(files: dict[str, str]) -> Path:
        job = tmp_path / "job"
        for rel, text in files.items():
            p = job / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        return job
    return write


DOWNTIME_BUCKETS = ("wall_s", "productive_s", "startup_s", "checkpoint_s", "lost_work_s", "termination_s",
                    "restart_s", "slowdown_s")


def _downtime_holds(got: dict, truth: dict, *context: object) -> None:
    """DESIGN §7: every bucket within max(30 s, 1 % of wall) of the truth, goodput within 0.01."""
    tol = max(30.0, 0.01 * truth["wall_s"])
    for bucket in DOWNTIME_BUCKETS:
        assert abs(got[bucket] - truth[bucket]) <= tol, (bucket, got, truth, *context)
    assert abs(got["goodput"] - truth["goodput"]) <= 0.01, (got, truth, *context)


def _primary(expected: dict, report: dict) -> tuple[dict, dict]:
    """(expected, got) for the verdict; for a job that completed after an interruption (a
    preemption that was requeued, a straggler), its first interruption."""
    ev = expected["verdict"]
    if ev["kind"] == "completed" and expected.get("interruptions"):
        got = report["interruptions"][0] if report["interruptions"] else {"kind": None, "category": None,
                                                                          "culprit": {"host": None}}
        return expected["interruptions"][0], got
    return ev, report["verdict"]


@pytest.fixture
def downtime_holds() -> Callable[..., None]:
    """`downtime_holds(report_downtime, truth_downtime, *context)`: the scenario tolerance check."""
    return _downtime_holds


@pytest.fixture
def primary() -> Callable[[dict, dict], tuple[dict, dict]]:
    """`primary(expected, report)`: the (expected, got) pair a scenario's verdict is judged on."""
    return _primary


@pytest.fixture(scope="session")
def bench_module() -> Callable[[str], ModuleType]:
    """`bench_module(name)`: the script bench/<name>.py loaded as a module (bench/ is no package)."""
    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load


def _fresh_verdict_holds(report: dict, category: str, signature: str | None, culprit: dict, cite: tuple[str, int] | None,
                         restart: bool | None, kind: str | None = None, why: str = "") -> None:
    """A held-out real case's verdict (tests/test_fresh_*.py): `none` for a log where nothing failed
    (no interruption, no culprit); else the category (and `kind` when given), the deciding signature
    and its (file name, line) when the case names them, the culprit fields in `culprit` ({"host": ..},
    {"pci_bus_id": ..}, ...), and the restart answer where the thread states one (`why`: the note
    shown when it disagrees)."""
    v = report["verdict"]
    if category == "none":
        assert v["kind"] in ("none", "completed") and not report["interruptions"], v["summary"]
        assert v["culprit"]["host"] is None
        return
    assert v["category"] == category, v["summary"]
    if kind is not None:
        assert v["kind"] == kind, v["summary"]
    if signature is not None:
        assert v["evidence"][0]["signature"] == signature
        assert cite is not None and (Path(v["evidence"][0]["path"]).name, v["evidence"][0]["line"]) == cite
    assert {k: v["culprit"][k] for k in culprit} == culprit
    if restart is not None:
        assert v["auto_recoverable"] is restart, why


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `fresh_cases` (a held-out batch's, tests/test_fresh_*.py) runs once per case of its
    module's CASES, in sorted order; a case in the module's XFAIL (case -> why the analyzer still gets it
    wrong) is a strict xfail with that reason, so a fix shows as a failure to remove it from XFAIL."""
    if metafunc.definition.get_closest_marker("fresh_cases") is None:
        return
    cases, xfail = metafunc.module.CASES, getattr(metafunc.module, "XFAIL", {})
    assert set(xfail) <= set(cases), sorted(set(xfail) - set(cases))
    metafunc.parametrize("case", [
        pytest.param(c, marks=pytest.mark.xfail(reason=xfail[c], strict=True)) if c in xfail else c
        for c in sorted(cases)])


@pytest.fixture
def fresh_verdict_holds() -> Callable[..., None]:
    """`fresh_verdict_holds(report, category, signature, culprit, cite, restart, kind=None, why="")`."""
    return _fresh_verdict_holds

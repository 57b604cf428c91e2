"""The commands around the tests: `make test` never installs system packages (CI's .ci/run
installs chromium before it), the browser test says in one line why it is skipped, and
`make test-fast` leaves out the browser, the notebooks and the evaluation corpus."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALLERS = re.compile(r"\b(apt-get|apt|dnf|yum|apk|brew|snap)\b\s+(install|add)|sudo\b")


def make_n(target: str) -> str:
    r = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_make_test_installs_no_system_package() -> None:
    for target in ("test", "test-fast"):
        text = make_n(target)
        assert "pytest" in text
        assert not INSTALLERS.search(text), text


def test_ci_installs_chromium_before_make_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    upd, inst, mk = ci.find("apt-get update -qq"), ci.find("apt-get install -y"), ci.rfind("make test")
    assert 0 <= upd < inst < mk, ci
    assert "DEBIAN_FRONTEND=noninteractive" in ci and " chromium" in ci[inst:mk]


def test_test_fast_deselects_browser_notebooks_corpus() -> None:
    text = make_n("test-fast")
    m = re.search(r'-m "([^"]+)"', text)
    assert m, text
    assert all(f"not {k}" in m.group(1) for k in ("browser", "notebooks", "corpus"))
    # the markers are on the modules they name
    assert "pytest.mark.browser" in (ROOT / "tests" / "test_browser.py").read_text()
    assert "pytest.mark.notebooks" in (ROOT / "tests" / "test_notebooks.py").read_text()
    assert "pytest.mark.notebooks" in (ROOT / "tests" / "test_notebook_weekly.py").read_text()
    assert (ROOT / "tests" / "test_evaluate.py").read_text().count("pytest.mark.corpus") == 2


def test_browser_test_skips_with_one_line_reason_without_chromium(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no chromium on this PATH
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "test_browser.py")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode in (0, 5), r.stdout[-2000:]  # 5: alone, the module collects nothing (skipped)
    skips = [ln for ln in r.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert len(skips) == 1 and "no chromium found" in skips[0], r.stdout
    assert re.search(r"\b1 skipped\b", r.stdout)

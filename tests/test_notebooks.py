"""The job-level notebooks run headless, top to bottom, on fixtures, with the public API only,
and are committed with outputs no older than their code (`make notebooks`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.notebooks
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["01_investigate_a_job.ipynb", "03_attribution_model.ipynb"]
PRIVATE = re.compile(r"(?m)(\bimport\s+forensics\.\w*\._|from\s+forensics[\w.]*\s+import\s+_|\b(fa|a|b)\._\w+)")


def _load(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / name, as_version=4)


def _run_module():  # noqa: ANN202 - notebooks/run.py (`make notebooks`), loaded by path
    spec = importlib.util.spec_from_file_location("notebooks_run", ROOT / "notebooks" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_saved_outputs(nb: nbformat.NotebookNode, name: str) -> list:
    """Committed with outputs (`make notebooks`), and not older than the code: the hash of the
    code cells stored when it ran equals the hash of the code cells now."""
    stored = nb.metadata.get("forensics", {}).get("code_sha256")
    assert stored == _run_module().code_hash(nb), f"{name}: code changed since its outputs; run `make notebooks`"
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in cells), f"{name}: not every cell ran"
    outs = [o for c in cells for o in c.outputs]
    assert outs and not [o for o in outs if o.output_type == "error"]
    return outs


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_with_fresh_outputs_and_public_api_only(name: str) -> None:
    nb = _load(name)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not PRIVATE.search(cell.source), cell.source
            assert "tests" not in re.findall(r"from\s+(\w+)", cell.source)
    outs = check_saved_outputs(nb, name)
    images = [o for o in outs if "image/png" in o.get("data", {})]
    assert len(images) >= (4 if name.startswith("01") else 1)
    assert "when `forensics.evaluate` lands" not in "".join(c.source for c in nb.cells).lower()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name: str, tmp_path: Path) -> None:
    nb = _load(name)
    client = NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    images = [o for o in outs if "image/png" in o.get("data", {})]
    if name.startswith("01"):
        assert len(images) >= 4  # timeline, step time, heatmap, downtime
        text = "".join(o.get("text", "") for o in outs)
        assert "report.html" in text and "gpu_lost" in text
    else:
        assert len(images) >= 1  # the confusion matrix

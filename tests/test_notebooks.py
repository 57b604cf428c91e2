"""The job-level notebooks run headless, top to bottom, on fixtures, with the public API only,
and are committed without outputs."""

from __future__ import annotations

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


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_without_outputs_and_public_api_only(name: str) -> None:
    nb = _load(name)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear outputs before committing"
            assert not PRIVATE.search(cell.source), cell.source
            assert "tests" not in re.findall(r"from\s+(\w+)", cell.source)


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

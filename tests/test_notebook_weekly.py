"""Notebook 02 (weekly fleet reliability) runs headless, top to bottom, on simulated jobs, with the
public API only, and is committed with outputs no older than its code (`make notebooks`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.notebooks
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_weekly_reliability.ipynb"
PRIVATE = re.compile(r"(?m)(\bimport\s+forensics\.\w*\._|from\s+forensics[\w.]*\s+import\s+_|\b(fleet|weekly)\._\w+)")


def test_committed_with_fresh_outputs_and_public_api_only() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not PRIVATE.search(cell.source), cell.source
    spec = importlib.util.spec_from_file_location("notebooks_run", ROOT / "notebooks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    assert nb.metadata.get("forensics", {}).get("code_sha256") == run.code_hash(nb), "run `make notebooks`"
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in cells)
    outs = [o for c in cells for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    assert len([o for o in outs if "image/png" in o.get("data", {})]) >= 3
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outs)
    assert "12 jobs ingested" in text and "weekly.html" in text


def test_notebook_executes(monkeypatch) -> None:
    monkeypatch.delenv("FORENSICS_FLEET_STORE", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    images = [o for o in outs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # the three trend plots
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outs)
    assert "12 jobs ingested, 0 failed" in text
    assert "node-001: 2 jobs" in text and "weekly.html" in text

"""Execute the notebooks top to bottom and save them with their outputs (`make notebooks`).

Each saved notebook records in its metadata (`forensics.code_sha256`) the hash of its code cells
as they were run, so a test can tell outputs older than the code (tests/test_notebooks.py).

    python notebooks/run.py [NAME.ipynb ...]     # default: every notebook here
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 600


def code_hash(nb: nbformat.NotebookNode) -> str:
    """sha256 of the notebook's code cells, in order (their sources only)."""
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode("utf-8") + b"\n\x00")
    return h.hexdigest()


def execute(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(HERE)}}).execute()
    for cell in nb.cells:  # run ids and timings change every run: keep the saved file stable
        cell.metadata.pop("execution", None)
    nb.metadata.setdefault("forensics", {})["code_sha256"] = code_hash(nb)
    return nb


def main(names: list[str]) -> int:
    paths = [HERE / n for n in names] if names else sorted(HERE.glob("*.ipynb"))
    for p in paths:
        print(f"executing {p.name}", flush=True)
        nbformat.write(execute(p), p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""notebooks/paper_analyses.ipynb executes top to bottom (small size) and is stored without outputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "paper_analyses.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_paper_analyses_notebook_runs_on_the_demo(tmp_path, monkeypatch):
    # a python3 kernel of this very interpreter (the venv), whatever kernels the machine has installed
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (rcp-jax tests)", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("RCP_JAX_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell

    text = "\n".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "10 queries" in text  # the small size was used
    assert "rcp_ndcg" in text and "2PL calibrated" in text
    assert "majority" in text and "always first     0/10" in text  # the position-biased control decides nothing
    last = nb.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "ideal lists: RCP share of decided (majority)" in last and "simulated graders" in last

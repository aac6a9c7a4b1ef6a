"""notebooks/paper_analyses.ipynb executes top to bottom (small size) and is stored without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "paper_analyses.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.slow
def test_paper_analyses_notebook_runs_on_the_demo(execute_notebook):
    nb = execute_notebook(NOTEBOOK, timeout=300)

    text = "\n".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "10 queries" in text  # the small size was used
    assert "rcp_ndcg" in text and "2PL calibrated" in text
    assert "majority" in text and "always first     0/10" in text  # the position-biased control decides nothing
    last = nb.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "ideal lists: RCP share of decided (majority)" in last and "simulated graders" in last

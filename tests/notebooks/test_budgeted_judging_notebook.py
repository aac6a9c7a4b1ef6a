"""notebooks/budgeted_judging.ipynb executes top to bottom at its tiny size and is stored without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "budgeted_judging.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.slow
def test_budgeted_notebook_runs_small(execute_notebook):
    nb = execute_notebook(NOTEBOOK, timeout=600)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "3 queries x 8 documents, 4 systems" in text
    assert "full protocol:" in text and "budgeted:" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the curve was drawn

"""notebooks/budgeted_judging.ipynb executes top to bottom at its tiny size."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.notebooks import printed_text

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "budgeted_judging.ipynb"


@pytest.mark.slow
def test_budgeted_notebook_runs_small(execute_notebook):
    nb = execute_notebook(NOTEBOOK, timeout=600)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = printed_text(nb)
    assert "3 queries x 8 documents, 4 systems" in text
    assert "full protocol:" in text and "budgeted:" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the curve was drawn

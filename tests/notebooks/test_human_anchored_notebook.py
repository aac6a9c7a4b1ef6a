"""notebooks/human_anchored.ipynb executes top to bottom in its small mode (10%, 25%, 50% labelled)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.notebooks import printed_text

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "human_anchored.ipynb"


@pytest.mark.slow
def test_human_anchored_notebook_runs_small(execute_notebook):
    nb = execute_notebook(NOTEBOOK, timeout=300)
    text = printed_text(nb)
    assert "200 queries, systems A, B, C, D" in text
    for fraction in ("10%", "25%", "50%"):
        assert f"{fraction} labelled: coverage anchored" in text
    assert "assumptions:" in text
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs)

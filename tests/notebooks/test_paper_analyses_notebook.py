"""notebooks/paper_analyses.ipynb executes top to bottom (small size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.notebooks import printed_text

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "paper_analyses.ipynb"


@pytest.mark.slow
def test_paper_analyses_notebook_runs_on_the_demo(execute_notebook):
    nb = execute_notebook(NOTEBOOK, timeout=300)

    text = printed_text(nb)
    assert "10 queries" in text  # the small size was used
    assert "rcp_ndcg" in text and "2PL calibrated" in text
    assert "majority" in text and "always first     0/10" in text  # the position-biased control decides nothing
    last = nb.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "ideal lists: RCP share of decided (majority)" in last and "simulated graders" in last

"""Execute notebooks/bayesian_uncertainty.ipynb in its small mode (code cells exec'd in order)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import matplotlib

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "bayesian_uncertainty.ipynb"


def test_notebook_runs_in_small_mode(monkeypatch, noisy_posteriors):
    # noisy_posteriors: the notebook's small mode fits the same collection with the same settings, so the
    # compiled samplers of that fixture are reused here.
    matplotlib.use("Agg")
    monkeypatch.setenv("RCP_NOTEBOOK_SMALL", "1")
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4
    namespace: dict = {"__name__": "__notebook__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
            source = "".join(cell["source"])
            exec(compile(source, f"{NOTEBOOK.name}[code cell {i}]", "exec"), namespace)  # noqa: S102
    assert os.environ["RCP_NOTEBOOK_SMALL"] == "1" and namespace["SMALL"]
    summary = namespace["summary"]
    assert summary.loc["posterior (joint model)", "called wrong"] == 0

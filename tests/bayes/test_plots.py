"""Plots render headless and save to files."""

from __future__ import annotations

from matplotlib.figure import Figure

from rcp_jax.plots_bayes import plot_item_curves, plot_pairwise_forest
from rcp_jax.posterior import posterior_metrics


def test_forest_plot_with_rope(frozen_posterior, run_table, tmp_path):
    met = posterior_metrics(run_table, frozen_posterior, n_bootstrap=100)
    fig = plot_pairwise_forest(met, path=tmp_path / "forest.png")
    assert isinstance(fig, Figure)
    assert (tmp_path / "forest.png").stat().st_size > 5000
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == len(met.pairs)


def test_item_curves_with_bands(frozen_posterior, tmp_path):
    fig = plot_item_curves(frozen_posterior, path=tmp_path / "icc.svg")
    assert len(fig.axes) == 2
    assert len(fig.axes[0].get_lines()) == 5
    assert (tmp_path / "icc.svg").read_text().startswith("<?xml")

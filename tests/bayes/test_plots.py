"""Plots render headless and save to files."""

from __future__ import annotations

import dataclasses

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from rcp_jax.bayes import posterior_metrics
from rcp_jax.plots import plot_item_curves, plot_pairwise_forest


def test_forest_plot_with_rope(frozen_posterior, run_table, tmp_path):
    met = posterior_metrics(run_table, frozen_posterior, n_bootstrap=100)
    fig = plot_pairwise_forest(met, path=tmp_path / "forest.png")
    assert isinstance(fig, Figure)
    assert (tmp_path / "forest.png").stat().st_size > 5000
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == len(met.pairs)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    legend_box = ax.get_legend().get_window_extent(canvas.get_renderer())
    assert legend_box.y0 >= ax.get_window_extent(canvas.get_renderer()).y1 - 1  # title and keys sit above the axes


def test_forest_plot_colours_each_pair_by_its_decision(frozen_posterior, run_table):
    met = posterior_metrics(run_table, frozen_posterior, n_bootstrap=50)
    pairs = met.pairs.loc[met.pairs.index.repeat(3)].reset_index(drop=True)  # at least three rows
    pairs["system_b"] = [f"{b}#{i}" for i, b in enumerate(pairs["system_b"])]
    pairs["delta"] = [0.30 + 0.01 * i for i in range(len(pairs))]  # fixes the row order: largest |delta| on top
    pairs["call"] = "A>B"
    pairs.loc[0, "call"] = "equivalent"
    pairs.loc[1, "call"] = "undecided"
    pairs.loc[2, "call"] = "B>A"
    fig = plot_pairwise_forest(dataclasses.replace(met, pairs=pairs), max_pairs=None)
    thick = fig.axes[0].collections[1]  # [0] combined intervals, [1] calibration intervals, [2] the means
    colours = [tuple(c) for c in thick.get_colors()]  # bottom row first: the smallest |delta|
    assert colours[0] == to_rgba("tab:green") and colours[1] == to_rgba("0.45")
    assert all(c == to_rgba("tab:blue") for c in colours[2:])
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels[0].endswith(" equivalent") and labels[0].startswith("P(|A-B|<0.02)")
    assert labels[1].endswith(" undecided") and labels[2].endswith(" B>A") and labels[3].endswith(" A>B")


def test_item_curves_with_bands(frozen_posterior, tmp_path):
    fig = plot_item_curves(frozen_posterior, path=tmp_path / "icc.svg")
    assert len(fig.axes) == 2
    assert len(fig.axes[0].get_lines()) == 5
    assert (tmp_path / "icc.svg").read_text().startswith("<?xml")

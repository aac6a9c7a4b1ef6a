"""Figures (matplotlib, headless): the report figures the commands write, Bayesian and diagnostic plots.

- :mod:`rcp_jax.plots.report`: item curves, per-query calibration, leaderboard with intervals, nDCG
  spread, the meta-evaluation scatter (system means, a metric vs qrel-nDCG), and the sets ``rcp-jax fit`` / ``evaluate`` / ``demo`` write.
- :mod:`rcp_jax.plots.bayes`: the pairwise posterior forest and item curves with posterior bands.
- :mod:`rcp_jax.plots.diagnostics`: the reliability diagram of predicted rubric answers.

Nothing outside the CLI imports this package at module level: plotting is a last step, never a dependency.
"""

from rcp_jax.plots.bayes import plot_item_curves, plot_pairwise_forest
from rcp_jax.plots.diagnostics import plot_reliability
from rcp_jax.plots.report import (
    METRIC_LABELS,
    bootstrap_leaderboard,
    item_curves,
    leaderboard_bars,
    meta_evaluation_scatter,
    ndcg_distribution,
    query_calibration,
    write_calibration_plots,
    write_evaluation_plots,
    write_report_plots,
)

__all__ = [
    "METRIC_LABELS",
    "item_curves",
    "query_calibration",
    "bootstrap_leaderboard",
    "leaderboard_bars",
    "meta_evaluation_scatter",
    "ndcg_distribution",
    "write_calibration_plots",
    "write_evaluation_plots",
    "write_report_plots",
    "plot_item_curves",
    "plot_pairwise_forest",
    "plot_reliability",
]

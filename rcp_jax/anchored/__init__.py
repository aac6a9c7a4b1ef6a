"""Human-anchored comparisons: a few human labels make judge-based system comparisons unbiased.

``ppi`` (prediction-powered means and their intervals, the array layer), ``comparison`` (per-query tables to
each system's and each pair's human-metric estimate, beside the human-only and judge-only ones), ``active``
(which queries to label next, with recorded probabilities), ``simulate`` (a benchmark whose human and judge
scores derive from a known latent relevance, for tests, benchmarks and the notebook).
"""

from rcp_jax.anchored.comparison import AnchoredComparison, anchored_comparison, plan_labels
from rcp_jax.anchored.ppi import MeanEstimate, anchored_mean, correlation_on_labelled, human_only_mean

__all__ = ["AnchoredComparison", "MeanEstimate", "anchored_comparison", "anchored_mean", "correlation_on_labelled",
           "human_only_mean", "plan_labels"]

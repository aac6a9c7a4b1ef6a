"""Bayesian RCP: posterior fits of the calibration, and RCP-nDCG with its uncertainty under the posterior.

- :mod:`rcp_jax.bayes.posterior`: :func:`fit_posterior` (NUTS, SVI or Laplace; the ``frozen``, ``joint`` or
  ``rubric_only`` model), the :class:`Posterior` it returns, :func:`save_posterior` / :func:`load_posterior`.
- :mod:`rcp_jax.bayes.posterior_ndcg`: :func:`posterior_metrics` (intervals per system, P(A > B) and
  practical equivalence per pair) and :func:`format_posterior_table`.

The models themselves are in :mod:`rcp_jax.models.bayes`; plots of the results in :mod:`rcp_jax.plots.bayes`.
"""

from rcp_jax.bayes.posterior import Posterior, diagnostics_summary, fit_posterior, load_posterior, save_posterior
from rcp_jax.bayes.posterior_ndcg import DEFAULT_ROPE, PosteriorMetrics, format_posterior_table, posterior_metrics

__all__ = [
    "Posterior",
    "fit_posterior",
    "save_posterior",
    "load_posterior",
    "diagnostics_summary",
    "PosteriorMetrics",
    "posterior_metrics",
    "format_posterior_table",
    "DEFAULT_ROPE",
]

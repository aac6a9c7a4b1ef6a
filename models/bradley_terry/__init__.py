"""Soft-label weighted Bradley-Terry (Stage A of RCP), batched over many queries.

Modules, in the order a fit uses them:

* :mod:`~rcp_jax.models.bradley_terry.objective`: the model, its pair statistics (:func:`pair_statistics`), loss
  (:func:`loss`) and derivatives, standard errors;
* :mod:`~rcp_jax.models.bradley_terry.newton`: the damped-Newton MAP solve of a padded batch (:func:`fit_map`);
* :mod:`~rcp_jax.models.bradley_terry.components`: connected components of the comparison graphs;
* :mod:`~rcp_jax.models.bradley_terry.kernel`: the compiled fit of one padded block of queries from its windows;
* :mod:`~rcp_jax.models.bradley_terry.devices`: blocks on a thread pool (one device) or sharded over devices;
* :mod:`~rcp_jax.models.bradley_terry.batching`: the ragged front end, :func:`fit_windows` (windows of queries of
  any pool size in, :class:`BTFit` out).
"""

from rcp_jax.models.bradley_terry.batching import (
    BLOCK_QUERIES, MIN_SLOTS, SMALL_POOL_DOCS, SMALL_POOL_WIDTH, BTFit, fit_windows,
)
from rcp_jax.models.bradley_terry.components import connected_components
from rcp_jax.models.bradley_terry.devices import default_chunk
from rcp_jax.models.bradley_terry.newton import fit_map
from rcp_jax.models.bradley_terry.objective import DEFAULT_RIDGE, LABEL_CLIP, loss, pair_statistics, standard_errors

__all__ = [
    "BLOCK_QUERIES", "DEFAULT_RIDGE", "LABEL_CLIP", "MIN_SLOTS", "SMALL_POOL_DOCS", "SMALL_POOL_WIDTH", "BTFit",
    "connected_components", "default_chunk", "fit_map", "fit_windows", "loss", "pair_statistics", "standard_errors",
]

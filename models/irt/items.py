"""What the three rubric fits share: the binomial likelihood of answer counts, the item parameters, priors.

Answers are collapsed to binomial cells ``(passes, trials)`` (:func:`collapse_placements`). Items
(criteria) have discriminations ``gamma = C softmax(u)`` (they sum to C) and difficulties
``beta = v - mean(v)`` (:func:`item_parameters`).
"""

from __future__ import annotations

import jax
import numpy as np


DEFAULT_RIDGE = 1e-4

TAU_PRIOR_SD = 1.0

ALPHA_PRIOR_SD = 2.0

_SOFTPLUS_INV_ONE = float(np.log(np.expm1(1.0)))


def _binomial_nll(logit: jax.Array, passes: jax.Array, trials: jax.Array) -> jax.Array:
    """Negative log-likelihood of ``passes`` out of ``trials`` (no binomial coefficient)."""
    return -(passes * jax.nn.log_sigmoid(logit) + (trials - passes) * jax.nn.log_sigmoid(-logit))


@jax.jit
def item_parameters(u: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``gamma = C softmax(u)`` (sums to C) and ``beta = v - mean(v)``, each float[C]."""
    c = u.shape[-1]
    return c * jax.nn.softmax(u, axis=-1), v - v.mean(axis=-1, keepdims=True)


def collapse_placements(
    query: np.ndarray, doc: np.ndarray, answers: np.ndarray, n_queries: int, n_docs: int
) -> tuple[np.ndarray, np.ndarray]:
    """Collapse rubric placements into binomial counts.

    Args:
        query: int[P] query index of each placement; doc: int[P] document index within its query.
        answers: int[P, C] 0/1 answers.
        n_queries, n_docs: output sizes Q and N.

    Returns:
        (passes float64[Q, N, C], trials float64[Q, N, C]).
    """
    answers = np.asarray(answers, dtype=np.float64)
    c = answers.shape[1]
    passes = np.zeros((n_queries, n_docs, c))
    trials = np.zeros((n_queries, n_docs, c))
    np.add.at(passes, (query, doc), answers)
    np.add.at(trials, (query, doc), 1.0)
    return passes, trials

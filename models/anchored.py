"""Anchored Bradley-Terry: fit new documents' scores with every already-scored document held fixed.

Used to extend a judged pool (``rcp_jax.extension``): the new documents of a query are judged in windows
beside *anchors*, documents whose BT scores a calibration already holds. The anchors' scores stay exactly
where they are, so the new scores land on the existing scale and the query's calibration (tau, alpha)
and the shared criteria (gamma, beta) apply to them unchanged.

Objective of one query (``theta_i`` free for new documents, ``= fixed_i`` for anchors)::

    L(theta_new) = -sum_ab W_ab log sigmoid(theta_a - theta_b) / total + ridge/2 ||theta_new||^2

with ``W`` the soft-win statistic of :func:`rcp_jax.models.bradley_terry.pair_statistics` over the new windows
(pairs of two anchors are constants and drop out) and ``total`` the pair weight the full fit would
normalise by (the store's windows of the query plus the new ones), so the minimiser is exactly the full
BT objective's minimiser over the new scores given the anchors. The problem is convex; every query is
solved at once by the batched damped Newton of :mod:`rcp_jax.models._newton`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models._newton import lm_newton
from rcp_jax.models.bradley_terry import DEFAULT_RIDGE, pair_statistics


@dataclass(frozen=True)
class AnchoredFit:
    """Result of :func:`fit_anchored` (padded like its inputs).

    Attributes:
        theta: float64[Q, N] scores: the fitted value for free documents, the fixed value for anchors.
        se: float64[Q, N] standard errors of free documents given the anchors (NaN for anchors and padding).
        iterations: Newton iterations used. converged: bool[Q].
    """

    theta: np.ndarray
    se: np.ndarray
    iterations: int
    converged: np.ndarray


def _objective(y, wins, fixed, free, total, ridge):
    theta = jnp.where(free, y, fixed)
    diff = theta[:, None] - theta[None, :]
    nll = -(wins * jax.nn.log_sigmoid(diff)).sum() / total
    # fixed coordinates get a unit quadratic at their value, so the Newton system stays regular
    return nll + 0.5 * ridge * jnp.where(free, y * y, 0.0).sum() + 0.5 * jnp.where(free, 0.0, (y - fixed) ** 2).sum()


def _derivs(y, wins, fixed, free, total, ridge):
    """Closed-form gradient float[N] and Hessian float[N, N] of :func:`_objective` (cheaper to compile than
    autodiff's): with ``s_ab = sigmoid(theta_a - theta_b)`` the data term's gradient is
    ``sum_b (W_ba s_ab - W_ab (1 - s_ab)) / total`` and its Hessian the Laplacian of ``(W + W^T) s (1 - s) / total``;
    only free rows and columns keep it, fixed ones get the identity."""
    theta = jnp.where(free, y, fixed)
    s = jax.nn.sigmoid(theta[:, None] - theta[None, :])
    g = ((wins.T * s).sum(axis=1) - (wins * (1.0 - s)).sum(axis=1)) / total
    c = (wins + wins.T) * s * (1.0 - s) / total
    lap = jnp.diag(c.sum(axis=1)) - c
    both = free[:, None] & free[None, :]
    hess = jnp.where(both, lap, 0.0) + jnp.diag(jnp.where(free, ridge, 1.0))
    grad = jnp.where(free, g + ridge * y, y - fixed)
    return grad, hess


def _bucket(n: int, multiple: int = 16) -> int:
    return max(multiple, -(-n // multiple) * multiple)


def fit_anchored(
    doc_index: np.ndarray,
    scores: np.ndarray,
    window_query: np.ndarray,
    fixed: np.ndarray,
    free: np.ndarray,
    total: np.ndarray,
    *,
    ridge: float = DEFAULT_RIDGE,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> AnchoredFit:
    """Fit the free documents' BT scores of many queries, every other document fixed (float64).

    Args:
        doc_index: int[W, w] document index within the window's query (-1: empty slot).
        scores: float[W, w] judge scores (-5..+5) of those documents.
        window_query: int[W] query index of each window in ``[0, Q)``.
        fixed: float[Q, N] scores of the fixed documents (anchors); ignored where ``free``.
        free: bool[Q, N] documents to fit (the new ones); padding is neither free nor in any window.
        total: float[Q] pair weight to normalise by, each window adding ``size - 1`` (the full fit's total).
        ridge: L2 penalty of the full fit (on the normalised objective).
        max_iter, tol: Newton cap and step tolerance.

    Returns:
        :class:`AnchoredFit`; a free document that shares no window with another document keeps 0
        (the ridge's minimum), with se ``1 / sqrt(ridge)``.
    """
    doc_index = np.asarray(doc_index, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    window_query = np.asarray(window_query, dtype=np.int64)
    fixed = np.asarray(fixed, dtype=np.float64)
    free = np.asarray(free, dtype=bool)
    total = np.asarray(total, dtype=np.float64)
    n_q, n = fixed.shape
    if free.shape != (n_q, n) or total.shape != (n_q,):
        raise ValueError(f"fixed {fixed.shape}, free {free.shape} and total {total.shape} must be [Q, N], [Q, N], [Q]")
    if n_q == 0:
        return AnchoredFit(fixed.copy(), np.full_like(fixed, np.nan), 0, np.zeros(0, dtype=bool))
    if not (total > 0).all():
        raise ValueError("total pair weight must be > 0 for every query")
    size = _bucket(n)
    q_pad = 1 << max(0, (n_q - 1).bit_length())
    fx = np.zeros((q_pad, size))
    fr = np.zeros((q_pad, size), dtype=bool)
    tt = np.ones(q_pad)
    fx[:n_q, :n] = np.where(free, 0.0, fixed)
    fr[:n_q, :n] = free
    tt[:n_q] = total
    with jax.enable_x64(True):
        wins = pair_statistics(jax.device_put(doc_index), jax.device_put(scores), jax.device_put(window_query),
                               n_queries=q_pad, n_docs=size)
        # device_put, not jnp.asarray: a host copy compiles nothing
        args = tuple(jax.device_put(x) for x in (fx, fr, tt, np.full(q_pad, float(ridge))))
        args = (wins, *args)
        y, iters, ok = lm_newton(_objective, args[1], args, max_iter=max_iter, tol=tol, derivs=_derivs)
    # host post-processing in NumPy (op by op in JAX, each op would compile its own small program)
    theta = np.where(fr, np.asarray(y), fx)
    wins = np.asarray(wins)
    both = wins + np.swapaxes(wins, 1, 2)
    sig = 1.0 / (1.0 + np.exp(-(theta[:, :, None] - theta[:, None, :])))
    info = (both * sig * (1.0 - sig)).sum(axis=2)
    se = np.full(fr.shape, np.nan)
    se[fr] = 1.0 / np.sqrt(info[fr] + ridge)
    return AnchoredFit(theta[:n_q, :n], se[:n_q, :n], int(iters), np.asarray(ok)[:n_q])

"""The items' exact marginal gradient on a sample of queries, and the block Laplace's items moved by it.

The block Laplace (:mod:`rcp_jax.models.block_laplace`) centres the item contrasts ``g`` at the mode of their
Laplace-approximate marginal: each query's integral over its ~150 latent dimensions is replaced by the Gaussian's,
``f_q(x_q*, g) + 1/2 log det A_q``. Documents with few informative answers have abilities far from Gaussian, so
each query's term is a little off, always the same way; summed over hundreds of queries the items' mean drifts by
more than their (shrinking) posterior SD.

The exact marginal's gradient needs no Gaussian. By Fisher's identity,

    d/dg [-log p(y | g)] = sum_q E[ d/dg f_q(x_q, g) ],   x_q ~ p(x_q | y_q, g),

an expectation under each query's exact conditional posterior. Given the items the queries are independent, so
Hamiltonian Monte Carlo samples all of them at once, batched, each in the coordinates that whiten its Laplace
block (:mod:`rcp_jax.models.block_hmc`). Per query, the gap between that expectation and the query's Laplace
term is the approximation's error; at the Laplace marginal's mode their sum (every query's, or scaled up from a
random sample of queries) is the exact marginal's gradient, and one Newton step with the items' curvature moves the
items to the exact marginal's mode. The step's own uncertainty (which queries were sampled, Monte Carlo error) is
added to the items' covariance. When every query's exact block draws exist (:func:`correction_from_draws`) no
Laplace term is needed: the sum of the expectations plus the prior's gradient is the exact marginal's gradient.

Shapes: as :mod:`rcp_jax.models.block_laplace` (Q queries, N documents, C criteria, G = 2 (C - 1), M = N + 1).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from rcp_jax.models import block_hmc
from rcp_jax.models.block_laplace import (BlockLaplace, Data, _all_blocks, _local_nll, _logdet_gradients,
                                          _per_query, _prior_g)

#: Queries sampled for the exact gradient (all of them up to this many; a random sample above).
SCORE_QUERIES = 64
#: HMC per query: chains, warmup and kept draws per chain, leapfrog steps per draw.
SCORE_CHAINS, SCORE_WARMUP, SCORE_DRAWS, SCORE_LEAPFROG = 2, 200, 200, 5


@functools.partial(jax.jit, static_argnames=("n", "c"))
def _scores(xs, g, per_query: dict, data: Data, n: int, c: int) -> jax.Array:
    """``d/dg f_q(x, g)`` float[S, B, G] at every draw ``xs`` float[S, B, M] of the rows ``per_query``."""
    m = xs.shape[-1]

    def score(x, q):
        return jax.grad(lambda y: _local_nll(y, q, data, n, c))(jnp.concatenate([x, g]))[m:]

    return jax.lax.map(lambda x: jax.vmap(score)(x, per_query), xs)


def laplace_item_gradients(fit: BlockLaplace, data: Data, pick: np.ndarray, *, batch_size: int = 8) -> np.ndarray:
    """Each picked query's term of the items' Laplace-marginal gradient, float64[K, G].

    ``d/dg [f_q(x_q*(g), g) + 1/2 log det A_q(x_q*(g), g)]`` at the fit's blocks (the conditional modes given
    ``fit.g``), through the modes' response ``dx*/dg = -A^-1 B`` and with the log determinant's exact trace (M
    probes: the sample is small)."""
    m = fit.x.shape[1]
    sub = block_hmc.take_rows(data, pick)
    x = jnp.asarray(np.asarray(fit.x)[pick])
    chol = jnp.asarray(np.asarray(fit.chol_local)[pick])
    cpl = np.asarray(fit.coupling, np.float64)[pick]
    gg = jnp.asarray(fit.g, jnp.float32)
    _, grad, _ = _all_blocks(x, gg, sub, batch_size)
    eps = jnp.broadcast_to(np.sqrt(m) * jnp.eye(m, dtype=jnp.float32), (len(pick), m, m))
    ld = np.asarray(_logdet_gradients(x, gg, chol, eps, sub, batch_size), np.float64)
    grad = np.asarray(grad, np.float64)
    reduce = lambda d: d[:, m:] - np.einsum("kmg,km->kg", cpl, d[:, :m])  # noqa: E731
    return reduce(grad) + 0.5 * reduce(ld)


def exact_item_gradients(fit: BlockLaplace, data: Data, pick: np.ndarray, *, seed: int = 0,
                         chains: int = SCORE_CHAINS, num_warmup: int = SCORE_WARMUP,
                         num_samples: int = SCORE_DRAWS, leapfrog: int = SCORE_LEAPFROG) -> dict:
    """Fisher's identity on the picked queries: ``E[d/dg f_q(x_q, g)]`` under each one's exact conditional
    posterior given ``fit.g``, by batched HMC (``chains`` chains per query, started from the Laplace's draws).

    Returns:
        ``mean`` float64[K, G] (the expectations), ``mc_var`` float64[K, G] (their Monte Carlo variance, from batch
        means), ``chains`` float32[chains, S, K, G] (the draws' scores, for R-hat), ``accept`` (mean acceptance
        rate per query, float[K]) and ``step_size`` float[chains, K].
    """
    k = len(pick)
    rows = np.tile(pick, chains)  # chain-major: row r is query pick[r % K], chain r // K
    n, c = data.wins.shape[1], data.trials.shape[2]
    sub = block_hmc.take_rows(data, rows)
    x = jnp.asarray(np.asarray(fit.x)[rows])
    chol = jnp.asarray(np.asarray(fit.chol_local)[rows])
    g = jnp.asarray(fit.g, jnp.float32)
    xs, accept, eps = block_hmc.hmc_rows(jax.random.PRNGKey(seed), x, chol, g, _per_query(sub), sub, n, c, num_warmup,
                                         num_samples, leapfrog)
    scores = _scores(xs, g, _per_query(sub), sub, n, c)
    scores = np.asarray(scores, np.float64).reshape(num_samples, chains, k, -1).transpose(1, 0, 2, 3)
    mean = scores.mean(axis=(0, 1))
    batches = 10 if num_samples >= 20 else 1
    per_batch = num_samples // batches
    means = scores[:, : batches * per_batch].reshape(chains, batches, per_batch, k, -1).mean(2)
    mc_var = means.reshape(chains * batches, k, -1).var(0, ddof=1) / (chains * batches) if batches > 1 else \
        scores.var(axis=(0, 1)) / (chains * num_samples)
    return {"mean": mean, "mc_var": mc_var, "chains": scores.astype(np.float32),
            "accept": np.asarray(accept).reshape(num_samples, chains, k).mean(axis=(0, 1)),
            "step_size": np.asarray(eps).reshape(chains, k)}


def draw_item_gradients(fit: BlockLaplace, data: Data, draws, *, max_draws: int = SCORE_DRAWS) -> dict:
    """Fisher's identity on every query from draws of its exact conditional posterior given ``fit.g`` (the exact
    block draws, :func:`rcp_jax.models.block_hmc.sample_blocks`): ``E[d/dg f_q(x_q, g)]``, from at most
    ``max_draws`` evenly spaced draws per chain.

    Args:
        draws: float[chains, S, Q, M] (all Q queries).

    Returns:
        ``mean`` float64[Q, G], ``mc_var`` float64[Q, G] (batch means, as :func:`exact_item_gradients`) and
        ``chains`` float32[chains, S', Q, G] (the scores, for R-hat).
    """
    chains, s_all, q, m = draws.shape
    n, c = data.wins.shape[1], data.trials.shape[2]
    keep = np.unique(np.linspace(0, s_all - 1, min(max_draws, s_all)).round().astype(int))
    g = jnp.asarray(fit.g, jnp.float32)
    per_query = _per_query(data)
    scores = np.stack([np.asarray(_scores(jnp.asarray(draws[ch][keep]), g, per_query, data, n, c), np.float64)
                       for ch in range(chains)])  # [chains, S', Q, G]
    s = len(keep)
    batches = 10 if s >= 20 else 1
    per_batch = s // batches
    if batches > 1:
        means = scores[:, : batches * per_batch].reshape(chains, batches, per_batch, q, -1).mean(2)
        mc_var = means.reshape(chains * batches, q, -1).var(0, ddof=1) / (chains * batches)
    else:
        mc_var = scores.var(axis=(0, 1)) / (chains * s)
    return {"mean": scores.mean(axis=(0, 1)), "mc_var": mc_var, "chains": scores.astype(np.float32)}


def correction_from_draws(fit: BlockLaplace, data: Data, draws, *, curvature: np.ndarray | None = None,
                          max_draws: int = SCORE_DRAWS) -> dict:
    """The Newton step of the items to the exact marginal's mode from every query's exact block draws.

    With every query sampled the exact marginal's gradient needs no Laplace term: it is ``sum_q E[d/dg f_q] +``
    the prior's gradient (Fisher's identity), and the step's covariance is its Monte Carlo variance only.

    Args:
        draws: float[chains, S, Q, M] the exact block draws at ``fit.g``; curvature: float[G, G] the items'
            marginal curvature (default: the Schur complement of ``fit``); max_draws: scores per chain.

    Returns:
        ``shift`` float64[G], ``shift_cov`` float64[G, G], ``queries`` (every query, int[Q]) and ``exact``
        (:func:`draw_item_gradients`' dict).
    """
    exact = draw_item_gradients(fit, data, draws, max_draws=max_draws)
    total = exact["mean"].sum(0) + _prior_g(np.asarray(fit.g, np.float64), data.item_sd)[1]
    h = fit.chol_items @ fit.chol_items.T if curvature is None else np.asarray(curvature, np.float64)
    h_inv = np.linalg.inv(h)
    shift_cov = h_inv @ np.diag(exact["mc_var"].sum(0)) @ h_inv.T
    return {"shift": -h_inv @ total, "shift_cov": 0.5 * (shift_cov + shift_cov.T), "queries": np.arange(draws.shape[2]),
            "exact": exact}


def pick_queries(n_queries: int, size: int, seed: int) -> np.ndarray:
    """The queries sampled for the exact gradient: all when there are at most ``size``, else a random ``size`` of
    them (sorted), int[K]."""
    if n_queries <= size:
        return np.arange(n_queries)
    return np.sort(np.random.default_rng([seed, 0x5C0E]).choice(n_queries, size=size, replace=False))


def scaled_total(gaps: np.ndarray, mc_var: np.ndarray, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The sum over all ``n_queries`` of the per-query gaps, estimated from a simple random sample of them.

    Args:
        gaps: float[K, G] the sampled queries' gaps (K <= n_queries); mc_var: float[K, G] their Monte Carlo
            variances.

    Returns:
        ``Q * mean(gaps)`` float64[G] and its covariance float64[G, G]: the sample's, ``Q^2 (1 - K/Q) S / K`` with
        ``S`` the gaps' sample covariance (zero when every query is in it), plus ``(Q/K)^2`` times the summed Monte
        Carlo variances.
    """
    gaps = np.asarray(gaps, np.float64)
    k, q = gaps.shape[0], int(n_queries)
    sampling = q**2 * (1 - k / q) * np.atleast_2d(np.cov(gaps.T, ddof=1)) / k if k < q else 0.0
    return q * gaps.mean(0), sampling + (q / k) ** 2 * np.diag(np.asarray(mc_var, np.float64).sum(0))


def item_correction(fit: BlockLaplace, data: Data, *, queries: int = SCORE_QUERIES, seed: int = 0,
                    curvature: np.ndarray | None = None, **hmc) -> dict:
    """The Newton step of the items from the Laplace marginal's mode towards the exact marginal's, and its
    covariance.

    ``fit`` must sit at the Laplace marginal's mode (:func:`rcp_jax.models.block_laplace.marginal_item_mode`): the
    Laplace terms then sum to zero over all queries, so the exact marginal's gradient is the sum of the per-query
    gaps ``d_q = exact_q - laplace_q``; with K of Q queries sampled it is ``Q * mean(d)``, whose sampling variance
    ``Q^2 (1 - K/Q) var(d) / K`` (none when every query is sampled) and Monte Carlo variance go into the step's
    covariance.

    Args:
        curvature: float[G, G] the items' marginal curvature (default: the Schur complement of ``fit``).
        hmc: passed to :func:`exact_item_gradients` (chains, num_warmup, num_samples, leapfrog).

    Returns:
        ``shift`` float64[G] (the step), ``shift_cov`` float64[G, G], ``queries`` (the picked rows), ``gaps``
        float64[K, G] (``d_q``), ``exact`` (:func:`exact_item_gradients`' dict).
    """
    q = fit.n_queries
    pick = pick_queries(q, queries, seed)
    exact = exact_item_gradients(fit, data, pick, seed=seed, **hmc)
    gaps = exact["mean"] - laplace_item_gradients(fit, data, pick)
    total, total_cov = scaled_total(gaps, exact["mc_var"], q)
    h = fit.chol_items @ fit.chol_items.T if curvature is None else np.asarray(curvature, np.float64)
    h_inv = np.linalg.inv(h)
    shift_cov = h_inv @ total_cov @ h_inv.T
    return {"shift": -h_inv @ total, "shift_cov": 0.5 * (shift_cov + shift_cov.T), "queries": pick, "gaps": gaps,
            "exact": exact}


def with_item_shift(fit: BlockLaplace, shift: np.ndarray, shift_cov: np.ndarray) -> BlockLaplace:
    """``fit`` with its items' mean moved by ``shift`` float[G] (each block's conditional mean follows through its
    coupling in the draws) and ``shift_cov`` float[G, G] added to the items' covariance."""
    precision = fit.chol_items @ fit.chol_items.T
    cov = np.linalg.inv(precision) + np.asarray(shift_cov, np.float64)
    chol_items = np.linalg.cholesky(np.linalg.inv(0.5 * (cov + cov.T)))
    base = np.zeros_like(fit.g) if fit.g_shift is None else fit.g_shift
    return dataclasses.replace(fit, g_shift=base + np.asarray(shift, np.float64), chol_items=chol_items)

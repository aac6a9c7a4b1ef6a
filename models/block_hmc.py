"""Hamiltonian Monte Carlo on the query blocks' exact conditional posteriors, all queries at once.

Given the items ``g`` the joint model's query blocks are independent: query q's block ``x_q`` (its BT contrasts,
log scale and offset, M = N + 1 numbers) has the exact conditional posterior ``exp(-f_q(x_q, g))``. The block
Laplace (:mod:`rcp_jax.models.block_laplace`) holds each one's mode and the Cholesky factor ``L_q`` of its
precision there; in the coordinates ``x = x* + L^-T z`` the target is close to a standard normal, so one plain
HMC kernel (a fixed number of leapfrog steps, one step size per row tuned in warmup by dual averaging towards
:data:`TARGET_ACCEPT`, the step jittered by +-:data:`STEP_JITTER`) serves every query, vmapped over rows.

Used twice: for the items' exact marginal gradient on a sample of queries when the blocks stay Gaussian
(:mod:`rcp_jax.models.item_score`, Fisher's identity) and for the exact draws of every query's block
(:func:`sample_blocks`), which replace the per-query Gaussian where a query's posterior is skewed (documents with
few informative answers, a scale near its floor).

Shapes: B rows (a row is one chain of one query), M = N + 1, G = 2 (C - 1), S kept draws per chain.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models.block_laplace import Data, _local_nll, _per_query

#: Acceptance rate the warmup tunes each row's step size for.
TARGET_ACCEPT = 0.8
#: Each transition's step size is the tuned one times a uniform factor in 1 +- this: in near-Gaussian coordinates
#: a fixed trajectory close to half a period maps x to about -x and never changes |x| (chains that agree on the
#: mean and not on the spread; seen with +-20% and 6 steps).
STEP_JITTER = 0.5
#: Exact block draws: chains per query, warmup per chain, leapfrog steps per draw.
BLOCK_CHAINS, BLOCK_WARMUP, BLOCK_LEAPFROG = 2, 120, 5
#: Most rows (chains x queries) sampled in one call on a CPU (per gradient at 150 documents, 2 cores: 78 us at 100
#: and 200 rows, 89 at 256, 98 at 400: the cache) and on an accelerator (every row of 1,000 queries at once, ~1 GB
#: of intermediates at 150 documents). The queries are split into calls of equal size.
BLOCK_ROWS_CPU, BLOCK_ROWS_ACCELERATOR = 200, 2048


@functools.partial(jax.jit, static_argnames=("n", "c", "num_warmup", "num_samples", "leapfrog"))
def hmc_rows(key, x_mode, chol, g, per_query: dict, data: Data, n: int, c: int, num_warmup: int, num_samples: int,
             leapfrog: int):
    """HMC on each row's exact conditional posterior ``exp(-f_q(x, g))`` in whitened coordinates.

    Args:
        key: a PRNG key; x_mode: float[B, M] each row's centre (its conditional mode); chol: float[B, M, M] lower
            Cholesky factors of the rows' precisions; g: float[G] the items (fixed); per_query: the rows' data
            (``_per_query`` layout); data: the priors (its arrays are not read).
        n, c: documents per pool (padded) and criteria; num_warmup, num_samples, leapfrog: the kernel's settings.

    Returns:
        ``x`` float32[S, B, M] (the kept draws, in the model's coordinates), ``accept`` float32[S, B] (their
        acceptance probabilities) and ``step_size`` float32[B].
    """
    rows, m = x_mode.shape
    # x = x* + L^-T z by a matrix product: batched triangular solves are slow on XLA's CPU backend
    eye = jnp.eye(m, dtype=chol.dtype)
    chol = jax.vmap(lambda lower: jax.scipy.linalg.solve_triangular(lower, eye, lower=True).T)(chol)  # L^-T

    def coordinates(z, xm, upper):
        return xm + upper @ z

    def potential(z, xm, upper, q):
        return _local_nll(jnp.concatenate([coordinates(z, xm, upper), g]), q, data, n, c)

    value_grad = jax.value_and_grad(potential)

    def transition(state, key, eps, xm, upper, q):
        z, u, grad = state
        k_momentum, k_jitter, k_accept = jax.random.split(key, 3)
        p = jax.random.normal(k_momentum, z.shape)
        step = eps * jax.random.uniform(k_jitter, (), minval=1 - STEP_JITTER, maxval=1 + STEP_JITTER)

        def leap(_, carry):
            z1, p1, _, grad1 = carry
            p1 = p1 - 0.5 * step * grad1
            z1 = z1 + step * p1
            u1, grad1 = value_grad(z1, xm, upper, q)
            return z1, p1 - 0.5 * step * grad1, u1, grad1

        z1, p1, u1, grad1 = jax.lax.fori_loop(0, leapfrog, leap, (z, p, u, grad))
        log_ratio = (u + 0.5 * p @ p) - (u1 + 0.5 * p1 @ p1)
        log_ratio = jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
        accept = jnp.log(jax.random.uniform(k_accept, ())) < log_ratio
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(accept, a, b), (z1, u1, grad1), state)
        return new, jnp.minimum(1.0, jnp.exp(log_ratio))

    batched = jax.vmap(transition, in_axes=(0, 0, 0, 0, 0, 0))
    k_init, k_warm, k_draw = jax.random.split(key, 3)
    z0 = jax.random.normal(k_init, (rows, m))  # the Laplace's own draws: over-dispersed enough for R-hat
    u0, grad0 = jax.vmap(value_grad)(z0, x_mode, chol, per_query)
    state = (z0, u0, grad0)
    eps0 = jnp.full((rows,), 1.2 * m ** -0.25)
    # dual averaging of log step size towards TARGET_ACCEPT (gamma 0.05, t0 10, kappa 0.75)
    mu = jnp.log(10.0 * eps0)

    def warm(carry, inputs):
        state, log_eps, log_eps_bar, h = carry
        t, key = inputs
        state, accept = batched(state, jax.random.split(key, rows), jnp.exp(log_eps), x_mode, chol, per_query)
        h = (1 - 1 / (t + 10.0)) * h + (TARGET_ACCEPT - accept) / (t + 10.0)
        log_eps = mu - jnp.sqrt(t) / 0.05 * h
        weight = t ** -0.75
        log_eps_bar = weight * log_eps + (1 - weight) * log_eps_bar
        return (state, log_eps, log_eps_bar, h), None

    start = (state, jnp.log(eps0), jnp.log(eps0), jnp.zeros(rows))
    steps = (jnp.arange(1, num_warmup + 1, dtype=jnp.float32), jax.random.split(k_warm, num_warmup))
    (state, _, log_eps_bar, _), _ = jax.lax.scan(warm, start, steps)
    eps = jnp.exp(log_eps_bar)

    def draw(state, key):
        state, accept = batched(state, jax.random.split(key, rows), eps, x_mode, chol, per_query)
        return state, (jax.vmap(coordinates)(state[0], x_mode, chol), accept)

    _, (xs, accept) = jax.lax.scan(draw, state, jax.random.split(k_draw, num_samples))
    return xs, accept, eps


def take_rows(data: Data, rows: np.ndarray) -> Data:
    """``data`` at the query indices ``rows`` int[B] (repeats allowed)."""
    take = lambda a: jnp.asarray(np.asarray(a)[rows])  # noqa: E731
    return dataclasses.replace(data, wins=take(data.wins), n_docs=take(data.n_docs), passes=take(data.passes),
                               trials=take(data.trials), bt_sd=take(data.bt_sd))


def sample_blocks(x_mode, chol, g, data: Data, *, num_samples: int, seed: int, chains: int = BLOCK_CHAINS,
                  num_warmup: int = BLOCK_WARMUP, leapfrog: int = BLOCK_LEAPFROG, rows_together: int | None = None,
                  devices=None, progress=None) -> dict:
    """Exact draws of every query's block given the items ``g``: ``chains`` HMC chains per query, ``num_samples``
    kept draws each.

    Args:
        x_mode: float[Q, M] the blocks' conditional modes given ``g``; chol: float[Q, M, M] the lower Cholesky
            factors of their precisions there; g: float[G]; data: the collection (Q queries).
        num_samples, seed: draws per chain and the seed; chains, num_warmup, leapfrog: the kernel (:func:`hmc_rows`).
        rows_together: most rows (chains x queries) sampled in one call: memory ``~rows_together * (N^2 + S M)``
            floats (default :data:`BLOCK_ROWS_CPU` on CPU devices, :data:`BLOCK_ROWS_ACCELERATOR` on others).
        devices: the devices the calls go to in turn, one call on each at a time (default ``jax.devices()``). A
            call's draws depend on the seed and its queries only, not on its device.
        progress: called as ``progress(queries_done, Q)`` after every call, or None.

    Returns:
        ``x`` float32[chains, S, Q, M], ``accept`` float32[Q] (each query's mean acceptance rate) and
        ``step_size`` float32[Q, chains].
    """
    x_mode, chol = np.asarray(x_mode, np.float32), np.asarray(chol, np.float32)
    q_all, m = x_mode.shape
    n, c = data.wins.shape[1], data.trials.shape[2]
    devices = list(jax.devices() if devices is None else devices)
    if rows_together is None:
        rows_together = BLOCK_ROWS_CPU if devices[0].platform == "cpu" else BLOCK_ROWS_ACCELERATOR
    calls = -(-q_all // max(1, rows_together // chains))
    per_call = -(-q_all // calls)  # equal calls: the last one pads at most calls - 1 queries
    key = jax.random.PRNGKey(seed)
    out = np.empty((chains, num_samples, q_all, m), np.float32)
    accept = np.empty(q_all, np.float32)
    steps = np.empty((q_all, chains), np.float32)
    starts = list(range(0, q_all, per_call))

    def launch(lo, device):
        queries = np.arange(lo, min(lo + per_call, q_all))
        if len(queries) < per_call:  # the last call at the others' shape: one compiled program
            queries = np.concatenate([queries, np.full(per_call - len(queries), queries[-1])])
        rows = np.tile(queries, chains)  # chain-major
        sub = take_rows(data, rows)
        args = jax.device_put((jax.random.fold_in(key, lo), x_mode[rows], chol[rows], np.asarray(g, np.float32),
                               _per_query(sub), sub), device)
        return hmc_rows(*args, n, c, num_warmup, num_samples, leapfrog)

    for first in range(0, len(starts), len(devices)):
        batch = starts[first : first + len(devices)]
        running = [launch(lo, device) for lo, device in zip(batch, devices)]  # dispatched asynchronously
        for lo, (xs, acc, eps) in zip(batch, running):
            k = min(per_call, q_all - lo)
            xs = np.asarray(xs).reshape(num_samples, chains, per_call, m)[:, :, :k]
            out[:, :, lo : lo + k] = xs.transpose(1, 0, 2, 3)
            accept[lo : lo + k] = np.asarray(acc).reshape(num_samples, chains, per_call)[:, :, :k].mean(axis=(0, 1))
            steps[lo : lo + k] = np.asarray(eps).reshape(chains, per_call)[:, :k].T
            if progress is not None:
                progress(lo + k, q_all)
    return {"x": out, "accept": accept, "step_size": steps}

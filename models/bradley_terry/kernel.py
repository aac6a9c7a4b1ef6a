"""The compiled fit of a padded block of queries: statistics, start, Newton, SEs and components in one program.

On CPU the block is walked one query at a time (:func:`_fit_queries` with ``chunk = 1``, a ``lax.map``): a
query's ``N x N`` statistics stay in cache from the scatter through the last Newton iteration, and each
query stops iterating on its own. Its window pairs are listed for the whole block at once
(:func:`_block_pairs`) and scattered :data:`_WINDOW_GROUP` windows at a time up to the query's last window
(:func:`_query_scatter`), so padding slots cost next to nothing. With ``chunk = Q`` (a GPU) the whole block
is fitted as one batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rcp_jax.models.bradley_terry.components import _components
from rcp_jax.models.bradley_terry.newton import _centre, _log_odds_start, _newton
from rcp_jax.models.bradley_terry.objective import LABEL_CLIP, _pair_parts


def _fit_parts(both, anti, total, mask, ridge, tol, *, max_iter: int):
    """Whole fit of a padded batch of queries from its normalised pair parts (traced; see :func:`_pair_parts`).

    Returns ``(theta, se, labels, n_components, iterations)``, the last broadcast to int[Q].
    """
    q = mask.shape[0]
    net = anti.sum(axis=2)
    theta0, degree = _log_odds_start(both, anti, ridge, with_degree=True)
    theta, iters, _, _, diag = _newton(both, net, theta0, ridge, tol, max_iter)
    # information of the unnormalised likelihood: the curvature rows of the final Newton state
    info = (diag - ridge) * total[:, None]
    se = 1.0 / jnp.sqrt(jnp.maximum(info, 0.0) + ridge)
    labels, n_comp = _components(both > 0, mask, degree)
    # int32 whatever the x64 mode, so both branches of the per-query lax.cond agree
    return (_centre(theta, mask), se, labels.astype(jnp.int32), n_comp.astype(jnp.int32),
            jnp.full(q, iters, jnp.int32))


def _fit_block(doc_index, scores, window_query, mask, ridge, tol, *, max_iter: int):
    """Whole fit of one padded block of queries from its windows (traced; see
    :func:`~rcp_jax.models.bradley_terry.batching.fit_windows`).

    Returns ``(theta, se, labels, n_components, iterations)``, the last broadcast to int[Q].
    """
    q, n = mask.shape
    both, anti, total = _pair_parts(doc_index, scores, window_query, q, n)
    return _fit_parts(both, anti, total, mask, ridge, tol, max_iter=max_iter)


#: Windows scattered per step of the per-query statistics loop (:func:`_query_scatter`): a query's padding
#: slots beyond its last group of windows cost nothing, so the slot count of a call can be coarse.
_WINDOW_GROUP = 16


def _block_pairs(doc_index, scores, n_docs: int):
    """Every within-window pair of a block of queries, for :func:`_query_scatter` (traced helper).

    Args:
        doc_index, scores: int32/float[Q, V, w] the windows of each query (an empty slot is -1).
        n_docs: padded pool size N.

    Returns ``(flat int32[Q, V P], pw float[Q, V P], net float[Q, V P], total float[Q], used int32[Q])``
    with ``P = w (w - 1) / 2`` pairs per window (slots ``(i, i + k)`` for ``k = 1 .. w - 1``, then ``i``): the cell
    ``min(a, b) N + max(a, b)`` of each pair, its normalised weight and signed net win (as
    :func:`_pair_parts`), the query's total pair weight and its number of window slots up to the last
    non-empty one. Built for the whole block at once: per query (and per group of windows) the slices and
    concatenations would be dozens of tiny compiled operations. A cell appears at most once per window (its
    documents are distinct), so the scatter adds to each cell in window order whatever the order of the
    pairs within a window.
    """
    q, v, w = doc_index.shape
    dtype = scores.dtype
    valid = doc_index >= 0
    size = valid.sum(axis=2)
    weight = jnp.where(size > 1, 2.0 / jnp.maximum(size, 1), 0.0).astype(dtype)
    n_pairs = (size * (size - 1) // 2).astype(dtype)
    # one sequential sum per query (a scatter-add, in window order, as the per-query statistics always had)
    rows = jnp.repeat(jnp.arange(q, dtype=jnp.int32), v)
    total = jnp.zeros(q, dtype).at[rows].add((weight * n_pairs).ravel(), mode="promise_in_bounds")
    total = jnp.maximum(total, jnp.finfo(dtype).tiny)
    weight = weight / total[:, None]
    used = jnp.max(jnp.where(valid.any(axis=2), jnp.arange(1, v + 1, dtype=jnp.int32), 0), axis=1)
    d = jnp.where(valid, doc_index, -1)
    weight = weight[:, :, None]
    lim = 1.0 - 2.0 * LABEL_CLIP
    # the pairs (slot i, slot i + k) of every window for one offset k at a time, each piece a plain
    # elementwise pass over slices (XLA's CPU code for one concatenation of the pair slots per window, as
    # :func:`~rcp_jax.models.bradley_terry.objective._first` builds it, is slower)
    cells, weights, nets = [], [], []
    for k in range(1, w):
        a, b = d[:, :, : w - k], d[:, :, k:]
        ok = (a >= 0) & (b >= 0)
        pw = jnp.where(ok, weight, 0.0)
        cells.append(jnp.maximum(jnp.minimum(a, b), 0) * n_docs + jnp.maximum(a, b))
        weights.append(pw)
        nets.append(jnp.where(a < b, pw, -pw)
                    * jnp.clip(jnp.tanh(0.5 * (scores[:, :, : w - k] - scores[:, :, k:])), -lim, lim))
    return tuple(jnp.concatenate(x, axis=2).reshape(q, -1) for x in (cells, weights, nets)) + (total, used)


def _query_scatter(flat, pw, net, used, n_docs: int, pairs: int):
    """``(both, anti)`` float[1, N, N] of ONE query from its rows of :func:`_block_pairs` (traced helper).

    The pairs are scattered ``_WINDOW_GROUP`` windows (``pairs`` each) at a time, only up to the query's last
    window (``used``; the slot count ``V`` is a multiple of the group), so empty slots at the end cost
    nothing; the updates reach each cell in the same order as one scatter of all windows.
    """
    step = _WINDOW_GROUP * pairs

    def body(k, acc):
        upper_w, upper_n = acc
        cells = jax.lax.dynamic_slice_in_dim(flat, k * step, step)
        upper_w = upper_w.at[cells].add(jax.lax.dynamic_slice_in_dim(pw, k * step, step), mode="promise_in_bounds")
        upper_n = upper_n.at[cells].add(jax.lax.dynamic_slice_in_dim(net, k * step, step), mode="promise_in_bounds")
        return upper_w, upper_n

    zeros = jnp.zeros(n_docs * n_docs, pw.dtype)
    groups = (used + _WINDOW_GROUP - 1) // _WINDOW_GROUP
    upper_w, upper_n = jax.lax.fori_loop(0, groups, body, (zeros, zeros))
    upper_w = upper_w.reshape(1, n_docs, n_docs)
    upper_n = upper_n.reshape(1, n_docs, n_docs)
    return upper_w + jnp.swapaxes(upper_w, 1, 2), upper_n - jnp.swapaxes(upper_n, 1, 2)


def _fit_queries(doc_index, scores, mask, ridge, tol, *, max_iter: int, chunk: int):
    """Fit of queries laid out one per row, in sequential batches of ``chunk`` queries (traced).

    Args:
        doc_index, scores: int32/float[Q, V, w] the windows of each query (V slots; an empty window is all -1).
        mask: bool[Q, N] real documents. ``Q`` must be a multiple of ``chunk``; with ``chunk = 1`` and
            ``Q > 1``, ``V`` must be a multiple of ``_WINDOW_GROUP``.

    Returns:
        ``(theta, se, labels, n_components, iterations)`` as :func:`_fit_block`, per query.

    With a small ``chunk`` every array of a batch (``chunk x N x N``: the pair statistics, the curvatures)
    stays in the CPU's cache through the statistics, the start and every Newton iteration, and each
    batch stops iterating on its own; one batch of all queries (``chunk = Q``) suits a GPU. A batch whose
    queries have no document (padding) is skipped. With ``chunk = 1`` the pairs of every window of the call
    are listed at once (:func:`_block_pairs`) and a query's statistics loop over its windows only
    (:func:`_query_scatter`), so the slot count ``V`` may be padded generously.
    """
    q, v, w = doc_index.shape
    n = mask.shape[1]
    window_query = jnp.repeat(jnp.arange(chunk, dtype=jnp.int32), v)

    def empty(_):
        zeros = jnp.zeros((chunk, n), scores.dtype)
        return zeros, zeros + 1.0, jnp.full((chunk, n), -1, jnp.int32), jnp.zeros(chunk, jnp.int32), jnp.zeros(chunk, jnp.int32)

    def one(x):
        di, sc, m = x

        def fit(_):
            return _fit_block(di.reshape(chunk * v, w), sc.reshape(chunk * v, w), window_query, m, ridge, tol,
                              max_iter=max_iter)

        return jax.lax.cond(jnp.any(m), fit, empty, None)

    def one_query(x):
        flat, pw, net, total, used, m = x

        def fit(_):
            both, anti = _query_scatter(flat, pw, net, used, n, w * (w - 1) // 2)
            return _fit_parts(both, anti, total[None], m[None], ridge, tol, max_iter=max_iter)

        return jax.lax.cond(jnp.any(m), fit, empty, None)

    if chunk == q:
        return _fit_block(doc_index.reshape(q * v, w), scores.reshape(q * v, w), window_query, mask, ridge, tol,
                          max_iter=max_iter)
    if chunk == 1:
        out = jax.lax.map(one_query, (*_block_pairs(doc_index, scores, n), mask))
        return tuple(o.reshape(q, *o.shape[2:]) for o in out)
    k = q // chunk
    out = jax.lax.map(one, (doc_index.reshape(k, chunk, v, w), scores.reshape(k, chunk, v, w), mask.reshape(k, chunk, n)))
    return tuple(o.reshape(q, *o.shape[2:]) for o in out)


_fit_block_jit = jax.jit(_fit_queries, static_argnames=("max_iter", "chunk"))

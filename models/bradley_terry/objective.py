"""The soft-label Bradley-Terry objective (METHOD section 1): pair statistics, loss and its derivatives.

A window of ``w`` documents with judge scores ``s`` (logits, -5..+5) yields, for every pair (a, b) of its
documents, a soft label ``p_ab = clip(sigmoid(s_a - s_b), 0.01, 0.99)`` (the probability that a beats b;
0.5 for a tie) with weight ``2 / w``. One score ``theta`` per document of a query minimises::

    L(theta) = sum_pairs weight * BCE(sigmoid(theta_a - theta_b), p_ab) / sum weight + ridge/2 ||theta||^2

Because the loss is linear in the labels, every query reduces to a sufficient statistic ``wins[a, b]`` =
summed weight x soft win of a over b (float[N, N]). Only its symmetric part ``W + W^T`` (pair weights) and
its antisymmetric part ``W - W^T`` enter the fit (:func:`_symmetric_parts`); both are built from the upper
triangle of each window. Queries are padded arrays ``float[Q, N]`` (``mask: bool[Q, N]`` marks real
documents).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


LABEL_CLIP = 0.01

DEFAULT_RIDGE = 1e-4


def _first(x: jax.Array) -> jax.Array:
    """Slot ``i`` of every window pair (slot i < slot j), ``[W, w] -> [W, w (w - 1) / 2]``, by static slices
    (no gather)."""
    w = x.shape[1]
    return jnp.concatenate([jnp.broadcast_to(x[:, i : i + 1], x[:, i + 1 :].shape) for i in range(w - 1)], 1)


def _second(x: jax.Array) -> jax.Array:
    """Slot ``j`` of every window pair, in the order of :func:`_first`."""
    w = x.shape[1]
    return jnp.concatenate([x[:, i + 1 :] for i in range(w - 1)], 1)


def _window_pairs(doc_index: jax.Array, scores: jax.Array, window_query: jax.Array,
                  scale_end: float | None = None):
    """Every within-window pair (slot i < slot j) as flat arrays of length W * w (w - 1) / 2.

    Returns ``(q, a, b, weight, p)``: query, the two document indices, pair weight ``2 / size`` (0 for
    an empty slot or a padding window, and for a pair tied at the scale's end when ``scale_end`` is given:
    :func:`pair_statistics`; indices are then 0) and the clipped soft win of a over b.
    """
    valid = (doc_index >= 0) & (window_query[:, None] >= 0)
    size = valid.sum(axis=1)
    weight = jnp.where(size > 1, 2.0 / jnp.maximum(size, 1), 0.0).astype(scores.dtype)
    ok = _first(valid) & _second(valid)
    first, second = _first(scores), _second(scores)
    if scale_end is not None:
        ok = ok & ~((first == second) & (jnp.abs(first) >= scale_end))
    p = jnp.clip(jax.nn.sigmoid(first - second), LABEL_CLIP, 1.0 - LABEL_CLIP)
    pw = jnp.where(ok, weight[:, None], 0.0)
    q = jnp.where(ok, window_query[:, None], 0)
    a = jnp.where(ok, _first(doc_index), 0)
    b = jnp.where(ok, _second(doc_index), 0)
    return q.ravel(), a.ravel(), b.ravel(), pw.ravel(), p.ravel()


@partial(jax.jit, static_argnames=("n_queries", "n_docs", "scale_end"))
def pair_statistics(
    doc_index: jax.Array, scores: jax.Array, window_query: jax.Array, *, n_queries: int, n_docs: int,
    scale_end: float | None = None,
) -> jax.Array:
    """Soft win matrix of every query from its windows.

    Args:
        doc_index: int[W, w] document index within its query (``0 <= i < n_docs``), -1 for an empty slot.
        scores: float[W, w] judge scores of those documents (ignored where ``doc_index < 0``).
        window_query: int[W] query index of each window, ``0 <= q < n_queries`` (-1: padding window).
        n_queries, n_docs: output sizes Q and N.
        scale_end: where the judge's scale ends (5 for METHOD's -5..+5), or None. Given, a pair whose two
            scores are equal at or beyond ``+-scale_end`` is left out: the judge scored both at the end of its
            scale, which says each is at least that good (or bad), not that they are equal (a censored pair;
            the soft label 0.5 would pull the two together). None keeps every pair: METHOD's statistic.

    Returns:
        float[Q, N, N] ``wins[q, a, b]`` = sum over windows of weight x P(a beats b); the weight of a
        pair is ``2 / w`` with ``w`` the number of documents in its window.
    """
    q, a, b, pw, p = _window_pairs(doc_index, scores, window_query, scale_end)
    values = jnp.concatenate([pw * p, pw * (1.0 - p)])
    if n_queries * n_docs * n_docs < 2**31 - 1:
        # One scatter into the flattened statistic: XLA's CPU scatter is much faster on a 1-D target
        # with in-bounds indices promised (they are: every index was clamped above).
        base = q * (n_docs * n_docs)
        flat = jnp.concatenate([base + a * n_docs + b, base + b * n_docs + a])
        wins = jnp.zeros(n_queries * n_docs * n_docs, scores.dtype)
        return wins.at[flat].add(values, mode="promise_in_bounds").reshape(n_queries, n_docs, n_docs)
    wins = jnp.zeros((n_queries, n_docs, n_docs), scores.dtype)
    idx = (jnp.concatenate([q, q]), jnp.concatenate([a, b]), jnp.concatenate([b, a]))
    return wins.at[idx].add(values, mode="promise_in_bounds")


@partial(jax.jit, static_argnums=(3, 4))
def _pair_parts(doc_index, scores, window_query, n_queries: int, n_docs: int):
    """Normalised ``(W + W^T, W - W^T) / sum W`` and ``sum W`` per query, from the windows (traced helper).

    Each within-window pair is scattered once, at ``(min(a, b), max(a, b))``, with its weight and its
    signed net win ``weight (2 p - 1) = weight tanh((s_a - s_b) / 2)`` (p clipped as in
    :func:`pair_statistics`); the full matrices follow by one transpose. Half the scatter updates of
    :func:`pair_statistics`, and the per-query normalisation is applied to the window weights before
    the scatter instead of to the matrices after it.

    Returns ``(both float[Q, N, N], anti float[Q, N, N], total float[Q])``.
    """
    valid = (doc_index >= 0) & (window_query[:, None] >= 0)
    size = valid.sum(axis=1)
    weight = jnp.where(size > 1, 2.0 / jnp.maximum(size, 1), 0.0).astype(scores.dtype)
    wq = jnp.where(window_query >= 0, window_query, 0)
    n_pairs = (size * (size - 1) // 2).astype(scores.dtype)
    total = jnp.zeros(n_queries, scores.dtype).at[wq].add(weight * n_pairs, mode="promise_in_bounds")
    total = jnp.maximum(total, jnp.finfo(scores.dtype).tiny)
    weight = weight / total[wq]
    d = jnp.where(valid, doc_index, -1)
    a, b = _first(d), _second(d)
    ok = (a >= 0) & (b >= 0)
    lo, hi = jnp.maximum(jnp.minimum(a, b), 0), jnp.maximum(a, b)
    pw = jnp.where(ok, weight[:, None], 0.0)
    lim = 1.0 - 2.0 * LABEL_CLIP
    net = jnp.where(a < b, pw, -pw) * jnp.clip(jnp.tanh(0.5 * (_first(scores) - _second(scores))), -lim, lim)
    size_all = n_queries * n_docs * n_docs
    if size_all < 2**31 - 1:
        flat = (wq[:, None] * (n_docs * n_docs) + lo * n_docs + hi).ravel()
        zeros = jnp.zeros(size_all, scores.dtype)
        upper_w = zeros.at[flat].add(pw.ravel(), mode="promise_in_bounds").reshape(n_queries, n_docs, n_docs)
        upper_n = zeros.at[flat].add(net.ravel(), mode="promise_in_bounds").reshape(n_queries, n_docs, n_docs)
    else:
        idx = (jnp.broadcast_to(wq[:, None], lo.shape), lo, hi)
        zeros = jnp.zeros((n_queries, n_docs, n_docs), scores.dtype)
        upper_w = zeros.at[idx].add(pw, mode="promise_in_bounds")
        upper_n = zeros.at[idx].add(net, mode="promise_in_bounds")
    return upper_w + jnp.swapaxes(upper_w, 1, 2), upper_n - jnp.swapaxes(upper_n, 1, 2), total


def loss(theta: jax.Array, wins: jax.Array, ridge: float = DEFAULT_RIDGE) -> jax.Array:
    """BT objective of each query: float[Q] from ``theta: float[Q, N]``, ``wins: float[Q, N, N]``."""
    total = jnp.maximum(wins.sum(axis=(1, 2)), jnp.finfo(wins.dtype).tiny)
    diff = theta[:, :, None] - theta[:, None, :]
    nll = -(wins * jax.nn.log_sigmoid(diff)).sum(axis=(1, 2)) / total
    return nll + 0.5 * ridge * (theta**2).sum(axis=1)


def _symmetric_parts(wins: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(W + W^T, W - W^T)`` of a win statistic, each float[Q, N, N]."""
    wt = jnp.swapaxes(wins, 1, 2)
    return wins + wt, wins - wt


def _normalise(both: jax.Array, anti: jax.Array):
    """Divide by the total pair weight ``sum W = sum both / 2``; returns ``(both, anti, net, total)``.

    The loss only needs ``both`` and the net wins ``net_a = sum_b anti_ab``: with ``d = theta_a -
    theta_b`` and ``s = sigmoid(d)``, ``sum_ab W_ab log s_ab = 1/4 sum_ab both_ab log(s_ab (1 - s_ab))
    + 1/2 sum_a theta_a net_a`` (split W into its symmetric and antisymmetric halves and use
    ``log s(d) - log s(-d) = d``).
    """
    total = jnp.maximum(0.5 * both.sum(axis=(1, 2)), jnp.finfo(both.dtype).tiny)
    both = both / total[:, None, None]
    anti = anti / total[:, None, None]
    return both, anti, anti.sum(axis=2), total


def _sym_loss(theta: jax.Array, both: jax.Array, net: jax.Array, ridge) -> jax.Array:
    """:func:`loss` from the normalised parts: float[Q]."""
    ad = jnp.abs(theta[:, :, None] - theta[:, None, :])
    # log(s (1 - s)) = -|d| - 2 log1p(exp(-|d|)), stable for any d
    log_ss = -ad - 2.0 * jnp.log1p(jnp.exp(-ad))
    ridge_term = 0.5 * ridge * (theta**2).sum(axis=1)
    return -(0.25 * (both * log_ss).sum(axis=(1, 2)) + 0.5 * (theta * net).sum(axis=1)) + ridge_term


def _sym_grad_curv(theta: jax.Array, both: jax.Array, net: jax.Array, ridge):
    """Gradient float[Q, N] and pair curvatures of :func:`_sym_loss`.

    Returns ``(grad, curv, diag)``: the Hessian is ``diag(diag) - curv`` with ``curv = both s (1 - s)``
    (float[Q, N, N]) and ``diag = rowsum(curv) + ridge``. With ``t = tanh(d / 2)``: ``s = (1 + t) / 2``
    and ``s (1 - s) = (1 - t^2) / 4``; ``t`` is materialised once (an optimisation barrier stops XLA
    from recomputing it for each of the three consumers).
    """
    t = jnp.tanh(0.5 * (theta[:, :, None] - theta[:, None, :]))
    t = jax.lax.optimization_barrier(t)
    curv = both * (0.25 - 0.25 * t * t)
    grad = 0.5 * (both * t).sum(axis=2) - 0.5 * net + ridge * theta
    return grad, curv, curv.sum(axis=2) + ridge


@jax.jit
def _grad_hess(theta: jax.Array, wins: jax.Array, ridge: float):
    """Gradient float[Q, N] and dense Hessian float[Q, N, N] of :func:`loss` (for tests)."""
    both, _, net, _ = _normalise(*_symmetric_parts(wins))
    grad, curv, diag = _sym_grad_curv(theta, both, net, ridge)
    return grad, jnp.eye(theta.shape[1], dtype=theta.dtype) * diag[:, :, None] - curv


def _sym_eval(theta: jax.Array, both: jax.Array, net: jax.Array, ridge, *, with_loss: bool = True):
    """Loss float[Q], gradient float[Q, N], pair curvatures float[Q, N, N] and Hessian diagonal float[Q, N]
    of :func:`_sym_loss` in one pass.

    Everything follows from ``e = exp(-|d|)`` (``d = theta_a - theta_b``): ``tanh(d / 2) = sign(d) (1 - e) /
    (1 + e)``, ``s (1 - s) = e / (1 + e)^2`` and ``log(s (1 - s)) = -|d| - 2 log1p(e)``, so a Newton trial
    point costs one exponential and one log1p per pair instead of a loss pass and a tanh pass.
    """
    d = theta[:, :, None] - theta[:, None, :]
    ad = jnp.abs(d)
    e = jnp.exp(-ad)
    r = 1.0 / (1.0 + e)
    t = jnp.where(d >= 0, 1.0 - e, e - 1.0) * r
    curv = both * (e * r * r)
    grad = 0.5 * (both * t).sum(axis=2) - 0.5 * net + ridge * theta
    f = None
    if with_loss:
        log_ss = -ad - 2.0 * jnp.log1p(e)
        f = -(0.25 * (both * log_ss).sum(axis=(1, 2)) + 0.5 * (theta * net).sum(axis=1)) + 0.5 * ridge * (theta**2).sum(axis=1)
    return f, grad, curv, curv.sum(axis=2) + ridge


def _sym_diag(theta: jax.Array, both: jax.Array, ridge) -> jax.Array:
    """The Hessian diagonal float[Q, N] of :func:`_sym_eval` alone (its curvature arithmetic, no loss or gradient)."""
    e = jnp.exp(-jnp.abs(theta[:, :, None] - theta[:, None, :]))
    r = 1.0 / (1.0 + e)
    return (both * (e * r * r)).sum(axis=2) + ridge


@jax.jit
def standard_errors(theta: jax.Array, wins: jax.Array, ridge: float = DEFAULT_RIDGE) -> jax.Array:
    """Per-document standard errors from the diagonal information, float[Q, N].

    ``se_i = 1 / sqrt(sum_j n_ij q_ij (1 - q_ij) + ridge)`` with ``n_ij`` the summed pair weight of i
    and j (unnormalised, so it grows with the number of windows) and ``q_ij`` the fitted win
    probability.
    """
    both = wins + jnp.swapaxes(wins, 1, 2)
    sig = jax.nn.sigmoid(theta[:, :, None] - theta[:, None, :])
    info = (both * sig * (1.0 - sig)).sum(axis=2)
    return 1.0 / jnp.sqrt(info + ridge)

"""Soft-label weighted Bradley-Terry (Stage A of RCP), batched over many queries.

Model (METHOD section 1). A window of ``w`` documents with judge scores ``s`` (logits, -5..+5) yields,
for every pair (a, b) of its documents, a soft label ``p_ab = clip(sigmoid(s_a - s_b), 0.01, 0.99)``
(the probability that a beats b; 0.5 for a tie) with weight ``2 / w``. One score ``theta`` per
document of a query minimises::

    L(theta) = sum_pairs weight * BCE(sigmoid(theta_a - theta_b), p_ab) / sum weight + ridge/2 ||theta||^2

Because the loss is linear in the labels, every query reduces to a sufficient statistic
``wins[a, b]`` = summed weight x soft win of a over b (float[N, N]); the fit never looks at pairs again.
The minimiser is centred automatically (the data term is translation invariant, so the ridge
gradient sums to zero at the optimum); we still centre explicitly over real documents.

Layout: queries are packed into padded arrays ``float[Q, N]`` with ``mask: bool[Q, N]`` marking real
documents. :func:`fit_windows` takes ragged window lists, buckets queries by padded pool size, and
fits each bucket with one jit-compiled, batched damped-Newton solve.

Performance notes (issue #7). Only the symmetric part ``W + W^T`` (pair weights) and the
antisymmetric part ``W - W^T`` of the statistic enter the fit (:func:`_symmetric_parts`), and both
are built from the upper triangle of each window (45 scatter updates per window of 10, not 90).
Newton systems are solved by Jacobi-preconditioned conjugate gradients on the Hessian's graph-
Laplacian form (:func:`_pcg`: O(N^2) per product instead of a batched O(N^3) Cholesky), starting
from a weighted least-squares fit of the pairwise log-odds (:func:`_log_odds_start`), which saves
two to three Newton iterations. Queries are sharded over devices when there are several.

Issue #20: on CPU the batch is walked one query at a time (:func:`_fit_queries`, a ``lax.map``): the
query's statistics (``N x N``, 100 kB at N = 160) stay in cache from the scatter through the last Newton
iteration, where a whole batch streamed every ``Q x N x N`` array through memory several times per
iteration; each query also stops iterating on its own. A Newton trial point costs one ``exp`` and one
``log1p`` per pair, giving loss, gradient and curvatures together (:func:`_sym_eval`).

Issue #14 (few compiled programs): on that path every compiled call fits a fixed block of
:data:`BLOCK_QUERIES` queries (the blocks run from a thread pool) with a power-of-two number of window
slots, at least :data:`MIN_SLOTS`; a query's statistics are scattered :data:`_WINDOW_GROUP` windows at a
time up to its last window (:func:`_query_scatter`), so padding slots cost next to nothing. A refit with
another number of queries, or most refits with more windows, reuse the program of their pool-size bucket.

Where the time goes (issue #20, one query of 150 documents and 216 windows of 10, CPU microseconds on one
core): listing the window pairs ~50-60 (:func:`_block_pairs`, once per block, one slot offset at a time:
per query and per group of windows its slices and concatenations were ~40 tiny compiled ops each, and one
concatenation of every window's pair slots cost ~15-25 more), their two scatters ~45, the log-odds start
(six unrolled conjugate-gradient steps, :data:`_START_STEPS`), each trial point ~55-65 and each Newton
iteration ~65-85 (three from the start on 94% of the benchmark's queries: the Newton systems are solved to
a relative residual of at most :data:`_ETA_MAX`; the last step, predicted final, skips its trial point),
components and SEs ~20. The host pads each block's windows in its worker thread (:class:`_PaddedWindows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

LABEL_CLIP = 0.01
DEFAULT_RIDGE = 1e-4


# --------------------------------------------------------------------------------------------------
# sufficient statistics
# --------------------------------------------------------------------------------------------------
def _first(x: jax.Array) -> jax.Array:
    """Slot ``i`` of every window pair (slot i < slot j), ``[W, w] -> [W, w (w - 1) / 2]``, by static slices
    (no gather)."""
    w = x.shape[1]
    return jnp.concatenate([jnp.broadcast_to(x[:, i : i + 1], x[:, i + 1 :].shape) for i in range(w - 1)], 1)


def _second(x: jax.Array) -> jax.Array:
    """Slot ``j`` of every window pair, in the order of :func:`_first`."""
    w = x.shape[1]
    return jnp.concatenate([x[:, i + 1 :] for i in range(w - 1)], 1)


def _window_pairs(doc_index: jax.Array, scores: jax.Array, window_query: jax.Array):
    """Every within-window pair (slot i < slot j) as flat arrays of length W * w (w - 1) / 2.

    Returns ``(q, a, b, weight, p)``: query, the two document indices, pair weight ``2 / size`` (0 for
    an empty slot or a padding window; indices are then 0) and the clipped soft win of a over b.
    """
    valid = (doc_index >= 0) & (window_query[:, None] >= 0)
    size = valid.sum(axis=1)
    weight = jnp.where(size > 1, 2.0 / jnp.maximum(size, 1), 0.0).astype(scores.dtype)
    ok = _first(valid) & _second(valid)
    p = jnp.clip(jax.nn.sigmoid(_first(scores) - _second(scores)), LABEL_CLIP, 1.0 - LABEL_CLIP)
    pw = jnp.where(ok, weight[:, None], 0.0)
    q = jnp.where(ok, window_query[:, None], 0)
    a = jnp.where(ok, _first(doc_index), 0)
    b = jnp.where(ok, _second(doc_index), 0)
    return q.ravel(), a.ravel(), b.ravel(), pw.ravel(), p.ravel()


@partial(jax.jit, static_argnames=("n_queries", "n_docs"))
def pair_statistics(
    doc_index: jax.Array, scores: jax.Array, window_query: jax.Array, *, n_queries: int, n_docs: int
) -> jax.Array:
    """Soft win matrix of every query from its windows.

    Args:
        doc_index: int[W, w] document index within its query (``0 <= i < n_docs``), -1 for an empty slot.
        scores: float[W, w] judge scores of those documents (ignored where ``doc_index < 0``).
        window_query: int[W] query index of each window, ``0 <= q < n_queries`` (-1: padding window).
        n_queries, n_docs: output sizes Q and N.

    Returns:
        float[Q, N, N] ``wins[q, a, b]`` = sum over windows of weight x P(a beats b); the weight of a
        pair is ``2 / w`` with ``w`` the number of documents in its window.
    """
    q, a, b, pw, p = _window_pairs(doc_index, scores, window_query)
    values = jnp.concatenate([pw * p, pw * (1.0 - p)])
    if n_queries * n_docs * n_docs < 2**31 - 1:
        # One scatter into the flattened statistic: XLA's CPU scatter is ~10x faster on a 1-D target
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


# --------------------------------------------------------------------------------------------------
# objective, Newton solve, uncertainty, connectivity (all for padded batches)
# --------------------------------------------------------------------------------------------------
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


def _cg_step(curv, diag, dinv, x, r, p, rz):
    """One Jacobi-preconditioned conjugate-gradient step on ``(diag(diag) - curv) x = rhs`` for every query:
    iterate ``x``, residual ``r``, direction ``p`` (float[Q, N]) and ``rz = <r, dinv r>`` (float[Q]) in, the
    next four out."""
    tiny = jnp.finfo(r.dtype).tiny
    hp = diag * p - jnp.einsum("qij,qj->qi", curv, p)
    alpha = rz / jnp.maximum((p * hp).sum(axis=1), tiny)
    x = x + alpha[:, None] * p
    r = r - alpha[:, None] * hp
    z = dinv * r
    rz_new = (r * z).sum(axis=1)
    p = z + (rz_new / jnp.maximum(rz, tiny))[:, None] * p
    return x, r, p, rz_new


def _pcg(curv: jax.Array, diag: jax.Array, rhs: jax.Array, rtol, max_iter: int) -> jax.Array:
    """Solve ``(diag(diag) - curv) x = rhs`` for every query by Jacobi-preconditioned conjugate gradients.

    The BT Hessian is a weighted graph Laplacian plus ``ridge * I``; on the dense comparison graphs of a
    tournament (every document meets most others) it is well conditioned after Jacobi scaling, and CG
    reaches float32 precision in ~10 matrix-vector products - cheaper than a batched Cholesky
    (O(N^2) per product instead of O(N^3), and no factor to store). Stops when every query's
    residual is below ``rtol`` times its right-hand side (or after ``max_iter`` products).
    """
    dinv = 1.0 / diag
    goal = (rtol**2) * (rhs * rhs).sum(axis=1)

    def cond(st):
        _, r, _, _, k = st
        return (k < max_iter) & jnp.any((r * r).sum(axis=1) > goal)

    def body(st):
        *state, k = st
        return (*_cg_step(curv, diag, dinv, *state), k + 1)

    z = dinv * rhs
    x, *_ = jax.lax.while_loop(cond, body, (jnp.zeros_like(rhs), rhs, z, (rhs * z).sum(axis=1), 0))
    return x


def _cg_steps(curv: jax.Array, diag: jax.Array, rhs: jax.Array, steps: int) -> jax.Array:
    """``steps`` unrolled iterations of :func:`_pcg` from 0, without a stopping test (traced helper)."""
    dinv = 1.0 / diag
    z = dinv * rhs
    state = (jnp.zeros_like(rhs), rhs, z, (rhs * z).sum(axis=1))
    for _ in range(steps):
        state = _cg_step(curv, diag, dinv, *state)
    return state[0]


def _cg_rtol(dtype) -> float:
    return float(np.sqrt(np.finfo(dtype).eps)) * 0.1


def _log_odds_start(both: jax.Array, anti: jax.Array, ridge, *, with_degree: bool = False):
    """Starting scores: weighted least squares of ``theta_a - theta_b`` on the pair log-odds.

    With ``pi_ab = W_ab / (W_ab + W_ba)`` (clipped to [0.01, 0.99]) and Fisher weights
    ``c_ab = both_ab pi_ab (1 - pi_ab)``, minimise ``sum c_ab (theta_a - theta_b - logit pi_ab)^2``: a
    Laplacian system, solved roughly: :data:`_START_STEPS` conjugate-gradient steps from 0 (:func:`_cg_steps`).
    Close to the BT optimum when pairs are well observed.
    With ``with_degree`` also returns each document's number of distinct comparison partners
    (int[Q, N]), counted in the same pass.
    """
    linked = both > 0
    safe = jnp.where(linked, both, 1.0)
    pi = jnp.clip(0.5 + 0.5 * anti / safe, LABEL_CLIP, 1.0 - LABEL_CLIP)
    c = jnp.where(linked, both * pi * (1.0 - pi), 0.0)
    # materialise the per-pair terms once; XLA would otherwise recompute them for every row sum
    c, cl, lf = jax.lax.optimization_barrier((c, c * jnp.log(pi / (1.0 - pi)), linked.astype(both.dtype)))
    theta0 = _cg_steps(c, c.sum(axis=2) + ridge, cl.sum(axis=2), _START_STEPS)
    if not with_degree:
        return theta0
    self_links = (jnp.diagonal(both, axis1=1, axis2=2) > 0).astype(jnp.int32)
    return theta0, lf.sum(axis=2).astype(jnp.int32) - self_links


_N_HALVINGS = 10
#: Conjugate-gradient steps of the log-odds start (:func:`_log_odds_start`), unrolled, with no stopping test.
#: The start only has to be good enough for Newton: on the benchmark's queries 2 steps already gave the
#: same Newton iteration counts as solving to ``_cg_rtol`` (5-10 steps), and on CPU the tolerance-tested
#: ``while_loop`` cost ~25-70 us more per query than the unrolled steps (A/B, load ~2; issue 20).
_START_STEPS = 6
#: Loosest relative residual of a Newton system (:func:`_newton`). A conjugate-gradient product costs ~1/40
#: of a trial point (O(N^2) multiply-adds against exp and log1p per pair), so early solves are kept
#: accurate: with 0.05 the first steps were poor enough that most queries of the benchmark needed four
#: Newton iterations instead of three (issue 20).
_ETA_MAX = 1e-3


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

def _newton(both, net, theta0, ridge, tol, max_iter: int):
    """Damped Newton on normalised parts (traced helper). Returns ``(theta, iterations, grad, curv, diag)``.

    Each iteration solves every query's Newton system (:func:`_pcg`, to a relative residual of
    ``eta = clip(|d_(k-1)|^2, 0.1 sqrt(eps), _ETA_MAX)``: inexact only where that is nearly free) and evaluates loss,
    gradient and curvatures at the full step in one pass (:func:`_sym_eval`); only when some query's full
    step fails the Armijo test are the failing queries backtracked (halving, at most 10 times). A query
    has converged when its largest step is below ``tol``, or when quadratic convergence is evident (the
    step shrank at least 10x, the next step predicted from the last two, ``|d_k|^3 / |d_(k-1)|^2``, is below
    ``tol``, and so is the error left by the inexact solve, ``eta |d_k|``): Newton's error after applying
    step k is then below ``tol``, so one more iteration would only confirm it. Both tests need only the
    step itself, so they are made before its trial point: a step that ends the iteration is applied in full
    without evaluating loss and gradient there (near the optimum a Newton step that small passes the Armijo
    test), and only the Hessian diagonal is refreshed for the standard errors (:func:`_sym_diag`; issue 20:
    ~30-40 us of the ~500 us per query on CPU). The returned ``grad`` and ``curv`` are then those of the
    last evaluated point. All queries of the batch iterate together; :func:`fit_windows` batches one query
    at a time on CPU, so each stops on its own.
    """
    q, n = theta0.shape
    dtype = both.dtype
    # Armijo condition with a rounding allowance, so a float32 fit near the optimum keeps taking full
    # Newton steps instead of stalling on loss values equal to machine precision.
    rel = 16 * jnp.finfo(dtype).eps
    cg_rtol = _cg_rtol(dtype)

    def body(state):
        theta, f0, grad, curv, diag, it, prev, _ = state
        # inexact Newton: looser solves while far from the optimum, full precision near it
        eta = jnp.clip(prev * prev, cg_rtol, _ETA_MAX)
        delta = _pcg(curv, diag, grad, eta, 4 * n)
        change = jnp.abs(delta).max(axis=1)
        predicted = jnp.isfinite(prev) & (change <= 0.1 * prev) & (change**3 <= tol * prev**2) & (eta * change <= tol)
        last = jnp.all((change <= tol) | predicted)
        return jax.lax.cond(last, final_step, trial_step, (theta, f0, grad, curv, diag, it, prev, delta, eta, change))

    def final_step(args):
        # this step ends the iteration whatever its trial point gives (a step below tol, or quadratic
        # convergence with a full step, which a Newton step that small always passes Armijo with): apply
        # it without evaluating loss and gradient there; only the Hessian diagonal (for the SEs) is updated
        theta, f0, grad, curv, _, it, _, delta, _, change = args
        theta = theta - delta
        return theta, f0, grad, curv, _sym_diag(theta, both, ridge), it + 1, change, jnp.bool_(True)

    def trial_step(args):
        theta, f0, grad, curv, diag, it, prev, delta, _, change = args
        slope = (grad * delta).sum(axis=1)
        slack = rel * (jnp.abs(f0) + 1.0)

        def armijo(f_t, step):
            return f_t <= f0 - 1e-4 * step * slope + slack

        f_full, g_full, c_full, d_full = _sym_eval(theta - delta, both, net, ridge)
        ok = armijo(f_full, 1.0)

        def full_step(_):
            return jnp.ones(q, dtype), f_full, g_full, c_full, d_full

        def backtrack(_):
            def ls_cond(ls):
                _, _, ok, k = ls
                return (k < _N_HALVINGS - 1) & ~jnp.all(ok)

            def ls_body(ls):
                step, f_new, ok, k = ls
                step = jnp.where(ok, step, 0.5 * step)
                f_t = _sym_loss(theta - step[:, None] * delta, both, net, ridge)
                return step, jnp.where(ok, f_new, f_t), ok | armijo(f_t, step), k + 1

            step, f_new, _, _ = jax.lax.while_loop(ls_cond, ls_body, (jnp.ones(q, dtype), f_full, ok, 0))
            _, g, c, dg = _sym_eval(theta - step[:, None] * delta, both, net, ridge, with_loss=False)
            return step, f_new, g, c, dg

        step, f_new, grad, curv, diag = jax.lax.cond(jnp.all(ok), full_step, backtrack, None)
        theta = theta - step[:, None] * delta
        # not the last step (final_step takes those), so not done
        return theta, f_new, grad, curv, diag, it + 1, change, jnp.bool_(False)

    def cond(state):
        return (state[5] < max_iter) & ~state[7]

    state = (theta0, *_sym_eval(theta0, both, net, ridge), 0, jnp.full(q, jnp.inf, dtype), jnp.bool_(False))
    theta, _, grad, curv, diag, iters, _, _ = jax.lax.while_loop(cond, body, state)
    return theta, iters, grad, curv, diag


def _centre(theta, mask):
    theta = jnp.where(mask, theta, 0.0)
    mean = theta.sum(axis=1, keepdims=True) / jnp.maximum(mask.sum(axis=1, keepdims=True), 1)
    return jnp.where(mask, theta - mean, 0.0)


@partial(jax.jit, static_argnames=("max_iter",))
def fit_map(
    wins: jax.Array, mask: jax.Array, ridge: float = DEFAULT_RIDGE, tol: float = 1e-6, max_iter: int = 50
) -> tuple[jax.Array, jax.Array]:
    """MAP Bradley-Terry scores of a padded batch of queries by damped Newton.

    Args:
        wins: float[Q, N, N] soft win statistics (:func:`pair_statistics`); padded documents have zero
            rows and columns.
        mask: bool[Q, N] real documents.
        ridge: L2 penalty lambda.
        tol: stop when every query's largest Newton step is below ``tol`` (or when quadratic
            convergence predicts the next one is).
        max_iter: iteration cap.

    Returns:
        (theta float[Q, N] centred over real documents and 0 on padding, iterations int).

    Exact Hessians, Newton systems solved by preconditioned conjugate gradients, a log-odds least-
    squares start; see the module notes.
    """
    both, anti, net, _ = _normalise(*_symmetric_parts(wins))
    theta0 = _log_odds_start(both, anti, ridge)
    theta, iters, *_ = _newton(both, net, theta0, ridge, tol, max_iter)
    return _centre(theta, mask), iters


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


def _components(linked: jax.Array, mask: jax.Array, degree: jax.Array | None = None):
    """Label propagation (smallest index wins) over ``linked: bool[Q, N, N]``; see :func:`connected_components`.

    Shortcut: a graph in which every vertex is linked to at least half of the others is connected
    (any two vertices share a neighbour or are adjacent), which a tournament's dense comparison graphs
    almost always satisfy; then one degree count replaces the propagation passes. ``degree`` (int[Q, N],
    links to other real documents) may be passed in when it was counted elsewhere.
    """
    adj = linked & mask[:, :, None] & mask[:, None, :]
    n = mask.shape[1]
    big = jnp.int32(n)
    arange = jnp.arange(n, dtype=jnp.int32)[None, :]
    labels0 = jnp.where(mask, arange, big)
    size = mask.sum(axis=1)
    if degree is None:
        degree = (adj & ~jnp.eye(n, dtype=bool)).sum(axis=2)
    dense = jnp.all(jnp.where(mask, 2 * degree >= size[:, None] - 1, True), axis=1) | (size <= 1)

    def body(state):
        labels, _ = state
        neigh = jnp.where(adj, labels[:, None, :], big).min(axis=2)
        new = jnp.minimum(labels, neigh)
        return new, jnp.any(new != labels)

    def propagate(_):
        return jax.lax.while_loop(lambda s: s[1], body, (labels0, jnp.bool_(True)))[0]

    def shortcut(_):
        first = jnp.argmax(mask, axis=1).astype(jnp.int32)
        return jnp.where(mask, first[:, None], big)

    labels = jax.lax.cond(jnp.all(dense), shortcut, propagate, None)
    # queries that are not all dense still get exact labels from the propagation
    roots = mask & (labels == arange)
    return jnp.where(mask, labels, -1), roots.sum(axis=1)


@jax.jit
def connected_components(wins: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Connected components of each query's comparison graph.

    Args:
        wins: float[Q, N, N]; documents a and b are linked when they shared a window.
        mask: bool[Q, N] real documents.

    Returns:
        (labels int[Q, N]: smallest document index of the component, -1 on padding;
        n_components int[Q]).
    """
    return _components((wins + jnp.swapaxes(wins, 1, 2)) > 0, mask)


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
    """Whole fit of one padded block of queries from its windows (traced; see :func:`fit_windows`).

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
    # elementwise pass over slices; XLA's CPU code for one concatenation of the pair slots per window
    # (:func:`_first` / :func:`_second`) was ~15 us per query slower (issue 20)
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


@lru_cache(maxsize=None)
def _sharded_fit_block(devices: tuple, max_iter: int, chunk: int):
    """``_fit_queries`` mapped over a 1-D mesh of ``devices``: each device fits its own queries."""
    from jax.sharding import Mesh, PartitionSpec as P

    mesh = Mesh(np.asarray(devices), ("query",))
    spec = P("query")
    fun = jax.shard_map(
        partial(_fit_queries, max_iter=max_iter, chunk=chunk), mesh=mesh,
        in_specs=(spec, spec, spec, P(), P()), out_specs=(spec,) * 5, check_vma=False,
    )
    return jax.jit(fun), mesh


# --------------------------------------------------------------------------------------------------
# ragged front end
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BTFit:
    """Bradley-Terry fit of many queries (ragged, padded to the largest pool).

    Attributes:
        theta: float64[Q, N] centred scores (0 on padding).
        se: float64[Q, N] standard errors (NaN on padding).
        mask: bool[Q, N] real documents (``mask[q, :n_docs[q]]``).
        component: int[Q, N] component label (0..k-1 in order of first document; -1 on padding).
        n_components: int[Q] number of connected components (1 = connected).
        iterations: int[Q] Newton iterations used by the query (by its batch, when ``chunk`` > 1).
    """

    theta: np.ndarray
    se: np.ndarray
    mask: np.ndarray
    component: np.ndarray
    n_components: np.ndarray
    iterations: np.ndarray


def _bucket_size(n: int, multiple: int = 16) -> int:
    return max(multiple, -(-n // multiple) * multiple)


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _prev_pow2(n: int) -> int:
    return 1 << max(0, int(n).bit_length() - 1)


def _window_slots(n: int) -> int:
    """Windows per query of a compiled call: ``n`` rounded up to 8 or to 1, 1.25, 1.5 or 1.75 times a power
    of two (at most 25% padding, few distinct shapes)."""
    if n <= 8:
        return 8
    top = _prev_pow2(n)
    return next(m for m in (top, top * 5 // 4, top * 3 // 2, top * 7 // 4, 2 * top) if m >= n)


def default_chunk(devices: Sequence[jax.Device]) -> int | None:
    """Queries per sequential batch: 1 on CPU (cache-resident, each query stops on its own), ``None``
    (all queries of a call at once) on accelerators."""
    return 1 if all(d.platform == "cpu" for d in devices) else None


def _default_threads() -> int:
    import os

    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return _prev_pow2(max(1, min(n, 8)))


#: Queries per compiled call on the per-query path (``chunk`` set, as on CPU): every call fits this many
#: rows (a bucket's last block is padded with empty queries, which stop at once), so the number of queries
#: never enters a compiled shape; the blocks run from a thread pool.
BLOCK_QUERIES = 16
#: Fewest window slots per query on the per-query path (:func:`_slot_bucket`).
MIN_SLOTS = 64
#: Pools of at most this many documents (the smallest pool-size bucket) are fitted with windows of at least
#: :data:`SMALL_POOL_WIDTH` slots (padded with empty slots): a table of small pools has the width of its
#: largest window, and padded so, tables of 2- to 10-document windows share one compiled program per
#: dtype (~2 s of XLA each) at no measurable cost for pools that small.
SMALL_POOL_DOCS = 16
SMALL_POOL_WIDTH = 10


def _slot_bucket(n: int) -> int:
    """Windows per query of a call on the per-query path (``chunk = 1``): a power of two, at least
    :data:`MIN_SLOTS`. Padding slots cost nothing there (:func:`_query_scatter` stops at a query's last
    window), so a coarse bucket keeps refits with more windows on the same compiled program."""
    return max(MIN_SLOTS, _next_pow2(n))


class _PaddedWindows:
    """The windows of a call's queries, handed out as padded blocks ``int32/float[q, V, w]`` (host side).

    ``rows`` are the input windows of the call, ``lq`` their query's row in the call and ``slots`` their
    slot among that query's windows; :meth:`block` pads the windows of rows ``[lo, hi)`` (-1 / 0 in empty
    slots). Blocks are built on demand, so the thread pool of :func:`_run_blocks` pads its own blocks in
    cache-sized pieces instead of one ``Q x V x w`` pair of arrays (200 MB at 10,000 queries).
    """

    def __init__(self, doc_index, scores, rows, lq, slots, v: int, np_dtype):
        # rows come increasing; consecutive rows (a grouped input) let blocks read slices, not gathers
        self.first = int(rows[0]) if len(rows) else 0
        self.contiguous = len(rows) == 0 or int(rows[-1]) - self.first == len(rows) - 1
        if len(lq) > 1 and np.any(lq[1:] < lq[:-1]):
            o = np.argsort(lq, kind="stable")
            rows, lq, slots = rows[o], lq[o], slots[o]
            self.contiguous = False
        self.doc_index, self.scores, self.v, self.np_dtype = doc_index, scores, v, np_dtype
        self.rows, self.lq, self.slots = rows, lq, slots

    def block(self, lo: int, hi: int):
        s, e = np.searchsorted(self.lq, [lo, hi])
        w = self.doc_index.shape[1]
        di = np.full((hi - lo, self.v, w), -1, dtype=np.int32)
        sc = np.zeros((hi - lo, self.v, w), dtype=self.np_dtype)
        at = (self.lq[s:e] - lo) * self.v + self.slots[s:e]
        src = slice(self.first + s, self.first + e) if self.contiguous else self.rows[s:e]
        di.reshape(-1, w)[at] = self.doc_index[src]
        sc.reshape(-1, w)[at] = self.scores[src]
        return di, sc


def _run_blocks(windows: _PaddedWindows, m, ridge, tol, max_iter: int, block: int, chunk: int, threads: int | None):
    """:func:`_fit_queries` on one device, ``block`` queries per call (``Q`` a multiple of it), the calls
    run from a thread pool of ``threads`` workers (JAX's CPU client executes them in parallel).

    Every call is the same compiled program whatever ``Q``; each query's result is the same whatever the
    split (queries are fitted independently). Returns numpy arrays as :func:`_fit_block`.
    """
    q = m.shape[0]
    parts = _default_threads() if threads is None else max(1, int(threads))
    # jax.enable_x64 is thread-local: each worker thread sets it again, or a float64 fit would run
    # (and stop) in float32 there
    x64 = windows.np_dtype == np.float64

    def call(lo):
        di, sc = windows.block(lo, lo + block)
        with jax.enable_x64(x64):
            return jax.block_until_ready(_fit_block_jit(
                di, sc, m[lo : lo + block], ridge, tol, max_iter=max_iter, chunk=chunk))

    starts = range(0, q, block)
    if parts == 1:
        outs = [call(lo) for lo in starts]
    else:
        from concurrent.futures import ThreadPoolExecutor

        # JAX compiles a new program once even when several workers call it at the same time
        with ThreadPoolExecutor(min(parts, len(starts))) as pool:
            outs = list(pool.map(call, starts))
    if len(outs) == 1:
        return tuple(np.asarray(x) for x in outs[0])
    return tuple(np.concatenate([np.asarray(o[i]) for o in outs]) for i in range(5))


def _run_sharded(devs, di, sc, m, ridge, tol, np_dtype, max_iter: int, size: int, chunk: int):
    """:func:`_fit_queries` sharded over ``devs``, ``size`` queries per call (dispatched together)."""
    fun, _ = _sharded_fit_block(devs, max_iter, chunk)
    r, t = np.asarray(ridge, np_dtype), np.asarray(tol, np_dtype)
    outs = [fun(di[lo : lo + size], sc[lo : lo + size], m[lo : lo + size], r, t) for lo in range(0, di.shape[0], size)]
    if len(outs) == 1:
        return tuple(np.asarray(x) for x in outs[0])
    return tuple(np.concatenate([np.asarray(o[i]) for o in outs]) for i in range(5))


def fit_windows(
    doc_index: np.ndarray,
    scores: np.ndarray,
    window_query: np.ndarray,
    n_docs: np.ndarray,
    *,
    ridge: float = DEFAULT_RIDGE,
    dtype=jnp.float32,
    tol: float | None = None,
    max_iter: int = 50,
    max_batch_cells: int = 2**26,
    devices: Sequence[jax.Device] | None = None,
    chunk: int | None = 0,
    threads: int | None = None,
) -> BTFit:
    """Fit BT for many queries of different pool sizes in one call.

    Args:
        doc_index: int[W, w] document index within the window's query, -1 for empty slots.
        scores: float[W, w] judge scores.
        window_query: int[W] query index of each window in ``[0, Q)``.
        n_docs: int[Q] pool size of each query; document indices must be ``< n_docs[q]``.
        ridge: L2 penalty.
        dtype: ``jnp.float32`` (default, fast) or ``jnp.float64`` (runs under ``jax.enable_x64``).
        tol: Newton step tolerance (default 1e-5 in float32, 1e-10 in float64).
        max_iter: Newton iteration cap.
        max_batch_cells: cap on ``queries x N x N`` per compiled call.
        devices: shard the queries of each call over these devices (default: every device of the
            default backend; one device means no sharding).
        chunk: queries fitted together inside a call (0: :func:`default_chunk`, i.e. one at a time on
            CPU, where each query's statistics stay in cache and each query stops iterating on its own;
            ``None``: all queries of the call at once, as suits a GPU).
        threads: on one device with ``chunk`` set, run the blocks of :data:`BLOCK_QUERIES` queries from a
            thread pool of this many workers (JAX's CPU client executes them in parallel); default: the
            CPUs this process may use (a power of two, at most 8). Each query's result is the same whatever
            the split (queries are fitted independently).

    Returns:
        :class:`BTFit`.

    Queries are grouped into buckets of equal padded pool size (a multiple of 16). With ``chunk`` set (CPU),
    every compiled call fits a fixed block of :data:`BLOCK_QUERIES` queries (times the devices), each with
    a power-of-two number of window slots, at least :data:`MIN_SLOTS` (:func:`_slot_bucket`; padding slots
    cost nothing), so refits with other query counts, and most with other window counts, reuse the
    compiled program of their pool-size bucket, width and dtype (pools of at most :data:`SMALL_POOL_DOCS`
    documents: a width of at least :data:`SMALL_POOL_WIDTH`). With ``chunk=None`` each call fits a
    power-of-two number of queries (at most ``max_batch_cells / N^2``) together, with
    :func:`_window_slots` slots.
    """
    doc_index = np.asarray(doc_index)
    scores = np.asarray(scores)
    window_query = np.asarray(window_query, dtype=np.int64)
    n_docs = np.asarray(n_docs, dtype=np.int64)
    n_q = len(n_docs)
    n_max = int(n_docs.max()) if n_q else 0
    theta = np.zeros((n_q, n_max))
    se = np.full((n_q, n_max), np.nan)
    mask = np.arange(n_max)[None, :] < n_docs[:, None]
    component = np.full((n_q, n_max), -1, dtype=np.int64)
    n_comp = np.zeros(n_q, dtype=np.int64)
    iters = np.zeros(n_q, dtype=np.int64)
    if n_q == 0:
        return BTFit(theta, se, mask, component, n_comp, iters)
    x64 = jnp.dtype(dtype) == jnp.float64
    if tol is None:
        tol = 1e-10 if x64 else 1e-5
    devs = tuple(jax.devices() if devices is None else devices)
    n_dev = len(devs)
    if chunk == 0:
        chunk = default_chunk(devs)
    np_dtype = np.float64 if x64 else np.float32

    # slot of each window among its query's windows (in input order)
    counts = np.bincount(window_query, minlength=n_q)
    within = np.arange(len(window_query)) - np.repeat(np.cumsum(counts) - counts, counts)
    if np.all(window_query[1:] >= window_query[:-1]):  # windows grouped by query (as the encoder gives them)
        slot = within
    else:
        slot = np.empty(len(window_query), dtype=np.int64)
        slot[np.argsort(window_query, kind="stable")] = within
    width = doc_index.shape[1]
    local = np.full(n_q, -1, dtype=np.int64)
    narrow = None  # (doc_index, scores) padded to SMALL_POOL_WIDTH slots, made when a small pool needs it

    sizes = np.array([_bucket_size(int(n)) for n in n_docs])
    with jax.enable_x64(x64):
        for size in np.unique(sizes):
            members = np.flatnonzero(sizes == size)
            cap = _prev_pow2(max(1, int(max_batch_cells // (size * size))))
            if chunk is None:
                per_call = max(n_dev, cap)
            else:
                # fixed blocks: ``call`` queries per compiled call whatever the number of queries
                block = -(-max(BLOCK_QUERIES, chunk) // chunk) * chunk
                call = block * n_dev
                per_call = call * max(1, cap // call)
            for lo in range(0, len(members), per_call):
                part = members[lo : lo + per_call]
                if chunk is None:
                    q_pad = max(n_dev, _next_pow2(len(part)))
                    v = _window_slots(int(counts[part].max()))
                else:
                    q_pad = -(-len(part) // call) * call
                    most = int(counts[part].max())
                    v = _slot_bucket(most) if chunk == 1 else _window_slots(most)
                local[part] = np.arange(len(part))
                rows = np.flatnonzero(local[window_query] >= 0) if len(part) < n_q else np.arange(len(window_query))
                lq = local[window_query[rows]]
                local[part] = -1
                di, sc = doc_index, scores
                if size <= SMALL_POOL_DOCS and width < SMALL_POOL_WIDTH:
                    if narrow is None:
                        pad = ((0, 0), (0, SMALL_POOL_WIDTH - width))
                        narrow = np.pad(doc_index, pad, constant_values=-1), np.pad(scores, pad)
                    di, sc = narrow
                windows = _PaddedWindows(di, sc, rows, lq, slot[rows], v, np_dtype)
                m = np.zeros((q_pad, size), dtype=bool)
                m[: len(part)] = np.arange(size)[None, :] < n_docs[part][:, None]
                if chunk is None and n_dev == 1:
                    out = _fit_block_jit(*windows.block(0, q_pad), m, ridge, tol, max_iter=max_iter, chunk=q_pad)
                elif chunk is None:
                    out = _run_sharded(devs, *windows.block(0, q_pad), m, ridge, tol, np_dtype, max_iter, q_pad, q_pad // n_dev)
                elif n_dev == 1:
                    # each worker pads its own block's windows (small arrays, in cache; no Q x V x w copy)
                    out = _run_blocks(windows, m, ridge, tol, max_iter, block, chunk, threads)
                else:
                    out = _run_sharded(devs, *windows.block(0, q_pad), m, ridge, tol, np_dtype, max_iter, call, chunk)
                th, s, lab, nc, it = (np.asarray(x)[: len(part)] for x in out)
                n_c = n_docs[part]
                real = np.arange(size)[None, :] < n_c[:, None]
                cols = min(size, n_max)
                theta[part, :cols] = np.where(real, th, 0.0)[:, :cols]
                se[part, :cols] = np.where(real, s, np.nan)[:, :cols]
                n_comp[part] = nc
                iters[part] = it
                # component labels 0..k-1 in order of first document (labels are the smallest member)
                comp = np.where(real, lab, -1)[:, :cols]
                connected = nc == 1
                component[part[connected], :cols] = np.where(real[connected, :cols], 0, -1)
                for row in np.flatnonzero(~connected):
                    n = n_c[row]
                    _, inv = np.unique(comp[row, :n], return_inverse=True)
                    component[part[row], :n] = inv
    return BTFit(theta, se, mask, component, n_comp, iters)

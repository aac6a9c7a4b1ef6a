"""The Bradley-Terry MAP solve: damped Newton with exact Hessians, on padded batches of queries.

Newton systems are solved by Jacobi-preconditioned conjugate gradients on the Hessian's graph-Laplacian
form (:func:`_pcg`: O(N^2) per product instead of a batched O(N^3) Cholesky), starting from a weighted
least-squares fit of the pairwise log-odds (:func:`_log_odds_start`), which saves Newton iterations. A
trial point costs one ``exp`` and one ``log1p`` per pair and gives loss, gradient and curvatures together
(:func:`~rcp_jax.models.bradley_terry.objective._sym_eval`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models.bradley_terry.objective import (
    DEFAULT_RIDGE, LABEL_CLIP, _normalise, _sym_diag, _sym_eval, _sym_loss, _symmetric_parts,
)


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
#: The start only has to be good enough for Newton, and unrolled steps cost less on CPU than a
#: tolerance-tested ``while_loop`` (benchmarks/RESULTS.md).
_START_STEPS = 6

#: Loosest relative residual of a Newton system (:func:`_newton`). A conjugate-gradient product costs far
#: less than a trial point (O(N^2) multiply-adds against exp and log1p per pair), so early solves are kept
#: accurate: looser ones cost a Newton iteration more on most queries (benchmarks/RESULTS.md).
_ETA_MAX = 1e-3


def _newton(both, net, theta0, ridge, tol, max_iter: int):
    """Damped Newton on normalised parts (traced helper). Returns ``(theta, iterations, grad, curv, diag)``.

    Each iteration solves every query's Newton system (:func:`_pcg`, to a relative residual of
    ``eta = clip(|d_(k-1)|^2, 0.1 sqrt(eps), _ETA_MAX)``: inexact only where that is nearly free) and evaluates loss,
    gradient and curvatures at the full step in one pass (:func:`_sym_eval`); only when some query's full step fails
    the Armijo test are the failing queries backtracked (halving, at most 10 times). A query has converged when its
    largest step is below ``tol``, or when quadratic convergence is evident (the step shrank at least 10x, the next
    step predicted from the last two, ``|d_k|^3 / |d_(k-1)|^2``, is below ``tol``, and so is the error left by the
    inexact solve, ``eta |d_k|``): Newton's error after applying step k is then below ``tol``, so one more iteration
    would only confirm it. Both tests need only the step itself, so they are made before its trial point: a step
    that ends the iteration is applied in full without evaluating loss and gradient there (near the optimum a Newton
    step that small passes the Armijo test), and only the Hessian diagonal is refreshed for the standard errors
    (:func:`_sym_diag`). The returned ``grad`` and ``curv`` are then those of the last evaluated point. All queries
    of the batch iterate together; :func:`~rcp_jax.models.bradley_terry.batching.fit_windows` batches one query at a time on
    CPU, so each stops on its own.
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
        wins: float[Q, N, N] soft win statistics (:func:`~rcp_jax.models.bradley_terry.objective.pair_statistics`); padded
        documents have zero
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

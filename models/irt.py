"""Item response models of Stage B rubric answers (METHOD sections 2-3).

Three fits, all on answers collapsed to binomial cells ``(passes, trials)``:

* :func:`fit_2pl_calibration` - the RCP calibration. For document i of query j and criterion c::

      P(Y = 1) = sigmoid(gamma_c * (tau_j * theta_i^BT + alpha_j - beta_c))

  with BT scores frozen, ``gamma = C softmax(u)``, ``beta = v - mean(v)``, ``tau = softplus(t)`` and the
  MAP objective of the reference implementation::

      mean BCE over answers + (1/(N C)) sum_j [(tau_j - 1)^2 / 2 + alpha_j^2 / (2 * 2^2)]
                            + ridge/2 (||u||^2 + ||v||^2)

  (N C = number of individual yes/no answers). Solved by Levenberg-Marquardt Newton with the arrow-
  shaped Hessian eliminated through a Schur complement: exact second-order steps whose cost is linear
  in the number of queries.
* :func:`fit_rasch` - per-query Rasch model ``sigmoid(theta_i - beta_c)`` (beta centred, ridge), used to
  stratify Stage B windows.
* :func:`fit_rubric_only` - a 2PL without a tournament: marginal maximum likelihood with ability
  ~ N(0, 1) integrated on a fixed grid, EAP abilities, parameters reported with sum(gamma) = C and
  mean(beta) = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from models._newton import lm_newton

DEFAULT_RIDGE = 1e-4
TAU_PRIOR_SD = 1.0
ALPHA_PRIOR_SD = 2.0
_SOFTPLUS_INV_ONE = float(np.log(np.expm1(1.0)))
#: Default ridge of the rubric-only marginal ML (:func:`fit_rubric_only`): small enough to leave the
#: estimates within 1e-3 of unpenalised marginal ML (girth, theta-irt), large enough to keep a criterion
#: nobody passes finite.
RUBRIC_ONLY_RIDGE = 1e-7
#: Largest change of t = softplus^-1(tau) in one Newton step of the calibration (a trust region on t).
MAX_T_STEP = 1.0


def _binomial_nll(logit: jax.Array, passes: jax.Array, trials: jax.Array) -> jax.Array:
    """Negative log-likelihood of ``passes`` out of ``trials`` (no binomial coefficient)."""
    return -(passes * jax.nn.log_sigmoid(logit) + (trials - passes) * jax.nn.log_sigmoid(-logit))


@jax.jit
def item_parameters(u: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``gamma = C softmax(u)`` (sums to C) and ``beta = v - mean(v)``, each float[C]."""
    c = u.shape[-1]
    return c * jax.nn.softmax(u, axis=-1), v - v.mean(axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------------------
# 2PL calibration with frozen BT scores
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationCells:
    """Rubric answers of many queries as padded binomial cells.

    Attributes:
        theta: float[Q, M] frozen BT score of the cell's document.
        criterion: int[Q, M] criterion index in ``[0, C)``.
        passes: float[Q, M] number of "yes" answers.
        trials: float[Q, M] number of answers (0 marks padding).
        n_criteria: C.
    """

    theta: np.ndarray
    criterion: np.ndarray
    passes: np.ndarray
    trials: np.ndarray
    n_criteria: int


@dataclass(frozen=True)
class CriterionMajorCells:
    """Rubric answers already laid out for the compiled 2PL solve (:func:`criterion_major_cells`).

    Attributes:
        theta, passes, trials: float[Q_pad, C, K_pad] in the fit's dtype: cell ``k`` of criterion ``c`` of query
            ``j`` at ``[j, c, k]``, as :func:`_criterion_major` lays out :class:`CalibrationCells` (queries
            beyond ``n_queries`` and cells beyond a query's documents are padding with trials 0). ``theta`` and
            ``trials`` may be float[Q_pad, 1, K_pad]: the same for every criterion (read once per cell by the
            compiled solve).
        n_queries: Q, the real queries (the first rows).
        n_criteria: C.
    """

    theta: np.ndarray
    passes: np.ndarray
    trials: np.ndarray
    n_queries: int
    n_criteria: int


@dataclass(frozen=True)
class CalibrationFit:
    """MAP of the 2PL calibration.

    Attributes:
        gamma, beta: float64[C] item discriminations (sum C) and difficulties (mean 0).
        tau, alpha: float64[Q] per-query scale (> 0) and offset.
        u, v, t: float64 raw parameters (for warm starts / Bayesian initialisation).
        objective: final MAP objective (the mean-scaled one above).
        iterations: Newton iterations; converged: whether the step tolerance was met.
    """

    gamma: np.ndarray
    beta: np.ndarray
    tau: np.ndarray
    alpha: np.ndarray
    u: np.ndarray
    v: np.ndarray
    t: np.ndarray
    objective: float
    iterations: int
    converged: bool


@jax.jit
def calibration_objective(u, v, t, alpha, theta, criterion, passes, trials, ridge=DEFAULT_RIDGE):
    """The MAP objective (mean scale) of the 2PL calibration; arrays as in :class:`CalibrationCells`."""
    total = trials.sum()
    return _sum_objective(u, v, t, alpha, theta, criterion, passes, trials, ridge, total) / total


def _query_terms(u, v, local, theta, criterion, passes, trials):
    """Negative log posterior terms of one query (sum scale): data + tau/alpha priors."""
    gamma, beta = item_parameters(u, v)
    tau = jax.nn.softplus(local[0])
    alpha = local[1]
    logit = gamma[criterion] * (tau * theta + alpha - beta[criterion])
    nll = _binomial_nll(logit, passes, trials).sum()
    has_data = trials.sum() > 0
    prior = (tau - 1.0) ** 2 / (2 * TAU_PRIOR_SD**2) + alpha**2 / (2 * ALPHA_PRIOR_SD**2)
    return nll + jnp.where(has_data, prior, 0.0)


def _sum_objective(u, v, t, alpha, theta, criterion, passes, trials, ridge, total):
    local = jnp.stack([t, alpha], axis=1)
    per_query = jax.vmap(_query_terms, in_axes=(None, None, 0, 0, 0, 0, 0))(
        u, v, local, theta, criterion, passes, trials
    )
    return per_query.sum() + 0.5 * ridge * total * ((u**2).sum() + (v**2).sum())


def _moments(u, v, t, alpha, theta, passes, trials):
    """Per (query, criterion) sums over cells that give the exact gradient and Hessian (traced helper).

    Cells are criterion-major, ``float[Q, C, K]``. With ``x = tau theta + alpha - beta_c``, ``z = gamma_c x``
    and the binomial NLL's derivatives in ``z``, ``l1 = trials sigmoid(z) - passes`` and
    ``l2 = trials sigmoid(z) (1 - sigmoid(z))``, returns float[5, Q, C]:
    ``[sum l1, sum l1 theta, sum l2, sum l2 theta, sum l2 theta^2]``.

    The plain form: the solver computes these inside :func:`_cm_eval`; tests check that fused pass against
    this one (and :func:`_calibration_derivs` against autodiff of :func:`_cm_objective`).
    """
    gamma, beta = item_parameters(u, v)
    tau = jax.nn.softplus(t)
    z = gamma[None, :, None] * (tau[:, None, None] * theta + (alpha[:, None] - beta[None, :])[:, :, None])
    s = jax.nn.sigmoid(z)
    l1, l2 = jax.lax.optimization_barrier((trials * s - passes, trials * s * (1.0 - s)))
    return jnp.stack([l1.sum(-1), (l1 * theta).sum(-1), l2.sum(-1), (l2 * theta).sum(-1), (l2 * theta * theta).sum(-1)])


def _cm_objective(u, v, t, alpha, theta, passes, trials, has_data, ridge, total):
    """The MAP objective on the sum scale from criterion-major cells (traced helper): the plain reference form
    of the objective half of :func:`_cm_eval`, which the solver calls; the tests differentiate this one."""
    gamma, beta = item_parameters(u, v)
    tau = jax.nn.softplus(t)
    z = gamma[None, :, None] * (tau[:, None, None] * theta + (alpha[:, None] - beta[None, :])[:, :, None])
    nll = _binomial_nll(z, passes, trials).sum()
    prior = jnp.where(has_data, (tau - 1.0) ** 2 / (2 * TAU_PRIOR_SD**2) + alpha**2 / (2 * ALPHA_PRIOR_SD**2), 0.0)
    return nll + prior.sum() + 0.5 * ridge * total * ((u**2).sum() + (v**2).sum())


def _cm_eval(u, v, t, alpha, theta, passes, trials, has_data, ridge, total):
    """:func:`_cm_objective` and :func:`_moments` at one point in one pass over the cells (traced helper).

    ``passes`` is float[Q, C, K]; ``theta`` and ``trials`` are float[Q, C, K] or, when they are the same for every
    criterion (a document's BT score and placements), float[Q, 1, K], read once for all C. Both follow from
    ``e = exp(-|z|)``: ``sigmoid(z) = where(z >= 0, 1, e) / (1 + e)``, ``sigmoid(z) (1 - sigmoid(z)) = e / (1 + e)^2``
    and the binomial NLL ``trials log1p(e) + passes max(-z, 0) + (trials - passes) max(z, 0)`` (non-negative
    terms, no cancellation): one exponential and one log1p per cell instead of three exponentials and two logs.
    The NLL is summed per (query, criterion) first, then over those sums.

    Returns ``(objective on the sum scale, moments float[5, Q, C])``.
    """
    gamma, beta = item_parameters(u, v)
    tau = jax.nn.softplus(t)
    z = gamma[None, :, None] * (tau[:, None, None] * theta + (alpha[:, None] - beta[None, :])[:, :, None])
    e = jnp.exp(-jnp.abs(z))
    r = 1.0 / (1.0 + e)
    l1 = trials * jnp.where(z >= 0, r, e * r) - passes
    l2 = trials * (e * r * r)
    nll = trials * jnp.log1p(e) + passes * jnp.maximum(-z, 0.0) + (trials - passes) * jnp.maximum(z, 0.0)
    # materialised once: XLA would otherwise recompute the exponential for each of the sums below
    l1, l2, nll = jax.lax.optimization_barrier((l1, l2, nll))
    moments = jnp.stack([l1.sum(-1), (l1 * theta).sum(-1), l2.sum(-1), (l2 * theta).sum(-1), (l2 * theta * theta).sum(-1)])
    prior = jnp.where(has_data, (tau - 1.0) ** 2 / (2 * TAU_PRIOR_SD**2) + alpha**2 / (2 * ALPHA_PRIOR_SD**2), 0.0)
    f = nll.sum(-1).sum() + prior.sum() + 0.5 * ridge * total * ((u**2).sum() + (v**2).sum())
    return f, moments


def _cell_totals(passes, trials):
    """``(total answers, has_data bool[Q])`` of criterion-major cells; ``trials`` float[Q, C, K] or float[Q, 1, K]
    (the same for every criterion of ``passes`` float[Q, C, K])."""
    per_query = trials.sum(axis=(1, 2))
    return per_query.sum() * (passes.shape[1] // trials.shape[1]), per_query > 0


def _calibration_derivs(s, local, theta, passes, trials, ridge):
    """Closed-form gradient and Hessian blocks of the calibration objective (sum scale); see
    :func:`_calibrate_newton_impl`. Returns ``(g_s [2C], g_l [Q, 2], h_ss [2C, 2C], h_ls [Q, 2, 2C],
    h_ll [Q, 2, 2])`` with ``s = (u, v)`` and ``local[:, 0] = t``, ``local[:, 1] = alpha``.

    The solver takes the moments from :func:`_cm_eval` and calls :func:`_derivs_from_moments` directly; this
    entry point (moments by :func:`_moments`) is what the tests compare with autodiff.
    """
    c = s.shape[0] // 2
    total, has_data = _cell_totals(passes, trials)
    moments = _moments(s[:c], s[c:], local[:, 0], local[:, 1], theta, passes, trials)
    return _derivs_from_moments(s, local, moments, has_data, ridge, total)


def _derivs_from_moments(s, local, moments, has_data, ridge, total):
    """:func:`_calibration_derivs` from the moments float[5, Q, C] at ``(s, local)`` (:func:`_moments` or
    :func:`_cm_eval`), ``has_data`` bool[Q] and the number of answers ``total``."""
    c = s.shape[0] // 2
    dtype = moments.dtype
    eye_s = jnp.eye(2 * c, dtype=dtype)
    prior_t, prior_a = 1.0 / TAU_PRIOR_SD**2, 1.0 / ALPHA_PRIOR_SD**2
    u, v = s[:c], s[c:]
    t, alpha = local[:, 0], local[:, 1]
    gamma, beta = item_parameters(u, v)
    tau = jax.nn.softplus(t)
    st = jax.nn.sigmoid(t)
    s0, s1, a0, a1, a2 = moments  # each [Q, C]
    dl = (alpha[:, None] - beta[None, :])
    tq = tau[:, None]
    g = gamma[None, :]
    sx = tq * s1 + dl * s0
    ax = tq * a1 + dl * a0
    axx = tq * tq * a2 + 2 * tq * dl * a1 + dl * dl * a0
    axt = tq * a2 + dl * a1
    # natural gradient: items summed over queries, locals per query
    g_items = jnp.concatenate([sx.sum(0), -(g * s0).sum(0)])  # [2C]
    g_tau = (g * s1).sum(1) + jnp.where(has_data, prior_t * (tau - 1.0), 0.0)
    g_alpha = (g * s0).sum(1) + jnp.where(has_data, prior_a * alpha, 0.0)
    # natural Hessian: item-item blocks are diagonal in c
    h_gg, h_gb, h_bb = axx.sum(0), (-g * ax - s0).sum(0), (g * g * a0).sum(0)
    h_items = jnp.block([[jnp.diag(h_gg), jnp.diag(h_gb)], [jnp.diag(h_gb), jnp.diag(h_bb)]])
    h_tau_items = jnp.concatenate([g * axt + s1, -g * g * a1], axis=1)  # [Q, 2C]
    h_alpha_items = jnp.concatenate([g * ax + s0, -g * g * a0], axis=1)
    h_tt = (g * g * a2).sum(1) + jnp.where(has_data, prior_t, 0.0)
    h_ta = (g * g * a1).sum(1)
    h_aa = (g * g * a0).sum(1) + jnp.where(has_data, prior_a, 0.0)

    # chain rule to raw parameters
    def nat_items(y):
        return jnp.concatenate(item_parameters(y[:c], y[c:]))

    jac = jax.jacfwd(nat_items)(s)  # [2C, 2C]
    curv_items = jax.hessian(lambda y: jnp.dot(jax.lax.stop_gradient(g_items), nat_items(y)))(s)
    g_s = jac.T @ g_items + ridge * total * s
    h_ss = jac.T @ h_items @ jac + curv_items + ridge * total * eye_s
    g_l = jnp.stack([g_tau * st, g_alpha], axis=1)  # [Q, 2]
    h_ls = jnp.stack([(h_tau_items @ jac) * st[:, None], h_alpha_items @ jac], axis=1)  # [Q, 2, 2C]
    h_tt_raw = h_tt * st * st + g_tau * st * (1.0 - st)
    h_ll = jnp.stack([jnp.stack([h_tt_raw, h_ta * st], -1), jnp.stack([h_ta * st, h_aa], -1)], axis=1)
    return g_s, g_l, h_ss, h_ls, h_ll


def _calibrate_newton_impl(theta, passes, trials, u0, v0, t0, a0, ridge, tol, n_damp, max_iter: int):
    """Levenberg-Marquardt Newton with exact, analytic Hessians and a Schur complement (traced helper).

    ``theta, passes, trials: float[Q, C, K]`` criterion-major cells (``theta`` and ``trials`` may be float[Q, 1, K]
    when they are the same for every criterion). Natural parameters per query are
    ``(gamma, beta, tau, alpha)``; their gradient and Hessian blocks are closed-form in the five
    moments of :func:`_moments`, then carried to the raw parameters
    ``(u, v, t, alpha)`` by the chain rule (``gamma = C softmax(u)``, ``beta = v - mean v``,
    ``tau = softplus(t)``). The shared 2C x 2C system is solved after eliminating every query's 2 x 2
    block, so an iteration costs O(cells + Q C^2). Each iteration makes one pass over the cells
    (:func:`_cm_eval`): the objective at the trial point with the moments there, which the next iteration uses
    when the step is accepted.

    ``n_damp`` (a traced number) divides the Levenberg-Marquardt damping of each query's 2 x 2 block; the
    query axis ``Q`` may hold padding queries beyond it (no answers: they stay at their start). Returns
    ``(u, v, t, alpha, objective, iterations, converged, gamma, beta, tau)``.
    """
    c = u0.shape[0]
    dtype = theta.dtype
    eps = jnp.finfo(dtype).eps
    total, has_data = _cell_totals(passes, trials)
    eye_s = jnp.eye(2 * c, dtype=dtype)
    eye_l = jnp.eye(2, dtype=dtype)

    def evaluate(s, local):
        return _cm_eval(s[:c], s[c:], local[:, 0], local[:, 1], theta, passes, trials, has_data, ridge, total)

    def body(state):
        s, local, mu, f, moments, it, step = state
        g_s, g_l, h_ss, h_ls, h_ll = _derivs_from_moments(s, local, moments, has_data, ridge, total)
        scale = jnp.maximum(jnp.abs(jnp.diagonal(h_ss)).max(), 1.0)
        h_ll_d = h_ll + mu * scale / n_damp * eye_l + 1e-12
        det = h_ll_d[:, 0, 0] * h_ll_d[:, 1, 1] - h_ll_d[:, 0, 1] * h_ll_d[:, 1, 0]
        inv_ll = jnp.stack(
            [jnp.stack([h_ll_d[:, 1, 1], -h_ll_d[:, 0, 1]], -1), jnp.stack([-h_ll_d[:, 1, 0], h_ll_d[:, 0, 0]], -1)], axis=1
        ) / det[:, None, None]
        w = jnp.einsum("qlm,qms->qls", inv_ll, h_ls)  # H_ll^-1 H_ls
        schur = h_ss + mu * scale * eye_s - jnp.einsum("qls,qlr->sr", h_ls, w)
        rhs = g_s - jnp.einsum("qls,ql->s", w, g_l)
        d_s = jnp.linalg.solve(schur, rhs)
        d_l = jnp.einsum("qlm,qm->ql", inv_ll, g_l) - jnp.einsum("qls,s->ql", w, d_s)
        # trust region on t = softplus^-1(tau): one step moves tau by at most a factor ~e when small. An
        # unbounded step (the coupled system is ill-conditioned while other queries' alpha run off to
        # +-inf on all-pass / all-fail data) can throw t to -20, where its gradient vanishes and the
        # query is stuck at tau ~ 0 far from its optimum.
        d_l = d_l.at[:, 0].set(jnp.clip(d_l[:, 0], -MAX_T_STEP, MAX_T_STEP))
        ok_dir = jnp.all(jnp.isfinite(d_s)) & jnp.all(jnp.isfinite(d_l))
        s_new = s - jnp.where(ok_dir, d_s, 0.0)
        l_new = local - jnp.where(ok_dir, d_l, 0.0)
        # the objective at the trial point, and the moments the next iteration needs if it is accepted
        f_new, m_new = evaluate(s_new, l_new)
        accept = ok_dir & jnp.isfinite(f_new) & (f_new <= f + 64 * eps * (jnp.abs(f) + 1.0))
        s = jnp.where(accept, s_new, s)
        local = jnp.where(accept, l_new, local)
        f = jnp.where(accept, f_new, f)
        moments = jnp.where(accept, m_new, moments)
        mu = jnp.where(accept, jnp.maximum(mu / 4.0, 1e-12), jnp.minimum(mu * 8.0, 1e12))
        size = jnp.maximum(jnp.abs(d_s).max(), jnp.abs(d_l).max())
        step = jnp.where(accept, size, jnp.where(mu >= 1e12, 0.0, jnp.inf))
        return s, local, mu, f, moments, it + 1, step

    def cond(state):
        *_, it, step = state
        return (it < max_iter) & (step > tol)

    s0 = jnp.concatenate([u0, v0])
    local0 = jnp.stack([t0, a0], axis=1)
    f0, moments0 = evaluate(s0, local0)
    state = (s0, local0, jnp.asarray(_MU0, dtype), f0, moments0, 0, jnp.asarray(jnp.inf, dtype))
    s, local, _, f, _, iters, step = jax.lax.while_loop(cond, body, state)
    u, v, t = s[:c], s[c:], local[:, 0]
    return (u, v, t, local[:, 1], f / total, iters, step <= tol, *item_parameters(u, v), jax.nn.softplus(t))


#: Starting Levenberg-Marquardt damping of the 2PL calibration (relative to the largest item-Hessian diagonal).
#: From the default start (tau 1, alpha 0, equal items) the undamped Newton step overshoots: with 1e-3 the
#: first four trial points of the benchmark were rejected (each a full pass over the cells) before the
#: damping, x8 per rejection, reached ~4; starting there took 10 iterations instead of 14 at 1,000 and
#: 10,000 queries (and 9 instead of 11-13 on simulated collections of 30-1,000 queries), same optimum.
_MU0 = 4.0
_calibrate_newton = jax.jit(_calibrate_newton_impl, static_argnames=("max_iter",))


#: Fewest queries and cells per criterion of a compiled 2PL calibration (:func:`fit_2pl_calibration`): the
#: padding of a small fit costs little, and refits of other small collections reuse one program.
MIN_CAL_QUERIES = 64
MIN_CAL_CELLS = 64


def _cell_slots(k: int) -> int:
    """Cells per criterion of a compiled calibration: at least :data:`MIN_CAL_CELLS`, above it ``k`` rounded
    up to 1, 1.25, 1.5 or 1.75 times a power of two (at most 25% padding, few distinct shapes)."""
    if k <= MIN_CAL_CELLS:
        return MIN_CAL_CELLS
    top = 1 << (int(k).bit_length() - 1)
    return next(m for m in (top, top * 5 // 4, top * 3 // 2, top * 7 // 4, 2 * top) if m >= k)


#: From this many queries on, a 2PL calibration pads its query axis as it pads cells (:func:`_cell_slots`:
#: 1, 1.25, 1.5 or 1.75 times a power of two) instead of to the next power of two: 10,000 queries run as
#: 10,240, not 16,384. Smaller fits keep the coarse power-of-two shapes (no more compiled programs).
FINE_QUERY_SLOTS = 4096


def _query_slots(q: int, n_damp: int, n_dev: int) -> int:
    """Padded query count of a compiled calibration, a multiple of the device count ``n_dev``: ``n_damp``
    (the power of two >= q), at least :data:`MIN_CAL_QUERIES`, below :data:`FINE_QUERY_SLOTS` queries,
    else :func:`_cell_slots` of ``q``. Padding queries carry no answers."""
    slots = max(n_damp, MIN_CAL_QUERIES) if q < FINE_QUERY_SLOTS else _cell_slots(q)
    return -(-slots // n_dev) * n_dev


def _criterion_major(
    cells: CalibrationCells, q_pad: int, k_multiple: int = 16, *, bucket: bool = False, dtype=np.float64
):
    """Rearrange cells to ``dtype[q_pad, C, K]`` (theta, passes, trials), K padded to ``k_multiple``
    (or to :func:`_cell_slots` with ``bucket``).

    Cells of criterion c of query j fill ``[j, c, :count]`` in their original order; padding has
    trials 0. The layout of :func:`calibration_cells` (criterion = cell index mod C) is a reshape. The
    values are written straight into the padded ``dtype`` arrays (rounded once from float64, as a cast of
    the float64 layout would round them).
    """
    q, m = cells.theta.shape
    c = cells.n_criteria
    crit = np.asarray(cells.criterion)
    fields = [np.asarray(x, dtype=np.float64) for x in (cells.theta, cells.passes, cells.trials)]
    if crit.ndim == 2 and crit.shape[0] > 1 and crit.strides[0] == 0:  # one row for every query (a view)
        crit = crit[:1]
    if m % c == 0 and np.array_equal(crit, np.broadcast_to(np.arange(m) % c, crit.shape)):
        k = m // c
        moved = [x.reshape(q, k, c).transpose(0, 2, 1) for x in fields]
    else:
        counts = np.stack([(crit == j).sum(axis=1) for j in range(c)], axis=1)  # [Q, C]
        k = int(counts.max()) if counts.size else 0
        order = np.argsort(crit, axis=1, kind="stable")
        crit_sorted = np.take_along_axis(crit, order, axis=1)
        start = np.concatenate([np.zeros((q, 1), np.int64), np.cumsum(counts, axis=1)[:, :-1]], axis=1)
        pos = np.arange(m)[None, :] - np.take_along_axis(start, crit_sorted, axis=1)
        rows = np.broadcast_to(np.arange(q)[:, None], (q, m))
        moved = []
        for x in fields:
            y = np.zeros((q, c, k))
            y[rows, crit_sorted, pos] = np.take_along_axis(x, order, axis=1)
            moved.append(y)
    k_pad = _cell_slots(k) if bucket else max(k_multiple, -(-k // k_multiple) * k_multiple)
    out = []
    for y in moved:
        z = np.zeros((q_pad, c, k_pad), dtype=dtype)
        z[:q, :, :k] = y
        out.append(z)
    return out


def criterion_major_cells(
    query: np.ndarray, slot: np.ndarray, theta: np.ndarray, passes: np.ndarray, trials: np.ndarray, n_queries: int,
    *, dtype=jnp.float32, devices=None,
) -> CriterionMajorCells:
    """The criterion-major layout of :func:`fit_2pl_calibration` straight from per-document counts.

    Args:
        query: int[n] query index of each document in ``[0, n_queries)``; slot: int[n] its position among the
            query's documents (``[0, N)``, each (query, slot) once).
        theta: float[n] frozen BT scores; passes: float[n, C] "yes" answers; trials: float[n] answers per
            criterion (placements).
        n_queries: Q.
        dtype, devices: as the fit will be called with (they fix the padded shape and the dtype).

    Returns:
        :class:`CriterionMajorCells`: ``passes`` float[Q_pad, C, K_pad] and ``theta``, ``trials`` float[Q_pad, 1,
        K_pad] (one row for all criteria); broadcast over C they are the arrays (bit for bit) that
        :func:`_criterion_major` makes of ``calibration_cells`` of the dense ``[Q, N]`` / ``[Q, N, C]`` counts,
        without those float64 arrays: each value is rounded once, from float64 to ``dtype``, as there.
    """
    c = passes.shape[1]
    devs = tuple(jax.devices() if devices is None else devices)
    q_pad = _query_slots(n_queries, _damping_queries(n_queries, len(devs)), len(devs))
    n = int(slot.max()) + 1 if len(slot) else 0
    k_pad = _cell_slots(n)
    np_dtype = np.dtype(dtype)
    cell = np.asarray(query, dtype=np.int64) * k_pad + np.asarray(slot, dtype=np.int64)
    th, tr = np.zeros((q_pad, 1, k_pad), dtype=np_dtype), np.zeros((q_pad, 1, k_pad), dtype=np_dtype)
    th.reshape(-1)[cell] = np.asarray(theta, dtype=np.float64)
    tr.reshape(-1)[cell] = np.asarray(trials, dtype=np.float64)
    # a document-major scatter (a row's C values side by side), then one transposing copy: several times faster
    # than scattering straight into [Q_pad, C, K_pad] (C writes K_pad apart per row)
    by_doc = np.zeros((q_pad * k_pad, c), dtype=np_dtype)
    by_doc[cell] = np.asarray(passes, dtype=np.float64)
    ps = np.ascontiguousarray(by_doc.reshape(q_pad, k_pad, c).transpose(0, 2, 1))
    return CriterionMajorCells(theta=th, passes=ps, trials=tr, n_queries=int(n_queries), n_criteria=c)


def _damping_queries(q: int, n_dev: int) -> int:
    """The query count the damping of the per-query blocks divides by: the power of two >= ``q`` (at least
    the device count), a multiple of ``n_dev``."""
    n_damp = max(n_dev, 1 << max(0, int(q - 1).bit_length()))
    return -(-n_damp // n_dev) * n_dev


def _padded_queries(x: np.ndarray, q_pad: int, dtype) -> np.ndarray:
    """``x`` float[Q', C, K] with ``q_pad`` rows (zeros added or trailing padding rows dropped) in ``dtype``;
    ``x`` itself when it has them already."""
    if x.shape[0] == q_pad and x.dtype == dtype:
        return x
    out = np.zeros((q_pad, *x.shape[1:]), dtype=dtype)
    rows = min(q_pad, x.shape[0])
    out[:rows] = x[:rows]
    return out


def fit_2pl_calibration(
    cells: CalibrationCells | CriterionMajorCells,
    *,
    ridge: float = DEFAULT_RIDGE,
    dtype=jnp.float32,
    tol: float | None = None,
    max_iter: int = 200,
    init: CalibrationFit | None = None,
    devices=None,
) -> CalibrationFit:
    """MAP fit of the 2PL calibration with frozen BT scores (see module docstring).

    Args:
        cells: the answers as padded binomial cells, float[Q, M].
        ridge: L2 penalty on the raw item parameters u, v.
        dtype: ``jnp.float32`` (default) or ``jnp.float64`` (runs under ``jax.enable_x64``).
        tol: stop when the largest Newton step is below ``tol`` (default 1e-5 f32, 1e-10 f64).
        max_iter: iteration cap.
        init: warm start (e.g. the previous refit); default u = v = 0, tau = 1, alpha = 0.
        devices: shard the query axis over these devices (default: every device of the default
            backend; one device means no sharding). Shared item sums become cross-device reductions.

    Returns:
        :class:`CalibrationFit` (float64 arrays).

    ``cells`` may also come laid out already (:class:`CriterionMajorCells`, from :func:`criterion_major_cells`
    with the same ``dtype`` and ``devices``): no float[Q, M] cells and no copy. The query count is padded
    to a power of two, at least :data:`MIN_CAL_QUERIES` (from
    :data:`FINE_QUERY_SLOTS` queries on, to :func:`_cell_slots`), and the cells per criterion to
    :func:`_cell_slots`, so refits with other query counts reuse the compiled solver; padded queries and
    cells carry no answers.
    """
    x64 = jnp.dtype(dtype) == jnp.float64
    if tol is None:
        tol = 1e-10 if x64 else 1e-5
    laid_out = isinstance(cells, CriterionMajorCells)
    q = cells.n_queries if laid_out else cells.theta.shape[0]
    c = cells.n_criteria
    devs = tuple(jax.devices() if devices is None else devices)
    # the damping of the per-query blocks divides by the power-of-two query count (as when that was the
    # padded size); the query axis itself is padded further, to a fixed minimum, so small fits share one
    # compiled program
    n_damp = _damping_queries(q, len(devs))
    q_pad = _query_slots(q, n_damp, len(devs))
    if not laid_out:
        theta, passes, trials = _criterion_major(cells, q_pad, bucket=True, dtype=np.dtype(dtype))
    else:
        theta, passes, trials = (_padded_queries(x, q_pad, np.dtype(dtype)) for x in (cells.theta, cells.passes, cells.trials))
    if init is None:
        u0, v0 = np.zeros(c), np.zeros(c)
        t0, a0 = np.full(q, _SOFTPLUS_INV_ONE), np.zeros(q)
    else:
        u0, v0, t0, a0 = init.u, init.v, init.t, init.alpha
    t0 = np.concatenate([np.asarray(t0, np.float64), np.full(q_pad - q, _SOFTPLUS_INV_ONE)])
    a0 = np.concatenate([np.asarray(a0, np.float64), np.zeros(q_pad - q)])
    with jax.enable_x64(x64):
        per_query = [jnp.asarray(x, dtype) for x in (theta, passes, trials)]
        locals0 = [jnp.asarray(x, dtype) for x in (t0, a0)]
        if len(devs) > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            mesh = Mesh(np.asarray(devs), ("query",))
            per_query = [jax.device_put(x, NamedSharding(mesh, P("query", None, None))) for x in per_query]
            locals0 = [jax.device_put(x, NamedSharding(mesh, P("query"))) for x in locals0]
        u, v, t, a, f, iters, conv, gamma, beta, tau = _calibrate_newton(
            *per_query, jnp.asarray(u0, dtype), jnp.asarray(v0, dtype), *locals0, ridge, tol, float(n_damp), max_iter
        )
    f64 = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return CalibrationFit(
        gamma=f64(gamma), beta=f64(beta), tau=f64(tau)[:q], alpha=f64(a)[:q], u=f64(u), v=f64(v), t=f64(t)[:q],
        objective=float(f), iterations=int(iters), converged=bool(conv),
    )


# --------------------------------------------------------------------------------------------------
# Rasch (per query, for Stage B stratification)
# --------------------------------------------------------------------------------------------------
def _rasch_objective(y, passes, trials, ridge):
    """Mean-BCE Rasch objective of one query; ``y = [theta (N), v (C)]``, passes/trials float[N, C]."""
    n = passes.shape[0]
    theta, v = y[:n], y[n:]
    beta = v - v.mean()
    logit = theta[:, None] - beta[None, :]
    total = jnp.maximum(trials.sum(), 1.0)
    return _binomial_nll(logit, passes, trials).sum() / total + 0.5 * ridge * ((theta**2).sum() + (v**2).sum())


def fit_rasch(
    passes: np.ndarray, trials: np.ndarray, *, ridge: float = DEFAULT_RIDGE, dtype=jnp.float32, max_iter: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Per-query Rasch abilities and difficulties.

    Args:
        passes: float[Q, N, C] "yes" answers per document and criterion (pad with 0).
        trials: float[Q, N, C] answers per document and criterion (0 on padding).

    Returns:
        (theta float64[Q, N], beta float64[Q, C]) with beta centred per query.
    """
    passes = np.asarray(passes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    q, n, c = passes.shape
    # padded to few shapes (queries: a power of two, at least 16; documents: a multiple of 16) so that
    # other collections reuse the compiled solver; a padding document or query has no answers, its
    # ability stays 0 and it changes no other estimate
    q_pad, n_pad = max(16, 1 << max(0, int(q - 1).bit_length())), max(16, -(-n // 16) * 16)
    pad = ((0, q_pad - q), (0, n_pad - n), (0, 0))
    passes, trials = np.pad(passes, pad), np.pad(trials, pad)
    x64 = jnp.dtype(dtype) == jnp.float64
    with jax.enable_x64(x64):
        # ridge travels as an argument (not a partial): the compiled solver is reused across calls
        y, _, _ = lm_newton(
            _rasch_objective, jnp.zeros((q_pad, n_pad + c), dtype),
            (jnp.asarray(passes, dtype), jnp.asarray(trials, dtype), jnp.full((q_pad,), ridge, dtype)),
            max_iter=max_iter, tol=1e-10 if x64 else 1e-5,
        )
        y = np.asarray(y, dtype=np.float64)[:q]
    v = y[:, n_pad:]
    return y[:, :n], v - v.mean(axis=1, keepdims=True)


# --------------------------------------------------------------------------------------------------
# rubric-only 2PL: marginal ML on a quadrature grid
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RubricOnlyFit:
    """Marginal-ML 2PL without a tournament.

    Attributes:
        gamma, beta: float64[C], rescaled so that sum(gamma) = C and mean(beta) = 0.
        ability, ability_sd: float64[I] EAP ability and posterior SD of each item (document), on the
            rescaled axis.
        log_likelihood: marginal log-likelihood at the optimum (without binomial coefficients).
        converged: optimiser status.
    """

    gamma: np.ndarray
    beta: np.ndarray
    ability: np.ndarray
    ability_sd: np.ndarray
    log_likelihood: float
    converged: bool


def quadrature_grid(n_points: int = 561, lo: float = -18.0, hi: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Grid nodes float64[G] and log weights float64[G] of N(0, 1), normalised to sum 1."""
    nodes = np.linspace(lo, hi, n_points)
    logw = -0.5 * nodes**2
    logw -= np.logaddexp.reduce(logw)
    return nodes, logw


def _grid_loglik(y, passes, trials, nodes, c):
    a = jnp.exp(y[:c])
    b = y[c:]
    logit = a[None, :] * (nodes[:, None] - b[None, :])  # [G, C]
    ll = passes @ jax.nn.log_sigmoid(logit).T + (trials - passes) @ jax.nn.log_sigmoid(-logit).T  # [I, G]
    return ll


def _rubric_only_objective(y, passes, trials, count, nodes, logw, ridge):
    """Mean-scale negative marginal log-likelihood over distinct answer rows, each with its ``count``."""
    c = passes.shape[1]
    ll = _grid_loglik(y, passes, trials, nodes, c) + logw[None, :]
    marginal = (count * jax.scipy.special.logsumexp(ll, axis=1)).sum()
    return -marginal / jnp.maximum((count * trials.sum(axis=1)).sum(), 1.0) + 0.5 * ridge * (y**2).sum()


def _rubric_only_derivs(y, passes, trials, count, nodes, logw, ridge):
    """Exact gradient float[2C] and Hessian float[2C, 2C] of :func:`_rubric_only_objective`.

    With ``a = exp(y[:C])``, ``b = y[C:]``, ``z_gc = a_c (x_g - b_c)``, posterior weights ``pi_pg`` of
    row p over the grid and per-row scores ``s_pg`` (derivative of the row's log-likelihood at node g),
    the marginal log-likelihood has gradient ``sum_p n_p E_pi[s]`` and Hessian
    ``sum_p n_p (E_pi[d s] + E_pi[s s^T] - E_pi[s] E_pi[s]^T)`` (Louis' identity). Every posterior
    expectation is a matrix product of ``pi`` with per-row answer counts, so one pass over the
    ``rows x grid`` table gives both (autodiff would need ~2C passes for the Hessian).
    """
    c = passes.shape[1]
    a = jnp.exp(y[:c])
    b = y[c:]
    e = nodes[:, None] - b[None, :]  # [G, C]
    z = a[None, :] * e
    sg = jax.nn.sigmoid(z)
    fails = trials - passes
    ll = passes @ jax.nn.log_sigmoid(z).T + fails @ jax.nn.log_sigmoid(-z).T + logw[None, :]  # [P, G]
    pi = jax.nn.softmax(ll, axis=1)
    w = count[:, None] * pi
    total = jnp.maximum((count * trials.sum(axis=1)).sum(), 1.0)
    wp, wt = w.T @ passes, w.T @ trials  # [G, C]
    r = wp - sg * wt  # sum_p w r_pgc, r = d loglik / d z
    q = sg * (1.0 - sg) * wt  # sum_p w (-d^2 loglik / d z^2)
    # gradient of sum_p n_p log-marginal in (a, b)
    g_a = (r * e).sum(0)
    g_b = -a * r.sum(0)
    # E[second derivatives] (block diagonal in c)
    h_aa = -(q * e * e).sum(0)
    h_ab = a * (q * e).sum(0) - r.sum(0)
    h_bb = -a * a * q.sum(0)
    # E[s s^T]: sum_pg w r_pgc r_pgc' from products of answer counts
    outer = lambda x, v: (x[:, :, None] * v[:, None, :]).reshape(x.shape[0], c * c)  # noqa: E731
    m_pp = (w.T @ outer(passes, passes)).reshape(-1, c, c)
    m_pt = (w.T @ outer(passes, trials)).reshape(-1, c, c)
    m_tt = (w.T @ outer(trials, trials)).reshape(-1, c, c)
    s1 = sg[:, :, None]
    s2 = sg[:, None, :]
    k = m_pp - m_pt * s2 - jnp.swapaxes(m_pt, 1, 2) * s1 + m_tt * s1 * s2  # [G, C, C]
    ea, eb = e, -jnp.broadcast_to(a[None, :], e.shape)
    ss_aa = jnp.einsum("gcd,gc,gd->cd", k, ea, ea)
    ss_ab = jnp.einsum("gcd,gc,gd->cd", k, ea, eb)
    ss_bb = jnp.einsum("gcd,gc,gd->cd", k, eb, eb)
    # E[s] per row, then sum_p n_p E[s] E[s]^T
    va = passes * (pi @ e) - trials * (pi @ (sg * e))
    vb = -a[None, :] * (passes - trials * (pi @ sg))
    v = jnp.concatenate([va, vb], axis=1)
    mean_outer = (v * count[:, None]).T @ v
    hess = jnp.block([[jnp.diag(h_aa) + ss_aa, jnp.diag(h_ab) + ss_ab], [jnp.diag(h_ab) + ss_ab.T, jnp.diag(h_bb) + ss_bb]])
    hess = hess - mean_outer
    grad = jnp.concatenate([g_a, g_b])
    # chain rule to y = (log a, b) and the mean scale / sign of the objective
    d = jnp.concatenate([a, jnp.ones(c, y.dtype)])
    hess_y = d[:, None] * hess * d[None, :] + jnp.diag(jnp.concatenate([a * g_a, jnp.zeros(c, y.dtype)]))
    eye = jnp.eye(2 * c, dtype=y.dtype)
    return -(d * grad) / total + ridge * y, -hess_y / total + ridge * eye


@jax.jit
def _rubric_only_summary(y, passes, trials, count, nodes, logw):
    """Discriminations ``exp(y[:C])``, difficulties, EAP abilities and SDs per distinct row and the marginal
    log-likelihood at the optimum, in one compiled program (arrays as :func:`_rubric_only_objective` with a
    leading batch axis of 1; returns ``(a [C], b [C], mean [P], sd [P], loglik [])``)."""
    y, passes, trials, count, nodes, logw = y[0], passes[0], trials[0], count[0], nodes[0], logw[0]
    c = passes.shape[1]
    ll = _grid_loglik(y, passes, trials, nodes, c) + logw[None, :]
    post = jax.nn.softmax(ll, axis=1)
    mean = post @ nodes
    sd = jnp.sqrt(jnp.maximum(post @ nodes**2 - mean**2, 0.0))
    loglik = (count * jax.scipy.special.logsumexp(ll, axis=1)).sum()
    return jnp.exp(y[:c]), y[c:], mean, sd, loglik


def _distinct_rows(passes: np.ndarray, trials: np.ndarray, multiple: int = 64):
    """Distinct ``(passes, trials)`` rows, their counts and each item's row, padded to a power of two.

    Items with equal answer counts have equal marginal likelihoods and posteriors, so the marginal ML
    only needs each distinct row once, weighted by how often it occurs (at most ``prod(trials + 1)``
    rows; a few thousand for ~7 placements x 5 criteria, however many items there are).
    """
    rows = np.concatenate([passes, trials], axis=1)
    top = float(rows.max()) + 1.0 if rows.size else 1.0
    if rows.size and np.all(rows >= 0) and np.all(rows == np.rint(rows)) and rows.shape[1] * np.log2(top) < 62:
        # small non-negative counts: one int64 code per row, so the row sort is a 1-D integer sort
        # (np.unique(axis=0) sorts rows as opaque byte strings, ~20x slower on a million rows)
        code = (rows.astype(np.int64) * (int(top) ** np.arange(rows.shape[1], dtype=np.int64))).sum(axis=1)
        _, first, inverse, counts = np.unique(code, return_index=True, return_inverse=True, return_counts=True)
        uniq = rows[first]
    else:
        uniq, inverse, counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    n = len(uniq)
    size = max(multiple, 1 << max(0, int(n - 1).bit_length()))
    pad = np.zeros((size, rows.shape[1]))
    pad[:n] = uniq
    count = np.zeros(size)
    count[:n] = counts
    c = passes.shape[1]
    return pad[:, :c], pad[:, c:], count, np.asarray(inverse).reshape(-1)


def fit_rubric_only(
    passes: np.ndarray,
    trials: np.ndarray,
    *,
    n_points: int = 561,
    grid: tuple[float, float] = (-18.0, 10.0),
    ridge: float = RUBRIC_ONLY_RIDGE,
    max_iter: int = 200,
) -> RubricOnlyFit:
    """Rubric-only 2PL by marginal maximum likelihood (float64).

    Args:
        passes: float[I, C] "yes" answers of each item (a query-document pair) per criterion.
        trials: float[I, C] answers of each item per criterion.
        n_points, grid: quadrature grid for ability ~ N(0, 1).
        ridge: small L2 penalty (mean scale) on log-discriminations and difficulties: keeps a criterion
            that nobody or everybody passes finite. The default, :data:`RUBRIC_ONLY_RIDGE`, is 1000x smaller
            than the 2PL calibration's: METHOD's rubric-only mode is plain marginal ML, and a ridge of 1e-4
            already pulls a hard criterion's difficulty in by ~0.05 (beta 4.13 against 4.18).

    Returns:
        :class:`RubricOnlyFit`.

    The likelihood is evaluated once per distinct answer row (weighted by its count), so the cost
    grows with the number of distinct rows, not with the number of items.
    """
    passes = np.asarray(passes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    c = passes.shape[1]
    nodes, logw = quadrature_grid(n_points, *grid)
    u_pass, u_trial, count, inverse = _distinct_rows(passes, trials, multiple=256)
    with jax.enable_x64(True):
        p_j, t_j, k_j, n_j, w_j = (np.asarray(x)[None] for x in (u_pass, u_trial, count, nodes, logw))
        y0 = np.zeros((1, 2 * c))
        args = (p_j, t_j, k_j, n_j, w_j, np.full((1,), ridge))
        y, _, conv = lm_newton(
            _rubric_only_objective, y0, args, max_iter=max_iter, tol=1e-9, derivs=_rubric_only_derivs
        )
        a, b, mean, sd, loglik = (np.asarray(x) for x in _rubric_only_summary(y, *args[:5]))
        loglik = float(loglik)
        mean, sd = mean[inverse], sd[inverse]
    s = c / a.sum()
    shift = -b.mean() / s
    return RubricOnlyFit(
        gamma=a * s, beta=b / s + shift, ability=mean / s + shift, ability_sd=sd / s,
        log_likelihood=loglik, converged=bool(conv[0]),
    )


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


def calibration_cells(theta: np.ndarray, passes: np.ndarray, trials: np.ndarray) -> CalibrationCells:
    """Binomial cells of the 2PL calibration from per-document counts.

    Args:
        theta: float[Q, N] frozen BT scores.
        passes, trials: float[Q, N, C] (:func:`collapse_placements`).

    Returns:
        :class:`CalibrationCells` with M = N x C cells per query (documents without answers have
        trials 0 and drop out of the likelihood); ``criterion`` is a read-only view of one row.
    """
    q, n, c = passes.shape
    th = np.broadcast_to(np.asarray(theta, dtype=np.float64)[:, :, None], (q, n, c)).reshape(q, n * c)
    crit = np.broadcast_to(np.tile(np.arange(c), n)[None, :], (q, n * c))  # one row, read-only view
    return CalibrationCells(
        theta=np.ascontiguousarray(th), criterion=crit,
        passes=passes.reshape(q, n * c), trials=trials.reshape(q, n * c), n_criteria=c,
    )

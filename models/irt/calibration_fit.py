"""The MAP fit of the RCP calibration: Levenberg-Marquardt Newton with a Schur complement.

Exact second-order steps whose cost is linear in the number of queries: the arrow-shaped Hessian (shared
items, a 2 x 2 block per query) is solved after eliminating every query's block.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models.irt.map_objective import _cell_totals, _cm_eval, _derivs_from_moments
from rcp_jax.models.irt.cells import (
    CalibrationCells, CriterionMajorCells, _criterion_major, _damping_queries, _padded_queries, _query_slots,
)
from rcp_jax.models.irt.items import DEFAULT_RIDGE, _SOFTPLUS_INV_ONE, item_parameters


#: Largest change of t = softplus^-1(tau) in one Newton step of the calibration (a trust region on t).
MAX_T_STEP = 1.0


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


def _calibrate_newton_impl(theta, passes, trials, u0, v0, t0, a0, ridge, tol, n_damp, max_iter: int):
    """Levenberg-Marquardt Newton with exact, analytic Hessians and a Schur complement (traced helper).

    ``theta, passes, trials: float[Q, C, K]`` criterion-major cells (``theta`` and ``trials`` may be float[Q, 1, K]
    when they are the same for every criterion). Natural parameters per query are
    ``(gamma, beta, tau, alpha)``; their gradient and Hessian blocks are closed-form in the five
    moments of :func:`~rcp_jax.models.irt.map_objective._moments`, then carried to the raw parameters
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

    ``cells`` may also come laid out already (:class:`CriterionMajorCells`, from
    :func:`~rcp_jax.models.irt.cells.criterion_major_cells` with the same ``dtype`` and ``devices``): no float[Q, M] cells
    and no copy. The query count is padded to a power of two, at least :data:`~rcp_jax.models.irt.cells.MIN_CAL_QUERIES`
    (from :data:`~rcp_jax.models.irt.cells.FINE_QUERY_SLOTS` queries on, to :func:`~rcp_jax.models.irt.cells._cell_slots`), and the
    cells per criterion to :func:`~rcp_jax.models.irt.cells._cell_slots`, so refits with other query counts reuse the
    compiled solver; padded queries and cells carry no answers.
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

"""The objective of the RCP calibration (METHOD section 3) and its exact derivatives.

For document i of query j and criterion c::

    P(Y = 1) = sigmoid(gamma_c * (tau_j * theta_i^BT + alpha_j - beta_c))

with BT scores frozen, ``tau = softplus(t)`` and the MAP objective of the reference implementation::

    mean BCE over answers + (1/(N C)) sum_j [(tau_j - 1)^2 / 2 + alpha_j^2 / (2 * 2^2)]
                          + ridge/2 (||u||^2 + ||v||^2)

(N C = number of individual yes/no answers). The gradient and Hessian are closed-form in five moments of
the cells per (query, criterion) (:func:`_moments`, fused with the objective in :func:`_cm_eval`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rcp_jax.models.irt.items import ALPHA_PRIOR_SD, DEFAULT_RIDGE, TAU_PRIOR_SD, _binomial_nll, item_parameters


@jax.jit
def calibration_objective(u, v, t, alpha, theta, criterion, passes, trials, ridge=DEFAULT_RIDGE):
    """The MAP objective (mean scale) of the 2PL calibration; arrays as in
    :class:`~rcp_jax.models.irt.cells.CalibrationCells`."""
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
    :func:`~rcp_jax.models.irt.calibration_fit._calibrate_newton_impl`. Returns ``(g_s [2C], g_l [Q, 2], h_ss [2C, 2C],
    h_ls [Q, 2, 2C], h_ll [Q, 2, 2])`` with ``s = (u, v)`` and ``local[:, 0] = t``, ``local[:, 1] = alpha``.

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

"""The rubric-only 2PL (no tournament): marginal maximum likelihood on a quadrature grid.

Ability ~ N(0, 1) is integrated on a fixed grid, abilities are EAP, and the parameters are reported with
sum(gamma) = C and mean(beta) = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models._newton import lm_newton


#: Default ridge of the rubric-only marginal ML (:func:`fit_rubric_only`): small enough to leave the
#: estimates within 1e-3 of unpenalised marginal ML (girth, theta-irt), large enough to keep a criterion
#: nobody passes finite.
RUBRIC_ONLY_RIDGE = 1e-7


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

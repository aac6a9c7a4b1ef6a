"""The strongest plain CPU baselines for the public-API benchmark, each reaching our optimum.

* :func:`numpy_newton_bt` - per-query Bradley-Terry by Newton in numpy float64: pair statistics by
  ``np.bincount``, the dense ``N x N`` Hessian, ``np.linalg.solve``, a halving line search when the loss
  would rise; stops when the largest step is below 1e-10.
* :func:`scipy_bt` - per-query L-BFGS-B on the same objective, converged (``gtol`` 1e-9, ``ftol`` 1e-15;
  :func:`bt_map.scipy_fit_query`).
* :func:`alternating_2pl` - the 2PL calibration by block-coordinate Newton: every query's ``(t, alpha)``
  by an exact 2 x 2 Newton step (vectorised over queries with ``np.bincount``), then the 2C item
  parameters ``(u, v)`` by L-BFGS-B with the analytic gradient, alternated until the largest change is
  below 1e-9.
* :func:`scipy_2pl` - the joint L-BFGS-B fit of all 2C + 2Q parameters (:func:`calibration_map.scipy_fit`).

Objectives are METHOD's (BT: soft labels clipped to [0.01, 0.99], weight 2 / window size, mean scale,
ridge 1e-4; 2PL: ``gamma = C softmax(u)``, ``beta = v - mean v``, ``tau = softplus(t)``, mean BCE + priors
+ ridge 1e-4), as in ``benchmarks/bt_map.py`` and ``benchmarks/calibration_map.py``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

from benchmarks.bt_map import _query_slices, window_pairs  # the same pair statistics as the scipy baseline

RIDGE = 1e-4


def _bt_statistics(docs: np.ndarray, scores: np.ndarray, n: int):
    """``(both float[n, n], net float[n], wn float[n, n])`` of one query's windows, normalised by the total weight."""
    a, b, weight, p = window_pairs(docs, scores)
    wins = (np.bincount(a * n + b, weight * p, n * n) + np.bincount(b * n + a, weight * (1 - p), n * n)).reshape(n, n)
    wins /= weight.sum()
    both = wins + wins.T
    return both, (wins - wins.T).sum(axis=1), wins


def numpy_newton_query(docs: np.ndarray, scores: np.ndarray, n: int, tol: float = 1e-10, max_iter: int = 100):
    """One query's BT scores (centred) and the Newton iterations used."""
    both, net, wins = _bt_statistics(docs, scores, n)
    eye = np.eye(n)

    def loss(theta):
        return -(wins * log_expit(theta[:, None] - theta[None, :])).sum() + 0.5 * RIDGE * theta @ theta

    theta = np.zeros(n)
    f = loss(theta)
    for it in range(1, max_iter + 1):
        s = expit(theta[:, None] - theta[None, :])
        grad = 0.5 * (both * (2 * s - 1)).sum(axis=1) - 0.5 * net + RIDGE * theta
        curv = both * s * (1 - s)
        hess = eye * (curv.sum(axis=1) + RIDGE) - curv
        delta = np.linalg.solve(hess, grad)
        step = 1.0
        while True:
            f_new = loss(theta - step * delta)
            if f_new <= f + 1e-12 * abs(f) or step < 1e-3:
                break
            step *= 0.5
        theta, f = theta - step * delta, f_new
        if np.abs(step * delta).max() < tol:
            break
    return theta - theta.mean(), it


def numpy_newton_bt(data: dict, n_queries: int, n_docs: int):
    """Per-query numpy Newton loop over the first ``n_queries`` queries: ``(theta float[Q, N], mean iterations)``."""
    order, bounds = _query_slices(data["window_query"], n_queries)
    theta = np.zeros((n_queries, n_docs))
    its = []
    for q in range(n_queries):
        rows = order[bounds[q] : bounds[q + 1]]
        theta[q], it = numpy_newton_query(data["window_docs"][rows], data["window_scores"][rows], n_docs)
        its.append(it)
    return theta, float(np.mean(its))


def scipy_bt(data: dict, n_queries: int, n_docs: int):
    """Per-query converged L-BFGS-B loop: ``(theta float[Q, N], mean iterations)``."""
    from benchmarks.bt_map import scipy_fit_query

    order, bounds = _query_slices(data["window_query"], n_queries)
    theta = np.zeros((n_queries, n_docs))
    its = []
    for q in range(n_queries):
        rows = order[bounds[q] : bounds[q + 1]]
        theta[q], it = scipy_fit_query(data["window_docs"][rows], data["window_scores"][rows], n_docs)
        its.append(it)
    return theta, float(np.mean(its))


# --------------------------------------------------------------------------------------------------
# 2PL calibration
# --------------------------------------------------------------------------------------------------
def _cells(theta: np.ndarray, passes: np.ndarray, trials: np.ndarray):
    qq, dd, cc = np.nonzero(trials)
    return qq, cc, theta[qq, dd], passes[qq, dd, cc], trials[qq, dd, cc]


def _items(u, v):
    e = np.exp(u - u.max())
    return len(u) * e / e.sum(), v - v.mean()


def alternating_2pl(theta: np.ndarray, passes: np.ndarray, trials: np.ndarray, tol: float = 1e-9, max_sweeps: int = 500):
    """Block-coordinate Newton for the 2PL calibration: ``dict(gamma, beta, tau, alpha, sweeps)``."""
    from scipy.optimize import minimize

    n_q, _, c = passes.shape
    qq, cc, th, ps, tr = _cells(theta, passes, trials)
    total = tr.sum()
    has = np.bincount(qq, tr, minlength=n_q) > 0
    u, v = np.zeros(c), np.zeros(c)
    t, a = np.full(n_q, np.log(np.e - 1.0)), np.zeros(n_q)

    def item_objective(x, x_cell):
        gamma, beta = _items(x[:c], x[c:])
        z = gamma[cc] * (x_cell - beta[cc])
        value = (tr * np.logaddexp(0.0, z) - ps * z).sum() + 0.5 * RIDGE * total * (x @ x)
        r = tr * expit(z) - ps
        d_gamma = np.bincount(cc, r * (x_cell - beta[cc]), minlength=c)
        d_beta = -np.bincount(cc, r * gamma[cc], minlength=c)
        d_u = gamma * (d_gamma - (gamma * d_gamma).sum() / c)
        d_v = d_beta - d_beta.mean()
        return value, np.concatenate([d_u, d_v]) + RIDGE * total * x

    for sweep in range(1, max_sweeps + 1):
        gamma, beta = _items(u, v)
        g, b = gamma[cc], beta[cc]
        # every query's (t, alpha): one exact Newton step on its 2 x 2 block
        for _ in range(2):
            tau, st = np.logaddexp(0.0, t), expit(t)
            z = g * (tau[qq] * th + a[qq] - b)
            s = expit(z)
            l1, l2 = tr * s - ps, tr * s * (1 - s)
            g_tau = np.bincount(qq, g * th * l1, minlength=n_q) + has * (tau - 1.0)
            g_a = np.bincount(qq, g * l1, minlength=n_q) + has * a / 4.0
            h_tt = np.bincount(qq, g * g * th * th * l2, minlength=n_q) + has
            h_ta = np.bincount(qq, g * g * th * l2, minlength=n_q)
            h_aa = np.bincount(qq, g * g * l2, minlength=n_q) + has / 4.0
            gt = g_tau * st
            htt = h_tt * st * st + g_tau * st * (1 - st)
            hta = h_ta * st
            det = htt * h_aa - hta * hta
            ok = has & (det > 0)
            dt = np.where(ok, (h_aa * gt - hta * g_a) / np.where(ok, det, 1.0), 0.0)
            da = np.where(ok, (htt * g_a - hta * gt) / np.where(ok, det, 1.0), 0.0)
            t, a = t - np.clip(dt, -1.0, 1.0), a - da
        x_cell = np.logaddexp(0.0, t)[qq] * th + a[qq]
        res = minimize(item_objective, np.concatenate([u, v]), args=(x_cell,), jac=True, method="L-BFGS-B",
                       options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 200})
        change = max(np.abs(res.x - np.concatenate([u, v])).max(), np.abs(dt).max(), np.abs(da).max())
        u, v = res.x[:c], res.x[c:]
        if change < tol:
            break
    gamma, beta = _items(u, v)
    return {"gamma": gamma, "beta": beta, "tau": np.logaddexp(0.0, t), "alpha": a, "sweeps": sweep}


def scipy_2pl(theta: np.ndarray, passes: np.ndarray, trials: np.ndarray):
    """The joint L-BFGS-B fit of :mod:`calibration_map`."""
    from benchmarks.calibration_map import scipy_fit

    return scipy_fit({"theta": theta, "passes": passes, "trials": trials})

"""A pooled 2PL calibration of several judges: shared criteria, one severity (and scale) per judge.

Several LLM judges answer the same rubric about the same documents. Their tournaments are pooled into
one Bradley-Terry fit per query (a document has one BT score ``theta_i``), so a document's calibrated
ability ``tau_j theta_i + alpha_j`` is common to every judge, and each judge k answers criterion c with::

    P(Y = 1) = sigmoid(lambda_k * gamma_c * (tau_j theta_i + alpha_j - beta_c - delta_k))

* ``gamma = C softmax(u)`` (sum C) and ``beta = v - mean(v)`` (mean 0): the criteria, shared by the judges.
* ``delta = d - mean(d)``: the judge's *severity*, an offset on every difficulty, **sum-to-zero** over the
  judges (so ``delta_k`` is judge k's severity relative to the average judge, and the pooled gains are
  those of that average judge). A positive ``delta_k`` is a stricter judge: it needs ``delta_k`` more
  ability units for the same yes-rate.
* ``lambda = exp(l - mean(l))`` (optional, ``fit_scale``): the judge's discrimination scale, geometric
  mean 1. Without it every ``lambda_k = 1``.
* ``tau = softplus(t)``, ``alpha``: per query, shared by the judges (they share the BT scores).

MAP objective (mean scale, as :mod:`rcp_jax.models.irt`): mean binomial NLL over answers + (1 / NC) sum_j
[(tau_j - 1)^2 / 2 + alpha_j^2 / (2 * 2^2)] + ridge/2 (|u|^2 + |v|^2 + |d|^2 + |l|^2). It is solved by
Levenberg-Marquardt Newton on all parameters at once (exact dense Hessian by autodiff: 2C + 2Q + 2K
parameters, fine up to a few thousand queries; one compiled program per problem size gives value,
gradient and Hessian, and the same Hessian gives the intervals). Standard errors of delta and log lambda come from the
inverse Hessian at the mode (a Laplace approximation); :mod:`rcp_jax.models.bayes_judges` gives the posterior.

Why pooled BT scores: a judge's severity cannot be seen in its tournament (window scores are relative,
and BT scores are centred per query), and with one tau/alpha per (query, judge) a judge's offset would
be confounded with its queries' alphas (identified only through their prior). A common ability per
document is what identifies delta_k from the rubric answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models import irt
from rcp_jax.models.irt.items import _SOFTPLUS_INV_ONE, _binomial_nll


@dataclass(frozen=True)
class JudgeCells:
    """Rubric answers of several judges as flat binomial cells (one per judge, query, document, criterion).

    Attributes:
        query: int[M] query index in ``[0, n_queries)``.
        theta: float[M] pooled BT score of the cell's document.
        criterion: int[M] criterion index in ``[0, n_criteria)``.
        judge: int[M] judge index in ``[0, n_judges)``.
        passes, trials: float[M] "yes" answers and answers (trials 0 = padding).
        n_queries, n_criteria, n_judges: Q, C, K.
    """

    query: np.ndarray
    theta: np.ndarray
    criterion: np.ndarray
    judge: np.ndarray
    passes: np.ndarray
    trials: np.ndarray
    n_queries: int
    n_criteria: int
    n_judges: int


@dataclass(frozen=True)
class PooledJudgesFit:
    """MAP of the pooled 2PL.

    Attributes:
        gamma, beta: float64[C] shared criteria (sum C, mean 0).
        tau, alpha: float64[Q] per-query calibration.
        delta: float64[K] severities (sum 0); delta_se: float64[K] Laplace standard errors.
        scale: float64[K] discrimination scales (geometric mean 1; all 1 without ``fit_scale``);
        log_scale_se: float64[K] Laplace standard errors of log scale (0 without ``fit_scale``).
        objective: final (mean-scale) objective; iterations, converged: of the Newton solver.
    """

    gamma: np.ndarray
    beta: np.ndarray
    tau: np.ndarray
    alpha: np.ndarray
    delta: np.ndarray
    delta_se: np.ndarray
    scale: np.ndarray
    log_scale_se: np.ndarray
    objective: float
    iterations: int
    converged: bool


def _unpack(y, c: int, q: int, k: int, fit_scale: bool):
    u, v = y[:c], y[c:2 * c]
    t, a = y[2 * c:2 * c + q], y[2 * c + q:2 * c + 2 * q]
    d = y[2 * c + 2 * q:2 * c + 2 * q + k]
    l = y[2 * c + 2 * q + k:2 * c + 2 * q + 2 * k] if fit_scale else jnp.zeros(k, y.dtype)  # noqa: E741
    return u, v, t, a, d, l


def _sum_objective(y, query, theta, criterion, judge, passes, trials, ridge, *, c, q, k, fit_scale):
    """Negative log posterior on the sum scale (no constant); arrays as in :class:`JudgeCells`."""
    u, v, t, a, d, l = _unpack(y, c, q, k, fit_scale)
    gamma, beta = irt.item_parameters(u, v)
    tau = jax.nn.softplus(t)
    delta = d - d.mean()
    lam = jnp.exp(l - l.mean())
    logit = lam[judge] * gamma[criterion] * (tau[query] * theta + a[query] - beta[criterion] - delta[judge])
    nll = _binomial_nll(logit, passes, trials).sum()
    has_data = jax.ops.segment_sum(trials, query, num_segments=q) > 0
    prior = (tau - 1.0) ** 2 / (2 * irt.TAU_PRIOR_SD**2) + a**2 / (2 * irt.ALPHA_PRIOR_SD**2)
    total = trials.sum()
    penalty = 0.5 * ridge * total * ((u**2).sum() + (v**2).sum() + (d**2).sum() + (l**2).sum())
    return nll + jnp.where(has_data, prior, 0.0).sum() + penalty


_DERIVS: dict = {}


def _derivatives(c: int, q: int, k: int, fit_scale: bool):
    """jit of ``(objective, gradient, Hessian)`` (mean scale) for one problem size, built once per size."""
    key = (c, q, k, fit_scale)
    if key not in _DERIVS:
        def fun(y, query, theta, criterion, judge, passes, trials, ridge):
            total = jnp.maximum(trials.sum(), 1.0)
            return _sum_objective(y, query, theta, criterion, judge, passes, trials, ridge,
                                  c=c, q=q, k=k, fit_scale=fit_scale) / total

        def derivs(y, *args):
            value, grad = jax.value_and_grad(fun)(y, *args)
            return value, grad, jax.hessian(fun)(y, *args)

        _DERIVS[key] = jax.jit(derivs)
    return _DERIVS[key]


def _levenberg_marquardt(derivs, y, args, *, max_iter: int, tol: float):
    """Damped Newton (one problem, host loop; every step is one compiled call): returns (y, f, H, iterations,
    converged). A step is accepted when it does not raise the objective; the damping ``mu`` (relative to the
    largest Hessian diagonal) shrinks after an accepted step and grows after a rejected one."""
    f, g, h = (np.asarray(x, np.float64) for x in derivs(jax.device_put(y), *args))
    mu, eps, converged, it = 1e-3, np.finfo(np.float64).eps, False, 0
    eye = np.eye(len(y))
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        scale = max(float(np.abs(np.diag(h)).max()), 1e-12)
        try:
            step = np.linalg.solve(h + mu * scale * eye, g)
        except np.linalg.LinAlgError:
            step = np.full_like(y, np.nan)
        y_new = y - step
        out = [np.asarray(x, np.float64) for x in derivs(jax.device_put(y_new), *args)] if np.isfinite(step).all() else None
        if out is not None and np.isfinite(out[0]) and out[0] <= f + 16 * eps * (abs(f) + 1.0):
            y, (f, g, h) = y_new, out
            mu = max(mu / 4.0, 1e-10)
            if np.abs(step).max() < tol:
                converged = True
                break
        else:
            mu = min(mu * 8.0, 1e10)
            if mu >= 1e10:
                break
    return y, float(f), h, it, converged


def padded_arrays(cells: JudgeCells, multiple: int = 1024) -> list[np.ndarray]:
    """(query, theta, criterion, judge, passes, trials) padded with empty cells (trials 0) to a multiple of
    ``multiple``, so fits of similar sizes share compiled programs."""
    m = len(cells.trials)
    pad = (-m) % multiple
    out = []
    for x, dt in ((cells.query, np.int32), (cells.theta, np.float64), (cells.criterion, np.int32),
                  (cells.judge, np.int32), (cells.passes, np.float64), (cells.trials, np.float64)):
        out.append(np.concatenate([np.asarray(x, dt), np.zeros(pad, dt)]))
    return out


def one_judge_start(cells: JudgeCells, *, ridge: float = irt.DEFAULT_RIDGE) -> irt.CalibrationFit:
    """The one-judge calibration of every judge's answers taken together (judges ignored): the warm start."""
    q, c = cells.n_queries, cells.n_criteria
    query = np.asarray(cells.query)
    counts = np.bincount(query, minlength=q)
    m = max(int(counts.max()), 1)
    order = np.argsort(query, kind="stable")
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(len(query)) - start[query[order]]
    fields = {}
    for name, src, dt in (("theta", cells.theta, np.float64), ("criterion", cells.criterion, np.int64),
                          ("passes", cells.passes, np.float64), ("trials", cells.trials, np.float64)):
        arr = np.zeros((q, m), dt)
        arr[query[order], pos] = np.asarray(src, dt)[order]
        fields[name] = arr
    return irt.fit_2pl_calibration(irt.CalibrationCells(n_criteria=c, **fields), ridge=ridge, dtype=jnp.float64)


def fit_pooled_judges(
    cells: JudgeCells,
    *,
    fit_scale: bool = True,
    ridge: float = irt.DEFAULT_RIDGE,
    init: irt.CalibrationFit | None = None,
    max_iter: int = 200,
    tol: float = 1e-9,
) -> PooledJudgesFit:
    """MAP of the pooled 2PL (see the module docstring), in double precision.

    Args:
        cells: the answers (:class:`JudgeCells`); at least 2 criteria.
        fit_scale: fit a discrimination scale per judge (else every scale is 1).
        ridge: L2 penalty on the raw parameters u, v, d, l (sum scale: ``ridge * NC / 2 * |.|^2``).
        init: warm start of u, v, t, alpha (e.g. :func:`one_judge_start`; default u = v = 0, tau = 1, alpha = 0).
        max_iter, tol: Newton iteration cap and step tolerance.

    Returns:
        :class:`PooledJudgesFit`.
    """
    c, q, k = cells.n_criteria, cells.n_queries, cells.n_judges
    if init is None:
        u0, v0, t0, a0 = np.zeros(c), np.zeros(c), np.full(q, _SOFTPLUS_INV_ONE), np.zeros(q)
    else:
        u0, v0, t0, a0 = init.u, init.v, init.t, init.alpha
    parts = [u0, v0, t0, a0, np.zeros(k)] + ([np.zeros(k)] if fit_scale else [])
    y0 = np.concatenate([np.asarray(p, np.float64) for p in parts])
    derivs = _derivatives(c, q, k, fit_scale)
    with jax.enable_x64(True):
        arrays = [jax.device_put(x) for x in padded_arrays(cells)]  # host copies: nothing compiles
        args = (*arrays, jax.device_put(np.float64(ridge)))
        y, objective, hess, iters, conv = _levenberg_marquardt(derivs, y0, args, max_iter=max_iter, tol=tol)
        total = max(float(np.asarray(cells.trials, np.float64).sum()), 1.0)
        cov = np.linalg.pinv(hess * total, hermitian=True)  # the sum-scale Hessian's inverse
        u, v, t, a, d, l = (np.asarray(x, np.float64) for x in _unpack(np.asarray(y, np.float64), c, q, k, fit_scale))
        gamma, beta = (np.asarray(x, np.float64) for x in irt.item_parameters(jnp.asarray(u), jnp.asarray(v)))
    centre = np.eye(k) - 1.0 / k
    i0 = 2 * c + 2 * q
    delta_cov = centre @ cov[i0:i0 + k, i0:i0 + k] @ centre
    if fit_scale:
        scale_cov = centre @ cov[i0 + k:i0 + 2 * k, i0 + k:i0 + 2 * k] @ centre
        log_scale_se = np.sqrt(np.clip(np.diag(scale_cov), 0.0, None))
    else:
        log_scale_se = np.zeros(k)
    return PooledJudgesFit(
        gamma=gamma, beta=beta, tau=np.logaddexp(0.0, t), alpha=a, delta=d - d.mean(),
        delta_se=np.sqrt(np.clip(np.diag(delta_cov), 0.0, None)), scale=np.exp(l - l.mean()),
        log_scale_se=log_scale_se, objective=objective, iterations=int(iters), converged=bool(conv),
    )


__all__ = ["JudgeCells", "PooledJudgesFit", "fit_pooled_judges", "one_judge_start", "padded_arrays"]

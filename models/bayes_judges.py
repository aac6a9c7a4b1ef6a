"""The pooled 2PL of several judges (:mod:`rcp_jax.models.irt_judges`) as a NumPyro model, for intervals.

    Y_m ~ Binomial(trials_m, sigmoid(lambda_k gamma_c (tau_j theta_m + alpha_j - beta_c - delta_k)))

for cell m of judge k, query j, criterion c, with the pooled BT scores ``theta`` frozen (as
:func:`rcp_jax.models.bayes.calibration_model`). Priors: the items and the per-query ``tau, alpha`` exactly as
:func:`rcp_jax.models.bayes.calibration_model`; the severities ``delta = H d`` with ``d ~ N(0, severity_sd^2)``
on the K - 1 Helmert contrasts (``H`` the orthonormal K x (K-1) basis), which is the law of a centred
``N(0, severity_sd^2 I_K)`` vector restricted to ``sum(delta) = 0``; with ``fit_scale`` the log scales
``log lambda = H l``, ``l ~ N(0, log_scale_sd^2)`` (geometric mean of lambda = 1). The sum-to-zero
convention is the MAP's: delta_k is judge k's severity relative to the average judge.

Sites: ``u, v: float[C-1]``, deterministic ``gamma, beta: float[C]``; ``tau, alpha: float[Q]``;
``d: float[K-1]``, deterministic ``delta: float[K]``; with ``fit_scale`` ``l: float[K-1]``, deterministic
``scale: float[K]``; observed ``y: float[M]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from rcp_jax.models.bayes import _items, _query_calibration, helmert_matrix, item_contrasts, item_prior_sd
from rcp_jax.models.irt import ALPHA_PRIOR_SD, DEFAULT_RIDGE, TAU_PRIOR_SD

#: Prior SD of a judge's severity (ability units): wide against the spread of the difficulties (~2).
SEVERITY_PRIOR_SD = 1.0
#: Prior SD of a judge's log discrimination scale (a scale of 2 or 1/2 is 1.4 SD away).
LOG_SCALE_PRIOR_SD = 0.5


def pooled_judges_model(
    query: jax.Array,
    theta: jax.Array,
    criterion: jax.Array,
    judge: jax.Array,
    passes: jax.Array | None,
    trials: jax.Array,
    *,
    n_queries: int,
    n_criteria: int,
    n_judges: int,
    fit_scale: bool = True,
    ridge: float = DEFAULT_RIDGE,
    severity_sd: float = SEVERITY_PRIOR_SD,
    log_scale_sd: float = LOG_SCALE_PRIOR_SD,
) -> None:
    """NumPyro model of several judges' rubric answers (see the module docstring).

    Args:
        query, criterion, judge: int[M] indices of each cell; theta: float[M] frozen pooled BT score.
        passes: float[M] "yes" answers (None to simulate); trials: float[M] answers (0 = padding).
        n_queries, n_criteria, n_judges: Q, C, K (static); K >= 2.
        fit_scale: a discrimination scale per judge (else all 1).
        ridge: the MAP ridge; items' prior SD ``1 / sqrt(ridge NC)`` as in the one-judge model.
        severity_sd, log_scale_sd: prior SDs of the severity and log-scale contrasts.
    """
    gamma, beta = _items(n_criteria, item_prior_sd(trials, ridge))
    tau, alpha = _query_calibration(n_queries, TAU_PRIOR_SD, ALPHA_PRIOR_SD)
    h = jnp.asarray(helmert_matrix(n_judges), jnp.result_type(float))
    d = numpyro.sample("d", dist.Normal(0.0, severity_sd).expand([n_judges - 1]).to_event(1))
    delta = numpyro.deterministic("delta", h @ d)
    if fit_scale:
        lg = numpyro.sample("l", dist.Normal(0.0, log_scale_sd).expand([n_judges - 1]).to_event(1))
        scale = numpyro.deterministic("scale", jnp.exp(h @ lg))
    else:
        scale = jnp.ones(n_judges)
    logit = scale[judge] * gamma[criterion] * (tau[query] * theta + alpha[query] - beta[criterion] - delta[judge])
    total = trials if passes is not None else jnp.round(trials).astype(jnp.result_type(int))
    with numpyro.plate("cell", trials.shape[0]):
        numpyro.sample("y", dist.Binomial(total_count=total, logits=logit), obs=passes)


def init_values(gamma: np.ndarray, beta: np.ndarray, tau: np.ndarray, alpha: np.ndarray, delta: np.ndarray,
                scale: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Constrained starting values of the model's sites from a MAP (:class:`rcp_jax.models.irt_judges.PooledJudgesFit`)."""
    u, v = item_contrasts(np.log(np.asarray(gamma)), np.asarray(beta))
    h = helmert_matrix(len(delta))
    out = {"u": u, "v": v, "tau": np.asarray(tau), "alpha": np.asarray(alpha), "d": np.asarray(delta) @ h}
    if scale is not None:
        out["l"] = np.log(np.asarray(scale)) @ h
    return out


__all__ = ["LOG_SCALE_PRIOR_SD", "SEVERITY_PRIOR_SD", "init_values", "pooled_judges_model"]

"""A fast Gaussian posterior of every gain between budgeted rounds (batched over queries; no sampler).

Between rounds the budgeted loop needs, for every pooled document, its gain and how uncertain it is, in
well under a second for hundreds of queries. It takes the two MAP fits the pipeline already makes
(:func:`rcp_jax.tournament.fit_bradley_terry` and :func:`rcp_jax.calibration.calibrate`) and adds their
curvature:

* the Bradley-Terry score ``theta_d`` of each document with its standard error ``se_d`` (the BT fit's
  Laplace approximation; documents are taken independent);
* each query's scale and shift ``(tau_q, alpha_q)`` with the inverse of their Fisher information from the
  query's rubric answers, items held at the MAP: ``I_q = sum_d n_d sum_c gamma_c^2 p_dc (1 - p_dc)
  [theta_d^2, theta_d; theta_d, 1]`` plus a ridge of 0.01, with ``p_dc = sigmoid(gamma_c (a_d - beta_c))``
  and ``n_d`` the document's rubric placements.

Draws: ``theta ~ N(theta_hat, se^2)``, ``(tau, alpha) ~ N(MAP, I_q^-1)`` (tau kept >= 1e-3), ability
``a = tau theta + alpha``, gain ``g(a) = sum_c gamma_c sigmoid(gamma_c (a - beta_c)) / sum_c gamma_c``.
Item uncertainty (shared by all queries and small with many of them) is left out. This is the
frozen-BT calibration with the tournament's noise added back through ``se``, i.e. a cheap stand-in for
the joint model (:mod:`rcp_jax.bayes`), used to steer judging and to decide when to stop; the fixed
protocol's decisions in ``benchmarks/budgeted.py`` are computed with the same posterior.

Arrays use a padded layout ``[Q, N]``: queries in the given order, documents in pool order, ``mask``
marking real entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rcp_jax.calibration import Calibration, criterion_columns

#: Standard error given to a document the tournament has not shown yet (BT scale units).
UNSHOWN_SE = 3.0
#: Ridge added to each query's (tau, alpha) information (a weak prior).
INFO_RIDGE = 1e-2
TAU_FLOOR = 1e-3


@dataclass
class GainPosterior:
    """Gaussian approximation of every gain (module docstring); arrays in the padded ``[Q, N]`` layout.

    Attributes:
        query_ids: Q query ids. doc_ids: object[Q, N] ids ('' on padding). mask: bool[Q, N].
        theta, se: float64[Q, N] BT scores and their standard errors.
        tau, alpha: float64[Q] the calibration of each query; cov: float64[Q, 2, 2] covariance of (tau, alpha).
        gamma, beta: float64[C] item parameters (MAP).
        gain: float64[Q, N] gain at the MAP. slope: float64[Q, N] dg/dability at the MAP.
        draws: float32[S, Q, N] gain draws (0 on padding).
    """

    query_ids: list[str]
    doc_ids: np.ndarray
    mask: np.ndarray
    theta: np.ndarray
    se: np.ndarray
    tau: np.ndarray
    alpha: np.ndarray
    cov: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    gain: np.ndarray
    slope: np.ndarray
    draws: np.ndarray


def padded_pools(pools: Mapping[str, Sequence[str]], query_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(doc_ids object[Q, N], mask bool[Q, N]) of ``pools`` for ``query_ids``, documents in pool order."""
    n = max((len(pools[q]) for q in query_ids), default=1)
    ids = np.full((len(query_ids), n), "", dtype=object)
    mask = np.zeros((len(query_ids), n), dtype=bool)
    for i, q in enumerate(query_ids):
        docs = list(pools[q])
        ids[i, : len(docs)] = docs
        mask[i, : len(docs)] = True
    return ids, mask


def _gain_and_slope(ability: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = 1.0 / (1.0 + np.exp(-gamma * (ability[..., None] - beta)))
    total = gamma.sum()
    return (gamma * p).sum(-1) / total, (gamma**2 * p * (1.0 - p)).sum(-1) / total


def _lookup(table: pd.DataFrame, column: str, query_ids, doc_ids, mask, fill: float) -> np.ndarray:
    """float64[Q, N]: ``table[column]`` at each (query, document) of the layout, ``fill`` where absent."""
    rows, cols = np.nonzero(mask)
    index = pd.MultiIndex.from_arrays([np.asarray(query_ids, dtype=object)[rows], doc_ids[rows, cols]])
    keyed = pd.Series(table[column].to_numpy(np.float64),
                      index=pd.MultiIndex.from_arrays([table["query_id"].astype(str), table["doc_id"].astype(str)]))
    out = np.full(mask.shape, fill)
    out[rows, cols] = keyed[~keyed.index.duplicated()].reindex(index).fillna(fill).to_numpy()
    return out


def gain_posterior(
    bt: pd.DataFrame,
    calibration: Calibration,
    answers: pd.DataFrame,
    pools: Mapping[str, Sequence[str]],
    query_ids: Sequence[str],
    *,
    n_draws: int = 128,
    seed: int = 0,
) -> GainPosterior:
    """The Gaussian gain posterior of the module docstring.

    Args:
        bt: ``query_id, doc_id, theta, se`` (:func:`rcp_jax.fit_bradley_terry`).
        calibration: the MAP :class:`Calibration` of ``bt`` and ``answers``.
        answers: rubric placements ``query_id, doc_id, C1..CK``.
        pools: query_id -> pool (doc ids in pool order). query_ids: the queries, in the layout's order.
        n_draws: S, gain draws. seed: their random stream (the same inputs give the same draws).

    Returns:
        :class:`GainPosterior`. A query without rubric answers (uncalibrated) gets tau 1, alpha 0 and a
        wide (tau, alpha) covariance; a document the tournament has not shown gets theta 0, se 3.
    """
    query_ids = [str(q) for q in query_ids]
    doc_ids, mask = padded_pools(pools, query_ids)
    theta = _lookup(bt, "theta", query_ids, doc_ids, mask, 0.0)
    se = _lookup(bt, "se", query_ids, doc_ids, mask, UNSHOWN_SE) if "se" in bt.columns else np.full(mask.shape, 1.0)
    se = np.where(np.isfinite(se) & (se > 0), se, UNSHOWN_SE)
    qtab = calibration.queries.set_index(calibration.queries["query_id"].astype(str))
    tau = np.array([qtab["tau"].get(q, np.nan) for q in query_ids], dtype=np.float64)
    alpha = np.array([qtab["alpha"].get(q, np.nan) for q in query_ids], dtype=np.float64)
    uncal = ~(np.isfinite(tau) & np.isfinite(alpha))
    tau = np.where(uncal, 1.0, tau)
    alpha = np.where(uncal, 0.0, alpha)
    gamma = np.asarray(calibration.gamma, dtype=np.float64)
    beta = np.asarray(calibration.beta, dtype=np.float64)
    ability = tau[:, None] * theta + alpha[:, None]
    gain, slope = _gain_and_slope(ability, gamma, beta)

    # (tau, alpha) information from the rubric placements, items fixed
    criterion_columns(answers)  # refuses a table without C1..CK
    counts = answers.groupby([answers["query_id"].astype(str), answers["doc_id"].astype(str)]).size()
    n_place = _lookup(pd.DataFrame({"query_id": counts.index.get_level_values(0), "doc_id": counts.index.get_level_values(1),
                                    "n": counts.to_numpy(np.float64)}), "n", query_ids, doc_ids, mask, 0.0)
    p = 1.0 / (1.0 + np.exp(-gamma * (ability[..., None] - beta)))
    info_a = n_place * (gamma**2 * p * (1.0 - p)).sum(-1) * mask  # [Q, N]
    info = np.empty((len(query_ids), 2, 2))
    info[:, 0, 0] = (info_a * theta**2).sum(1) + INFO_RIDGE
    info[:, 0, 1] = info[:, 1, 0] = (info_a * theta).sum(1)
    info[:, 1, 1] = info_a.sum(1) + INFO_RIDGE
    cov = np.linalg.inv(info)
    cov[uncal] = np.diag([1.0, 4.0])

    rng = np.random.default_rng([int(seed), 0xB0D9E7])
    s = int(n_draws)
    chol = np.linalg.cholesky(cov + 1e-12 * np.eye(2))
    z = rng.standard_normal((s, len(query_ids), 2))
    ta = np.stack([tau, alpha], -1)[None] + np.einsum("qij,sqj->sqi", chol, z)
    tau_s = np.maximum(ta[..., 0], TAU_FLOOR)
    draws = np.empty((s,) + mask.shape, dtype=np.float32)
    for lo in range(0, s, 32):  # chunks keep the [S, Q, N, C] intermediate small
        hi = min(s, lo + 32)
        th = theta[None] + se[None] * rng.standard_normal((hi - lo,) + mask.shape)
        a = tau_s[lo:hi, :, None] * th + ta[lo:hi, :, 1, None]
        draws[lo:hi] = np.where(mask[None], _gain_and_slope(a, gamma, beta)[0], 0.0)
    return GainPosterior(query_ids=query_ids, doc_ids=doc_ids, mask=mask, theta=theta, se=se, tau=tau, alpha=alpha,
                         cov=cov, gamma=gamma, beta=beta, gain=np.where(mask, gain, 0.0), slope=np.where(mask, slope, 0.0),
                         draws=draws)

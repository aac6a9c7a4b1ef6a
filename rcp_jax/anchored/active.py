"""Active labelling: which queries to send to human assessors next, with the probabilities the estimator needs.

Arrays as in :mod:`rcp_jax.anchored.ppi` (last axis: the benchmark's N queries). The rule follows active
inference (Zrnic & Candes 2024): the variance of the Horvitz-Thompson difference estimator of pair p is
``sum_i (1 - pi_i)/pi_i r_ip^2 / N^2`` (``r_ip`` the human-minus-judge residual of query i), so the
probabilities that minimise the sum of the undecided pairs' variances, each relative to its current variance
``V_p``, under an expected budget ``sum_i pi_i = B`` are ``pi_i ~ sqrt(sum_p r_ip^2 / V_p)``. The residuals
of unlabelled queries are unknown. Before any label they are predicted from the judge's own uncertainty
(:func:`uncertainty_scale`: a per-query posterior sd of RCP-nDCG, ``rcp-jax evaluate --posterior``); with labels
and no uncertainty column, by a least-squares line of ``r^2`` on ``f^2`` (:func:`predicted_residual_scale`). The
probabilities are mixed with uniform (share ``uniform_share``) so that no query's probability is tiny (large
weights make the interval unstable) and capped at 1; the labels are drawn in ONE round (independent Bernoulli
draws with those known probabilities) and the estimator weights them by ``1/pi`` (Horvitz-Thompson/Hajek form
of :mod:`rcp_jax.anchored.ppi`, with the line power-tuned for that design).

Assumption (stated in the README): the gain needs an uncertainty signal that tracks where the judge misses the
human metric. Where the judge's noise differs between queries and its sd tracks that noise (the simulator's
``informative`` scenario: Pearson correlation of reported and true sd about 0.65), active selection gives
narrower intervals than random selection at the same expected number of labels; where the signal is flat the
probabilities are uniform (ratio 1); where it varies but predicts nothing, unequal weights cost some width
(benchmarks/anchored_coverage.py measures all three).
"""

from __future__ import annotations

import numpy as np

from rcp_jax.errors import DataError


def predicted_residual_scale(y, f, extra=None) -> np.ndarray:
    """Predicted ``|y - g|`` on every query, g the judge rescaled by the labelled queries' least-squares line.

    Args:
        y: float[..., N] human metric, NaN = unlabelled (at least 4 labels per row).
        f: float[..., N] judge metric on every query.
        extra: float[..., N] or None, another per-query feature of the residual's size (e.g. the judge's sd).

    Returns:
        float[..., N] >= 0: the square root of the least-squares line of ``r^2`` on ``1, f^2[, extra^2]`` (slopes
        kept non-negative) on every query, floored at a tenth of the labelled queries' root-mean-square ``r``.
    """
    y = np.asarray(y, dtype=np.float64)
    f = np.broadcast_to(np.asarray(f, dtype=np.float64), y.shape)
    lab = np.isfinite(y)
    if (lab.sum(-1) < 4).any():
        raise DataError("predicting residuals needs at least 4 labelled queries")
    w = lab.astype(np.float64)
    y0 = np.where(lab, y, 0.0)
    n = w.sum(-1)
    fm = (w * f).sum(-1) / n
    ym = y0.sum(-1) / n
    sxx = (w * (f - fm[..., None]) ** 2).sum(-1)
    lam = np.where(sxx > 0, (w * (f - fm[..., None]) * (y0 - ym[..., None])).sum(-1) / np.where(sxx > 0, sxx, 1), 0)
    resid2 = (y0 - ym[..., None] - lam[..., None] * (f - fm[..., None])) ** 2
    feats = [np.ones_like(f), f**2]
    if extra is not None:
        feats.append(np.broadcast_to(np.asarray(extra, dtype=np.float64), y.shape) ** 2)
    x = np.stack(feats, -1)  # [..., N, K]
    xw = x * w[..., None]
    gram = np.einsum("...nk,...nl->...kl", xw, x) + 1e-12 * np.eye(x.shape[-1])
    rhs = np.einsum("...nk,...n->...k", xw, np.where(lab, resid2, 0.0))
    coef = np.maximum(np.linalg.solve(gram, rhs[..., None])[..., 0], 0.0)  # a variance: no negative slopes
    coef[..., 0] = np.maximum(coef[..., 0], 0.0)
    pred = np.einsum("...nk,...k->...n", x, coef)
    floor = 0.01 * (w * resid2).sum(-1) / n
    return np.sqrt(np.maximum(pred, floor[..., None]))


def uncertainty_scale(pair_sd, undecided=None) -> np.ndarray:
    """Predicted residual size per query from the judge's own uncertainty alone (no labels needed).

    The residual of a pair on query i is the human side's miss (variance ``a``, unknown before any label) plus the
    judge's noise (variance ``s_ip^2``, which the judge's posterior sd estimates); so ``|r_ip|`` is predicted by
    ``sqrt(a + s_ip^2)``. With no labels to fit ``a``, it is set to the mean ``s^2`` over queries and pairs (the
    human side misses as much as the judge does on a typical query): this halves the leverage of a noisy sd, and
    a flat sd gives a flat score (uniform probabilities: active selection is then random selection).

    Args:
        pair_sd: float[..., P, N] the judge's sd of each pair's per-query difference (for two systems with
            posterior sds ``s_a``, ``s_b``: ``sqrt(s_a^2 + s_b^2)``), finite and >= 0.
        undecided: bool[..., P] or None (all pairs): the pairs whose intervals the labels should shrink.

    Returns:
        float[..., N] > 0: ``sqrt(mean_p s_ip^2 + mean_{p,i} s_ip^2)`` over the chosen pairs.
    """
    pair_sd = np.asarray(pair_sd, dtype=np.float64)
    if not (np.isfinite(pair_sd).all() and (pair_sd >= 0).all()):
        raise DataError("the uncertainty (sd) must be finite and non-negative on every query")
    use = np.ones(pair_sd.shape[:-1], bool) if undecided is None else np.asarray(undecided, bool)
    use = np.where(use.any(-1, keepdims=True), use, True).astype(np.float64)
    s2 = (pair_sd**2 * use[..., None]).sum(-2) / use.sum(-1)[..., None]  # [..., N]
    base = s2.mean(-1, keepdims=True)
    return np.sqrt(np.where(base > 0, base + s2, 1.0))


def pooled_scale(scale, variance, undecided=None) -> np.ndarray:
    """One score per query from several pairs: ``sqrt(sum_p undecided_p * scale_ip^2 / V_p)``.

    Args:
        scale: float[..., P, N] predicted residual sizes per pair and query.
        variance: float[..., P] each pair's current variance (its se squared).
        undecided: bool[..., P] or None (all): the pairs whose interval still contains 0. When none is
            undecided, every pair counts.

    Returns:
        float[..., N].
    """
    scale = np.asarray(scale, dtype=np.float64)
    variance = np.asarray(variance, dtype=np.float64)
    use = np.ones(variance.shape, bool) if undecided is None else np.asarray(undecided, bool)
    use = np.where(use.any(-1, keepdims=True), use, True)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(use & np.isfinite(variance) & (variance > 0), 1.0 / variance, 0.0)
    weight = np.where(weight.sum(-1, keepdims=True) > 0, weight, use.astype(np.float64))
    return np.sqrt((scale**2 * weight[..., None]).sum(-2))


def inclusion_probabilities(score, budget: float, eligible, *, uniform_share: float = 0.2) -> np.ndarray:
    """Labelling probabilities proportional to ``score``, mixed with uniform, capped at 1, summing to ``budget``.

    Args:
        score: float[..., N] >= 0 (e.g. :func:`pooled_scale`).
        budget: expected number of labels (the sum of the probabilities over eligible queries).
        eligible: bool[..., N], the queries that may be drawn (the unlabelled ones).
        uniform_share: share of the budget spread uniformly (0..1; default 0.2).

    Returns:
        float[..., N]: 0 off the eligible queries; when the budget reaches their number, 1 on all of them.
    """
    if not 0.0 <= uniform_share <= 1.0:
        raise DataError(f"uniform_share must be in [0, 1]; got {uniform_share}")
    if budget <= 0:
        raise DataError(f"the budget must be positive; got {budget}")
    eligible = np.asarray(eligible, bool)
    score = np.where(eligible, np.maximum(np.asarray(score, dtype=np.float64), 0.0), 0.0)
    m = eligible.sum(-1, keepdims=True)
    total = score.sum(-1, keepdims=True)
    share = np.where(total > 0, score / np.where(total > 0, total, 1.0), eligible / np.maximum(m, 1))
    mix = (1.0 - uniform_share) * share + uniform_share * eligible / np.maximum(m, 1)
    pi = np.minimum(budget, m) * mix
    for _ in range(64):  # water-filling: cap at 1 and hand the excess to the others in proportion
        capped = pi >= 1.0
        pi = np.minimum(pi, 1.0)
        left = np.minimum(budget, m)[..., 0] - pi.sum(-1)
        free = eligible & ~capped
        mass = np.where(free, mix, 0.0).sum(-1)
        if not ((left > 1e-12) & (mass > 0)).any():
            break
        pi = np.where(free, pi + (left / np.where(mass > 0, mass, 1.0))[..., None] * mix, pi)
    return np.where(eligible, np.minimum(pi, 1.0), 0.0)

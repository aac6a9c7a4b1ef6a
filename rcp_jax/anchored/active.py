"""Active labelling: which queries to send to human assessors next, with the probabilities the estimator needs.

Arrays as in :mod:`rcp_jax.anchored.ppi` (last axis: the benchmark's N queries). The rule follows active
inference (Zrnic & Candes 2024): the variance of the Horvitz-Thompson difference estimator of pair p is
``sum_i (1 - pi_i)/pi_i r_ip^2 / N^2`` (``r_ip`` the human-minus-judge residual of query i), so the
probabilities that minimise the sum of the undecided pairs' variances, each relative to its current variance
``V_p``, under an expected budget ``sum_i pi_i = B`` are ``pi_i ~ sqrt(sum_p r_ip^2 / V_p)``. The residuals
of unlabelled queries are unknown. Before any label they are predicted from what the judge itself shows
(:func:`judge_signal_scale`): its own uncertainty (a per-query posterior sd of RCP-nDCG, ``rcp-jax evaluate
--posterior``) and how far each pair's per-query difference sits in the tails (:func:`outlyingness`: a judge that
slips or is far noisier on a query puts it there); with labels and neither signal, by a least-squares line of
``r^2`` on ``f^2`` (:func:`predicted_residual_scale`). The probabilities are mixed with uniform (share
``uniform_share``) so that no query's probability is tiny (large weights make the interval unstable) and capped at
1; the labels are drawn in ONE round, exactly the budget, each query with its known probability
(:func:`draw_fixed_size`), and the estimator weights them by ``1/pi`` (Horvitz-Thompson/Hajek form of
:mod:`rcp_jax.anchored.ppi`, with the line power-tuned for that design).

Assumption (stated in the README): the gain needs signals that track where the judge misses the human metric.
Where the judge's errors are heavy-tailed (it slips, or is far noisier, on some queries: the simulator's
``informative`` and ``heteroscedastic`` scenarios) active selection gives narrower intervals than random selection
with the same number of labels; where the signals are flat the probabilities are uniform (ratio 1); where they vary
but predict nothing, unequal weights cost some width (benchmarks/anchored_coverage.py measures all of these). The
design's gain is bounded by how well the signals predict the residual: with the residuals themselves known it would
cut the variance by 30% at 10% labelled in the ``informative`` scenario, with the best line on the reported sd alone
by 4%, on the outlyingness by 15%.
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


def outlyingness(pair_f) -> np.ndarray:
    """How far each pair's per-query judge difference sits from that pair's typical one, in robust units.

    Args:
        pair_f: float[..., P, N] the judge's per-query difference of each pair (RCP-nDCG_a - RCP-nDCG_b).

    Returns:
        float[..., P, N] >= 0: ``(f_ip - median_p) / MAD_p`` in absolute value (the median absolute deviation
        scaled by 1.4826, a normal sd; the sd where the MAD is 0; 0 where both are).
    """
    pair_f = np.asarray(pair_f, dtype=np.float64)
    if not np.isfinite(pair_f).all():
        raise DataError("the judge's differences must be finite on every query")
    centre = np.median(pair_f, -1, keepdims=True)
    spread = 1.4826 * np.median(np.abs(pair_f - centre), -1, keepdims=True)
    spread = np.where(spread > 0, spread, pair_f.std(-1, keepdims=True))
    return np.where(spread > 0, np.abs(pair_f - centre) / np.where(spread > 0, spread, 1.0), 0.0)


def judge_signal_scale(pair_f, pair_sd=None, undecided=None) -> np.ndarray:
    """Predicted residual size per query from the judge's output alone (no labels needed).

    A query's residual (human-minus-rescaled-judge difference) is the human side's miss plus the judge's error;
    two things the judge itself shows predict the judge's part: its own uncertainty (``pair_sd``, e.g. the
    posterior sd of RCP-nDCG) and how far its difference sits from the pair's typical one
    (:func:`outlyingness`: a judge that slips or is far noisier on a query puts that query in the tails of the
    differences, where the line through the labelled queries also misses most). Each signal is scaled to mean 1
    over queries (and the chosen pairs) and the human side's miss, unknown before any label, is set to their
    typical sum (the convention of :func:`uncertainty_scale`), so::

        score_i = sqrt(K + sum_k x_ik^2 / mean_i x_ik^2),   K = the number of signals used (1 or 2)

    A flat signal adds a constant: with neither signal informative the probabilities are nearly uniform.

    Args:
        pair_f: float[..., P, N] the judge's per-query difference of each pair.
        pair_sd: float[..., P, N] or None: the judge's sd of each pair's per-query difference.
        undecided: bool[..., P] or None (all pairs): the pairs whose intervals the labels should shrink.

    Returns:
        float[..., N] > 0.
    """
    dev = outlyingness(pair_f)
    use = np.ones(dev.shape[:-1], bool) if undecided is None else np.asarray(undecided, bool)
    use = np.where(use.any(-1, keepdims=True), use, True).astype(np.float64)
    signals = [dev]
    if pair_sd is not None:
        pair_sd = np.asarray(pair_sd, dtype=np.float64)
        if not (np.isfinite(pair_sd).all() and (pair_sd >= 0).all()):
            raise DataError("the uncertainty (sd) must be finite and non-negative on every query")
        signals.append(np.broadcast_to(pair_sd, dev.shape))
    total = np.zeros(dev.shape[:-2] + dev.shape[-1:])
    for x in signals:
        x2 = (x**2 * use[..., None]).sum(-2) / use.sum(-1)[..., None]  # [..., N]
        mean = x2.mean(-1, keepdims=True)
        total = total + np.where(mean > 0, x2 / np.where(mean > 0, mean, 1.0), 1.0)
    return np.sqrt(len(signals) + total)


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


def draw_fixed_size(rng: np.random.Generator, pi) -> np.ndarray:
    """Draw queries with inclusion probabilities exactly ``pi`` and a fixed number of them (``sum pi``, rounded).

    Randomised systematic sampling (Hartley & Rao 1962): the queries in a random order, each an interval of
    length ``pi_i`` on a line, and a comb of points ``u, u + 1, u + 2, ...`` with ``u ~ U(0, 1)``; a query is
    drawn when a point falls in its interval. Each query is drawn with probability exactly ``pi_i`` (``pi_i <= 1``)
    and, when ``sum pi`` is a whole number ``B``, exactly ``B`` queries are drawn; independent (Poisson) draws
    instead give a random count (sd about ``sqrt(B)``), which at 20 labels costs about 4% of interval width.

    Args:
        rng: the random generator.
        pi: float[..., N] in [0, 1].

    Returns:
        bool[..., N].
    """
    pi = np.asarray(pi, dtype=np.float64)
    if not ((pi >= 0) & (pi <= 1)).all():
        raise DataError("inclusion probabilities must lie in [0, 1]")
    order = np.argsort(rng.random(pi.shape), axis=-1)
    cum = np.cumsum(np.take_along_axis(pi, order, -1), -1)
    u = rng.random(pi.shape[:-1] + (1,))
    before = np.concatenate([np.zeros_like(cum[..., :1]), cum[..., :-1]], -1)
    hit = (np.floor(cum - u + 1e-12) - np.floor(before - u + 1e-12)) > 0
    drawn = np.zeros(pi.shape, bool)
    np.put_along_axis(drawn, order, hit, -1)
    return drawn & (pi > 0)

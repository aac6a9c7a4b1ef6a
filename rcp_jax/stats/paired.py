"""Paired significance tests, bootstrap intervals, multiplicity corrections and rank correlations.

The array layer under :mod:`rcp_jax.stats`. Every test takes **differences** ``d = a - b`` of paired
per-query scores, shaped ``float[..., Q]`` (leading axes are independent comparisons, e.g. system pairs;
the last axis is queries). NaN marks a missing query of that comparison and is dropped from it
(pairwise-complete). All results are float64 NumPy arrays with the leading shape of ``d``.

The randomisation test is a JAX kernel: one matrix product of random sign vectors with all comparisons at
once, in float64 inside a local ``jax.enable_x64`` context (x64 is never switched on globally).
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

from rcp_jax.errors import DataError

CORRECTIONS = ("none", "holm", "bonferroni")


def _as_diffs(d) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 0:
        raise DataError("differences must have a query axis (shape [..., Q]); got a scalar")
    if np.isinf(d).any():
        raise DataError("differences contain inf; per-query scores must be finite (NaN marks a missing query)")
    return d


def paired_t_test(d) -> tuple[np.ndarray, np.ndarray]:
    """Paired two-sided t-test of mean difference zero, as ``scipy.stats.ttest_rel`` on each row.

    Args:
        d: float[..., Q], differences ``a - b`` per query; NaN = missing (dropped per row).

    Returns:
        ``(t, p)``, each float64[...]. Rows with fewer than 2 finite differences give NaN. Rows whose
        differences are all exactly zero give ``t = 0, p = 1`` (scipy returns NaN there: no evidence of a
        difference either way). Constant non-zero differences give ``t = +-inf, p = 0`` as in scipy.

    Example:
        >>> t, p = paired_t_test([[0.1, 0.2, 0.3, 0.2]])
        >>> round(float(t[0]), 4), round(float(p[0]), 4)
        (4.899, 0.0163)
    """
    d = _as_diffs(d)
    valid = np.isfinite(d)
    n = valid.sum(-1).astype(np.float64)
    d0 = np.where(valid, d, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = d0.sum(-1) / n
        dev = np.where(valid, d - mean[..., None], 0.0)
        var = (dev**2).sum(-1) / (n - 1)
        t = mean / np.sqrt(var / n)
        p = 2.0 * special.stdtr(n - 1, -np.abs(t))
    zero = (n >= 2) & ~np.any(d0 != 0, axis=-1)
    t = np.where(zero, 0.0, t)
    p = np.where(zero, 1.0, p)
    small = n < 2
    return np.where(small, np.nan, t), np.where(small, np.nan, np.minimum(p, 1.0))


EXACT_WILCOXON_MAX_N = 100
"""Largest number of non-zero differences for which :func:`wilcoxon_signed_rank` (``auto``) computes the
exact null distribution; above it the normal approximation is used (its error is then far below 0.001)."""


@functools.lru_cache(maxsize=256)
def _signed_rank_null(doubled_ranks: tuple[int, ...]) -> np.ndarray:
    """Exact null pmf of ``2 T+`` for non-zero differences whose (mid)ranks times 2 are ``doubled_ranks``.

    Under the null each difference is positive or negative with probability 1/2 independently, given the
    observed absolute values, so ``2 T+`` is a sum of independent ``{0, 2 r_i}`` terms: one convolution per
    rank (a dynamic programme over the attainable sums, exact for tied midranks).

    Returns:
        float64[n(n+1) + 1]; entry ``s`` = P(2 T+ = s).
    """
    total = sum(doubled_ranks)
    pmf = np.zeros(total + 1, dtype=np.float64)
    pmf[0] = 1.0
    top = 0
    for r in doubled_ranks:
        pmf[r : top + r + 1] += pmf[: top + 1]  # NumPy buffers the overlapping slices
        top += r
        pmf[: top + 1] *= 0.5
    return pmf


def _exact_signed_rank_p(ranks: np.ndarray, r_plus: float) -> float:
    doubled = np.rint(2.0 * ranks).astype(np.int64)  # midranks are multiples of 1/2
    pmf = _signed_rank_null(tuple(sorted(doubled.tolist())))
    t2 = int(round(2.0 * r_plus))
    upper = pmf[t2:].sum()  # P(T+ >= observed)
    lower = pmf[: t2 + 1].sum()  # P(T+ <= observed)
    return float(min(1.0, 2.0 * min(upper, lower)))


def _normal_signed_rank_p(n: int, tie_counts: np.ndarray, r_plus: float) -> float:
    mean = n * (n + 1) / 4.0
    var = (n * (n + 1) * (2 * n + 1) - float((tie_counts**3 - tie_counts).sum()) / 2.0) / 24.0
    if var <= 0:
        return 1.0
    dev = r_plus - mean
    z = (dev - math.copysign(0.5, dev) if dev != 0 else 0.0) / math.sqrt(var)  # continuity correction
    return float(min(1.0, 2.0 * stats.norm.sf(abs(z))))


def wilcoxon_signed_rank(d, *, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Wilcoxon signed-rank test (two-sided), exact and tie-aware for small samples.

    Zero differences are dropped before ranking (Wilcoxon's own rule, ``zero_method="wilcox"`` in scipy);
    tied absolute differences get their average rank (midrank). The exact null distribution is that of
    ``T+`` when each remaining difference's sign is + or - with probability 1/2 given the observed
    midranks, computed by a convolution over the ranks (equivalent to enumerating all ``2**n`` sign
    assignments, which the tests do). The two-sided p is ``2 min(P(T+ >= t), P(T+ <= t))``, capped at 1.
    This is the p-value scipy reports in the cases where its default is exact (no ties or zeros and
    n <= 50: its exact distribution; ties or zeros and n <= 13: its exhaustive permutation test); above
    those sizes scipy switches to the normal approximation, which with ties and zeros can call pairs the
    exact test does not (10 differences, 5 zeros, 5 equal positives: normal p = 0.025, exact p = 2/32).

    Args:
        d: float[..., Q], differences per query; NaN = missing.
        method: ``auto`` (exact when at most :data:`EXACT_WILCOXON_MAX_N` = 100 non-zero differences,
            else normal), ``exact`` (always exact) or ``approx`` (normal approximation with the tie
            correction of the variance and a continuity correction of 1/2, as R's ``wilcox.test`` and
            ``scipy.stats.wilcoxon(..., method="asymptotic", correction=True)``).

    Returns:
        ``(statistic, p)`` float64[...]: statistic = min(T+, T-) as scipy reports it. A row with no non-zero
        difference gives statistic 0 and p = 1.

    Example:
        >>> s, p = wilcoxon_signed_rank([[1.0, 2.0, -3.0, 4.0, 5.0]])
        >>> float(s[0]), float(p[0])
        (3.0, 0.3125)
        >>> float(wilcoxon_signed_rank([[0, 0, 0, 0, 0, 1, 1, 1, 1, 1]])[1][0])  # 2 of 2**5 sign vectors
        0.0625
    """
    if method not in ("auto", "exact", "approx"):
        raise DataError(f"unknown Wilcoxon method {method!r}; choose auto, exact or approx")
    d = _as_diffs(d)
    flat = d.reshape(-1, d.shape[-1])
    stat = np.empty(len(flat))
    pval = np.empty(len(flat))
    for i, row in enumerate(flat):
        x = row[np.isfinite(row)]
        x = x[x != 0]
        n = len(x)
        if n == 0:
            stat[i], pval[i] = 0.0, 1.0
            continue
        ax = np.abs(x)
        ranks = stats.rankdata(ax)
        r_plus = float(ranks[x > 0].sum())
        r_minus = float(ranks[x < 0].sum())
        stat[i] = min(r_plus, r_minus)
        if method == "exact" or (method == "auto" and n <= EXACT_WILCOXON_MAX_N):
            pval[i] = _exact_signed_rank_p(ranks, r_plus)
        else:
            _, tie_counts = np.unique(ax, return_counts=True)
            pval[i] = _normal_signed_rank_p(n, tie_counts.astype(np.float64), r_plus)
    return stat.reshape(d.shape[:-1]), pval.reshape(d.shape[:-1])


def _bucket(n: int, step: int) -> int:
    return max(step, -(-n // step) * step)


@functools.lru_cache(maxsize=32)
def _sign_flip_kernel(exact: bool, chunk: int):
    """Jitted counter of sign-flip statistics at least as extreme as the observed one (call under x64).

    The number of sign vectors (``n_total``) and of chunks (``n_chunks``) are run-time arguments, so one
    compiled program serves every query count and permutation count of one padded shape.
    """

    def count(key, d, n_total, n_chunks):
        # d: float64[P, Q]; statistic |sum_q s_q d_q|; the observed one has s = +1.
        t_obs = jnp.abs(d.sum(1))
        thr = t_obs - 1e-11 * jnp.abs(d).sum(1)  # float round-off must not drop exact ties
        q = d.shape[1]

        def body(i, acc):
            start = i * chunk
            idx = start + jnp.arange(chunk, dtype=jnp.int64)
            if exact:
                bits = (idx[:, None] >> jnp.arange(q, dtype=jnp.int64)[None, :]) & 1
                signs = (2 * bits - 1).astype(d.dtype)
            else:
                signs = jax.random.rademacher(jax.random.fold_in(key, i), (chunk, q), dtype=d.dtype)
            hit = (jnp.abs(signs @ d.T) >= thr[None, :]) & (idx < n_total)[:, None]
            return acc + hit.sum(0, dtype=jnp.int64)

        return jax.lax.fori_loop(0, n_chunks, body, jnp.zeros(d.shape[0], dtype=jnp.int64))

    return jax.jit(count)


def randomisation_test(
    d,
    *,
    n_permutations: int = 100_000,
    seed: int | jax.Array = 0,
    exact: bool | None = None,
    chunk: int = 8192,
) -> np.ndarray:
    """Paired randomisation (sign-flip) test, two-sided, for many comparisons at once (JAX).

    Under the null each query's difference is equally likely to have either sign; the statistic is
    ``|sum_q d_q|`` (equivalently the absolute mean difference). All rows share the same sign vectors,
    which keeps every row's test exact while costing one ``[B, Q] @ [Q, P]`` product per chunk.

    Args:
        d: float[..., Q], differences per query; NaN = missing (contributes a zero, which is the same as
            dropping it: its sign flip changes nothing).
        n_permutations: number B of random sign vectors (Monte Carlo mode).
        seed: int or ``jax.random.key`` for the sign vectors.
        exact: enumerate all ``2**Q`` sign vectors instead of sampling. Default: exact when
            ``2**Q <= n_permutations``. Refused for Q > 26.
        chunk: sign vectors per matrix product (memory ~ chunk * (Q + P) * 8 bytes).

    Returns:
        p float64[...]. Exact mode: share of all sign vectors with a statistic >= the observed one.
        Monte Carlo: ``(1 + count) / (1 + B)`` (never 0, a valid p-value).

    Example:
        >>> p = randomisation_test([[0.3, 0.1, 0.2, -0.1, 0.4]])
        >>> float(p[0])  # exact: 6 of the 32 sign vectors reach |sum| >= 0.9
        0.1875
    """
    d = _as_diffs(d)
    lead = d.shape[:-1]
    flat = np.nan_to_num(d.reshape(-1, d.shape[-1]), nan=0.0)
    n_rows, q = flat.shape
    if n_permutations < 1:
        raise DataError(f"n_permutations must be >= 1, got {n_permutations}")
    if exact is None:
        exact = q <= 26 and 2**q <= n_permutations
    if exact and q > 26:
        raise DataError(f"exact enumeration of 2**{q} sign vectors is too large; use exact=False")
    if n_rows == 0:
        return np.zeros(lead)
    if exact:
        # Drop all-zero query columns: they only duplicate sign vectors (the share is unchanged).
        keep = np.any(flat != 0, axis=0)
        flat = flat[:, keep] if keep.any() else flat[:, :1]
        q = flat.shape[1]
        n_total = 2**q
    else:
        n_total = int(n_permutations)
    # Exact mode: chunks of ``chunk`` sign vectors whatever Q (the ones past 2**Q are masked out), so every Q of
    # one padded width shares a program; Monte Carlo: the chunk fixes the sign vectors drawn, so it stays.
    chunk = int(chunk) if exact else int(min(chunk, n_total))
    n_chunks = -(-n_total // chunk)
    p_pad = _bucket(n_rows, 8)
    q_pad = _bucket(q, 8)  # padded zero columns change no statistic (exact: their signs are those of idx >= 2**Q)
    padded = np.zeros((p_pad, q_pad))
    padded[:n_rows, :q] = flat
    key = jax.random.key(int(seed)) if isinstance(seed, numbers.Integral) else seed
    with jax.enable_x64(True):
        kernel = _sign_flip_kernel(bool(exact), chunk)
        counts = np.asarray(kernel(key, jax.device_put(padded), np.int64(n_total), np.int64(n_chunks)))
    counts = counts[:n_rows].astype(np.float64)
    p = counts / n_total if exact else (1.0 + counts) / (1.0 + n_total)
    return np.minimum(p, 1.0).reshape(lead)


def bootstrap_mean_ci(
    d,
    *,
    groups: Sequence | np.ndarray | None = None,
    n_bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the mean difference, queries resampled within groups.

    The statistic is the unweighted mean over groups (datasets) of each group's mean difference, the
    aggregate the paper reports; with one group it is the plain mean. All rows share the resamples.

    Args:
        d: float[..., Q], differences per query; NaN = missing.
        groups: length-Q labels (e.g. dataset of each query column); default one group.
        n_bootstrap: number of resamples.
        level: coverage of the interval.
        seed: NumPy seed of the resampling.

    Returns:
        ``(low, high)`` float64[...]; NaN where a row has no finite difference. An end within rounding of
        zero (``|end| <= 1e-12 * max |d|`` of the row, :func:`snap_to_zero`) is exactly 0, so that
        whether the interval excludes 0 (:func:`excludes_zero`) does not rest on the sign of noise.

    Example:
        >>> lo, hi = bootstrap_mean_ci([[0.1, 0.2, 0.3, 0.2, 0.25]], n_bootstrap=500)
        >>> bool(0.1 < lo[0] < 0.21 < hi[0] < 0.3)
        True
    """
    d = _as_diffs(d)
    if not 0 < level < 1:
        raise DataError(f"level must be in (0, 1), got {level}")
    lead = d.shape[:-1]
    flat = d.reshape(-1, d.shape[-1])
    q = flat.shape[1]
    labels = np.zeros(q, dtype=np.int64) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    if len(labels) != q:
        raise DataError(f"groups has {len(labels)} labels for {q} query columns")
    valid = np.isfinite(flat)
    d0 = np.where(valid, flat, 0.0)
    rng = np.random.default_rng(seed)
    group_means = []
    for g in np.unique(labels):
        cols = np.flatnonzero(labels == g)
        m = len(cols)
        draw = rng.integers(0, m, size=(n_bootstrap, m))
        weights = np.bincount((np.arange(n_bootstrap)[:, None] * m + draw).ravel(), minlength=n_bootstrap * m)
        weights = weights.reshape(n_bootstrap, m).astype(np.float64)
        num = weights @ d0[:, cols].T
        den = weights @ valid[:, cols].T.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_g = num / den  # [B, P]; NaN where the resample holds no valid query of the row
        has_any = valid[:, cols].any(1)
        group_means.append(np.where(has_any[None, :], mean_g, np.nan))
    stacked = np.stack(group_means)  # [G, B, P]
    present = np.stack([valid[:, labels == g].any(1) for g in np.unique(labels)])  # [G, P]
    with np.errstate(invalid="ignore"):
        total = np.where(present[:, None, :], stacked, 0.0).sum(0) / present.sum(0)[None, :]
        # a resample that drew no valid query of a present group is undefined for that row
        undefined = (np.isnan(stacked) & present[:, None, :]).any(0)
    total = np.where(undefined, np.nan, total)
    alpha = 1.0 - level
    low = np.full(flat.shape[0], np.nan)
    high = np.full(flat.shape[0], np.nan)
    ok = present.any(0)
    if ok.any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low[ok] = np.nanquantile(total[:, ok], alpha / 2, axis=0)
            high[ok] = np.nanquantile(total[:, ok], 1 - alpha / 2, axis=0)
        scale = np.nanmax(np.where(valid, np.abs(flat), np.nan)[ok], axis=1)
        low[ok], high[ok] = snap_to_zero(low[ok], scale), snap_to_zero(high[ok], scale)
    return low.reshape(lead), high.reshape(lead)


#: Relative size (of the largest |difference| entering a mean) below which a mean is rounding noise of 0.
ZERO_RTOL = 1e-12


def snap_to_zero(x, scale) -> np.ndarray:
    """``x`` with values within rounding of zero set to exactly 0: ``|x| <= ZERO_RTOL * scale``.

    A mean of differences that is 0 in exact arithmetic (``0.1 + 0.2 - 0.3``) comes out as ``+-1e-17`` in
    floating point; its sign is noise, and an interval end of ``-6.9e-18`` must not decide that the
    interval excludes 0. ``scale``: the largest ``|difference|`` entering the mean (broadcast with ``x``).
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x) <= ZERO_RTOL * np.abs(np.asarray(scale, dtype=np.float64)), 0.0, x)


def excludes_zero(low, high) -> np.ndarray:
    """Whether each interval ``[low, high]`` lies strictly on one side of 0 (False where either end is NaN).

    Ends within rounding of zero should be snapped first (:func:`snap_to_zero`;
    :func:`bootstrap_mean_ci` returns them snapped), so an end of ``-6.9e-18`` counts as 0, inside.
    """
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    return (low > 0) | (high < 0)


def adjust_pvalues(p, method: str = "holm") -> np.ndarray:
    """Family-wise multiplicity correction of one family of p-values.

    Args:
        p: float[m] p-values of one family; NaN entries are ignored (not counted in m) and stay NaN.
        method: ``holm`` (step-down), ``bonferroni`` or ``none``.

    Returns:
        Adjusted p-values float64[m], capped at 1, in the input order.

    Example:
        >>> adjust_pvalues([0.01, 0.04, 0.03], "holm").round(3).tolist()
        [0.03, 0.06, 0.06]
    """
    if method not in CORRECTIONS:
        raise DataError(f"unknown correction {method!r}; choose one of {', '.join(CORRECTIONS)}")
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0 or method == "none":
        return np.where(ok, p, np.nan)
    vals = p[ok]
    if method == "bonferroni":
        out[ok] = np.minimum(1.0, vals * m)
        return out
    order = np.argsort(vals, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * vals[order])
    adj = np.empty(m)
    adj[order] = np.minimum(1.0, stepped)
    out[ok] = adj
    return out


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b between two score vectors (ties in either corrected), as ``scipy.stats.kendalltau``.

    Args:
        x, y: float[n]; pairs with a NaN are dropped.

    Returns:
        tau-b in [-1, 1]; NaN when fewer than 2 complete pairs or one vector is constant.

    Example:
        >>> kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4])
        0.6666666666666666
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2:
        return math.nan
    i, j = np.triu_indices(len(x), 1)
    sx = np.sign(x[i] - x[j])
    sy = np.sign(y[i] - y[j])
    n_x = np.count_nonzero(sx)
    n_y = np.count_nonzero(sy)
    if n_x == 0 or n_y == 0:
        return math.nan
    return float((sx * sy).sum() / math.sqrt(n_x * n_y))


def spearman_rho(x, y) -> float:
    """Spearman rank correlation (average ranks for ties), as ``scipy.stats.spearmanr``.

    Args:
        x, y: float[n]; pairs with a NaN are dropped.

    Returns:
        rho in [-1, 1]; NaN when fewer than 2 complete pairs or a constant vector.

    Example:
        >>> spearman_rho([1, 2, 3, 4], [10, 30, 20, 40])
        0.8
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return math.nan
    rx = stats.rankdata(x[ok])
    ry = stats.rankdata(y[ok])
    rx -= rx.mean()
    ry -= ry.mean()
    den = math.sqrt(float((rx**2).sum() * (ry**2).sum()))
    return math.nan if den == 0 else float((rx * ry).sum() / den)

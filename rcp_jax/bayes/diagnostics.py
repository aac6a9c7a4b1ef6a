"""Rank-normalised split R-hat and bulk / tail effective sample sizes (Vehtari et al. 2021), vectorised.

The same definitions as ArviZ's ``rhat(method="rank")`` and ``ess(method="bulk" | "tail")`` (arviz-stats),
computed for blocks of elements at once with numpy, where ArviZ loops in Python over elements (the
CHANGELOG has the figures). ``tests/bayes/test_diagnostics_vectorised.py`` checks them against ArviZ element
for element.

Every function takes draws ``float[chains, draws, K]`` (K elements, flattened by the caller) and returns
``float[K]``; an element with a NaN draw, or too few chains / draws (R-hat: 2 chains, 4 draws; ESS: 1 chain,
4 draws), gets NaN, as in ArviZ.
"""

from __future__ import annotations

import numpy as np
from scipy import fft, special

#: Blom's fractional offset of the rank back-transformation.
_BLOM = 3.0 / 8.0


def _split(x: np.ndarray) -> np.ndarray:
    """float[2C, S // 2, K]: each chain's first and last halves as chains (all first halves, then the seconds)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _average_ranks(v: np.ndarray) -> np.ndarray:
    """float[K, N]: ranks 1..N of each row of ``v`` float[K, N], ties given their average rank
    (``scipy.stats.rankdata(method="average")`` row by row, by one sort of all rows)."""
    k, n = v.shape
    order = np.argsort(v, axis=1)  # any order within ties: they share one average rank
    ordered = np.take_along_axis(v, order, axis=1)
    first = np.ones((k, n), dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    last = np.ones((k, n), dtype=bool)
    last[:, :-1] = first[:, 1:]
    pos = np.arange(n)
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((k, n))
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=1)
    return ranks


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Normal scores of the ranks of each element's draws over all chains (average ranks for ties)."""
    c, s, k = x.shape
    ranks = _average_ranks(np.ascontiguousarray(x.reshape(c * s, k).T))
    return special.ndtri((ranks - _BLOM) / (c * s - 2 * _BLOM + 1)).T.reshape(c, s, k)


def _rhat(x: np.ndarray) -> np.ndarray:
    """Potential scale reduction of chains ``float[C, S, K]`` (no split, no ranks)."""
    s = x.shape[1]
    between = s * np.var(x.mean(axis=1), axis=0, ddof=1)
    within = np.var(x, axis=1, ddof=1).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + s - 1) / s)


def _invalid(x: np.ndarray, min_chains: int) -> np.ndarray:
    """bool[K]: elements ArviZ gives NaN (a NaN draw, or too few chains or draws)."""
    bad = np.isnan(x).any(axis=(0, 1))
    if x.shape[0] < min_chains or x.shape[1] < 4:
        bad[:] = True
    return bad


#: Elements per block: each block's draws and temporaries stay in the CPU cache (whole, a 50 x 60 posterior's
#: 3,100 elements x 2,000 draws run ~3x slower, memory-bound).
_BLOCK = 64


def _blocked(fun, x: np.ndarray, *args) -> np.ndarray:
    """``fun(x[..., block], *args)`` for consecutive blocks of :data:`_BLOCK` elements, concatenated: float[K]."""
    k = x.shape[2]
    if k <= _BLOCK:
        return fun(x, *args)
    return np.concatenate([fun(x[..., i:i + _BLOCK], *args) for i in range(0, k, _BLOCK)])


def rank_rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat ``float[K]`` of draws ``float[C, S, K]``: the larger of the bulk R-hat
    (normal scores of the split chains) and the tail R-hat (of the folded draws ``|x - median|``)."""
    return _blocked(_rank_rhat, np.asarray(x, dtype=np.float64))


def _rank_rhat(x: np.ndarray) -> np.ndarray:
    bad = _invalid(x, 2)
    out = np.full(x.shape[2], np.nan)
    if bad.all():
        return out
    split = _split(x[..., ~bad])
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    out[~bad] = np.maximum(_rhat(_z_scale(split)), _rhat(_z_scale(folded)))
    return out


def _autocov(x: np.ndarray) -> np.ndarray:
    """Autocovariance ``float[C, S, K]`` of each chain at every lag (by FFT; divided by S)."""
    s = x.shape[1]
    m = fft.next_fast_len(2 * s)
    f = fft.rfft(x - x.mean(axis=1, keepdims=True), n=m, axis=1)
    return fft.irfft(f * np.conjugate(f), n=m, axis=1)[:, :s] / s


def _ess(x: np.ndarray) -> np.ndarray:
    """Effective sample size ``float[K]`` of chains ``float[C, S, K]`` with Geyer's initial positive and
    monotone sequences, truncated exactly where ArviZ's loop stops."""
    c, s, k = x.shape
    total = c * s
    acov = _autocov(x)
    mean_var = acov[:, 0].mean(axis=0) * s / (s - 1.0)
    var_plus = mean_var * (s - 1.0) / s
    if c > 1:
        var_plus = var_plus + np.var(x.mean(axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # float[S, K]: autocorrelation by lag
    rho[0] = 1.0
    # pair sums P_i = rho[2i] + rho[2i + 1]; ArviZ's loop computes P_1, P_2, ... while the previous sum is > 0
    # and its index stays below S - 3, so it runs J = min(J_max, first i with P_i <= 0) times
    j_max = max((s - 3) // 2, 0)
    idx = np.arange(j_max + 1)
    pairs = np.empty((j_max + 1, k))  # float[J_max + 1, K]: P_0 .. P_J_max
    pairs[0] = 1.0 + rho[1]
    pairs[1:] = rho[2:2 * j_max + 2:2] + rho[3:2 * j_max + 3:2]
    stop = np.where(pairs <= 0, idx[:, None], j_max)
    n_run = stop.min(axis=0)  # int[K]: J
    # kept pairs: 0 .. J - 1 always (their successors ran), pair J when P_J >= 0 (the last one computed)
    keep = idx[:, None] < n_run[None, :]
    last = pairs[n_run, np.arange(k)]
    # Geyer's monotone sequence over pairs 0 .. J - 1: a running minimum of the pair sums
    mono = np.where(keep, np.minimum.accumulate(np.where(keep, pairs, np.inf), axis=0), 0.0)
    # the element at lag 2J: rho[2J] when pair J was kept or rho[2J] > 0 (ArviZ's "improve estimation" step);
    # J = 0: lag 0, whose autocorrelation is 1
    even = rho[2 * n_run, np.arange(k)]
    tail = np.where((last >= 0) | (even > 0), even, 0.0)
    tau = -1.0 + 2.0 * mono.sum(axis=0) + tail
    tau = np.maximum(tau, 1.0 / np.log10(total))
    ess = total / tau
    constant = (x.max(axis=(0, 1)) - x.min(axis=(0, 1))) < np.finfo(float).resolution
    ess = np.where(constant, float(total), ess)
    return np.where(np.isnan(rho).any(axis=0) & ~constant, np.nan, ess)


def ess_bulk(x: np.ndarray) -> np.ndarray:
    """Bulk effective sample size ``float[K]`` of draws ``float[C, S, K]`` (normal scores of split chains)."""
    return _blocked(_ess_bulk, np.asarray(x, dtype=np.float64))


def _ess_bulk(x: np.ndarray) -> np.ndarray:
    bad = _invalid(x, 1)
    out = np.full(x.shape[2], np.nan)
    if not bad.all():
        out[~bad] = _ess(_z_scale(_split(x[..., ~bad])))
    return out


def ess_tail(x: np.ndarray, prob: float = 0.05) -> np.ndarray:
    """Tail effective sample size ``float[K]`` of draws ``float[C, S, K]``: the smaller ESS of the indicators
    ``x <= q`` at the ``prob`` and ``1 - prob`` quantiles (split chains)."""
    return _blocked(_ess_tail, np.asarray(x, dtype=np.float64), prob)


def _ess_tail(x: np.ndarray, prob: float) -> np.ndarray:
    bad = _invalid(x, 1)
    out = np.full(x.shape[2], np.nan)
    if bad.all():
        return out
    good = x[..., ~bad]
    flat = good.reshape(-1, good.shape[2])
    lows = []
    for p in sorted((prob, 1.0 - prob)):
        q = np.quantile(flat, p, axis=0)
        lows.append(_ess(_split((good <= q).astype(np.float64))))
    out[~bad] = np.minimum(*lows)
    return out

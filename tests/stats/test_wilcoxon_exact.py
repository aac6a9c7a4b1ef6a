"""The Wilcoxon signed-rank test is exact and tie-aware on small samples: against brute-force
enumeration of sign assignments and against scipy wherever scipy's answer is exact."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from rcp_jax.stats.paired import EXACT_WILCOXON_MAX_N, wilcoxon_signed_rank


def _enumerated_p(d: np.ndarray) -> float:
    """Two-sided p by listing all 2**n sign assignments of the non-zero differences' midranks."""
    x = d[np.isfinite(d) & (d != 0)]
    ranks = stats.rankdata(np.abs(x))
    t_obs = ranks[x > 0].sum()
    totals = np.array([sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product((0, 1), repeat=len(x))])
    upper = np.mean(totals >= t_obs - 1e-9)
    lower = np.mean(totals <= t_obs + 1e-9)
    return min(1.0, 2 * min(upper, lower))


def _tied_samples(seed: int, count: int, n_range=(4, 13)):
    """Small samples with zeros and tied magnitudes (grades of nDCG differences are often coarse)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(*n_range, endpoint=True))
        levels = rng.choice([1, 2, 3, 4], size=n) * rng.choice([-1, 1], size=n, p=[0.3, 0.7])
        levels[rng.random(n) < 0.3] = 0
        out.append(levels * 0.125)
    return out


def test_the_reported_case_is_exact_and_not_called():
    d = np.array([0, 0, 0, 0, 0, 0.1, 0.1, 0.1, 0.1, 0.1])
    s, p = wilcoxon_signed_rank(d)
    assert float(p) == 2 / 2**5 == 0.0625  # only all-plus and all-minus reach T+ = 15
    assert float(p) == pytest.approx(stats.wilcoxon(d).pvalue, abs=1e-12)
    assert not float(p) < 0.05


@pytest.mark.parametrize("seed", range(3))
def test_exact_matches_brute_force_enumeration_on_tied_zero_laden_samples(seed):
    samples = _tied_samples(seed, 25)
    width = max(len(x) for x in samples)
    d = np.full((len(samples), width), np.nan)  # NaN = missing query, dropped per row
    for i, x in enumerate(samples):
        d[i, : len(x)] = x
    _, p = wilcoxon_signed_rank(d)
    for i, x in enumerate(samples):
        if np.any(x != 0):
            assert p[i] == pytest.approx(_enumerated_p(x), abs=1e-12), x


def test_agrees_with_scipy_default_where_scipy_is_exact():
    # scipy's default is exact with no ties/zeros (n <= 50) and an exhaustive permutation test with
    # ties or zeros (n <= 13); every decision at 0.01, 0.05 and 0.1 must be the same
    rng = np.random.default_rng(11)
    cases = _tied_samples(5, 80) + [rng.normal(0.3, 1, size=n) for n in (5, 8, 12, 20, 35, 50)]
    called = 0
    for x in cases:
        if not np.any(x != 0):
            continue
        ref = stats.wilcoxon(x).pvalue
        _, p = wilcoxon_signed_rank(x)
        assert float(p) == pytest.approx(ref, rel=1e-9, abs=1e-12), x
        for alpha in (0.01, 0.05, 0.1):
            assert (float(p) < alpha) == (ref < alpha)
        called += float(p) < 0.05
    assert called > 5  # the cases include pairs an exact test does call


def test_exact_beyond_scipy_permutation_size_matches_scipy_exhaustive_permutation():
    # n = 16 with ties and zeros: scipy's default is the normal approximation here; its exhaustive
    # permutation test is the exact reference
    for x in _tied_samples(21, 4, n_range=(15, 16)):
        ref = stats.wilcoxon(x, method=stats.PermutationMethod(n_resamples=np.inf)).pvalue
        assert float(wilcoxon_signed_rank(x)[1]) == pytest.approx(ref, rel=1e-9)


def test_normal_approximation_above_the_documented_size():
    rng = np.random.default_rng(2)
    x = np.round(rng.normal(0.05, 0.3, size=EXACT_WILCOXON_MAX_N + 40), 1)
    n_nonzero = int(np.count_nonzero(x))
    assert n_nonzero > EXACT_WILCOXON_MAX_N
    s, p = wilcoxon_signed_rank(x)
    ref = stats.wilcoxon(x, method="asymptotic", correction=True)
    assert float(s) == pytest.approx(ref.statistic)
    assert float(p) == pytest.approx(ref.pvalue, rel=1e-10)
    # and the exact answer is close there
    assert float(wilcoxon_signed_rank(x, method="exact")[1]) == pytest.approx(float(p), abs=2e-3)


def test_statistic_is_scipys_and_rows_are_independent():
    rows = _tied_samples(7, 6)
    width = max(len(x) for x in rows)
    d = np.full((2, 3, width), np.nan)
    for i, x in enumerate(rows):
        d.reshape(6, width)[i, : len(x)] = x
    s, p = wilcoxon_signed_rank(d)
    assert s.shape == p.shape == (2, 3)
    for i, x in enumerate(rows):
        if np.any(x != 0):
            assert s.reshape(6)[i] == pytest.approx(stats.wilcoxon(x).statistic)
            assert p.reshape(6)[i] == pytest.approx(float(wilcoxon_signed_rank(x)[1]))

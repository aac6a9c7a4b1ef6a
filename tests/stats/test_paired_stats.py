"""Known-answer and oracle tests of the array-level statistics in :mod:`rcp_jax.stats.paired`."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rcp_jax.errors import DataError
from rcp_jax.stats import (
    adjust_pvalues,
    bootstrap_mean_ci,
    kendall_tau_b,
    paired_t_test,
    randomisation_test,
    spearman_rho,
    wilcoxon_signed_rank,
)


# ------------------------------------------------------------------------------------------- t-test
def test_t_test_matches_scipy_ttest_rel_rowwise():
    rng = np.random.default_rng(0)
    a = rng.normal(0.5, 0.2, size=(7, 30))
    b = a + rng.normal(0.05, 0.1, size=(7, 30))
    t, p = paired_t_test(a - b)
    ref = stats.ttest_rel(a, b, axis=1)
    np.testing.assert_allclose(t, ref.statistic, rtol=1e-12)
    np.testing.assert_allclose(p, ref.pvalue, rtol=1e-10)


def test_t_test_drops_missing_queries_pairwise():
    rng = np.random.default_rng(1)
    d = rng.normal(0.1, 0.3, size=(3, 12))
    d[0, [2, 5]] = np.nan
    d[2, 0] = np.nan
    t, p = paired_t_test(d)
    for i in range(3):
        row = d[i][np.isfinite(d[i])]
        ref = stats.ttest_rel(row, np.zeros_like(row))
        assert t[i] == pytest.approx(ref.statistic, rel=1e-12)
        assert p[i] == pytest.approx(ref.pvalue, rel=1e-10)


def test_t_test_hand_worked():
    # d = (0.1, 0.2, 0.3, 0.2): mean 0.2, sd sqrt(0.02/3), t = 0.2 / (sd / 2) = 2 sqrt(6)
    t, p = paired_t_test([0.1, 0.2, 0.3, 0.2])
    assert float(t) == pytest.approx(2 * math.sqrt(6), rel=1e-12)
    assert float(p) == pytest.approx(2 * stats.t.sf(2 * math.sqrt(6), df=3), rel=1e-12)


def test_t_test_degenerate_rows():
    t, p = paired_t_test([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.3, np.nan, np.nan]])
    assert (t[0], p[0]) == (0.0, 1.0)  # identical systems: no evidence
    assert p[1] == 0.0 and np.isinf(t[1])  # constant non-zero difference, as scipy
    assert np.isnan(t[2]) and np.isnan(p[2])  # fewer than 2 queries


# ----------------------------------------------------------------------------------------- Wilcoxon
def test_wilcoxon_hand_worked_exact():
    # T+ = 1+2+4+5 = 12, T- = 3; subsets of {1..5} with sum <= 3: {}, {1}, {2}, {3}, {1,2} -> 5/32
    s, p = wilcoxon_signed_rank([1.0, 2.0, -3.0, 4.0, 5.0])
    assert float(s) == 3.0
    assert float(p) == pytest.approx(2 * 5 / 32)


@pytest.mark.parametrize("n", [5, 9, 16, 30])
def test_wilcoxon_exact_matches_scipy(n):
    rng = np.random.default_rng(n)
    d = rng.normal(0.2, 1.0, size=(4, n))
    s, p = wilcoxon_signed_rank(d, method="exact")
    for i in range(4):
        ref = stats.wilcoxon(d[i], method="exact")
        assert s[i] == ref.statistic
        assert p[i] == pytest.approx(ref.pvalue, rel=1e-10)


def test_wilcoxon_approx_with_ties_and_zeros_matches_scipy():
    rng = np.random.default_rng(3)
    d = np.round(rng.normal(0.1, 0.4, size=(5, 40)), 1)  # many ties and some zeros
    assert (d == 0).any()
    s, p = wilcoxon_signed_rank(d, method="approx")  # normal, tie- and continuity-corrected
    for i in range(5):
        ref = stats.wilcoxon(d[i], method="asymptotic", zero_method="wilcox", correction=True)
        assert s[i] == pytest.approx(ref.statistic)
        assert p[i] == pytest.approx(ref.pvalue, rel=1e-10)


def test_wilcoxon_all_zero_row_has_p_one():
    s, p = wilcoxon_signed_rank([[0.0, 0.0, np.nan]])
    assert (s[0], p[0]) == (0.0, 1.0)


# ----------------------------------------------------------------------------------- randomisation
def _brute_force_p(d: np.ndarray) -> float:
    d = d[np.isfinite(d)]
    obs = abs(d.sum())
    sums = [abs(np.dot(s, d)) for s in itertools.product((-1.0, 1.0), repeat=len(d))]
    return float(np.mean(np.asarray(sums) >= obs - 1e-9))


@pytest.mark.parametrize("n", [1, 3, 6, 9, 12])
def test_randomisation_exact_equals_full_enumeration(n):
    rng = np.random.default_rng(100 + n)
    rows = [
        rng.normal(0.05, 0.2, size=n),
        np.round(rng.normal(0.0, 0.3, size=n), 1),  # ties in |sum| across sign vectors
        rng.integers(-2, 3, size=n).astype(float),  # integers, zeros included
        np.zeros(n),
    ]
    d = np.stack(rows)
    if n > 2:
        d[0, 1] = np.nan  # a missing query
    p = randomisation_test(d, exact=True)
    expected = [_brute_force_p(r) for r in d]
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-12)


def test_randomisation_auto_mode_is_exact_when_enumeration_fits():
    d = np.array([[0.3, 0.1, 0.2, -0.1, 0.4]])
    assert randomisation_test(d, n_permutations=64)[0] == pytest.approx(6 / 32)
    assert randomisation_test(d, n_permutations=16)[0] != pytest.approx(6 / 32)  # Monte Carlo, 16 draws


def test_randomisation_monte_carlo_close_to_exact():
    rng = np.random.default_rng(7)
    d = rng.normal(0.1, 0.3, size=(6, 12))
    exact = randomisation_test(d, exact=True)
    b = 40_000
    mc = randomisation_test(d, n_permutations=b, exact=False, seed=11)
    se = np.sqrt(exact * (1 - exact) / b) + 1 / b
    assert np.all(np.abs(mc - exact) < 5 * se)


def test_randomisation_seed_is_explicit_and_deterministic():
    d = np.random.default_rng(0).normal(0.05, 0.3, size=(3, 40))
    p1 = randomisation_test(d, n_permutations=5000, seed=1)
    p2 = randomisation_test(d, n_permutations=5000, seed=1)
    p3 = randomisation_test(d, n_permutations=5000, seed=2)
    np.testing.assert_array_equal(p1, p2)
    assert not np.array_equal(p1, p3)
    assert np.all(p1 >= 1 / 5001)


def test_randomisation_agrees_with_t_test_on_large_samples():
    rng = np.random.default_rng(5)
    d = rng.normal(0.03, 0.2, size=(5, 60))
    p_perm = randomisation_test(d, n_permutations=20_000, seed=0)
    _, p_t = paired_t_test(d)
    np.testing.assert_allclose(p_perm, p_t, atol=0.03)


def test_randomisation_refuses_huge_exact():
    with pytest.raises(DataError, match="too large"):
        randomisation_test(np.ones((1, 30)), exact=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=8))
def test_randomisation_exact_property(values):
    d = np.asarray(values, dtype=float) / 4.0
    assert randomisation_test(d[None, :], exact=True)[0] == pytest.approx(_brute_force_p(d), abs=1e-12)


# --------------------------------------------------------------------------------------- bootstrap
def test_bootstrap_constant_differences_give_point_interval():
    lo, hi = bootstrap_mean_ci(np.full((2, 15), 0.25), n_bootstrap=200)
    np.testing.assert_allclose(lo, 0.25)
    np.testing.assert_allclose(hi, 0.25)


def test_bootstrap_groups_average_datasets_unweighted():
    # dataset x: 10 queries at 0.1, dataset y: 2 queries at 0.3 -> mean over datasets 0.2 (pooled: 0.133)
    d = np.r_[np.full(10, 0.1), np.full(2, 0.3)][None, :]
    lo, hi = bootstrap_mean_ci(d, groups=["x"] * 10 + ["y"] * 2, n_bootstrap=100)
    assert lo[0] == pytest.approx(0.2) and hi[0] == pytest.approx(0.2)


def test_bootstrap_resamples_within_groups_only():
    # each dataset constant, but differing: resampling within groups keeps the statistic fixed
    d = np.r_[np.full(5, -1.0), np.full(5, 3.0)][None, :]
    lo, hi = bootstrap_mean_ci(d, groups=[0] * 5 + [1] * 5, n_bootstrap=300)
    assert (lo[0], hi[0]) == pytest.approx((1.0, 1.0))
    lo2, hi2 = bootstrap_mean_ci(d, n_bootstrap=300)  # one group: the mix varies
    assert lo2[0] < 1.0 < hi2[0]


def test_bootstrap_coverage_on_normal_data():
    rng = np.random.default_rng(42)
    d = rng.normal(0.1, 1.0, size=(300, 40))
    lo, hi = bootstrap_mean_ci(d, n_bootstrap=1000, level=0.9, seed=3)
    coverage = np.mean((lo <= 0.1) & (0.1 <= hi))
    assert 0.83 <= coverage <= 0.96


# ------------------------------------------------------------------------------------- corrections
def test_holm_and_bonferroni_hand_worked():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> running max 0.06
    np.testing.assert_allclose(adjust_pvalues(p, "holm"), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(adjust_pvalues(p, "bonferroni"), [0.04, 0.16, 0.12, 0.02])
    np.testing.assert_allclose(adjust_pvalues(p, "none"), p)


def test_corrections_ignore_nan_and_cap_at_one():
    adj = adjust_pvalues([0.2, np.nan, 0.5], "holm")
    assert np.isnan(adj[1])
    np.testing.assert_allclose(adj[[0, 2]], [0.4, 0.5])
    np.testing.assert_allclose(adjust_pvalues([0.6, 0.7], "bonferroni"), [1.0, 1.0])
    with pytest.raises(DataError, match="unknown correction"):
        adjust_pvalues([0.1], "bh")


# -------------------------------------------------------------------------------- rank correlation
def test_kendall_and_spearman_match_scipy_with_ties():
    rng = np.random.default_rng(9)
    for _ in range(5):
        x = rng.integers(0, 5, size=14).astype(float)
        y = x + rng.integers(-2, 3, size=14)
        assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, rel=1e-12)
        assert spearman_rho(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, rel=1e-12)


def test_rank_correlations_degenerate():
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman_rho([1], [2]))
    assert kendall_tau_b([1, 2, np.nan, 4], [4, 3, 0, 1]) == pytest.approx(-1.0)

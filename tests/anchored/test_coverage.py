"""The must-show checks of human-anchored comparisons on the latent-relevance simulator (issue 35).

Each check runs R = 400 vectorised replications of a 200-query benchmark with 4 systems (6 pairs). Tolerances
come from the binomial SE of a coverage estimate: at nominal 0.90 and 400 replications of one pair, SE =
sqrt(0.9 * 0.1 / 400) = 0.015; pooled over the 6 pairs (positively correlated: they share queries) we use the
one-pair SE as a conservative bound, so the pooled coverage must lie in 0.90 +- 2.5 SE = [0.8625, 0.9375]
(the issue's 0.87-0.93 band is checked on the large run in benchmarks/anchored_coverage.py). The null rate of
one pair over 400 replications: nominal 0.10, SE 0.015; we accept <= 0.10 + 2.5 SE = 0.1375.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rcp_jax.anchored.ppi import anchored_mean
from rcp_jax.anchored.simulate import random_labels, replicate, simulate_benchmark

R = 400
SE = np.sqrt(0.9 * 0.1 / R)
BAND = (0.9 - 2.5 * SE, 0.9 + 2.5 * SE)


@pytest.fixture(scope="module")
def correlated():
    return simulate_benchmark(np.random.default_rng(11), replications=R, queries=200, judge_noise=0.3)


@pytest.fixture(scope="module")
def uncorrelated():
    return simulate_benchmark(np.random.default_rng(12), replications=R, queries=200, skill=0.0)


@pytest.mark.parametrize("fraction", [0.10, 0.25])
def test_anchored_intervals_cover_the_benchmark_mean_and_judge_only_is_biased(correlated, fraction):
    rc = replicate(correlated, np.random.default_rng(3), fraction)
    coverage = rc.anchored_covered.mean()
    assert BAND[0] <= coverage <= BAND[1], coverage
    assert BAND[0] <= rc.human_covered.mean() <= BAND[1]
    # the judge-only difference is biased: on the null pair A-B its mean is far from the (zero) truth
    bias = (rc.judge_only - rc.truth).mean(0)
    assert abs(bias[0]) > 10 * (rc.judge_only - rc.truth)[:, 0].std() / np.sqrt(R)
    # the anchored estimate is not: its mean error is within 3 SE of zero for every pair
    err = rc.anchored_estimate - rc.truth
    assert (np.abs(err.mean(0)) < 3 * err.std(0) / np.sqrt(R)).all()


def test_anchored_interval_is_much_narrower_when_judge_and_human_correlate(correlated):
    rc = replicate(correlated, np.random.default_rng(4), 0.25)
    assert np.nanmean(rc.correlation) >= 0.7
    assert np.nanmean(rc.anchored_width / rc.human_width) <= 0.75


def test_anchored_interval_is_never_much_wider_when_the_judge_is_uninformative(uncorrelated):
    rc = replicate(uncorrelated, np.random.default_rng(5), 0.25)
    assert abs(np.nanmean(rc.correlation)) < 0.05
    ratio = rc.anchored_width / rc.human_width
    # on average at most 5% wider (measured 1.024): the price of estimating lambda from 50 labels, which the
    # leave-one-out variance counts (a replication whose labels hold a query of high leverage pays more)
    assert np.nanmean(ratio) <= 1.05
    assert np.nanmedian(ratio) <= 1.03
    assert BAND[0] <= rc.anchored_covered.mean() <= BAND[1]


@pytest.mark.parametrize("fraction", [0.10, 0.25])
def test_null_pair_is_called_different_at_most_at_the_nominal_rate(fraction):
    # equal human quality is a statement about the population of queries: the superpopulation target
    bench = simulate_benchmark(np.random.default_rng(13), replications=R, queries=200, judge_noise=0.3)
    rc = replicate(bench, np.random.default_rng(6), fraction, target="superpopulation")
    null = rc.anchored_called[:, 0]  # pair A-B: same latent quality, different judge bias
    assert null.mean() <= 0.10 + 2.5 * SE, null.mean()
    assert np.abs(rc.judge_only[:, 0].mean()) > 0.05  # the judge alone would separate them


@pytest.fixture(scope="module")
def informative():
    # the judge slips on 10% of the queries and its reported sd tracks its true noise sd imperfectly
    return simulate_benchmark(np.random.default_rng(21), replications=R, queries=200, judge_noise=0.1,
                              slip_share=0.1, slip_sd=0.4, assessor_noise=0.1)


def test_reported_sd_tracks_the_true_noise_imperfectly(informative):
    corr = np.mean([np.corrcoef(informative.judge_sd[i, 0], informative.noise_sd[i, 0])[0, 1] for i in range(R)])
    assert 0.5 <= corr <= 0.8, corr


@pytest.mark.parametrize("fraction", [0.10, 0.25])
def test_active_selection_keeps_coverage_and_spends_the_expected_budget(correlated, informative, fraction):
    for bench in (correlated, informative):
        rc = replicate(bench, np.random.default_rng(7), fraction, scheme="active")
        assert BAND[0] <= rc.anchored_covered.mean() <= BAND[1]
        assert BAND[0] <= rc.human_covered.mean() <= BAND[1]
        # Poisson sampling: the count per replication has sd <= sqrt(budget), so its mean over R has SE <= 0.4
        assert abs(rc.labels.mean() - 200 * fraction) < 1.5


@pytest.mark.parametrize("fraction", [0.10, 0.25])
def test_active_selection_is_narrower_than_random_when_the_uncertainty_is_informative(informative, fraction):
    random = replicate(informative, np.random.default_rng(8), fraction)
    active = replicate(informative, np.random.default_rng(9), fraction, scheme="active")
    assert (active.labels == random.labels).all()  # the same number of labels in every replication
    w0 = np.nanmean(random.anchored_width, 1)  # per replication, over the 6 pairs
    w1 = np.nanmean(active.anchored_width, 1)
    ratio = w1.mean() / w0.mean()
    # Monte Carlo SE of a ratio of means over the same R benchmarks (delta method); measured about 0.01 at
    # R = 400 (the ratio over 2000 replications in benchmarks/anchored_coverage.py: see RESULTS.md)
    se = (w1 - ratio * w0).std(ddof=1) / np.sqrt(R) / w0.mean()
    assert ratio + 3 * se < 1.0, (ratio, se)
    assert (active.anchored_estimate - active.truth).std() < (random.anchored_estimate - random.truth).std()


@pytest.fixture(scope="module")
def heavy_tailed():
    # the judge's noise sd varies by a log-normal factor of sd 1.5 between queries: its errors are heavy-tailed
    return simulate_benchmark(np.random.default_rng(31), replications=R, queries=200, skill=1.5, heterogeneity=1.5,
                              assessor_noise=0.2)


@pytest.mark.parametrize("fraction", [0.10, 0.25])
def test_heavy_tailed_judge_errors_keep_coverage_and_the_null_rate(heavy_tailed, fraction):
    rc = replicate(heavy_tailed, np.random.default_rng(32), fraction)
    assert BAND[0] <= rc.anchored_covered.mean() <= BAND[1]
    sp = replicate(heavy_tailed, np.random.default_rng(32), fraction, target="superpopulation")
    assert sp.anchored_called[:, 0].mean() <= 0.10 + 2.5 * SE
    # the plug-in variance (residuals of the line fitted on the same labels, (1 - n/N) S_r^2 / n with n - 2 df)
    # is too small here: the queries far from the mean of f pull the line to themselves
    y_all = heavy_tailed.differences(heavy_tailed.human)
    f = heavy_tailed.differences(heavy_tailed.judge)
    n, big_n = round(fraction * 200), 200
    lab = random_labels(np.random.default_rng(33), (R, big_n), n)[:, None, :]
    est = anchored_mean(np.where(lab, y_all, np.nan), f)
    resid = np.where(lab, y_all - est.lam[..., None] * f, np.nan)
    plug_in = np.sqrt((1 - n / big_n) * np.nanvar(resid, -1, ddof=2) / n)
    err = np.abs(est.estimate - y_all.mean(-1))
    q = stats.t.ppf(0.95, n - 2)
    assert (err <= q * plug_in).mean() < (err <= q * est.se).mean() - 0.015
    assert np.mean(plug_in) < 0.92 * np.mean(est.se)

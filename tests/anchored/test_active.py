"""Labelling probabilities: the budget is spent, each probability is capped at 1, larger residuals draw more."""

from __future__ import annotations

import numpy as np
import pytest

from rcp_jax import DataError
from rcp_jax.anchored.active import (inclusion_probabilities, pooled_scale, predicted_residual_scale,
                                     uncertainty_scale)


def test_probabilities_sum_to_the_budget_capped_at_one():
    score = np.array([100.0, 1, 1, 1, 1, 1, 0, 0])
    eligible = np.array([True] * 7 + [False])
    pi = inclusion_probabilities(score, 3, eligible, uniform_share=0.2)
    assert pi.sum() == pytest.approx(3) and pi.max() <= 1 and pi[0] == 1 and pi[-1] == 0
    assert (pi[1:6] > pi[6]).all()


def test_budget_at_least_the_eligible_count_labels_them_all():
    pi = inclusion_probabilities(np.ones(5), 9, np.ones(5, bool))
    assert (pi == 1).all()
    with pytest.raises(DataError, match="budget"):
        inclusion_probabilities(np.ones(5), 0, np.ones(5, bool))


def test_residual_scale_follows_the_judge_sd():
    rng = np.random.default_rng(0)
    n = 400
    sd = np.exp(rng.normal(0, 0.8, n))
    f = rng.normal(size=n)
    y = 0.5 * f + sd * rng.normal(size=n) * 0.3
    y[200:] = np.nan
    scale = predicted_residual_scale(y, f, sd)
    assert np.corrcoef(scale, sd)[0, 1] > 0.9 and (scale > 0).all()
    pooled = pooled_scale(np.stack([scale, 2 * scale]), np.array([1.0, 4.0]))
    assert pooled == pytest.approx(np.sqrt(2) * scale)


def test_a_flat_uncertainty_gives_uniform_probabilities_so_active_is_random():
    score = uncertainty_scale(np.full((6, 50), 0.03))
    pi = inclusion_probabilities(score, 10, np.ones(50, bool))
    assert pi == pytest.approx(np.full(50, 0.2))


def test_uncertainty_scale_adds_the_mean_variance_and_pools_the_undecided_pairs():
    sd = np.array([[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]])
    # mean over pairs of sd^2 per query: [2, 2.5, 4]; its mean over queries 17/6
    assert uncertainty_scale(sd) == pytest.approx(np.sqrt(np.array([2.0, 2.5, 4.0]) + 17 / 6))
    only_first = uncertainty_scale(sd, np.array([True, False]))
    assert only_first == pytest.approx(np.sqrt(np.array([0.0, 1.0, 4.0]) + 5 / 3))
    with pytest.raises(DataError, match="sd"):
        uncertainty_scale(np.array([[-1.0, 1.0]]))

"""Labelling probabilities: the budget is spent, each probability is capped at 1, larger residuals draw more."""

from __future__ import annotations

import numpy as np
import pytest

from rcp_jax import DataError
from rcp_jax.anchored.active import (draw_fixed_size, inclusion_probabilities, judge_signal_scale, outlyingness,
                                     pooled_scale, predicted_residual_scale, uncertainty_scale)


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


def test_outlyingness_is_the_distance_from_the_median_in_normal_mad_units():
    f = np.array([[0.0, 1.0, 2.0, 3.0, 10.0]])
    # median 2, absolute deviations [2, 1, 0, 1, 8]: MAD 1, in normal units 1.4826
    assert outlyingness(f) == pytest.approx(np.abs(f - 2.0) / 1.4826)
    assert (outlyingness(np.zeros((1, 5))) == 0).all()
    with pytest.raises(DataError, match="finite"):
        outlyingness(np.array([[0.0, np.nan]]))


def test_judge_signal_scale_adds_the_normalised_signals_to_their_count():
    f = np.array([[0.0, 1.0, 2.0, 3.0, 10.0]])
    dev2 = (np.abs(f[0] - 2.0) / 1.4826) ** 2
    assert judge_signal_scale(f) == pytest.approx(np.sqrt(1 + dev2 / dev2.mean()))
    sd = np.array([[1.0, 1.0, 2.0, 1.0, 1.0]])
    s2 = sd[0] ** 2
    assert judge_signal_scale(f, sd) == pytest.approx(np.sqrt(2 + dev2 / dev2.mean() + s2 / s2.mean()))
    # flat signals: a flat score, so the probabilities are uniform (active selection is random selection)
    flat = judge_signal_scale(np.zeros((3, 40)), np.full((3, 40), 0.1))
    assert inclusion_probabilities(flat, 8, np.ones(40, bool)) == pytest.approx(np.full(40, 0.2))


def test_fixed_size_draw_has_exactly_the_budget_and_the_given_inclusion_probabilities():
    rng = np.random.default_rng(0)
    pi = inclusion_probabilities(np.r_[40.0, rng.gamma(0.5, size=29)], 6, np.ones(30, bool), uniform_share=0.1)
    assert pi.max() == 1.0 and pi.sum() == pytest.approx(6)
    draws = draw_fixed_size(np.random.default_rng(1), np.broadcast_to(pi, (40_000, 30)))
    assert (draws.sum(-1) == 6).all()
    # each query's frequency within 4.5 binomial SE of its probability
    se = np.sqrt(pi * (1 - pi) / 40_000) + 1e-12
    assert (np.abs(draws.mean(0) - pi) <= 4.5 * se).all()
    assert draws[:, pi == 1].all() and not draws[:, pi == 0].any()
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        draw_fixed_size(rng, np.array([0.5, 1.5]))

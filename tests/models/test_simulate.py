"""The simulator produces what its docstring promises: query-specific BT scales and 2PL answers."""

from __future__ import annotations

import numpy as np

from rcp_jax.models.bradley_terry import fit_windows
from rcp_jax.models.simulate import balanced_windows, rubric_answers, simulate_judgements, simulate_truth, true_gain


def test_bt_scale_follows_judge_decisiveness():
    sim = simulate_judgements(21, [80] * 8, tournament_placements=16, decisiveness_range=(0.4, 1.6))
    fit = fit_windows(sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs)
    slopes = [np.polyfit(sim.truth.relevance[j], fit.theta[j, :80], 1)[0] for j in range(8)]
    assert np.corrcoef(slopes, sim.truth.decisiveness)[0, 1] > 0.8
    assert max(slopes) / min(slopes) > 1.8  # raw BT scales differ by query


def test_rubric_answers_follow_the_2pl():
    rng = np.random.default_rng(0)
    truth = simulate_truth(rng, [4000])
    docs = np.arange(4000)
    ans = rubric_answers(rng, truth, 0, docs)
    r = truth.relevance[0]
    p = 1 / (1 + np.exp(-truth.gamma * (r[:, None] - truth.beta)))
    np.testing.assert_allclose(ans.mean(axis=0), p.mean(axis=0), atol=0.02)
    assert np.all(np.diff(ans.mean(axis=0)) < 0)  # increasingly hard criteria


def test_balanced_windows_cover_every_document_evenly():
    rng = np.random.default_rng(1)
    wins = balanced_windows(rng, 37, 10, 14)
    counts = np.bincount(np.concatenate(wins), minlength=37)
    assert counts.min() >= 13 and counts.max() - counts.min() <= 1
    assert all(len(set(w)) == len(w) for w in wins)


def test_true_gain_is_bounded_and_increasing():
    g = true_gain(np.linspace(-10, 10, 50), np.array([1.0, 1.0]), np.array([-1.0, 1.0]))
    assert np.all(np.diff(g) > 0) and 0 < g.min() and g.max() < 1


def test_same_seed_same_data():
    a = simulate_judgements(3, [20, 30])
    b = simulate_judgements(3, [20, 30])
    np.testing.assert_array_equal(a.window_scores, b.window_scores)
    np.testing.assert_array_equal(a.rubric_answers, b.rubric_answers)


def test_scores_stay_on_the_judge_scale_and_a_wider_scale_clips_less():
    """Default scale -5..+5 (METHOD's); ``clip`` widens it, and the scores below the bound do not change."""
    sim5 = simulate_judgements(3, [60] * 4)
    wide = simulate_judgements(3, [60] * 4, clip=50.0)
    real = sim5.window_docs >= 0
    s5, sw = sim5.window_scores[real], wide.window_scores[real]
    assert sim5.truth.clip == 5.0 and np.abs(s5).max() == 5.0
    assert np.mean(np.abs(s5) == 5.0) > 0.01  # this judge's spread reaches the bound
    assert np.abs(sw).max() > 5.0
    inside = np.abs(sw) < 5.0
    np.testing.assert_array_equal(s5[inside], sw[inside])

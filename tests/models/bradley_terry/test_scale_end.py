"""Pairs tied at the end of the judge's scale (``pair_statistics(..., scale_end=...)``)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pandas as pd

from rcp_jax.bayes.posterior import prepare_inputs
from rcp_jax.models.bradley_terry import pair_statistics


def _wins(scores, scale_end):
    docs = jnp.asarray([[0, 1, 2, 3], [0, 1, 2, -1]])
    return np.asarray(pair_statistics(docs, jnp.asarray(scores, jnp.float32), jnp.asarray([0, 0]), n_queries=1,
                                      n_docs=4, scale_end=scale_end))[0]


def test_only_pairs_tied_at_either_end_drop_out():
    scores = [[5.0, 5.0, 0.0, 0.0], [-5.0, -5.0, 2.0, 0.0]]
    kept, censored = _wins(scores, None), _wins(scores, 5.0)
    # window 1 ties (0, 1) at +5 (weight 2/4), window 2 ties them at -5 (weight 2/3): both halves of each go
    np.testing.assert_allclose(kept[0, 1] - censored[0, 1], 0.5 * (2 / 4 + 2 / 3), rtol=1e-6)
    np.testing.assert_allclose(kept[1, 0] - censored[1, 0], 0.5 * (2 / 4 + 2 / 3), rtol=1e-6)
    assert censored[0, 1] == censored[1, 0] == 0.0
    # the tie at 0 (documents 2 and 3) and every untied pair are kept as they were
    other = np.ones((4, 4), bool)
    other[0, 1] = other[1, 0] = False
    np.testing.assert_array_equal(kept[other], censored[other])
    assert censored[2, 3] > 0


def test_the_joint_models_statistic_censors_and_stage_a_does_not():
    windows = pd.DataFrame({
        "query_id": "q", "window_id": np.repeat(["w1", "w2", "w3"], 3),
        "doc_id": ["a", "b", "c", "a", "b", "c", "a", "b", "c"],
        "score": [5.0, 5.0, 1.0, 5.0, 5.0, -2.0, 4.0, 5.0, 0.0],
    })
    answers = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b", "c"], "C1": [1, 1, 0], "C2": [1, 1, 0]})
    censored = prepare_inputs(windows, answers, joint=True)
    kept = prepare_inputs(windows, answers, joint=True, scale_end=None)
    a, b = (list(censored.doc_ids[0]).index(d) for d in ("a", "b"))
    # a and b tie at +5 in two windows: only the third (4 vs 5) compares them
    np.testing.assert_allclose(censored.wins[0, a, b] + censored.wins[0, b, a], 2 / 3, rtol=1e-6)
    np.testing.assert_allclose(kept.wins[0, a, b] + kept.wins[0, b, a], 3 * 2 / 3, rtol=1e-6)
    # Stage A's BT scores (METHOD's statistic) are the same either way
    np.testing.assert_array_equal(censored.theta, kept.theta)
    assert censored.scale_end == 5.0 and kept.scale_end is None


def test_a_judge_on_a_wider_scale_has_no_end_to_censor():
    """Scores on 0..10: ties at 5 are mid-scale, so nothing is left out (and the inputs say so)."""
    windows = pd.DataFrame({
        "query_id": "q", "window_id": np.repeat(["w1", "w2"], 3),
        "doc_id": ["a", "b", "c", "a", "b", "c"], "score": [5.0, 5.0, 9.0, 5.0, 5.0, 1.0],
    })
    answers = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b", "c"], "C1": [1, 1, 0], "C2": [1, 0, 0]})
    wide = prepare_inputs(windows, answers, joint=True)
    kept = prepare_inputs(windows, answers, joint=True, scale_end=None)
    assert wide.scale_end is None
    np.testing.assert_array_equal(wide.wins, kept.wins)
    on_scale = prepare_inputs(windows.assign(score=windows["score"].clip(-5, 5)), answers, joint=True)
    assert on_scale.scale_end == 5.0

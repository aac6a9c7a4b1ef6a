"""Any number of criteria: the calibration recovers known item parameters of a K = 3 and a
K = 7 rubric on the simulator, and the Bayesian models take any K.

The Bayesian recovery at K = 3 and 7 (NUTS, 20 queries x 40 documents) is in ``benchmarks/rubric_k.py``: its
XLA compilation alone is over this file's CPU budget.
"""

from __future__ import annotations

import jax
import numpy as np
import pandas as pd
import pytest
from numpyro import handlers
from numpyro.infer.util import log_density

import rcp_jax
from benchmarks.fixtures.simulated_collections import answer_table, exact_bt_scores, known_items
from rcp_jax.models import bayes, irt
from rcp_jax.models.simulate import simulate_judgements

@pytest.mark.parametrize("k", [3, 7])
def test_the_calibration_recovers_known_items_of_any_k(k):
    gamma, beta = known_items(k)
    sim = simulate_judgements(1, [30] * 16, gamma=gamma, beta=beta, rubric_placements=7.0)
    bt, answers = exact_bt_scores(sim), answer_table(sim)
    cal = rcp_jax.calibrate(bt, answers)
    assert cal.criteria == [f"C{i + 1}" for i in range(k)] and cal.gamma.shape == (k,)
    assert abs(cal.gamma.sum() - k) < 1e-6 and abs(cal.beta.mean()) < 1e-6
    # measured 0.075 / 0.054 (K = 3) and 0.062 / 0.083 (K = 7) with this seed
    assert np.abs(cal.gamma - gamma).max() < 0.15
    assert np.abs(cal.beta - beta).max() < 0.25
    gains = cal.gains().set_index(["query_id", "doc_id"])["gain"]
    true = pd.concat([pd.Series(sim.truth.gains(j), index=pd.MultiIndex.from_tuples(
        [(f"q{j}", f"q{j}-d{i}") for i in range(len(sim.truth.relevance[j]))])) for j in range(16)])
    assert (gains - true.reindex(gains.index)).abs().mean() < 0.05


def test_the_bayesian_models_take_any_k():
    """Prior predictive shapes and the items' constraints at K = 7, and the posterior density of the frozen
    model higher at the true items than at the same items in reverse order (no sampling; one jit each)."""
    k = 7
    gamma, beta = known_items(k)
    sim = simulate_judgements(2, [12] * 4, gamma=gamma, beta=beta, rubric_placements=7.0)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, 4, 12)
    t = sim.truth
    theta = np.array([d * (r - r.mean()) for r, d in zip(t.relevance, t.decisiveness)])

    @jax.jit
    def prior(key):
        trace = handlers.trace(handlers.seed(bayes.calibration_model, key)).get_trace(theta, None, trials)
        return {name: trace[name]["value"] for name in ("gamma", "beta", "y")}

    draw = prior(jax.random.PRNGKey(0))
    assert draw["gamma"].shape == (k,) and draw["y"].shape == (4, 12, k)
    assert abs(float(draw["gamma"].sum()) - k) < 1e-4 and abs(float(draw["beta"].mean())) < 1e-5
    h = bayes.helmert_matrix(k)

    @jax.jit
    def density(u, v):
        params = {"u": u, "v": v, "tau": 1 / t.decisiveness, "alpha": np.array([r.mean() for r in t.relevance])}
        return log_density(bayes.calibration_model, (theta, passes, trials), {}, params)[0]

    def contrasts(g, b):  # u, v with gamma = K softmax(H u), beta = H v
        return (np.linalg.lstsq(h, np.log(g) - np.log(g).mean(), rcond=None)[0],
                np.linalg.lstsq(h, b, rcond=None)[0])

    assert float(density(*contrasts(gamma, beta))) > float(density(*contrasts(gamma[::-1], beta[::-1]))) + 50

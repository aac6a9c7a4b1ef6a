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
from rcp_jax.models import bayes, irt
from rcp_jax.models.simulate import simulate_judgements

ITEMS = {
    3: ([1.3, 1.0, 0.7], [-2.0, 0.3, 1.7]),
    7: ([1.2, 0.9, 1.1, 1.0, 0.8, 1.1, 0.9], [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]),
}


def truth(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Items on RCP's axis: sum(gamma) = K, mean(beta) = 0."""
    gamma, beta = (np.asarray(v, dtype=np.float64) for v in ITEMS[k])
    return gamma * k / gamma.sum(), beta - beta.mean()


def tables(sim) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(exact BT scores ``query_id, doc_id, theta``, answers ``query_id, doc_id, C1..CK``)."""
    t = sim.truth
    bt = pd.concat([pd.DataFrame({"query_id": f"q{j}", "doc_id": [f"q{j}-d{i}" for i in range(len(r))],
                                  "theta": d * (r - r.mean())})
                    for j, (r, d) in enumerate(zip(t.relevance, t.decisiveness))], ignore_index=True)
    k = sim.rubric_answers.shape[1]
    answers = pd.DataFrame(sim.rubric_answers, columns=[f"C{i + 1}" for i in range(k)])
    answers.insert(0, "doc_id", [f"q{q}-d{d}" for q, d in zip(sim.rubric_query, sim.rubric_doc)])
    answers.insert(0, "query_id", [f"q{q}" for q in sim.rubric_query])
    return bt, answers


@pytest.mark.parametrize("k", [3, 7])
def test_the_calibration_recovers_known_items_of_any_k(k):
    gamma, beta = truth(k)
    sim = simulate_judgements(1, [30] * 16, gamma=gamma, beta=beta, rubric_placements=7.0)
    bt, answers = tables(sim)
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
    gamma, beta = truth(k)
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

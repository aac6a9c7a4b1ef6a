"""The item parameters' convention and prior: a simulator's truth is compared on the models' axis
(``benchmarks.coverage.items_on_model_convention``), and the posterior's fixed item prior does not shrink the
items as the MAP's ridge prior does (``rcp_jax.models.bayes``, "Item prior")."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from benchmarks.coverage import items_on_model_convention
from rcp_jax.models import bayes, inference, irt, simulate


def _p_yes(gamma, beta, ability):
    return 1.0 / (1.0 + np.exp(-gamma * (ability[:, None] - beta)))


def test_items_on_model_convention_undoes_a_known_affine_map_of_the_latent_scale():
    gamma, beta = simulate.NANOBEIR_GAMMA, simulate.NANOBEIR_BETA  # sum 5, mean 0: the models' convention
    a, b = 1.7, -0.4  # the simulator's axis r maps to the models' t = a r + b
    g_sim, b_sim = gamma * a, (beta - b) / a
    r = np.linspace(-6.0, 6.0, 25)
    np.testing.assert_allclose(_p_yes(g_sim, b_sim, r), _p_yes(gamma, beta, a * r + b), rtol=1e-12)

    g_model, b_model, a_hat, b_hat = items_on_model_convention(g_sim, b_sim)
    np.testing.assert_allclose(g_model, gamma, rtol=1e-12)
    np.testing.assert_allclose(b_model, beta, atol=1e-12)
    assert a_hat == pytest.approx(a) and b_hat == pytest.approx(b)
    assert g_model.sum() == pytest.approx(5.0) and b_model.mean() == pytest.approx(0.0, abs=1e-12)


def test_items_on_model_convention_is_the_identity_on_the_published_items():
    g, b, a, shift = items_on_model_convention(simulate.NANOBEIR_GAMMA, simulate.NANOBEIR_BETA)
    np.testing.assert_allclose(g, simulate.NANOBEIR_GAMMA, atol=1e-12)
    np.testing.assert_allclose(b, simulate.NANOBEIR_BETA, atol=1e-12)
    assert a == pytest.approx(1.0) and shift == pytest.approx(0.0, abs=1e-12)


def test_items_on_model_convention_refuses_non_positive_discriminations():
    with pytest.raises(ValueError, match="positive"):
        items_on_model_convention(np.array([1.0, -1.0]), np.zeros(2))


@pytest.fixture(scope="module")
def expected_answers():
    """Exact covariates and answer counts at their expectations (passes = round(trials x P(yes)), 1,000 trials a
    cell: rounding moves the MLE off the truth by ~0.002)."""
    rng = np.random.default_rng(3)
    q, n, c = 8, 60, 5
    tau, alpha = np.exp(rng.uniform(-0.5, 0.5, q)), rng.normal(0.0, 1.0, q)
    ability = alpha[:, None] + rng.normal(0.0, 2.0, (q, n))
    theta = (ability - alpha[:, None]) / tau[:, None]
    trials = np.full((q, n, c), 1000.0)  # NC = 2.4 million answers: the ridge prior's SD is 0.065
    passes = np.round(trials * _p_yes(simulate.NANOBEIR_GAMMA, simulate.NANOBEIR_BETA, ability.ravel()).reshape(q, n, c))
    return theta, passes, trials


def test_the_fixed_item_prior_leaves_the_items_where_the_data_put_them(expected_answers):
    theta, passes, trials = expected_answers
    # the MAP's ridge prior: beta_5 = 4.116 shrunk ~2.5% towards 0, however many answers there are
    ridge = irt.fit_2pl_calibration(irt.calibration_cells(theta, passes, trials), dtype=jnp.float64)
    assert ridge.beta[-1] - simulate.NANOBEIR_BETA[-1] < -0.05
    kwargs = dict(theta=jnp.asarray(theta, jnp.float32), passes=jnp.asarray(passes, jnp.float32),
                  trials=jnp.asarray(trials, jnp.float32),
                  item_sd=bayes.DEFAULT_ITEM_SD)
    init = {k: jnp.asarray(v, jnp.float32) for k, v in
            {"u": np.zeros(4), "v": np.zeros(4), "tau": np.ones(len(theta)), "alpha": np.zeros(len(theta))}.items()}
    mode, _ = inference.find_map(bayes.calibration_model, kwargs, init_values=init)
    np.testing.assert_allclose(mode["beta"], simulate.NANOBEIR_BETA, atol=0.01)
    np.testing.assert_allclose(mode["gamma"], simulate.NANOBEIR_GAMMA, atol=0.005)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_fit_posterior_refuses_a_non_positive_item_sd(bad):
    from rcp_jax import fit_posterior
    from rcp_jax.errors import DataError

    answers = pd.DataFrame({"query_id": ["q0"], "doc_id": ["d0"], "C1": [1]})
    with pytest.raises(DataError, match="item_sd must be a positive prior SD"):
        fit_posterior(None, answers, item_sd=bad)

"""The NumPyro models: parameterisation, priors equal to the MAP penalties, MAP = foundation MAP."""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpyro.infer.util import log_density

from rcp_jax.models import bayes, bradley_terry, inference, irt, simulate
from rcp_jax.metrics import gain as reference_gain


#: Padded width of the Helmert round trip: pools of 2..9 documents always leave padding (as a batch padded to
#: max(n) + 1 did), and one width means one compiled program per query count (1..4), not one per example.
HELMERT_WIDTH = 10
_centred = jax.jit(bayes.centred_from_contrasts)
_contrasts = jax.jit(bayes.contrasts_from_centred)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(2, 9), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_helmert_maps_contrasts_to_centred_scores_and_back(n_docs, seed):
    n_max = HELMERT_WIDTH
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(len(n_docs), n_max - 1))
    nd = np.array(n_docs)
    with jax.enable_x64(True):
        theta = np.asarray(_centred(jnp.asarray(z), jnp.asarray(nd)))
        back = np.asarray(_contrasts(jnp.asarray(theta), jnp.asarray(nd)))
    for q, n in enumerate(n_docs):
        h = bayes.helmert_matrix(n)
        np.testing.assert_allclose(theta[q, :n], h @ z[q, : n - 1], atol=1e-12)
        np.testing.assert_allclose(theta[q, n:], 0.0)
        np.testing.assert_allclose(back[q, : n - 1], z[q, : n - 1], atol=1e-12)
        np.testing.assert_allclose(back[q, n - 1 :], 0.0)


def test_helmert_basis_is_orthonormal_and_sums_to_zero():
    h = bayes.helmert_matrix(7)
    np.testing.assert_allclose(h.T @ h, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(h.sum(axis=0), 0.0, atol=1e-12)


def test_rcp_gain_matches_the_metric_core():
    rng = np.random.default_rng(0)
    ability = rng.normal(0, 3, (3, 4, 7))
    gamma = rng.uniform(0.3, 2.0, (3, 5))
    beta = rng.normal(0, 2, (3, 5))
    with jax.enable_x64(True):
        got = np.asarray(jax.jit(bayes.rcp_gain)(jnp.asarray(ability), jnp.asarray(gamma), jnp.asarray(beta)))
    for d in range(3):
        np.testing.assert_allclose(got[d], reference_gain(ability[d], gamma[d], beta[d]), atol=1e-12)


#: Pool sizes of the one small collection the MAP-identity tests share (ragged: padding is exercised; one
#: collection means one compiled BT and one 2PL program for all of them).
SMALL_POOLS = (30, 22, 30, 17, 30, 26, 30, 30)


@pytest.fixture(scope="module")
def small_calibration():
    """(simulation, float64 BT fit, passes, trials) of 8 queries with pools of 17..30 documents."""
    sim = simulate.simulate_judgements(0, list(SMALL_POOLS))
    fit = bradley_terry.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs,
                                    dtype=jnp.float64)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, len(SMALL_POOLS),
                                             max(SMALL_POOLS))
    return sim, fit, passes, trials


@pytest.fixture(scope="module")
def small_map(small_calibration):
    """The foundation's float64 2PL MAP of ``small_calibration``."""
    _, fit, passes, trials = small_calibration
    return irt.fit_2pl_calibration(irt.calibration_cells(fit.theta, passes, trials), dtype=jnp.float64)


def test_log_posterior_is_nc_times_the_map_objective(small_calibration):
    """-log p(u, v, tau, alpha | y) = NC x (mean-scaled MAP objective) + constant, at any point."""
    _, fit, passes, trials = small_calibration
    cells = irt.calibration_cells(fit.theta, passes, trials)
    nc = trials.sum()
    rng = np.random.default_rng(1)
    h = bayes.helmert_matrix(5)
    gaps = []
    # one compiled program each (evaluated op by op, every op would compile on its own)
    log_post = jax.jit(lambda kw, point: log_density(bayes.calibration_model, (), kw, point)[0])
    objective = jax.jit(irt.calibration_objective)
    with jax.enable_x64(True):
        kw = dict(theta=jnp.asarray(fit.theta), passes=jnp.asarray(passes), trials=jnp.asarray(trials))
        for _ in range(3):
            uc, vc = rng.normal(0, 0.3, 4), rng.normal(0, 2, 4)
            tau, alpha = rng.uniform(0.3, 2.5, 8), rng.normal(0, 1, 8)
            lp = log_post(kw, {"u": uc, "v": vc, "tau": tau, "alpha": alpha})
            obj = objective(
                jnp.asarray(h @ uc), jnp.asarray(h @ vc), jnp.asarray(np.log(np.expm1(tau))), jnp.asarray(alpha),
                jnp.asarray(cells.theta), jnp.asarray(cells.criterion), jnp.asarray(cells.passes),
                jnp.asarray(cells.trials),
            )
            gaps.append(float(-lp - nc * obj))
    assert np.ptp(gaps) < 1e-6 * abs(gaps[0]) + 1e-6


def test_foundation_map_is_a_stationary_point_of_the_log_posterior(small_calibration, small_map):
    _, fit, passes, trials = small_calibration
    cal = small_map
    uc, vc = bayes.item_contrasts(cal.u, cal.v)
    with jax.enable_x64(True):
        kw = dict(theta=jnp.asarray(fit.theta), passes=jnp.asarray(passes), trials=jnp.asarray(trials))
        point = {"u": jnp.asarray(uc), "v": jnp.asarray(vc), "tau": jnp.asarray(cal.tau), "alpha": jnp.asarray(cal.alpha)}
        grad = jax.jit(jax.grad(lambda p, kw: log_density(bayes.calibration_model, (), kw, p)[0]))(point, kw)
    for name, g in grad.items():
        assert np.abs(np.asarray(g)).max() < 1e-5, name


def test_find_map_of_the_numpyro_model_equals_the_foundation_map(small_calibration, small_map):
    _, fit, passes, trials = small_calibration
    cal = small_map
    kw = dict(theta=jnp.asarray(fit.theta, jnp.float32), passes=jnp.asarray(passes, jnp.float32),
              trials=jnp.asarray(trials, jnp.float32))
    values, info = inference.find_map(bayes.calibration_model, kw, seed=0)  # starts from random points
    for name in ("gamma", "beta", "tau", "alpha"):
        np.testing.assert_allclose(values[name], getattr(cal, name), atol=1e-3, err_msg=name)
    assert info["iterations"] > 0


def test_bt_model_mode_is_the_bt_map(small_calibration):
    sim, fit, _, _ = small_calibration  # ragged pools of 17..30 documents
    nd = sim.truth.n_docs
    q, n = len(nd), int(nd.max())
    with jax.enable_x64(True):
        wins = bradley_terry.pair_statistics(jnp.asarray(sim.window_docs), jnp.asarray(sim.window_scores),
                                             jnp.asarray(sim.window_query), n_queries=q, n_docs=n)
        z = bayes.contrasts_from_centred(jnp.asarray(fit.theta), jnp.asarray(nd))
        kw = dict(wins=wins, n_docs=jnp.asarray(nd))
        grad = jax.jit(jax.grad(lambda p, kw: log_density(bayes.bradley_terry_model, (), kw, p)[0]))({"z": z}, kw)["z"]
    active = np.arange(1, n)[None, :] < nd[:, None]
    assert np.abs(np.asarray(grad)[active]).max() < 1e-6


@pytest.mark.parametrize("model", ["calibration", "joint", "rubric_only"])
def test_models_have_the_documented_sites_and_plates(model):
    from numpyro import handlers

    q, n, c = 3, 6, 5
    trials = jnp.ones((q, n, c))
    passes = jnp.zeros((q, n, c))
    fn = {"calibration": lambda: bayes.calibration_model(jnp.zeros((q, n)), passes, trials),
          "joint": lambda: bayes.joint_model(jnp.ones((q, n, n)), jnp.array([6, 5, 4]), passes, trials),
          "rubric_only": lambda: bayes.rubric_only_model(passes, trials)}[model]
    meta = {}

    def sample():  # one compiled program (traced op by op, every op of the model would compile on its own)
        tr = handlers.trace(handlers.seed(fn, 0)).get_trace()
        meta["plates"] = {k for k, s in tr.items() if s["type"] == "plate"}
        meta["y_observed"] = tr["y"]["is_observed"]
        return {k: tr[k]["value"] for k in ("y", "gamma", "beta")}

    values = jax.jit(sample)()
    assert {"criterion", "query", "doc"} <= meta["plates"]
    assert meta["y_observed"] and values["y"].shape == (q, n, c)
    assert values["gamma"].shape == (c,)
    np.testing.assert_allclose(float(values["gamma"].sum()), c, rtol=1e-5)
    np.testing.assert_allclose(float(values["beta"].mean()), 0.0, atol=1e-5)


@pytest.fixture(scope="module")
def fresh_import():
    """(modules other than the models' that a fresh ``import rcp_jax.models.bayes, rcp_jax.models.inference`` loaded, its
    ``jax_enable_x64`` afterwards): one fresh interpreter for both checks."""
    code = ("import sys, rcp_jax.models.bayes, rcp_jax.models.inference, jax; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'arviz', 'xarray') "
            "or (m.startswith('rcp_jax.') and not m.startswith('rcp_jax.models')))); "
            "print(jax.config.jax_enable_x64)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()


def test_models_package_stays_free_of_pandas(fresh_import):
    assert fresh_import[0] == "[]"


def test_importing_models_does_not_switch_on_x64(fresh_import):
    assert fresh_import[1] == "False"


def test_ability_coordinates_of_the_joint_model_are_the_same_model():
    """log p(tau, w) = log p(tau, z = w / tau) - sum_q (n_q - 1) log tau_q: only the coordinates change."""
    rng = np.random.default_rng(4)
    q, n, c = 3, 6, 5
    n_docs = jnp.array([6, 5, 3])
    wins = jnp.asarray(rng.uniform(0, 2, (q, n, n)) * (np.arange(n)[None, :, None] < np.array([6, 5, 3])[:, None, None])
                       * (np.arange(n)[None, None, :] < np.array([6, 5, 3])[:, None, None]), jnp.float32)
    trials = jnp.full((q, n, c), 2.0)
    passes = jnp.asarray(rng.integers(0, 3, (q, n, c)), jnp.float32)
    base = dict(wins=wins, n_docs=n_docs, passes=passes, trials=trials)
    tau = jnp.array([0.7, 1.3, 2.1])
    z = jnp.asarray(rng.normal(size=(q, n - 1)), jnp.float32)
    common = {"tau": tau, "alpha": jnp.array([0.3, -1.0, 0.5]), "u": jnp.asarray(rng.normal(size=c - 1) * 0.3),
              "v": jnp.asarray(rng.normal(size=c - 1))}
    active = np.arange(1, n)[None, :] < np.asarray(n_docs)[:, None]
    w = jnp.where(active, tau[:, None] * z, z)
    # each log density as one compiled program (op by op, every op would compile on its own)
    lp_theta = jax.jit(lambda b, p: log_density(bayes.joint_model, (), {**b, "param": "theta"}, p)[0])(base, {**common, "z": z})
    lp_ability, z_recorded = jax.jit(lambda b, p: (lambda lp, tr: (lp, tr["z"]["value"]))(
        *log_density(bayes.joint_model, (), {**b, "param": "ability"}, p)))(base, {**common, "w": w})
    jacobian = float(np.sum((np.asarray(n_docs) - 1) * np.log(np.asarray(tau))))
    np.testing.assert_allclose(float(lp_ability), float(lp_theta) - jacobian, rtol=1e-5)
    np.testing.assert_allclose(z_recorded, z, rtol=1e-5)  # z is recorded for the posterior tables
    with pytest.raises(ValueError, match="param must be"):
        log_density(bayes.joint_model, (), {**base, "param": "log"}, {**common, "z": z})

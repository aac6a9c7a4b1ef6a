"""2PL calibration, Rasch and rubric-only fits: scipy agreement, recovery of known truth, errors."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

import rcp_jax
from rcp_jax.models import irt
from rcp_jax.models.bradley_terry import fit_windows
from rcp_jax.models.simulate import simulate_judgements

CRIT = [f"C{i}" for i in range(1, 6)]


def scipy_2pl(query, theta, answers, n_queries, ridge=1e-4):
    """Reference: the METHOD section 3 MAP objective over individual answers, analytic gradient, L-BFGS."""
    n_rows, c = answers.shape
    total = n_rows * c
    qq = np.repeat(query, c)
    th = np.repeat(theta, c)
    cc = np.tile(np.arange(c), n_rows)
    y = answers.reshape(-1).astype(float)

    def unpack(x):
        return x[:c], x[c : 2 * c], x[2 * c : 2 * c + n_queries], x[2 * c + n_queries :]

    def f(x):
        u, v, t, a = unpack(x)
        gamma = c * np.exp(u - u.max()) / np.exp(u - u.max()).sum()
        beta = v - v.mean()
        tau = np.logaddexp(0, t)
        lin = tau[qq] * th + a[qq] - beta[cc]
        z = gamma[cc] * lin
        loss = -(y * log_expit(z) + (1 - y) * log_expit(-z)).sum() / total
        loss += ((tau - 1) ** 2 / 2 + a**2 / 8).sum() / total + 0.5 * ridge * (u @ u + v @ v)
        r = (expit(z) - y) / total
        d_gamma = np.bincount(cc, r * lin, minlength=c)
        d_beta = -np.bincount(cc, r * gamma[cc], minlength=c)
        d_tau = np.bincount(qq, r * gamma[cc] * th, minlength=n_queries) + (tau - 1) / total
        d_a = np.bincount(qq, r * gamma[cc], minlength=n_queries) + a / (4 * total)
        d_u = gamma * (d_gamma - (gamma * d_gamma).sum() / c) + ridge * u
        d_v = d_beta - d_beta.mean() + ridge * v
        d_t = d_tau * expit(t)
        return loss, np.concatenate([d_u, d_v, d_t, d_a])

    x0 = np.concatenate([np.zeros(2 * c), np.full(n_queries, np.log(np.e - 1)), np.zeros(n_queries)])
    res = minimize(f, x0, jac=True, method="L-BFGS-B", options={"maxiter": 50000, "ftol": 1e-16, "gtol": 1e-11, "maxcor": 50})
    u, v, t, a = unpack(res.x)
    return c * np.exp(u) / np.exp(u).sum(), v - v.mean(), np.logaddexp(0, t), a


def _frozen_setup(seed, n_queries=40, n_docs=60, placements=7.0):
    sim = simulate_judgements(seed, [n_docs] * n_queries, rubric_placements=placements)
    t = sim.truth
    exact = np.array([t.decisiveness[j] * (t.relevance[j] - t.relevance[j].mean()) for j in range(n_queries)])
    return sim, exact


def test_2pl_map_agrees_with_scipy():
    sim, _ = _frozen_setup(2, n_queries=6, n_docs=25)
    bt = fit_windows(sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, 6, 25)
    ours = irt.fit_2pl_calibration(irt.calibration_cells(bt.theta, passes, trials))
    ours64 = irt.fit_2pl_calibration(irt.calibration_cells(bt.theta, passes, trials), dtype=jnp.float64)
    gamma, beta, tau, alpha = scipy_2pl(sim.rubric_query, bt.theta[sim.rubric_query, sim.rubric_doc], sim.rubric_answers, 6)
    assert ours.converged and ours64.converged
    for fit, tol in ((ours, 2e-3), (ours64, 1e-5)):
        np.testing.assert_allclose(fit.gamma, gamma, atol=tol)
        np.testing.assert_allclose(fit.beta, beta, atol=tol)
        np.testing.assert_allclose(fit.tau, tau, atol=tol)
        np.testing.assert_allclose(fit.alpha, alpha, atol=tol)
        ours_gain = rcp_jax.gain(fit.tau[:, None] * bt.theta + fit.alpha[:, None], fit.gamma, fit.beta)
        ref_gain = rcp_jax.gain(tau[:, None] * bt.theta + alpha[:, None], gamma, beta)
        assert np.abs(ours_gain - ref_gain).max() < 1e-3
    assert abs(ours.gamma.sum() - 5) < 1e-5 and abs(ours.beta.mean()) < 1e-6


@pytest.mark.parametrize("seed", [1, 4])
def test_2pl_recovers_known_truth_with_exact_covariates(seed):
    sim, exact = _frozen_setup(seed)
    t = sim.truth
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, 40, 60)
    assert 6.5 < trials[..., 0].mean() < 7.5
    fit = irt.fit_2pl_calibration(irt.calibration_cells(exact, passes, trials))
    assert np.abs(fit.gamma - t.gamma).max() < 0.15
    assert np.abs(fit.beta - t.beta).max() < 0.25
    # BT scale d_j: the exact calibration is tau_j = 1/d_j, alpha_j = mean relevance
    np.testing.assert_allclose(fit.tau * t.decisiveness, 1.0, atol=0.2)
    ability = fit.tau[:, None] * exact + fit.alpha[:, None]
    gains = rcp_jax.gain(ability, fit.gamma, fit.beta)
    truth = np.array([t.gains(j) for j in range(40)])
    assert np.abs(gains - truth).mean() < 0.05


def test_full_chain_recovers_gains_and_keeps_within_query_order():
    """Simulated windows -> BT -> 2PL. BT noise attenuates the hardest criterion's difficulty (errors in
    variables; see the joint Bayesian model), so beta is checked on C1..C4 here and on all five above."""
    sim, _ = _frozen_setup(3)
    t = sim.truth
    bt = fit_windows(sim.window_docs, sim.window_scores, sim.window_query, t.n_docs)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, 40, 60)
    fit = irt.fit_2pl_calibration(irt.calibration_cells(bt.theta, passes, trials))
    assert np.abs(fit.gamma - t.gamma).max() < 0.15
    assert np.abs(fit.beta[:4] - t.beta[:4]).max() < 0.25
    ability = fit.tau[:, None] * bt.theta + fit.alpha[:, None]
    gains = rcp_jax.gain(ability, fit.gamma, fit.beta)
    truth = np.array([t.gains(j) for j in range(40)])
    assert np.abs(gains - truth).mean() < 0.05
    assert np.all(fit.tau > 0)
    for j in range(40):
        assert (np.argsort(ability[j], kind="stable") == np.argsort(bt.theta[j], kind="stable")).all()
    # calibration makes queries comparable: raw BT scores are not on the truth's scale, gains are
    raw_err = np.abs(rcp_jax.gain(bt.theta, fit.gamma, fit.beta) - truth).mean()
    assert raw_err > 2 * np.abs(gains - truth).mean()


def test_rasch_recovers_criterion_ladder_and_ability_order():
    sim, _ = _frozen_setup(5, n_queries=3, n_docs=60, placements=7)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, 3, 60)
    theta, beta = irt.fit_rasch(passes, trials)
    assert theta.shape == (3, 60) and beta.shape == (3, 5)
    np.testing.assert_allclose(beta.mean(axis=1), 0, atol=1e-6)
    assert np.all(np.diff(beta, axis=1)[:, [0, 2, 3]] > 0)  # C1 < C2, C3 < C4 < C5 (C2/C3 close in truth)
    for j in range(3):
        assert np.corrcoef(theta[j], sim.truth.relevance[j])[0, 1] > 0.85


def _answers_frame(sim):
    df = pd.DataFrame(sim.rubric_answers, columns=CRIT)
    df.insert(0, "doc_id", [f"q{q}-d{d}" for q, d in zip(sim.rubric_query, sim.rubric_doc)])
    df.insert(0, "query_id", [f"q{q}" for q in sim.rubric_query])
    return df


def _bt_frame(theta, n_docs):
    return pd.DataFrame(
        [(f"q{q}", f"q{q}-d{d}", theta[q, d]) for q in range(len(n_docs)) for d in range(n_docs[q])],
        columns=["query_id", "doc_id", "theta"],
    )


def test_calibrate_dataframe_api_matches_arrays_and_flags_uncalibrated_queries():
    sim, exact = _frozen_setup(6, n_queries=5, n_docs=30)
    bt = _bt_frame(exact, sim.truth.n_docs)
    bt = pd.concat([bt, pd.DataFrame({"query_id": "lonely", "doc_id": ["x", "y"], "theta": [1.0, -1.0]})])
    with pytest.warns(UserWarning, match="lonely"):
        cal = rcp_jax.calibrate(bt, _answers_frame(sim))
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, 5, 30)
    ref = irt.fit_2pl_calibration(irt.calibration_cells(exact, passes, trials))
    np.testing.assert_allclose(cal.gamma, ref.gamma, atol=1e-4)
    q = cal.queries.set_index("query_id")
    assert not q.loc["lonely", "calibrated"] and np.isnan(q.loc["lonely", "tau"])
    assert q.loc["q0", "n_answers"] == trials[0, :, 0].sum() * 5
    docs = cal.documents.set_index(["query_id", "doc_id"])
    assert docs.loc[("lonely", "x"), "gain"] != docs.loc[("lonely", "x"), "gain"]  # NaN, never invented
    g = cal.gains()
    assert len(g) == 150 and g["gain"].between(0, 1).all()
    cg = cal.count_gains()
    row = cg[(cg.query_id == "q0") & (cg.doc_id == "q0-d0")].gain.iloc[0]
    assert row == pytest.approx(passes[0, 0].sum() / (5 * trials[0, 0, 0]))


def test_rubric_only_on_real_nanobeir_verdicts(shared_data):
    ref = json.loads((shared_data / "reference" / "rubric_verdicts_nanobeir.json").read_text())
    rows = [(key, r[0], *r[1:]) for key, q in ref["queries"].items() for w in q["windows"] for r in w]
    answers = pd.DataFrame(rows, columns=["query_id", "doc_id", *CRIT])
    assert len(answers) == 1200
    cal = rcp_jax.fit_rubric_only(answers)
    assert cal.info["converged"]
    assert cal.gamma.sum() == pytest.approx(5.0) and cal.beta.mean() == pytest.approx(0.0, abs=1e-9)
    assert np.all(cal.gamma > 0)
    docs = cal.documents
    assert len(docs) == 747
    share = docs["count_gain"].to_numpy()
    ability = docs["ability"].to_numpy()
    # abilities order documents consistently with their pass counts
    group_means = docs.groupby("count_gain")["ability"].mean()
    from scipy.stats import spearmanr

    assert spearmanr(group_means.index, group_means.to_numpy()).statistic > 0.98
    i, j = np.triu_indices(len(docs), 1)
    differ = share[i] != share[j]
    concordant = np.sign(share[i] - share[j])[differ] == np.sign(ability[i] - ability[j])[differ]
    assert concordant.mean() > 0.97
    assert (docs["ability_sd"] > 0).all()


def test_rubric_only_recovers_simulated_items():
    sim, _ = _frozen_setup(8, n_queries=30, n_docs=60, placements=7)
    cal = rcp_jax.fit_rubric_only(_answers_frame(sim))
    t = sim.truth
    # the marginal model identifies items only up to an affine map of the ability axis; compare the
    # truth's items mapped to sum(gamma) = C, mean(beta) = 0 (the truth already satisfies both)
    assert np.abs(cal.gamma - t.gamma).max() < 0.3
    assert np.corrcoef(cal.beta, t.beta)[0, 1] > 0.99


def test_rubric_only_agrees_with_girth_on_binary_answers():
    """Independent implementation: girth's 2PL marginal ML (EM, 41 points on [-4.5, 4.5]) on one 0/1
    answer per item and criterion, put on RCP's convention (sum gamma = C, mean beta = 0)."""
    import girth  # noqa: PLC0415 - a dev dependency, only this test uses it
    rng = np.random.default_rng(5)
    a_true, b_true = np.array([1.3, 1.0, 0.9, 1.2, 0.7]), np.array([-1.8, -1.2, -0.1, 0.6, 2.5])
    ability = rng.normal(size=3000)
    binary = (rng.random((3000, 5)) < expit(a_true * (ability[:, None] - b_true))).astype(float)
    ours = irt.fit_rubric_only(binary, np.ones_like(binary))
    ref = girth.twopl_mml(binary.T.astype(int))
    a, b = np.asarray(ref["Discrimination"], float), np.asarray(ref["Difficulty"], float)
    s = 5 / a.sum()
    gamma, beta = a * s, (b - b.mean()) / s
    assert ours.converged
    assert np.abs(ours.gamma - gamma).max() < 2e-3, (ours.gamma, gamma)
    assert np.abs(ours.beta - beta).max() < 2e-3, (ours.beta, beta)


@pytest.mark.parametrize(
    "mutate, error, message",
    [
        (lambda a, b: a.rename(columns={"C5": "C7"}), rcp_jax.DataError, r"unknown criteria .*C7"),
        (lambda a, b: a.assign(C3=a["C3"].astype(bool)), rcp_jax.DataError, "booleans"),
        (lambda a, b: a.assign(C2=a["C2"].where(a.index != 3, 2)), rcp_jax.DataError, r"C2 of document 'q\d+-d\d+' in query 'q\d+' is 2"),
        (lambda a, b: pd.concat([a, pd.DataFrame([["q1", "ghost", 1, 0, 0, 0, 0]], columns=a.columns)]),
         rcp_jax.CalibrationError, r"document 'ghost' of query 'q1' have no BT score"),
        (lambda a, b: a.drop(columns=["doc_id"]), rcp_jax.DataError, "doc_id"),
    ],
)
def test_bad_answers_are_refused_with_ids(mutate, error, message):
    sim, exact = _frozen_setup(9, n_queries=3, n_docs=12)
    answers = mutate(_answers_frame(sim), None)
    with pytest.raises(error, match=message):
        rcp_jax.calibrate(_bt_frame(exact, sim.truth.n_docs), answers)

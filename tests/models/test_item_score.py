"""The items' exact marginal gradient (Fisher's identity by batched HMC) against importance sampling, and the step
it takes against the exact marginal's gradient there."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rcp_jax.models import block_hmc, block_laplace, item_score

from tests.helpers.block_collections import collection

PROPOSAL_SCALE = 1.3  # importance sampling: the Laplace block's Gaussian widened, so its tails cover the target's


@pytest.fixture(scope="module")
def at_laplace_mode():
    inputs, _, x0, g0 = collection(4, 12)
    data = block_laplace.make_data(inputs.wins, inputs.n_docs, inputs.passes, inputs.trials, item_sd=3.0)
    fit = block_laplace.fit_block_laplace(data, x0, g0)
    return data, block_laplace.marginal_item_mode(fit, data, iterations=12, tol=1e-5)


def importance_expectations(fit, data, g, draws: int = 40_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per query, ``E[d/dg f_q(x, g)]`` under the exact conditional posterior by self-normalised importance sampling
    from the fit's Gaussian blocks (widened), float64[Q, G], and the effective sample sizes float[Q]."""
    n, c = data.wins.shape[1], data.trials.shape[2]
    m = fit.x.shape[1]
    gg = jnp.asarray(g, jnp.float32)
    z = np.random.default_rng(seed).standard_normal((fit.n_queries, draws, m)).astype(np.float32)
    per_query = block_laplace._per_query(data)
    means, ess = [], []
    for qi in range(fit.n_queries):
        q = {k: v[qi] for k, v in per_query.items()}
        noise = jax.vmap(lambda e: jax.scipy.linalg.solve_triangular(fit.chol_local[qi], e, trans="T", lower=True))
        x = fit.x[qi][None] + PROPOSAL_SCALE * noise(jnp.asarray(z[qi]))
        f = lambda xx: block_laplace._local_nll(jnp.concatenate([xx, gg]), q, data, n, c)  # noqa: E731
        values = np.asarray(jax.vmap(f)(x), np.float64)
        scores = np.asarray(jax.vmap(lambda xx: jax.grad(
            lambda y: block_laplace._local_nll(y, q, data, n, c))(jnp.concatenate([xx, gg]))[m:])(x), np.float64)
        log_w = -values + 0.5 * (z[qi].astype(np.float64) ** 2).sum(1)  # x - x* = scale L^-T z: q(x) ~ exp(-z^2 / 2)
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        means.append(w @ scores)
        ess.append(1.0 / (w @ w))
    return np.array(means), np.array(ess)


def test_hmc_expectations_match_importance_sampling(at_laplace_mode):
    # the batched HMC (every query's two chains at once, whitened by its block) estimates the same expectations as
    # an independent importance sampler of the same conditional posteriors
    data, fit = at_laplace_mode
    picked = np.array([0, 2, 3])
    hmc = item_score.exact_item_gradients(fit, data, picked, num_warmup=300, num_samples=1000, seed=1)
    reference, ess = importance_expectations(fit, data, fit.g)
    assert np.all(ess > 2_000), ess  # the importance sampler is itself reliable here
    assert np.all((hmc["accept"] > 0.6) & (hmc["accept"] < 0.98)), hmc["accept"]
    diff = hmc["mean"] - reference[picked]
    assert np.max(np.abs(diff) / (5 * np.sqrt(hmc["mc_var"]) + 0.05)) < 1, diff
    # and not trivially: the expectations differ from the gradient at the blocks' modes by far more than that
    _, grad, _ = block_laplace._all_blocks(fit.x, jnp.asarray(fit.g, jnp.float32), data, 4)
    at_mode = np.asarray(grad, np.float64)[picked, fit.x.shape[1]:]
    print(np.linalg.norm(reference[picked] - at_mode), np.linalg.norm(diff))
    assert np.linalg.norm(reference[picked] - at_mode) > 3 * np.linalg.norm(diff)


def _step_by_hmc_on_the_queries(fit, data):
    out = item_score.item_correction(fit, data, curvature=fit.item_curvature, num_samples=1000, seed=2)
    assert out["queries"].tolist() == [0, 1, 2, 3] and np.all(out["shift_cov"] == out["shift_cov"].T)
    return out


def _step_from_the_block_draws(fit, data):
    # every query's exact block draws (no Laplace terms: the prior's gradient instead)
    draws = block_hmc.sample_blocks(fit.x, fit.chol_local, fit.g, data, num_samples=1000, seed=4)["x"]
    out = item_score.correction_from_draws(fit, data, draws, curvature=fit.item_curvature, max_draws=1000)
    assert out["queries"].tolist() == [0, 1, 2, 3] and out["exact"]["chains"].shape[:2] == (2, 1000)
    # its covariance is the Monte Carlo error alone: small against the items' own
    cov = np.linalg.inv(fit.chol_items @ fit.chol_items.T)
    assert np.all(np.diag(out["shift_cov"]) < 0.05 * np.diag(cov))
    return out


@pytest.mark.parametrize("step", [_step_by_hmc_on_the_queries, _step_from_the_block_draws])
def test_the_step_lands_where_the_exact_marginal_gradient_vanishes(at_laplace_mode, step):
    # at the Laplace marginal's mode the exact marginal's gradient (sum of the importance-sampled expectations plus
    # the prior's) is not zero; after the exact-gradient step it is, up to the samplers' noise
    data, fit = at_laplace_mode
    out = step(fit, data)

    def exact_gradient(g):
        means, _ = importance_expectations(fit, data, g)
        return means.sum(0) + g / data.item_sd**2

    cov = np.linalg.inv(fit.chol_items @ fit.chol_items.T)
    before = exact_gradient(fit.g)
    after = exact_gradient(fit.g + out["shift"])
    # in posterior SDs: the Newton decrement g^T Sigma g
    assert float(before @ cov @ before) > 0.01
    assert float(after @ cov @ after) < 0.2 * float(before @ cov @ before)


def test_the_shift_moves_the_items_and_adds_its_covariance(at_laplace_mode):
    data, fit = at_laplace_mode
    k = len(fit.g)
    shift = np.linspace(-0.05, 0.05, k)
    before = np.linalg.inv(fit.chol_items @ fit.chol_items.T)
    scale = np.sqrt(np.diag(before))
    extra = 0.5 * np.diag(scale**2) + 0.2 * np.outer(scale, scale)  # positive definite, correlated
    moved = item_score.with_item_shift(fit, shift, extra)
    draws = block_laplace.sample_block_laplace(moved, seed=3, num_samples=20_000)
    np.testing.assert_allclose(draws["g"].mean(0), fit.g + shift, atol=4 * np.sqrt(np.diag(before + extra).max() / 20_000))
    expected = before + extra
    sd = np.sqrt(np.diag(expected))
    assert np.max(np.abs(np.cov(draws["g"].T) - expected) / np.outer(sd, sd)) < 0.04  # SE ~0.01 at 20,000 draws
    assert np.max(np.abs(before - expected) / np.outer(sd, sd)) > 0.1  # the check can tell the two apart
    # each block's conditional mean follows the items through its coupling: at the items' mean, the blocks' mean
    centre = np.asarray(fit.x) - np.einsum("qmg,g->qm", np.asarray(fit.coupling), shift)
    np.testing.assert_allclose(draws["x"].mean(0), centre, atol=0.05)


def test_queries_are_sampled_only_above_the_size():
    assert item_score.pick_queries(5, 64, seed=0).tolist() == [0, 1, 2, 3, 4]
    picked = item_score.pick_queries(1000, 64, seed=0)
    assert len(set(picked.tolist())) == 64 and np.all(np.diff(picked) > 0) and picked.max() < 1000
    assert not np.array_equal(picked, item_score.pick_queries(1000, 64, seed=1))


def test_the_sampled_total_and_its_variance():
    # a simple random sample of K of Q queries: Q * mean is unbiased for the total, and the covariance it reports
    # (finite-population corrected) is the spread of that estimate over many samples
    rng = np.random.default_rng(5)
    population = rng.gamma(2.0, 1.0, size=(400, 2)) * np.array([1.0, -3.0]) + rng.standard_normal((400, 2))
    totals, covs = [], []
    for _ in range(4000):
        pick = rng.choice(400, size=40, replace=False)
        total, cov = item_score.scaled_total(population[pick], np.zeros((40, 2)), 400)
        totals.append(total)
        covs.append(cov)
    totals = np.array(totals)
    np.testing.assert_allclose(totals.mean(0), population.sum(0), rtol=0.01)
    np.testing.assert_allclose(np.mean(covs, axis=0), np.cov(totals.T), rtol=0.1, atol=0.05 * np.cov(totals.T).max())
    # every query: the total itself and no sampling variance, only the Monte Carlo one
    total, cov = item_score.scaled_total(population, np.full((400, 2), 0.01), 400)
    np.testing.assert_allclose(total, population.sum(0))
    np.testing.assert_allclose(cov, np.diag([4.0, 4.0]))

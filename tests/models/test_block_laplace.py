"""The block Laplace approximation of the joint model: its density is NumPyro's, its blocks are the Hessian's,
its mode is the posterior's, and its draws have the dense Gaussian's covariance."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import potential_energy
from rcp_jax.models import bayes, block_laplace, inference

from tests.helpers.block_collections import collection


def total(x, g, data) -> float:
    values = np.asarray(block_laplace._all_values(jnp.asarray(x, jnp.float32), jnp.asarray(g, jnp.float32), data, 4))
    return float(values.astype(np.float64).sum()) + block_laplace._prior_g(np.asarray(g, np.float64), data.item_sd)[0]


@pytest.fixture(scope="module")
def small():
    inputs, data, x0, g0 = collection(4, 12)
    return inputs, data, x0, g0, block_laplace.fit_block_laplace(data, x0, g0)


def test_the_density_is_numpyros_joint_model_up_to_a_constant(small):
    inputs, data, x0, g0, _ = small
    n, c = inputs.wins.shape[1], inputs.trials.shape[2]
    kw = dict(wins=data.wins, n_docs=data.n_docs, passes=data.passes, trials=data.trials, param="ability")
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(3):
        x = x0 + 0.3 * rng.standard_normal(x0.shape).astype(np.float32)
        g = g0 + 0.1 * rng.standard_normal(g0.shape)
        sites = {"w": x[:, : n - 1], "tau": np.exp(x[:, n - 1]), "alpha": x[:, n], "u": g[: c - 1], "v": g[c - 1 :]}
        # NumPyro's potential energy is in unconstrained coordinates: log tau, as the blocks
        unconstrained = {**sites, "tau": x[:, n - 1]}
        gaps.append(float(potential_energy(bayes.joint_model, (), kw, unconstrained)) - total(x, g, data))
    # NumPyro's padding contrasts have another (prior-only) law; every pool here is full, so there are none
    assert np.ptp(gaps) < 1e-3 * abs(gaps[0]) + 1e-2


@pytest.mark.slow  # compiling the whole-query Hessian by autodiff takes ~20 s
def test_each_block_is_the_hessian_of_its_query(small):
    inputs, data, x0, g0, _ = small
    n, c = inputs.wins.shape[1], inputs.trials.shape[2]
    q = {k: v[1] for k, v in block_laplace._per_query(data).items()}
    y = jnp.asarray(np.concatenate([x0[1], g0]), jnp.float32)
    value, grad, hess = block_laplace._local_blocks(y, q, data, n, c)
    f = lambda yy: block_laplace._local_nll(yy, q, data, n, c)  # noqa: E731
    assert float(value) == pytest.approx(float(f(y)), rel=1e-5)
    np.testing.assert_allclose(grad, jax.grad(f)(y), atol=1e-3 * float(jnp.max(jnp.abs(grad))))
    np.testing.assert_allclose(hess, jax.hessian(f)(y), atol=1e-4 * float(jnp.max(jnp.abs(hess))))


def test_newton_reaches_the_mode(small):
    inputs, data, x0, g0, fit = small
    n = inputs.wins.shape[1]
    assert fit.info["converged"] and fit.info["iterations"] < 20
    _, grad, _ = block_laplace._all_blocks(fit.x, jnp.asarray(fit.g, jnp.float32), data, 4)
    pg = block_laplace._prior_g(fit.g, data.item_sd)[1]
    assert float(jnp.max(jnp.abs(grad[:, : n + 1]))) < 1e-2
    assert np.max(np.abs(np.asarray(grad[:, n + 1 :], np.float64).sum(0) + pg)) < 5e-2
    # no lower point nearby, and NumPyro's own optimiser stops no lower
    assert fit.info["objective"] <= total(x0, g0, data)
    init = {"w": x0[:, : n - 1], "tau": np.exp(x0[:, n - 1]), "alpha": x0[:, n], "u": g0[: len(g0) // 2],
            "v": g0[len(g0) // 2 :]}
    kw = dict(wins=data.wins, n_docs=data.n_docs, passes=data.passes, trials=data.trials, param="ability")
    values, _ = inference.find_map(bayes.joint_model, kw, init_values=init, seed=0)
    theirs = np.concatenate([np.asarray(values["w"]), np.log(np.asarray(values["tau"]))[:, None],
                             np.asarray(values["alpha"])[:, None]], axis=1)
    assert fit.info["objective"] <= total(theirs, np.concatenate([values["u"], values["v"]]), data) + 1e-3


def test_a_long_step_in_log_tau_is_shortened_as_a_whole_block():
    dx = jnp.asarray([[0.2, -0.4, 3.0, 0.1], [0.3, 0.1, -0.2, 0.5], [1.0, 1.0, -1.0, 1.0], [0.4, 0.2, -0.4, 0.0],
                      [0.4, 0.2, -0.4, 0.0], [0.4, 0.2, 0.4, 0.0]], jnp.float32)
    floor = block_laplace.LOG_TAU_FLOOR
    log_tau = jnp.asarray([0.0, 0.0, 0.0, floor + 0.1, floor, floor - 1.0], jnp.float32)
    out = np.asarray(block_laplace._bounded_steps(dx, log_tau))
    bound = block_laplace.MAX_LOG_TAU_STEP
    np.testing.assert_allclose(out[0], np.asarray(dx[0]) * bound / 3.0, rtol=1e-6)  # direction kept
    np.testing.assert_allclose(out[1], np.asarray(dx[1]))  # within the bound: untouched
    assert abs(out[2, -2]) == pytest.approx(bound)
    np.testing.assert_allclose(out[3], np.asarray(dx[3]) * 0.25, rtol=1e-5)  # stops at the floor
    np.testing.assert_allclose(out[4], 0.0)  # at the floor and stepping down: stays
    np.testing.assert_allclose(out[5], np.asarray(dx[5]))  # below it (a collapsed start) and stepping up: free


def test_newton_from_a_query_far_below_its_scale_returns_to_the_same_mode(small):
    # one query's log tau started 2 below the MAP's: the bounded steps climb back to the mode the plain start finds
    inputs, data, x0, g0, fit = small
    n = inputs.wins.shape[1]
    far = np.array(x0, copy=True)
    far[1, : n - 1] *= np.exp(-2.0)  # w = tau * theta: the same BT scores at a 7x smaller tau
    far[1, n - 1] -= 2.0
    again = block_laplace.fit_block_laplace(data, far, g0)
    assert again.info["converged"]
    np.testing.assert_allclose(np.asarray(again.x), np.asarray(fit.x), atol=2e-3)


def test_a_query_past_the_funnels_barrier_stops_at_the_floor(small):
    # from 3 below, past the barrier, the density rises without bound towards tau -> 0 (the funnel of w = tau theta
    # has no mode): the query's log tau stops at the floor, Newton converges, and its Gaussian can be factored
    inputs, data, x0, g0, _ = small
    n = inputs.wins.shape[1]
    far = np.array(x0, copy=True)
    far[1, : n - 1] *= np.exp(-3.0)
    far[1, n - 1] -= 3.0
    again = block_laplace.fit_block_laplace(data, far, g0)
    assert again.info["converged"]
    assert float(again.x[1, n - 1]) == pytest.approx(block_laplace.LOG_TAU_FLOOR, abs=1e-4)
    assert np.all(np.isfinite(np.asarray(again.chol_local)))


def test_draws_have_the_dense_gaussians_covariance(small):
    inputs, data, x0, g0, fit = small
    q, m = fit.x.shape
    _, _, hess = block_laplace._all_blocks(fit.x, jnp.asarray(fit.g, jnp.float32), data, 4)
    hess = np.asarray(hess, np.float64)
    gdim = len(fit.g)
    dense = np.zeros((q * m + gdim, q * m + gdim))  # the whole Hessian, block-arrow shaped
    for i in range(q):
        sl = slice(i * m, (i + 1) * m)
        dense[sl, sl] = hess[i, :m, :m]
        dense[sl, q * m :] = hess[i, :m, m:]
        dense[q * m :, sl] = hess[i, m:, :m]
    dense[q * m :, q * m :] = hess[:, m:, m:].sum(0) + block_laplace._prior_g(fit.g, data.item_sd)[2]
    cov = np.linalg.inv(dense)
    draws = block_laplace.sample_block_laplace(fit, seed=3, num_samples=20_000)
    flat = np.concatenate([draws["x"].reshape(len(draws["g"]), -1), draws["g"]], axis=1)
    got = np.cov(flat, rowvar=False)
    sd = np.sqrt(np.diag(cov))
    # correlations and SDs within Monte Carlo error of 20,000 draws (SE of a correlation ~0.007)
    assert np.max(np.abs(np.sqrt(np.diag(got)) / sd - 1)) < 0.03
    assert np.max(np.abs(got / np.outer(sd, sd) - cov / np.outer(sd, sd))) < 0.04
    np.testing.assert_allclose(flat.mean(0), np.concatenate([np.asarray(fit.x).ravel(), fit.g]), atol=0.04 * sd.max())
    fixed = block_laplace.sample_block_laplace(fit, seed=4, num_samples=50, items_fixed=True)
    assert np.all(fixed["g"] == fit.g)


def test_the_log_determinants_gradient_is_its_finite_difference(small):
    # marginal_item_shift rests on d/dy log det A_q(y) = tr(A^-1 dA/dy), computed from third derivatives along the
    # columns of L^-T; here against central differences of log det of the Hessian block itself
    inputs, data, _, _, fit = small
    n, c = inputs.wins.shape[1], inputs.trials.shape[2]
    m = fit.x.shape[1]
    q = {k: v[0] for k, v in block_laplace._per_query(data).items()}
    y = np.concatenate([np.asarray(fit.x[0], np.float64), fit.g])
    eps = np.sqrt(m) * np.eye(m, dtype=np.float32)
    got = np.asarray(block_laplace._logdet_gradient_one(jnp.asarray(y, jnp.float32), fit.chol_local[0],
                                                        jnp.asarray(eps), q, data, n, c, m))

    def logdet(yy):
        h = np.asarray(block_laplace._local_blocks(jnp.asarray(yy, jnp.float32), q, data, n, c)[2], np.float64)[:m, :m]
        return np.linalg.slogdet(h)[1]

    for i in (0, n - 1, m + 1):  # a contrast, log tau, an item contrast
        step = np.zeros_like(y)
        step[i] = 1e-2
        fd = (logdet(y + step) - logdet(y - step)) / 2e-2
        assert got[i] == pytest.approx(fd, rel=0.05, abs=0.02), i
    # the shift is small, finite, and the exact trace and 8 random probes agree on its direction
    exact = block_laplace.marginal_item_shift(fit, data)
    rough = block_laplace.marginal_item_shift(fit, data, probes=8)
    assert np.all(np.isfinite(exact)) and np.abs(exact).max() < 1.0
    assert np.dot(exact, rough) > 0.5 * np.linalg.norm(exact) * np.linalg.norm(rough)


def brute_laplace_marginal(data, x_start, n: int, c: int):
    """The items' Laplace-approximate negative log marginal ``L(g) = sum_q [f_q(x_q*(g), g) + 1/2 log det
    H_q(x_q*(g), g)] + prior(g)`` in float64, each block's mode by 40 plain Newton steps and its Hessian by dense
    ``jax.hessian`` of the query's log density (none of the block-arrow machinery)."""
    per_query = block_laplace._per_query(data)

    def one(g, x, q):
        f = lambda xx: block_laplace._local_nll(jnp.concatenate([xx, g]), q, data, n, c)  # noqa: E731
        x = jax.lax.fori_loop(0, 40, lambda _, xx: xx - jnp.linalg.solve(jax.hessian(f)(xx), jax.grad(f)(xx)), x)
        return f(x) + 0.5 * jnp.linalg.slogdet(jax.hessian(f)(x))[1]

    @jax.jit
    def marginal(g):
        q64 = {k: (v.astype(jnp.float64) if v.dtype == jnp.float32 else v) for k, v in per_query.items()}
        return jax.vmap(one, in_axes=(None, 0, 0))(g, x_start, q64).sum() + 0.5 * jnp.dot(g, g) / data.item_sd**2

    return marginal


def test_the_first_iteration_is_the_single_step(small):
    inputs, data, _, _, fit = small
    n = inputs.wins.shape[1]
    moved = block_laplace.marginal_item_mode(fit, data, iterations=1)
    np.testing.assert_allclose(moved.g, fit.g + block_laplace.marginal_item_shift(fit, data), atol=1e-6)
    assert moved.info["item_iterations"] == 1 and moved.g_shift is None
    np.testing.assert_allclose(moved.info["item_shift"], moved.g - fit.g)
    # the blocks moved to their conditional modes given the shifted items
    _, grad, _ = block_laplace._all_blocks(moved.x, jnp.asarray(moved.g, jnp.float32), data, 4)
    assert float(jnp.max(jnp.abs(grad[:, : n + 1]))) < 1e-2


@pytest.mark.slow  # the brute-force marginal compiles Newton through dense Hessians: ~35 s
def test_the_iterated_items_reach_the_laplace_marginals_mode():
    # the items' mean of the block Laplace is the mode of their Laplace-approximate marginal: here against that
    # mode found by brute force (scipy BFGS on the marginal, every block re-optimised and its log det dense, float64)
    from scipy.optimize import minimize

    inputs, _, x0, g0 = collection(4, 12)
    data = block_laplace.make_data(inputs.wins, inputs.n_docs, inputs.passes, inputs.trials, item_sd=3.0)
    n, c = inputs.wins.shape[1], inputs.trials.shape[2]
    fit = block_laplace.fit_block_laplace(data, x0, g0)
    one_step = fit.g + block_laplace.marginal_item_shift(fit, data)
    moved = block_laplace.marginal_item_mode(fit, data, iterations=12, tol=1e-5)
    with jax.enable_x64(True):
        marginal = brute_laplace_marginal(data, jnp.asarray(np.asarray(fit.x), jnp.float64), n, c)
        value_grad = jax.jit(jax.value_and_grad(marginal))
        best = minimize(lambda g: tuple(np.asarray(a, np.float64) for a in value_grad(jnp.asarray(g))), fit.g,
                        jac=True, method="BFGS", options={"gtol": 1e-7})
    assert best.success or np.max(np.abs(best.jac)) < 1e-4, best.message
    # the one step from the joint mode falls short; the iterations land on the mode (float32 blocks)
    assert np.max(np.abs(one_step - best.x)) > 3 * np.max(np.abs(moved.g - best.x))
    np.testing.assert_allclose(moved.g, best.x, atol=2e-3)
    assert moved.info["item_iterations"] <= 12 and moved.info["item_steps"][-1] < moved.info["item_steps"][0]
    # the blocks sit at their conditional modes given the final items, and the draws are centred there
    _, grad, _ = block_laplace._all_blocks(moved.x, jnp.asarray(moved.g, jnp.float32), data, 4)
    assert float(jnp.max(jnp.abs(grad[:, : n + 1]))) < 1e-2
    draws = block_laplace.sample_block_laplace(moved, seed=1, num_samples=4000)
    sd = np.sqrt(np.diag(np.linalg.inv(moved.chol_items @ moved.chol_items.T)))
    assert np.max(np.abs(draws["g"].mean(0) - moved.g) / sd) < 0.1

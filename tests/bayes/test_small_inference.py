"""NUTS, SVI and SBC on tiny data (no shared fixture, so the scheduler may run them beside the 50 x 60 fit of
test_inference.py): reproducible seeds, progress reports, SVI's loop, simulation-based calibration."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from rcp_jax.models import bayes, inference


def tiny_calibration_data(seed: int, q: int = 3, n: int = 8, c: int = 5) -> dict:
    """Keyword arguments of the frozen calibration model: q queries x n documents x c criteria, 2 trials each."""
    rng = np.random.default_rng(seed)
    return dict(theta=jnp.asarray(rng.normal(size=(q, n)), jnp.float32),
                passes=jnp.asarray(rng.integers(0, 3, (q, n, c)), jnp.float32), trials=jnp.full((q, n, c), 2.0))


def test_nuts_is_reproducible_with_an_explicit_seed():
    kw = tiny_calibration_data(seed=0)
    a = inference.run_nuts(bayes.calibration_model, kw, seed=5, num_warmup=50, num_samples=20, num_chains=2)
    b = inference.run_nuts(bayes.calibration_model, kw, seed=5, num_warmup=50, num_samples=20, num_chains=2)
    c_ = inference.run_nuts(bayes.calibration_model, kw, seed=6, num_warmup=50, num_samples=20, num_chains=2)
    np.testing.assert_array_equal(a.samples["gamma"], b.samples["gamma"])
    assert not np.array_equal(a.samples["gamma"], c_.samples["gamma"])
    assert a.samples["tau"].shape == (2, 20, 3) and a.info["chain_method"] == "sequential"  # the CPU default


@pytest.mark.slow
def test_sequential_and_vectorised_chains_start_alike_and_are_each_reproducible():
    kw = tiny_calibration_data(seed=0)
    settings = dict(seed=5, num_warmup=0, num_samples=3, num_chains=2)
    seq = inference.run_nuts(bayes.calibration_model, kw, chain_method="sequential", **settings)
    vec = inference.run_nuts(bayes.calibration_model, kw, chain_method="vectorized", **settings)
    # each chain has its own key whichever way the chains are run, so the same start (drawn from the chain's key);
    # without warmup the first trajectories stay short enough that rounding has not yet moved them
    assert vec.info["chain_method"] == "vectorized"
    np.testing.assert_allclose(seq.samples["tau"], vec.samples["tau"], rtol=1e-5)
    assert not np.allclose(seq.samples["tau"][0], seq.samples["tau"][1])  # two distinct chains
    again = inference.run_nuts(bayes.calibration_model, kw, chain_method="sequential", **settings)
    np.testing.assert_array_equal(seq.samples["tau"], again.samples["tau"])
    with pytest.raises(ValueError, match="chain_method must be"):
        inference.run_nuts(bayes.calibration_model, kw, chain_method="serial", **settings)


@pytest.mark.slow
def test_batched_runs_vectorised_as_on_an_accelerator():
    # the accelerators' default (the CPU's, sequential, is the SBC test's): one chain per dataset, own keys
    rng = np.random.default_rng(3)
    batch = {"theta": jnp.asarray(rng.normal(size=(2, 3, 8)), jnp.float32),
             "passes": jnp.asarray(rng.integers(0, 3, (2, 3, 8, 5)), jnp.float32)}
    static = {"trials": jnp.full((3, 8, 5), 2.0)}
    settings = dict(seed=4, num_warmup=10, num_samples=4, chain_method="vectorized")
    vec = inference.run_nuts_batched(bayes.calibration_model, batch, static, **settings)
    again = inference.run_nuts_batched(bayes.calibration_model, batch, static, **settings)
    assert vec.info["chain_method"] == "vectorized" and vec.samples["tau"].shape == (2, 4, 3)
    np.testing.assert_array_equal(vec.samples["tau"], again.samples["tau"])
    assert np.isfinite(vec.samples["gamma"]).all() and not np.allclose(vec.samples["tau"][0], vec.samples["tau"][1])
    with pytest.raises(ValueError, match="chain_method must be"):
        inference.run_nuts_batched(bayes.calibration_model, batch, static, **{**settings, "chain_method": "parallel"})


def test_nuts_progress_reports_reach_the_end_and_leave_the_draws_unchanged():
    kw = tiny_calibration_data(seed=1)
    seen = []
    # the shapes and settings of the reproducibility test: the run without reports reuses its compiled program
    settings = dict(seed=5, num_warmup=50, num_samples=20, num_chains=2)
    with_bar = inference.run_nuts(bayes.calibration_model, kw, progress=lambda i, total: seen.append((i, total)), **settings)
    plain = inference.run_nuts(bayes.calibration_model, kw, **settings)
    np.testing.assert_array_equal(with_bar.samples["gamma"], plain.samples["gamma"])
    # sequential chains (the CPU default) report one after another: 2 chains x 70 iterations
    assert seen and {t for _, t in seen} == {140}
    iterations = [i for i, _ in seen]
    assert iterations == sorted(set(iterations)) and iterations[-1] == 140  # the second chain after the first
    assert len(iterations) == 140  # total // 100 = 1: a report every iteration
    assert inference._PROGRESS_HOOK[0] is None  # cleared: a later run without progress reports nothing
    inference.run_nuts(bayes.calibration_model, kw, progress=None, **{**settings, "seed": 6})
    assert len(seen) == 140
    # vectorised chains share their iterations: one report per iteration, not per chain (the settings of the
    # test above: its compiled program)
    seen.clear()
    inference.run_nuts(bayes.calibration_model, kw, progress=lambda i, total: seen.append((i, total)),
                       chain_method="vectorized", **{**settings, "num_warmup": 0, "num_samples": 3})
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.slow
def test_svi_progress_reports_and_the_loop_is_svi_runs():
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoNormal
    from numpyro.infer.initialization import init_to_median

    kw = tiny_calibration_data(seed=2)
    seen = []
    with_bar = inference.run_svi(bayes.calibration_model, kw, seed=3, num_steps=250, num_samples=10,
                                 progress=lambda i, total: seen.append((i, total)))
    plain = inference.run_svi(bayes.calibration_model, kw, seed=3, num_steps=250, num_samples=10)
    assert [i for i, _ in seen] == list(range(2, 251, 2)) and {t for _, t in seen} == {250}
    # one compiled program with or without reports: the same losses and draws, bit for bit
    np.testing.assert_array_equal(with_bar.info["losses"], plain.info["losses"])
    np.testing.assert_array_equal(with_bar.samples["gamma"], plain.samples["gamma"])
    # the loop is numpyro's SVI.run, loss for loss. The reference runs as one compiled program too (op by op,
    # its initialisation compiles ~300 tiny programs: ~20 s of a cold suite); two programs may fuse a few
    # float32 operations in another order, so losses agree to rounding (a different guide, optimiser, key or
    # step count moves them by orders of magnitude more)
    guide = AutoNormal(bayes.calibration_model, init_loc_fn=init_to_median, init_scale=0.05)
    svi = SVI(bayes.calibration_model, guide, inference.optax_adam(0.01), Trace_ELBO())
    reference = jax.jit(lambda key: svi.run(key, 250, progress_bar=False, stable_update=True, **kw).losses)(
        jax.random.split(jax.random.PRNGKey(3))[0])
    np.testing.assert_allclose(plain.info["losses"], np.asarray(reference), rtol=1e-6)


#: Datasets of the reduced SBC test (the full run, ``benchmarks/sbc.py``, has 200).
SBC_DATASETS = 50


def sbc_coverage_bands(n_datasets: int, n_components: int, *, nominal: float = 0.9,
                       alpha: float = 0.01) -> tuple[int, int]:
    """(lowest, highest) number of datasets out of ``n_datasets`` whose interval may hold one component's truth.

    For a correct sampler, datasets are independent draws, so that number is Binomial(n_datasets, nominal)
    per component; the band is its central ``1 - alpha / n_components`` range (Bonferroni over the
    components: a correct sampler fails the whole check with probability at most ``alpha``).
    """
    tail = alpha / n_components / 2
    return int(stats.binom.ppf(tail, n_datasets, nominal)), int(stats.binom.isf(tail, n_datasets, nominal))


def test_sbc_coverage_bands_are_the_binomial_quantiles():
    lo, hi = sbc_coverage_bands(50, 18)
    assert (lo, hi) == (36, 50)
    # a correct sampler lands outside one component's band with probability <= 0.01 / 18 (on each side)
    assert stats.binom.cdf(lo - 1, 50, 0.9) <= 0.01 / 36 < stats.binom.cdf(lo, 50, 0.9)


@pytest.mark.slow
def test_simulation_based_calibration_of_the_2pl_is_uniform():
    """Reduced SBC (the full run: ``benchmarks/sbc.py``): 50 datasets of 4 queries x 12 documents.

    Bands derived for a correct sampler (each check fails it with probability <= 1%): rank uniformity per
    component over 5 bins (10 expected ranks per bin, as 10 bins had with 100 datasets; Bonferroni over the
    components); coverage of each component within its Binomial(50, 0.9) band (:func:`sbc_coverage_bands`);
    the coverage pooled over a parameter's components as the mean of each dataset's covered share (the
    shares are independent across datasets, the components within one are not, so the pooled count is no
    binomial), within 3.19 standard errors of 0.9 (a t test on 49 degrees of freedom at 0.01 / 4, two-sided:
    Bonferroni over the four parameters).
    """
    rng = np.random.default_rng(0)
    q, n, c = 4, 12, 5
    design = dict(theta=jnp.asarray(rng.normal(0.0, 1.5, (q, n)), jnp.float32),
                  trials=jnp.full((q, n, c), 2.0, jnp.float32), passes=None, item_sd=1.0)
    res = inference.simulation_based_calibration(
        bayes.calibration_model, design, params=("gamma", "beta", "tau", "alpha"), n_datasets=SBC_DATASETS, seed=0,
        num_warmup=150, num_samples=200, thinning=2,
    )
    assert res.n_draws == 100
    assert res.divergences.sum() <= 2  # transitions over all datasets (the bound the 100-dataset test had)
    n_components = sum(int(np.prod(res.covered[p].shape[1:])) for p in res.covered)
    lo, hi = sbc_coverage_bands(SBC_DATASETS, n_components)
    t_crit = stats.t.isf(0.01 / 4 / 2, SBC_DATASETS - 1)
    for p in ("gamma", "beta", "tau", "alpha"):
        # one chi-square per component (Bonferroni): components of one dataset are correlated, so a
        # histogram pooled over them is no multinomial sample (see inference.rank_uniformity_p)
        assert inference.rank_uniformity_p(res.ranks[p], res.n_draws, bins=5) > 0.01, (p, res.ranks[p])
        held = res.covered[p].reshape(SBC_DATASETS, -1)
        assert ((held.sum(axis=0) >= lo) & (held.sum(axis=0) <= hi)).all(), (p, held.sum(axis=0), lo, hi)
        share = held.mean(axis=1)  # one covered share per dataset: independent across datasets
        se = share.std(ddof=1) / np.sqrt(SBC_DATASETS)
        assert abs(share.mean() - 0.9) <= t_crit * se, (p, share.mean(), se)


def test_rank_uniformity_is_tested_per_component():
    rng = np.random.default_rng(1)
    uniform = rng.integers(0, 101, (100, 4))
    assert inference.rank_uniformity_p(uniform, 100) > 0.01
    skewed = uniform.copy()
    skewed[:, 2] = np.minimum(rng.integers(0, 101, 100), rng.integers(0, 101, 100))  # one biased component
    assert inference.rank_uniformity_p(skewed, 100) < 0.01
    # correlated but uniform components: a pooled histogram over-disperses, the per-component test does not
    shared = rng.integers(0, 101, (100, 1))
    same = np.repeat(shared, 4, axis=1)
    pooled = stats.chisquare(np.bincount(same.ravel() * 10 // 101, minlength=10)).pvalue
    assert inference.rank_uniformity_p(same, 100) > 0.01 and inference.rank_uniformity_p(same, 100) > pooled

"""Host-side steps of the library run as a few compiled programs, not as storms of small ones.

Run op by op, every JAX operation on a new shape compiles its own small XLA program (~40 ms each on a cold
cache): SVI's guide set-up and ``Predictive`` once cost ~60 of them per data shape, and the randomisation
test one program per query count. These tests count the programs JAX *lowers* (the
``jaxpr_to_mlir_module`` event fires for every new program, whether the persistent compilation cache then
holds it or not), so they measure the same thing on a cold and on a warm cache.
"""

from __future__ import annotations

import contextlib

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest

from rcp_jax.models import bayes, inference
from rcp_jax.stats.paired import randomisation_test

_LOWERED: list[str] = []
_ACTIVE = [False]


def _on_event(event: str, duration: float, **kw) -> None:
    if _ACTIVE[0] and event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
        _LOWERED.append(kw.get("fun_name", "?"))


jax.monitoring.register_event_duration_secs_listener(_on_event)


@contextlib.contextmanager
def lowered_programs():
    """Collect the names of the programs lowered inside the block (a list filled on exit)."""
    seen: list[str] = []
    _LOWERED.clear()
    _ACTIVE[0] = True
    try:
        yield seen
    finally:
        _ACTIVE[0] = False
        seen.extend(_LOWERED)
        _LOWERED.clear()


def _tiny(seed: int, q: int = 2, n: int = 5, c: int = 3) -> tuple[dict, dict]:
    """(frozen calibration model kwargs, starting values) of q queries x n documents x c criteria."""
    rng = np.random.default_rng(seed)
    kw = dict(theta=jnp.asarray(rng.normal(size=(q, n)), jnp.float32),
              passes=jnp.asarray(rng.integers(0, 3, (q, n, c)), jnp.float32), trials=jnp.full((q, n, c), 2.0))
    init = {"u": np.zeros(c - 1, np.float32), "v": np.zeros(c - 1, np.float32), "tau": np.ones(q, np.float32),
            "alpha": np.zeros(q, np.float32)}
    return kw, init


@pytest.mark.slow
def test_svi_from_starting_values_is_one_program_and_reruns_compile_nothing():
    kw, init = _tiny(0)
    settings = dict(num_steps=30, num_samples=8, init_values=init)
    with lowered_programs() as first:
        a = inference.run_svi(bayes.calibration_model, kw, seed=1, **settings)
    # guide set-up, the optimisation, the guide's draws and their deterministic sites: one program, plus at most
    # three tiny ones a process makes once (the key from the seed); op by op this was ~60 programs
    assert len(first) <= 4, first
    kw2, _ = _tiny(1)  # new data and seed, same shapes: nothing new to compile
    with lowered_programs() as second:
        b = inference.run_svi(bayes.calibration_model, kw2, seed=2, **settings)
    assert second == []
    assert a.samples["gamma"].shape == b.samples["gamma"].shape == (1, 8, 3)
    assert not np.array_equal(a.samples["gamma"], b.samples["gamma"])
    np.testing.assert_allclose(a.samples["gamma"].sum(-1), 3.0, rtol=1e-5)  # gamma sums to C in every draw


@pytest.mark.parametrize("guide", ["normal", "laplace"])
def test_guides_set_up_in_a_trace_keep_the_models_site_order(guide):
    """run_svi sets its guide up inside the compiled program. NumPyro's traced set-up orders the sites by name, its
    op-by-op one (``SVI.run`` outside a program) in model order; both must use one order, or the Laplace guide's
    flat latent vector would be read with the wrong sites and AutoNormal's draws would take other keys than
    ``SVI.run``'s. Abstract tracing only: nothing is compiled."""
    import numpyro
    from numpyro.infer.autoguide import AutoLaplaceApproximation, AutoNormal
    from numpyro.infer.initialization import init_to_median

    kw, _ = _tiny(2)
    model_order = ["u", "v", "tau", "alpha"]  # the order of bayes.calibration_model's latent sites

    def traced_order(g):
        jax.eval_shape(lambda kw: numpyro.handlers.seed(g, 0)(**kw), kw)
        return list(g._init_locs)

    assert traced_order(inference._make_guide(bayes.calibration_model, guide, {}, 0.05)) == model_order
    plain = {"normal": AutoNormal, "laplace": AutoLaplaceApproximation}[guide]
    # what the fix is for: NumPyro's own guide, set up in a trace, sorts the sites
    assert traced_order(plain(bayes.calibration_model, init_loc_fn=init_to_median)) == sorted(model_order)


def test_randomisation_test_compiles_one_program_for_every_query_count():
    rng = np.random.default_rng(0)
    with lowered_programs() as exact:
        for q in (3, 5, 8):  # exact enumeration: 8, 32 and 256 sign vectors, one padded width
            randomisation_test(rng.normal(0.1, 0.3, (4, q)), exact=True)
    assert exact.count("count") <= 1, exact
    with lowered_programs() as monte_carlo:
        for b in (10_000, 30_000):  # Monte Carlo: the number of chunks is a run-time argument
            randomisation_test(rng.normal(0.1, 0.3, (4, 12)), n_permutations=b, exact=False, seed=1)
    assert monte_carlo.count("count") <= 1, monte_carlo


@pytest.mark.parametrize("values", [[0.3, 0.1, 0.2, -0.1, 0.4], [0.5, -0.5, 0.25], [1.0, 0.0, 0.0, 2.0, -1.0, 0.5, 0.5]])
def test_padded_exact_enumeration_is_the_brute_force_share(values):
    """Padding the query axis (and chunks past 2**Q) changes no exact p-value: checked against all 2**Q signs."""
    d = np.asarray(values)
    signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * len(d))).reshape(len(d), -1).T
    stats_ = np.abs(signs @ d)
    expected = np.mean(stats_ >= abs(d.sum()) - 1e-12)
    assert randomisation_test(d[None, :], exact=True)[0] == pytest.approx(expected, abs=1e-12)

"""The 2PL calibration's host layout and fused evaluation (:mod:`rcp_jax.models.irt`) give what the plain forms give:
the criterion-major cells laid out from per-document rows equal the dense layout, one fused pass gives the
objective and the moments, a fit from laid-out cells reaches the optimum of the dense cells' fit, and the
query padding follows its buckets."""

from __future__ import annotations

import numpy as np
import pytest

from rcp_jax.models import irt
from rcp_jax.models.irt import map_objective as irt_map_objective
from rcp_jax.models.irt import cells as irt_cells


def test_2pl_query_padding_and_layout():
    assert [irt_cells._query_slots(q, 1 << max(0, (q - 1).bit_length()), 1) for q in (3, 64, 65, 1000, 4095)] == \
        [64, 64, 128, 1024, 4096]
    assert [irt_cells._query_slots(q, 1 << (q - 1).bit_length(), 1) for q in (4096, 5000, 10000, 12000)] == \
        [4096, 5120, 10240, 12288]
    assert irt_cells._query_slots(10000, 16384, 3) == 10242  # a multiple of the devices
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(3, 7))
    trials = rng.integers(0, 3, size=(3, 7, 5)).astype(float)
    cells = irt.calibration_cells(theta, np.minimum(trials, 1.0), trials)
    assert cells.criterion.shape == (3, 35) and not cells.criterion.flags.writeable
    wide = irt_cells._criterion_major(cells, 8, bucket=True)
    narrow = irt_cells._criterion_major(cells, 8, bucket=True, dtype=np.float32)
    assert all(n.dtype == np.float32 and np.array_equal(n, w.astype(np.float32)) for n, w in zip(narrow, wide))
    assert np.array_equal(wide[0][:3, 2, :7], theta) and np.array_equal(wide[2][:3, :, :7], trials.transpose(0, 2, 1))



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_criterion_major_cells_equal_the_dense_layout(dtype):
    rng = np.random.default_rng(3)
    q, c = 37, 4
    sizes = rng.integers(1, 23, size=q)
    query = np.repeat(np.arange(q), sizes)
    slot = np.concatenate([rng.permutation(n) for n in sizes])
    order = rng.permutation(len(query))  # rows in any order
    query, slot = query[order], slot[order]
    theta = rng.normal(size=len(query)) * 3.0
    trials = rng.integers(0, 5, size=len(query)).astype(float)
    passes = np.minimum(rng.integers(0, 5, size=(len(query), c)), trials[:, None]).astype(float)
    laid = irt.criterion_major_cells(query, slot, theta, passes, trials, q, dtype=dtype)

    n = int(sizes.max())
    dense_theta, dense_passes, dense_trials = np.zeros((q, n)), np.zeros((q, n, c)), np.zeros((q, n, c))
    dense_theta[query, slot], dense_passes[query, slot], dense_trials[query, slot] = theta, passes, trials[:, None]
    q_pad = laid.passes.shape[0]
    ref = irt_cells._criterion_major(irt.calibration_cells(dense_theta, dense_passes, dense_trials), q_pad, bucket=True,
                               dtype=np.dtype(dtype))
    for got, want in zip((laid.theta, laid.passes, laid.trials), ref):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.broadcast_to(got, want.shape), want)
    assert laid.n_queries == q and laid.n_criteria == c


def test_fused_evaluation_equals_objective_and_moments():
    """One pass (:func:`rcp_jax.models.irt.map_objective._cm_eval`) gives the objective of :func:`_cm_objective` and the moments of
    :func:`_moments`, with theta and trials per criterion or one row for all criteria."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(5)
    q, c, k = 6, 3, 11
    theta = rng.normal(size=(q, 1, k)) * 2.0
    trials = rng.integers(0, 4, size=(q, 1, k)).astype(float)
    trials[5] = 0.0  # a query without answers
    passes = np.minimum(rng.integers(0, 4, size=(q, c, k)), trials).astype(float)
    with jax.enable_x64(True):
        u, v = jnp.asarray(rng.normal(size=c) * 0.3), jnp.asarray(rng.normal(size=c))
        t, alpha = jnp.asarray(rng.normal(size=q) * 0.5), jnp.asarray(rng.normal(size=q))
        full = [jnp.asarray(np.broadcast_to(x, (q, c, k))) for x in (theta, trials)]
        total, has = irt_map_objective._cell_totals(jnp.asarray(passes), full[1])
        want_f = irt_map_objective._cm_objective(u, v, t, alpha, full[0], jnp.asarray(passes), full[1], has, 1e-4, total)
        want_m = irt_map_objective._moments(u, v, t, alpha, full[0], jnp.asarray(passes), full[1])
        for th, tr in ((theta, trials), full):
            th, tr = jnp.asarray(th), jnp.asarray(tr)
            assert float(irt_map_objective._cell_totals(jnp.asarray(passes), tr)[0]) == float(total)
            f, m = jax.jit(irt_map_objective._cm_eval)(u, v, t, alpha, th, jnp.asarray(passes), tr, has, 1e-4, total)
            np.testing.assert_allclose(float(f), float(want_f), rtol=1e-13)
            np.testing.assert_allclose(np.asarray(m), np.asarray(want_m), rtol=1e-12, atol=1e-12)


def test_fit_from_laid_out_cells_equals_the_cells_fit():
    """The 2PL fit from :func:`criterion_major_cells` (theta and trials one row for all criteria) reaches the
    optimum of the fit from :class:`CalibrationCells` (float64: 1e-8; float32: within 1e-5)."""
    import jax.numpy as jnp

    rng = np.random.default_rng(6)
    q, n, c = 30, 12, 4
    theta = rng.normal(size=(q, n)) * 1.5
    trials = rng.integers(1, 4, size=(q, n)).astype(float)
    truth = 1.0 / (1.0 + np.exp(-(theta[:, :, None] - np.linspace(-1, 1, c))))
    passes = rng.binomial(trials[:, :, None].astype(int), truth).astype(float)
    cells = irt.calibration_cells(theta, passes, np.repeat(trials[:, :, None], c, axis=2))
    query, slot = np.repeat(np.arange(q), n), np.tile(np.arange(n), q)
    for dtype, tol in ((jnp.float64, 1e-8), (jnp.float32, 1e-5)):
        ref = irt.fit_2pl_calibration(cells, dtype=dtype)
        laid = irt.criterion_major_cells(query, slot, theta.ravel(), passes.reshape(q * n, c), trials.ravel(), q,
                                         dtype=dtype)
        assert laid.theta.shape[1] == 1 and laid.trials.shape[1] == 1
        fit = irt.fit_2pl_calibration(laid, dtype=dtype)
        assert fit.converged and ref.converged
        for name in ("gamma", "beta", "tau", "alpha"):
            np.testing.assert_allclose(getattr(fit, name), getattr(ref, name), atol=tol, err_msg=name)

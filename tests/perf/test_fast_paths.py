"""Correctness of the performance paths (speed itself is measured by benchmarks/, never here).

* the upper-triangle pair statistics equal the public ``pair_statistics``;
* the CG-Newton ``fit_map`` equals a plain dense Newton solve;
* the connectivity shortcut gives the same components as scipy's graph search;
* the closed-form Hessians of the 2PL calibration and of the rubric-only marginal likelihood equal
  autodiff;
* refits with other query counts reuse the compiled solvers (no recompilation);
* a fit sharded over two (forced) host devices equals the single-device fit (in a subprocess, because
  the device count is fixed when JAX starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcp_jax.models import bradley_terry as bt
from rcp_jax.models import irt
from rcp_jax.models.bradley_terry import kernel as bt_kernel
from rcp_jax.models.bradley_terry import objective as bt_objective
from rcp_jax.models.irt import calibration_fit as irt_calibration_fit
from rcp_jax.models.irt import map_objective as irt_map_objective
from rcp_jax.models.irt import cells as irt_cells
from rcp_jax.models.irt import rubric_only as irt_rubric_only
from rcp_jax.models.simulate import simulate_judgements

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sim():
    return simulate_judgements(3, [30, 12, 47, 5], tournament_placements=10)


def _padded(sim, n_queries=4, n_docs=48):
    w = sim.window_docs.shape[0]
    return (jnp.asarray(sim.window_docs, jnp.int32), jnp.asarray(sim.window_scores, jnp.float32),
            jnp.asarray(sim.window_query, jnp.int32), n_queries, n_docs, w)


def test_pair_parts_equal_public_pair_statistics(sim):
    di, sc, wq, q, n, _ = _padded(sim)
    wins = np.asarray(bt.pair_statistics(di, sc, wq, n_queries=q, n_docs=n), np.float64)
    both, anti, total = (np.asarray(x, np.float64) for x in bt_objective._pair_parts(di, sc, wq, q, n))
    np.testing.assert_allclose(total, wins.sum(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(both * total[:, None, None], wins + wins.transpose(0, 2, 1), atol=1e-5)
    np.testing.assert_allclose(anti * total[:, None, None], wins - wins.transpose(0, 2, 1), atol=1e-5)


def test_cg_newton_equals_dense_newton(sim):
    di, sc, wq, q, n, _ = _padded(sim)
    with jax.enable_x64(True):
        wins = bt.pair_statistics(di, jnp.asarray(sc, jnp.float64), wq, n_queries=q, n_docs=n)
        mask = jnp.arange(n)[None, :] < jnp.asarray(sim.truth.n_docs)[:, None]
        theta, _ = bt.fit_map(wins, mask, 1e-4, 1e-12, 100)
        # reference: plain Newton with dense solves from zero
        ref = jnp.zeros((q, n))
        for _ in range(30):
            g, h = bt_objective._grad_hess(ref, wins, 1e-4)
            ref = ref - jnp.linalg.solve(h, g[..., None])[..., 0]
        ref = jnp.where(mask, ref - (ref * mask).sum(1, keepdims=True) / mask.sum(1, keepdims=True), 0.0)
        np.testing.assert_allclose(np.asarray(theta), np.asarray(ref), atol=1e-8)


def test_connectivity_shortcut_matches_graph_search():
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(0)
    n = 24
    adj = []
    for density in (0.05, 0.15, 0.6, 0.9):
        a = rng.random((n, n)) < density
        adj.append(a | a.T)
    adj = np.stack(adj)
    mask = np.ones((4, n), bool)
    mask[1, 20:] = False
    for dense_only in (False, True):
        a = adj[2:] if dense_only else adj
        m = mask[2:] if dense_only else mask
        labels, k = bt.connected_components(jnp.asarray(a, jnp.float32), jnp.asarray(m))
        for row in range(len(a)):
            real = np.flatnonzero(m[row])
            sub = a[row][np.ix_(real, real)]
            n_ref, lab_ref = connected_components(sub, directed=False)
            assert int(k[row]) == n_ref
            got = np.asarray(labels[row])[real]
            # same partition; our label is the smallest member index
            for comp in range(n_ref):
                members = real[lab_ref == comp]
                assert np.all(got[lab_ref == comp] == members.min())


def test_calibration_closed_form_derivatives_equal_autodiff():
    rng = np.random.default_rng(1)
    q, n, c = 5, 9, 4
    theta = rng.normal(size=(q, n))
    trials = rng.integers(0, 4, size=(q, n, c)).astype(float)
    trials[4] = 0.0  # a query without answers
    passes = np.minimum(rng.integers(0, 4, size=(q, n, c)), trials).astype(float)
    cells = irt.calibration_cells(theta, passes, trials)
    with jax.enable_x64(True):
        th, ps, tr = (jnp.asarray(x, jnp.float64) for x in irt_cells._criterion_major(cells, q))
        total = tr.sum()
        has = tr.sum(axis=(1, 2)) > 0
        y = jnp.asarray(rng.normal(size=2 * c + 2 * q) * 0.3)

        def f(y):  # parameters ordered (u, v, t_1, alpha_1, ..., t_q, alpha_q)
            loc = y[2 * c :].reshape(q, 2)
            return irt_map_objective._cm_objective(y[:c], y[c : 2 * c], loc[:, 0], loc[:, 1], th, ps, tr, has, 1e-4, total)

        loc = y[2 * c :].reshape(q, 2)
        public = irt.calibration_objective(
            y[:c], y[c : 2 * c], loc[:, 0], loc[:, 1], jnp.asarray(cells.theta), jnp.asarray(cells.criterion),
            jnp.asarray(cells.passes), jnp.asarray(cells.trials),
        )
        np.testing.assert_allclose(float(f(y) / total), float(public), rtol=1e-12)
        # each side compiled as one program (op-by-op autodiff of the objective compiles every primitive)
        g_s, g_l, h_ss, h_ls, h_ll = jax.jit(irt_map_objective._calibration_derivs)(y[: 2 * c], loc, th, ps, tr, 1e-4)
        g = jax.jit(jax.grad(f))(y)
        h = jax.jit(jax.hessian(f))(y)
        np.testing.assert_allclose(g_s, g[: 2 * c], atol=1e-10)
        np.testing.assert_allclose(g_l.reshape(-1), g[2 * c :], atol=1e-10)
        np.testing.assert_allclose(h_ss, h[: 2 * c, : 2 * c], atol=1e-10)
        for j in range(q):
            rows = slice(2 * c + 2 * j, 2 * c + 2 * j + 2)
            np.testing.assert_allclose(h_ls[j], h[rows, : 2 * c], atol=1e-10)
            np.testing.assert_allclose(h_ll[j], h[rows, rows], atol=1e-10)


def test_rubric_only_closed_form_derivatives_equal_autodiff():
    rng = np.random.default_rng(2)
    trials = rng.integers(1, 5, size=(200, 5)).astype(float)
    passes = np.minimum(rng.integers(0, 5, size=(200, 5)), trials).astype(float)
    up, ut, count, inverse = irt_rubric_only._distinct_rows(passes, trials)
    assert np.array_equal(up[inverse], passes) and np.array_equal(ut[inverse], trials)
    nodes, logw = irt.quadrature_grid()
    with jax.enable_x64(True):
        args = tuple(jnp.asarray(x) for x in (up, ut, count, nodes, logw)) + (1e-4,)
        # each side compiled as one program, once for both points (op-by-op autodiff compiles every primitive)
        derivs = jax.jit(irt_rubric_only._rubric_only_derivs)
        grad, hessian = jax.jit(jax.grad(irt_rubric_only._rubric_only_objective)), jax.jit(jax.hessian(irt_rubric_only._rubric_only_objective))
        for _ in range(2):
            y = jnp.asarray(rng.normal(size=10) * 0.4)
            g, h = derivs(y, *args)
            np.testing.assert_allclose(g, grad(y, *args), atol=1e-12)
            np.testing.assert_allclose(h, hessian(y, *args), atol=1e-12)


def test_refits_with_other_query_counts_do_not_recompile():
    a = simulate_judgements(5, [40] * 5, tournament_placements=8, rubric_placements=3)
    b = simulate_judgements(6, [38] * 7, tournament_placements=8, rubric_placements=3)
    fa = bt.fit_windows(a.window_docs, a.window_scores, a.window_query, a.truth.n_docs)
    size = bt_kernel._fit_block_jit._cache_size()
    fb = bt.fit_windows(b.window_docs, b.window_scores, b.window_query, b.truth.n_docs)
    assert bt_kernel._fit_block_jit._cache_size() == size  # 5 and 7 queries both pad to 8, windows to 64
    assert np.isfinite(fb.theta).all() and np.isfinite(fa.theta).all()
    for sim, fit in ((a, fa), (b, fb)):
        q = len(sim.truth.n_docs)
        passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, q, 40)
        irt.fit_2pl_calibration(irt.calibration_cells(np.pad(fit.theta, ((0, 0), (0, 40 - fit.theta.shape[1]))), passes, trials))
        if sim is a:
            size2 = irt_calibration_fit._calibrate_newton._cache_size()
    assert irt_calibration_fit._calibrate_newton._cache_size() == size2


_SHARDED = textwrap.dedent(
    """
    import json, numpy as np, jax
    from rcp_jax.models import bradley_terry as bt, irt
    from rcp_jax.models.simulate import simulate_judgements
    assert len(jax.devices()) == 2, jax.devices()
    sim = simulate_judgements(9, [33, 20, 47, 25, 40], tournament_placements=9, rubric_placements=4)  # two pool-size buckets (32, 48)
    n = sim.truth.n_docs
    one = [jax.devices()[0]]
    sharded = bt.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, n)
    single = bt.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, n, devices=one)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, len(n), int(n.max()))
    cells = irt.calibration_cells(single.theta, passes, trials)
    c2 = irt.fit_2pl_calibration(cells)
    c1 = irt.fit_2pl_calibration(cells, devices=one)
    print(json.dumps({
        "theta": float(np.abs(sharded.theta - single.theta).max()),
        "se": float(np.nanmax(np.abs(sharded.se - single.se))),
        "components": bool((sharded.component == single.component).all()),
        "gamma": float(np.abs(c2.gamma - c1.gamma).max()), "tau": float(np.abs(c2.tau - c1.tau).max()),
        "alpha": float(np.abs(c2.alpha - c1.alpha).max()),
    }))
    """
)


@pytest.mark.slow
def test_sharded_fits_equal_single_device_fits():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _SHARDED], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["theta"] < 1e-5 and out["se"] < 1e-5 and out["components"]
    assert out["gamma"] < 1e-5 and out["tau"] < 1e-5 and out["alpha"] < 1e-5


def test_group_order_equals_three_key_lexsort():
    from rcp_jax.metrics import _group_order

    rng = np.random.default_rng(4)
    for trial in range(400):
        n = int(rng.integers(0, 80))
        group = rng.integers(0, int(rng.integers(1, 7)), n)
        if trial % 3 == 0:
            group = np.sort(group)  # the fast, blocked layout
        score = rng.integers(0, 4, n).astype(float)  # many ties
        score[rng.random(n) < 0.2] = -0.0
        secondary = rng.integers(0, 3, n) if trial % 2 else rng.random(n)
        assert np.array_equal(_group_order(group, score, secondary), np.lexsort((secondary, -score, group)))

"""The CPU Bradley-Terry kernel (:func:`rcp_jax.models.bradley_terry.fit_windows`, one query at a time): its block-level
pair listing gives the statistics of a plain pair loop, the fit does not depend on the order of the windows or
on how queries are split into calls and threads, and float32 reaches the float64 optimum in few Newton
iterations (speed itself is measured by benchmarks/bt_kernel_profile.py, never here)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcp_jax.models import bradley_terry as bt
from rcp_jax.models.bradley_terry import batching as bt_batching
from rcp_jax.models.bradley_terry import kernel as bt_kernel
from rcp_jax.models.simulate import simulate_judgements


@pytest.fixture(scope="module")
def sim():
    # two pool-size buckets (16 and 32), interleaved: a bucket's windows are not one contiguous run of rows
    return simulate_judgements(5, [9, 20, 14, 30, 12], tournament_placements=14)


def _reference_parts(docs, scores):
    """``(both, anti, total)`` of one query by a loop over its window pairs (METHOD section 1 weights)."""
    n = 16
    both, anti, total = np.zeros((n, n)), np.zeros((n, n)), 0.0
    for d, s in zip(docs, scores):
        keep = d >= 0
        d, s = d[keep], s[keep]
        w = len(d)
        for i in range(w):
            for j in range(i + 1, w):
                net = np.clip(np.tanh(0.5 * (s[i] - s[j])), -0.98, 0.98)
                both[d[i], d[j]] += 2.0 / w
                both[d[j], d[i]] += 2.0 / w
                anti[d[i], d[j]] += 2.0 / w * net
                anti[d[j], d[i]] -= 2.0 / w * net
                total += 2.0 / w
    return both / total, anti / total, total


def test_block_pairs_and_query_scatter_equal_a_pair_loop(sim):
    small = [0, 2, 4]  # pools 9, 14, 12
    v = 64
    di = np.full((len(small), v, 10), -1, np.int32)
    sc = np.zeros((len(small), v, 10), np.float32)
    for row, q in enumerate(small):
        keep = sim.window_query == q
        di[row, : keep.sum()] = sim.window_docs[keep]
        sc[row, : keep.sum()] = sim.window_scores[keep]

    @jax.jit
    def parts(di, sc):
        flat, pw, net, total, used = bt_kernel._block_pairs(di, sc, 16)
        out = [bt_kernel._query_scatter(flat[r], pw[r], net[r], used[r], 16, 45) for r in range(len(small))]
        return jnp.concatenate([o[0] for o in out]), jnp.concatenate([o[1] for o in out]), total, used

    both, anti, total, used = (np.asarray(x, np.float64) for x in parts(di, sc))
    for row, q in enumerate(small):
        keep = sim.window_query == q
        assert used[row] == keep.sum()
        ref_both, ref_anti, ref_total = _reference_parts(sim.window_docs[keep], sim.window_scores[keep])
        np.testing.assert_allclose(total[row], ref_total, rtol=1e-6)
        np.testing.assert_allclose(both[row], ref_both, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(anti[row], ref_anti, rtol=1e-5, atol=1e-8)


@pytest.fixture(scope="module")
def grouped(sim):
    return bt.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs)


def test_fit_does_not_depend_on_the_row_layout(sim, grouped):
    args = (sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs)
    # queries in reverse order, each query's windows in their order: the block padding sorts them back
    order = np.argsort(-sim.window_query, kind="stable")
    mixed = bt.fit_windows(sim.window_docs[order], sim.window_scores[order], sim.window_query[order], sim.truth.n_docs)
    for field in ("theta", "se", "component", "n_components", "iterations"):
        np.testing.assert_array_equal(getattr(mixed, field), getattr(grouped, field))
    # one thread or two, blocks built by the workers: the same numbers
    np.testing.assert_array_equal(bt.fit_windows(*args, threads=1).theta, grouped.theta)


def test_float32_fit_reaches_the_float64_optimum_in_few_newton_iterations(sim, grouped):
    # accurate Newton systems from the log-odds start: quadratic convergence at once (0.05-accurate solves
    # took one iteration more on most of these queries)
    assert grouped.iterations.max() <= 3
    small = np.array([0, 2, 4])  # one pool-size bucket: one float64 program
    keep = np.isin(sim.window_query, small)
    f64 = bt.fit_windows(sim.window_docs[keep], sim.window_scores[keep], np.searchsorted(small, sim.window_query[keep]),
                         sim.truth.n_docs[small], dtype=jnp.float64)
    n = f64.theta.shape[1]
    assert np.abs(grouped.theta[small, :n] - f64.theta).max() < 2e-5


def test_one_query_at_a_time_equals_the_whole_batch():
    sim = simulate_judgements(8, [30, 20, 25, 18], tournament_placements=6)  # one pool-size bucket: two compilations
    args = (sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs)
    one = bt.fit_windows(*args, chunk=1)
    batch = bt.fit_windows(*args, chunk=None)
    np.testing.assert_allclose(one.theta, batch.theta, atol=2e-5)
    np.testing.assert_allclose(one.se, batch.se, rtol=1e-4)
    assert np.array_equal(one.component, batch.component)
    assert np.array_equal(one.n_components, batch.n_components)
    assert bt_batching._window_slots(216) == 224 and bt_batching._window_slots(5) == 8

"""Refits of other sizes reuse the compiled BT, 2PL and Rasch kernels (few distinct shapes), and
the padding that makes it so changes no estimate.

* BT on CPU: every call fits a fixed block of queries with a power-of-two number of window slots (at least
  ``MIN_SLOTS``), so fits with 3 or 21 queries, 5 or 30 windows per query, share one compiled program; a
  query's scores are bit-identical whatever else is in the call;
* the 2PL calibration pads queries to at least ``MIN_CAL_QUERIES`` and cells to ``_cell_slots``: small fits
  share one program, and padding queries carry no answers (the result equals the objective's optimum);
* Rasch pads queries and documents: other pool sizes reuse the solver, padded documents change nothing.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcp_jax.models import bradley_terry as bt
from rcp_jax.models import irt
from rcp_jax.models._newton import lm_newton
from rcp_jax.models.bradley_terry import batching as bt_batching
from rcp_jax.models.bradley_terry import kernel as bt_kernel
from rcp_jax.models.irt import calibration_fit as irt_calibration_fit
from rcp_jax.models.simulate import simulate_judgements
from tests.helpers.bt_reference import scipy_bt  # the objective written pair by pair, minimised in float64


@pytest.fixture(scope="module")
def sims():
    # pool sizes 20-30: one pool-size bucket (32); 3 and 21 queries; ~5 and ~30 windows per query
    small = simulate_judgements(11, [24, 20, 30], tournament_placements=2, rubric_placements=3)
    large = simulate_judgements(12, [22, 27, 25, 29, 21, 26, 23] * 3, tournament_placements=10, rubric_placements=3)
    return small, large


def _fit(sim, **kw):
    return bt.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs, **kw)


def test_bt_refits_with_other_query_and_window_counts_reuse_one_program(sims):
    small, large = sims
    assert np.bincount(small.window_query).max() <= 8 and np.bincount(large.window_query).min() >= 20
    first = _fit(large, chunk=1)
    size = bt_kernel._fit_block_jit._cache_size()
    again = _fit(small, chunk=1)
    assert bt_kernel._fit_block_jit._cache_size() == size
    assert np.isfinite(again.theta).all() and np.isfinite(first.theta).all()
    # a query's fit does not depend on the other queries of its call (nor on its row in the block)
    q = 4
    keep = large.window_query == q
    alone = bt.fit_windows(large.window_docs[keep], large.window_scores[keep], np.zeros(keep.sum(), int),
                           large.truth.n_docs[q : q + 1], chunk=1)
    assert bt_kernel._fit_block_jit._cache_size() == size
    n = large.truth.n_docs[q]
    np.testing.assert_array_equal(alone.theta[0, :n], first.theta[q, :n])
    np.testing.assert_array_equal(alone.se[0, :n], first.se[q, :n])
    assert alone.iterations[0] == first.iterations[q]


def test_small_pools_of_any_window_width_share_one_program_and_keep_their_estimates():
    # pools of 4 to 9 documents: windows of 4 to 9 slots, all padded to SMALL_POOL_WIDTH in the 16-document bucket
    fits, sizes = [], []
    for n in (9, 4, 6):
        sim = simulate_judgements(n, [n] * 5, tournament_placements=6, rubric_placements=3)
        assert (sim.window_docs[:, n:] == -1).all() and n < bt.SMALL_POOL_WIDTH
        docs, scores = sim.window_docs[:, :n], sim.window_scores[:, :n]  # a table of n-document windows
        fits.append((docs, scores, sim.window_query, bt.fit_windows(docs, scores, sim.window_query, [n] * 5)))
        sizes.append(bt_kernel._fit_block_jit._cache_size())
    assert sizes[1] == sizes[2] == sizes[0]  # one program for all three widths (the first may have compiled it)
    for docs, scores, query, fit in fits:  # padding slots carry no pair: each query's optimum (float64 L-BFGS)
        n = docs.shape[1]
        for q in range(5):
            ref = scipy_bt(docs[query == q], scores[query == q], n)
            np.testing.assert_allclose(fit.theta[q, :n], ref, atol=1e-4)


def test_bt_slot_buckets_are_coarse_powers_of_two():
    assert [bt_batching._slot_bucket(n) for n in (1, 40, 64, 65, 216, 256, 257)] == [64, 64, 64, 128, 256, 256, 512]
    assert bt.MIN_SLOTS % bt_kernel._WINDOW_GROUP == 0


def _cells(sim, theta):
    q = len(sim.truth.n_docs)
    n = theta.shape[1]
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, q, n)
    return irt.calibration_cells(theta, passes, trials), passes, trials


def test_2pl_small_calibrations_share_one_program_and_padding_changes_nothing(sims):
    small, large = sims
    fits = {}
    for name, sim in (("large", large), ("small", small)):
        fit = _fit(sim)
        theta = np.pad(fit.theta, ((0, 0), (0, 30 - fit.theta.shape[1])))
        cells, _, _ = _cells(sim, theta)
        fits[name] = (cells, irt.fit_2pl_calibration(cells, dtype=jnp.float64))
        if name == "large":
            size = irt_calibration_fit._calibrate_newton._cache_size()
    assert irt_calibration_fit._calibrate_newton._cache_size() == size  # 21 and 3 queries both pad to 64, cells to 64
    cells, cal = fits["small"]
    assert cal.converged
    # the padded fit is the optimum of the unpadded objective: no step of a damped Newton iteration
    # from it (central differences of the public objective) lowers it
    with jax.enable_x64(True):
        args = [jnp.asarray(x) for x in (cells.theta, cells.criterion, cells.passes, cells.trials)]
        x0 = np.concatenate([cal.u, cal.v, cal.t, cal.alpha])
        c, q = len(cal.u), len(cal.t)

        def f(x):
            return irt.calibration_objective(x[:c], x[c : 2 * c], x[2 * c : 2 * c + q], x[2 * c + q :], *args)

        grad = np.asarray(jax.jit(jax.grad(f))(jnp.asarray(x0)))
    assert np.abs(grad).max() < 1e-7


def test_rasch_refits_of_other_pool_sizes_reuse_the_solver_and_padding_changes_nothing(sims):
    small, large = sims
    _, passes, trials = _cells(large, np.zeros((21, 30)))
    th_large, beta_large = irt.fit_rasch(passes[:12], trials[:12], dtype=jnp.float64)  # 12 x 30 -> 16 x 32
    size = lm_newton._cache_size()
    _, p_small, t_small = _cells(small, np.zeros((3, 30)))
    th_small, beta_small = irt.fit_rasch(p_small[:, :25], t_small[:, :25], dtype=jnp.float64)  # 3 x 25 -> 16 x 32
    assert lm_newton._cache_size() == size
    # explicit extra empty documents and queries: the same estimates
    wide = ((0, 2), (0, 2), (0, 0))
    th_wide, beta_wide = irt.fit_rasch(np.pad(p_small[:, :25], wide), np.pad(t_small[:, :25], wide), dtype=jnp.float64)
    assert lm_newton._cache_size() == size
    np.testing.assert_allclose(th_wide[:3, :25], th_small, atol=1e-9)
    np.testing.assert_allclose(beta_wide[:3], beta_small, atol=1e-9)
    assert np.all(th_wide[3:] == 0.0) and np.all(th_wide[:, 25:] == 0.0)
    assert th_large.shape == (12, 30) and np.isfinite(th_large).all() and np.isfinite(beta_large).all()

"""Soft-label Bradley-Terry: agreement with an independent scipy fit, batching, SEs, connectivity, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.models import bradley_terry
from rcp_jax.models.simulate import simulate_judgements
from tests.helpers.bt_reference import scipy_bt


@pytest.fixture(scope="module")
def mixed():
    return simulate_judgements(11, [37, 60, 8, 150, 23], tournament_placements=14)


@pytest.fixture(scope="module")
def mixed_fit(mixed):
    return bradley_terry.fit_windows(mixed.window_docs, mixed.window_scores, mixed.window_query, mixed.truth.n_docs)


def test_batched_map_agrees_with_scipy(mixed, mixed_fit):
    for q, n in enumerate(mixed.truth.n_docs):
        rows = mixed.window_query == q
        ref = scipy_bt(mixed.window_docs[rows], mixed.window_scores[rows], n)
        err = np.abs(mixed_fit.theta[q, :n] - ref).max()
        assert err < 1e-4, (q, n, err)
        assert abs(mixed_fit.theta[q, :n].mean()) < 1e-6
    assert np.all(mixed_fit.n_components == 1)


def test_batched_fit_equals_fitting_each_query_alone(mixed, mixed_fit):
    for q, n in enumerate(mixed.truth.n_docs):
        rows = mixed.window_query == q
        alone = bradley_terry.fit_windows(
            mixed.window_docs[rows], mixed.window_scores[rows], np.zeros(rows.sum(), int), [n]
        )
        np.testing.assert_allclose(alone.theta[0, :n], mixed_fit.theta[q, :n], atol=2e-5)
        np.testing.assert_allclose(alone.se[0, :n], mixed_fit.se[q, :n], rtol=1e-4)


def test_scores_track_truth_and_standard_errors_are_sane(mixed, mixed_fit):
    t = mixed.truth
    for q, n in enumerate(t.n_docs):
        if n < 20:
            continue
        corr = np.corrcoef(mixed_fit.theta[q, :n], t.relevance[q])[0, 1]
        assert corr > 0.9, (q, corr)
        se = mixed_fit.se[q, :n]
        assert np.all((se > 0.1) & (se < 2.0))
    assert np.isnan(mixed_fit.se[2, 8:]).all()  # padding


def test_standard_errors_shrink_with_more_windows():
    few = simulate_judgements(5, [40], tournament_placements=6)
    many = simulate_judgements(5, [40], tournament_placements=24)
    se_few = bradley_terry.fit_windows(few.window_docs, few.window_scores, few.window_query, [40]).se[0]
    se_many = bradley_terry.fit_windows(many.window_docs, many.window_scores, many.window_query, [40]).se[0]
    assert np.median(se_many) < 0.7 * np.median(se_few)


def test_float64_option_matches_float32(mixed, mixed_fit):
    import jax.numpy as jnp

    f64 = bradley_terry.fit_windows(mixed.window_docs, mixed.window_scores, mixed.window_query, mixed.truth.n_docs, dtype=jnp.float64)
    np.testing.assert_allclose(f64.theta, mixed_fit.theta, atol=5e-5)


def test_connectivity_reports_components():
    docs = np.array([[0, 1, 2, -1], [1, 2, -1, -1], [3, 4, -1, -1], [5, 6, 7, 5 * 0 + 8]])
    scores = np.array([[1.0, 0.0, -1.0, 0], [2.0, 0.0, 0, 0], [1.0, 0.0, 0, 0], [3.0, 1.0, 0.0, -1.0]])
    fit = bradley_terry.fit_windows(docs, scores, np.zeros(4, int), [9])
    assert fit.n_components[0] == 3
    assert list(fit.component[0]) == [0, 0, 0, 1, 1, 2, 2, 2, 2]


def _long(sim):
    rows = []
    for w, (docs, sc, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query)):
        rows += [(f"q{q}", f"w{w}", f"q{q}-d{d}", s) for d, s in zip(docs, sc) if d >= 0]
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])


def test_dataframe_api_matches_array_fit(mixed, mixed_fit):
    bt = rcp_jax.fit_bradley_terry(_long(mixed))
    assert list(bt.columns) == ["query_id", "doc_id", "theta", "se", "component"]
    assert bt.attrs["n_components"] == {f"q{q}": 1 for q in range(5)}
    for row in bt.sample(40, random_state=0).itertuples():
        q, d = int(row.query_id[1:]), int(row.doc_id.split("-d")[1])
        assert abs(row.theta - mixed_fit.theta[q, d]) < 2e-5  # same fit, other document order (float32)


def test_dataframe_api_warns_on_disconnected_graph():
    ws = pd.DataFrame({"query_id": "q7", "window_id": ["a", "a", "b", "b"], "doc_id": ["x", "y", "z", "u"],
                       "score": [1.0, 0.0, 1.0, 0.0]})
    with pytest.warns(UserWarning, match=r"'q7' \(2 components\)"):
        bt = rcp_jax.fit_bradley_terry(ws)
    assert sorted(bt.component) == [0, 0, 1, 1]


@pytest.mark.parametrize(
    "rows, message",
    [
        ([("q1", "w1", "a", 1.0), ("q1", "w1", "a", 0.0), ("q1", "w1", "b", 0.0)], r"'a' appears more than once in window 'w1' of query 'q1'"),
        ([("q1", "w1", "a", 1.0), ("q1", "w1", "b", float("nan"))], r"document 'b' in window 'w1' of query 'q1'"),
        ([("q1", "w1", "a", 1.0), ("q1", "w1", "b", "high")], r"document 'b' in window 'w1' of query 'q1'"),
        ([("q1", "w1", "a", 1.0), ("q1", "w1", "b", 0.0), ("q2", "w9", "c", 1.0)], r"window 'w9' of query 'q2' has a single document"),
    ],
)
def test_bad_window_scores_are_refused_with_ids(rows, message):
    ws = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    with pytest.raises(rcp_jax.DataError, match=message):
        rcp_jax.fit_bradley_terry(ws)


def test_missing_columns_are_named():
    with pytest.raises(rcp_jax.DataError, match="window_id"):
        rcp_jax.fit_bradley_terry(pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": [1.0]}))


def test_float64_fit_on_worker_threads_stays_float64():
    """jax.enable_x64 is thread-local: the per-query path's worker threads must fit in float64 too
    (they once ran in float32, hit the iteration cap and returned float32-accurate scores)."""
    import jax.numpy as jnp

    from rcp_jax.models import bradley_terry, simulate

    sim = simulate.simulate_judgements(2, [12, 9, 15])
    nd = sim.truth.n_docs
    threaded = bradley_terry.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, nd,
                                         dtype=jnp.float64, chunk=1, threads=2)
    batch = bradley_terry.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, nd,
                                      dtype=jnp.float64, chunk=None)
    assert threaded.iterations.max() < 20
    np.testing.assert_allclose(threaded.theta, batch.theta, atol=1e-9)

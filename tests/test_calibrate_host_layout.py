"""Calibrate's cheaper host work gives the same bits as the forms it replaced.

* :func:`rcp_jax.metrics.gain` in cache-sized blocks with a branch-free sigmoid, against the one-shot
  float64[n, C] form (special values, scalars, 1 to 12 criteria);
* :func:`models.irt.criterion_major_cells` (the compiled solve's layout straight from per-document rows)
  against :func:`models.irt._criterion_major` of the dense cells;
* the degenerate-data flags with every document judged (no row copies) against the masked path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models import irt
from rcp_jax import calibration
from rcp_jax.metrics import gain


def _reference_gain(theta, gamma, beta):
    z = gamma * (np.asarray(theta, dtype=np.float64)[..., None] - beta)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return (gamma * out).sum(-1) / gamma.sum()


@pytest.mark.parametrize("c", [1, 3, 5, 8, 12])
def test_gain_blocks_match_the_one_shot_form_bit_for_bit(c):
    rng = np.random.default_rng(c)
    theta = rng.normal(size=40_000) * 4.0
    theta[:7] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 800.0, -800.0]
    gamma, beta = rng.uniform(0.2, 2.0, c), rng.normal(size=c) * 2.0
    np.testing.assert_array_equal(gain(theta, gamma, beta), _reference_gain(theta, gamma, beta))
    grid = theta[7:7 + 600].reshape(20, 30)
    np.testing.assert_array_equal(gain(grid, gamma, beta), _reference_gain(grid, gamma, beta))
    one = gain(0.3, gamma, beta)
    assert isinstance(one, np.float64) and one == _reference_gain(0.3, gamma, beta)


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
    ref = irt._criterion_major(irt.calibration_cells(dense_theta, dense_passes, dense_trials), q_pad, bucket=True,
                               dtype=np.dtype(dtype))
    for got, want in zip((laid.theta, laid.passes, laid.trials), ref):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.broadcast_to(got, want.shape), want)
    assert laid.n_queries == q and laid.n_criteria == c


def test_flags_with_every_document_judged_match_the_masked_path():
    rng = np.random.default_rng(4)
    n, k, n_q = 3_000, 3, 40
    q_code = np.sort(rng.integers(0, n_q, size=n))
    names = [f"q{i:02d}" for i in range(n_q)]
    theta = rng.normal(size=n)
    placements = rng.integers(1, 4, size=n).astype(float)
    passes = np.minimum(rng.integers(0, 4, size=(n, k)), placements[:, None]).astype(float)
    passes[q_code == 3] = 0.0  # a query whose answers all fail
    passes[q_code == 5] = placements[q_code == 5, None]  # one whose answers all pass
    tau = pd.Series(np.ones(n_q), index=names)
    every = calibration._flags_by_code(q_code, names, theta, placements, passes, ["C1", "C2", "C3"], tau, None)
    # the same documents with unjudged ones (placements 0, passes NaN) among them take the masked path
    at = np.arange(0, n, 7)
    q2, theta2 = np.insert(q_code, at, q_code[at]), np.insert(theta, at, theta[at])
    placements2 = np.insert(placements, at, 0.0)
    passes2 = np.insert(passes, at, np.nan, axis=0)
    masked = calibration._flags_by_code(q2, names, theta2, placements2, passes2, ["C1", "C2", "C3"], tau, None)
    kinds = {f["kind"]: f["ids"] for f in every}
    assert kinds["query_all_fail"] == ["q03"] and kinds["query_all_pass"] == ["q05"]
    assert [(f["kind"], f["ids"], f["message"]) for f in every] == [(f["kind"], f["ids"], f["message"]) for f in masked]
    # a criterion nobody passes, counted over the judged documents only
    passes[:, 2] = 0.0
    passes2[~np.isnan(passes2[:, 0]), 2] = 0.0
    every = calibration._flags_by_code(q_code, names, theta, placements, passes, ["C1", "C2", "C3"], tau, None)
    masked = calibration._flags_by_code(q2, names, theta2, placements2, passes2, ["C1", "C2", "C3"], tau, None)
    assert {f["kind"]: f["ids"] for f in every}["criterion_never_passed"] == ["C3"]
    assert [(f["kind"], f["ids"], f["message"]) for f in every] == [(f["kind"], f["ids"], f["message"]) for f in masked]


def test_fused_evaluation_equals_objective_and_moments():
    """One pass (:func:`models.irt._cm_eval`) gives the objective of :func:`_cm_objective` and the moments of
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
        total, has = irt._cell_totals(jnp.asarray(passes), full[1])
        want_f = irt._cm_objective(u, v, t, alpha, full[0], jnp.asarray(passes), full[1], has, 1e-4, total)
        want_m = irt._moments(u, v, t, alpha, full[0], jnp.asarray(passes), full[1])
        for th, tr in ((theta, trials), full):
            th, tr = jnp.asarray(th), jnp.asarray(tr)
            assert float(irt._cell_totals(jnp.asarray(passes), tr)[0]) == float(total)
            f, m = jax.jit(irt._cm_eval)(u, v, t, alpha, th, jnp.asarray(passes), tr, has, 1e-4, total)
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


def test_order_by_code_and_id_in_chunks_equals_one_sort(monkeypatch):
    """Codes that never decrease are sorted in chunks of whole codes on the id pool: the one-sort order."""
    from rcp_jax.data import table_checks

    rng = np.random.default_rng(7)
    codes = np.sort(rng.integers(0, 300, size=5_000))
    ids = pd.Series([f"d{v}" for v in rng.integers(0, 400, size=len(codes))], dtype="str")  # ties kept stable
    want = sorted(range(len(codes)), key=lambda i: (codes[i], ids[i]))
    monkeypatch.setattr(table_checks, "CHUNK_ROWS", 256)  # many chunks
    assert table_checks.order_by_code_and_id(codes, ids).tolist() == want
    shuffled = rng.permutation(len(codes))  # codes out of order: one sort
    want = sorted(range(len(codes)), key=lambda i: (codes[shuffled][i], ids[shuffled].iloc[i]))
    assert table_checks.order_by_code_and_id(codes[shuffled], ids[shuffled].reset_index(drop=True)).tolist() == want


@pytest.mark.parametrize("k, repeats", [(3, 1), (5, 1), (6, 1), (2, 1100)])
def test_counts_by_chunks_with_packed_answers_equal_the_general_path(k, repeats):
    """Answers packed into one number per row (<= 5 criteria, < 1,024 placements of a document) give the counts
    of one bincount per criterion; more criteria or placements take the per-criterion bincounts."""
    from rcp_jax.data.table_checks import id_codes, run_heads

    rng = np.random.default_rng(k)
    queries = [f"q{i:03d}" for i in range(40)]
    bt = pd.DataFrame({"query_id": np.repeat(queries, 12), "doc_id": [f"{q}-d{j}" for q in queries for j in range(12)],
                       "theta": rng.normal(size=480)}).astype({"query_id": "str", "doc_id": "str"})
    rows = np.sort(rng.integers(0, 480, size=3_000))
    rows = np.concatenate([rows[:5], np.full(repeats, rows[5]), rows[6:]])  # one document placed `repeats` times
    ans = pd.DataFrame({"query_id": bt["query_id"].to_numpy()[rows], "doc_id": bt["doc_id"].to_numpy()[rows]})
    for c in range(k):
        ans[f"C{c + 1}"] = rng.integers(0, 2, size=len(rows)).astype(np.int8)
    ans = ans.astype({"query_id": "str", "doc_id": "str"})
    crit = [f"C{c + 1}" for c in range(k)]
    heads = np.flatnonzero(run_heads(bt["query_id"]))
    head_q, q_names = id_codes(bt["query_id"].take(heads))
    got = calibration._counts_by_chunks(bt, heads, len(q_names), ans, crit, q_names)
    assert got is not None
    bt_q = np.repeat(head_q, np.diff(np.append(heads, len(bt))))
    want = calibration._counts_by_codes(bt, bt_q, q_names, ans, crit)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0].max() >= repeats


def test_validate_answers_leaves_the_callers_frame_untouched():
    answers = pd.DataFrame({"query_id": ["q", "q", "r"], "doc_id": [1, 2, 3], "C1": np.array([0, 1, 1], dtype=np.int64),
                            "C2": np.array([1, 0, 1], dtype=np.int8), "extra": ["x", "y", "z"]})
    before = answers.copy()
    df, crit = calibration.validate_answers(answers)
    assert crit == ["C1", "C2"] and list(df.columns) == ["query_id", "doc_id", "C1", "C2"]
    assert df["C1"].dtype == np.int8 and df["C2"].dtype == np.int8 and df["doc_id"].tolist() == ["1", "2", "3"]
    df.loc[0, "C2"] = 0
    df.loc[1, "C1"] = 0
    pd.testing.assert_frame_equal(answers, before)

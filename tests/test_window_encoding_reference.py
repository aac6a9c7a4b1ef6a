"""The vectorised table -> arrays encoding and the one-query-at-a-time BT kernel give the same
answers as plain references (speed itself is measured by benchmarks/public_api_speed.py, never here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models import bradley_terry
from models.simulate import simulate_judgements
from rcp_jax.tournament import encode_window_scores, first_codes, fit_bradley_terry, sorted_codes


@pytest.mark.parametrize("upper", [40, 10**9])  # dense arrays / hash table
def test_codes_equal_pandas(upper):
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 40, size=300) * (upper // 40)
    codes, n = first_codes(keys, upper)
    ref, uniq = pd.factorize(keys)
    assert n == len(uniq) and np.array_equal(codes, ref)
    codes, n = sorted_codes(keys, upper)
    ref, uniq = pd.factorize(keys, sort=True)
    assert n == len(uniq) and np.array_equal(codes, ref)


def _reference_encoding(ws: pd.DataFrame):
    """Plain-Python encoding: windows sorted by (query, window id), slots in row order, each query's
    documents numbered by first appearance in that order."""
    windows = {}
    for r in ws.itertuples(index=False):
        windows.setdefault((str(r.query_id), str(r.window_id)), []).append((str(r.doc_id), float(r.score)))
    queries = sorted({q for q, _ in windows})
    numbering = {q: {} for q in queries}
    docs, scores, wq = [], [], []
    for q, w in sorted(windows):
        row = []
        for d, s in windows[(q, w)]:
            row.append(numbering[q].setdefault(d, len(numbering[q])))
        docs.append(row)
        scores.append([s for _, s in windows[(q, w)]])
        wq.append(queries.index(q))
    width = max(map(len, docs))
    di = np.full((len(docs), width), -1)
    sc = np.zeros((len(docs), width))
    for i, (d, s) in enumerate(zip(docs, scores)):
        di[i, : len(d)] = d
        sc[i, : len(s)] = s
    return di, sc, np.array(wq), np.array([len(numbering[q]) for q in queries])


def _table(shared_ids: bool) -> pd.DataFrame:
    sim = simulate_judgements(4, [9, 14, 6], tournament_placements=4)
    rows = []
    for w, (docs, sc, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query)):
        for d, s in zip(docs, sc):
            if d >= 0:
                rows.append((f"q{2 - q}", f"w{(7 * w) % 11}-{w}", f"d{d}" if shared_ids else f"q{q}:d{d}", s))
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])


@pytest.mark.parametrize("shared_ids", [False, True])
def test_encoding_equals_reference_whatever_the_row_layout(shared_ids):
    ws = _table(shared_ids)
    ref = _reference_encoding(ws)
    # contiguous windows in input order; then the windows' rows interleaved (each window keeps its order)
    key = ws.groupby(["query_id", "window_id"], sort=False).cumcount()
    interleaved = ws.iloc[np.argsort(key.to_numpy(), kind="stable")]
    for table in (ws, interleaved):
        enc = encode_window_scores(table)
        got = (enc.doc_index, enc.scores, enc.window_query, enc.n_docs)
        for a, b in zip(got, ref):
            assert np.array_equal(a, b)
        assert list(enc.query_names) == sorted(ws["query_id"].unique())
        # pairs come back in order of first appearance in the input
        pairs = list(zip(enc.query_names.take(enc.pair_query), enc.pair_doc_id))
        assert pairs == list(table[["query_id", "doc_id"]].drop_duplicates().itertuples(index=False, name=None))


def test_dataframe_fit_does_not_depend_on_row_layout_or_id_sharing():
    ws = _table(shared_ids=True)
    key = ws.groupby(["query_id", "window_id"], sort=False).cumcount()
    a = fit_bradley_terry(ws)
    b = fit_bradley_terry(ws.iloc[np.argsort(key.to_numpy(), kind="stable")])
    key_cols = ["query_id", "doc_id"]
    pd.testing.assert_frame_equal(a.sort_values(key_cols).reset_index(drop=True),
                                  b.sort_values(key_cols).reset_index(drop=True), check_exact=True)
    # the same documents with query-specific ids: the same fit
    c = fit_bradley_terry(ws.assign(doc_id=ws["query_id"] + ":" + ws["doc_id"]))
    np.testing.assert_array_equal(c["theta"].to_numpy(), a["theta"].to_numpy())


def test_one_query_at_a_time_equals_the_whole_batch():
    sim = simulate_judgements(8, [30, 20, 25, 18], tournament_placements=6)  # one pool-size bucket: two compilations
    args = (sim.window_docs, sim.window_scores, sim.window_query, sim.truth.n_docs)
    one = bradley_terry.fit_windows(*args, chunk=1)
    batch = bradley_terry.fit_windows(*args, chunk=None)
    np.testing.assert_allclose(one.theta, batch.theta, atol=2e-5)
    np.testing.assert_allclose(one.se, batch.se, rtol=1e-4)
    assert np.array_equal(one.component, batch.component)
    assert np.array_equal(one.n_components, batch.n_components)
    assert bradley_terry._window_slots(216) == 224 and bradley_terry._window_slots(5) == 8

"""The public Bradley-Terry fit encodes the table in chunks of whole queries
while a worker thread fits the chunks already encoded. Chunks are forced small here (a few queries each) and
the result is checked against the whole-table path bit for bit; refusals must name the same row as before."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from models import bradley_terry
from models.simulate import simulate_judgements
from rcp_jax import tournament
from rcp_jax.errors import DataError


@pytest.fixture(scope="module")
def table():
    sim = simulate_judgements(7, [9, 14, 6, 11, 8, 12, 5], tournament_placements=4, rubric_placements=3)
    rows = [(f"q{q}", f"w{w % 5}-{w}", f"q{q}:d{d}", s)
            for w, (docs, sc, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query))
            for d, s in zip(docs, sc) if d >= 0]
    ws = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    # queries one run of rows each, in an order that is not sorted by id; windows of mixed widths
    order = np.argsort(ws["query_id"].map(lambda q: -int(q[1:])).to_numpy(), kind="stable")
    ws = ws.iloc[order].reset_index(drop=True)
    drop = ws.groupby("window_id").cumcount().to_numpy() == 3
    drop &= ws.groupby("window_id")["doc_id"].transform("size").to_numpy() > 3
    return ws.loc[~drop].reset_index(drop=True)


def _whole(monkeypatch, fun):
    """``fun()`` with the table encoded at once (no chunks)."""
    with monkeypatch.context() as m:
        m.setattr(tournament, "PIPE_MIN_ROWS", 0)
        m.setattr(tournament, "PIPE_FIRST_ROWS", 1 << 40)
        return fun()


def _chunked(monkeypatch, fun, first: int = 20, rows: int = 40):
    with monkeypatch.context() as m:
        m.setattr(tournament, "PIPE_MIN_ROWS", 0)
        m.setattr(tournament, "PIPE_FIRST_ROWS", first)
        m.setattr(tournament, "PIPE_ROWS", rows)
        return fun()


def test_query_cuts_fall_on_query_boundaries(table):
    cuts = tournament._query_cuts(table["query_id"], 20, 40)
    assert cuts is not None and len(cuts) > 3 and cuts[0] == 0 and cuts[-1] == len(table)
    q = table["query_id"].to_numpy()
    for c in cuts[1:-1]:
        assert q[c] != q[c - 1]
        assert q[c] not in set(q[:c])
    assert tournament._query_cuts(table["query_id"], 1 << 40, 40) is None
    assert tournament._query_cuts(table["query_id"].astype(object), 20, 40) is None


def test_small_tables_are_encoded_whole(table, monkeypatch):
    monkeypatch.setattr(tournament, "PIPE_FIRST_ROWS", 20)
    monkeypatch.setattr(tournament, "PIPE_ROWS", 40)
    assert tournament._fit_pipelined(table, 1e-4, np.float32) is None
    monkeypatch.setattr(tournament, "PIPE_MIN_ROWS", 0)
    assert len(tournament._fit_pipelined(table, 1e-4, np.float32)) > 3


@pytest.mark.parametrize("float64", [False, True])
def test_pipelined_fit_is_the_whole_table_fit_bit_for_bit(table, monkeypatch, float64):
    whole = _whole(monkeypatch, lambda: rcp_jax.fit_bradley_terry(table, float64=float64))
    for first, rows in ((20, 40), (1, 1), (200, 300)):
        got = _chunked(monkeypatch, lambda: rcp_jax.fit_bradley_terry(table, float64=float64), first, rows)
        pd.testing.assert_frame_equal(got, whole, check_exact=True)
        assert list(got.attrs["n_components"].items()) == list(whole.attrs["n_components"].items())


def test_chunk_fits_match_the_whole_fit_per_query(table):
    """theta, SE, components and Newton iterations of each query do not depend on the chunk it is fitted in."""
    whole = tournament.encode_window_scores(table)
    fit = bradley_terry.fit_windows(whole.doc_index, whole.scores, whole.window_query, whole.n_docs)
    row = {q: i for i, q in enumerate(whole.query_names)}
    cuts = tournament._query_cuts(table["query_id"], 20, 40)
    for a, b in zip(cuts[:-1], cuts[1:]):
        part = tournament.encode_window_scores(table.iloc[a:b])
        got = bradley_terry.fit_windows(part.doc_index, part.scores, part.window_query, part.n_docs)
        idx = np.array([row[q] for q in part.query_names])
        n = got.theta.shape[1]
        assert np.array_equal(got.theta, fit.theta[idx, :n])
        assert np.array_equal(got.se, fit.se[idx, :n], equal_nan=True)
        assert np.array_equal(got.component, fit.component[idx, :n])
        assert np.array_equal(got.iterations, fit.iterations[idx])
        assert np.array_equal(got.n_components, fit.n_components[idx])


def test_disconnected_query_warns_the_same(table, monkeypatch):
    ws = table.copy()
    last = ws["query_id"].iloc[-1]
    rows = ws["query_id"] == last
    ws.loc[rows, "window_id"] = ws.loc[rows, "window_id"] + "x"
    extra = pd.DataFrame({"query_id": last, "window_id": "island", "doc_id": ["new-a", "new-b"], "score": [1.0, 0.0]})
    ws = pd.concat([ws, extra], ignore_index=True)
    ws["query_id"] = ws["query_id"].astype(table["query_id"].dtype)

    def fit():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = rcp_jax.fit_bradley_terry(ws)
        return out, [str(w.message) for w in caught]

    whole, msgs = _whole(monkeypatch, fit)
    got, got_msgs = _chunked(monkeypatch, fit)
    pd.testing.assert_frame_equal(got, whole, check_exact=True)
    assert got_msgs == msgs and any("disconnected" in m for m in msgs)


def test_query_in_two_chunks_falls_back_to_the_whole_table(table, monkeypatch):
    first = table["query_id"].iloc[0]
    ws = pd.concat([table, table[table["query_id"] == first].assign(window_id=lambda d: d["window_id"] + "-again")],
                   ignore_index=True)
    ws["query_id"] = ws["query_id"].astype(table["query_id"].dtype)
    whole = _whole(monkeypatch, lambda: rcp_jax.fit_bradley_terry(ws))
    got = _chunked(monkeypatch, lambda: rcp_jax.fit_bradley_terry(ws))
    pd.testing.assert_frame_equal(got, whole, check_exact=True)


def _refusal(monkeypatch, ws, chunked: bool) -> str:
    run = _chunked if chunked else _whole
    with pytest.raises(DataError) as err:
        run(monkeypatch, lambda: rcp_jax.fit_bradley_terry(ws))
    return str(err.value)


@pytest.mark.parametrize("where", ["first", "last"])
def test_refusals_name_the_same_row(table, monkeypatch, where):
    at = 2 if where == "first" else len(table) - 3
    cases = []
    bad = table.copy()
    bad.loc[at, "score"] = np.nan
    cases.append(bad)
    bad = table.copy()
    bad.loc[at, "doc_id"] = bad.loc[at - 1, "doc_id"]  # a document twice in its window (rows of a window adjoin)
    cases.append(bad)
    bad = table.copy()
    bad.loc[at, "window_id"] = "lonely"  # a window of one document
    cases.append(bad)
    bad = table.copy()
    bad.loc[at, "doc_id"] = None
    cases.append(bad)
    # two faults in different chunks: the whole-table order of checks decides which is named
    bad = table.copy()
    bad.loc[2, "window_id"] = "lonely"
    bad.loc[len(table) - 3, "score"] = np.inf
    cases.append(bad)
    for ws in cases:
        msg = _refusal(monkeypatch, ws, chunked=False)
        assert _refusal(monkeypatch, ws, chunked=True) == msg

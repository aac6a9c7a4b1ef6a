"""Rubric answers -> placement and pass counts of the BT rows (:func:`rcp_jax.encoding.answers.answer_counts`,
through :func:`rcp_jax.calibrate`): the counts of pandas' groupby, whatever the order and dtype of the rows and
with document ids shared across queries; answers without a BT score and documents with two are refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.models.simulate import simulate_judgements
from rcp_jax.encoding.answers import answer_counts
from rcp_jax.encoding.ids import id_codes, run_starts

CRITERIA = ["C1", "C2", "C3", "C4", "C5"]


@pytest.fixture(scope="module")
def tables():
    sim = simulate_judgements(11, [9, 14, 6], tournament_placements=4)
    ws = pd.DataFrame([(f"q{2 - q}", f"w{w}", f"q{q}:d{d}", s)
                       for w, (docs, sc, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query))
                       for d, s in zip(docs, sc) if d >= 0], columns=["query_id", "window_id", "doc_id", "score"])
    ans = pd.DataFrame({"query_id": [f"q{2 - q}" for q in sim.rubric_query],
                        "doc_id": [f"q{q}:d{d}" for q, d in zip(sim.rubric_query, sim.rubric_doc)]})
    for c in range(sim.rubric_answers.shape[1]):
        ans[f"C{c + 1}"] = sim.rubric_answers[:, c].astype(np.int8)
    bt = rcp_jax.fit_bradley_terry(ws)
    return bt, ans


def _counts(bt: pd.DataFrame, ans: pd.DataFrame):
    starts = run_starts(bt["query_id"])
    bt_q, q_names = id_codes(bt["query_id"])
    return answer_counts(bt, starts, bt_q, q_names, ans, CRITERIA)


def _groupby_counts(bt: pd.DataFrame, ans: pd.DataFrame):
    per = ans.groupby(["query_id", "doc_id"]).agg(n=("C1", "size"), **{c: (c, "sum") for c in CRITERIA})
    per = per.reindex(pd.MultiIndex.from_frame(bt[["query_id", "doc_id"]].astype(str))).fillna(0)
    return per["n"].to_numpy(), per[CRITERIA].to_numpy()


def test_counts_equal_a_groupby(tables):
    bt, ans = tables
    ans = ans[~ans["doc_id"].isin(bt["doc_id"].iloc[[2, 5, 20]])]  # three documents never placed
    placements, passes = _counts(bt, ans)
    want_n, want_passes = _groupby_counts(bt, ans)
    np.testing.assert_array_equal(placements, want_n)
    np.testing.assert_array_equal(passes, want_passes)
    assert placements.sum() == len(ans) and (placements == 0).sum() == 3


def test_counts_do_not_depend_on_the_order_or_dtype_of_the_rows(tables):
    bt, ans = tables
    placements, passes = _counts(bt, ans)
    rng = np.random.default_rng(0)
    shuffled = ans.iloc[rng.permutation(len(ans))]
    for table in (shuffled, shuffled.astype({"query_id": "category", "doc_id": "category"}),
                  shuffled.astype({"query_id": object, "doc_id": "str"})):
        got = _counts(bt, table)
        np.testing.assert_array_equal(got[0], placements)
        np.testing.assert_array_equal(got[1], passes)
    order = rng.permutation(len(bt))
    got = _counts(bt.iloc[order].reset_index(drop=True), ans)
    np.testing.assert_array_equal(got[0], placements[order])
    np.testing.assert_array_equal(got[1], passes[order])


def test_document_ids_shared_across_queries_are_matched_by_their_query(tables):
    bt, ans = tables
    strip = {"doc_id": lambda t: t["doc_id"].str.split(":").str[1]}  # "d3" in every query
    shared_bt, shared_ans = bt.assign(**strip), ans.assign(**strip)
    got = _counts(shared_bt, shared_ans)
    want = _counts(bt, ans)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    cal = rcp_jax.calibrate(shared_bt, shared_ans.iloc[::-1])
    np.testing.assert_array_equal(cal.documents["gain"].to_numpy(), rcp_jax.calibrate(bt, ans).documents["gain"].to_numpy())


def test_calibrate_refuses_orphan_answers_and_two_scores(tables):
    bt, ans = tables
    orphan = ans.copy()
    orphan.loc[[3, 8], "doc_id"] = ["nowhere", "nowhere"]
    orphan.loc[9, "query_id"] = "q9"
    with pytest.raises(rcp_jax.CalibrationError, match=r"rubric answers for document 'nowhere' of query "
                                                       rf"'{ans.query_id[3]}' have no BT score \(2 such documents\)"):
        rcp_jax.calibrate(bt, orphan)
    twice = pd.concat([bt, bt.iloc[[4]]])
    with pytest.raises(rcp_jax.DataError, match=rf"document '{bt.doc_id[4]}' of query '{bt.query_id[4]}' has two BT"):
        rcp_jax.calibrate(twice, ans)
    # the two scores of a document of the same id in another query are no duplicate
    strip = {"doc_id": lambda t: t["doc_id"].str.split(":").str[1]}
    assert len(rcp_jax.calibrate(bt.assign(**strip), ans.assign(**strip)).documents) == len(bt)
    with pytest.raises(rcp_jax.DataError, match=r"criterion C2 of document .* is 2; answers must be 0 or 1"):
        rcp_jax.calibrate(bt, ans.assign(C2=ans["C2"].astype(np.int64).where(ans.index != 6, 2)))


def _same(a: rcp_jax.Calibration, b: rcp_jax.Calibration, sort: bool = False) -> None:
    docs_a, docs_b, q_a, q_b = a.documents, b.documents, a.queries, b.queries
    if sort:
        docs_a, docs_b = (d.sort_values(["query_id", "doc_id"]).reset_index(drop=True) for d in (docs_a, docs_b))
        q_a, q_b = (q.sort_values("query_id").reset_index(drop=True) for q in (q_a, q_b))
    pd.testing.assert_frame_equal(docs_a, docs_b, check_exact=True)
    pd.testing.assert_frame_equal(q_a, q_b, check_exact=True)
    assert np.array_equal(a.gamma, b.gamma) and np.array_equal(a.beta, b.beta)


def test_calibrate_does_not_depend_on_the_order_or_dtype_of_the_rows(tables):
    bt, ans = tables
    ref = rcp_jax.calibrate(bt, ans)
    docs = ref.documents.set_index(["query_id", "doc_id"])
    want_n, want_passes = _groupby_counts(bt, ans)
    np.testing.assert_array_equal(docs["count_gain"].to_numpy(), want_passes.sum(axis=1) / (5 * want_n))
    rng = np.random.default_rng(0)
    shuffled = ans.iloc[rng.permutation(len(ans))]
    _same(rcp_jax.calibrate(bt, shuffled), ref)
    _same(rcp_jax.calibrate(bt.iloc[rng.permutation(len(bt))], ans), ref, sort=True)
    _same(rcp_jax.calibrate(bt.astype({"doc_id": object}), shuffled.astype({"query_id": "category", "doc_id": "category"})), ref)


def test_counts_in_blocks_of_queries_equal_the_general_path(tables, monkeypatch):
    from rcp_jax.encoding import answers as module

    bt, ans = tables
    strip = {"doc_id": lambda t: t["doc_id"].str.split(":").str[1].astype("str")}
    took = []
    blocks = module._counts_by_blocks
    monkeypatch.setattr(module, "_counts_by_blocks", lambda *a: took.append(blocks(*a) is not None) or blocks(*a))
    # (BT rows, answers, BT rows per block, whether the blocks apply)
    cases = [(bt, ans, 8, True), (bt, ans, 1 << 14, True),
             (bt, ans[ans["query_id"] != ans["query_id"].iloc[0]], 8, True),  # a query with BT scores, no answers
             (bt, ans.sample(frac=1.0, random_state=0), 8, False),  # answers not grouped by query
             (bt.iloc[::-1].reset_index(drop=True), ans, 8, False),  # queries in another order
             (bt.assign(**strip), ans.assign(**strip), 1, True),  # the same doc ids in every query: one per block
             (bt.assign(**strip), ans.assign(**strip), 1 << 14, False),  # ... several queries in a block
             (bt, ans.astype({"doc_id": object}), 8, False)]
    for b, a, rows, in_blocks in cases:
        monkeypatch.setattr(module, "BLOCK_BT_ROWS", rows)
        took.clear()
        got = _counts(b, a)
        want_n, want_passes = _groupby_counts(b, a)
        np.testing.assert_array_equal(got[0], want_n)
        np.testing.assert_array_equal(got[1], want_passes)
        assert took == [in_blocks]


def test_blocks_leave_the_refusals_to_the_general_path(tables, monkeypatch):
    from rcp_jax.encoding import answers as module

    bt, ans = tables
    monkeypatch.setattr(module, "BLOCK_BT_ROWS", 8)
    q = bt["query_id"].iloc[-1]
    twice = pd.concat([bt, bt[bt["query_id"] == q].iloc[:1]], ignore_index=True)  # still one run per query
    with pytest.raises(rcp_jax.DataError, match=rf"document '{bt[bt.query_id == q].doc_id.iloc[0]}' of query '{q}' "
                                                "has two BT scores"):
        rcp_jax.calibrate(twice, ans)
    orphan = ans.copy()
    orphan.loc[len(ans) - 2, "doc_id"] = "nowhere"  # in the last block
    with pytest.raises(rcp_jax.CalibrationError, match="'nowhere' .*have no BT score"):
        rcp_jax.calibrate(bt, orphan)

"""The ``trec_eval`` protocol equals pytrec_eval's ``ndcg_cut_k`` to 1e-12 on heavily tied runs: graded qrels
(negative grades too), ranked documents without a qrel, queries of the run without qrels, and doc ids whose
order differs between numeric and string comparison ("10" < "9") or that are not ASCII."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rcp_jax.evaluation import evaluate
from rcp_jax.metrics import PROTOCOLS, score_query

pytrec_eval = pytest.importorskip("pytrec_eval")

DOCS = ["9", "10", "100", "a", "B", "b", "é", "z", "ß", "日本", "d-1", "d_1"]
QUERIES = ["q1", "q2", "q3", "10"]


@st.composite
def tied_collections(draw):
    """(run dict, qrels dict): 3 distinct scores at most per query, so most documents tie."""
    run, qrels = {}, {}
    for q in QUERIES:
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=len(DOCS), unique=True))
        run[q] = {d: float(draw(st.integers(0, 2))) for d in docs}
        if draw(st.booleans()) or q == "q1":  # some queries of the run have no qrels at all
            judged = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=len(DOCS), unique=True))
            qrels[q] = {d: draw(st.integers(-1, 3)) for d in judged}
    return run, qrels


def _tables(run: dict, qrels: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    r = pd.DataFrame([("s", q, d, s) for q, ds in run.items() for d, s in ds.items()],
                     columns=["system", "query_id", "doc_id", "score"])
    g = pd.DataFrame([(q, d, float(v)) for q, ds in qrels.items() for d, v in ds.items()],
                     columns=["query_id", "doc_id", "grade"])
    return r, g


def test_trec_eval_protocol_is_registered_without_pool_restriction_or_rounding():
    proto = PROTOCOLS["trec_eval"]
    assert (proto.ties, proto.pool_only, proto.qrel_decimals) == ("doc_id_desc", False, None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_collections(), st.sampled_from([5, 10]))
def test_qrel_ndcg_equals_pytrec_eval_on_tied_runs(collection, k):
    run, qrels = collection
    truth = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut"}).evaluate(run)
    r, g = _tables(run, qrels)
    with pytest.warns() if (g["grade"] < 0).any() else _nothing():
        table = evaluate(r, qrels=g, k=k, protocol="trec_eval")
    ours = dict(zip(table["query_id"], table["qrel_ndcg"]))
    for q in run:
        if q not in qrels:  # trec_eval leaves out a query without qrels; so do we (NaN)
            assert q not in truth and math.isnan(ours[q])
        elif math.isnan(ours[q]):  # qrels but no positive grade: trec_eval says 0, we say "not scored"
            assert truth[q][f"ndcg_cut_{k}"] == 0.0 and max(qrels[q].values()) <= 0
        else:
            assert ours[q] == pytest.approx(truth[q][f"ndcg_cut_{k}"], abs=1e-12, rel=0)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_collections(), st.sampled_from([5, 10]))
def test_rcp_ndcg_with_integer_gains_equals_pytrec_eval(collection, k):
    """RCP-nDCG's path (gains, ideal = every gain of the query) under trec_eval, with integer gains as qrels."""
    run, qrels = collection
    gains_of = {q: {d: max(v, 0) for d, v in ds.items()} for q, ds in qrels.items()}
    truth = pytrec_eval.RelevanceEvaluator(gains_of, {"ndcg_cut"}).evaluate(run)
    r, _ = _tables(run, {})
    gains = pd.DataFrame([(q, d, float(v)) for q, ds in gains_of.items() for d, v in ds.items()],
                         columns=["query_id", "doc_id", "gain"])
    table = evaluate(r, gains=gains, k=k, protocol="trec_eval", holes="zero")
    ours = dict(zip(table["query_id"], table["rcp_ndcg"]))
    for q, value in truth.items():
        if max(gains_of[q].values()) > 0:
            assert ours[q] == pytest.approx(value[f"ndcg_cut_{k}"], abs=1e-12, rel=0)
            one = score_query(run[q], {d: float(v) for d, v in gains_of[q].items()}, k=k, protocol="trec_eval")
            assert one.rcp_ndcg == pytest.approx(value[f"ndcg_cut_{k}"], abs=1e-12, rel=0)  # the one-query path


def test_doc_id_order_is_strcmp_order():
    """trec_eval breaks a tie by strcmp of the docnos, descending: byte order of UTF-8, which is code-point order,
    so "9" ranks above "10" and "ß" above "z" (a numeric or locale order would differ)."""
    assert sorted(DOCS) == [d for _, d in sorted((d.encode(), d) for d in DOCS)]
    run = {"q": {"10": 1.0, "9": 1.0}}
    for rel in ({"9": 1}, {"10": 1}):
        truth = pytrec_eval.RelevanceEvaluator({"q": rel}, {"ndcg_cut"}).evaluate(run)["q"]["ndcg_cut_5"]
        r, g = _tables(run, {"q": rel})
        ours = float(evaluate(r, qrels=g, k=5, protocol="trec_eval")["qrel_ndcg"].iloc[0])
        assert ours == pytest.approx(truth, abs=1e-12)
    assert ours < 1.0  # "10" is ranked second: "9" > "10" as strings


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

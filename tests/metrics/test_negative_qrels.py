"""Negative qrel grades count as non-relevant (gain 0), as trec_eval does: checked against pytrec_eval."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from rcp_jax.data import read_qrels
from rcp_jax.data.qrel_grades import QrelsWarning
from rcp_jax.evaluation import evaluate
from rcp_jax.metrics import score_query

pytrec_eval = pytest.importorskip("pytrec_eval")


def _collection(tmp_path):
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(12)]
    lines, qrels = [], {}
    for q in ("q1", "q2", "q3"):
        grades = rng.choice([-2, -1, 0, 1, 2, 3], size=len(docs), p=[0.2, 0.15, 0.25, 0.2, 0.1, 0.1])
        qrels[q] = {d: int(g) for d, g in zip(docs, grades)}
        lines += [f"{q} 0 {d} {g}\n" for d, g in zip(docs, grades)]
    path = tmp_path / "spam.qrels"
    path.write_text("".join(lines))
    run_rows = []
    for s in ("bm25", "dense"):
        for q in qrels:
            scores = rng.permutation(len(docs)).astype(float)  # distinct scores: no tie rule involved
            run_rows += [{"system": s, "query_id": q, "doc_id": d, "score": float(v)} for d, v in zip(docs, scores)]
    return path, qrels, pd.DataFrame(run_rows)


def test_read_qrels_clips_negative_grades_with_one_warning_naming_file_and_count(tmp_path):
    path, qrels, _ = _collection(tmp_path)
    n_negative = sum(g < 0 for per_q in qrels.values() for g in per_q.values())
    assert n_negative > 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_qrels(path)
    mine = [w for w in caught if issubclass(w.category, QrelsWarning)]
    assert len(mine) == 1
    text = str(mine[0].message)
    assert str(path) in text and f"{n_negative} qrel rows" in text and "trec_eval" in text
    assert "np." not in text
    assert table["grade"].min() == 0.0
    assert table.attrs["negative_grades"] == n_negative


def test_qrel_ndcg_with_negative_grades_matches_pytrec_eval(tmp_path):
    path, qrels, run = _collection(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QrelsWarning)
        table = read_qrels(path)
    per_query = evaluate(run, qrels=table, k=10)
    for system, part in run.groupby("system"):
        trec_run = {q: dict(zip(g.doc_id, g.score)) for q, g in part.groupby("query_id")}
        expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(trec_run)
        got = per_query[per_query.system == system].set_index("query_id")["qrel_ndcg"]
        for q in qrels:
            assert got[q] == pytest.approx(expected[q]["ndcg_cut_10"], abs=1e-12)
            assert got[q] >= 0.0


def test_in_memory_qrels_and_score_query_follow_the_same_rule():
    raw = {"a": -2, "b": 1, "c": 2, "d": 0, "e": -1}
    scores = {"a": 5.0, "e": 4.0, "c": 3.0, "b": 2.0, "d": 1.0}
    expected = pytrec_eval.RelevanceEvaluator({"q": raw}, {"ndcg_cut_10"}).evaluate({"q": scores})["q"]["ndcg_cut_10"]
    with pytest.warns(QrelsWarning, match="2 qrel rows with a negative grade"):
        one = score_query(scores, {d: 0.5 for d in raw}, k=10, qrels=raw)
    assert one.qrel_ndcg == pytest.approx(expected, abs=1e-12)
    table = pd.DataFrame({"query_id": "q", "doc_id": list(raw), "grade": list(raw.values())})
    run = pd.DataFrame({"system": "s", "query_id": "q", "doc_id": list(scores), "score": list(scores.values())})
    with pytest.warns(QrelsWarning, match=r"qrels: 2 qrel rows .*document 'a' of query 'q', grade -2"):
        per_query = evaluate(run, qrels=table, k=10, exponential_qrels=True)
    # exponential gains of clipped grades: 2**0 - 1 = 0, never negative
    expo = {d: (2**max(g, 0) - 1) for d, g in raw.items()}
    exp_expected = pytrec_eval.RelevanceEvaluator({"q": expo}, {"ndcg_cut_10"}).evaluate({"q": scores})
    assert per_query["qrel_ndcg"].iloc[0] == pytest.approx(exp_expected["q"]["ndcg_cut_10"], abs=1e-12)


def test_all_negative_query_has_no_positive_and_gives_nan():
    run = pd.DataFrame({"system": "s", "query_id": "q", "doc_id": ["a", "b"], "score": [2.0, 1.0]})
    table = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b"], "grade": [-2, -1]})
    with pytest.warns(QrelsWarning):
        out = evaluate(run, qrels=table, k=10)
    assert np.isnan(out["qrel_ndcg"].iloc[0])

"""Pools: tokenizer, BM25 and query-likelihood known answers, RRF by hand, positive insertion, Cranfield."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.errors import DataError
from rcp_jax.pools import (
    build_pool,
    bm25_run,
    plural_stem,
    pool_recall,
    query_likelihood_run,
    reciprocal_rank_fusion,
    tokenize,
)


def run_of(system: str, query: str, scores: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"system": system, "query_id": query, "doc_id": list(scores), "score": list(scores.values())}
    )


# --- tokenizer -----------------------------------------------------------------------------------


def test_tokenize_lowercases_splits_and_drops_stopwords():
    assert tokenize("The Moon's pull: 2 tides/day!") == ["moon", "s", "pull", "2", "tides", "day"]
    assert tokenize("The Moon", stopwords=None) == ["the", "moon"]
    assert tokenize("snake_case and CamelCase", stopwords=()) == ["snake", "case", "and", "camelcase"]
    assert tokenize("Café crème") == ["café", "crème"]
    assert tokenize(None) == [] and tokenize(float("nan")) == []


def test_plural_stem_rules():
    cases = {"batteries": "battery", "cherries": "cherry", "tides": "tide", "shoes": "shoe", "toes": "toe",
             "panels": "panel", "bus": "bus", "glass": "glass", "gas": "gas", "yes": "yes"}
    assert {w: plural_stem(w) for w in cases} == cases


# --- lexical retrievers: known answers ------------------------------------------------------------

CORPUS = pd.DataFrame({
    "doc_id": ["d1", "d2", "d3", "d4"],
    "title": ["Tides", "", "Bees", ""],
    "text": ["the moon raises tides twice a day", "tides and tide tables", "bees make honey", "honey honey cake"],
})
QUERIES = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["moon tides", "honey"]})


def _lucene_bm25(tokens: list[list[str]], query: list[str], k1: float, b: float) -> np.ndarray:
    n = len(tokens)
    avgdl = sum(map(len, tokens)) / n
    out = np.zeros(n)
    for w in query:
        df = sum(w in t for t in tokens)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, t in enumerate(tokens):
            tf = t.count(w)
            out[i] += idf * tf / (tf + k1 * (1 - b + b * len(t) / avgdl))  # Lucene: no (k1 + 1)
    return out


def test_bm25_run_matches_the_lucene_formula():
    docs = [tokenize(f"{t} {x}".strip()) for t, x in zip(CORPUS.title, CORPUS.text)]
    run = bm25_run(CORPUS, QUERIES, k1=1.2, b=0.75, name="b")
    assert set(run.columns) == {"system", "query_id", "doc_id", "score"} and set(run.system) == {"b"}
    for qid, text in zip(QUERIES.query_id, QUERIES.text):
        expected = _lucene_bm25(docs, tokenize(text), 1.2, 0.75)
        got = run.loc[run.query_id == qid].set_index("doc_id")["score"]
        matched = {d for d, s in zip(CORPUS.doc_id, expected) if s > 0}
        assert set(got.index) == matched  # only documents sharing a term are retrieved
        for d, s in zip(CORPUS.doc_id, expected):
            if s > 0:
                assert got[d] == pytest.approx(s, rel=1e-12)
        assert list(got.to_numpy()) == sorted(got.to_numpy(), reverse=True)


def test_bm25_top_k_tie_break_and_candidates_mode():
    corpus = pd.DataFrame({"doc_id": ["c", "a", "b", "z"], "text": ["red kite", "red kite", "red kite", "blue"]})
    queries = pd.DataFrame({"query_id": ["q"], "text": ["kite"]})
    run = bm25_run(corpus, queries, top_k=2)
    assert list(run.doc_id) == ["a", "b"]  # equal scores: smaller doc id first, cut at top_k
    cands = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["z", "c"]})
    scored = bm25_run(corpus, queries, candidates=cands)
    assert list(scored.doc_id) == ["z", "c"] and scored.score.iloc[0] == 0.0 and scored.score.iloc[1] > 0


def test_bm25_accepts_beir_ids_and_corpus_without_titles():
    corpus = CORPUS.drop(columns="title").rename(columns={"doc_id": "_id"})
    queries = QUERIES.rename(columns={"query_id": "_id"})
    run = bm25_run(corpus, queries)
    assert set(run.query_id) == {"q1", "q2"}


def test_query_likelihood_matches_the_dirichlet_formula():
    mu = 5.0
    docs = [tokenize(f"{t} {x}".strip()) for t, x in zip(CORPUS.title, CORPUS.text)]
    total = sum(map(len, docs))
    cands = pd.DataFrame({"query_id": "q1", "doc_id": list(CORPUS.doc_id)})
    got = query_likelihood_run(CORPUS, QUERIES, mu=mu, candidates=cands).set_index("doc_id")["score"]
    for d, toks in zip(CORPUS.doc_id, docs):
        expected = sum(
            math.log((toks.count(w) + mu * sum(t.count(w) for t in docs) / total) / (len(toks) + mu))
            for w in ["moon", "tides"]
        )
        assert got[d] == pytest.approx(expected, rel=1e-12)
    retrieved = query_likelihood_run(CORPUS, QUERIES, mu=mu)
    assert set(retrieved.loc[retrieved.query_id == "q2", "doc_id"]) == {"d3", "d4"}


def test_retriever_errors_name_the_problem():
    with pytest.raises(DataError, match="'q9'"):
        bm25_run(CORPUS, pd.DataFrame({"query_id": ["q9"], "text": ["the of and"]}))
    with pytest.raises(DataError, match="empty"):
        bm25_run(CORPUS.iloc[:0], QUERIES)
    with pytest.raises(DataError, match="'d1'"):
        bm25_run(pd.concat([CORPUS, CORPUS.iloc[:1]]), QUERIES)
    with pytest.raises(DataError, match="'nope'"):
        bm25_run(CORPUS, QUERIES, candidates=pd.DataFrame({"query_id": ["q1"], "doc_id": ["nope"]}))
    with pytest.warns(UserWarning, match="'q3'"):
        run = bm25_run(CORPUS, pd.DataFrame({"query_id": ["q1", "q3"], "text": ["tides", "volcano"]}))
    assert set(run.query_id) == {"q1"}


# --- reciprocal rank fusion -----------------------------------------------------------------------


def test_rrf_hand_computed():
    a = run_of("A", "q", {"d1": 3.0, "d2": 2.0, "d3": 1.0})
    b = run_of("B", "q", {"d3": 9.0, "d4": 8.0, "d1": 7.0})
    c = run_of("C", "q", {"d6": 1.0, "d5": 1.0})  # tied scores: d5 takes rank 1 (smaller id)
    fused = reciprocal_rank_fusion([a, b, c], k=60)
    expected = {
        "d1": 1 / 61 + 1 / 63, "d3": 1 / 63 + 1 / 61,  # same ranks {1, 3}: a tie, d1 < d3 by id
        "d5": 1 / 61, "d2": 1 / 62, "d4": 1 / 62, "d6": 1 / 62,
    }
    assert list(fused.doc_id) == ["d1", "d3", "d5", "d2", "d4", "d6"]
    assert list(fused["rank"]) == [1, 2, 3, 4, 5, 6]
    for d, s in zip(fused.doc_id, fused.score):
        assert s == pytest.approx(expected[d], rel=1e-15)
    assert fused.score.iloc[0] == fused.score.iloc[1]  # bit-identical, not merely close


def test_rrf_k_zero_and_one_long_frame():
    long = pd.concat([run_of("A", "q", {"x": 3, "y": 2, "z": 1}), run_of("B", "q", {"z": 5})])
    fused = reciprocal_rank_fusion(long, k=0).set_index("doc_id")["score"]
    assert fused.to_dict() == pytest.approx({"x": 1.0, "z": 1 / 3 + 1.0, "y": 0.5})


def test_rrf_and_pool_are_deterministic_under_reordering():
    rng = np.random.default_rng(3)
    runs = []
    for s in ("A", "B", "C"):
        for q in ("q2", "q10", "q1"):
            docs = [f"d{i}" for i in rng.permutation(30)[:20]]
            runs.append(run_of(s, q, dict(zip(docs, rng.integers(0, 5, size=20).astype(float)))))
    qrels = pd.DataFrame({"query_id": ["q1", "q10", "q10"], "doc_id": ["d29", "d0", "d31"], "grade": [1, 2, 3]})
    base_fused = reciprocal_rank_fusion(runs)
    base_pool = build_pool(runs, 8, qrels)
    assert list(pd.unique(base_pool.query_id)) == ["q1", "q2", "q10"]  # natural id order
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(runs))
        shuffled = pd.concat([runs[i] for i in perm]).sample(frac=1.0, random_state=seed)
        pd.testing.assert_frame_equal(reciprocal_rank_fusion(shuffled), base_fused)
        pd.testing.assert_frame_equal(build_pool(shuffled, 8, qrels.iloc[::-1]), base_pool)


def test_rrf_permuted_ranks_tie_exactly_across_three_systems():
    x_y = [("A", {"x": 3, "y": 2, "w": 1}), ("B", {"y": 3, "w": 2, "x": 1}), ("C", {"w": 3, "x": 2, "y": 1})]
    fused = reciprocal_rank_fusion([run_of(s, "q", d) for s, d in x_y])
    assert fused.score.nunique() == 1 and list(fused.doc_id) == ["w", "x", "y"]


# --- pools ------------------------------------------------------------------------------------------


def test_build_pool_inserts_missed_positives_at_the_bottom():
    run = run_of("A", "q", {f"d{i}": 10.0 - i for i in range(1, 7)})  # fused order d1..d6
    qrels = pd.DataFrame({
        "query_id": ["q", "q", "q", "q"],
        "doc_id": ["d2", "d6", "d9", "d7"],
        "grade": [1, 2, 3, 0],  # d7 is not a positive
    })
    pool = build_pool(run, 4, qrels)
    # d2 stays; d6 (fused rank 6) and d9 (never retrieved) replace the two lowest non-positives d3, d4.
    assert list(pool.doc_id) == ["d1", "d2", "d6", "d9"]
    assert list(pool["rank"]) == [1, 2, 3, 4] and list(pool.columns) == ["query_id", "doc_id", "rank"]
    assert list(build_pool(run, 4).doc_id) == ["d1", "d2", "d3", "d4"]


def test_build_pool_unretrieved_positives_by_grade_then_id_and_overfull_warning():
    run = run_of("A", "q", {"a": 2.0, "b": 1.0})
    qrels = pd.DataFrame({"query_id": "q", "doc_id": ["z", "y", "x"], "grade": [1, 3, 3]})
    with pytest.warns(UserWarning, match="'q'"):
        pool = build_pool(run, 2, qrels)
    assert list(pool.doc_id) == ["x", "y", "z"]  # every positive kept, grade 3 first, then by id


def test_build_pool_errors_name_the_query():
    run = run_of("A", "q1", {"a": 1.0})
    with pytest.raises(DataError, match="'q7'"):
        build_pool(run, 5, pd.DataFrame({"query_id": ["q7"], "doc_id": ["a"], "grade": [2]}))
    with pytest.raises(DataError, match="no runs"):
        build_pool([], 5)
    with pytest.raises(DataError, match="depth"):
        build_pool(run, 0)
    with pytest.raises(DataError, match="'b'.*'q1'"):
        build_pool(run_of("A", "q1", {"b": float("nan")}), 5)
    # a query whose qrels are all negative needs no candidates
    assert len(build_pool(run, 5, pd.DataFrame({"query_id": ["q7"], "doc_id": ["a"], "grade": [0]}))) == 1


def test_pool_recall_counts_positives_found():
    pools = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["a", "b"], "rank": [1, 2]})
    qrels = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "c", "a"], "grade": [1, 2, 1]})
    rec = pool_recall(pools, qrels).set_index("query_id")
    assert rec.loc["q1", "recall"] == 0.5 and rec.loc["q2", "recall"] == 0.0


# --- real data: Cranfield -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cranfield(shared_data):
    folder = shared_data / "cranfield"  # the shared_data fixture skips (or fails under CI) without it

    def jsonl(name):
        return pd.DataFrame([json.loads(line) for line in (folder / name).read_text().splitlines() if line])

    corpus = jsonl("corpus.jsonl")
    queries = jsonl("queries.jsonl")
    qrels = pd.read_csv(folder / "qrels" / "test.tsv", sep="\t", dtype=str).rename(
        columns={"query-id": "query_id", "corpus-id": "doc_id", "score": "grade"}
    )
    qrels["grade"] = qrels["grade"].astype(int)
    return corpus, queries, qrels


@pytest.fixture(scope="module")
def cranfield_runs(cranfield):
    corpus, queries, _ = cranfield
    return [
        bm25_run(corpus, queries, top_k=300, name="bm25"),
        bm25_run(corpus, queries, k1=0.9, b=0.4, stem=True, top_k=300, name="bm25_stem"),
        query_likelihood_run(corpus, queries, mu=1000, top_k=300, name="qlm"),
    ]


def test_cranfield_bm25_ndcg10_is_in_the_published_range(cranfield, cranfield_runs):
    _, queries, qrels = cranfield
    per_query = rcp_jax.evaluate(cranfield_runs[0], qrels=qrels, k=10)
    assert per_query.query_id.nunique() == len(queries) == 225
    ndcg = per_query["qrel_ndcg"].mean()
    assert 0.30 <= ndcg <= 0.40, ndcg  # data README: about 0.34


def test_cranfield_pool_recall_at_depth_150(cranfield, cranfield_runs):
    _, _, qrels = cranfield
    plain = build_pool(cranfield_runs, 150)
    assert plain.groupby("query_id").size().max() == 150
    rec = pool_recall(plain, qrels)
    assert len(rec) == 225 and rec["recall"].mean() >= 0.70, rec["recall"].mean()
    pool = build_pool(cranfield_runs, 150, qrels)
    assert not pool.duplicated(["query_id", "doc_id"]).any()
    assert pool.groupby("query_id").size().max() == 150
    assert (pool_recall(pool, qrels)["recall"] == 1.0).all()
    # swapping in positives only ever replaces the tail: the head of every pool is the fused head
    head = plain.loc[plain["rank"] <= 50].merge(pool, on=["query_id", "doc_id"], how="left", suffixes=("", "_p"))
    moved = head.loc[head["rank_p"].isna()]
    assert moved.empty

"""The embedded demo dataset: it loads, is internally consistent, behaves, and rebuilds exactly."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.demo import rebuild as demo_build
from rcp_jax.demo import DemoData, load_demo


@pytest.fixture(scope="module")
def demo() -> DemoData:
    return load_demo()


def pairs(df: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(df["query_id"], df["doc_id"]))


def test_files_load_with_the_documented_columns(demo):
    expected = {
        "corpus": ["doc_id", "title", "text"],
        "queries": ["query_id", "text"],
        "qrels": ["query_id", "doc_id", "grade"],
        "pools": ["query_id", "doc_id", "rank"],
        "runs": ["system", "query_id", "doc_id", "score"],
        "latent": ["query_id", "doc_id", "latent"],
    }
    for name, cols in expected.items():
        df = getattr(demo, name)
        assert list(df.columns) == cols, name
        assert len(df) > 0, name
        for c in cols:
            if c.endswith("_id") or c in ("system", "title", "text"):
                assert df[c].map(type).eq(str).all(), (name, c)
    assert demo.runs["score"].dtype == np.float64 and demo.latent["latent"].dtype == np.float64


def test_corpus_shape_and_text(demo):
    corpus = demo.corpus
    assert 180 <= len(corpus) <= 250 and corpus["doc_id"].is_unique
    topics = corpus["doc_id"].str.rsplit("-", n=1).str[0]
    assert topics[topics != "misc"].nunique() == 15
    assert len(demo.queries) == 20 and demo.queries["query_id"].is_unique
    assert not corpus["text"].duplicated().any()
    sentences = corpus["text"].map(lambda t: len(re.findall(r"[.!?](?:\s|$)", t)))
    assert sentences.between(2, 5).all(), corpus.loc[~sentences.between(2, 5), "doc_id"].tolist()
    assert (corpus["title"].str.len() > 0).all()


def test_every_pooled_document_has_text_and_a_latent_value(demo):
    texts = demo.document_texts()
    assert all(texts.get(d, "").strip() for d in demo.pools["doc_id"])
    assert pairs(demo.latent) == pairs(demo.pools)
    assert not demo.latent.duplicated(["query_id", "doc_id"]).any()
    assert demo.latent["latent"].between(-4.0, 5.0).all()
    by_query = demo.latent_by_query()
    assert set(by_query) == set(demo.queries["query_id"])


def test_pools_have_depth_30_and_hold_every_positive(demo):
    pools = demo.pools
    assert not pools.duplicated(["query_id", "doc_id"]).any()
    assert set(pools["query_id"]) == set(demo.queries["query_id"])
    for qid, g in pools.groupby("query_id"):
        assert list(g["rank"]) == list(range(1, demo_build.POOL_DEPTH + 1)), qid
    positives = demo.qrels.loc[demo.qrels["grade"] > 0]
    assert pairs(positives) <= pairs(pools)


def test_qrels_are_sparse_graded_and_in_the_corpus(demo):
    qrels = demo.qrels
    assert set(qrels["doc_id"]) <= set(demo.corpus["doc_id"])
    assert set(qrels["grade"]) <= {0, 1, 2, 3}
    n_pos = qrels.loc[qrels["grade"] > 0].groupby("query_id").size().reindex(demo.queries["query_id"], fill_value=0)
    assert n_pos.between(1, 4).all(), n_pos[~n_pos.between(1, 4)]
    # Sparse on purpose: some unlabelled pooled documents are judged at least partial answers.
    unlabelled = demo.latent.merge(qrels, on=["query_id", "doc_id"], how="left")
    useful = unlabelled.loc[unlabelled["grade"].isna() & (unlabelled["latent"] >= 1.0)]
    assert useful["query_id"].nunique() >= 15
    # Every labelled positive is judged at least a partial answer, and the best label is the best doc.
    lab = demo.latent.merge(qrels.loc[qrels["grade"] > 0], on=["query_id", "doc_id"])
    assert (lab["latent"] >= 1.0).all()
    best = demo.latent.loc[demo.latent.groupby("query_id")["latent"].idxmax()]
    assert (best.merge(qrels, on=["query_id", "doc_id"])["grade"] == 3).sum() == len(demo.queries)


def test_every_run_covers_the_pools_exactly(demo):
    assert set(demo.runs["system"]) == set(demo_build.SYSTEMS)
    pool_pairs = pairs(demo.pools)
    for system, g in demo.runs.groupby("system"):
        assert not g.duplicated(["query_id", "doc_id"]).any(), system
        assert pairs(g) == pool_pairs, system
    assert np.isfinite(demo.runs["score"]).all()


def test_systems_differ_in_quality_and_the_noisy_oracle_beats_random(demo):
    per_query = rcp_jax.evaluate(demo.runs, qrels=demo.qrels, k=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        board = per_query.groupby("system")["qrel_ndcg"].mean()
    assert board["oracle_noisy"] > board["random"] + 0.4
    assert board["oracle_noisy"] == board.max() and board["random"] == board.min()
    lexical = board[["bm25", "bm25_stem", "bm25_title", "qlm"]]
    assert lexical.between(0.6, 0.9).all(), board


def test_rebuilding_from_the_hand_written_files_reproduces_the_shipped_ones(demo):
    pools, runs = demo_build.build()
    pd.testing.assert_frame_equal(pools, demo.pools, check_exact=True)
    pd.testing.assert_frame_equal(runs, demo.runs, check_exact=True)


def test_build_refuses_a_pooled_pair_without_latent(demo):
    latent = demo.latent.iloc[1:]
    first = demo.latent.iloc[0]
    with pytest.raises(rcp_jax.DataError, match=re.escape(repr(first["doc_id"]))):
        demo_build.build_runs(demo.corpus, demo.queries, demo.pools, latent)


def test_build_cli_writes_the_same_files(tmp_path, capsys):
    assert demo_build.main(["--out", str(tmp_path)]) == 0
    from importlib import resources

    base = resources.files("rcp_jax.demo") / "files"
    for name in demo_build.DERIVED:
        assert (tmp_path / name).read_bytes() == (base / name).read_bytes(), name
    assert demo_build.main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out

"""Candidate pools: lexical first stages, reciprocal rank fusion and qrel-positive insertion (METHOD 0).

A judged pool is the list of documents the LLM judge will see for a query. The paper builds it as the
top ``n`` of a reciprocal rank fusion (RRF) of several retrievers, then swaps the lowest-ranked
candidates for qrel positives the retrievers missed, so that every known positive is judged. This module
does the same from plain tables, and gives a user who has only queries and documents two lexical
retrievers to start from:

- :func:`bm25_run`: Okapi BM25 (Lucene variant) through the ``bm25s`` library, over our own tokenizer.
- :func:`query_likelihood_run`: a Dirichlet-smoothed unigram query-likelihood model, written here.
- :func:`reciprocal_rank_fusion` and :func:`build_pool`: fuse any runs (lexical, dense, a vendor's API),
  cut to a depth, insert missing positives.

Both retrievers can also *score given candidates* (``candidates=pools``) instead of retrieving, which
turns them into rerankers over a pool.

**A pool is not a system ranking.** Its ``rank`` is the fusion's order, except that the positives the
retrievers missed are swapped in at the tail whatever their score, and a pool may hold positives no
retriever found: scored as a run it would be credited with the qrels. Score the fusion itself instead
(:func:`reciprocal_rank_fusion`; ``rcp-jax pool`` writes it as a TREC run, ``pools.fusion.trec``, beside
the pools file).

Tables (pandas DataFrames, ids are strings):

- corpus: ``doc_id, text[, title]`` (BEIR's ``_id`` is accepted for ``doc_id``);
- queries: ``query_id, text`` (``_id`` accepted);
- run: ``system, query_id, doc_id, score`` (higher is better);
- qrels: ``query_id, doc_id, grade`` (positive means grade > 0);
- pool: ``query_id, doc_id, rank`` (rank 1 = first).

Example:
    >>> import pandas as pd
    >>> corpus = pd.DataFrame({"doc_id": ["a", "b", "c"], "title": "", "text": [
    ...     "Bees store honey for the winter.", "Tides rise twice a day.", "Honey never spoils."]})
    >>> queries = pd.DataFrame({"query_id": ["q1"], "text": ["why do bees make honey"]})
    >>> run = bm25_run(corpus, queries, top_k=10)
    >>> list(run["doc_id"])
    ['a', 'c']
    >>> build_pool(run, depth=2, qrels=pd.DataFrame({"query_id": ["q1"], "doc_id": ["b"], "grade": [1]}))
      query_id doc_id  rank
    0       q1      a     1
    1       q1      b     2

Where things live: the tokenizer in :mod:`rcp_jax.pools.tokenizer`, the two retrievers in
:mod:`rcp_jax.pools.lexical`, the fusion and the pools in :mod:`rcp_jax.pools.fusion`.
"""

from rcp_jax.pools.fusion import RRF_K, build_pool, pool_recall, reciprocal_rank_fusion
from rcp_jax.pools.lexical import bm25_run, query_likelihood_run
from rcp_jax.pools.tokenizer import ENGLISH_STOPWORDS, plural_stem, tokenize

__all__ = [
    "ENGLISH_STOPWORDS",
    "RRF_K",
    "tokenize",
    "plural_stem",
    "bm25_run",
    "query_likelihood_run",
    "reciprocal_rank_fusion",
    "build_pool",
    "pool_recall",
]

"""Readers, writers and validators for runs, qrels, pools, corpora and queries.

Every reader returns a pandas DataFrame with string ids, and remembers where each row came from: the
index is the 1-based **line** of the row in its file (``index.name == "line"``; for Parquet the
1-based ``"row"``) and ``df.attrs["source"]`` is the file path. Validators use both to name the file,
the line and the id in every :class:`~rcp_jax.errors.DataError`, and to say how to fix it.

========  =================================================================  ============================
table     columns                                                            readers
========  =================================================================  ============================
runs      ``system, query_id, doc_id, score[, dataset]`` (higher = better)   :func:`read_run`
qrels     ``query_id, doc_id, grade`` (float)                                :func:`read_qrels`
pools     ``query_id, doc_id, rank`` (rank 1..n per query, pool order)       :func:`read_pools`
corpus    ``doc_id, title, text``                                            :func:`read_corpus`
queries   ``query_id, text``                                                 :func:`read_queries`
========  =================================================================  ============================

File formats (``fmt=``; detected from the extension, optionally followed by ``.gz``):

- ``trec``: whitespace-separated, no header. Runs ``qid Q0 docid rank score tag`` (tag = system);
  qrels ``qid iteration docid grade``. Extensions ``.trec .run .txt .qrels``.
- ``csv`` / ``tsv``: a header row naming the columns (``.csv``, ``.tsv``). BEIR's qrels header
  ``query-id corpus-id score`` is accepted, as are ``_id`` for ids in corpora and queries.
- ``jsonl``: one JSON object per line (``.jsonl .ndjson``); BEIR's ``corpus.jsonl`` (``_id, title,
  text``) and ``queries.jsonl`` (``_id, text``).
- ``parquet`` (``.parquet .pq``).

Collections: :func:`read_beir` reads a BEIR folder (``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``); :func:`read_rows` reads JSONL rows, one query per line with ``query_id, query,
doc_ids, docs[, qrels][, excluded]`` (the rows are the query's pool, in order). TREC files are read as
they are: :func:`read_trec_docs` (SGML ``<DOC>`` files, ``.gz``, or a folder of them) and :func:`read_topics`
(``<top>`` topics, ``qid<TAB>text`` lines, or a queries table); :func:`read_irds` reads an ir_datasets
dataset (``irds:<id>``, downloaded on first use); :func:`load_collection` takes any of these sources.

Policies: a pool of one document is allowed with a :class:`PoolWarning` (it can be rubric-judged but
has no tournament); an empty pool is an error. A document with neither text nor title has "missing
text" and is refused unless ``missing_text="warn"`` (keep it) or ``"drop"``.

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "bm25.trec").write_text("q1 Q0 d1 1 12.5 bm25\\nq1 Q0 d2 2 11.0 bm25\\n")
    >>> run = read_run(d / "bm25.trec")
    >>> run.to_dict("list")
    {'system': ['bm25', 'bm25'], 'query_id': ['q1', 'q1'], 'doc_id': ['d1', 'd2'], 'score': [12.5, 11.0]}
    >>> _ = (d / "bad.trec").write_text("q1 Q0 d1 1 12.5 bm25\\nq1 Q0 d2 2 high bm25\\n")
    >>> read_run(d / "bad.trec")
    Traceback (most recent call last):
    ...
    rcp_jax.errors.DataError: ...bad.trec:2: score 'high' of document 'd2' for query 'q1' by system 'bm25' is not a finite number; ...

Where things live (this package names the public surface above; the modules hold it): file formats and writing in
:mod:`rcp_jax.data.formats`, cell and column checks in :mod:`rcp_jax.data.table_checks`, runs, qrels and pools in
:mod:`rcp_jax.data.run_files`, pool validation in :mod:`rcp_jax.data.pool_checks`, corpora, queries and collections
in :mod:`rcp_jax.data.collection`.
"""

from __future__ import annotations

from rcp_jax.data.collection import Collection, read_beir, read_corpus, read_queries, read_rows
from rcp_jax.data.formats import FORMATS, detect_format
from rcp_jax.data.pool_checks import PoolWarning, check_pools, check_pools_against_collection, check_run_against_pools
from rcp_jax.data.irds import read_irds
from rcp_jax.data.run_files import concat_runs, read_pools, read_qrels, read_run, write_pools, write_qrels, write_run
from rcp_jax.data.sources import load_collection
from rcp_jax.data.trec_text import read_topics, read_trec_docs

__all__ = [
    "FORMATS",
    "PoolWarning",
    "Collection",
    "detect_format",
    "read_run",
    "concat_runs",
    "read_qrels",
    "read_pools",
    "read_corpus",
    "read_queries",
    "read_beir",
    "read_rows",
    "read_trec_docs",
    "read_topics",
    "read_irds",
    "load_collection",
    "write_run",
    "write_qrels",
    "write_pools",
    "check_pools",
    "check_run_against_pools",
    "check_pools_against_collection",
]

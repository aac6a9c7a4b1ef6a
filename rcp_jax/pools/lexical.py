"""Lexical first stages over plain tables: Okapi BM25 (via ``bm25s``) and Dirichlet query likelihood.

Both return a run ``system, query_id, doc_id, score`` and can also *score given candidates*
(``candidates=pools``) instead of retrieving, which turns them into rerankers over a pool. Tables:
corpus ``doc_id, text[, title]`` and queries ``query_id, text`` (BEIR's ``_id`` is accepted for ids).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rcp_jax.errors import DataError
from rcp_jax.pools.tokenizer import ENGLISH_STOPWORDS, tokenize


# ---------------------------------------------------------------------------------------------------
# Input tables


def _id_column(df: pd.DataFrame, wanted: str, what: str) -> pd.Series:
    if wanted in df.columns:
        return df[wanted]
    if "_id" in df.columns:
        return df["_id"]
    raise DataError(f"{what} table needs a {wanted!r} column (or BEIR's '_id'); got columns {list(df.columns)}")


def _corpus_texts(corpus: pd.DataFrame, fields: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Document ids (str) and the text to index: the named fields joined by a space."""
    if not isinstance(corpus, pd.DataFrame) or corpus.empty:
        raise DataError("the corpus is empty: give a DataFrame with columns doc_id, text[, title]")
    ids = _id_column(corpus, "doc_id", "corpus").astype(str).to_numpy()
    if not fields:
        raise DataError("fields is empty: name the corpus column(s) to index, e.g. ('title', 'text')")
    missing = [f for f in fields if f not in corpus.columns]
    if missing == ["title"] and "text" in fields:
        fields = [f for f in fields if f != "title"]  # a corpus without titles indexes its text alone
    elif missing:
        raise DataError(f"corpus has no column(s) {missing} to index; it has {list(corpus.columns)}")
    dup = pd.Series(ids).duplicated()
    if dup.any():
        raise DataError(f"corpus document id {ids[dup.to_numpy()][0]!r} occurs more than once; ids must be unique")
    parts = [corpus[f].fillna("").astype(str).to_numpy() for f in fields]
    texts = [" ".join(p for p in row if p) for row in zip(*parts)]
    return ids, texts


def _query_texts(queries: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    if not isinstance(queries, pd.DataFrame) or queries.empty:
        raise DataError("no queries given: pass a DataFrame with columns query_id, text")
    ids = _id_column(queries, "query_id", "queries").astype(str).to_numpy()
    if "text" not in queries.columns:
        raise DataError(f"queries table needs a 'text' column; got columns {list(queries.columns)}")
    dup = pd.Series(ids).duplicated()
    if dup.any():
        raise DataError(f"query id {ids[dup.to_numpy()][0]!r} occurs more than once in the queries table")
    return ids, queries["text"].tolist()


def _query_terms(qids: np.ndarray, qtexts: list[str], stopwords, stem: bool) -> list[list[str]]:
    out = []
    for qid, text in zip(qids, qtexts):
        terms = tokenize(text, stopwords=stopwords, stem=stem)
        if not terms:
            raise DataError(
                f"query {qid!r} has no index terms after tokenization (text {text!r}); give it words that "
                "are not stopwords, or drop it"
            )
        out.append(terms)
    return out


def _candidate_positions(
    candidates: pd.DataFrame, qids: np.ndarray, dids: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Map candidate (query, doc) rows to row positions in the queries and corpus tables."""
    for col in ("query_id", "doc_id"):
        if col not in candidates.columns:
            raise DataError(f"candidates need columns query_id, doc_id; got {list(candidates.columns)}")
    cand = candidates[["query_id", "doc_id"]].astype(str).reset_index(drop=True)
    qpos = pd.Index(qids).get_indexer(cand["query_id"])
    dpos = pd.Index(dids).get_indexer(cand["doc_id"])
    if (qpos < 0).any():
        raise DataError(f"candidate query {cand['query_id'][qpos < 0].iloc[0]!r} is not in the queries table")
    if (dpos < 0).any():
        row = cand.loc[dpos < 0].iloc[0]
        raise DataError(f"candidate document {row.doc_id!r} of query {row.query_id!r} is not in the corpus")
    return cand, qpos, dpos


def _top_k(scores: np.ndarray, matched: np.ndarray, id_order: np.ndarray, top_k: int) -> np.ndarray:
    """Positions of the ``top_k`` best matched documents: score descending, then doc id ascending."""
    hits = np.flatnonzero(matched)
    if len(hits) > top_k:
        kth = np.partition(scores[hits], len(hits) - top_k)[len(hits) - top_k]
        hits = hits[scores[hits] >= kth]
    order = np.lexsort((id_order[hits], -scores[hits]))
    return hits[order[:top_k]]


def _assemble(
    name: str,
    qids: np.ndarray,
    dids: np.ndarray,
    score_rows: Iterable[tuple[np.ndarray, np.ndarray]],
    top_k: int,
    cand_pos: tuple[pd.DataFrame, np.ndarray, np.ndarray] | None,
) -> pd.DataFrame:
    """Build a run from per-query ``(scores, matched)`` vectors over the corpus.

    Retrieval mode (``cand_pos`` None): the ``top_k`` matched documents per query. Rerank mode: the score
    of every candidate pair, in candidate order.
    """
    if cand_pos is not None:
        cand, qpos, dpos = cand_pos
        scores = np.zeros(len(cand), dtype=np.float64)
        for qi, (row, _) in enumerate(score_rows):
            sel = qpos == qi
            if sel.any():
                scores[sel] = row[dpos[sel]]
        return pd.DataFrame({"system": name, "query_id": cand["query_id"], "doc_id": cand["doc_id"], "score": scores})
    id_order = np.argsort(np.argsort(dids, kind="stable"), kind="stable")
    frames, empty = [], []
    for qid, (row, matched) in zip(qids, score_rows):
        top = _top_k(row, matched, id_order, top_k)
        if len(top) == 0:
            empty.append(qid)
        frames.append(pd.DataFrame({"query_id": qid, "doc_id": dids[top], "score": row[top]}))
    if empty:
        warnings.warn(
            f"{name}: {len(empty)} quer{'y' if len(empty) == 1 else 'ies'} matched no document and got no "
            f"candidates (first: {empty[0]!r}); check the tokenizer settings or the query text",
            stacklevel=3,
        )
    run = pd.concat(frames, ignore_index=True)
    run.insert(0, "system", name)
    return run


def _check_top_k(top_k: int) -> None:
    if int(top_k) != top_k or top_k < 1:
        raise DataError(f"top_k must be a positive integer, got {top_k!r}")


# ---------------------------------------------------------------------------------------------------
# Lexical retrievers


def bm25_run(
    corpus: pd.DataFrame,
    queries: pd.DataFrame,
    *,
    k1: float = 1.2,
    b: float = 0.75,
    top_k: int = 1000,
    name: str = "bm25",
    fields: Sequence[str] = ("title", "text"),
    stopwords: Iterable[str] | None = ENGLISH_STOPWORDS,
    stem: bool = False,
    candidates: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Okapi BM25 scores of a corpus for every query, as a run.

    Scoring is ``bm25s`` in float64 over the tokens of :func:`tokenize`, Lucene's variant: the sum over
    query terms of ``idf * tf / (tf + k1 (1 - b + b |d| / avgdl))`` with
    ``idf = log(1 + (N - df + 0.5) / (df + 0.5))`` (no ``k1 + 1`` factor, which changes no ranking).
    A query term repeated in the query counts once per occurrence.

    Args:
        corpus: ``doc_id, text[, title]`` (``_id`` accepted for ``doc_id``).
        queries: ``query_id, text`` (``_id`` accepted).
        k1, b: BM25 term-frequency saturation and length normalisation.
        top_k: documents kept per query (retrieval mode). Only documents sharing at least one term with
            the query are returned; ties at equal score go to the smaller doc id (string order).
        name: the run's ``system`` value.
        fields: corpus columns joined (space-separated) into the indexed text. A missing ``title``
            column is skipped, so BEIR corpora without titles work with the default.
        stopwords, stem: tokenizer options, see :func:`tokenize`; used for documents and queries alike.
        candidates: ``query_id, doc_id`` pairs to score instead of retrieving (e.g. a pool). Every pair is
            returned, in the given order, including those scoring 0.

    Returns:
        run DataFrame ``system, query_id, doc_id, score``: in retrieval mode grouped by query in the order
        of ``queries``, best first.

    Raises:
        DataError: empty corpus or queries, duplicate ids, a query without index terms, a candidate whose
            query or document is unknown.
    """
    import bm25s  # imported here: only this function needs it

    _check_top_k(top_k)
    dids, texts = _corpus_texts(corpus, fields)
    qids, qtexts = _query_texts(queries)
    cand_pos = _candidate_positions(candidates, qids, dids) if candidates is not None else None
    q_terms = _query_terms(qids, qtexts, stopwords, stem)
    doc_tokens = [tokenize(t, stopwords=stopwords, stem=stem) for t in texts]
    model = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
    model.index(doc_tokens, show_progress=False)

    def rows():
        for terms in q_terms:
            ids = model.get_tokens_ids(terms)
            if not ids:  # no query term occurs in the corpus
                yield np.zeros(len(dids)), np.zeros(len(dids), dtype=bool)
            else:
                score = np.asarray(model.get_scores_from_ids(ids), dtype=np.float64)
                yield score, score > 0  # Lucene idf is positive: a document with a query term scores > 0

    return _assemble(name, qids, dids, rows(), top_k, cand_pos)


def query_likelihood_run(
    corpus: pd.DataFrame,
    queries: pd.DataFrame,
    *,
    mu: float = 1000.0,
    top_k: int = 1000,
    name: str = "qlm",
    fields: Sequence[str] = ("title", "text"),
    stopwords: Iterable[str] | None = ENGLISH_STOPWORDS,
    stem: bool = False,
    candidates: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Query likelihood with Dirichlet smoothing (Zhai and Lafferty, 2001), as a run.

    ``score(q, d) = sum over query terms w of log((tf(w, d) + mu * P(w | C)) / (|d| + mu))`` with
    ``P(w | C)`` the term's share of all corpus tokens. Query terms absent from the corpus are skipped
    (they would add the same ``-inf`` to every document). Scores are log-probabilities (negative).

    Args:
        corpus, queries, top_k, name, fields, stopwords, stem, candidates: as :func:`bm25_run`. In
            retrieval mode only documents containing at least one query term are returned.
        mu: Dirichlet prior mass (in tokens); larger means more smoothing towards the corpus model.

    Returns:
        run DataFrame ``system, query_id, doc_id, score``.
    """
    _check_top_k(top_k)
    if not mu > 0:
        raise DataError(f"mu must be positive, got {mu!r}")
    dids, texts = _corpus_texts(corpus, fields)
    qids, qtexts = _query_texts(queries)
    cand_pos = _candidate_positions(candidates, qids, dids) if candidates is not None else None
    q_terms = _query_terms(qids, qtexts, stopwords, stem)
    vocab: dict[str, int] = {}
    indptr, indices = [0], []
    for t in texts:
        toks = tokenize(t, stopwords=stopwords, stem=stem)
        indices.extend(vocab.setdefault(w, len(vocab)) for w in toks)
        indptr.append(len(indices))
    counts = sp.csr_matrix(
        (np.ones(len(indices)), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
        shape=(len(dids), max(len(vocab), 1)),
    )
    counts.sum_duplicates()
    tf = counts.tocsc()
    doc_len = np.asarray(counts.sum(axis=1)).ravel()
    collection = np.asarray(counts.sum(axis=0)).ravel()
    p_c = collection / max(collection.sum(), 1.0)
    log_norm = np.log(doc_len + mu)

    def rows():
        for terms in q_terms:
            score = np.zeros(len(dids))
            matched = np.zeros(len(dids), dtype=bool)
            n_terms = 0
            for w, c in Counter(terms).items():
                j = vocab.get(w)
                if j is None:
                    continue
                n_terms += c
                prior = mu * p_c[j]
                score += c * np.log(prior)
                lo, hi = tf.indptr[j], tf.indptr[j + 1]
                rows_j = tf.indices[lo:hi]
                score[rows_j] += c * np.log1p(tf.data[lo:hi] / prior)
                matched[rows_j] = True
            score -= n_terms * log_norm
            yield score, matched

    return _assemble(name, qids, dids, rows(), top_k, cand_pos)

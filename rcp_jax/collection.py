"""Test collections: corpora, queries, BEIR folders and JSONL rows (one query and its pool per line).

A document with neither text nor title has "missing text" and is refused unless ``missing_text="warn"``
(keep it) or ``"drop"`` (remove it; its qrels are kept, and it leaves the pools of JSONL rows). The
tables and formats are described in :mod:`rcp_jax.data`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.formats import _frame, _path, _read_jsonl, _read_table, _table_format
from rcp_jax.pool_checks import check_pools
from rcp_jax.run_files import read_qrels
from rcp_jax.table_checks import _first_duplicate, _id_string, _ids, _rename, _unit, _where

_MISSING_TEXT = ("error", "warn", "drop")


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _missing_text(df: pd.DataFrame, missing_text: str) -> pd.DataFrame:
    if missing_text not in _MISSING_TEXT:
        raise ValueError(f"missing_text must be one of {_MISSING_TEXT}, got {missing_text!r}")
    empty = np.array([_blank(t) and _blank(h) for t, h in zip(df["text"], df["title"])], dtype=bool)
    if not empty.any():
        return df
    ids = df.loc[empty, "doc_id"].tolist()
    where = _where(df, df.index[np.flatnonzero(empty)[0]])
    msg = f"{where}: document {ids[0]!r} has no text and no title ({len(ids)} such documents: {ids[:10]})"
    if missing_text == "error":
        raise DataError(msg + "; the judge cannot read an empty document: fix the corpus, or pass "
                        "missing_text='drop' (remove them) or 'warn' (keep them empty)")
    warnings.warn(msg + ("; dropped" if missing_text == "drop" else "; kept as empty documents"), UserWarning, stacklevel=3)
    if missing_text == "warn":
        return df
    out = df.loc[~empty].copy()
    out.attrs = {**df.attrs, "dropped": [str(d) for d in ids]}
    return out


def read_corpus(path: str | Path, *, fmt: str | None = None, missing_text: str = "error") -> pd.DataFrame:
    """Read documents: BEIR ``corpus.jsonl`` (``_id, title, text``) or a table ``doc_id, text[, title]``.

    Args:
        missing_text: what to do with a document that has neither text nor title: ``"error"``
            (default), ``"warn"`` (keep it, warn) or ``"drop"`` (remove it, warn; the dropped ids are
            listed in ``attrs["dropped"]``, and :func:`read_beir` keeps their qrels, :func:`read_rows`
            removes them from the pools).

    Returns:
        DataFrame ``doc_id, title, text`` (str; a missing title is ""), index = source line.

    Raises:
        DataError: a duplicate or empty id, missing columns, a missing text (by default), bad UTF-8.
    """
    path = _path(path)
    df = _rename(_read_table(path, _table_format(path, fmt, "a corpus")), ["doc_id", "text"], ["title"], what="a corpus")
    if "title" not in df.columns:
        df["title"] = ""
    df = _ids(df, ["doc_id"], "the corpus")
    dup = _first_duplicate(df, ["doc_id"])
    if dup is not None:
        (d,), labels = dup
        raise DataError(f"{_where(df, labels[1])}: document id {d!r} appears again (first at {_unit(df)} {labels[0]}); ids must be unique")
    df = _missing_text(df, missing_text)
    for col in ("title", "text"):
        df[col] = ["" if _blank(v) else str(v) for v in df[col]]
    return df.loc[:, ["doc_id", "title", "text"]]


def read_queries(path: str | Path, *, fmt: str | None = None) -> pd.DataFrame:
    """Read queries: BEIR ``queries.jsonl`` (``_id, text``) or a table ``query_id, text``.

    Returns:
        DataFrame ``query_id, text``, index = source line.

    Raises:
        DataError: a duplicate or empty id, or a query without text.
    """
    path = _path(path)
    df = _rename(_read_table(path, _table_format(path, fmt, "queries")), ["query_id", "text"], what="queries")
    df = _ids(df, ["query_id"], "the queries")
    dup = _first_duplicate(df, ["query_id"])
    if dup is not None:
        (q,), labels = dup
        raise DataError(f"{_where(df, labels[1])}: query id {q!r} appears again (first at {_unit(df)} {labels[0]}); ids must be unique")
    blank = [i for i, t in enumerate(df["text"]) if _blank(t)]
    if blank:
        raise DataError(f"{_where(df, df.index[blank[0]])}: query {df['query_id'].iloc[blank[0]]!r} has no text; give every query its text")
    df["text"] = df["text"].astype(str)
    return df


@dataclass(frozen=True)
class Collection:
    """A test collection as tables (see the module docstring for the columns).

    Attributes:
        corpus, queries, qrels: DataFrames; qrels may be empty.
        pools: ``query_id, doc_id, rank`` when the source fixes the pools (JSONL rows), else None.
        excluded: ``query_id, doc_id`` ids to leave out of rankings and ideals (empty if none).
    """

    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    pools: pd.DataFrame | None = None
    excluded: pd.DataFrame | None = None


def _check_qrels_ids(qrels: pd.DataFrame, queries: pd.DataFrame, corpus: pd.DataFrame) -> None:
    for col, table, what in (("query_id", queries, "queries"), ("doc_id", corpus, "corpus")):
        known = set(table[col]) | set(table.attrs.get("dropped", ()))  # dropped documents keep their qrels
        bad = ~qrels[col].isin(known).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{_where(qrels, qrels.index[i])}: {col} {qrels[col].iloc[i]!r} is not in the {what} "
                f"({table.attrs.get('source', what)}; {int(bad.sum())} such qrels); fix the ids or pass strict=False"
            )


def read_beir(folder: str | Path, *, split: str = "test", missing_text: str = "error", strict: bool = True) -> Collection:
    """Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

    Args:
        folder: the dataset folder. split: the qrels file name (without ``.tsv``).
        missing_text: see :func:`read_corpus`.
        strict: refuse qrels whose query or document id is unknown (else keep them).

    Returns:
        :class:`Collection` (pools None: build them with ``rcp_jax.pools.build_pool``).
    """
    folder = _path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory; a BEIR dataset is a folder with corpus.jsonl, queries.jsonl, qrels/")
    corpus = read_corpus(folder / "corpus.jsonl", missing_text=missing_text)
    queries = read_queries(folder / "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise DataError(f"{qrels_path}: no such file; available splits: {found or 'none'}")
    qrels = read_qrels(qrels_path, fmt="tsv")
    if strict:
        _check_qrels_ids(qrels, queries, corpus)
    return Collection(corpus=corpus, queries=queries, qrels=qrels)


def read_rows(path: str | Path, *, missing_text: str = "error") -> Collection:
    """Read JSONL rows, one query per line: ``query_id, query, doc_ids, docs[, qrels][, excluded]``.

    ``doc_ids`` (the pool, in order) and ``docs`` (their texts) have equal lengths; ``qrels`` maps
    doc id -> grade (positives outside the pool are kept, for qrel-nDCG ideals); ``excluded`` lists ids
    to leave out. A document id shared by two queries must have the same text.

    Returns:
        :class:`Collection` with ``pools`` set; every table's index is the source line.
    """
    path = _path(path)
    raw = _read_jsonl(path)
    if raw.empty:
        raise DataError(f"{path}: no rows; expected one JSON object per query")
    qrecs, drecs, precs, rrecs, xrecs = [], [], [], [], []
    qlines, dlines, plines, rlines, xlines = [], [], [], [], []
    texts: dict[str, tuple[str, int]] = {}
    for line, row in zip(raw.index, raw.to_dict("records")):
        for key in ("query_id", "query", "doc_ids", "docs"):
            if key not in row:
                raise DataError(f"{path}:{line}: row is missing {key!r}; rows need query_id, query, doc_ids, docs")
        q = _id_string(row["query_id"])
        if q is None:
            raise DataError(f"{path}:{line}: empty query_id")
        if _blank(row["query"]):
            raise DataError(f"{path}:{line}: query {q!r} has no text")
        doc_ids, docs = row["doc_ids"], row["docs"]
        if not isinstance(doc_ids, list) or not isinstance(docs, list) or len(doc_ids) != len(docs):
            raise DataError(
                f"{path}:{line}: query {q!r}: doc_ids and docs must be lists of equal length "
                f"(got {len(doc_ids) if isinstance(doc_ids, list) else type(doc_ids).__name__} and "
                f"{len(docs) if isinstance(docs, list) else type(docs).__name__})"
            )
        if not doc_ids:
            raise DataError(f"{path}:{line}: query {q!r} has an empty pool (doc_ids is []); give it documents or drop the row")
        qrecs.append({"query_id": q, "text": str(row["query"])})
        qlines.append(line)
        seen: set[str] = set()
        for rank, (d, text) in enumerate(zip(doc_ids, docs), start=1):
            d = _id_string(d)
            if d is None:
                raise DataError(f"{path}:{line}: query {q!r}: empty document id at pool position {rank}")
            if d in seen:
                raise DataError(f"{path}:{line}: document {d!r} appears twice in the pool of query {q!r}; list each document once")
            seen.add(d)
            precs.append({"query_id": q, "doc_id": d, "rank": rank})
            plines.append(line)
            text = "" if _blank(text) else str(text)
            if d in texts:
                if texts[d][0] != text:
                    raise DataError(
                        f"{path}:{line}: document {d!r} has a different text than at line {texts[d][1]}; a document id "
                        "must name one text"
                    )
                continue
            texts[d] = (text, line)
            drecs.append({"doc_id": d, "title": "", "text": text})
            dlines.append(line)
        for d, g in (row.get("qrels") or {}).items():
            try:
                grade = float(g)
            except (TypeError, ValueError):
                grade = math.nan
            if not math.isfinite(grade):
                raise DataError(f"{path}:{line}: qrel grade {g!r} of document {d!r} for query {q!r} is not a finite number")
            rrecs.append({"query_id": q, "doc_id": str(d), "grade": grade})
            rlines.append(line)
        for d in row.get("excluded") or ():
            xrecs.append({"query_id": q, "doc_id": str(d)})
            xlines.append(line)
    queries = _frame(qrecs, qlines, path)
    dup = _first_duplicate(queries, ["query_id"])
    if dup is not None:
        (q,), labels = dup
        raise DataError(f"{path}:{labels[1]}: query id {q!r} appears again (first at line {labels[0]}); one row per query")
    corpus = _missing_text(_frame(drecs, dlines, path), missing_text)
    pools = _frame(precs, plines, path)
    if corpus.attrs.get("dropped"):
        pools = pools.loc[~pools["doc_id"].isin(corpus.attrs["dropped"])].copy()
        pools["rank"] = pools.groupby("query_id", sort=False).cumcount().to_numpy() + 1
    check_pools(pools, queries=[r["query_id"] for r in qrecs])
    qrels = _frame(rrecs, rlines, path) if rrecs else _empty(["query_id", "doc_id", "grade"], path)
    excluded = _frame(xrecs, xlines, path) if xrecs else _empty(["query_id", "doc_id"], path)
    return Collection(corpus=corpus, queries=queries, qrels=qrels, pools=pools, excluded=excluded)


def _empty(columns: list[str], path: Path) -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype=np.float64 if c == "grade" else object) for c in columns})
    df.index = pd.Index([], dtype=np.int64, name="line")
    df.attrs["source"] = str(path)
    return df

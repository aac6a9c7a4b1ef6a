"""Validation of judged pools: on their own, against the collection, and against a run to be scored.

Pools are tables ``query_id, doc_id[, rank]`` (see :mod:`rcp_jax.data`). A pool of one document is
allowed with a :class:`PoolWarning`; an empty pool, a document twice in one pool, or ids the collection
or the pools do not know are :class:`~rcp_jax.errors.DataError` s naming file, line and id.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

from rcp_jax.data.table_checks import _first_duplicate, _where
from rcp_jax.errors import DataError


class PoolWarning(UserWarning):
    """A pool is usable but degenerate (one document: no tournament possible)."""


def check_pools(pools: pd.DataFrame, queries: Iterable[str] | None = None) -> None:
    """Validate pools ``query_id, doc_id[, rank]``.

    Args:
        pools: the pools (e.g. from :func:`read_pools` or ``rcp_jax.pools.build_pool``).
        queries: query ids that must each have a pool (a query without one has an empty pool).

    Raises:
        DataError: a document twice in one pool; an empty pool (a listed query has no documents, or
            there are no rows at all).
    Warns:
        PoolWarning: pools of one document (they get rubric windows but no tournament).
    """
    if pools.empty:
        raise DataError(f"{pools.attrs.get('source', 'pools')}: no pools (no rows); every judged query needs a pool")
    dup = _first_duplicate(pools.astype({"query_id": str, "doc_id": str}), ["query_id", "doc_id"])
    if dup is not None:
        (q, d), labels = dup
        raise DataError(
            f"{_where(pools, labels[1], 'pools')}: document {d!r} appears twice in the pool of query {q!r} (also at "
            f"{pools.index.name or 'row'} {labels[0]}); list each pooled document once"
        )
    sizes = pools.groupby(pools["query_id"].astype(str), sort=False).size()
    if queries is not None:
        empty = [str(q) for q in queries if str(q) not in sizes.index]
        if empty:
            raise DataError(
                f"{pools.attrs.get('source', 'pools')}: query {empty[0]!r} has an empty pool ({len(empty)} "
                f"such queries, e.g. {empty[:5]}); build a pool for it or drop the query"
            )
    singles = sizes[sizes == 1]
    if len(singles):
        q = singles.index[0]
        label = pools.index[np.flatnonzero(pools["query_id"].astype(str).to_numpy() == q)[0]]
        warnings.warn(
            f"{_where(pools, label, 'pools')}: the pool of query {q!r} has a single document ({len(singles)} such "
            f"pools, e.g. {list(singles.index[:5])}); it can get rubric answers but no tournament comparison",
            PoolWarning, stacklevel=2,
        )


def check_pools_against_collection(
    pools: pd.DataFrame,
    *,
    corpus: pd.DataFrame | None = None,
    queries: pd.DataFrame | None = None,
    min_size: int = 1,
) -> None:
    """Check pools against the collection they will be judged from, before any judge call.

    Args:
        pools: ``query_id, doc_id[, rank]`` (e.g. from :func:`read_pools`; its index and
            ``attrs["source"]`` locate offending lines).
        corpus: ``doc_id, ...``: every pooled document needs its text here.
        queries: ``query_id, ...``: every pooled query needs its text here.
        min_size: the smallest pool allowed (the RCP pipeline needs 2: a tournament compares documents).

    Raises:
        DataError: naming the pools file, line and id, and the fix.
    """
    q = pools["query_id"].astype(str).to_numpy()
    d = pools["doc_id"].astype(str).to_numpy()
    for ids, table, col, what in ((q, queries, "query_id", "queries"), (d, corpus, "doc_id", "corpus")):
        if table is None:
            continue
        unknown = ~np.isin(ids, table[col].astype(str).to_numpy())
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            name = f"query {q[i]!r}" if col == "query_id" else f"document {d[i]!r} of query {q[i]!r}"
            raise DataError(
                f"{_where(pools, pools.index[i], 'pools')}: {name} is not in the {what} "
                f"({table.attrs.get('source', what)}; {len(set(ids[unknown]))} such ids, e.g. "
                f"{sorted(set(ids[unknown]))[:5]}); fix the id in the pools or add the missing "
                f"{'query' if col == 'query_id' else 'document'} to the {what}"
            )
    sizes = pools.groupby(pools["query_id"].astype(str), sort=False).size()
    small = sizes[sizes < min_size]
    if len(small):
        qid = small.index[0]
        i = int(np.flatnonzero(q == qid)[0])
        raise DataError(
            f"{_where(pools, pools.index[i], 'pools')}: the pool of query {qid!r} has {int(small.iloc[0])} "
            f"document(s) ({len(small)} such pools, e.g. {list(small.index[:5])}); at least {min_size} are "
            "needed (the tournament compares documents, and a query is calibrated through it): add candidates "
            "to the pool or drop the query"
        )


def check_run_against_pools(
    run: pd.DataFrame, pools: pd.DataFrame, *, unknown_docs: str = "error", against: str | None = None
) -> None:
    """Check that a run scores only pooled queries and documents.

    Args:
        run: ``system, query_id, doc_id, score`` (e.g. from :func:`read_run`; its index and
            ``attrs["source"]`` locate offending lines).
        pools: ``query_id, doc_id[, rank]``.
        unknown_docs: a scored document outside its query's pool: ``"error"`` (default), ``"warn"``
            or ``"ignore"`` (protocols such as ``bright`` and ``plain`` rank unpooled documents with
            gain 0).
        against: what the pools are, for messages (default: ``pools.attrs["source"]`` or "the pools").

    Raises:
        DataError: a query of the run has no pool, or (``unknown_docs="error"``) a document is not in
            its query's pool; the message names the file, line, system and ids.
    """
    if unknown_docs not in ("error", "warn", "ignore"):
        raise ValueError(f"unknown_docs must be 'error', 'warn' or 'ignore', got {unknown_docs!r}")
    rq = run["query_id"].astype(str).to_numpy()
    rd = run["doc_id"].astype(str).to_numpy()
    pq = pools["query_id"].astype(str)
    where_pools = against or pools.attrs.get("source") or "the pools"
    pooled_queries = set(pq)
    missing_q = ~np.isin(rq, list(pooled_queries))
    if missing_q.any():
        i = int(np.flatnonzero(missing_q)[0])
        n = len(set(rq[missing_q]))
        raise DataError(
            f"{_where(run, run.index[i], 'run')}: query {rq[i]!r} (system {str(run['system'].iloc[i])!r}) has no pool "
            f"in {where_pools} ({n} such queries, e.g. {sorted(set(rq[missing_q]))[:5]}); fix the query id, judge "
            "that query, or drop it from the run"
        )
    pairs = pd.MultiIndex.from_arrays([pq.to_numpy(), pools["doc_id"].astype(str).to_numpy()])
    outside = ~pd.MultiIndex.from_arrays([rq, rd]).isin(pairs)
    if outside.any() and unknown_docs != "ignore":
        i = int(np.flatnonzero(outside)[0])
        msg = (
            f"{_where(run, run.index[i], 'run')}: system {str(run['system'].iloc[i])!r} scores document {rd[i]!r} "
            f"of query {rq[i]!r}, which is not in that query's pool in {where_pools} ({int(outside.sum())} such rows)"
        )
        if unknown_docs == "error":
            raise DataError(msg + "; score only pooled documents, or pass --unknown-docs ignore (in Python "
                            "unknown_docs=\"ignore\") for protocols that rank unpooled documents with gain 0")
        warnings.warn(msg, PoolWarning, stacklevel=2)

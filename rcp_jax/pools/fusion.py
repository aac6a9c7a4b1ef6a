"""Reciprocal rank fusion of any runs and the judged pools cut from it, with qrel positives inserted (METHOD 0).

:func:`reciprocal_rank_fusion` fuses runs (lexical, dense, a vendor's API); :func:`build_pool` cuts the
fusion to a depth and swaps the lowest-ranked candidates for the qrel positives the retrievers missed;
:func:`pool_recall` measures how many positives a pool holds. **A pool is not a system ranking** (see
:mod:`rcp_jax.pools`): score the fusion, not the pool. Tables as in :mod:`rcp_jax.pools`.

Example:
    >>> import pandas as pd
    >>> run = pd.DataFrame({"system": "bm25", "query_id": "q1", "doc_id": ["a", "c"], "score": [2.0, 1.0]})
    >>> build_pool(run, depth=2, qrels=pd.DataFrame({"query_id": ["q1"], "doc_id": ["b"], "grade": [1]}))
      query_id doc_id  rank
    0       q1      a     1
    1       q1      b     2
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

from rcp_jax.data.table_checks import show
from rcp_jax.errors import DataError
from rcp_jax.evaluation import validate_run

__all__ = [
    "RRF_K",
    "reciprocal_rank_fusion",
    "build_pool",
    "pool_recall",
]

RRF_K = 60
"""The RRF constant: a document at rank ``r`` of a run contributes ``1 / (RRF_K + r)``."""


# ---------------------------------------------------------------------------------------------------
# Fusion and pools


def _natural_order(ids: pd.Series) -> np.ndarray:
    """Integer sort codes putting "q2" before "q10" and "2" before "10" (digit runs compare as numbers)."""

    def key(s: str):
        return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|\D+", s))

    unique = sorted(pd.unique(ids), key=key)
    return pd.Index(unique).get_indexer(ids)


def _as_run(runs: pd.DataFrame | Iterable[pd.DataFrame]) -> pd.DataFrame:
    frames = [runs] if isinstance(runs, pd.DataFrame) else list(runs)
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        raise DataError("no runs given (or every run is empty): pass retriever runs with columns system, query_id, doc_id, score")
    return validate_run(pd.concat(frames, ignore_index=True), source="retriever runs")


def reciprocal_rank_fusion(runs: pd.DataFrame | Iterable[pd.DataFrame], *, k: int = RRF_K) -> pd.DataFrame:
    """Fuse retriever runs by reciprocal rank (Cormack, Clarke and Buettcher, 2009).

    Each ``system`` of the runs ranks its documents per query by score (descending; equal scores by doc
    id ascending, string order), ranks starting at 1. A document's fused score is the sum over systems
    that retrieved it of ``1 / (k + rank)``; systems that did not retrieve it add nothing.

    Ties are broken deterministically: contributions are summed largest first, so two documents with
    the same multiset of ranks get bit-identical scores, and equal fused scores are ordered by doc id
    ascending. The result does not depend on the order of runs or rows.

    Args:
        runs: one long DataFrame ``system, query_id, doc_id, score`` holding several systems, or an
            iterable of such DataFrames.
        k: the RRF constant (60 as in the paper and the original RRF).

    Returns:
        DataFrame ``query_id, doc_id, score, rank`` (rank 1 = best), queries in natural id order.

    Example:
        >>> import pandas as pd
        >>> a = pd.DataFrame({"system": "a", "query_id": "q", "doc_id": ["x", "y"], "score": [2.0, 1.0]})
        >>> b = pd.DataFrame({"system": "b", "query_id": "q", "doc_id": ["y", "z"], "score": [5.0, 4.0]})
        >>> reciprocal_rank_fusion([a, b])[["doc_id", "rank"]].values.tolist()
        [['y', 1], ['x', 2], ['z', 3]]
    """
    if k < 0:
        raise DataError(f"the RRF constant k must be >= 0, got {k!r}")
    run = _as_run(runs)
    run = run.sort_values(["system", "query_id", "score", "doc_id"], ascending=[True, True, False, True], kind="mergesort")
    run["contribution"] = 1.0 / (k + run.groupby(["system", "query_id"], sort=False).cumcount().to_numpy() + 1.0)
    run = run.sort_values(["query_id", "doc_id", "contribution"], ascending=[True, True, False], kind="mergesort")
    fused = run.groupby(["query_id", "doc_id"], sort=False)["contribution"].sum().rename("score").reset_index()
    fused["_q"] = _natural_order(fused["query_id"])
    fused = fused.sort_values(["_q", "score", "doc_id"], ascending=[True, False, True], kind="mergesort")
    fused = fused.drop(columns="_q").reset_index(drop=True)
    fused["rank"] = fused.groupby("query_id", sort=False).cumcount() + 1
    return fused


def _positives(qrels: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("query_id", "doc_id", "grade") if c not in qrels.columns]
    if missing:
        raise DataError(f"qrels are missing column(s) {missing}; expected query_id, doc_id, grade")
    q = qrels[["query_id", "doc_id", "grade"]].copy()
    q["query_id"] = q["query_id"].astype(str)
    q["doc_id"] = q["doc_id"].astype(str)
    grade = pd.to_numeric(q["grade"], errors="coerce")
    if grade.isna().any():
        row = q.loc[grade.isna()].iloc[0]
        raise DataError(f"qrel grade of document {row.doc_id!r} for query {row.query_id!r} is not a number: {show(row.grade)}")
    q["grade"] = grade.astype(np.float64)
    q = q.loc[q["grade"] > 0].sort_values("grade", ascending=False, kind="mergesort")
    return q.drop_duplicates(["query_id", "doc_id"])


def build_pool(
    runs: pd.DataFrame | Iterable[pd.DataFrame],
    depth: int,
    qrels: pd.DataFrame | None = None,
    *,
    k: int = RRF_K,
) -> pd.DataFrame:
    """Judged pool per query: the top ``depth`` of an RRF fusion, with missed qrel positives swapped in.

    Steps per query: fuse the runs with :func:`reciprocal_rank_fusion`; keep the first ``depth``
    documents; then every positive qrel (grade > 0) not among them replaces the lowest-ranked
    non-positive candidate. Inserted positives take the bottom ranks, ordered by fused rank (those the
    retrievers found below the cut first), then by grade (descending) and doc id. A positive already in
    the top ``depth`` keeps its place. A query with more positives than ``depth`` keeps all of them (its
    pool is longer than ``depth``; a warning names it). Queries with fewer fused candidates than
    ``depth`` get shorter pools.

    The result is what a judge reads, not a ranking to evaluate: the swapped-in positives sit at the
    bottom because the qrels put them there (see the module docstring).

    Args:
        runs: retriever runs, as :func:`reciprocal_rank_fusion`.
        depth: pool size per query (the paper: 150).
        qrels: optional ``query_id, doc_id, grade``; only positives are used. Every query with a positive
            must have candidates in the runs.
        k: the RRF constant.

    Returns:
        DataFrame ``query_id, doc_id, rank`` (rank 1..n per query), queries in natural id order.

    Raises:
        DataError: no runs, a malformed run or qrels, ``depth < 1``, or a query with positive qrels that
            no run retrieved anything for (the message names it).
    """
    if int(depth) != depth or depth < 1:
        raise DataError(f"pool depth must be a positive integer, got {depth!r}")
    depth = int(depth)
    fused = reciprocal_rank_fusion(runs, k=k)
    if qrels is None:
        pool = fused.loc[fused["rank"] <= depth, ["query_id", "doc_id", "rank"]]
        return pool.reset_index(drop=True)

    pos = _positives(qrels)
    orphans = pos.loc[~pos["query_id"].isin(set(fused["query_id"])), "query_id"]
    if len(orphans):
        first = orphans.iloc[np.argmin(_natural_order(orphans))]
        n = orphans.nunique()
        raise DataError(
            f"query {first!r} has positive qrels but no run retrieved any document for it ({n} such "
            f"quer{'y' if n == 1 else 'ies'}); run the retrievers on it, or drop it from the qrels before pooling"
        )
    keys = ["query_id", "doc_id"]
    pos = pos.merge(fused[keys + ["rank"]], on=keys, how="left")
    pos["rank"] = pos["rank"].fillna(np.inf)
    missed = pos.loc[pos["rank"] > depth].copy()
    top = fused.loc[fused["rank"] <= depth, keys + ["rank"]].copy()
    top["positive"] = pd.MultiIndex.from_frame(top[keys]).isin(pd.MultiIndex.from_frame(pos[keys]))
    n_missed = missed.groupby("query_id").size()
    n_pos_top = top.groupby("query_id")["positive"].sum()
    room = (depth - n_pos_top - n_missed.reindex(n_pos_top.index, fill_value=0)).clip(lower=0)
    neg_order = top.loc[~top["positive"]].groupby("query_id", sort=False).cumcount()
    top["keep"] = top["positive"]
    top.loc[neg_order.index, "keep"] = neg_order.to_numpy() < top.loc[neg_order.index, "query_id"].map(room).to_numpy()
    kept = top.loc[top["keep"], keys].assign(_part=0, _o1=top.loc[top["keep"], "rank"].to_numpy().astype(np.float64), _o2=0.0)
    missed = missed.assign(_part=1, _o1=missed["rank"], _o2=-missed["grade"])[keys + ["_part", "_o1", "_o2"]]
    pool = pd.concat([kept, missed], ignore_index=True)
    pool["_q"] = _natural_order(pool["query_id"])
    pool = pool.sort_values(["_q", "_part", "_o1", "_o2", "doc_id"], kind="mergesort").reset_index(drop=True)
    pool["rank"] = pool.groupby("query_id", sort=False).cumcount() + 1
    sizes = pool.groupby("query_id", sort=False).size()
    overfull = sizes.index[sizes.to_numpy() > depth]
    if len(overfull):
        warnings.warn(
            f"{len(overfull)} quer{'y' if len(overfull) == 1 else 'ies'} have more positive qrels than the pool "
            f"depth {depth} (first: {overfull[0]!r}); their pools hold every positive and are longer than {depth}",
            stacklevel=2,
        )
    return pool[["query_id", "doc_id", "rank"]]


def pool_recall(pools: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """Share of each query's positive qrels (grade > 0) that its pool holds.

    Args:
        pools: ``query_id, doc_id[, rank]``.
        qrels: ``query_id, doc_id, grade``.

    Returns:
        DataFrame ``query_id, positives, found, recall`` for every query with a positive qrel (a query
        absent from ``pools`` has recall 0), in natural id order.
    """
    pos = _positives(qrels)
    pool_pairs = pools[["query_id", "doc_id"]].astype(str).drop_duplicates()
    hit = pos.merge(pool_pairs.assign(_in=True), on=["query_id", "doc_id"], how="left")["_in"].fillna(False).astype(bool)
    out = pos.assign(found=hit.to_numpy()).groupby("query_id").agg(positives=("doc_id", "size"), found=("found", "sum"))
    out = out.reset_index()
    out["recall"] = out["found"] / out["positives"]
    out["_q"] = _natural_order(out["query_id"])
    return out.sort_values("_q", kind="mergesort").drop(columns="_q").reset_index(drop=True)

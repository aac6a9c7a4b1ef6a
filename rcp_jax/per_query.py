"""Per-query tables, the input of every system comparison: find the metric columns, validate, pivot, average.

A per-query table has one row per (system, query): ``system``, ``query_id``, optionally ``dataset``
(default: one dataset named ``all``) and one column per metric (NaN = not scored). Query ids are only
unique within a dataset.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError

DEFAULT_METRICS = ("qrel_ndcg", "count_ndcg", "rcp_ndcg")
ID_COLUMNS = ("system", "query_id", "dataset")
SINGLE_DATASET = "all"


def metric_columns(per_query: pd.DataFrame) -> list[str]:
    """The metric columns of a per-query table: the known ones (qrel/count/rcp nDCG) if present, else
    every numeric column that is not an id column."""
    known = [m for m in DEFAULT_METRICS if m in per_query.columns]
    if known:
        return known
    return [
        c for c in per_query.columns
        if c not in ID_COLUMNS and pd.api.types.is_numeric_dtype(per_query[c])
    ]


def prepare_per_query(per_query: pd.DataFrame, metrics: Sequence[str] | None = None,
                      *, source: str = "per-query table") -> tuple[pd.DataFrame, list[str]]:
    """Validate a per-query table and return ``(clean copy, metric names)``.

    The copy has string ``system``, ``query_id``, ``dataset`` columns (``dataset`` added as ``all`` when
    missing) and float64 metric columns. Raises :class:`DataError` naming ``source``, the column and the
    offending row for missing columns, non-numeric or infinite values and duplicate rows.
    """
    if not isinstance(per_query, pd.DataFrame):
        raise DataError(f"{source}: expected a pandas DataFrame, got {type(per_query).__name__}")
    missing = [c for c in ("system", "query_id") if c not in per_query.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {', '.join(missing)}; a per-query table needs system, query_id, "
            f"[dataset] and metric columns (have: {', '.join(map(str, per_query.columns))})"
        )
    metrics = list(metrics) if metrics is not None else metric_columns(per_query)
    if not metrics:
        raise DataError(f"{source}: no metric column found; add numeric columns such as rcp_ndcg, qrel_ndcg")
    absent = [m for m in metrics if m not in per_query.columns]
    if absent:
        raise DataError(
            f"{source}: metric column(s) {', '.join(absent)} not found "
            f"(have: {', '.join(map(str, per_query.columns))})"
        )
    out = pd.DataFrame({
        "system": per_query["system"].astype(str).to_numpy(),
        "query_id": per_query["query_id"].astype(str).to_numpy(),
        "dataset": (per_query["dataset"].astype(str).to_numpy() if "dataset" in per_query.columns
                    else np.full(len(per_query), SINGLE_DATASET, dtype=object)),
    })
    for m in metrics:
        values = pd.to_numeric(per_query[m], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.isnan(values) & per_query[m].notna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{source}: column {m!r} row {i} (system {out.system[i]!r}, query {out.query_id[i]!r}) is not "
                f"a number: {per_query[m].iloc[i]!r}; fix the value or leave it empty (NaN = not scored)"
            )
        if np.isinf(values).any():
            i = int(np.flatnonzero(np.isinf(values))[0])
            raise DataError(
                f"{source}: column {m!r} row {i} (system {out.system[i]!r}, query {out.query_id[i]!r}) is "
                f"infinite; per-query metric values must be finite or NaN"
            )
        out[m] = values
    dup = out.duplicated(["dataset", "query_id", "system"], keep=False)
    if dup.any():
        row = out[dup].iloc[0]
        raise DataError(
            f"{source}: system {row.system!r} has more than one row for query {row.query_id!r} of dataset "
            f"{row.dataset!r}; keep one row per (dataset, query_id, system)"
        )
    return out, metrics


def score_matrix(
    per_query: pd.DataFrame,
    metric: str,
    *,
    dataset: str | None = None,
    systems: Sequence[str] | None = None,
) -> tuple[list[str], list[str], np.ndarray]:
    """Pivot one metric of one dataset into a system x query matrix.

    Args:
        per_query: validated per-query table (see :func:`prepare_per_query`).
        metric: metric column.
        dataset: dataset to take (default: the only one; an error if there are several).
        systems: row order (default: sorted names).

    Returns:
        ``(systems, query_ids, X)`` with ``X: float64[S, Q]``, NaN where a system has no finite value.
        Queries where no system has a value are dropped.

    Example:
        >>> df = pd.DataFrame({"system": ["a", "b", "a", "b"], "query_id": ["q1", "q1", "q2", "q2"],
        ...                    "rcp_ndcg": [0.5, 0.4, 0.9, 0.7]})
        >>> score_matrix(prepare_per_query(df)[0], "rcp_ndcg")[2].tolist()
        [[0.5, 0.9], [0.4, 0.7]]
    """
    if dataset is None:
        names = per_query["dataset"].unique()
        if len(names) > 1:
            raise DataError(f"the table holds {len(names)} datasets; pass dataset= one of {sorted(names)}")
        dataset = names[0] if len(names) else SINGLE_DATASET
    part = per_query[(per_query["dataset"] == dataset) & per_query[metric].notna()]
    wide = part.pivot(index="system", columns="query_id", values=metric)
    systems = sorted(per_query["system"].unique()) if systems is None else list(systems)
    wide = wide.reindex(index=systems)
    wide = wide.loc[:, sorted(wide.columns)]
    return systems, [str(q) for q in wide.columns], wide.to_numpy(dtype=np.float64)


def system_scores(per_query: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Aggregate scores: mean over queries per dataset, then unweighted mean over datasets.

    Returns:
        Tidy DataFrame with columns ``metric, system, score, n_datasets, n_queries`` (NaN values dropped
        before averaging), sorted by metric then score descending.
    """
    df, metrics = prepare_per_query(per_query, metrics)
    rows = []
    for m in metrics:
        per_ds = df.dropna(subset=[m]).groupby(["system", "dataset"])[m].agg(["mean", "size"]).reset_index()
        agg = per_ds.groupby("system").agg(score=("mean", "mean"), n_datasets=("mean", "size"),
                                           n_queries=("size", "sum")).reset_index()
        agg.insert(0, "metric", m)
        rows.append(agg.sort_values(["score", "system"], ascending=[False, True]))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["metric", "system", "score", "n_datasets", "n_queries"])

"""Per-query tables, the input of every system comparison: find the metric columns, validate, pivot, average.

A per-query table has one row per (system, query): ``system``, ``query_id``, optionally ``dataset``
(default: one dataset named ``all``) and one column per metric (NaN = not scored). Query ids are only
unique within a dataset.

**Pairing by query** (:func:`pair_queries`). Systems are compared, ranked and averaged on the same
queries: for each metric and dataset, a query enters only when every system has a value on it. A query
no system has a value on (qrel-nDCG of a query without a positive qrel) is *excluded*; a query some
systems lack (no row, or NaN) is *dropped* for every system, and the missing system/query cells are
listed. Averaging a system over fewer queries than the others would reorder the leaderboard by which
queries each system happens to have, not by how well it ranks. A system with no row at all in a dataset
is left out of that dataset (and said so) instead of emptying the dataset for every system. When no
query of a dataset is common to all its systems, the comparison is refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rcp_jax.data.table_checks import show
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
                f"a number: {show(per_query[m].iloc[i])}; fix the value or leave it empty (NaN = not scored)"
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


class PairingWarning(UserWarning):
    """Some system/query cells lack a metric value, so their queries were left out for every system."""


_DROPPED_COLUMNS = ["metric", "dataset", "system", "query_id", "reason"]
_EXCLUDED_COLUMNS = ["metric", "dataset", "query_id"]


@dataclass(frozen=True)
class QueryPairing:
    """A per-query table restricted, per metric and dataset, to the queries every system has.

    Attributes:
        table: the validated table with the metric cells of excluded and dropped queries set to NaN for
            every system (rows are kept, so other metrics are unaffected).
        dropped: the missing cells that made a query drop out: ``metric, dataset, system, query_id,
            reason`` (``"no row"``: the system has no row for the query; ``"NaN"``: its value is empty).
        excluded: queries no system has a value on: ``metric, dataset, query_id``.
        n_queries: ``metric, dataset, n_queries`` kept (common to every system).
        absent: systems with no row at all in a dataset (``dataset, system``): they are left out of that
            dataset (its pairs cannot be tested) rather than emptying it for everyone.
    """

    table: pd.DataFrame
    dropped: pd.DataFrame
    excluded: pd.DataFrame
    n_queries: pd.DataFrame
    absent: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["dataset", "system"]))

    def notes(self) -> list[str]:
        """Plain sentences, one per metric and dataset where queries were left out (empty if none)."""
        out = []
        for (m, ds), part in self.excluded.groupby(["metric", "dataset"], sort=False):
            k = len(part)
            where = "" if ds == SINGLE_DATASET else f" of dataset {ds}"
            why = "without positive qrels" if m == "qrel_ndcg" else "without a value for any system"
            out.append(f"{m}: {k} quer{'y' if k == 1 else 'ies'}{where} {why} excluded from {m}")
        kept = self.n_queries.set_index(["metric", "dataset"])["n_queries"]
        for (m, ds), part in self.dropped.groupby(["metric", "dataset"], sort=False):
            queries = part["query_id"].unique()
            where = "" if ds == SINGLE_DATASET else f" of dataset {ds}"
            lacks = []
            for (system, reason), cells in part.groupby(["system", "reason"], sort=False):
                ids = list(cells["query_id"])
                shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
                lacks.append(f"{system} lacks {shown} ({reason})")
            n = len(queries)
            out.append(
                f"{m}: {n} quer{'y' if n == 1 else 'ies'}{where} dropped for every system because "
                f"{len(part)} system/query cell{'s lack' if len(part) > 1 else ' lacks'} a value ({'; '.join(lacks)}); "
                f"means and tests use the {int(kept.get((m, ds), 0))} queries every system has"
            )
        n_datasets = self.table["dataset"].nunique()
        for system, part in self.absent.groupby("system", sort=False):
            names = ", ".join(part["dataset"])
            out.append(f"system {system} has no rows in dataset {names}: it is left out of "
                       f"{'that dataset' if len(part) == 1 else 'those datasets'}, and its overall score "
                       f"averages {n_datasets - len(part)} of {n_datasets} datasets")
        return out


def pair_queries(df: pd.DataFrame, metrics: Sequence[str], *, source: str = "per-query table") -> QueryPairing:
    """Restrict each metric, per dataset, to the queries every system has a value on (see module doc).

    Args:
        df: a table validated by :func:`prepare_per_query`.
        metrics: its metric columns.
        source: the table's name in error messages.

    Returns:
        :class:`QueryPairing`.

    Raises:
        DataError: a metric has values in a dataset but no query that every system has (naming the
            systems and how many of the dataset's queries each lacks).
    """
    systems = sorted(df["system"].unique())
    table = df.copy()
    dropped, excluded, counts = [], [], []
    absent = [{"dataset": ds, "system": s_name} for ds in sorted(df["dataset"].unique()) for s_name in systems
              if not ((df["dataset"] == ds) & (df["system"] == s_name)).any()]
    for m in metrics:
        for ds in sorted(df["dataset"].unique()):
            in_ds = (df["dataset"] == ds).to_numpy()
            part = df.loc[in_ds]
            systems = sorted(part["system"].unique())
            has_row = pd.crosstab(part["query_id"], part["system"]).reindex(columns=systems, fill_value=0) > 0
            finite = part.loc[part[m].notna()]
            has_value = (pd.crosstab(finite["query_id"], finite["system"])
                         .reindex(index=has_row.index, columns=systems, fill_value=0) > 0)
            n_ok = has_value.sum(axis=1)
            none = n_ok.index[n_ok == 0]
            partial = n_ok.index[(n_ok > 0) & (n_ok < len(systems))]
            kept = int((n_ok == len(systems)).sum())
            if (n_ok > 0).any() and kept == 0:
                short = ", ".join(f"{s} lacks {int((~has_value[s]).sum())}" for s in systems if (~has_value[s]).any())
                where = "" if ds == SINGLE_DATASET else f" of dataset {ds}"
                raise DataError(
                    f"{source}: no query{where} has a {m} value for every system ({short} of {len(n_ok)} "
                    f"queries); systems are compared on the queries they all have: score every system on "
                    f"the same queries (or leave the incomplete system out of the table)"
                )
            counts.append({"metric": m, "dataset": ds, "n_queries": kept})
            excluded += [{"metric": m, "dataset": ds, "query_id": q} for q in none]
            for q in partial:
                for s_name in systems:
                    if not has_value.at[q, s_name]:
                        dropped.append({"metric": m, "dataset": ds, "system": s_name, "query_id": q,
                                        "reason": "NaN" if has_row.at[q, s_name] else "no row"})
            if len(partial):
                table.loc[in_ds & df["query_id"].isin(partial).to_numpy(), m] = np.nan
    return QueryPairing(
        table=table,
        dropped=pd.DataFrame(dropped, columns=_DROPPED_COLUMNS),
        excluded=pd.DataFrame(excluded, columns=_EXCLUDED_COLUMNS),
        n_queries=pd.DataFrame(counts, columns=["metric", "dataset", "n_queries"]),
        absent=pd.DataFrame(absent, columns=["dataset", "system"]),
    )


def warn_dropped(pairing: QueryPairing, *, stacklevel: int = 3) -> None:
    """One :class:`PairingWarning` per metric/dataset whose queries some systems lack, and per system
    absent from a dataset (none otherwise)."""
    notes = [n for n in pairing.notes() if "dropped for every system" in n or " has no rows in dataset " in n]
    for note in notes:
        warnings.warn(note, PairingWarning, stacklevel=stacklevel)

"""RCP-, Count- and qrel-nDCG of whole runs (many systems x queries), vectorised.

One call of the :func:`rcp_jax.metrics.ndcg_flat` kernel per gain table scores every (system, query)
list at once; there is no Python loop over documents or queries.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from rcp_jax.data.qrel_grades import clip_negative_grades
from rcp_jax.data.table_checks import finite_column, show
from rcp_jax.errors import DataError
from rcp_jax.metrics import Protocol, get_protocol, ndcg_flat
from rcp_jax.per_query import pair_queries, prepare_per_query, warn_dropped

RUN_COLUMNS = ("system", "query_id", "doc_id", "score")


def validate_run(run: pd.DataFrame, source: str = "run") -> pd.DataFrame:
    """Check a long run table (``system, query_id, doc_id, score[, dataset]``); return it with string ids.

    Refuses, naming system, query and document: missing columns, non-finite scores and a document scored
    twice by one system for one query.
    """
    missing = [c for c in RUN_COLUMNS if c not in run.columns]
    if missing:
        raise DataError(f"{source} is missing column(s) {missing}; expected {list(RUN_COLUMNS)} [+ dataset]")
    cols = list(RUN_COLUMNS) + (["dataset"] if "dataset" in run.columns else [])
    df = run.loc[:, cols].copy()
    for c in ("system", "query_id", "doc_id"):
        df[c] = df[c].astype(str)
    score, row = finite_column(df, "score")
    if row is not None:
        raise DataError(
            f"{source}: score of document {row.doc_id!r} for query {row.query_id!r} by system {row.system!r} "
            f"is {show(run.loc[row.name, 'score'])}; scores must be finite (drop the row or fix the system)"
        )
    df["score"] = score
    dup = df.duplicated(["system", "query_id", "doc_id"])
    if dup.any():
        row = df.loc[dup].iloc[0]
        raise DataError(
            f"{source}: system {row.system!r} scores document {row.doc_id!r} of query {row.query_id!r} more "
            f"than once; keep one score per (system, query, document)"
        )
    return df


def _excluded_pairs(excluded) -> set[tuple[str, str]]:
    if excluded is None:
        return set()
    if isinstance(excluded, pd.DataFrame):
        return set(zip(excluded["query_id"].astype(str), excluded["doc_id"].astype(str)))
    return {(str(q), str(d)) for q, ids in excluded.items() for d in ids}


def _drop_pairs(df: pd.DataFrame, pairs: set[tuple[str, str]]) -> pd.DataFrame:
    if not pairs:
        return df
    keys = pd.MultiIndex.from_frame(df[["query_id", "doc_id"]])
    return df.loc[~keys.isin(list(pairs))]


def _pair_keys(frames: list[pd.DataFrame]) -> list[np.ndarray]:
    """One int64 key per (query_id, doc_id) row, consistent across ``frames`` (joint factorisation)."""
    sizes = [len(f) for f in frames]
    q_codes, q_uniq = pd.factorize(pd.concat([f["query_id"] for f in frames], ignore_index=True))
    d_codes, d_uniq = pd.factorize(pd.concat([f["doc_id"] for f in frames], ignore_index=True))
    keys = q_codes.astype(np.int64) * max(len(d_uniq), 1) + d_codes
    return np.split(keys, np.cumsum(sizes)[:-1])


def _attach_pool_and_gains(r: pd.DataFrame, pool: pd.DataFrame, g: pd.DataFrame, pool_only: bool) -> pd.DataFrame:
    """Left-join the pool position ``_pos`` (NaN outside the pool) and the gain (0 if missing) to the run.

    Equivalent to two ``DataFrame.merge(how="left")`` on (query_id, doc_id), but on int64 keys from one
    joint factorisation, which is several times faster on millions of string-keyed rows. Falls back to
    the merges when the pool or gain table repeats a (query, document) key (a merge would then
    duplicate run rows).
    """
    r_key, p_key, g_key = _pair_keys([r, pool, g])
    p_index, g_index = pd.Index(p_key), pd.Index(g_key)
    if not (p_index.is_unique and g_index.is_unique):
        r = r.merge(pool, on=["query_id", "doc_id"], how="left")
        if pool_only:
            r = r.loc[r["_pos"].notna()]
        r = r.merge(g, on=["query_id", "doc_id"], how="left")
        r["gain"] = r["gain"].fillna(0.0)
        return r
    at = p_index.get_indexer(r_key)
    pos = np.where(at >= 0, pool["_pos"].to_numpy(dtype=np.float64)[np.maximum(at, 0)], np.nan)
    r = r.assign(_pos=pos)
    if pool_only:
        keep = at >= 0
        r, r_key = r.loc[keep], r_key[keep]
    at = g_index.get_indexer(r_key)
    gain = np.where(at >= 0, g["gain"].to_numpy(dtype=np.float64)[np.maximum(at, 0)], np.nan)
    return r.assign(gain=np.where(np.isnan(gain), 0.0, gain)).reset_index(drop=True)


def _system_query_groups(r: pd.DataFrame) -> tuple[np.ndarray, pd.MultiIndex]:
    """Code of each row's (system, query_id) list, lists numbered in sorted (system, query_id) order."""
    if not len(r):
        return np.zeros(0, np.int64), pd.MultiIndex.from_tuples([], names=["system", "query_id"])
    s_codes, s_uniq = pd.factorize(r["system"], sort=True)
    q_codes, q_uniq = pd.factorize(r["query_id"], sort=True)
    combined = s_codes.astype(np.int64) * len(q_uniq) + q_codes
    present, codes = np.unique(combined, return_inverse=True)
    index = pd.MultiIndex.from_arrays(
        [pd.Index(s_uniq).take(present // len(q_uniq)), pd.Index(q_uniq).take(present % len(q_uniq))],
        names=["system", "query_id"],
    )
    return codes.reshape(-1), index


def ndcg_table(
    run: pd.DataFrame,
    gains: pd.DataFrame,
    *,
    k: int = 10,
    protocol: str | Protocol = "plain",
    pools: pd.DataFrame | None = None,
    excluded=None,
    ideal: pd.DataFrame | None = None,
    missing: str = "nan",
) -> pd.Series:
    """nDCG@k of every (system, query) of a run with one gain table.

    Args:
        run: validated run (``system, query_id, doc_id, score``).
        gains: ``query_id, doc_id, gain``; documents of a query missing here have gain 0.
        k: cut-off.
        protocol: scoring protocol (tie rule, pool restriction).
        pools: ``query_id, doc_id`` judged pools in pool order (default: the documents of ``gains``).
            Used for pool restriction and ``input_order`` ties.
        excluded: ids removed from rankings and ideals (DataFrame ``query_id, doc_id`` or mapping).
        ideal: ``query_id, gain`` lists forming each query's ideal (default: ``gains`` itself).
        missing: value for queries without an ideal list: ``"nan"`` or ``"zero"``.

    Returns:
        float64 Series indexed by (system, query_id).
    """
    proto = get_protocol(protocol)
    pairs = _excluded_pairs(excluded)
    g = gains.loc[:, ["query_id", "doc_id", "gain"]].copy()
    g["query_id"] = g["query_id"].astype(str)
    g["doc_id"] = g["doc_id"].astype(str)
    r = _drop_pairs(run, pairs)
    pool = (pools if pools is not None else g)[["query_id", "doc_id"]].astype(str)
    pool = pool.assign(_pos=pool.groupby("query_id", sort=False).cumcount())
    r = _attach_pool_and_gains(r, pool, g, proto.pool_only)
    group_codes, group_index = _system_query_groups(r)
    if proto.ties == "doc_id_desc":
        tie_key = (-pd.Series(pd.factorize(r["doc_id"], sort=True)[0])).to_numpy()
    elif proto.ties == "input_order":
        order_in_run = np.arange(len(r))
        tie_key = np.where(r["_pos"].notna(), r["_pos"].fillna(0).to_numpy(), len(pool) + order_in_run).astype(np.int64)
    else:
        tie_key = np.zeros(len(r), dtype=np.int64)

    ideal_df = (ideal if ideal is not None else g[["query_id", "gain"]]).copy()
    ideal_df["query_id"] = ideal_df["query_id"].astype(str)
    if pairs and ideal is None:
        ideal_df = _drop_pairs(g, pairs)[["query_id", "gain"]]
    query_names = pd.Index(sorted(set(pd.unique(ideal_df["query_id"])) | set(pd.unique(r["query_id"]))))
    ideal_codes = query_names.get_indexer(ideal_df["query_id"])
    group_query = query_names.get_indexer(group_index.get_level_values(1)) if len(group_index) else np.zeros(0, np.int64)
    ndcg, idcg = ndcg_flat(
        group_codes, r["score"].to_numpy(), r["gain"].to_numpy(), tie_key, ideal_codes,
        ideal_df["gain"].to_numpy(dtype=np.float64), len(group_index), k=k, ties=proto.ties,
        ideal_of_group=group_query,
    )
    if missing == "nan":
        has_ideal = np.zeros(len(query_names), dtype=bool)
        has_ideal[np.unique(ideal_codes)] = True
        ndcg = np.where(has_ideal[group_query] & (idcg[group_query] > 0), ndcg, np.nan)
    return pd.Series(ndcg, index=group_index, dtype=np.float64)


def evaluate(
    run: pd.DataFrame,
    calibration=None,
    *,
    gains: pd.DataFrame | None = None,
    count_gains: pd.DataFrame | None = None,
    qrels: pd.DataFrame | None = None,
    k: int = 10,
    protocol: str | Protocol = "plain",
    pools: pd.DataFrame | None = None,
    excluded: pd.DataFrame | Mapping[str, Iterable[str]] | None = None,
    exponential_qrels: bool = False,
) -> pd.DataFrame:
    """Per-(system, query) RCP-nDCG@k, Count-nDCG@k and qrel-nDCG@k of a whole run.

    Args:
        run: ``system, query_id, doc_id, score[, dataset]`` (one row per scored document).
        calibration: a :class:`rcp_jax.Calibration` supplying RCP and Count gains (or pass ``gains`` /
            ``count_gains`` tables ``query_id, doc_id, gain`` directly).
        qrels: ``query_id, doc_id, grade``; the qrel ideal is over every positive qrel of the query.
            Queries without a positive get NaN (dropped from means with a warning by
            :func:`leaderboard`). Negative grades count as 0 (non-relevant, as trec_eval), with a
            :class:`~rcp_jax.data.qrel_grades.QrelsWarning`.
        k, protocol, pools, excluded: as :func:`rcp_jax.score_query`.
        exponential_qrels: qrel gain ``2**grade - 1`` instead of the grade.

    Returns:
        DataFrame ``system, query_id, [dataset,] rcp_ndcg, count_ndcg, qrel_ndcg`` (columns present for
        the gains given), one row per (system, query).

    Example:
        >>> import pandas as pd
        >>> run = pd.DataFrame({"system": "s", "query_id": "q", "doc_id": ["a", "b"], "score": [2.0, 1.0]})
        >>> gains = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b"], "gain": [0.2, 0.9]})
        >>> round(float(evaluate(run, gains=gains, k=2)["rcp_ndcg"].iloc[0]), 4)
        0.7482
    """
    run = validate_run(run)
    proto = get_protocol(protocol)
    if calibration is not None:
        gains = calibration.gains() if gains is None else gains
        count_gains = calibration.count_gains() if count_gains is None else count_gains
    columns: dict[str, pd.Series] = {}
    if gains is not None:
        columns["rcp_ndcg"] = ndcg_table(run, gains, k=k, protocol=proto, pools=pools, excluded=excluded)
    if count_gains is not None:
        columns["count_ndcg"] = ndcg_table(run, count_gains, k=k, protocol=proto, pools=pools, excluded=excluded)
    if qrels is not None:
        q = qrels.loc[:, ["query_id", "doc_id", "grade"]].copy()
        q["query_id"] = q["query_id"].astype(str)
        q["doc_id"] = q["doc_id"].astype(str)
        grade = pd.to_numeric(q["grade"], errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(grade).all():
            row = q.loc[~np.isfinite(grade)].iloc[0]
            raise DataError(f"qrel grade of document {row.doc_id!r} for query {row.query_id!r} is not a number")
        if (grade < 0).any():
            i = int(np.flatnonzero(grade < 0)[0])
            first = f"document {q['doc_id'].iloc[i]!r} of query {q['query_id'].iloc[i]!r}, grade {float(grade[i]):g}"
            grade = clip_negative_grades(grade, qrels.attrs.get("source", "qrels"), first)
        q["gain"] = 2.0**grade - 1.0 if exponential_qrels else grade
        positives = _drop_pairs(q, _excluded_pairs(excluded))
        positives = positives.loc[positives["gain"] > 0, ["query_id", "gain"]]
        qn = ndcg_table(
            run, q[["query_id", "doc_id", "gain"]], k=k, protocol=proto,
            pools=pools if pools is not None else (gains[["query_id", "doc_id"]] if gains is not None else q[["query_id", "doc_id"]]),
            excluded=excluded, ideal=positives,
        )
        if proto.qrel_decimals is not None:
            qn = qn.round(proto.qrel_decimals)
        columns["qrel_ndcg"] = qn
    if not columns:
        raise DataError("evaluate needs a calibration, a gains table or qrels")
    out = pd.DataFrame(columns)
    out.index.names = ["system", "query_id"]
    out = out.reset_index()
    if "dataset" in run.columns:
        ds = run.drop_duplicates("query_id").set_index("query_id")["dataset"]
        out.insert(2, "dataset", out["query_id"].map(ds))
    return out


def leaderboard(per_query: pd.DataFrame, metrics: Iterable[str] | None = None) -> pd.DataFrame:
    """Mean of each metric per system: over queries within a dataset, then unweighted over datasets.

    Systems are averaged over the same queries (:func:`rcp_jax.per_query.pair_queries`): a query without a
    value for any system (e.g. no positive qrel) is excluded, and a query only some systems have is
    dropped for all of them; each case is announced by one warning that counts the queries (and names
    the missing system/query cells), so a system that lacks a query is never ranked on an easier subset.

    Returns:
        DataFrame indexed by system with one column per metric, sorted by the first metric descending.
    """
    metrics = [m for m in (metrics or ("rcp_ndcg", "count_ndcg", "qrel_ndcg")) if m in per_query.columns]
    if not metrics:
        return per_query.groupby("system").mean(numeric_only=True)
    df, metrics = prepare_per_query(per_query, metrics)
    pairing = pair_queries(df, metrics)
    for note in pairing.notes():
        if "excluded from" in note:
            warnings.warn(note, stacklevel=2)
    warn_dropped(pairing)
    per_ds = pairing.table.groupby(["system", "dataset"])[metrics].mean()
    board = per_ds.groupby("system").mean()
    return board.sort_values(metrics[0], ascending=False)

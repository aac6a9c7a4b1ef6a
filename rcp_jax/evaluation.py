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
from rcp_jax.encoding.runs import attach_pool_and_gains, system_query_groups
from rcp_jax.errors import DataError
from rcp_jax.metrics import Protocol, _group_order, get_protocol, ndcg_flat
from rcp_jax.per_query import pair_queries, prepare_per_query, warn_dropped

RUN_COLUMNS = ("system", "query_id", "doc_id", "score")
#: What :func:`evaluate` does with a top-k document that has no gain (never judged): ``refuse`` to rank a
#: system whose hole rate passes ``max_hole_rate`` (else as ``zero``), ``zero`` (gain 0: the document counts
#: as judged non-relevant), ``ignore`` (the document is dropped from the ranking; the ones below move up).
HOLE_POLICIES = ("refuse", "zero", "ignore")
#: Default largest hole rate (unjudged share of a system's top-k documents, over all its queries) that
#: ``holes="refuse"`` accepts.
MAX_HOLE_RATE = 0.1


class HoleError(DataError):
    """:func:`evaluate` refused to rank systems with too many unjudged top-k documents; ``table`` is the
    per-(system, query) :func:`hole_table`."""

    def __init__(self, message: str, table: pd.DataFrame) -> None:
        super().__init__(message)
        self.table = table


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


def _tie_key(r: pd.DataFrame, proto: Protocol, pool_size: int) -> np.ndarray:
    """int64 order among equal scores of each row of ``r`` (with ``_pos``) under the protocol's tie rule."""
    if proto.ties == "doc_id_desc":
        return (-pd.Series(pd.factorize(r["doc_id"], sort=True)[0])).to_numpy()
    if proto.ties == "input_order":
        order_in_run = np.arange(len(r))
        return np.where(r["_pos"].notna(), r["_pos"].fillna(0).to_numpy(), pool_size + order_in_run).astype(np.int64)
    return np.zeros(len(r), dtype=np.int64)


def hole_table(
    run: pd.DataFrame,
    gains: pd.DataFrame,
    *,
    k: int = 10,
    protocol: str | Protocol = "plain",
    pools: pd.DataFrame | None = None,
    excluded=None,
) -> pd.DataFrame:
    """How much of each (system, query) top-k has no gain in ``gains`` (was never judged).

    The top k is the one :func:`ndcg_table` scores (same pool restriction, exclusions and tie rule); under
    the ``group_mean`` tie rule a tie straddling rank k counts its holes in proportion (so ``holes`` may be
    fractional). Queries without any gain are left out: their nDCG is NaN (not scored), not holed.

    Returns:
        DataFrame ``system, query_id, top_k, holes, hole_rate``: documents in the top k, of them without a
        gain, and their share (0 for an empty list), one row per (system, query), sorted.
    """
    proto = get_protocol(protocol)
    pairs = _excluded_pairs(excluded)
    known = gains.loc[:, ["query_id", "doc_id"]].astype(str).drop_duplicates().assign(gain=1.0)
    r = _drop_pairs(run, pairs)
    r = r.loc[r["query_id"].isin(pd.unique(known["query_id"]))]
    pool = (pools if pools is not None else known)[["query_id", "doc_id"]].astype(str)
    pool = pool.assign(_pos=pool.groupby("query_id", sort=False).cumcount())
    r = attach_pool_and_gains(r, pool, known, proto.pool_only)
    group, index = system_query_groups(r)
    hole = (r["gain"].to_numpy() == 0.0).astype(np.float64)  # the known ones carry gain 1 here
    order = _group_order(group, r["score"].to_numpy(),  # the kernel's order (a tie's holes are averaged below)
                         _tie_key(r, proto, len(pool)) if proto.ties != "group_mean" else np.zeros(len(r), np.int64))
    g_sorted, s_sorted, h_sorted = group[order], r["score"].to_numpy()[order], hole[order]
    n = len(order)
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if n else np.zeros(0, np.int64)
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    if proto.ties == "group_mean" and n:  # a tie's holes are spread over its ranks
        tie_id = np.cumsum(np.r_[True, (g_sorted[1:] != g_sorted[:-1]) | (s_sorted[1:] != s_sorted[:-1])]) - 1
        h_sorted = (np.bincount(tie_id, weights=h_sorted) / np.bincount(tie_id))[tie_id]
    top = rank < k
    top_k = np.bincount(g_sorted, weights=top.astype(np.float64), minlength=len(index))
    holes = np.bincount(g_sorted, weights=h_sorted * top, minlength=len(index))
    out = pd.DataFrame({"top_k": top_k.astype(np.int64), "holes": holes}, index=index).reset_index()
    out["hole_rate"] = np.divide(holes, top_k, out=np.zeros_like(holes), where=top_k > 0)
    return out


def system_hole_rates(table: pd.DataFrame) -> pd.Series:
    """Each system's hole rate over all its queries (unjudged top-k documents / top-k documents), worst first."""
    sums = table.groupby("system")[["holes", "top_k"]].sum()
    rate = (sums["holes"] / sums["top_k"].where(sums["top_k"] > 0)).fillna(0.0)
    return rate.sort_values(ascending=False, kind="stable")


def _refuse_holes(table: pd.DataFrame, max_rate: float, k: int) -> None:
    """Raise :class:`HoleError` naming the systems whose hole rate passes ``max_rate``, worst first, each with
    its worst queries, and the fixes."""
    rates = system_hole_rates(table)
    over = rates[rates > max_rate]
    if over.empty:
        return
    parts = []
    for system, rate in over.head(5).items():
        rows = table.loc[(table["system"] == system) & (table["holes"] > 0)]
        worst = rows.sort_values(["holes", "query_id"], ascending=[False, True], kind="stable").head(3)
        queries = ", ".join(f"{q} {h:g}/{t}" for q, h, t in zip(worst["query_id"], worst["holes"].round(2),
                                                                     worst["top_k"]))
        parts.append(f"{system} {100 * rate:.1f}% (worst queries: {queries})")
    more = f" and {len(over) - 5} more" if len(over) > 5 else ""
    raise HoleError(
        f"{len(over)} system(s) have more than {100 * max_rate:g}% of their top-{k} documents unjudged (no gain in "
        f"the calibration): {'; '.join(parts)}{more}. Judge those documents with `rcp-jax extend --runs <run file> "
        "--store <store> --calibration <fit folder> --dataset <BEIR folder> (or --rows <rows.jsonl>) --model "
        "<judge>` (it places them on the calibrated scale), or rank anyway: "
        "--holes zero (an unjudged document counts as gain 0) or --holes ignore (unjudged documents are dropped "
        f"from the ranking), or raise --max-hole-rate (now {max_rate:g})",
        table,
    )


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
    r = attach_pool_and_gains(r, pool, g, proto.pool_only)
    group_codes, group_index = system_query_groups(r)
    tie_key = _tie_key(r, proto, len(pool))

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
    holes: str = "refuse",
    max_hole_rate: float = MAX_HOLE_RATE,
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
        holes: what a top-k document without an RCP gain (never judged) does to RCP- and Count-nDCG (one of
            :data:`HOLE_POLICIES`): ``"refuse"`` (default) raises :class:`HoleError` when a system's hole rate
            (unjudged share of its top-k documents over all its queries) passes ``max_hole_rate``, and
            otherwise scores like ``"zero"``; ``"zero"``: gain 0; ``"ignore"``: the document is dropped from
            the ranking. qrel-nDCG is not affected (an unjudged document has grade 0, as in trec_eval).
        max_hole_rate: the largest hole rate ``"refuse"`` accepts (default :data:`MAX_HOLE_RATE`, 0.1).

    Returns:
        DataFrame ``system, query_id, [dataset,] rcp_ndcg, count_ndcg, qrel_ndcg`` (columns present for
        the gains given), one row per (system, query); ``attrs["k"]`` is ``k``. With gains, ``attrs["holes"]`` holds the
        :func:`hole_table` of the run (before ``"ignore"`` drops anything).

    Example:
        >>> import pandas as pd
        >>> run = pd.DataFrame({"system": "s", "query_id": "q", "doc_id": ["a", "b"], "score": [2.0, 1.0]})
        >>> gains = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b"], "gain": [0.2, 0.9]})
        >>> round(float(evaluate(run, gains=gains, k=2)["rcp_ndcg"].iloc[0]), 4)
        0.7482
    """
    run = validate_run(run)
    proto = get_protocol(protocol)
    if holes not in HOLE_POLICIES:
        raise DataError(f"holes must be one of {', '.join(HOLE_POLICIES)}, got {holes!r}")
    if not 0 <= max_hole_rate <= 1:
        raise DataError(f"the largest hole rate must lie in [0, 1], got {max_hole_rate:g}")
    if calibration is not None:
        gains = calibration.gains() if gains is None else gains
        count_gains = calibration.count_gains() if count_gains is None else count_gains
    columns: dict[str, pd.Series] = {}
    judged = gains if gains is not None else count_gains
    hole_rows = None
    gain_run = run
    if judged is not None:
        hole_rows = hole_table(run, judged, k=k, protocol=proto, pools=pools, excluded=excluded)
        if holes == "refuse":
            _refuse_holes(hole_rows, max_hole_rate, k)
        elif holes == "ignore":
            keys = pd.MultiIndex.from_frame(judged[["query_id", "doc_id"]].astype(str))
            gain_run = run.loc[pd.MultiIndex.from_frame(run[["query_id", "doc_id"]]).isin(keys)]
    if gains is not None:
        columns["rcp_ndcg"] = ndcg_table(gain_run, gains, k=k, protocol=proto, pools=pools, excluded=excluded)
    if count_gains is not None:
        columns["count_ndcg"] = ndcg_table(gain_run, count_gains, k=k, protocol=proto, pools=pools, excluded=excluded)
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
    if hole_rows is not None:
        out.attrs["holes"] = hole_rows
    out.attrs["k"] = int(k)  # the cut-off, for reports (rcp_jax.plots.report labels the leaderboard with it)
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

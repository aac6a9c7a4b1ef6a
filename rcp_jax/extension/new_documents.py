"""Which documents of new runs a calibration has no gain for: the work list of an extension."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from rcp_jax.calibration import Calibration
from rcp_jax.errors import DataError

RUN_COLUMNS = ("system", "query_id", "doc_id", "score")


def _source(runs: pd.DataFrame) -> str:
    src = runs.attrs.get("source")
    return f"run file {src}" if src else "the runs"


def top_documents(runs: pd.DataFrame, depth: int, systems: Sequence[str] | None = None) -> pd.DataFrame:
    """Each (system, query)'s top ``depth`` documents by score (ties keep the run's row order).

    Returns:
        DataFrame ``system, query_id, doc_id, rank`` (rank 1 = best).

    Raises:
        DataError: missing columns, ``depth < 1``, or a system named in ``systems`` that the runs lack.
    """
    missing = [c for c in RUN_COLUMNS if c not in runs.columns]
    if missing:
        raise DataError(f"{_source(runs)} lacks column(s) {missing}; expected {list(RUN_COLUMNS)}")
    if int(depth) < 1:
        raise DataError(f"--depth must be >= 1, got {depth}")
    df = runs.loc[:, list(RUN_COLUMNS)].copy()
    for col in ("system", "query_id", "doc_id"):
        df[col] = df[col].astype(str)
    if systems is not None:
        have = set(df["system"])
        unknown = [s for s in systems if s not in have]
        if unknown:
            raise DataError(f"system(s) {unknown} are not in {_source(runs)} (it holds {sorted(have)}); "
                            "fix --systems")
        df = df[df["system"].isin(list(systems))]
    df["_row"] = range(len(df))
    df = df.sort_values(["system", "query_id", "score", "_row"], ascending=[True, True, False, True], kind="stable")
    df["rank"] = df.groupby(["system", "query_id"], sort=False).cumcount() + 1
    return df.loc[df["rank"] <= int(depth), ["system", "query_id", "doc_id", "rank"]].reset_index(drop=True)


def find_new_documents(
    runs: pd.DataFrame, calibration: Calibration, *, depth: int = 10, systems: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The top-``depth`` documents of ``runs`` that ``calibration`` has no gain for, one row per document.

    Args:
        runs: ``system, query_id, doc_id, score`` (``rcp_jax.read_run``).
        calibration: the calibration to extend (a frozen-BT MAP: it places documents by BT score).
        depth: how deep each system's ranking is read.
        systems: only these systems of ``runs`` (default: every system).

    Returns:
        DataFrame ``query_id, doc_id, best_rank, systems`` (systems comma-joined), sorted by query, then
        best rank, then id.

    Raises:
        DataError: the calibration has no BT scale (rubric-only), a query of the runs is not calibrated
            (unknown to it, or without rubric answers: such a query needs the full schedule, ``rcp-jax
            judge``), or no top-``depth`` document is new (nothing to extend).
    """
    if calibration.method != "map" or "theta_bt" not in calibration.documents.columns \
            or calibration.documents["theta_bt"].isna().all():
        raise DataError(
            f"the calibration is {calibration.method!r}, without Bradley-Terry scores to anchor new documents to; "
            "extend the calibration `rcp-jax fit --out DIR` writes with the joint (the default) or frozen model, not "
            "--calibration-model rubric-only"
        )
    top = top_documents(runs, depth, systems)
    if top.empty:
        raise DataError(f"{_source(runs)} has no rows; give the new system's run")
    queries = calibration.queries
    calibrated = set(queries.loc[queries["calibrated"].astype(bool), "query_id"].astype(str))
    known = set(queries["query_id"].astype(str))
    unknown = sorted(set(top["query_id"]) - calibrated)
    if unknown:
        absent = [q for q in unknown if q not in known]
        uncal = [q for q in unknown if q in known]
        parts = []
        if absent:
            parts.append(f"{len(absent)} quer{'y' if len(absent) == 1 else 'ies'} unknown to the calibration "
                         f"({', '.join(map(repr, absent[:5]))}{' ...' if len(absent) > 5 else ''})")
        if uncal:
            parts.append(f"{len(uncal)} without rubric answers, so uncalibrated "
                         f"({', '.join(map(repr, uncal[:5]))}{' ...' if len(uncal) > 5 else ''})")
        raise DataError(
            f"{_source(runs)} ranks {' and '.join(parts)}: an extension places new documents on a query's existing "
            "scale (its tau and alpha), which such a query does not have. Judge new queries with the full schedule "
            "(`rcp-jax judge` with their pools, then `rcp-jax fit`), or drop them from the run"
        )
    docs = calibration.documents
    scored = docs.loc[docs["gain"].notna(), ["query_id", "doc_id"]].astype(str)
    have = pd.MultiIndex.from_frame(scored)
    is_new = ~pd.MultiIndex.from_frame(top[["query_id", "doc_id"]]).isin(have)
    new = top.loc[is_new]
    if new.empty:
        raise DataError(
            f"every top-{depth} document of {_source(runs)} ({top['query_id'].nunique()} queries, "
            f"{top['system'].nunique()} system(s)) already has a gain in the calibration: nothing to extend. "
            "Score the run directly with `rcp-jax evaluate --calibration ...` (or read deeper with --depth)"
        )
    out = (new.groupby(["query_id", "doc_id"], sort=False)
           .agg(best_rank=("rank", "min"), systems=("system", lambda s: ",".join(sorted(set(s)))))
           .reset_index())
    return out.sort_values(["query_id", "best_rank", "doc_id"], kind="stable").reset_index(drop=True)

"""Stage A from tidy tables: validate window scores and fit Bradley-Terry for every query at once."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pandas as pd

from models import bradley_terry
from rcp_jax.data.table_checks import finite_column, show
from rcp_jax.errors import DataError

WINDOW_COLUMNS = ("query_id", "window_id", "doc_id", "score")


def _require_columns(df: pd.DataFrame, columns, what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(
            f"{what} is missing column(s) {missing}; expected columns {list(columns)} (got {list(df.columns)})"
        )


def validate_window_scores(window_scores: pd.DataFrame) -> pd.DataFrame:
    """Check a long table of window scores and return it with string ids.

    Refuses, naming the query, window and document: missing columns, non-finite scores, a document
    listed twice in one window, and windows with fewer than two documents (they carry no comparison).
    """
    _require_columns(window_scores, WINDOW_COLUMNS, "window scores")
    df = window_scores.loc[:, list(WINDOW_COLUMNS)].copy()
    df["query_id"] = df["query_id"].astype(str)
    df["window_id"] = df["window_id"].astype(str)
    df["doc_id"] = df["doc_id"].astype(str)
    score, row = finite_column(df, "score")
    if row is not None:
        raise DataError(
            f"score of document {row.doc_id!r} in window {row.window_id!r} of query {row.query_id!r} is "
            f"{show(window_scores.loc[row.name, 'score'])}; scores must be finite numbers (re-judge the window "
            f"or drop it)"
        )
    df["score"] = score
    dup = df.duplicated(["query_id", "window_id", "doc_id"], keep=False)
    if dup.any():
        row = df.loc[dup].iloc[0]
        raise DataError(
            f"document {row.doc_id!r} appears more than once in window {row.window_id!r} of query "
            f"{row.query_id!r}; a window shows each document once"
        )
    sizes = df.groupby(["query_id", "window_id"], sort=False).size()
    small = sizes[sizes < 2]
    if len(small):
        q, w = small.index[0]
        raise DataError(
            f"window {w!r} of query {q!r} has a single document; a window needs at least two documents to "
            f"compare (drop it)"
        )
    return df


def fit_bradley_terry(
    window_scores: pd.DataFrame, *, ridge: float = bradley_terry.DEFAULT_RIDGE, float64: bool = False
) -> pd.DataFrame:
    """Fit the soft-label Bradley-Terry model of every query in one batched call.

    Args:
        window_scores: long table with columns ``query_id, window_id, doc_id, score`` (one row per
            document shown in a window; scores on the judge's -5..+5 logit scale). Only score
            differences within a window are used.
        ridge: L2 penalty (METHOD: 1e-4).
        float64: fit in double precision (default float32, accurate to ~1e-5 in theta).

    Returns:
        DataFrame with columns ``query_id, doc_id, theta, se, component`` (documents in order of first
        appearance per query; theta centred per query; ``component`` numbers the connected components of
        the query's comparison graph). ``result.attrs["n_components"]`` maps query id to its number of
        components; a disconnected query triggers a warning, never a silent merge.

    Example:
        >>> import pandas as pd
        >>> ws = pd.DataFrame({"query_id": "q", "window_id": "w1", "doc_id": ["a", "b", "c"],
        ...                    "score": [3.0, 0.0, -2.0]})
        >>> bt = fit_bradley_terry(ws)
        >>> list(bt.sort_values("theta", ascending=False).doc_id)
        ['a', 'b', 'c']
    """
    df = validate_window_scores(window_scores)
    # The arithmetic runs in a canonical order (queries, then windows, sorted by id; documents keep their
    # order inside a window), so theta does not depend on the order of the input rows, bit for bit.
    # The output keeps the input's order.
    input_order = df[["query_id", "doc_id"]].drop_duplicates()
    canon = np.lexsort((pd.factorize(df["window_id"], sort=True)[0], pd.factorize(df["query_id"], sort=True)[0]))
    df = df.iloc[canon].reset_index(drop=True)
    q_codes, q_names = pd.factorize(df["query_id"], sort=False)
    df["_q"] = q_codes
    df["_d"] = df.groupby("_q", sort=False)["doc_id"].transform(lambda s: pd.factorize(s)[0])
    w_codes, _ = pd.factorize(pd.MultiIndex.from_frame(df[["_q", "window_id"]]), sort=False)
    df["_w"] = w_codes
    df["_pos"] = df.groupby("_w", sort=False).cumcount()
    n_windows = int(w_codes.max()) + 1 if len(df) else 0
    width = int(df["_pos"].max()) + 1 if len(df) else 1
    doc_index = np.full((n_windows, width), -1, dtype=np.int64)
    scores = np.zeros((n_windows, width))
    doc_index[df["_w"], df["_pos"]] = df["_d"]
    scores[df["_w"], df["_pos"]] = df["score"]
    window_query = df.groupby("_w", sort=True)["_q"].first().to_numpy()
    doc_names = df.drop_duplicates(["_q", "_d"]).sort_values(["_q", "_d"])
    n_docs = doc_names.groupby("_q", sort=True).size().to_numpy()

    fit = bradley_terry.fit_windows(
        doc_index, scores, window_query, n_docs, ridge=ridge, dtype=jnp.float64 if float64 else jnp.float32
    )
    rows_q = doc_names["_q"].to_numpy()
    rows_d = doc_names["_d"].to_numpy()
    out = pd.DataFrame(
        {
            "query_id": doc_names["query_id"].to_numpy(),
            "doc_id": doc_names["doc_id"].to_numpy(),
            "theta": fit.theta[rows_q, rows_d],
            "se": fit.se[rows_q, rows_d],
            "component": fit.component[rows_q, rows_d],
        }
    )
    out = input_order.merge(out, on=["query_id", "doc_id"], how="left", validate="one_to_one").reset_index(drop=True)
    n_comp = {str(q_names[i]): int(fit.n_components[i]) for i in range(len(q_names))}
    n_comp = {q: n_comp[q] for q in dict.fromkeys(input_order["query_id"])}
    out.attrs["n_components"] = n_comp
    broken = {q: k for q, k in n_comp.items() if k > 1}
    if broken:
        listed = ", ".join(f"{q!r} ({k} components)" for q, k in list(broken.items())[:5])
        warnings.warn(
            f"comparison graph is disconnected for {len(broken)} quer{'y' if len(broken) == 1 else 'ies'}: "
            f"{listed}. Scores of different components are not comparable; add windows that mix them "
            f"(see the 'component' column).",
            stacklevel=2,
        )
    return out

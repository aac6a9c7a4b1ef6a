"""Stage A from tidy tables: validate window scores and fit Bradley-Terry for every query at once."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pandas as pd

from rcp_jax.models import bradley_terry
from rcp_jax.encoding.ids import id_strings
from rcp_jax.encoding.windows import WINDOW_COLUMNS, WindowArrays, encode_window_scores


def validate_window_scores(window_scores: pd.DataFrame) -> pd.DataFrame:
    """Check a long table of window scores and return it with string ids and float scores.

    Refuses, naming the query, window and document: missing columns, non-finite scores, missing ids, a
    document listed twice in one window, and windows with fewer than two documents (they carry no
    comparison); see :func:`rcp_jax.encoding.encode_window_scores`.
    """
    encode_window_scores(window_scores)
    df = window_scores.loc[:, list(WINDOW_COLUMNS)].copy()
    for col in ("query_id", "window_id", "doc_id"):
        df[col] = id_strings(df[col])
    df["score"] = pd.to_numeric(df["score"], errors="coerce").astype(np.float64)
    return df


#: the dtype pandas gives a column of Python strings (``str``, arrow-backed where pyarrow is installed)
_STR_DTYPE = pd.Series(np.array(["a"], dtype=object)).dtype


def _str_column(names: pd.Index):
    """An id column for an output frame, as a column built from Python strings would be: the names'
    own array when it already has that dtype (no per-row string objects), else the strings."""
    return names.array if names.dtype == _STR_DTYPE else names.to_numpy()


def _fit_frame(arrays: WindowArrays, ridge: float, dtype) -> tuple[pd.DataFrame, dict]:
    """Fit the encoded queries of ``arrays`` and lay the result out as :func:`fit_bradley_terry`'s frame
    (rows in order of first appearance of the (query, document) pairs) with its ``{query id: number of
    components}`` in order of first appearance of the queries (the frame's attrs are not set)."""
    fit = bradley_terry.fit_windows(
        arrays.doc_index, arrays.scores, arrays.window_query, arrays.n_docs, ridge=ridge, dtype=dtype,
    )
    pq, pd_ = arrays.pair_query, arrays.pair_doc
    out = pd.DataFrame(
        {
            "query_id": _str_column(arrays.query_names.take(pq)),
            "doc_id": _str_column(arrays.pair_doc_id),
            "theta": fit.theta[pq, pd_],
            "se": fit.se[pq, pd_],
            "component": fit.component[pq, pd_],
        }
    )
    order = arrays.query_order
    n_comp = dict(zip(map(str, arrays.query_names.take(order).tolist()),
                      np.asarray(fit.n_components)[order].astype(int).tolist()))
    return out, n_comp


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
        appearance in the input; theta centred per query; ``component`` numbers the connected components of
        the query's comparison graph). ``result.attrs["n_components"]`` maps query id to its number of
        components; a disconnected query triggers a warning, never a silent merge.

    The table is encoded by :func:`rcp_jax.encoding.encode_window_scores` and the arithmetic runs in its
    canonical order, so theta does not depend on the order of the input rows, bit for bit.

    Example:
        >>> import pandas as pd
        >>> ws = pd.DataFrame({"query_id": "q", "window_id": "w1", "doc_id": ["a", "b", "c"],
        ...                    "score": [3.0, 0.0, -2.0]})
        >>> bt = fit_bradley_terry(ws)
        >>> list(bt.sort_values("theta", ascending=False).doc_id)
        ['a', 'b', 'c']
    """
    dtype = jnp.float64 if float64 else jnp.float32
    out, n_comp = _fit_frame(encode_window_scores(window_scores), ridge, dtype)
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

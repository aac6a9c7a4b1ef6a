"""Stage A from tidy tables: validate window scores and fit Bradley-Terry for every query at once."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

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


def string_ids(column: pd.Series) -> pd.Series:
    """An id column as strings (a column that already holds strings is returned as is)."""
    return column if isinstance(column.dtype, pd.StringDtype) else column.astype(str)


def first_codes(keys: np.ndarray, upper: int) -> tuple[np.ndarray, int]:
    """Codes of non-negative int keys numbered in order of first appearance: ``(int64[n], count)``.

    Keys below ``upper`` that are not too sparse are coded through dense arrays (``np.minimum.at``
    finds each key's first position, a cumulative sum over those positions numbers them); sparse keys
    go through a hash table (``pd.factorize``, which numbers them the same way).
    """
    n = len(keys)
    if upper > 4 * n + 4096:
        codes, uniques = pd.factorize(keys)
        return codes.astype(np.int64, copy=False), len(uniques)
    first = np.full(upper, n, dtype=np.int64)
    np.minimum.at(first, keys, np.arange(n, dtype=np.int64))
    starts = first[first < n]
    is_first = np.zeros(n + 1, dtype=np.int64)
    is_first[starts] = 1
    number = np.cumsum(is_first) - 1
    return number[first[keys]], len(starts)


def sorted_codes(keys: np.ndarray, upper: int) -> tuple[np.ndarray, int]:
    """Codes of non-negative int keys numbered in sorted order of the keys: ``(int64[n], count)``."""
    if upper <= 4 * len(keys) + 4096:
        present = np.bincount(keys, minlength=upper) > 0
        rank = np.cumsum(present) - 1
        return rank[keys], int(present.sum())
    codes, uniques = pd.factorize(keys)
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[np.argsort(uniques, kind="stable")] = np.arange(len(uniques))
    return rank[codes], len(uniques)


def _window_slots(q_code: np.ndarray, w_code: np.ndarray, n_w: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Window number (sorted by query, then window id) and slot inside the window (input order) of each
    row: ``(int64[n], int64[n], n_windows)``.

    Usually the rows of a window are contiguous: the runs of equal (query, window) are the windows, and
    only the run heads are sorted. Otherwise every row's key is coded and the rows sorted stably.
    """
    n = len(q_code)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    heads = np.flatnonzero(np.concatenate([[True], (q_code[1:] != q_code[:-1]) | (w_code[1:] != w_code[:-1])]))
    order = np.lexsort((w_code[heads], q_code[heads]))
    hq, hw = q_code[heads][order], w_code[heads][order]
    if not np.any((hq[1:] == hq[:-1]) & (hw[1:] == hw[:-1])):
        rank = np.empty(len(heads), dtype=np.int64)
        rank[order] = np.arange(len(heads))
        lengths = np.diff(np.append(heads, n))
        return np.repeat(rank, lengths), np.arange(n) - np.repeat(heads, lengths), len(heads)
    win, n_win = sorted_codes(q_code * n_w + w_code, (int(q_code.max()) + 1) * n_w)
    sizes = np.bincount(win, minlength=n_win)
    order = np.argsort(win, kind="stable")
    slot = np.empty(n, dtype=np.int64)
    slot[order] = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return win, slot, n_win


@dataclass(frozen=True)
class WindowArrays:
    """Window scores as the arrays of :func:`models.bradley_terry.fit_windows`, with the ids to map back.

    The arrays follow a canonical order, so a fit does not depend on the order of the input rows: queries
    and windows sorted by id, documents in their input order inside a window, and each query's documents
    numbered in order of first appearance in that order.

    Attributes:
        doc_index: int32[W, w] document index within its query, -1 for an empty slot.
        scores: float64[W, w] judge scores (0 in empty slots).
        window_query: int64[W] query index (``query_names`` order).
        n_docs: int64[Q] documents per query.
        query_names: str[Q] query ids, sorted (a pandas Index).
        query_order: int64[Q] query indices in order of first appearance in the input.
        pair_query, pair_doc: int64[P] query index and document index of every (query, document) pair, in
            order of first appearance in the input.
        pair_doc_id: str[P] document id of each pair (a pandas Index).
    """

    doc_index: np.ndarray
    scores: np.ndarray
    window_query: np.ndarray
    n_docs: np.ndarray
    query_names: pd.Index
    query_order: np.ndarray
    pair_query: np.ndarray
    pair_doc: np.ndarray
    pair_doc_id: pd.Index


def encode_window_scores(window_scores: pd.DataFrame) -> WindowArrays:
    """Check a long table of window scores and encode it as arrays in a few vectorised passes.

    Refuses, naming the query, window and document: missing columns, non-finite scores, a document
    listed twice in one window, and windows with fewer than two documents (they carry no comparison).
    """
    _require_columns(window_scores, WINDOW_COLUMNS, "window scores")
    q_ids, w_ids, d_ids = (string_ids(window_scores[c]) for c in ("query_id", "window_id", "doc_id"))
    score, row = finite_column(window_scores, "score")
    if row is not None:
        raise DataError(
            f"score of document {str(row.doc_id)!r} in window {str(row.window_id)!r} of query {str(row.query_id)!r} "
            f"is {show(row.score)}; scores must be finite numbers (re-judge the window or drop it)"
        )
    n_rows = len(score)
    q_code, q_names = pd.factorize(q_ids, sort=True)
    w_code, w_names = pd.factorize(w_ids, sort=True)
    d_code, d_names = pd.factorize(d_ids, sort=False)
    q_code, w_code, d_code = (np.asarray(c, dtype=np.int64) for c in (q_code, w_code, d_code))
    n_q = len(q_names)
    win, slot, n_win = _window_slots(q_code, w_code, len(w_names))
    sizes = np.bincount(win, minlength=n_win)
    width = max(int(sizes.max()) if n_win else 1, 1)
    names = np.full((n_win, width), -1, dtype=np.int64)
    names[win, slot] = d_code
    # a document twice in one window: compare every pair of slots
    twice = np.zeros(n_win, dtype=bool)
    for i in range(width - 1):
        twice |= ((names[:, i : i + 1] == names[:, i + 1 :]) & (names[:, i : i + 1] >= 0)).any(axis=1)
    if twice.any():
        w_bad = int(np.flatnonzero(twice)[0])
        docs = names[w_bad][names[w_bad] >= 0]
        _, inverse, counts = np.unique(docs, return_inverse=True, return_counts=True)
        repeated = docs[counts[inverse] > 1][0]
        first = np.flatnonzero((win == w_bad) & (d_code == repeated))[0]
        raise DataError(
            f"document {d_ids.iloc[first]!r} appears more than once in window {w_ids.iloc[first]!r} of query "
            f"{q_ids.iloc[first]!r}; a window shows each document once"
        )
    small = np.flatnonzero(sizes < 2)
    if len(small):
        first = int(np.flatnonzero(win == small[0])[0])
        raise DataError(
            f"window {w_ids.iloc[first]!r} of query {q_ids.iloc[first]!r} has a single document; a window needs "
            f"at least two documents to compare (drop it)"
        )
    window_query = np.zeros(n_win, dtype=np.int64)
    window_query[win] = q_code
    scores = np.zeros((n_win, width))
    scores[win, slot] = score
    # (query, document) pairs numbered by first appearance in the canonical (window-sorted) layout, which
    # groups them by query: a query's pairs are one run of codes
    cell = names >= 0
    cell_query = np.broadcast_to(window_query[:, None], names.shape)[cell]
    cell_name = names[cell]
    owner = np.zeros(len(d_names), dtype=np.int64)
    owner[d_code] = q_code
    if np.array_equal(owner[d_code], q_code):  # every document id belongs to one query: it is the pair's key
        pair_code, n_pairs = first_codes(cell_name, len(d_names))
    else:
        pair_code, n_pairs = first_codes(cell_query * len(d_names) + cell_name, n_q * len(d_names))
    pair_query_sorted = np.zeros(n_pairs, dtype=np.int64)
    pair_query_sorted[pair_code] = cell_query
    n_docs = np.bincount(pair_query_sorted, minlength=n_q)
    local = pair_code - (np.cumsum(n_docs) - n_docs)[cell_query]
    doc_index = np.full(names.shape, -1, dtype=np.int32)
    doc_index[cell] = local
    # pairs in order of first appearance in the input rows
    cell_pair = np.full(names.shape, -1, dtype=np.int64)
    cell_pair[cell] = pair_code
    row_pair = cell_pair[win, slot]
    first = np.full(n_pairs, n_rows, dtype=np.int64)
    np.minimum.at(first, row_pair, np.arange(n_rows, dtype=np.int64))
    input_rows = np.sort(first)
    pair_query = q_code[input_rows]
    first_q = np.full(n_q, n_rows, dtype=np.int64)
    np.minimum.at(first_q, q_code, np.arange(n_rows, dtype=np.int64))
    return WindowArrays(
        doc_index=doc_index, scores=scores, window_query=window_query, n_docs=n_docs,
        query_names=q_names, query_order=np.argsort(first_q, kind="stable"),
        pair_query=pair_query, pair_doc=doc_index[win[input_rows], slot[input_rows]].astype(np.int64),
        pair_doc_id=d_names.take(d_code[input_rows]),
    )


def validate_window_scores(window_scores: pd.DataFrame) -> pd.DataFrame:
    """Check a long table of window scores and return it with string ids and float scores.

    Refuses, naming the query, window and document: missing columns, non-finite scores, a document
    listed twice in one window, and windows with fewer than two documents (they carry no comparison).
    """
    encode_window_scores(window_scores)
    df = window_scores.loc[:, list(WINDOW_COLUMNS)].copy()
    for col in ("query_id", "window_id", "doc_id"):
        df[col] = string_ids(df[col])
    df["score"] = pd.to_numeric(df["score"], errors="coerce").astype(np.float64)
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
        appearance in the input; theta centred per query; ``component`` numbers the connected components of
        the query's comparison graph). ``result.attrs["n_components"]`` maps query id to its number of
        components; a disconnected query triggers a warning, never a silent merge.

    The table is encoded by :func:`encode_window_scores` (a few vectorised passes) and the arithmetic runs
    in its canonical order, so theta does not depend on the order of the input rows, bit for bit.

    Example:
        >>> import pandas as pd
        >>> ws = pd.DataFrame({"query_id": "q", "window_id": "w1", "doc_id": ["a", "b", "c"],
        ...                    "score": [3.0, 0.0, -2.0]})
        >>> bt = fit_bradley_terry(ws)
        >>> list(bt.sort_values("theta", ascending=False).doc_id)
        ['a', 'b', 'c']
    """
    arrays = encode_window_scores(window_scores)
    fit = bradley_terry.fit_windows(
        arrays.doc_index, arrays.scores, arrays.window_query, arrays.n_docs, ridge=ridge,
        dtype=jnp.float64 if float64 else jnp.float32,
    )
    pq, pd_ = arrays.pair_query, arrays.pair_doc
    out = pd.DataFrame(
        {
            "query_id": arrays.query_names.take(pq).to_numpy(),
            "doc_id": arrays.pair_doc_id.to_numpy(),
            "theta": fit.theta[pq, pd_],
            "se": fit.se[pq, pd_],
            "component": fit.component[pq, pd_],
        }
    )
    n_comp = {str(arrays.query_names[i]): int(fit.n_components[i]) for i in arrays.query_order}
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

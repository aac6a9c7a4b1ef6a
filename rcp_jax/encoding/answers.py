"""Rubric answers (one row per placement of a document) as placement and pass counts of the BT rows.

Each answer is matched to the BT row of its (query, document) through integer codes of the ids
(:mod:`rcp_jax.encoding.ids`), and the counts are bincounts over those rows: no merge or groupby of
string columns.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from rcp_jax.encoding.ids import id_codes, id_positions, run_starts
from rcp_jax.encoding.threads import run_concurrently
from rcp_jax.errors import CalibrationError, DataError


def answer_counts(bt: pd.DataFrame, bt_query: np.ndarray, q_names: pd.Index, answers: pd.DataFrame,
                  criteria: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(placements float64[n], passes float64[n, K])``: how often each of the ``n`` BT rows was placed in
    a rubric and how many of those placements passed each criterion.

    Args:
        bt: ``query_id, doc_id`` of the BT rows (string ids).
        bt_query: int[n] each BT row's query code, an index into ``q_names`` (distinct string ids).
        answers: ``query_id, doc_id`` and the 0/1 ``criteria`` columns, one row per placement.

    Raises:
        DataError: a document with two BT rows in its query.
        CalibrationError: answers for a (query, document) without a BT row (names the first, and counts them).
    """
    bt_doc, d_names = id_codes(bt["doc_id"])
    bt_row = _bt_rows(bt_query, bt_doc, len(d_names))
    if bt_row is None:
        row = bt.loc[bt.duplicated(["query_id", "doc_id"])].iloc[0]
        raise DataError(f"document {row.doc_id!r} of query {row.query_id!r} has two BT scores; keep one")
    # the two columns' lookups side by side (pyarrow hashes without the GIL)
    a_query, a_doc = run_concurrently(lambda: _run_positions(answers["query_id"], q_names),
                                      lambda: id_positions(answers["doc_id"], d_names))
    a_row = bt_row(a_query, a_doc)
    if (a_row < 0).any():
        _refuse_orphans(bt, answers, criteria)
    n_bt = len(bt)
    placements = np.bincount(a_row, minlength=n_bt).astype(np.float64)
    passes = np.zeros((n_bt, len(criteria)))
    for c, name in enumerate(criteria):
        passes[:, c] = np.bincount(a_row, weights=answers[name].to_numpy(), minlength=n_bt)
    return placements, passes


def _run_positions(column: pd.Series, names: pd.Index) -> np.ndarray:
    """:func:`~rcp_jax.encoding.ids.id_positions` of a column whose ids come in runs (answers grouped by
    query): only the first row of each run is looked up."""
    starts = run_starts(column)
    return np.repeat(id_positions(column.take(starts), names), np.diff(np.append(starts, len(column))))


def _bt_rows(bt_q: np.ndarray, bt_d: np.ndarray, n_d: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """A lookup from (query code, document code) int[m] pairs to the BT row int64[m] (-1: no such row), or
    None when some (query, document) has two BT rows. ``bt_q``, ``bt_d`` int[n] are the codes of the BT rows
    (``n_d`` document codes)."""
    n = len(bt_q)
    if n == 0:
        return lambda q, d: np.full(len(q), -1, dtype=np.int64)
    if n_d == n:  # every document id once: the id finds the row, the query is checked
        row_of_d = np.empty(n, dtype=np.int64)
        row_of_d[bt_d] = np.arange(n)

        def by_doc(q: np.ndarray, d: np.ndarray) -> np.ndarray:
            row = row_of_d[d]
            return np.where((d >= 0) & (bt_q[row] == q), row, -1)

        return by_doc
    index = pd.Index(bt_q * n_d + bt_d)
    if not index.is_unique:
        return None

    def by_pair(q: np.ndarray, d: np.ndarray) -> np.ndarray:
        known = (q >= 0) & (d >= 0)
        return np.where(known, index.get_indexer(np.where(known, q * n_d + d, -1)), -1)

    return by_pair


def _refuse_orphans(bt: pd.DataFrame, answers: pd.DataFrame, criteria: list[str]) -> None:
    """Refuse answers for documents without a BT score, naming the first and counting them."""
    per_doc = answers.groupby(["query_id", "doc_id"], sort=False)[criteria[0]].size().reset_index()
    merged = per_doc.merge(bt, on=["query_id", "doc_id"], how="left", indicator=True)
    orphan = merged["_merge"] == "left_only"
    row = merged.loc[orphan].iloc[0]
    raise CalibrationError(
        f"rubric answers for document {row.doc_id!r} of query {row.query_id!r} have no BT score "
        f"({int(orphan.sum())} such documents); the answers and the tournament must cover the same "
        f"query and document ids"
    )

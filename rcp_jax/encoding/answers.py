"""Rubric answers (one row per placement of a document) as placement and pass counts of the BT rows.

Each answer is matched to the BT row of its (query, document) through integer codes of the ids
(:mod:`rcp_jax.encoding.ids`), and the counts are bincounts over those rows: no merge or groupby of
string columns. The usual tables (BT rows and answers both grouped by query, in the same query order,
arrow string ids) are matched in blocks of whole queries, two at a time on two threads
(:func:`_counts_by_blocks`): each block's ids in a hash table of its own, which stays in cache. Any other
table, or a block that does not match so, takes the general path (:func:`_counts_by_codes`), which also
refuses what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd

from rcp_jax.encoding.ids import arrow_strings, id_codes, id_positions, run_starts
from rcp_jax.encoding.threads import run_concurrently
from rcp_jax.errors import CalibrationError, DataError

#: BT rows per block (at least) of :func:`_counts_by_blocks`.
BLOCK_BT_ROWS = 1 << 14


def answer_counts(bt: pd.DataFrame, bt_starts: np.ndarray, bt_query: np.ndarray, q_names: pd.Index,
                  answers: pd.DataFrame, criteria: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(placements float64[n], passes float64[n, K])``: how often each of the ``n`` BT rows was placed in
    a rubric and how many of those placements passed each criterion.

    Args:
        bt: ``query_id, doc_id`` of the BT rows (string ids).
        bt_starts: int64[R] first rows of the runs of BT rows of one query.
        bt_query: int[n] each BT row's query code, an index into ``q_names`` (distinct string ids).
        answers: ``query_id, doc_id`` and the 0/1 ``criteria`` columns, one row per placement.

    Raises:
        DataError: a document with two BT rows in its query.
        CalibrationError: answers for a (query, document) without a BT row (names the first, and counts them).
    """
    values = [answers[c].to_numpy() for c in criteria]
    counts = _counts_by_blocks(bt, bt_starts, q_names, answers, values)
    return counts if counts is not None else _counts_by_codes(bt, bt_query, q_names, answers, criteria, values)


def _counts(rows: np.ndarray, values: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(placements float64[n], passes float64[n, K])`` of answers in BT rows ``rows`` int[m] (0..n-1) with the
    0/1 answers ``values`` (K arrays int[m])."""
    passes = np.zeros((n, len(values)))
    for c, v in enumerate(values):
        passes[:, c] = np.bincount(rows, weights=v, minlength=n)
    return np.bincount(rows, minlength=n).astype(np.float64), passes


def _counts_by_codes(bt: pd.DataFrame, bt_query: np.ndarray, q_names: pd.Index, answers: pd.DataFrame,
                     criteria: list[str], values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`answer_counts` of any tables: every id coded once, the refusals made here."""
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
    return _counts(a_row, values, len(bt))


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

        def by_doc(q: np.ndarray, d: np.ndarray) -> np.ndarray:  # (np.take: unlike an index, it releases the GIL)
            row = np.take(row_of_d, d)  # (d = -1: the last row, refused below)
            return np.where((d >= 0) & (np.take(bt_q, row) == q), row, -1)

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


def _counts_by_blocks(bt: pd.DataFrame, bt_starts: np.ndarray, q_names: pd.Index, answers: pd.DataFrame,
                      values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`answer_counts` of the usual tables in blocks of whole queries, or None (then the general path
    decides). Applies when each query's BT rows are one run (``bt_starts`` int64[Q], the queries numbered in
    that order), the answers come in runs of query ids in the same order (queries without answers skipped)
    and both document-id columns are arrow strings; each block is :func:`_block_counts`."""
    bt_doc, ans_doc = arrow_strings(bt["doc_id"]), arrow_strings(answers["doc_id"])
    if len(bt_starts) != len(q_names) or bt_doc is None or ans_doc is None or bt_doc.type != ans_doc.type \
            or not len(answers):
        return None
    a_starts = run_starts(answers["query_id"])
    a_query = id_positions(answers["query_id"].take(a_starts), q_names)
    if (a_query < 0).any() or (np.diff(a_query) <= 0).any():  # an unknown query, or not in the BT order
        return None
    bt_ends = np.append(bt_starts[1:], len(bt))
    a_ends = np.append(a_starts[1:], len(answers))
    # blocks of whole queries: [q0, q1) of at least BLOCK_BT_ROWS BT rows, and their answers' runs [j0, j1)
    q_cuts = np.unique(np.append(np.searchsorted(bt_starts, np.arange(0, len(bt), BLOCK_BT_ROWS)), len(q_names)))
    j_cuts = np.searchsorted(a_query, q_cuts)
    blocks = [(int(bt_starts[q0]), int(bt_ends[q1 - 1]), int(a_starts[j0]) if j0 < j1 else None,
               int(a_ends[j1 - 1]) if j0 < j1 else None, a_query[j0:j1], a_starts[j0:j1])
              for q0, q1, j0, j1 in zip(q_cuts[:-1], q_cuts[1:], j_cuts[:-1], j_cuts[1:])]
    parts = run_concurrently(*(partial(_block_counts, bt_doc, ans_doc, bt_starts, bt_ends, values, *b) for b in blocks))
    if any(p is None for p in parts):
        return None
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _block_counts(bt_doc, ans_doc, bt_starts: np.ndarray, bt_ends: np.ndarray, values: list[np.ndarray], lo: int,
                  hi: int, r0: int | None, r1: int | None, run_query: np.ndarray, run_starts_: np.ndarray):
    """The counts of BT rows ``lo..hi-1`` (whole queries) from answer rows ``r0..r1-1`` (None: no answers),
    whose runs of one query start at rows ``run_starts_`` with query codes ``run_query``; or None when the
    block's ids do not match so (a document id twice among its BT rows, or an answer outside its query's BT
    rows).

    The block's BT document ids, then its answers' ids, are coded in one pass (``dictionary_encode``, by
    first appearance): the BT ids are distinct when they get codes ``0..m-1``, and an answer's code is then
    its BT row (from ``lo``) when below ``m``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    m = hi - lo
    docs = bt_doc.slice(lo, m)
    if r0 is None:  # no answers: only the BT ids are checked
        return (np.zeros(m), np.zeros((m, len(values)))) if pc.count_distinct(docs).as_py() == m else None
    codes = pc.dictionary_encode(pa.concat_arrays([docs, ans_doc.slice(r0, r1 - r0)])).indices.to_numpy()
    if not np.array_equal(codes[:m], np.arange(m, dtype=codes.dtype)):
        return None
    rows = codes[m:].astype(np.int64)
    runs = run_starts_ - r0  # each run of a query's answers must land in that query's BT rows
    if not (np.all(np.minimum.reduceat(rows, runs) >= bt_starts[run_query] - lo)
            and np.all(np.maximum.reduceat(rows, runs) < bt_ends[run_query] - lo)):
        return None
    return _counts(rows, [v[r0:r1] for v in values], m)

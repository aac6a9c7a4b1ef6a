"""Window scores (one row per document shown in a window) as the arrays of the Bradley-Terry kernel.

:func:`encode_window_scores` checks the table and lays it out in a canonical order, so that a fit does not
depend on the order of the input rows: queries and windows sorted by id, a window's documents in input
order, each query's documents numbered by first appearance in that order. :func:`_encode` does it, top to
bottom:

1. the ids as integer codes: the document ids hashed once; the query and window ids hashed only at the
   first rows of their runs (a window's rows are usually contiguous: far fewer runs than rows);
2. the layout: where each row goes in the ``[windows, slots]`` arrays (a gather of whole runs when every
   window is one run of rows of the same length, else a scatter of the rows);
3. the pairs (query, document), coded by first appearance in the input: the document codes themselves
   when every document id belongs to one query, else codes of the (query, document) keys;
4. each query's documents numbered by first appearance in the canonical order;
5. the refusals of documents shown twice in a window and of windows of one document.

A big table whose queries come in runs of rows is cut in blocks of whole queries (:data:`BLOCK_ROWS`), encoded
two at a time on two threads (pyarrow and most numpy passes release the GIL; a block's hash tables stay in
cache) and joined (:func:`_join`): the arrays of the whole table, since queries are encoded independently.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from rcp_jax.data.table_checks import finite_column, show
from rcp_jax.encoding.ids import codes_at, id_codes, id_strings, run_starts
from rcp_jax.encoding.threads import run_concurrently
from rcp_jax.errors import DataError

WINDOW_COLUMNS = ("query_id", "window_id", "doc_id", "score")

#: Window rows per block (at least) of a table encoded in blocks of whole queries side by side.
BLOCK_ROWS = 1 << 19


@dataclass(frozen=True)
class WindowArrays:
    """Window scores as the arrays of :func:`rcp_jax.models.bradley_terry.fit_windows`, with the ids to map back.

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
    """Check a long table of window scores (``query_id, window_id, doc_id, score``) and encode it as arrays.

    Refuses, naming the row or the query, window and document: missing columns, non-finite scores, missing
    ids, a document listed twice in one window, and windows with fewer than two documents (they carry no
    comparison). Ids of any type are read as strings (:func:`rcp_jax.encoding.ids.id_codes`).
    """
    missing = [c for c in WINDOW_COLUMNS if c not in window_scores.columns]
    if missing:
        raise DataError(f"window scores is missing column(s) {missing}; expected columns {list(WINDOW_COLUMNS)} "
                        f"(got {list(window_scores.columns)})")
    cuts = _query_cuts(window_scores["query_id"], BLOCK_ROWS)
    if len(cuts) > 2:
        blocks = run_concurrently(*(partial(_encode_block, window_scores.iloc[a:b]) for a, b in zip(cuts[:-1], cuts[1:])))
        if all(b is not None for b in blocks) and pd.Index(np.concatenate([b.query_names for b in blocks])).is_unique:
            return _join(blocks)
    # (a refused block, or a query in two: the whole table names the first fault in the order of the checks)
    return _encode(window_scores)


def _finite_scores(window_scores: pd.DataFrame) -> np.ndarray:
    """The score column as float64[n], or the refusal of its first cell that is not a finite number."""
    score, row = finite_column(window_scores, "score")
    if row is not None:
        raise DataError(
            f"score of document {str(row.doc_id)!r} in window {str(row.window_id)!r} of query "
            f"{str(row.query_id)!r} is {show(row.score)}; scores must be finite numbers (re-judge the window "
            f"or drop it)"
        )
    return score


def _encode(window_scores: pd.DataFrame) -> WindowArrays:
    """:func:`encode_window_scores` of a table with the columns it needs."""
    score = _finite_scores(window_scores)
    q_col, w_col, d_col = (window_scores[c] for c in ("query_id", "window_id", "doc_id"))
    starts = run_starts(q_col, w_col)
    head_q, q_names = codes_at(q_col, starts, sort=True)
    _refuse_missing(head_q, starts, window_scores, "query_id")
    head_w, w_names = codes_at(w_col, starts, sort=True)
    _refuse_missing(head_w, starts, window_scores, "window_id")
    d_code, d_names = id_codes(d_col)
    _refuse_missing(d_code, None, window_scores, "doc_id")
    layout = _layout(starts, len(score), head_q, head_w, len(w_names))
    row_query = np.repeat(head_q, np.diff(np.append(starts, len(score))))
    pair_code, pair_query, pair_doc_id = _pairs(d_code, d_names, row_query)
    cells = layout.place(pair_code, -1)
    full = layout.order is not None  # (every window one run of rows of one length: no empty slot)
    pair_doc, n_docs = _number_documents(cells, full, pair_query, len(q_names))
    doc_index = np.take(pair_doc.astype(np.int32), cells)  # (np.take: unlike an index, it releases the GIL)
    if not full:
        doc_index[cells < 0] = -1
    _refuse_twice(doc_index, layout, q_col, w_col, d_col)
    _refuse_single(layout, q_col, w_col)
    return WindowArrays(
        doc_index=doc_index, scores=layout.place(score, 0.0), window_query=layout.window_query, n_docs=n_docs,
        query_names=q_names, query_order=pd.unique(head_q).astype(np.int64), pair_query=pair_query,
        pair_doc=pair_doc, pair_doc_id=pair_doc_id,
    )


def _refuse_missing(codes: np.ndarray, rows: np.ndarray | None, frame: pd.DataFrame, col: str) -> None:
    """Refuse a missing id (code -1); ``rows`` int[m] are the rows of the codes (None: one code per row)."""
    missing = np.flatnonzero(codes < 0)
    if len(missing):
        i = int(missing[0] if rows is None else rows[missing[0]])
        raise DataError(
            f"{col} of window-score row {show(frame.index[i])} is missing; every row needs a query_id, window_id "
            f"and doc_id (fill it in or drop the row)"
        )


@dataclass(frozen=True)
class _Layout:
    """Where the rows go in the ``[W, width]`` window arrays: windows sorted by (query, window id), a window's
    rows in input order. Either every window is one run of ``width`` rows, ``order`` int64[W] giving the run
    of each window (``win`` and ``slot`` None), or ``win``, ``slot`` int64[n] give each row's window and slot."""

    window_query: np.ndarray  # int64[W] query code of each window
    sizes: np.ndarray  # int64[W] documents per window
    width: int
    order: np.ndarray | None
    win: np.ndarray | None
    slot: np.ndarray | None

    def place(self, values: np.ndarray, fill) -> np.ndarray:
        """``values`` [n] (one per row) laid out as ``[W, width]``, ``fill`` in empty slots."""
        if self.order is not None:
            return np.take(values.reshape(-1, self.width), self.order, axis=0)
        out = np.full((len(self.sizes), self.width), fill, dtype=values.dtype)
        out[self.win, self.slot] = values
        return out

    def rows_of(self, window: int) -> np.ndarray:
        """int64[size]: the input rows of ``window``, slot by slot."""
        if self.order is not None:
            return int(self.order[window]) * self.width + np.arange(self.width)
        return np.flatnonzero(self.win == window)


def _layout(starts: np.ndarray, n_rows: int, head_q: np.ndarray, head_w: np.ndarray, n_w: int) -> _Layout:
    """The :class:`_Layout` of ``n_rows`` rows whose runs (first rows ``starts`` int64[R]) have the query and
    window codes ``head_q``, ``head_w`` int64[R] (``n_w`` window names)."""
    lengths = np.diff(np.append(starts, n_rows))
    key = head_q * n_w + head_w
    order = np.argsort(key)
    if not np.any(key[order][1:] == key[order][:-1]):  # every window one run of rows
        sizes = lengths[order]
        width = max(int(sizes.max()) if len(sizes) else 1, 1)
        if n_rows == len(order) * width:  # ... all of one length: a gather of whole runs
            return _Layout(head_q[order], sizes, width, order, None, None)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        win = np.repeat(rank, lengths)
        slot = np.arange(n_rows) - np.repeat(starts, lengths)
        return _Layout(head_q[order], sizes, width, None, win, slot)
    # a window's rows in several runs: every row's window, from the sorted keys
    win, keys = pd.factorize(np.repeat(key, lengths), sort=True)
    win = win.astype(np.int64)
    sizes = np.bincount(win, minlength=len(keys))
    by_window = np.argsort(win, kind="stable")
    slot = np.empty(n_rows, dtype=np.int64)
    slot[by_window] = np.arange(n_rows) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return _Layout((keys // n_w).astype(np.int64), sizes, int(sizes.max()), None, win, slot)


def _pairs(d_code: np.ndarray, d_names: pd.Index, row_query: np.ndarray):
    """``(pair_code int64[n], pair_query int64[P], pair_doc_id)``: the (query, document) pair of every row,
    numbered by first appearance in the input, and the query and document id of each pair. ``d_code``
    int64[n] are the rows' document codes (numbered by first appearance, names ``d_names``), ``row_query``
    int64[n] their query codes."""
    owner = np.empty(len(d_names), dtype=np.int64)
    owner[d_code] = row_query
    if np.array_equal(np.take(owner, d_code), row_query):  # every document id in one query: the id is the pair
        return d_code, owner, d_names
    n_d = len(d_names)
    pair_code, keys = pd.factorize(row_query * n_d + d_code)
    return pair_code.astype(np.int64), keys // n_d, d_names.take(keys % n_d)


def _number_documents(cells: np.ndarray, full: bool, pair_query: np.ndarray, n_q: int):
    """``(pair_doc int64[P], n_docs int64[Q])``: each pair's number among its query's documents, by first
    appearance in the canonical order, and the documents per query. ``cells`` int64[W, w] are the pair codes
    laid out (-1: empty slot; ``full``: none is empty); windows are sorted by query, so each query's cells
    are contiguous and the rank of a pair's first cell, less the pairs of the queries before it, is its
    number."""
    n_pairs = len(pair_query)
    flat = cells.ravel() if full else cells[cells >= 0]  # the canonical order
    first = np.full(n_pairs, len(flat), dtype=np.int64)
    np.minimum.at(first, flat, np.arange(len(flat)))
    rank = np.empty(n_pairs, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(n_pairs)  # first cells are distinct: any sort
    n_docs = np.bincount(pair_query, minlength=n_q).astype(np.int64)
    return rank - (np.cumsum(n_docs) - n_docs)[pair_query], n_docs


def _id_at(column: pd.Series, row: int) -> str:
    """The id of row ``row`` (position) as a string, as a message quotes it."""
    return id_strings(column.iloc[[row]]).iloc[0]


def _refuse_twice(doc_index: np.ndarray, layout: _Layout, q_col: pd.Series, w_col: pd.Series,
                  d_col: pd.Series) -> None:
    """Refuse the first window (canonical order) that shows a document twice, naming the document at its
    first slot; ``doc_index`` int32[W, w] are the documents' numbers (-1: empty slot). Slots ``k`` apart are
    compared for every ``k`` (windows as columns, in the narrowest integer type that holds the numbers)."""
    small = np.int16 if doc_index.size == 0 or int(doc_index.max()) < 2**15 else np.int32
    slots = np.ascontiguousarray(doc_index.T, dtype=small)  # [w, W]
    twice = np.zeros(slots.shape[1], dtype=bool)
    for k in range(1, len(slots)):
        twice |= ((slots[k:] == slots[:-k]) & (slots[k:] >= 0)).any(axis=0)
    if twice.any():
        window = int(np.flatnonzero(twice)[0])
        docs = doc_index[window][: layout.sizes[window]]
        _, inverse, counts = np.unique(docs, return_inverse=True, return_counts=True)
        row = int(layout.rows_of(window)[np.flatnonzero(counts[inverse] > 1)[0]])
        raise DataError(
            f"document {_id_at(d_col, row)!r} appears more than once in window {_id_at(w_col, row)!r} of "
            f"query {_id_at(q_col, row)!r}; a window shows each document once"
        )


def _refuse_single(layout: _Layout, q_col: pd.Series, w_col: pd.Series) -> None:
    """Refuse the first window (canonical order) of a single document."""
    single = np.flatnonzero(layout.sizes < 2)
    if len(single):
        row = int(layout.rows_of(int(single[0]))[0])
        raise DataError(
            f"window {_id_at(w_col, row)!r} of query {_id_at(q_col, row)!r} has a single document; a window "
            f"needs at least two documents to compare (drop it)"
        )


def _query_cuts(q_col: pd.Series, rows: int) -> list[int]:
    """Cuts of the rows into blocks of at least ``rows`` rows at rows whose query id differs from the row
    before (blocks of whole queries when each query is one run of rows): ``[0, ..., n]``."""
    n = len(q_col)
    cuts = [0]
    target = rows
    while target < n - rows // 2:
        at, span, before = target, 1024, q_col.iloc[target - 1]
        while at < n:  # the first row from `target` on whose id differs, in stretches of doubling length
            differs = np.flatnonzero((q_col.iloc[at : at + span] != before).to_numpy(dtype=bool, na_value=True))
            if len(differs):
                break
            at, span = at + span, 2 * span
        if at >= n:
            break
        cuts.append(at + int(differs[0]))
        target = cuts[-1] + rows
    return cuts + [n]


def _encode_block(window_scores: pd.DataFrame) -> WindowArrays | None:
    """:func:`_encode` of a block of rows, or None where it refuses them (the whole table names the fault)."""
    try:
        return _encode(window_scores)
    except DataError:
        return None


def _join(blocks: list[WindowArrays]) -> WindowArrays:
    """The arrays of consecutive blocks of rows with distinct queries: the queries numbered again in sorted
    order, the windows sorted by query again (their order inside a query kept), the pairs one block after
    another."""
    names = blocks[0].query_names.append([b.query_names for b in blocks[1:]])
    by_name = np.argsort(names.to_numpy(dtype=object), kind="stable")  # Python's string order, as pyarrow's
    renumber = np.empty(len(names), dtype=np.int64)
    renumber[by_name] = np.arange(len(names))
    ends = np.cumsum([len(b.query_names) for b in blocks])
    codes = [renumber[end - len(b.query_names) : end] for b, end in zip(blocks, ends)]  # each block's queries
    width = max(b.doc_index.shape[1] for b in blocks)

    def stacked(field: str, fill) -> np.ndarray:  # the blocks' [W, w] arrays one after another, `width` wide
        parts = [getattr(b, field) for b in blocks]
        return np.concatenate([x if x.shape[1] == width else
                               np.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=fill) for x in parts])

    window_query = np.concatenate([c[b.window_query] for b, c in zip(blocks, codes)])
    doc_index, scores = stacked("doc_index", -1), stacked("scores", 0.0)
    if np.any(window_query[1:] < window_query[:-1]):  # the blocks' queries interleave in sorted order
        order = np.argsort(window_query, kind="stable")
        window_query, doc_index, scores = window_query[order], doc_index[order], scores[order]
    n_docs = np.empty(len(names), dtype=np.int64)
    for b, c in zip(blocks, codes):
        n_docs[c] = b.n_docs
    return WindowArrays(
        doc_index=doc_index, scores=scores, window_query=window_query, n_docs=n_docs, query_names=names[by_name],
        query_order=np.concatenate([c[b.query_order] for b, c in zip(blocks, codes)]),
        pair_query=np.concatenate([c[b.pair_query] for b, c in zip(blocks, codes)]),
        pair_doc=np.concatenate([b.pair_doc for b in blocks]),
        pair_doc_id=blocks[0].pair_doc_id.append([b.pair_doc_id for b in blocks[1:]]),
    )

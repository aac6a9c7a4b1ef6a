"""Stage A from tidy tables: validate window scores and fit Bradley-Terry for every query at once."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial

import jax.numpy as jnp
import numpy as np
import pandas as pd

from models import bradley_terry
from rcp_jax.data.task_queue import TaskQueue
from rcp_jax.data.table_checks import (
    ChunkCodes, change_bits, finite_column, id_codes, id_codes_at, id_helpers, id_pool, id_strings, run_cuts,
    run_starts, show, small_pages, start_chunk_codes,
)
from rcp_jax.errors import DataError

WINDOW_COLUMNS = ("query_id", "window_id", "doc_id", "score")


def _require_columns(df: pd.DataFrame, columns, what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(
            f"{what} is missing column(s) {missing}; expected columns {list(columns)} (got {list(df.columns)})"
        )


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


def _window_layout(
    heads: np.ndarray, head_q: np.ndarray, head_w: np.ndarray, n_rows: int, n_w: int
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """How rows form windows sorted by query, then window id: ``(runs, win, slot)``.

    ``heads`` int64[R] are the first rows of the runs of equal (query, window), with their codes ``head_q``,
    ``head_w`` int64[R]. Usually the rows of a window are contiguous: the runs are the windows, only the
    run heads are sorted, and ``runs`` int64[W] gives the run of each window in canonical order (``win``
    and ``slot`` are None: :func:`_rows_of_runs` gives them when needed). Otherwise every row's key is
    coded and the rows sorted stably: ``runs`` is None and ``win``, ``slot`` int64[n] are the window
    number and the slot inside the window (input order) of each row.
    """
    n_keys = (int(head_q.max()) + 1) * n_w if len(head_q) else 0
    if n_keys <= 4 * len(heads) + 4096:  # dense keys: a counting sort (a key held by one run keeps its run)
        key = head_q * n_w + head_w
        run_of_key = np.full(n_keys, -1, dtype=np.int64)
        run_of_key[key] = np.arange(len(heads))
        order = run_of_key[run_of_key >= 0]
        if len(order) == len(heads):  # every (query, window) one run: the lexsort's order
            return order, None, None
    else:
        order = np.lexsort((head_w, head_q))
        hq, hw = head_q[order], head_w[order]
        if not np.any((hq[1:] == hq[:-1]) & (hw[1:] == hw[:-1])):
            return order, None, None
    lengths = np.diff(np.append(heads, n_rows))
    q_code, w_code = np.repeat(head_q, lengths), np.repeat(head_w, lengths)
    win, n_win = sorted_codes(q_code * n_w + w_code, (int(q_code.max()) + 1) * n_w)
    sizes = np.bincount(win, minlength=n_win)
    order = np.argsort(win, kind="stable")
    slot = np.empty(n_rows, dtype=np.int64)
    slot[order] = np.arange(n_rows) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return None, win, slot


def _rows_of_runs(heads: np.ndarray, runs: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(win, slot)`` int64[n] of every row when each window is one run (``runs`` from :func:`_window_layout`)."""
    rank = np.empty(len(runs), dtype=np.int64)
    rank[runs] = np.arange(len(runs))
    lengths = np.diff(np.append(heads, n_rows))
    return np.repeat(rank, lengths), np.arange(n_rows) - np.repeat(heads, lengths)


#: Windows per block of :func:`_twice`: a block's transposed slots (w x rows int32) stay in cache.
_TWICE_ROWS = 1 << 14


def _twice(names: np.ndarray) -> np.ndarray:
    """bool[W]: windows of ``names`` int[W, w] (-1 = empty slot) that hold some document twice. Compares the
    slots ``d`` apart for each ``d`` (one comparison of two column blocks each), in blocks of
    :data:`_TWICE_ROWS` windows transposed once (in cache), in the narrowest integer type that holds the codes."""
    n, w = names.shape
    if names.size == 0:
        return np.zeros(n, dtype=bool)
    low, top = int(names.min()), int(names.max())
    small = np.int16 if top < 2**15 - 1 else np.int32 if top < 2**31 - 1 else np.int64
    twice = np.zeros(n, dtype=bool)
    for a in range(0, n, _TWICE_ROWS):
        columns = np.ascontiguousarray(names[a : a + _TWICE_ROWS].T, dtype=small)
        out = twice[a : a + _TWICE_ROWS]
        for d in range(1, w):
            same = columns[d:] == columns[:-d]  # slot i against slot i + d, every i at once
            if low < 0:
                same &= columns[:-d] >= 0  # two empty slots are not a document twice
            out |= same.any(axis=0)
    return twice


def _with_starts(heads: np.ndarray, more: np.ndarray) -> np.ndarray:
    """int64[H']: the sorted union of the sorted distinct row numbers ``heads`` int64[H] and ``more`` int64[M]
    (M small: the query runs' first rows, most of them first rows of window runs already)."""
    at = np.searchsorted(heads, more)
    new = np.ones(len(more), dtype=bool)
    inside = at < len(heads)
    new[inside] = heads[at[inside]] != more[inside]
    return np.insert(heads, at[new], more[new]) if new.any() else heads


def _window_runs(w_col: pd.Series) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """``(heads int64[H], codes int64[H], names)``: the first rows of the runs of the window id
    (:func:`change_bits`, :func:`run_starts`), and their sorted codes and names (:func:`id_codes_at`). The
    encoding's first task: a helper thread runs it while the query ids are compared."""
    heads = run_starts(len(w_col), change_bits(w_col))
    codes, names = id_codes_at(w_col, heads, sort=True)
    return heads, codes, names


def _codes_or_refuse(codes: np.ndarray, rows: np.ndarray | None, frame: pd.DataFrame, col: str) -> None:
    """Refuse a missing id (code -1); ``rows`` maps the codes' positions to rows (None: one code per row)."""
    missing = np.flatnonzero(codes < 0)
    if len(missing):
        i = int(missing[0] if rows is None else rows[missing[0]])
        raise DataError(
            f"{col} of window-score row {show(frame.index[i])} is missing; every row needs a query_id, window_id "
            f"and doc_id (fill it in or drop the row)"
        )


def encode_window_scores(window_scores: pd.DataFrame) -> WindowArrays:
    """Check a long table of window scores and encode it as arrays in a few vectorised passes.

    Refuses, naming the query, window and document: missing columns, missing ids, non-finite scores, a
    document listed twice in one window, and windows with fewer than two documents (they carry no
    comparison).

    Ids come in runs (a window's rows are contiguous, a query's windows too): the query and window ids are
    compared with the previous row's and only the run heads are factorized; the document ids are
    factorized once, in chunks of whole queries when each query is one run of rows
    (:func:`rcp_jax.data.table_checks.start_chunk_codes`). In the usual table (every window one run of
    equal width) each chunk's documents are then numbered and its windows laid out as soon as it is coded,
    in cache (:class:`_ChunkNumbering`). The work is shared by one thread per core
    (:class:`rcp_jax.data.task_queue.TaskQueue`: the calling thread and id-pool workers). Id columns of any
    type are read as strings (:func:`rcp_jax.data.table_checks.id_codes`: integers and categoricals by their
    distinct values). The temporaries are allocated without numpy's huge-page advice
    (:func:`rcp_jax.data.table_checks.small_pages`).
    """
    with small_pages():
        return _encode_window_scores(window_scores)


def _encode_window_scores(window_scores: pd.DataFrame) -> WindowArrays:
    """:func:`encode_window_scores` (its body)."""
    _require_columns(window_scores, WINDOW_COLUMNS, "window scores")
    q_col, w_col, d_col = (window_scores[c] for c in ("query_id", "window_id", "doc_id"))
    # one thread per core shares the work (TaskQueue); a helper finds the window runs (pyarrow compares
    # without the GIL) while the scores and the query ids are checked here
    with TaskQueue(id_pool(), id_helpers()) as queue:
        w_task = queue.add(partial(_window_runs, w_col))
        score, row = finite_column(window_scores, "score")
        if row is not None:
            raise DataError(
                f"score of document {str(row.doc_id)!r} in window {str(row.window_id)!r} of query "
                f"{str(row.query_id)!r} is {show(row.score)}; scores must be finite numbers (re-judge the window "
                f"or drop it)"
            )
        return _encode_on(queue, w_task, window_scores, score, q_col, w_col, d_col)


def _encode_on(
    queue: TaskQueue, w_task: int, window_scores: pd.DataFrame, score: np.ndarray, q_col: pd.Series,
    w_col: pd.Series, d_col: pd.Series,
) -> WindowArrays:
    """:func:`encode_window_scores` (its body) once the scores are checked, its work shared through ``queue``
    (task ``w_task``: :func:`_window_runs`)."""
    n_rows = len(score)
    q_bits = change_bits(q_col)
    q_heads = run_starts(n_rows, q_bits)
    qh_code, q_names = id_codes_at(q_col, q_heads, sort=True)
    _codes_or_refuse(qh_code, q_heads, window_scores, "query_id")
    # each query one run of rows: the document ids are hashed in chunks of whole queries, tasks of the queue
    # (codes of (chunk, id): a query's documents are in one chunk); they start here while the window runs
    # are found
    pending = start_chunk_codes(d_col, q_heads, queue=queue) if len(q_heads) == len(q_names) else None
    while not queue.done(w_task) and queue.run_next():
        pass
    w_heads, w_code, w_names = queue.result(w_task)
    heads = _with_starts(w_heads, q_heads)
    # the window id of each run: that of the last window-id change at or before it (a query's first run
    # may keep the window id of the run before it)
    head_w = w_code if len(heads) == len(w_heads) else w_code[np.searchsorted(w_heads, heads, side="right") - 1]
    _codes_or_refuse(head_w, heads, window_scores, "window_id")
    if pending is None:
        d_code, d_names = id_codes(d_col, sort=False)
        _codes_or_refuse(d_code, None, window_scores, "doc_id")
    if len(q_names) < 2**31 - 1:  # per-row codes in int32: half the memory traffic at millions of rows
        qh_code = qh_code.astype(np.int32)
    # each window run's query run: every query run starts at a window-run head, so count those starts
    q_start = np.zeros(len(heads), dtype=np.int64)
    q_start[np.searchsorted(heads, q_heads)] = 1
    q_run_of_head = np.cumsum(q_start) - 1
    head_q = qh_code[q_run_of_head].astype(np.int64)

    def row_queries() -> np.ndarray:
        """int[n] query code of every row (only the uncommon layouts need it)."""
        return np.repeat(qh_code, np.diff(np.append(q_heads, n_rows)))
    runs, win, slot = _window_layout(heads, head_q, head_w, n_rows, len(w_names))
    if runs is not None:
        n_win = len(runs)
        sizes = np.diff(np.append(heads, n_rows))[runs]
        window_query = head_q[runs]
    else:
        n_win = int(win.max()) + 1
        sizes = np.bincount(win, minlength=n_win)
        window_query = np.zeros(n_win, dtype=np.int64)
        window_query[win] = row_queries()
    width = max(int(sizes.max()) if n_win else 1, 1)
    gather = runs is not None and n_rows == n_win * width  # every window one run of `width` rows
    if not gather:
        if win is None:
            win, slot = _rows_of_runs(heads, runs, n_rows)
        scores = np.zeros((n_win, width))
        scores[win, slot] = score
    # queries in order of first appearance in the input
    first_q = np.full(len(q_names), n_rows, dtype=np.int64)
    np.minimum.at(first_q, qh_code, q_heads)
    query_order = np.argsort(first_q, kind="stable")
    if pending is not None and gather and width >= 2:  # the usual table: number each chunk once it is coded
        by_chunks = _ChunkNumbering(queue, pending, runs, width, q_heads, qh_code, score).result()
        if by_chunks is not None:
            doc_index, scores, local, owner = by_chunks
            return WindowArrays(
                doc_index=doc_index, scores=scores,
                window_query=window_query, n_docs=np.bincount(owner, minlength=len(q_names)), query_names=q_names,
                query_order=query_order, pair_query=owner, pair_doc=local, pair_doc_id=pending.names(),
            )
    if gather:
        scores = np.take(score.reshape(n_win, width), runs, axis=0)  # take: ~3x a fancy index of rows
    if pending is not None:  # the windows are laid out: now the document codes are needed
        d_code, d_names = pending()
    queue.finish()  # the helpers go back to the pool (its workers check windows below)
    if len(d_names) < 2**31 - 1:
        d_code = d_code.astype(np.int32, copy=False)
    n_q, n_d = len(q_names), len(d_names)
    if gather:
        names = np.take(d_code.reshape(n_win, width), runs, axis=0)
    else:
        names = np.full((n_win, width), -1, dtype=d_code.dtype)
        names[win, slot] = d_code
    # the duplicate check on the pool (numpy compares without the GIL) while the documents are numbered here;
    # a refusal is raised before anything is returned, in the same order as before (a repeated document first)
    twice_job = id_pool().submit(_twice, names)
    cell = names >= 0
    full = bool(cell.all())
    # the codes as indices (intp): numpy's gathers and np.minimum.at skip a cast of every index
    index = names.astype(np.intp) if full else np.where(cell, names, 0).astype(np.intp)
    owner = _owner_by_ranges(d_code, q_heads, qh_code, n_d)
    one_query = owner is not None
    numbered = None
    if one_query:
        cell_name = index.ravel() if full else index[cell]
        numbered = _first_numbers(cell_name, n_d)  # pair number of each document, canonical order
    twice = twice_job.result()
    if (twice.any() or (sizes < 2).any()) and win is None:
        win, slot = _rows_of_runs(heads, runs, n_rows)
    if twice.any():
        w_bad = int(np.flatnonzero(twice)[0])
        docs = names[w_bad][names[w_bad] >= 0]
        _, inverse, counts = np.unique(docs, return_inverse=True, return_counts=True)
        repeated = docs[counts[inverse] > 1][0]
        first = np.flatnonzero((win == w_bad) & (d_code == repeated))[0]
        raise DataError(
            f"document {_id_at(d_col, first)!r} appears more than once in window {_id_at(w_col, first)!r} of "
            f"query {_id_at(q_col, first)!r}; a window shows each document once"
        )
    small = np.flatnonzero(sizes < 2)
    if len(small):
        first = int(np.flatnonzero(win == small[0])[0])
        raise DataError(
            f"window {_id_at(w_col, first)!r} of query {_id_at(q_col, first)!r} has a single document; a window "
            f"needs at least two documents to compare (drop it)"
        )
    if owner is None:
        q_code = row_queries()
        owner = np.zeros(n_d, dtype=q_code.dtype)
        owner[d_code] = q_code
        one_query = np.array_equal(owner[d_code], q_code)
    if one_query:
        # every document id belongs to one query: it is the pair's key, and the pairs in order of first
        # appearance in the input are the document codes in order
        if numbered is None:
            cell_name = index.ravel() if full else index[cell]
            numbered = _first_numbers(cell_name, n_d)  # pair number of each document, canonical order
        number = numbered
        n_docs = np.bincount(owner, minlength=n_q)
        local = number - (np.cumsum(n_docs) - n_docs)[owner]
        doc_index = local.astype(np.int32)[index]
        if not full:
            doc_index[~cell] = -1
        pair_query, pair_doc, pair_doc_id = owner.astype(np.int64), local, d_names
    else:
        if win is None:
            win, slot = _rows_of_runs(heads, runs, n_rows)
        cell_query = np.broadcast_to(window_query[:, None], names.shape)[cell]
        pair_code, n_pairs = first_codes(cell_query * n_d + names[cell], n_q * n_d)
        pair_query_sorted = np.zeros(n_pairs, dtype=np.int64)
        pair_query_sorted[pair_code] = cell_query
        n_docs = np.bincount(pair_query_sorted, minlength=n_q)
        doc_index = np.full(names.shape, -1, dtype=np.int32)
        doc_index[cell] = pair_code - (np.cumsum(n_docs) - n_docs)[cell_query]
        # pairs in order of first appearance in the input rows
        cell_pair = np.full(names.shape, -1, dtype=np.int64)
        cell_pair[cell] = pair_code
        first = np.full(n_pairs, n_rows, dtype=np.int64)
        np.minimum.at(first, cell_pair[win, slot], np.arange(n_rows, dtype=np.int64))
        input_rows = np.sort(first)
        pair_query = row_queries()[input_rows].astype(np.int64)
        pair_doc = doc_index[win[input_rows], slot[input_rows]].astype(np.int64)
        pair_doc_id = d_names.take(d_code[input_rows])
    return WindowArrays(
        doc_index=doc_index, scores=scores, window_query=window_query, n_docs=n_docs,
        query_names=q_names, query_order=query_order,
        pair_query=pair_query, pair_doc=pair_doc, pair_doc_id=pair_doc_id,
    )


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


#: Fewest window rows for the pipelined public fit (:func:`_fit_pipelined`). On 2 cores the kernel already
#: keeps both busy, so encoding beside it only pays on big tables, where the chunks' encoding is also cheaper
#: than one whole-table pass (its temporaries leave the cache): A/B in one process, public BT wall (load ~2):
#: 1,000 queries (2.16 M rows) 0.48 -> 0.50 s, 2,000 0.90 -> 0.92 s, 3,000 1.38 -> 1.31 s, 10,000 4.77 -> 4.34 s.
PIPE_MIN_ROWS = 6_000_000
#: Window rows per chunk of the pipelined fit (at least; cut at the next query boundary).
PIPE_ROWS = 1 << 21
#: Window rows of its first chunk: encoded with no kernel work beside it, so kept small.
PIPE_FIRST_ROWS = 1 << 18


def _query_cuts(column: pd.Series, first: int, rows: int) -> np.ndarray | None:
    """int64[C + 1]: cuts of an arrow-string query-id column (no missing cells) at the first query boundary
    at or after rows ``first``, ``first + rows``, ... (first 0, last ``n``); None for other columns or when
    the table would be one chunk (:func:`rcp_jax.data.table_checks.run_cuts`, which finds each boundary
    without a pass over the column)."""
    if len(column) <= first + rows // 2:
        return None
    cuts = run_cuts(column, first, rows)
    return cuts if cuts is not None and len(cuts) > 2 else None


def _fit_pipelined(window_scores: pd.DataFrame, ridge: float, dtype) -> list[tuple[pd.DataFrame, dict]] | None:
    """:func:`fit_bradley_terry`'s fit, the table encoded in chunks of whole queries (rows cut by
    :func:`_query_cuts`) while a worker thread fits the chunks already encoded (XLA runs without the GIL).
    Returns the chunks' ``(frame, components)`` in input order, or None where the whole table is encoded at
    once: fewer than :data:`PIPE_MIN_ROWS` rows, a query-id column that is not arrow strings without missing
    cells, a table of one chunk, a query found in two chunks, or any chunk
    refused (the whole-table encoding then raises today's message, naming the first bad row as always).

    Queries are fitted independently and a query's encoding depends on its own rows only, so each query's
    theta, SE, components and iterations are those of the whole-table fit, and the chunks' frames one after
    another are its frame (pairs and queries in order of first appearance)."""
    if len(window_scores) < PIPE_MIN_ROWS or not all(c in window_scores.columns for c in WINDOW_COLUMNS):
        return None
    cuts = _query_cuts(window_scores["query_id"], PIPE_FIRST_ROWS, PIPE_ROWS)
    if cuts is None:
        return None
    from concurrent.futures import ThreadPoolExecutor

    jobs, seen = [], None
    with ThreadPoolExecutor(1, thread_name_prefix="rcp-bt-fit") as kernel:
        try:
            for a, b in zip(cuts[:-1], cuts[1:]):
                arrays = _encode_window_scores(window_scores.iloc[a:b])
                names = arrays.query_names
                if seen is not None and seen.isin(names).any():  # a query in two chunks: encode the whole table
                    break
                seen = names if seen is None else seen.append(names)
                jobs.append(kernel.submit(_fit_frame, arrays, ridge, dtype))
            else:
                return [job.result() for job in jobs]
        except DataError:
            pass
        for job in jobs:
            job.cancel()
    return None


class _ChunkNumbering:
    """The usual table's documents numbered, and its windows laid out, chunk by chunk as the chunks are coded.

    The usual table: every window one run of ``width`` rows (``runs`` int64[W]: the windows in canonical
    order), each query one run (``q_heads`` int[R] first rows, ``qh_code`` int[R] codes), the document ids
    coded in chunks of whole queries (``pending``). A chunk's work needs only its own codes and stays in
    cache: the duplicate check, each document's first cell in canonical order and its number in its query,
    and the chunk's windows (document numbers and ``score`` float64[n]) written to their canonical rows. It
    is done by the thread that codes the chunk, right after (:meth:`ChunkCodes.on_coded`), or, for chunks
    coded before the windows were laid out, by tasks of ``queue``; so it runs beside the coding of later
    chunks instead of as passes over every cell at the end. The numbers equal the general path's: each
    query's documents in order of first appearance in the canonical order (a query's cells are contiguous
    there, so ranking the first cells of a chunk ranks each query's documents in one block).

    :meth:`result` gives ``(doc_index int32[W, w], scores float64[W, w], local int64[D], owner int64[D])``
    (by document code: the number in its query and the query code); or None where the general path must
    run: a chunk that does not start at a query and a window, a document twice in a window, a document in
    two queries."""

    def __init__(self, queue: TaskQueue, pending: ChunkCodes, runs: np.ndarray, width: int, q_heads: np.ndarray,
                 qh_code: np.ndarray, score: np.ndarray):
        self._queue, self._pending, self._width, self._q_heads, self._qh_code = queue, pending, width, q_heads, qh_code
        n_win, n_rows = len(runs), len(score)
        self._score = score.reshape(n_win, width)
        self._row = np.empty(n_win, dtype=np.intp)  # canonical row of each window (input order)
        self._row[runs] = np.arange(n_win, dtype=np.intp)
        self._runs = runs
        small = np.int32 if n_rows < 2**31 - 1 else np.int64
        self._cell = (self._row * width).astype(small)  # its first cell in the canonical order
        self._slots = np.arange(width, dtype=small)
        self._big = small(n_rows)
        self.doc_index = np.empty((n_win, width), dtype=np.int32)
        self.scores = np.empty((n_win, width), dtype=np.float64)
        self._parts = [None] * len(pending)
        # chunks coded from now on are numbered by the thread that codes them; those coded already, by tasks
        self._tasks = [queue.add(partial(self._number_chunk, k)) for k in pending.on_coded(self._number)]

    def _number_chunk(self, k: int) -> None:
        """The task for chunk ``k``, coded before the windows were laid out."""
        self._number(k, *self._pending.chunk(k))

    def _number(self, k: int, a: int, b: int, code: np.ndarray, count: int) -> None:
        """Number chunk ``k`` (rows ``a..b-1``, its own ``code`` int32[b - a] numbering ``count`` documents):
        ``parts[k]`` is ``(local int64[count], owner int64[count])`` of its documents, or False."""
        self._parts[k] = self._numbers(a, b, code, count)

    def _numbers(self, a: int, b: int, code: np.ndarray, count: int):
        """:meth:`_number`'s work: writes the chunk's windows to :attr:`doc_index` and :attr:`scores` and gives
        ``(local, owner)``, or False before writing anything when the chunk is not one the fast path takes."""
        width, q_heads = self._width, self._q_heads
        i, j = np.searchsorted(q_heads, (a, b))
        if a % width or b % width or i == j or q_heads[i] != a or count == 0:
            return False
        windows = code.reshape(-1, width)
        if _twice(windows).any():
            return False
        starts = q_heads[i:j] - a
        lo, hi = np.minimum.reduceat(code, starts), np.maximum.reduceat(code, starts)
        if lo[0] != 0 or hi[-1] != count - 1 or np.any(lo[1:] != hi[:-1] + 1):
            return False  # a document in two of the chunk's queries
        wa, wb = a // width, b // width
        index = code.astype(np.intp)  # intp indices: numpy's gathers and ufunc.at skip a cast
        first = np.full(count, self._big, dtype=self._cell.dtype)
        np.minimum.at(first, index, (self._cell[wa:wb, None] + self._slots).ravel())
        number = np.empty(count, dtype=np.int64)
        number[np.argsort(first)] = np.arange(count)  # distinct values: any sort
        sizes = (hi - lo + 1).astype(np.int64)
        local = number - np.repeat(np.minimum.reduceat(number, lo), sizes)
        numbers = np.take(local.astype(np.int32), index).reshape(-1, width)
        rows = self._row[wa:wb]
        top = int(rows.min())
        if int(rows.max()) - top == wb - wa - 1:  # the chunk's windows are one block of canonical rows: take them
            source = self._runs[top : top + wb - wa]
            # mode="clip": no bounds check, so no buffered copy of the output (the rows are in range)
            np.take(self._score, source, axis=0, out=self.scores[top : top + wb - wa], mode="clip")
            np.take(numbers, source - wa, axis=0, out=self.doc_index[top : top + wb - wa], mode="clip")
        else:  # (queries not in sorted order) write each window to its row
            self.doc_index[rows] = numbers
            self.scores[rows] = self._score[wa:wb]
        return local, np.repeat(self._qh_code[i:j], sizes).astype(np.int64)

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Number the chunks left here too, wait for the others, and give the result (or None)."""
        self._queue.finish()
        for task in self._tasks:
            self._queue.result(task)
        self._pending.wait()  # every chunk coded (and so numbered), or the error of one raised
        parts = self._parts
        if any(part is False for part in parts):
            return None
        local = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
        owner = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
        return self.doc_index, self.scores, local, owner


def _owner_by_ranges(d_code: np.ndarray, q_heads: np.ndarray, qh_code: np.ndarray, n_d: int) -> np.ndarray | None:
    """int[n_d]: the query of every document code when each run of a query's rows (first rows ``q_heads``
    int[R], query codes ``qh_code`` int[R]) holds the codes lo..hi, the runs' ranges one after another from 0
    to ``n_d - 1`` (no code in two runs); else None. Codes numbered by first appearance (``d_code`` int[n])
    do this when no document id is in two runs: the usual table, checked in two passes (per-run min and
    max) instead of a scatter and a gather of every row."""
    if len(d_code) == 0 or len(q_heads) == 0:
        return None
    lo, hi = np.minimum.reduceat(d_code, q_heads), np.maximum.reduceat(d_code, q_heads)
    if lo[0] != 0 or hi[-1] != n_d - 1 or np.any(lo[1:] != hi[:-1] + 1):
        return None
    return np.repeat(qh_code, (hi - lo + 1).astype(np.int64))


def _first_numbers(keys: np.ndarray, upper: int) -> np.ndarray:
    """int64[upper]: each key's number in order of first appearance in ``keys`` int[n] (every key below
    ``upper`` appears). The numbers are the ranks of the keys' first rows (one sort of ``upper`` rows, not a
    cumulative sum over all ``n``)."""
    n = len(keys)
    small = np.int32 if n < 2**31 - 1 else np.int64  # half the memory traffic at millions of rows
    first = np.full(upper, n, dtype=small)
    np.minimum.at(first, keys, np.arange(n, dtype=small))
    if upper and int(first.max()) < n:  # every key appears: numbers are the ranks of the distinct first rows
        number = np.empty(upper, dtype=np.int64)
        number[np.argsort(first)] = np.arange(upper)  # distinct values: any sort gives this order (quicksort: 1/3)
        return number
    is_first = np.zeros(n + 1, dtype=np.int8)
    is_first[first] = 1
    return np.cumsum(is_first, dtype=small)[first].astype(np.int64) - 1


def _id_at(column: pd.Series, row: int) -> str:
    """The id of row ``row`` (position) as a string, as a message quotes it."""
    return id_strings(column.iloc[[row]]).iloc[0]


def validate_window_scores(window_scores: pd.DataFrame) -> pd.DataFrame:
    """Check a long table of window scores and return it with string ids and float scores.

    Refuses, naming the query, window and document: missing columns, non-finite scores, a document
    listed twice in one window, and windows with fewer than two documents (they carry no comparison).
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
    in its canonical order, so theta does not depend on the order of the input rows, bit for bit. A big
    table (:data:`PIPE_MIN_ROWS`, arrow-string ids, each query one run of rows) is encoded in chunks of
    whole queries while a worker thread fits the chunks already encoded (:func:`_fit_pipelined`): the same
    result, bit for bit, and the same refusals.

    Example:
        >>> import pandas as pd
        >>> ws = pd.DataFrame({"query_id": "q", "window_id": "w1", "doc_id": ["a", "b", "c"],
        ...                    "score": [3.0, 0.0, -2.0]})
        >>> bt = fit_bradley_terry(ws)
        >>> list(bt.sort_values("theta", ascending=False).doc_id)
        ['a', 'b', 'c']
    """
    dtype = jnp.float64 if float64 else jnp.float32
    with small_pages():  # the encoding's temporaries without numpy's huge-page advice (see small_pages)
        parts = _fit_pipelined(window_scores, ridge, dtype)
        if parts is None:
            arrays = encode_window_scores(window_scores)
            parts = [_fit_frame(arrays, ridge, dtype)]
    out = parts[0][0] if len(parts) == 1 else pd.concat([f for f, _ in parts], ignore_index=True)
    n_comp = {q: k for _, chunk in parts for q, k in chunk.items()}
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

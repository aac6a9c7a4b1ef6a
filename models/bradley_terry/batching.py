"""The ragged front end: windows of many queries of different pool sizes, fitted in padded buckets.

:func:`fit_windows` takes windows as flat arrays, buckets the queries by padded pool size and fits each
bucket in compiled calls of fixed shapes (:data:`BLOCK_QUERIES` queries with a power-of-two number of
window slots on CPU), so refits with other numbers of queries or windows reuse the compiled programs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models.bradley_terry.devices import _run_blocks, _run_sharded, default_chunk
from rcp_jax.models.bradley_terry.kernel import _fit_block_jit
from rcp_jax.models.bradley_terry.objective import DEFAULT_RIDGE


@dataclass(frozen=True)
class BTFit:
    """Bradley-Terry fit of many queries (ragged, padded to the largest pool).

    Attributes:
        theta: float64[Q, N] centred scores (0 on padding).
        se: float64[Q, N] standard errors (NaN on padding).
        mask: bool[Q, N] real documents (``mask[q, :n_docs[q]]``).
        component: int[Q, N] component label (0..k-1 in order of first document; -1 on padding).
        n_components: int[Q] number of connected components (1 = connected).
        iterations: int[Q] Newton iterations used by the query (by its batch, when ``chunk`` > 1).
    """

    theta: np.ndarray
    se: np.ndarray
    mask: np.ndarray
    component: np.ndarray
    n_components: np.ndarray
    iterations: np.ndarray


def _bucket_size(n: int, multiple: int = 16) -> int:
    return max(multiple, -(-n // multiple) * multiple)


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _prev_pow2(n: int) -> int:
    return 1 << max(0, int(n).bit_length() - 1)


def _window_slots(n: int) -> int:
    """Windows per query of a compiled call: ``n`` rounded up to 8 or to 1, 1.25, 1.5 or 1.75 times a power
    of two (at most 25% padding, few distinct shapes)."""
    if n <= 8:
        return 8
    top = _prev_pow2(n)
    return next(m for m in (top, top * 5 // 4, top * 3 // 2, top * 7 // 4, 2 * top) if m >= n)


#: Queries per compiled call on the per-query path (``chunk`` set, as on CPU): every call fits this many
#: rows (a bucket's last block is padded with empty queries, which stop at once), so the number of queries
#: never enters a compiled shape; the blocks run from a thread pool.
BLOCK_QUERIES = 16

#: Fewest window slots per query on the per-query path (:func:`_slot_bucket`).
MIN_SLOTS = 64

#: Pools of at most this many documents (the smallest pool-size bucket) are fitted with windows of at least
#: :data:`SMALL_POOL_WIDTH` slots (padded with empty slots): a table of small pools has the width of its
#: largest window, and padded so, tables of 2- to 10-document windows share one compiled program per
#: dtype at no measurable cost for pools that small.
SMALL_POOL_DOCS = 16
SMALL_POOL_WIDTH = 10


def _slot_bucket(n: int) -> int:
    """Windows per query of a call on the per-query path (``chunk = 1``): a power of two, at least
    :data:`MIN_SLOTS`. Padding slots cost nothing there (:func:`~rcp_jax.models.bradley_terry.kernel._query_scatter` stops
    at a query's last window), so a coarse bucket keeps refits with more windows on the same compiled program."""
    return max(MIN_SLOTS, _next_pow2(n))


class _PaddedWindows:
    """The windows of a call's queries, handed out as padded blocks ``int32/float[q, V, w]`` (host side).

    ``rows`` are the input windows of the call, ``lq`` their query's row in the call and ``slots`` their
    slot among that query's windows; :meth:`block` pads the windows of rows ``[lo, hi)`` (-1 / 0 in empty
    slots). Blocks are built on demand, so the thread pool of :func:`_run_blocks` pads its own blocks in
    cache-sized pieces instead of one ``Q x V x w`` pair of arrays (200 MB at 10,000 queries).
    """

    def __init__(self, doc_index, scores, rows, lq, slots, v: int, np_dtype):
        # rows come increasing; consecutive rows (a grouped input) let blocks read slices, not gathers
        self.first = int(rows[0]) if len(rows) else 0
        self.contiguous = len(rows) == 0 or int(rows[-1]) - self.first == len(rows) - 1
        if len(lq) > 1 and np.any(lq[1:] < lq[:-1]):
            o = np.argsort(lq, kind="stable")
            rows, lq, slots = rows[o], lq[o], slots[o]
            self.contiguous = False
        self.doc_index, self.scores, self.v, self.np_dtype = doc_index, scores, v, np_dtype
        self.rows, self.lq, self.slots = rows, lq, slots

    def block(self, lo: int, hi: int):
        s, e = np.searchsorted(self.lq, [lo, hi])
        w = self.doc_index.shape[1]
        di = np.full((hi - lo, self.v, w), -1, dtype=np.int32)
        sc = np.zeros((hi - lo, self.v, w), dtype=self.np_dtype)
        at = (self.lq[s:e] - lo) * self.v + self.slots[s:e]
        src = slice(self.first + s, self.first + e) if self.contiguous else self.rows[s:e]
        di.reshape(-1, w)[at] = self.doc_index[src]
        sc.reshape(-1, w)[at] = self.scores[src]
        return di, sc


def fit_windows(
    doc_index: np.ndarray,
    scores: np.ndarray,
    window_query: np.ndarray,
    n_docs: np.ndarray,
    *,
    ridge: float = DEFAULT_RIDGE,
    dtype=jnp.float32,
    tol: float | None = None,
    max_iter: int = 50,
    max_batch_cells: int = 2**26,
    devices: Sequence[jax.Device] | None = None,
    chunk: int | None = 0,
    threads: int | None = None,
) -> BTFit:
    """Fit BT for many queries of different pool sizes in one call.

    Args:
        doc_index: int[W, w] document index within the window's query, -1 for empty slots.
        scores: float[W, w] judge scores.
        window_query: int[W] query index of each window in ``[0, Q)``.
        n_docs: int[Q] pool size of each query; document indices must be ``< n_docs[q]``.
        ridge: L2 penalty.
        dtype: ``jnp.float32`` (default, fast) or ``jnp.float64`` (runs under ``jax.enable_x64``).
        tol: Newton step tolerance (default 1e-5 in float32, 1e-10 in float64).
        max_iter: Newton iteration cap.
        max_batch_cells: cap on ``queries x N x N`` per compiled call.
        devices: shard the queries of each call over these devices (default: every device of the
            default backend; one device means no sharding).
        chunk: queries fitted together inside a call (0: :func:`default_chunk`, i.e. one at a time on
            CPU, where each query's statistics stay in cache and each query stops iterating on its own;
            ``None``: all queries of the call at once, as suits a GPU).
        threads: on one device with ``chunk`` set, run the blocks of :data:`BLOCK_QUERIES` queries from a
            thread pool of this many workers (JAX's CPU client executes them in parallel); default: the
            CPUs this process may use (a power of two, at most 8). Each query's result is the same whatever
            the split (queries are fitted independently).

    Returns:
        :class:`BTFit`.

    Queries are grouped into buckets of equal padded pool size (a multiple of 16). With ``chunk`` set (CPU),
    every compiled call fits a fixed block of :data:`BLOCK_QUERIES` queries (times the devices), each with
    a power-of-two number of window slots, at least :data:`MIN_SLOTS` (:func:`_slot_bucket`; padding slots
    cost nothing), so refits with other query counts, and most with other window counts, reuse the
    compiled program of their pool-size bucket, width and dtype (pools of at most :data:`SMALL_POOL_DOCS`
    documents: a width of at least :data:`SMALL_POOL_WIDTH`). With ``chunk=None`` each call fits a
    power-of-two number of queries (at most ``max_batch_cells / N^2``) together, with
    :func:`_window_slots` slots.
    """
    doc_index = np.asarray(doc_index)
    scores = np.asarray(scores)
    window_query = np.asarray(window_query, dtype=np.int64)
    n_docs = np.asarray(n_docs, dtype=np.int64)
    n_q = len(n_docs)
    n_max = int(n_docs.max()) if n_q else 0
    theta = np.zeros((n_q, n_max))
    se = np.full((n_q, n_max), np.nan)
    mask = np.arange(n_max)[None, :] < n_docs[:, None]
    component = np.full((n_q, n_max), -1, dtype=np.int64)
    n_comp = np.zeros(n_q, dtype=np.int64)
    iters = np.zeros(n_q, dtype=np.int64)
    if n_q == 0:
        return BTFit(theta, se, mask, component, n_comp, iters)
    x64 = jnp.dtype(dtype) == jnp.float64
    if tol is None:
        tol = 1e-10 if x64 else 1e-5
    devs = tuple(jax.devices() if devices is None else devices)
    n_dev = len(devs)
    if chunk == 0:
        chunk = default_chunk(devs)
    np_dtype = np.float64 if x64 else np.float32

    # slot of each window among its query's windows (in input order)
    counts = np.bincount(window_query, minlength=n_q)
    within = np.arange(len(window_query)) - np.repeat(np.cumsum(counts) - counts, counts)
    if np.all(window_query[1:] >= window_query[:-1]):  # windows grouped by query (as the encoder gives them)
        slot = within
    else:
        slot = np.empty(len(window_query), dtype=np.int64)
        slot[np.argsort(window_query, kind="stable")] = within
    width = doc_index.shape[1]
    local = np.full(n_q, -1, dtype=np.int64)
    narrow = None  # (doc_index, scores) padded to SMALL_POOL_WIDTH slots, made when a small pool needs it

    sizes = np.array([_bucket_size(int(n)) for n in n_docs])
    with jax.enable_x64(x64):
        for size in np.unique(sizes):
            members = np.flatnonzero(sizes == size)
            cap = _prev_pow2(max(1, int(max_batch_cells // (size * size))))
            if chunk is None:
                per_call = max(n_dev, cap)
            else:
                # fixed blocks: ``call`` queries per compiled call whatever the number of queries
                block = -(-max(BLOCK_QUERIES, chunk) // chunk) * chunk
                call = block * n_dev
                per_call = call * max(1, cap // call)
            for lo in range(0, len(members), per_call):
                part = members[lo : lo + per_call]
                if chunk is None:
                    q_pad = max(n_dev, _next_pow2(len(part)))
                    v = _window_slots(int(counts[part].max()))
                else:
                    q_pad = -(-len(part) // call) * call
                    most = int(counts[part].max())
                    v = _slot_bucket(most) if chunk == 1 else _window_slots(most)
                local[part] = np.arange(len(part))
                rows = np.flatnonzero(local[window_query] >= 0) if len(part) < n_q else np.arange(len(window_query))
                lq = local[window_query[rows]]
                local[part] = -1
                di, sc = doc_index, scores
                if size <= SMALL_POOL_DOCS and width < SMALL_POOL_WIDTH:
                    if narrow is None:
                        pad = ((0, 0), (0, SMALL_POOL_WIDTH - width))
                        narrow = np.pad(doc_index, pad, constant_values=-1), np.pad(scores, pad)
                    di, sc = narrow
                windows = _PaddedWindows(di, sc, rows, lq, slot[rows], v, np_dtype)
                m = np.zeros((q_pad, size), dtype=bool)
                m[: len(part)] = np.arange(size)[None, :] < n_docs[part][:, None]
                if chunk is None and n_dev == 1:
                    out = _fit_block_jit(*windows.block(0, q_pad), m, ridge, tol, max_iter=max_iter, chunk=q_pad)
                elif chunk is None:
                    out = _run_sharded(devs, *windows.block(0, q_pad), m, ridge, tol, np_dtype, max_iter, q_pad, q_pad // n_dev)
                elif n_dev == 1:
                    # each worker pads its own block's windows (small arrays, in cache; no Q x V x w copy)
                    out = _run_blocks(windows, m, ridge, tol, max_iter, block, chunk, threads)
                else:
                    out = _run_sharded(devs, *windows.block(0, q_pad), m, ridge, tol, np_dtype, max_iter, call, chunk)
                th, s, lab, nc, it = (np.asarray(x)[: len(part)] for x in out)
                n_c = n_docs[part]
                real = np.arange(size)[None, :] < n_c[:, None]
                cols = min(size, n_max)
                theta[part, :cols] = np.where(real, th, 0.0)[:, :cols]
                se[part, :cols] = np.where(real, s, np.nan)[:, :cols]
                n_comp[part] = nc
                iters[part] = it
                # component labels 0..k-1 in order of first document (labels are the smallest member)
                comp = np.where(real, lab, -1)[:, :cols]
                connected = nc == 1
                component[part[connected], :cols] = np.where(real[connected, :cols], 0, -1)
                for row in np.flatnonzero(~connected):
                    n = n_c[row]
                    _, inv = np.unique(comp[row, :n], return_inverse=True)
                    component[part[row], :n] = inv
    return BTFit(theta, se, mask, component, n_comp, iters)

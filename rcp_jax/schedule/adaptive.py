"""Stage A, round 3 of the tournament: adaptive batches of consecutive ranks where the BT order is least certain.

Between batches the caller refits Bradley-Terry; each batch values every adjacent boundary of the
current ranking (:func:`boundary_values`), then greedily picks windows of consecutive ranks
(:func:`pick_segments`), discounting boundaries already compared (:func:`co_occurrence`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from rcp_jax.errors import DataError
from rcp_jax.judging.store.records import Window
from rcp_jax.schedule.config import DEFAULT_CONFIG, ScheduleConfig, schedule_counts
from rcp_jax.schedule.windows import _descending, _orders, _pool, _scores, _windows


def boundary_values(theta_sorted: np.ndarray, co_adjacent: np.ndarray) -> np.ndarray:
    """Value of refining each adjacent boundary of a ranking (METHOD round 3).

    Args:
        theta_sorted: float[M] BT scores in rank order (rank 1 first).
        co_adjacent: int[M-1] times ranks r and r+1 already shared a window.

    Returns:
        float64[M-1] ``v_r = q_r (1 - q_r) / log2(r + 1) / (1 + n_r)`` for r = 1..M-1, with
        ``q_r = sigmoid(theta_(r) - theta_(r+1))``.
    """
    theta_sorted = np.asarray(theta_sorted, dtype=np.float64)
    co_adjacent = np.asarray(co_adjacent, dtype=np.float64)
    q = 1.0 / (1.0 + np.exp(-(theta_sorted[:-1] - theta_sorted[1:])))
    r = np.arange(1, len(theta_sorted), dtype=np.float64)
    return q * (1.0 - q) / np.log2(r + 1.0) / (1.0 + co_adjacent)


#: Relative tolerance within which :func:`pick_segments` treats summed values as tied.
TIE_RTOL = 1e-12


def pick_segments(
    values: np.ndarray, k: int, count: int, decay: float = 0.3, *, exclude: Iterable[int] = ()
) -> list[int]:
    """Greedy choice of ``count`` windows of ``k`` consecutive ranks by summed boundary value, no start twice.

    A window starting at (0-based) rank ``s`` covers ranks ``s..s+k-1`` and boundaries ``s..s+k-2``
    (boundary ``b`` lies between ranks ``b`` and ``b+1``). Each step takes the start with the largest
    summed value (the first on ties: sums within a relative :data:`TIE_RTOL` of the largest are tied, so
    equal sums that round differently in the summation still go to the first), stops early when that sum is ``<= 0``,
    then multiplies the covered boundaries' values by ``decay``. A start already taken, or listed in
    ``exclude``, is never taken (again): it would ask the same documents in the same order, a paid
    duplicate at temperature 0; its boundaries still count in the other starts' sums.

    Args:
        values: float[M-1] boundary values (:func:`boundary_values`). k: window size, ``2 <= k <= M``.
        exclude: starts not to take (windows asked before in this order).

    Returns:
        start ranks (0-based), at most ``count``, distinct.
    """
    v = np.array(values, dtype=np.float64)
    span = k - 1
    starts: list[int] = []
    if span < 1 or len(v) < span:
        return starts
    allowed = np.ones(len(v) - span + 1, dtype=bool)
    for s in exclude:
        if 0 <= int(s) < len(allowed):
            allowed[int(s)] = False
    for _ in range(count):
        if not allowed.any():
            break
        sums = np.lib.stride_tricks.sliding_window_view(v, span).sum(axis=1)
        sums[~allowed] = -np.inf
        best = sums.max()
        if not best > 0.0:
            break
        s = int(np.flatnonzero(sums >= best - TIE_RTOL * best)[0])
        starts.append(s)
        allowed[s] = False
        v[s : s + span] *= decay
    return starts


def co_occurrence(windows: Iterable[Window], doc_ids: Sequence[str]) -> np.ndarray:
    """How often each pair of pool documents shared a window.

    Args:
        windows: the query's windows so far (each counted once; a reversed copy is a window of its
            own). Pass those with a valid answer to count what the judge actually compared.
        doc_ids: the pool.

    Returns:
        int64[n, n] symmetric counts in pool order; the diagonal holds each document's placements.
    """
    docs = tuple(str(d) for d in doc_ids)
    index = {d: i for i, d in enumerate(docs)}
    out = np.zeros((len(docs), len(docs)), dtype=np.int64)
    for win in windows:
        try:
            idx = np.array([index[d] for d in win.doc_ids], dtype=np.int64)
        except KeyError as err:
            raise DataError(
                f"window {win.label}: document {err.args[0]!r} is not in the pool given; pass the pool the "
                "window was planned from"
            ) from None
        out[np.ix_(idx, idx)] += 1
    return out


def adaptive_batch(
    query_id: str,
    doc_ids: Sequence[str],
    bt_scores: Mapping[str, float] | Sequence[float] | np.ndarray,
    co_counts: np.ndarray,
    batch_index: int,
    *,
    asked: Iterable[Window] = (),
    config: ScheduleConfig = DEFAULT_CONFIG,
) -> list[Window]:
    """One round-3 batch: windows of consecutive ranks where the current order is least certain.

    Deterministic (no random stream): ties go to the best-ranked window. A window whose documents, in
    the current order, were already asked in that order (``asked``, or earlier in this batch) is not
    asked again: when the BT order has not moved, the best-valued run of ranks can be the one an earlier
    batch showed, and at temperature 0 the judge would answer it the same (25 of 247 calls of one run
    were such repeats). The next-best run is taken instead.

    Args:
        query_id, doc_ids, config: as :func:`tournament_round1`.
        bt_scores: the current BT score of every pool document (refit before each batch).
        co_counts: int[n, n] pair counts of every tournament window so far (:func:`co_occurrence`),
            in pool order.
        asked: the query's tournament windows asked so far (those ``co_counts`` counts); windows of
            other queries are ignored.
        batch_index: 0-based batch number, ``0 <= batch_index < len(schedule_counts(n).round3_batches)``.

    Returns:
        Up to ``round3_batches[batch_index]`` windows of phase ``round3_b{batch_index + 1}`` (fewer when
        no boundary has value left or every run of ranks left was asked already), each in the current
        BT order (best first), shown once. A pool of ``<= w`` documents gets one window of the whole
        pool (none when that order was asked already); a pool of < 2 none.
    """
    docs = _pool(query_id, doc_ids)
    n = len(docs)
    counts = schedule_counts(n, config)
    if n < 2:
        return []
    if not 0 <= int(batch_index) < len(counts.round3_batches):
        raise ValueError(
            f"query {query_id!r}: batch_index {batch_index} out of range; a pool of {n} has "
            f"{len(counts.round3_batches)} adaptive batch(es)"
        )
    theta = _scores(query_id, docs, bt_scores, "BT score")
    order = _descending(theta)
    co = np.asarray(co_counts)
    if co.shape != (n, n):
        raise DataError(f"query {query_id!r}: co_counts has shape {co.shape}, expected ({n}, {n}) in pool order")
    phase = f"round3_b{int(batch_index) + 1}"
    k = counts.window_size
    before = _orders((w for w in asked if w.query_id == query_id), docs)
    if n <= config.w:
        return [] if tuple(int(i) for i in order) in before else _windows(query_id, "tournament", phase, docs, [order])
    depth = n if config.depth is None else min(n, max(int(config.depth), k))
    top = order[:depth]
    values = boundary_values(theta[top], co[top[:-1], top[1:]])
    repeats = [s for s in range(len(top) - k + 1) if tuple(int(i) for i in top[s : s + k]) in before]
    starts = pick_segments(values, k, counts.round3_batches[batch_index], config.decay, exclude=repeats)
    return _windows(query_id, "tournament", phase, docs, [top[s : s + k] for s in starts])

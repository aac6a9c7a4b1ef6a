"""Stage A, rounds 1 and 2 of the tournament: balanced random windows, then stratified by round-1 BT order.

Each window is shown twice, the second time reversed (``ScheduleConfig.mirror``). Round 3 is in
:mod:`rcp_jax.schedule.adaptive`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rcp_jax.judging.store.records import Window
from rcp_jax.schedule.config import DEFAULT_CONFIG, ScheduleConfig, schedule_counts
from rcp_jax.schedule.windows import _degenerate, _least_shown, _pool, _stratified_phase, _windows, query_rng


def tournament_round1(
    query_id: str, doc_ids: Sequence[str], *, seed: int, dataset: str = "", config: ScheduleConfig = DEFAULT_CONFIG
) -> list[Window]:
    """Round 1, balanced random: each window the ``k`` least-shown documents, in shuffled order.

    Args:
        query_id: the query. doc_ids: its pool (distinct ids, pool order).
        seed, dataset: with ``query_id``, key the random stream.
        config: schedule constants.

    Returns:
        ``2 * round1`` windows (phase ``round1`` and its mirror ``round1_reversed``, interleaved) with
        ``min(w, n)`` documents each; none (and a :class:`ScheduleWarning`) for a pool of < 2. No two
        windows share an order (a pool of 2 or 3 has fewer orders than windows: it gets fewer windows).
    """
    docs = _pool(query_id, doc_ids)
    counts = schedule_counts(len(docs), config)
    if counts.round1 == 0:
        _degenerate(query_id, docs, "tournament")
        return []
    rng = query_rng(seed, dataset, query_id, "round1")
    picks = _least_shown(rng, len(docs), counts.window_size, counts.round1, used=set(), mirror=config.mirror)
    return _windows(query_id, "tournament", "round1", docs, picks, mirror=config.mirror)


def tournament_round2(
    query_id: str,
    doc_ids: Sequence[str],
    bt_scores: Mapping[str, float] | Sequence[float] | np.ndarray,
    *,
    seed: int,
    dataset: str = "",
    config: ScheduleConfig = DEFAULT_CONFIG,
) -> list[Window]:
    """Round 2, stratified: contiguous blocks of the round-1 BT order with the lowest coverage.

    Args:
        query_id, doc_ids, seed, dataset, config: as :func:`tournament_round1`.
        bt_scores: round-1 BT score of every pool document: mapping doc_id -> theta, or float[n] in
            pool order. Ties keep pool order.

    Returns:
        ``2 * round2`` windows (``round2`` / ``round2_reversed``), documents shuffled within a window, in
        orders round 1 did not ask (round 1 is recomputed from the same arguments to know them).
    """
    docs = _pool(query_id, doc_ids)
    counts = schedule_counts(len(docs), config)
    earlier = tournament_round1(query_id, docs, seed=seed, dataset=dataset, config=config) if counts.round2 else []
    return _stratified_phase(query_id, docs, bt_scores, "BT score", stage="tournament", phase="round2",
                             stream="round2", count=counts.round2, window_size=counts.window_size,
                             tie_replace=config.tie_replace, seed=seed, dataset=dataset, mirror=config.mirror,
                             earlier=earlier)

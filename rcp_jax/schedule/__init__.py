"""Which documents the judge sees together: the Stage A tournament and Stage B rubric schedules.

METHOD sections 1-2. Every function is pure: it takes one query's pool (document ids in pool order),
whatever scores the previous step produced, and returns :class:`rcp_jax.judging.store.records.Window` objects.
Randomness comes from a stream keyed by ``(seed, dataset, query_id, phase)`` through SHA-256, so a
query's windows never depend on which other queries are scheduled, or in which order.

Counts scale with the pool. With ``n`` documents and windows of ``k = min(w, n)`` documents, a phase
asking ``p`` placements per document gets ``round(p * n / k)`` windows (round half to even, computed
in exact rational arithmetic). The defaults reproduce the paper at ``n = 150, w = 10``:

======================  ========================  ===============  ===============================
phase                   placements per document   windows (n=150)  calls
======================  ========================  ===============  ===============================
``round1`` balanced     53*10/150                 53               106 (each also shown reversed)
``round2`` stratified   27*10/150                 27               54 (each also shown reversed)
``round3_b1..b7``       56*10/150, 7 batches      7 x 8 = 56       56 (shown once)
rubric ``balanced``     first half of 100*10/150  50               50
rubric ``stratified``   second half               50               50
======================  ========================  ===============  ===============================

Choices the METHOD leaves open, made here (and recorded in :class:`ScheduleConfig`):

* ``k = min(w, n)`` in the count formula, so a pool smaller than a window still gets ~14 tournament
  and ~6.7 rubric placements per document (the literal ``n / w`` would give ~9 and ~5 at n = 8).
* Round 3 keeps 7 batches when it can: ``total = round(p3 * n / k)`` windows are split into
  ``min(7, total)`` batches as evenly as possible, earlier batches taking the remainder
  (n = 150: 8 each; n = 500: 187 = 5 x 27 + 2 x 26; n = 37: 14 = 7 x 2). A pool of ``<= w`` documents
  gets a single adaptive window (one batch) holding the whole pool in BT order; a pool of fewer than
  two documents gets no tournament windows at all (a pool of one is reported with a warning).
* No window is asked twice in the same order (same documents, same positions: at temperature 0 the
  same answer, paid again and counted twice by the fit). A shuffled window whose order was already
  asked (or, for mirrored rounds, whose reverse was) is shuffled again; round 2 avoids round 1's
  orders, the stratified rubric half the balanced half's; a round-3 run of ranks already asked in that
  order gives way to the next best. A pool of <= w documents has only n! orders, so pools of 2 and 3
  get fewer windows (2: one round-1 window and its mirror, no round 2 or 3; 3: three and their
  mirrors); reversed copies are the intended exception (a different order).
* Round 3 ranks the whole pool by default (at n = 150 the METHOD's "top 150" is the whole pool); set
  ``ScheduleConfig(depth=150)`` to restrict adaptive windows to the top 150 of a larger pool.
* The rubric has ``max(ceil(n / k), round(p * n / k))`` windows; the balanced half takes
  ``ceil(total / 2)`` of them. It must show every document (``balanced * k >= n``), else
  :func:`check_rubric_coverage` refuses before any call.

Window naming (stage, phase, sequence): tournament ``round1`` / ``round1_reversed`` / ``round2`` /
``round2_reversed`` / ``round3_b1`` .. ``round3_b7``; rubric ``balanced`` / ``stratified``. A reversed
copy has its original's sequence number and the documents in reverse order.

Example: drive one query through the tournament with made-up scores standing in for BT refits::

    >>> import numpy as np
    >>> from rcp_jax import schedule as S
    >>> docs = [f"d{i}" for i in range(150)]
    >>> c = S.schedule_counts(150)
    >>> (c.round1, c.round2, c.round3_batches, c.tournament_calls, c.rubric_windows)
    (53, 27, (8, 8, 8, 8, 8, 8, 8), 216, 100)
    >>> r1 = S.tournament_round1("q1", docs, seed=0, dataset="demo")
    >>> len(r1), r1[0].phase, r1[1].phase, r1[1].doc_ids == r1[0].doc_ids[::-1]
    (106, 'round1', 'round1_reversed', True)
    >>> bt = {d: -0.01 * i for i, d in enumerate(docs)}          # stand-in for a BT fit
    >>> r2 = S.tournament_round2("q1", docs, bt, seed=0, dataset="demo")
    >>> seen = list(r1) + list(r2)
    >>> batch = S.adaptive_batch("q1", docs, bt, S.co_occurrence(seen, docs), 0)
    >>> len(r2), len(batch), batch[0].phase
    (54, 8, 'round3_b1')

Where things live (this package names the public surface above; the modules hold it): constants and counts in
:mod:`rcp_jax.schedule.config`, shared building blocks in :mod:`rcp_jax.schedule.windows`, rounds 1-2 in
:mod:`rcp_jax.schedule.rounds`, round 3 in :mod:`rcp_jax.schedule.adaptive`, the rubric in
:mod:`rcp_jax.schedule.rubric`, the windows that extend a judged pool (new documents beside anchors) in
:mod:`rcp_jax.schedule.anchors`.
"""

from __future__ import annotations

from rcp_jax.schedule.adaptive import adaptive_batch, boundary_values, co_occurrence, pick_segments
from rcp_jax.schedule.anchors import (
    DEFAULT_EXTENSION,
    ExtensionConfig,
    extension_counts,
    extension_rubric,
    extension_tournament,
    select_anchors,
)
from rcp_jax.schedule.config import DEFAULT_CONFIG, ScheduleConfig, ScheduleCounts, ScheduleWarning, schedule_counts
from rcp_jax.schedule.rounds import tournament_round1, tournament_round2
from rcp_jax.schedule.rubric import check_rubric_coverage, rasch_abilities, rubric_balanced, rubric_stratified
from rcp_jax.schedule.windows import REVERSED_SUFFIX, is_reversed, query_rng, schedule_order

__all__ = [
    "ScheduleConfig",
    "ScheduleCounts",
    "ScheduleWarning",
    "DEFAULT_CONFIG",
    "REVERSED_SUFFIX",
    "schedule_counts",
    "query_rng",
    "tournament_round1",
    "tournament_round2",
    "adaptive_batch",
    "boundary_values",
    "pick_segments",
    "co_occurrence",
    "check_rubric_coverage",
    "rubric_balanced",
    "rubric_stratified",
    "rasch_abilities",
    "is_reversed",
    "schedule_order",
    "ExtensionConfig",
    "DEFAULT_EXTENSION",
    "select_anchors",
    "extension_counts",
    "extension_tournament",
    "extension_rubric",
]

# doctest.testmod(rcp_jax.schedule) keeps running the example of schedule_counts (defined in schedule.config)
__test__ = {"schedule_counts": schedule_counts}

"""Which documents the judge sees together: the Stage A tournament and Stage B rubric schedules.

METHOD sections 1-2. Every function is pure: it takes one query's pool (document ids in pool order),
whatever scores the previous step produced, and returns :class:`judging.records.Window` objects.
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
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from judging.records import Window
from rcp_jax.errors import DataError

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
]

#: Phase-name suffix of the mirrored copy of a round-1 or round-2 window.
REVERSED_SUFFIX = "_reversed"


class ScheduleWarning(UserWarning):
    """A query's schedule is degenerate (a pool of 0 or 1 document); the message names the query."""


def _as_fraction(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    return Fraction(float(x)).limit_denominator(10**6)


@dataclass(frozen=True)
class ScheduleConfig:
    """Every constant of the schedules (defaults: the paper at w = 10).

    Attributes:
        w: documents per window (at least 2).
        round1_placements, round2_placements, round3_placements, rubric_placements: windows per
            document of each phase (exact fractions; floats are read as the nearest simple fraction).
        round3_batches: number of adaptive batches (BT refits) in round 3.
        mirror: show every round-1 and round-2 window a second time, reversed.
        tie_replace: round 2 / stratified rubric: probability that a later block of equal coverage
            replaces the incumbent.
        decay: round 3: factor applied to the values of boundaries a chosen window covers.
        depth: round 3: rank only the top ``depth`` documents (None: the whole pool).
    """

    w: int = 10
    round1_placements: Fraction = Fraction(53 * 10, 150)
    round2_placements: Fraction = Fraction(27 * 10, 150)
    round3_placements: Fraction = Fraction(56 * 10, 150)
    round3_batches: int = 7
    rubric_placements: Fraction = Fraction(100 * 10, 150)
    mirror: bool = True
    tie_replace: float = 0.3
    decay: float = 0.3
    depth: int | None = None

    def __post_init__(self) -> None:
        for name in ("round1_placements", "round2_placements", "round3_placements", "rubric_placements"):
            value = _as_fraction(getattr(self, name))
            if value < 0:
                raise ValueError(f"ScheduleConfig.{name} = {value} must be >= 0")
            object.__setattr__(self, name, value)
        if int(self.w) < 2:
            raise ValueError(f"ScheduleConfig.w = {self.w}: a window needs at least 2 documents")
        if int(self.round3_batches) < 1:
            raise ValueError(f"ScheduleConfig.round3_batches = {self.round3_batches} must be >= 1")
        if not 0.0 <= self.tie_replace <= 1.0 or not 0.0 <= self.decay <= 1.0:
            raise ValueError("ScheduleConfig.tie_replace and .decay must lie in [0, 1]")
        if self.depth is not None and int(self.depth) < 2:
            raise ValueError(f"ScheduleConfig.depth = {self.depth} must be >= 2 or None")

    def to_dict(self) -> dict:
        """JSON-able form (fractions as ``"53/15"`` strings), for recording with a run."""
        out = {}
        for k, v in self.__dict__.items():
            out[k] = str(v) if isinstance(v, Fraction) else v
        return out


DEFAULT_CONFIG = ScheduleConfig()


@dataclass(frozen=True)
class ScheduleCounts:
    """Planned numbers of windows for a pool of ``n`` documents.

    Attributes:
        n: pool size. window_size: ``k = min(w, n)`` documents per window.
        round1, round2: windows of rounds 1 and 2 (before mirroring).
        round3_batches: planned windows of each adaptive batch (an upper bound: a batch stops early
            when no boundary has positive value).
        round3: their sum.
        mirror: whether rounds 1-2 are also shown reversed.
        rubric_balanced, rubric_stratified: windows of the two rubric halves.
        note: empty, or why the schedule is degenerate.
    """

    n: int
    window_size: int
    round1: int
    round2: int
    round3_batches: tuple[int, ...]
    mirror: bool
    rubric_balanced: int
    rubric_stratified: int
    note: str = ""
    round3: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "round3", int(sum(self.round3_batches)))

    @property
    def tournament_calls(self) -> int:
        """Judge calls of Stage A: mirrored rounds 1-2 plus round 3."""
        return (self.round1 + self.round2) * (2 if self.mirror else 1) + self.round3

    @property
    def rubric_windows(self) -> int:
        """Judge calls of Stage B."""
        return self.rubric_balanced + self.rubric_stratified

    @property
    def tournament_placements(self) -> float:
        """Mean windows per document in Stage A (14.4 at n = 150)."""
        return self.tournament_calls * self.window_size / self.n if self.n else 0.0

    @property
    def rubric_placements(self) -> float:
        """Mean windows per document in Stage B (6.67 at n = 150)."""
        return self.rubric_windows * self.window_size / self.n if self.n else 0.0

    def as_row(self) -> dict:
        """Flat dict (for a summary table)."""
        return {
            "n": self.n, "window_size": self.window_size, "round1": self.round1, "round2": self.round2,
            "round3": self.round3, "round3_batches": "+".join(map(str, self.round3_batches)),
            "tournament_calls": self.tournament_calls, "tournament_placements": round(self.tournament_placements, 2),
            "rubric_balanced": self.rubric_balanced, "rubric_stratified": self.rubric_stratified,
            "rubric_windows": self.rubric_windows, "rubric_placements": round(self.rubric_placements, 2),
        }


def _phase_windows(placements: Fraction, n: int, k: int) -> int:
    # Python's round() on a Fraction rounds half to even, exactly.
    return int(round(placements * n / k))


def _split(total: int, parts: int) -> tuple[int, ...]:
    parts = min(parts, total)
    if parts == 0:
        return ()
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def schedule_counts(n: int, config: ScheduleConfig = DEFAULT_CONFIG) -> ScheduleCounts:
    """Planned window counts for a pool of ``n`` documents (see the module docstring for the rules).

    >>> schedule_counts(150).as_row()["tournament_calls"], schedule_counts(1).note[:9]
    (216, 'pool of 1')
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"pool size {n} must be >= 0")
    k = min(config.w, n)
    if n == 0:
        return ScheduleCounts(0, 0, 0, 0, (), config.mirror, 0, 0, note="empty pool: nothing to judge")
    rubric_total = max(math.ceil(n / k), _phase_windows(config.rubric_placements, n, k))
    balanced = math.ceil(rubric_total / 2)
    rubric = dict(rubric_balanced=balanced, rubric_stratified=rubric_total - balanced)
    if n == 1:
        return ScheduleCounts(
            1, 1, 0, 0, (), config.mirror, **rubric,
            note="pool of 1 document: nothing to compare, no tournament windows (rubric only)",
        )
    r1 = _phase_windows(config.round1_placements, n, k)
    r2 = _phase_windows(config.round2_placements, n, k)
    if n <= config.w:
        batches: tuple[int, ...] = (1,)
    else:
        batches = _split(_phase_windows(config.round3_placements, n, k), config.round3_batches)
    return ScheduleCounts(n, k, r1, r2, batches, config.mirror, **rubric)


# --------------------------------------------------------------------------------------------------
# helpers: randomness, pools, scores
# --------------------------------------------------------------------------------------------------
def query_rng(seed: int, dataset: str, query_id: str, phase: str) -> np.random.Generator:
    """The random stream of one (seed, dataset, query, phase): SHA-256 of their canonical JSON.

    Independent of every other query and phase, so schedules never depend on processing order.
    """
    key = json.dumps([int(seed), str(dataset), str(query_id), str(phase)], separators=(",", ":"))
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest(), "big"))


def _pool(query_id: str, doc_ids: Sequence[str]) -> tuple[str, ...]:
    docs = tuple(str(d) for d in doc_ids)
    if len(set(docs)) != len(docs):
        seen: set[str] = set()
        dupes = sorted({d for d in docs if d in seen or seen.add(d)})
        raise DataError(
            f"query {query_id!r}: document id(s) {dupes[:5]} appear more than once in the pool; a pool lists "
            "each document once (deduplicate it)"
        )
    return docs


def _scores(query_id: str, docs: tuple[str, ...], scores, what: str) -> np.ndarray:
    """Scores float64[n] aligned with ``docs`` from a mapping doc_id -> score or a sequence."""
    if isinstance(scores, Mapping):
        missing = [d for d in docs if d not in scores]
        if missing:
            raise DataError(
                f"query {query_id!r}: no {what} for document(s) {missing[:5]} of the pool "
                f"({len(missing)} missing); give a {what} for every pool document"
            )
        out = np.array([float(scores[d]) for d in docs], dtype=np.float64)
    else:
        out = np.asarray(scores, dtype=np.float64).reshape(-1)
        if len(out) != len(docs):
            raise DataError(
                f"query {query_id!r}: {len(out)} {what}s for a pool of {len(docs)} documents; pass one per "
                "document in pool order, or a mapping doc_id -> value"
            )
    bad = ~np.isfinite(out)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"query {query_id!r}: {what} of document {docs[i]!r} is {out[i]}; it must be finite")
    return out


def _descending(values: np.ndarray) -> np.ndarray:
    """Indices ordering ``values`` from highest to lowest; ties keep pool order."""
    return np.argsort(-values, kind="stable")


def _windows(query_id, stage, phase, docs, index_lists, *, mirror=False, start=0) -> list[Window]:
    out = []
    for i, idx in enumerate(index_lists):
        ids = tuple(docs[j] for j in idx)
        out.append(Window(query_id=query_id, stage=stage, phase=phase, sequence=start + i, doc_ids=ids))
        if mirror:
            out.append(
                Window(query_id=query_id, stage=stage, phase=phase + REVERSED_SUFFIX, sequence=start + i, doc_ids=ids[::-1])
            )
    return out


def is_reversed(window: Window) -> bool:
    """Whether ``window`` is the mirrored copy of a round-1 or round-2 window."""
    return window.phase.endswith(REVERSED_SUFFIX)


_PHASE_RANK = {"round1": 0, "round2": 1, "balanced": 0, "stratified": 1}


def schedule_order(window: Window) -> tuple:
    """Sort key putting windows in the order the pipeline asks them: phase by phase (round 1, round 2,
    round-3 batches 1..7; rubric balanced, stratified; other phases after, by name), then query id,
    then sequence, a reversed copy right after its original.

    Sorting stored judgements with it makes tables read back from a store independent of the order the
    answers happened to arrive in (which depends on concurrency, kills and resumes).
    """
    base = window.phase.removesuffix(REVERSED_SUFFIX)
    rank = _PHASE_RANK.get(base)
    if rank is None and base.startswith("round3_b") and base[len("round3_b"):].isdigit():
        rank = 1 + int(base[len("round3_b"):])
    unknown = rank is None
    return (window.stage, unknown, 0 if unknown else rank, base if unknown else "", window.query_id,
            window.sequence, is_reversed(window))


def _degenerate(query_id: str, docs: tuple[str, ...], what: str) -> None:
    if len(docs) == 0:
        warnings.warn(f"query {query_id!r}: empty pool, no {what} windows", ScheduleWarning, stacklevel=3)
    elif len(docs) == 1:
        warnings.warn(
            f"query {query_id!r}: pool of 1 document ({docs[0]!r}); the tournament has nothing to compare, "
            f"so it gets no {what} windows (the document can still be judged by the rubric)",
            ScheduleWarning, stacklevel=3,
        )


# --------------------------------------------------------------------------------------------------
# the two building blocks: least-shown windows and lowest-coverage contiguous blocks
# --------------------------------------------------------------------------------------------------
def _least_shown(rng: np.random.Generator, n: int, k: int, count: int) -> list[np.ndarray]:
    """``count`` windows, each the ``k`` documents shown least so far (random tie-break), shuffled."""
    shown = np.zeros(n, dtype=np.int64)
    out = []
    for _ in range(count):
        pick = np.lexsort((rng.random(n), shown))[:k]
        shown[pick] += 1
        out.append(rng.permutation(pick))
    return out


def _lowest_coverage_blocks(
    rng: np.random.Generator, order: np.ndarray, k: int, count: int, tie_replace: float
) -> list[np.ndarray]:
    """``count`` windows, each the contiguous block of ``k`` in ``order`` with the lowest summed coverage.

    Coverage counts how often a document was used by this phase so far. Scanning blocks from the top,
    a block of equal (lowest) coverage replaces the incumbent with probability ``tie_replace``. Each
    window's documents come back shuffled.
    """
    n = len(order)
    coverage = np.zeros(n, dtype=np.int64)  # by position in ``order``
    out = []
    for _ in range(count):
        csum = np.concatenate([[0], np.cumsum(coverage)])
        sums = csum[k:] - csum[: n - k + 1]  # exact integer sums of every block start 0..n-k
        candidates = np.flatnonzero(sums == sums.min())
        best = int(candidates[0])
        if len(candidates) > 1:
            for cand, u in zip(candidates[1:], rng.random(len(candidates) - 1)):
                if u < tie_replace:
                    best = int(cand)
        coverage[best : best + k] += 1
        out.append(rng.permutation(order[best : best + k]))
    return out


# --------------------------------------------------------------------------------------------------
# Stage A: tournament
# --------------------------------------------------------------------------------------------------
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
        ``min(w, n)`` documents each; none (and a :class:`ScheduleWarning`) for a pool of < 2.
    """
    docs = _pool(query_id, doc_ids)
    counts = schedule_counts(len(docs), config)
    if counts.round1 == 0:
        _degenerate(query_id, docs, "tournament")
        return []
    rng = query_rng(seed, dataset, query_id, "round1")
    picks = _least_shown(rng, len(docs), counts.window_size, counts.round1)
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
        ``2 * round2`` windows (``round2`` / ``round2_reversed``), documents shuffled within a window.
    """
    docs = _pool(query_id, doc_ids)
    counts = schedule_counts(len(docs), config)
    if counts.round2 == 0:
        return []
    order = _descending(_scores(query_id, docs, bt_scores, "BT score"))
    rng = query_rng(seed, dataset, query_id, "round2")
    picks = _lowest_coverage_blocks(rng, order, counts.window_size, counts.round2, config.tie_replace)
    return _windows(query_id, "tournament", "round2", docs, picks, mirror=config.mirror)


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


def pick_segments(values: np.ndarray, k: int, count: int, decay: float = 0.3) -> list[int]:
    """Greedy choice of ``count`` windows of ``k`` consecutive ranks by summed boundary value.

    A window starting at (0-based) rank ``s`` covers ranks ``s..s+k-1`` and boundaries ``s..s+k-2``
    (boundary ``b`` lies between ranks ``b`` and ``b+1``). Each step takes the start with the largest
    summed value (the first on ties), stops early when that sum is ``<= 0``, then multiplies the
    covered boundaries' values by ``decay``.

    Args:
        values: float[M-1] boundary values (:func:`boundary_values`). k: window size, ``2 <= k <= M``.

    Returns:
        start ranks (0-based), at most ``count``.
    """
    v = np.array(values, dtype=np.float64)
    span = k - 1
    starts: list[int] = []
    if span < 1 or len(v) < span:
        return starts
    for _ in range(count):
        sums = np.lib.stride_tricks.sliding_window_view(v, span).sum(axis=1)
        s = int(np.argmax(sums))
        if not sums[s] > 0.0:
            break
        starts.append(s)
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
    config: ScheduleConfig = DEFAULT_CONFIG,
) -> list[Window]:
    """One round-3 batch: windows of consecutive ranks where the current order is least certain.

    Deterministic (no random stream): ties go to the best-ranked window.

    Args:
        query_id, doc_ids, config: as :func:`tournament_round1`.
        bt_scores: the current BT score of every pool document (refit before each batch).
        co_counts: int[n, n] pair counts of every tournament window so far (:func:`co_occurrence`),
            in pool order.
        batch_index: 0-based batch number, ``0 <= batch_index < len(schedule_counts(n).round3_batches)``.

    Returns:
        Up to ``round3_batches[batch_index]`` windows of phase ``round3_b{batch_index + 1}`` (fewer when
        no boundary has value left), each in the current BT order (best first), shown once. A pool of
        ``<= w`` documents gets one window of the whole pool; a pool of < 2 none.
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
    if n <= config.w:
        return _windows(query_id, "tournament", phase, docs, [order])
    depth = n if config.depth is None else min(n, max(int(config.depth), k))
    top = order[:depth]
    values = boundary_values(theta[top], co[top[:-1], top[1:]])
    starts = pick_segments(values, k, counts.round3_batches[batch_index], config.decay)
    return _windows(query_id, "tournament", phase, docs, [top[s : s + k] for s in starts])


# --------------------------------------------------------------------------------------------------
# Stage B: rubric
# --------------------------------------------------------------------------------------------------
def check_rubric_coverage(query_id: str, n: int, config: ScheduleConfig = DEFAULT_CONFIG) -> None:
    """Refuse (``DataError``) a rubric schedule whose balanced half cannot show every document.

    Call it for every query before the first judge call: a half-covered pool cannot be calibrated.
    """
    counts = schedule_counts(n, config)
    if counts.rubric_balanced * counts.window_size < n:
        raise DataError(
            f"query {query_id!r}: the rubric's balanced half has {counts.rubric_balanced} window(s) of "
            f"{counts.window_size} = {counts.rubric_balanced * counts.window_size} placements for {n} "
            f"documents, so some would never be judged; raise ScheduleConfig.rubric_placements (now "
            f"{float(config.rubric_placements):.2f}) to about 2 or more per document"
        )


def rubric_balanced(
    query_id: str, doc_ids: Sequence[str], *, seed: int, dataset: str = "", config: ScheduleConfig = DEFAULT_CONFIG
) -> list[Window]:
    """First rubric half: each window the ``k`` least-shown documents (every document shown), shuffled.

    Raises:
        DataError: the half cannot show every document (:func:`check_rubric_coverage`), before any window.

    Returns:
        ``rubric_balanced`` windows of stage ``rubric``, phase ``balanced``.
    """
    docs = _pool(query_id, doc_ids)
    if not docs:
        _degenerate(query_id, docs, "rubric")
        return []
    check_rubric_coverage(query_id, len(docs), config)
    counts = schedule_counts(len(docs), config)
    rng = query_rng(seed, dataset, query_id, "rubric_balanced")
    picks = _least_shown(rng, len(docs), counts.window_size, counts.rubric_balanced)
    return _windows(query_id, "rubric", "balanced", docs, picks)


def rubric_stratified(
    query_id: str,
    doc_ids: Sequence[str],
    abilities: Mapping[str, float] | Sequence[float] | np.ndarray,
    *,
    seed: int,
    dataset: str = "",
    config: ScheduleConfig = DEFAULT_CONFIG,
) -> list[Window]:
    """Second rubric half: contiguous blocks of documents of similar preliminary Rasch ability.

    Args:
        abilities: preliminary ability of every pool document (mapping or float[n] in pool order),
            e.g. from :func:`rasch_abilities` on the balanced half's answers.

    Returns:
        ``rubric_stratified`` windows of stage ``rubric``, phase ``stratified``, shuffled within a window.
    """
    docs = _pool(query_id, doc_ids)
    counts = schedule_counts(len(docs), config)
    if counts.rubric_stratified == 0:
        return []
    order = _descending(_scores(query_id, docs, abilities, "Rasch ability"))
    rng = query_rng(seed, dataset, query_id, "rubric_stratified")
    picks = _lowest_coverage_blocks(rng, order, counts.window_size, counts.rubric_stratified, config.tie_replace)
    return _windows(query_id, "rubric", "stratified", docs, picks)


def _criteria_columns(columns) -> list[str]:
    crit = sorted((c for c in columns if isinstance(c, str) and c[:1] == "C" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    if not crit or crit != [f"C{i}" for i in range(1, len(crit) + 1)]:
        raise DataError(
            f"rubric answers need criterion columns C1..CK (a contiguous ladder); got {list(columns)}"
        )
    return crit


def rasch_abilities(pools: Mapping[str, Sequence[str]], answers) -> dict[str, np.ndarray]:
    """Preliminary Rasch abilities of every pool document, all queries in one batched fit.

    Args:
        pools: query_id -> pool (doc ids in pool order).
        answers: pandas DataFrame with columns ``query_id, doc_id, C1..CK`` (one row per placement,
            answers 0/1), e.g. the balanced half's answers.

    Returns:
        query_id -> float64[n] abilities in pool order (``models.irt.fit_rasch``, ridge 1e-4, beta
        centred). A document without any answer sits at the prior (0) and a :class:`ScheduleWarning`
        names it.
    """
    from models.irt import fit_rasch  # JAX is imported only when abilities are actually fitted

    for col in ("query_id", "doc_id"):
        if col not in answers.columns:
            raise DataError(f"rubric answers are missing column {col!r}; expected query_id, doc_id, C1..CK")
    crit = _criteria_columns(answers.columns)
    qids = [str(q) for q in pools]
    pools_t = {q: _pool(q, pools[q]) for q in qids}
    if not qids:
        return {}
    n_max = max(1, max(len(p) for p in pools_t.values()))
    passes = np.zeros((len(qids), n_max, len(crit)))
    trials = np.zeros_like(passes)
    qpos = {q: i for i, q in enumerate(qids)}
    dpos = {q: {d: i for i, d in enumerate(p)} for q, p in pools_t.items()}
    values = answers[crit].to_numpy(dtype=np.float64)
    if not np.isin(values, (0.0, 1.0)).all():
        raise DataError("rubric answers must be 0 or 1 in every criterion column")
    for (q, d), row in zip(zip(answers["query_id"].astype(str), answers["doc_id"].astype(str)), values):
        if q not in qpos:
            continue
        i = dpos[q].get(d)
        if i is None:
            raise DataError(f"rubric answer for document {d!r} of query {q!r}, which is not in that query's pool")
        passes[qpos[q], i] += row
        trials[qpos[q], i] += 1.0
    theta, _ = fit_rasch(passes, trials)
    out = {}
    for q in qids:
        n = len(pools_t[q])
        unanswered = [pools_t[q][i] for i in np.flatnonzero(trials[qpos[q], :n, 0] == 0)]
        if unanswered and n:
            warnings.warn(
                f"query {q!r}: no rubric answers for {len(unanswered)} document(s) {unanswered[:5]}; their "
                "preliminary ability is the prior 0", ScheduleWarning, stacklevel=2,
            )
        th = np.asarray(theta[qpos[q], :n], dtype=np.float64)
        th[trials[qpos[q], :n, 0] == 0] = 0.0
        out[q] = th
    return out

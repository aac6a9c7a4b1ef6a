"""Building blocks of every schedule phase: random streams, pool checks, windows, and the two ways to pick them.

A query's random stream is keyed by ``(seed, dataset, query_id, phase)`` through SHA-256
(:func:`query_rng`). Windows are picked either as the ``k`` least-shown documents
(:func:`_least_shown`: balanced phases) or as the contiguous block of ``k`` in a score order with the
lowest coverage (:func:`_lowest_coverage_blocks`: stratified phases), and named as described in
:mod:`rcp_jax.schedule`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from rcp_jax.errors import DataError
from rcp_jax.judging.store.records import Window
from rcp_jax.schedule.config import ScheduleWarning

#: Phase-name suffix of the mirrored copy of a round-1 or round-2 window.
REVERSED_SUFFIX = "_reversed"


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
def _orders(windows: Iterable[Window], docs: Sequence[str]) -> set[tuple[int, ...]]:
    """The document orders of ``windows`` as tuples of positions in ``docs`` (windows of other pools are skipped)."""
    index = {d: i for i, d in enumerate(docs)}
    out = set()
    for win in windows:
        idx = [index.get(d) for d in win.doc_ids]
        if None not in idx:
            out.add(tuple(idx))
    return out


#: Windows of at most this many documents draw a fresh order from the list of their unused orders.
_ENUMERATE_UP_TO = 7


def _fresh_order(
    rng: np.random.Generator, pick: np.ndarray, used: set[tuple[int, ...]], mirror: bool
) -> np.ndarray | None:
    """A random order of the documents ``pick`` that was not asked yet, and record it in ``used``.

    At temperature 0 a window asked again in the same order (same documents, same positions) returns
    the same answer: a paid duplicate that the fit then counts twice. The first draw is
    ``rng.permutation(pick)`` (so schedules without a repeat are unchanged); only a draw that repeats an
    order in ``used`` (or, with ``mirror``, whose reversed copy would) is drawn again. Small windows,
    whose orders can run out (2 documents have one order and its mirror), pick among the unused orders
    listed; ``None`` when none is left, and the caller asks one window fewer.
    """
    def taken(order: tuple[int, ...]) -> bool:
        return order in used or (mirror and order[::-1] in used)

    perm = rng.permutation(pick)
    if taken(tuple(int(i) for i in perm)):
        if len(pick) <= _ENUMERATE_UP_TO:
            free = [p for p in itertools.permutations(sorted(int(i) for i in pick)) if not taken(p)]
            if not free:
                return None
            perm = np.array(free[int(rng.integers(len(free)))], dtype=np.int64)
        else:  # >= 40320 orders, of which a phase uses a few hundred at most
            for _ in range(math.factorial(_ENUMERATE_UP_TO + 1)):
                perm = rng.permutation(pick)
                if not taken(tuple(int(i) for i in perm)):
                    break
            else:  # pragma: no cover - would need tens of thousands of windows of one set of documents
                return None
    order = tuple(int(i) for i in perm)
    used.add(order)
    if mirror:
        used.add(order[::-1])
    return perm


def _least_shown(
    rng: np.random.Generator, n: int, k: int, count: int, *, used: set[tuple[int, ...]] | None = None,
    mirror: bool = False,
) -> list[np.ndarray]:
    """Up to ``count`` windows, each the ``k`` documents shown least so far (random tie-break), shuffled.

    ``used`` (positions in the pool, updated in place) holds the orders already asked; a window gets an
    order not among them (:func:`_fresh_order`; with ``mirror`` neither its reverse), or is left out when
    its documents have no order left (tiny pools: its documents still count as shown). ``None``: the
    picks are not windows (an extension mixes them with anchors), any order goes.
    """
    shown = np.zeros(n, dtype=np.int64)
    out = []
    for _ in range(count):
        pick = np.lexsort((rng.random(n), shown))[:k]
        shown[pick] += 1
        order = rng.permutation(pick) if used is None else _fresh_order(rng, pick, used, mirror)
        if order is not None:
            out.append(order)
    return out


def _lowest_coverage_blocks(
    rng: np.random.Generator, order: np.ndarray, k: int, count: int, tie_replace: float, *,
    used: set[tuple[int, ...]] | None = None, mirror: bool = False,
) -> list[np.ndarray]:
    """Up to ``count`` windows, each the contiguous block of ``k`` in ``order`` with the lowest summed coverage.

    Coverage counts how often a document was used by this phase so far. Scanning blocks from the top,
    a block of equal (lowest) coverage replaces the incumbent with probability ``tie_replace``. Each
    window's documents come back shuffled, in an order not in ``used`` (as :func:`_least_shown`).
    """
    used = set() if used is None else used  # every caller's blocks are windows
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
        shuffled = _fresh_order(rng, order[best : best + k], used, mirror)
        if shuffled is not None:
            out.append(shuffled)
    return out


def _stratified_phase(
    query_id: str, docs: tuple[str, ...], scores, what: str, *, stage: str, phase: str, stream: str, count: int,
    window_size: int, tie_replace: float, seed: int, dataset: str, mirror: bool = False,
    earlier: Sequence[Window] = (),
) -> list[Window]:
    """The windows of a stratified phase (tournament round 2, the rubric's second half).

    ``count`` lowest-coverage contiguous blocks of ``window_size`` in the descending order of ``scores``
    (mapping or float[n] in pool order; ``what`` names them in errors), drawn from the random stream
    ``stream`` of the query, none repeating the order of a window of ``earlier`` (the phase before);
    none when ``count`` is 0.
    """
    order = _descending(_scores(query_id, docs, scores, what))  # checked even when the phase is empty
    if count == 0:
        return []
    rng = query_rng(seed, dataset, query_id, stream)
    picks = _lowest_coverage_blocks(rng, order, window_size, count, tie_replace, used=_orders(earlier, docs),
                                    mirror=mirror)
    return _windows(query_id, stage, phase, docs, picks, mirror=mirror)

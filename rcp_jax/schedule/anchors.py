"""Windows that extend a judged pool: new documents judged beside anchors already on the scale.

A new reranker surfaces documents nobody judged. Rather than re-judging the pool, each query's new
documents are judged in tournament windows that mix them with *anchors*, documents the calibration has
already scored, chosen spread across the query's score range (:func:`select_anchors`), so that the new
documents land on the existing Bradley-Terry scale; and in rubric windows of new documents only.

:func:`extension_tournament`: ``round(placements * n / m)`` windows for ``n`` new documents with
``m = min(new_per_window, n)`` new documents each (the ``m`` least shown so far, random tie-break) and up
to ``w - m`` anchors, one from each of ``w - m`` contiguous strata of the anchors in score order (the
least used of its stratum), so every window spans the range. Positions are shuffled; windows are not
mirrored (a judge's position bias then adds noise, not bias, to the new scores).

:func:`extension_rubric`: the new documents' rubric windows, ``max(ceil(n / k), round(p * n / k))``
windows of ``k = min(w, n)`` least-shown documents, as the rubric schedule counts them.

Both are pure functions of (seed, dataset, query, phase, documents): a killed extension asks the same
windows again and finds the answers it already has in the store. Neither asks one order of documents
twice (as :mod:`rcp_jax.schedule`): one or two new documents get 1 or 2 rubric windows, not 7, and the
tournament counts are an upper bound reached unless the anchors are very few (a new document beside a
single anchor has two orders). Counts at the defaults
(``new_per_window`` 5, ``placements`` 12, ``w`` 10): 30 new documents take 72 tournament and 20 rubric
windows, about 3 calls per new document, whatever the size of the pool; but a query adding few documents
pays at least 12 tournament windows (3 new documents: 12 + 6 windows, 6 calls each; 1: 13).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from rcp_jax.errors import DataError
from rcp_jax.judging.store.records import Window
from rcp_jax.schedule.config import DEFAULT_CONFIG, _as_fraction
from rcp_jax.schedule.windows import _fresh_order, _least_shown, _pool, query_rng


@dataclass(frozen=True)
class ExtensionConfig:
    """The constants of an extension's windows.

    Attributes:
        w: documents per window (the schedule's, 10).
        new_per_window: new documents per tournament window (the rest are anchors; default 5).
        placements: tournament windows per new document (default 12; the full schedule gives ~14.4).
        anchors: anchors per query, spread over its score range (default 30, or every scored document).
        rubric_placements: rubric windows per new document (the schedule's 20/3).
    """

    w: int = DEFAULT_CONFIG.w
    new_per_window: int = 5
    placements: Fraction = Fraction(12)
    anchors: int = 30
    rubric_placements: Fraction = DEFAULT_CONFIG.rubric_placements

    def __post_init__(self) -> None:
        for name in ("placements", "rubric_placements"):
            value = _as_fraction(getattr(self, name))
            if value <= 0:
                raise ValueError(f"ExtensionConfig.{name} = {value} must be > 0")
            object.__setattr__(self, name, value)
        if int(self.w) < 2:
            raise ValueError(f"ExtensionConfig.w = {self.w}: a window needs at least 2 documents")
        if not 1 <= int(self.new_per_window) < int(self.w):
            raise ValueError(f"ExtensionConfig.new_per_window = {self.new_per_window} must be in [1, w - 1] "
                             "(a tournament window needs at least one anchor)")
        if int(self.anchors) < 1:
            raise ValueError(f"ExtensionConfig.anchors = {self.anchors} must be >= 1")

    def to_dict(self) -> dict:
        """JSON-able form (fractions as ``"20/3"`` strings), recorded in the extension log."""
        return {k: str(v) if isinstance(v, Fraction) else v for k, v in self.__dict__.items()}


DEFAULT_EXTENSION = ExtensionConfig()


def select_anchors(query_id: str, scores: Mapping[str, float], n: int) -> tuple[str, ...]:
    """``n`` documents spread over the score range of ``scores`` (doc id -> BT score), highest first.

    The documents nearest the ``(i + 0.5) / n`` quantiles of the score order (ties by id), so the anchors
    cover the top, the middle and the bottom; every document when there are at most ``n``.

    Raises:
        DataError: no scored document (the query cannot be extended), or a score that is not finite.
    """
    if not scores:
        raise DataError(f"query {query_id!r}: no scored document to anchor new documents to")
    bad = [d for d, v in scores.items() if not math.isfinite(float(v))]
    if bad:
        raise DataError(f"query {query_id!r}: BT score of document {bad[0]!r} is not finite; refit the calibration")
    order = sorted(scores, key=lambda d: (-float(scores[d]), str(d)))
    if len(order) <= n:
        return tuple(order)
    picks = sorted({min(len(order) - 1, int((i + 0.5) * len(order) / n)) for i in range(n)})
    return tuple(order[i] for i in picks)


def extension_counts(n_new: int, config: ExtensionConfig = DEFAULT_EXTENSION) -> tuple[int, int]:
    """(tournament windows, rubric windows) of a query with ``n_new`` new documents.

    >>> extension_counts(30), extension_counts(1), extension_counts(0)
    ((72, 20), (12, 1), (0, 0))
    """
    if n_new <= 0:
        return 0, 0
    m = min(config.new_per_window, n_new)
    k = min(config.w, n_new)
    tournament = max(1, int(round(config.placements * n_new / m)))
    rubric = max(math.ceil(n_new / k), int(round(config.rubric_placements * n_new / k)))
    if n_new <= config.w:  # every rubric window shows all the new documents: n_new! orders, none asked twice
        rubric = min(rubric, math.factorial(n_new))
    return tournament, rubric


def extension_tournament(
    query_id: str, new_docs: Sequence[str], anchors: Sequence[str], *, phase: str, seed: int, dataset: str = "",
    config: ExtensionConfig = DEFAULT_EXTENSION,
) -> list[Window]:
    """Tournament windows mixing ``new_docs`` with ``anchors`` (given highest score first); see the module doc.

    Raises:
        DataError: a document listed twice, a new document that is also an anchor, or no anchor.
    """
    new = _pool(query_id, new_docs)
    anc = _pool(query_id, anchors)
    if not new:
        return []
    if not anc:
        raise DataError(f"query {query_id!r}: no anchor documents; new documents need scored ones beside them")
    both = set(new) & set(anc)
    if both:
        raise DataError(f"query {query_id!r}: document {sorted(both)[0]!r} is both new and an anchor")
    count, _ = extension_counts(len(new), config)
    m = min(config.new_per_window, len(new))
    a = min(config.w - m, len(anc))
    rng = query_rng(seed, dataset, query_id, f"{phase}:tournament")
    new_picks = _least_shown(rng, len(new), m, count)
    strata = np.array_split(np.arange(len(anc)), a)
    used = np.zeros(len(anc), dtype=np.int64)
    orders: set[tuple[int, ...]] = set()  # positions in new + anc of the windows so far
    out = []
    for pick in new_picks:
        chosen = []
        for stratum in strata:
            j = stratum[np.lexsort((rng.random(len(stratum)), used[stratum]))[0]]
            used[j] += 1
            chosen.append(len(new) + int(j))
        shuffled = _fresh_order(rng, np.array([int(j) for j in pick] + chosen), orders, False)
        if shuffled is None:  # every order of these documents was asked (a new document and one anchor)
            continue
        ids = tuple((new + anc)[j] for j in shuffled)
        out.append(Window(query_id=query_id, stage="tournament", phase=phase, sequence=len(out), doc_ids=ids))
    return out


def extension_rubric(
    query_id: str, new_docs: Sequence[str], *, phase: str, seed: int, dataset: str = "",
    config: ExtensionConfig = DEFAULT_EXTENSION,
) -> list[Window]:
    """Rubric windows of the new documents only (balanced: each window the least-shown ones, shuffled)."""
    new = _pool(query_id, new_docs)
    if not new:
        return []
    _, count = extension_counts(len(new), config)
    rng = query_rng(seed, dataset, query_id, f"{phase}:rubric")
    picks = _least_shown(rng, len(new), min(config.w, len(new)), count, used=set())
    return [Window(query_id=query_id, stage="rubric", phase=phase, sequence=i, doc_ids=tuple(new[j] for j in p))
            for i, p in enumerate(picks)]

"""Gains and float-gain nDCG with defined tie rules and named scoring protocols (METHOD section 4).

Everything here is plain NumPy in float64: the metric core must reproduce published per-query values
to 1e-10, which float32 JAX cannot. The vectorised kernel :func:`ndcg_flat` scores many
(system, query) groups in one pass; :func:`score_query` and :func:`evaluate` are thin front ends.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rcp_jax.data.qrel_grades import clip_negative_grades
from rcp_jax.data.table_checks import show
from rcp_jax.errors import DataError

TIE_RULES = ("group_mean", "doc_id_desc", "input_order")


@dataclass(frozen=True)
class Protocol:
    """A named bundle of scoring rules, recorded with every number it produces.

    Attributes:
        name: protocol name.
        ties: how tied system scores are ordered: ``group_mean`` (expected nDCG over tie orders),
            ``doc_id_desc`` (trec_eval: higher doc id string first) or ``input_order``.
        pool_only: rank only documents of the judged pool (others are dropped from the ranking); when
            False every scored document is ranked and documents outside the pool have gain 0.
        qrel_decimals: round qrel-nDCG to this many decimals (None: no rounding).
    """

    name: str
    ties: str
    pool_only: bool
    qrel_decimals: int | None = None


PROTOCOLS: dict[str, Protocol] = {
    "plain": Protocol("plain", "group_mean", pool_only=False),
    "nanobeir": Protocol("nanobeir", "doc_id_desc", pool_only=True, qrel_decimals=5),
    "bright": Protocol("bright", "doc_id_desc", pool_only=False, qrel_decimals=5),
    "trecdl": Protocol("trecdl", "input_order", pool_only=True),
    "vidore": Protocol("vidore", "group_mean", pool_only=True),
    "mteb": Protocol("mteb", "group_mean", pool_only=True),
    # trec_eval / pytrec_eval's ndcg_cut: score descending, then docno descending (trec_eval compares docnos
    # with strcmp, i.e. by UTF-8 bytes, which orders like Python's code-point comparison of str), every
    # ranked document counts (no pool restriction; unjudged = grade 0), no rounding. Negative grades count 0
    # there as here; a query whose qrels hold no positive grade has no qrel-nDCG here (NaN) where trec_eval
    # prints 0, and a query without qrels is left out by both
    "trec_eval": Protocol("trec_eval", "doc_id_desc", pool_only=False),
}


def get_protocol(protocol: str | Protocol) -> Protocol:
    """Return the :class:`Protocol` named ``protocol`` (or ``protocol`` itself)."""
    if isinstance(protocol, Protocol):
        return protocol
    try:
        return PROTOCOLS[protocol]
    except KeyError:
        raise DataError(
            f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}"
        ) from None


def gain(theta, gamma, beta) -> np.ndarray:
    """RCP gain of calibrated abilities: ``g(t) = sum_c gamma_c sigmoid(gamma_c (t - beta_c)) / sum_c gamma_c``.

    Args:
        theta: calibrated abilities, any shape ``S``.
        gamma: criterion discriminations, float[C], positive.
        beta: criterion difficulties, float[C].

    Returns:
        float64 array of shape ``S`` with values in (0, 1).

    Example:
        >>> round(float(gain(0.0, [1.0, 1.0], [-1.0, 1.0])), 6)
        0.5
    """
    theta = np.asarray(theta, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if gamma.ndim != 1 or gamma.shape != beta.shape:
        raise DataError(f"gamma and beta must be 1-D of equal length, got {gamma.shape} and {beta.shape}")
    if np.any(gamma <= 0):
        raise DataError(f"gamma must be positive, got {gamma.tolist()}")
    return _gain_blocks(theta, gamma, beta)


#: Abilities per block of :func:`_gain_blocks`: the block's temporaries (a few float64[rows]) stay in cache.
_GAIN_ROWS = 16384


def _gain_blocks(theta: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """:func:`gain` of checked float64 arrays (``theta`` any shape, ``gamma``, ``beta`` float[C]), in blocks of
    :data:`_GAIN_ROWS` abilities.

    Same bits as ``(gamma * _sigmoid(gamma * (theta[..., None] - beta))).sum(-1) / gamma.sum()``: the same
    element-wise operations, and with fewer than 8 criteria numpy's sum over the last axis adds them one
    after another, as the loop over criteria does (more criteria: the block is summed by numpy itself).
    Each block's temporaries stay in cache (the float64[n, C] arrays of the one-shot form cost ~5x more at
    a million abilities).
    """
    flat = theta.reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    norm = gamma.sum()
    for a in range(0, len(flat), _GAIN_ROWS):
        th = flat[a : a + _GAIN_ROWS]
        if len(gamma) >= 8:
            acc = (gamma * _sigmoid(gamma * (th[:, None] - beta))).sum(-1)
        else:
            acc = None
            for g, b in zip(gamma.tolist(), beta.tolist()):
                s = _sigmoid(g * (th - b))
                s *= g
                acc = s if acc is None else np.add(acc, s, out=acc)
            if acc is None:
                acc = np.zeros(len(th))
        np.divide(acc, norm, out=out[a : a + len(th)])
    return out.reshape(theta.shape) if theta.ndim else out[0]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """Logistic function of float64 ``z`` (any shape), stable and branch-free: ``1 / (1 + exp(-z))`` where
    ``z >= 0``, ``exp(z) / (1 + exp(z))`` elsewhere (both from ``e = exp(-|z|)``), bit for bit."""
    e = np.exp(-np.abs(z))
    out = np.where(z >= 0, 1.0, e)
    out /= 1.0 + e
    return out


def discounts(k: int) -> np.ndarray:
    """Position discounts ``1 / log2(r + 1)`` for ranks r = 1..k, float64[k]."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def _group_order(group: np.ndarray, score: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """``np.lexsort((secondary, -score, group))``, fast when the groups are blocks of similar size.

    A run file scores every pool document of every (system, query) list, so the rows form groups of
    (nearly) equal size: sorting each group as a row of a 2-D array (two stable passes: ``secondary``,
    then ``-score``) is several times faster than one global three-key lexsort of millions of rows, and
    gives the identical permutation (stable sorts; remaining ties keep row order). Other layouts fall
    back to ``np.lexsort``.
    """
    n = len(group)
    if n == 0:
        return np.zeros(0, np.int64)
    perm = None
    if np.any(group[1:] < group[:-1]):
        perm = np.argsort(group, kind="stable")
        group, score, secondary = group[perm], score[perm], secondary[perm]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, n])
    width = int(sizes.max())
    if len(starts) * width > 2 * n:  # very ragged: padding would cost more than it saves
        order = np.lexsort((secondary, -score, group))
        return order if perm is None else perm[order]
    col = np.arange(n) - np.repeat(starts, sizes)
    neg = np.full((len(starts), width), np.inf)  # padding sorts last
    neg[np.repeat(np.arange(len(starts)), sizes), col] = -score
    sec = np.zeros((len(starts), width), dtype=secondary.dtype)
    sec[np.repeat(np.arange(len(starts)), sizes), col] = secondary
    first = np.argsort(sec, axis=1, kind="stable")
    idx = np.take_along_axis(first, np.argsort(np.take_along_axis(neg, first, axis=1), axis=1, kind="stable"), axis=1)
    # padding cells sort after every real row of their group (score +inf, then by column, after real ties)
    keep = idx < sizes[:, None]
    order = (starts[:, None] + idx)[keep]
    return order if perm is None else perm[order]


def _without_subnormals(gains: np.ndarray) -> np.ndarray:
    """``gains`` float64[n] with subnormal values (0 < |g| < ~2.2e-308) set to 0 (a copy only when there are any)."""
    tiny = np.abs(gains) < np.finfo(np.float64).tiny
    return np.where(tiny, 0.0, gains) if tiny.any() else gains


def ndcg_flat(
    group: np.ndarray,
    score: np.ndarray,
    gain_: np.ndarray,
    tie_key: np.ndarray,
    ideal_group: np.ndarray,
    ideal_gain: np.ndarray,
    n_groups: int,
    *,
    k: int,
    ties: str,
    ideal_of_group: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """nDCG@k of many ranked lists at once.

    Args:
        group: int[R], the list (e.g. system x query) each ranked row belongs to, in ``[0, n_groups)``.
        score: float[R], system score (higher ranks first).
        gain_: float[R], gain of the row's document.
        tie_key: int[R], order among equal scores for ``doc_id_desc`` / ``input_order`` (ascending).
        ideal_group: int[I], the ideal list each ideal gain belongs to.
        ideal_gain: float[I], gains forming the ideal lists (any order).
        n_groups: number of ranked lists.
        k: cut-off.
        ties: one of ``group_mean``, ``doc_id_desc``, ``input_order``.
        ideal_of_group: int[n_groups], which ideal list each ranked list uses (default: the same index).

    Returns:
        (ndcg float64[n_groups], idcg float64[n_ideal]); nDCG is 0 where IDCG is 0.

    Gains below the smallest normal float64 (~2.2e-308, i.e. subnormal ones) count as 0: the sums of DCG
    cannot resolve them (the mean of a tie of 0 and 5e-324 rounds to 0, while an order putting 5e-324 first
    scores 1), so such a gain would make nDCG depend on how the arithmetic underflows.
    """
    if ties not in TIE_RULES:
        raise DataError(f"unknown tie rule {ties!r}; choose one of {', '.join(TIE_RULES)}")
    if k < 1:
        raise DataError(f"k must be >= 1, got {k}")
    group = np.asarray(group, dtype=np.int64)
    score = np.asarray(score, dtype=np.float64)
    gain_ = _without_subnormals(np.asarray(gain_, dtype=np.float64))
    tie_key = np.asarray(tie_key, dtype=np.int64)
    disc = discounts(k)

    # group_mean replaces each tie's gains by their mean, whatever their order; ordering a tie by gain
    # makes that mean's floating-point sum independent of row order and of doc ids (bit for bit).
    order = _group_order(group, score, gain_ if ties == "group_mean" else tie_key)
    g_sorted = group[order]
    s_sorted = score[order]
    gain_sorted = gain_[order]
    n = len(order)
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if n else np.zeros(0, np.int64)
    run_len = np.diff(np.r_[starts, n])
    rank = np.arange(n) - np.repeat(starts, run_len)
    if ties == "group_mean" and n:
        new_tie = np.r_[True, (g_sorted[1:] != g_sorted[:-1]) | (s_sorted[1:] != s_sorted[:-1])]
        tie_id = np.cumsum(new_tie) - 1
        tie_sum = np.bincount(tie_id, weights=gain_sorted)
        tie_cnt = np.bincount(tie_id)
        # a tie is ordered by gain, so its first and last rows hold its extremes; the rounded mean is kept
        # inside them, so a tie of equal gains keeps that very gain (3 x g / 3 can miss g by an ulp, and
        # nDCG then came out as 1.0000000000000002)
        first = np.flatnonzero(new_tie)
        last = np.r_[first[1:], n] - 1
        lo, hi = np.minimum(gain_sorted[first], gain_sorted[last]), np.maximum(gain_sorted[first], gain_sorted[last])
        gain_sorted = np.clip(tie_sum / tie_cnt, lo, hi)[tie_id]
    row_disc = np.where(rank < k, disc[np.minimum(rank, k - 1)], 0.0)
    dcg = np.bincount(g_sorted, weights=gain_sorted * row_disc, minlength=n_groups)

    ideal_group = np.asarray(ideal_group, dtype=np.int64)
    ideal_gain = _without_subnormals(np.asarray(ideal_gain, dtype=np.float64))
    n_ideal = int(ideal_group.max()) + 1 if ideal_group.size else 0
    if ideal_of_group is None:
        n_ideal = max(n_ideal, n_groups)
    else:
        ideal_of_group = np.asarray(ideal_of_group, dtype=np.int64)
        n_ideal = max(n_ideal, int(ideal_of_group.max()) + 1 if ideal_of_group.size else 0)
    iorder = _group_order(ideal_group, ideal_gain, np.zeros(len(ideal_gain), np.int64))
    ig = ideal_group[iorder]
    igain = ideal_gain[iorder]
    m = len(iorder)
    istarts = np.flatnonzero(np.r_[True, ig[1:] != ig[:-1]]) if m else np.zeros(0, np.int64)
    irank = np.arange(m) - np.repeat(istarts, np.diff(np.r_[istarts, m]))
    idisc = np.where(irank < k, disc[np.minimum(irank, k - 1)], 0.0)
    idcg = np.bincount(ig, weights=igain * idisc, minlength=n_ideal)
    idcg_of_group = idcg[ideal_of_group] if ideal_of_group is not None else idcg[:n_groups]
    with np.errstate(invalid="ignore", divide="ignore"):
        ndcg = np.where(idcg_of_group > 0, dcg / np.where(idcg_of_group > 0, idcg_of_group, 1.0), 0.0)
    return ndcg, idcg


@dataclass(frozen=True)
class QueryScore:
    """Per-query scores of one system under one protocol.

    Attributes:
        rcp_ndcg: nDCG@k with the given (float) gains; ideal = the pool's gains sorted.
        qrel_ndcg: nDCG@k with qrel grades; NaN when qrels were not given or have no positive.
        k: cut-off.
        protocol: the :class:`Protocol` applied.
    """

    rcp_ndcg: float
    qrel_ndcg: float
    k: int
    protocol: Protocol


def _check_scores(scores: Mapping[str, float], what: str) -> None:
    for doc_id, value in scores.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise DataError(f"{what} of document {show(doc_id)} is not a number: {show(value)}") from None
        if not math.isfinite(v):
            raise DataError(f"{what} of document {doc_id!r} is {v}; give finite numbers (drop or fix the row)")


def _tie_keys(doc_ids: Sequence[str], ties: str, order_hint: Sequence[str] | None) -> np.ndarray:
    if ties == "doc_id_desc":
        ranks = {d: i for i, d in enumerate(sorted(doc_ids, reverse=True))}
        return np.array([ranks[d] for d in doc_ids], dtype=np.int64)
    if ties == "input_order" and order_hint is not None:
        pos = {d: i for i, d in enumerate(order_hint)}
        base = len(pos)
        return np.array([pos.get(d, base + i) for i, d in enumerate(doc_ids)], dtype=np.int64)
    return np.arange(len(doc_ids), dtype=np.int64)


def score_query(
    scores: Mapping[str, float],
    gains: Mapping[str, float],
    *,
    k: int = 10,
    protocol: str | Protocol = "plain",
    qrels: Mapping[str, float] | None = None,
    pool: Sequence[str] | None = None,
    excluded: Iterable[str] = (),
    exponential_qrels: bool = False,
) -> QueryScore:
    """Score one system on one query with RCP gains (and qrels if given).

    Args:
        scores: doc_id -> system score (higher is better); finite numbers.
        gains: doc_id -> calibrated gain of every document of the judged pool; the RCP ideal list is all
            of them sorted (minus ``excluded``). A ranked document without a gain has gain 0.
        k: cut-off of nDCG@k.
        protocol: ``plain``, ``nanobeir``, ``bright``, ``trecdl``, ``vidore``, ``mteb`` or ``trec_eval`` (see
            :data:`PROTOCOLS`).
        qrels: doc_id -> graded label. The qrel ideal is over every positive qrel of the query,
            including positives the system did not rank (trec_eval convention). Negative grades count
            as 0 (non-relevant, as trec_eval; a :class:`~rcp_jax.data.qrel_grades.QrelsWarning` says so).
        pool: the judged candidates in pool order. Protocols with ``pool_only`` rank only these
            (default: the documents that have gains); ``input_order`` ties follow this order.
        excluded: ids removed from the ranking and from every ideal (e.g. the query's own document).
        exponential_qrels: use ``2**grade - 1`` instead of the grade as qrel gain.

    Returns:
        :class:`QueryScore` with ``rcp_ndcg`` and ``qrel_ndcg`` (NaN without a positive qrel).

    Example:
        >>> s = score_query({"a": 2.0, "b": 1.0}, {"a": 0.2, "b": 0.9}, k=2)
        >>> round(s.rcp_ndcg, 4)
        0.7482
    """
    proto = get_protocol(protocol)
    _check_scores(scores, "score")
    _check_scores(gains, "gain")
    excluded = set(excluded)
    if pool is not None and len(set(pool)) != len(pool):
        dup = next(d for d in pool if list(pool).count(d) > 1)
        raise DataError(f"document {dup!r} appears twice in the pool; list each pool document once")
    allowed = set(pool) if pool is not None else set(gains)
    ranked = [d for d in scores if d not in excluded and (not proto.pool_only or d in allowed)]
    ranked_scores = np.array([float(scores[d]) for d in ranked], dtype=np.float64)
    tie_key = _tie_keys(ranked, proto.ties, pool if pool is not None else list(scores))
    group = np.zeros(len(ranked), dtype=np.int64)

    def _one(gain_of: Mapping[str, float], ideal: list[float]) -> float:
        g = np.array([float(gain_of.get(d, 0.0)) for d in ranked], dtype=np.float64)
        ndcg, _ = ndcg_flat(
            group, ranked_scores, g, tie_key, np.zeros(len(ideal), np.int64), np.array(ideal, np.float64), 1,
            k=k, ties=proto.ties,
        )
        return float(ndcg[0])

    ideal_pool = [float(v) for d, v in gains.items() if d not in excluded]
    rcp = _one(gains, ideal_pool)
    qrel_value = math.nan
    if qrels is not None:
        _check_scores(qrels, "qrel grade")
        raw = clip_negative_grades(np.array([float(v) for v in qrels.values()], dtype=np.float64), "qrels")
        grade = {d: (2.0**v - 1.0 if exponential_qrels else float(v)) for d, v in zip(qrels, raw)}
        positives = [v for d, v in grade.items() if d not in excluded and v > 0]
        if positives:
            qrel_value = _one(grade, positives)
            if proto.qrel_decimals is not None:
                qrel_value = round(qrel_value, proto.qrel_decimals)
    return QueryScore(rcp_ndcg=rcp, qrel_ndcg=qrel_value, k=k, protocol=proto)

"""Which windows a budgeted round asks: the expected shrinkage of the open system-pair decisions, per call.

**The criterion.** Let ``delta_p`` be pair p's difference of mean RCP-nDCG@k over the queries and
``c_p[q, d] = d delta_p / d gain_{q,d}`` its sensitivity to each gain (:func:`rcp_jax.budget.decisions.pair_gradients`:
the two systems' discount weights on the document, minus the pair's per-query difference times the
document's weight in the ideal list, over the query's IDCG and the number of queries). Each pair gets a
weight ``w_p = pi_p / var_p``: ``var_p`` is the current posterior variance of its (combined) difference, so
what counts is the *relative* shrinkage that moves its decision probability, and ``pi_p`` is 1 for an open
pair (undecided, but decidable with the gains known), :data:`OUT_OF_REACH_WEIGHT` for an undecided pair
that query sampling alone keeps undecided, 0 for a decided one. Then, with ``s_d`` the gain's slope in
ability, ``tau_q`` the query's scale, ``se_d`` the BT standard error and ``n_d`` the tournament placements:

* one more tournament placement of document d is worth ``v_d = sum_p w_p c_p[q, d]^2 * s_d^2 tau_q^2 se_d^2 /
  (n_d + 1)`` (the share of the document's BT variance one more placement removes, ``se^2 ~ 1 / n``);
* one more rubric window of query q is worth ``sum_p w_p u_pq' Sigma_q u_pq / (m_q + 1)``, with
  ``u_pq = sum_d c_p[q, d] s_d (theta_d, 1)``, ``Sigma_q`` the covariance of the query's ``(tau, alpha)`` and
  ``m_q`` its rubric windows so far (the rubric pins each query's scale and shift).

A tournament window of query q holds the ``w - explore`` documents of highest ``v_d`` (so the documents
that decide pairs are compared with each other) plus ``explore`` of the query's least-shown documents
(random tie-break): the exploration floor, so that no document starves and the comparison graph stays
connected. Rounds are filled greedily across all queries by value per call; after each pick the chosen
documents' variances shrink by ``n / (n + 1)`` (and the query's rubric term by ``m / (m + 1)``), so the
next window of a query goes elsewhere. Rubric windows are the fixed protocol's balanced rubric windows in
their order, so a later run of the full protocol finds them in the store.

The windows come out in pick order with sequence numbers in that order, so a round cut short by the
budget is a prefix of the same round with more budget: a run continued with a larger ``--budget`` finds
every window asked before in the store.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rcp_jax.budget.decisions import SETTLED, PairDecisions
from rcp_jax.budget.gains import GainPosterior
from rcp_jax.judging.store.records import Window
from rcp_jax.schedule.windows import query_rng

#: Weight of an undecided pair that query sampling alone keeps undecided (more judging cannot decide it).
OUT_OF_REACH_WEIGHT = 0.1


def pair_weights(decisions: PairDecisions) -> np.ndarray:
    """``w_p = pi_p / var_p`` of every pair (module docstring): float64[P]."""
    pairs = decisions.pairs
    settled = pairs["call"].isin(SETTLED).to_numpy()
    reach = pairs["reachable"].to_numpy(dtype=bool)
    pi = np.where(settled, 0.0, np.where(reach, 1.0, OUT_OF_REACH_WEIGHT))
    var = pairs["var"].to_numpy(dtype=np.float64)
    return np.where(pi > 0, pi / np.maximum(var, 1e-12), 0.0)


def document_values(post: GainPosterior, grads: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sensitivity ``sum_p w_p c_p^2 s^2 tau^2`` float64[Q, N], rubric values float64[Q] before the
    ``1 / (m_q + 1)`` factor) for pair gradients ``grads`` float[P, Q, N] and pair weights float[P]."""
    s_tau = post.slope * post.tau[:, None]
    sens = np.einsum("p,pqn->qn", weights, grads**2) * s_tau**2
    u_t = np.einsum("pqn,qn->pq", grads, post.slope * post.theta)
    u_a = np.einsum("pqn,qn->pq", grads, post.slope)
    quad = (post.cov[None, :, 0, 0] * u_t**2 + 2 * post.cov[None, :, 0, 1] * u_t * u_a
            + post.cov[None, :, 1, 1] * u_a**2)
    return np.where(post.mask, sens, 0.0), weights @ quad


@dataclass
class _QueryState:
    """One query's greedy state: variances and placements as the round's picks accumulate."""

    q: int
    n: int
    var: np.ndarray  # sensitivity x se^2 (value numerator) per document
    placements: np.ndarray
    rubric_value: float
    rubric_done: int
    rubric_next: list = field(default_factory=list)
    sequence: int = 0
    rng: np.random.Generator | None = None


def plan_round(
    post: GainPosterior,
    sensitivity: np.ndarray,
    rubric_values: np.ndarray,
    placements: np.ndarray,
    rubric_done: Mapping[str, int],
    rubric_next: Mapping[str, Sequence[Window]],
    *,
    max_windows: int,
    window_size: int,
    explore: int,
    phase: str,
    seed: int,
    dataset: str,
    strategy: str = "posterior",
    rubric_share: float = 100 / 316,
) -> list[Window]:
    """The round's windows, best first (module docstring), at most ``max_windows``.

    Args:
        post: the current gain posterior (its ``se``, ``mask`` and ``doc_ids`` are used).
        sensitivity, rubric_values: from :func:`document_values`.
        placements: float[Q, N] valid tournament placements of each document so far.
        rubric_done: query -> valid rubric windows so far. rubric_next: query -> its rubric windows not asked
            yet, in the order to ask them.
        window_size: documents per window (the schedule's ``w``). explore: least-shown slots per window.
        phase: the windows' phase name (e.g. ``budget_r003``). seed, dataset: key the random streams.
        strategy: ``posterior`` (the criterion) or ``random`` (balanced windows of least-shown documents,
            queries in turn, a ``rubric_share`` of calls on rubric windows): the baseline.

    Returns:
        Windows in pick order; tournament ones numbered per query in pick order.
    """
    states = []
    for i, q in enumerate(post.query_ids):
        n = int(post.mask[i].sum())
        rng = query_rng(seed, dataset, q, phase)
        states.append(_QueryState(
            q=i, n=n, var=sensitivity[i, :n] * post.se[i, :n] ** 2, placements=placements[i, :n].astype(np.float64).copy(),
            rubric_value=float(rubric_values[i]), rubric_done=int(rubric_done.get(q, 0)),
            rubric_next=list(rubric_next.get(q, ())), rng=rng))
    if strategy == "random":
        return _plan_random(post, states, max_windows, window_size, phase, rubric_share)
    heap: list[tuple[float, int, int, str]] = []
    tick = 0

    def push(st: _QueryState) -> None:
        nonlocal tick
        v, _ = _tournament_candidate(st, window_size, explore, peek=True)
        if v > 0:
            heap.append((-v, tick, st.q, "tournament"))
            tick += 1
        if st.rubric_next and st.rubric_value > 0:
            heap.append((-st.rubric_value / (st.rubric_done + 1), tick, st.q, "rubric"))
            tick += 1

    for st in states:
        push(st)
    heapq.heapify(heap)
    out: list[Window] = []
    while heap and len(out) < max_windows:
        _, _, qi, kind = heapq.heappop(heap)
        st = states[qi]
        q = post.query_ids[qi]
        if kind == "rubric":
            out.append(st.rubric_next.pop(0))
            st.rubric_value *= (st.rubric_done + 1) / (st.rubric_done + 2)
            st.rubric_done += 1
            if st.rubric_next and st.rubric_value > 0:
                heapq.heappush(heap, (-st.rubric_value / (st.rubric_done + 1), tick, qi, "rubric"))
                tick += 1
            continue
        _, idx = _tournament_candidate(st, window_size, explore, peek=False)
        out.append(Window(query_id=q, stage="tournament", phase=phase, sequence=st.sequence,
                          doc_ids=tuple(post.doc_ids[qi, j] for j in idx)))
        st.sequence += 1
        v, _ = _tournament_candidate(st, window_size, explore, peek=True)
        if v > 0:
            heapq.heappush(heap, (-v, tick, qi, "tournament"))
            tick += 1
    return out


def _tournament_candidate(st: _QueryState, w: int, explore: int, *, peek: bool) -> tuple[float, np.ndarray]:
    """(value, document positions in shown order) of the query's next tournament window; unless ``peek``,
    the pick is applied (placements and variances updated, the random stream advanced)."""
    k = min(w, st.n)
    if k < 2:
        return 0.0, np.zeros(0, dtype=np.int64)
    marginal = st.var / (st.placements + 1.0)
    n_top = max(min(k - explore, k), 1) if st.n > k else k
    top = np.argpartition(-marginal, n_top - 1)[:n_top] if n_top < st.n else np.arange(st.n)
    top = top[np.argsort(-marginal[top], kind="stable")]
    value = float(marginal[top].sum())
    if peek:
        return value, top
    rest = np.setdiff1d(np.arange(st.n), top)
    tie = st.rng.random(len(rest))
    low = rest[np.lexsort((tie, st.placements[rest]))][: k - n_top]
    idx = np.concatenate([top, low]).astype(np.int64)
    value += float(marginal[low].sum())
    shown = st.placements[idx]
    st.var[idx] *= np.maximum(shown, 1.0) / (np.maximum(shown, 1.0) + 1.0)
    st.placements[idx] += 1.0
    return value, st.rng.permutation(idx)


def _plan_random(post, states, max_windows, w, phase, rubric_share) -> list[Window]:
    """The random-windows baseline: least-shown documents, queries in turn, rubric at ``rubric_share``."""
    out: list[Window] = []
    rubric_calls = 0.0
    turn = 0
    live = [st for st in states if st.n >= 2]
    while live and len(out) < max_windows:
        st = live[turn % len(live)]
        turn += 1
        if st.rubric_next and rubric_calls < rubric_share * (len(out) + 1):
            out.append(st.rubric_next.pop(0))
            rubric_calls += 1
            continue
        k = min(w, st.n)
        tie = st.rng.random(st.n)
        idx = np.lexsort((tie, st.placements))[:k]
        st.placements[idx] += 1.0
        q = post.query_ids[st.q]
        out.append(Window(query_id=q, stage="tournament", phase=phase, sequence=st.sequence,
                          doc_ids=tuple(post.doc_ids[st.q, j] for j in st.rng.permutation(idx))))
        st.sequence += 1
    return out

"""System-pair decisions under the fast gain posterior, and each pair's sensitivity to each gain.

The runs' rankings never change while judging goes on, so every (system, query) list is reduced once to
discount weights ``W[s, q, n]`` (:func:`rcp_jax.bayes.posterior_ndcg.discount_weights`, tie rules
included); the ideal list is the query's pool in the current Bradley-Terry order (the Stage A ideal of
:mod:`rcp_jax.bayes.posterior_ndcg`), so each round only multiplies arrays:
``nDCG[d, s, q] = W[s, q] . G[d, q] / w_I[q] . G[d, q]``.

Decisions follow :func:`rcp_jax.bayes.posterior_ndcg.decide` on the **combined** draws of each pair's
difference of mean RCP-nDCG (each bootstrap replicate of the queries takes one random posterior draw), as
``rcp-jax evaluate --posterior`` does. A pair also gets ``reachable``: whether the rule decides it on the
query-sampling draws alone (gains taken as known). An undecided pair that is not reachable cannot be
decided by judging more, because judging shrinks only the calibration part of the uncertainty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rcp_jax.bayes.posterior_ndcg import DEFAULT_DECISION_PROB, DEFAULT_ROPE, decide, discount_weights
from rcp_jax.budget.gains import GainPosterior
from rcp_jax.metrics import discounts, get_protocol

#: The calls of :func:`rcp_jax.bayes.posterior_ndcg.decide` that settle a pair.
SETTLED = ("A>B", "B>A", "equivalent")


@dataclass
class RunWeights:
    """Discount weights of every system's list: ``weights`` float64[S, Q, N] in the padded pool layout
    (queries ``query_ids``, documents in pool order), ``systems`` S names (sorted)."""

    systems: list[str]
    query_ids: list[str]
    weights: np.ndarray


def run_weights(run: pd.DataFrame, pools: Mapping[str, Sequence[str]], query_ids: Sequence[str], *, k: int = 10,
                protocol: str = "plain") -> RunWeights:
    """:class:`RunWeights` of a validated run (``system, query_id, doc_id, score``) over ``query_ids``.

    Documents a system ranks outside the pool take their rank positions but carry no gain (gain 0), as in
    :func:`rcp_jax.posterior_metrics`.
    """
    query_ids = [str(q) for q in query_ids]
    qpos = {q: i for i, q in enumerate(query_ids)}
    n = max(len(pools[q]) for q in query_ids)
    doc_index = {(q, d): j for q in query_ids for j, d in enumerate(pools[q])}
    pool_table = pd.DataFrame([(q, d) for q in query_ids for d in pools[q]], columns=["query_id", "doc_id"])
    sub = run.loc[run["query_id"].isin(qpos)]
    w, systems, queries = discount_weights(sub, doc_index, qpos, n, k=k, protocol=get_protocol(protocol),
                                           pools=pool_table, excluded=set())
    out = np.zeros((len(systems), len(query_ids), n))
    out[:, [qpos[q] for q in queries]] = w
    return RunWeights(systems=list(systems), query_ids=query_ids, weights=out)


def ideal_weights(post: GainPosterior, k: int) -> np.ndarray:
    """float64[Q, N]: the discount of each document in its query's ideal list (the pool in BT order, ties by
    pool position), 0 below rank k and on padding."""
    score = np.where(post.mask, post.theta, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")
    kk = min(k, score.shape[1])
    out = np.zeros(score.shape)
    rows = np.arange(score.shape[0])[:, None]
    out[rows, order[:, :kk]] = discounts(k)[:kk]
    return np.where(post.mask, out, 0.0)


@dataclass
class PairDecisions:
    """One round's decisions.

    Attributes:
        systems: ``system, mean, lo, hi`` (combined ``ci_prob`` interval), best first.
        pairs: ``system_a, system_b, delta, lo, hi, p_a_practically_better, p_b_practically_better, p_rope,
            call, reachable, var`` (``var``: variance of the combined difference draws).
        pair_index: int[P, 2] system positions (in ``weights.systems``) of each pair.
    """

    systems: pd.DataFrame
    pairs: pd.DataFrame
    pair_index: np.ndarray

    @property
    def n_decided(self) -> int:
        return int(self.pairs["call"].isin(SETTLED).sum())

    @property
    def n_open(self) -> int:
        """Undecided pairs that judging can still decide (``reachable``)."""
        return int(((~self.pairs["call"].isin(SETTLED)) & self.pairs["reachable"]).sum())

    @property
    def out_of_reach(self) -> pd.DataFrame:
        """The undecided pairs judging cannot decide (not ``reachable``: the queries alone leave them
        undecided), rows of :attr:`pairs`."""
        return self.pairs.loc[(~self.pairs["call"].isin(SETTLED)) & ~self.pairs["reachable"]]

    @property
    def n_out_of_reach(self) -> int:
        """How many pairs :attr:`out_of_reach` holds; with :attr:`n_decided` and :attr:`n_open` it counts every pair."""
        return len(self.out_of_reach)


def decide_pairs(weights: RunWeights, post: GainPosterior, *, k: int = 10, rope: float = DEFAULT_ROPE,
                 decision_prob: float = DEFAULT_DECISION_PROB, ci_prob: float = 0.9, n_bootstrap: int = 1000,
                 seed: int = 0) -> PairDecisions:
    """Every system pair's call (module docstring) under the draws of ``post``."""
    w_ideal = ideal_weights(post, k)
    g = post.draws.astype(np.float64)
    idcg = np.einsum("qn,dqn->dq", w_ideal, g)
    dcg = np.einsum("sqn,dqn->dsq", weights.weights, g)
    ndcg = np.where(idcg[:, None] > 0, dcg / np.where(idcg > 0, idcg, 1.0)[:, None], 0.0)  # [D, S, Q]
    n_q = ndcg.shape[2]
    rng = np.random.default_rng([int(seed), 0xDEC1DE])
    picks = rng.integers(0, n_q, size=(n_bootstrap, n_q))
    boot_w = np.zeros((n_bootstrap, n_q))
    np.add.at(boot_w, (np.repeat(np.arange(n_bootstrap), n_q), picks.ravel()), 1.0 / n_q)
    draw = rng.integers(0, ndcg.shape[0], size=n_bootstrap)
    comb = np.einsum("bq,bsq->bs", boot_w, ndcg[draw])
    boot = boot_w @ ndcg.mean(0).T
    cal = ndcg.mean(2)
    lo_p, hi_p = (1 - ci_prob) / 2, 1 - (1 - ci_prob) / 2
    systems = pd.DataFrame({"system": weights.systems, "mean": cal.mean(0),
                            "lo": np.quantile(comb, lo_p, axis=0), "hi": np.quantile(comb, hi_p, axis=0)})
    order = np.argsort(-systems["mean"].to_numpy(), kind="stable")
    a_i, b_i = np.triu_indices(len(order), k=1)
    a, b = order[a_i], order[b_i]
    d_comb = comb[:, a] - comb[:, b]
    dec = decide(d_comb, rope=rope, decision_prob=decision_prob)
    reach = decide(boot[:, a] - boot[:, b], rope=rope, decision_prob=decision_prob)["call"]
    pairs = pd.DataFrame({
        "system_a": [weights.systems[i] for i in a], "system_b": [weights.systems[i] for i in b],
        "delta": cal[:, a].mean(0) - cal[:, b].mean(0),
        "lo": np.quantile(d_comb, lo_p, axis=0) if len(a) else np.zeros(0),
        "hi": np.quantile(d_comb, hi_p, axis=0) if len(a) else np.zeros(0),
        "p_a_practically_better": dec["p_a_practically_better"], "p_b_practically_better": dec["p_b_practically_better"],
        "p_rope": dec["p_rope"], "call": dec["call"].astype(str), "reachable": reach != "undecided",
        "var": d_comb.var(0),
    })
    return PairDecisions(systems=systems.iloc[order].reset_index(drop=True), pairs=pairs,
                         pair_index=np.stack([a, b], 1).astype(np.int64))


def pair_gradients(weights: RunWeights, post: GainPosterior, pair_index: np.ndarray, k: int = 10) -> np.ndarray:
    """d(mean nDCG_A - mean nDCG_B) / d gain of every document, at the MAP gains: float64[P, Q, N].

    For a query ``q`` (weight 1/Q): ``((W_A - W_B)[q] - (nDCG_A - nDCG_B)[q] w_I[q]) / IDCG[q]``; the second
    term is the pair's dependence on the ideal list through its normaliser.
    """
    w_ideal = ideal_weights(post, k)
    g = post.gain
    idcg = (w_ideal * g).sum(1)
    safe = np.where(idcg > 0, idcg, 1.0)
    ndcg = (weights.weights * g[None]).sum(2) / safe[None]  # [S, Q]
    a, b = pair_index[:, 0], pair_index[:, 1]
    diff_w = weights.weights[a] - weights.weights[b]  # [P, Q, N]
    grad = diff_w - (ndcg[a] - ndcg[b])[:, :, None] * w_ideal[None]
    return np.where(idcg[None, :, None] > 0, grad / safe[None, :, None], 0.0) / g.shape[0]

"""Scoring a run's decisions: agreement with a reference, false calls on null pairs, wrong signs vs the truth.

Pairs are keyed by their two system names (sorted), and a call is written in that orientation
(``x>y``, ``y>x``, ``equivalent``, ``undecided``), so tables that order systems differently compare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rcp_jax.budget.decisions import RunWeights
from rcp_jax.metrics import discounts, gain


def oriented_calls(pairs: pd.DataFrame) -> dict[frozenset, str]:
    """frozenset({a, b}) -> call oriented to the sorted names (``>`` means the first sorted name wins)."""
    out = {}
    for a, b, call in zip(pairs["system_a"], pairs["system_b"], pairs["call"]):
        x, y = sorted((a, b))
        if call == "A>B":
            call = f"{a}>{b}"
        elif call == "B>A":
            call = f"{b}>{a}"
        out[frozenset((x, y))] = call
    return out


def score_calls(pairs: pd.DataFrame, reference: pd.DataFrame, null_pairs: set,
                true_delta: Mapping[frozenset, float] | None = None, rope: float = 0.02) -> dict:
    """``agree`` (share of pairs with the reference's call), ``decided``, ``false_calls`` (winners called on
    null pairs) / ``null_pairs``; with ``true_delta``: ``wrong_sign`` (winners against the true difference's
    sign, non-null pairs) and ``wrong_equivalent`` (``equivalent`` called on a true difference beyond ``rope``)."""
    mine, ref = oriented_calls(pairs), oriented_calls(reference)
    keys = sorted(ref, key=sorted)
    winner = {k: ">" in mine[k] for k in keys}
    out = {
        "agree": float(np.mean([mine[k] == ref[k] for k in keys])),
        "decided": int(sum(mine[k] != "undecided" for k in keys)),
        "pairs": len(keys),
        "false_calls": int(sum(winner[k] for k in keys if k in null_pairs)),
        "null_pairs": int(sum(k in null_pairs for k in keys)),
    }
    if true_delta is not None:
        wrong = 0
        for k in keys:
            if winner[k] and k not in null_pairs:
                first = sorted(k)[0]
                says_first = mine[k].startswith(first + ">")
                wrong += int((true_delta[k] > 0) != says_first)
        out["wrong_sign"] = wrong
        out["wrong_equivalent"] = int(sum(mine[k] == "equivalent" and abs(true_delta[k]) > rope for k in keys))
    return out


def true_pair_deltas(weights: RunWeights, latent: Mapping[str, Mapping[str, float]], pools: Mapping[str, Sequence[str]],
                     gamma, beta, k: int = 10) -> dict[frozenset, float]:
    """True difference of mean nDCG@k (first sorted name minus second) of every pair: true gains of the latent
    relevance, the ideal list in true-gain order."""
    n = weights.weights.shape[2]
    g = np.zeros((len(weights.query_ids), n))
    for i, q in enumerate(weights.query_ids):
        docs = pools[q]
        g[i, : len(docs)] = gain(np.array([latent[q][d] for d in docs]), gamma, beta)
    top = -np.sort(-g, axis=1)[:, :k]
    idcg = (top * discounts(k)[: top.shape[1]]).sum(1)
    ndcg = (weights.weights * g[None]).sum(2) / idcg[None]
    mean = dict(zip(weights.systems, ndcg.mean(1)))
    out = {}
    for i, a in enumerate(weights.systems):
        for b in weights.systems[i + 1:]:
            x, y = sorted((a, b))
            out[frozenset((x, y))] = float(mean[x] - mean[y])
    return out

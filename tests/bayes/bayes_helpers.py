"""Simulated RCP collections as the tidy tables rcp_jax consumes (shared by the Bayesian tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rcp_jax.models import simulate


def collection_tables(sim: simulate.SimulatedJudgements) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(window scores ``query_id, window_id, doc_id, score``, answers ``query_id, doc_id, C1..CK``)."""
    rows = []
    for w, (docs, scores, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query)):
        for d, s in zip(docs, scores):
            if d >= 0:
                rows.append((f"q{q}", f"w{w}", f"q{q}-d{d}", float(s)))
    windows = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    k = sim.rubric_answers.shape[1]
    answers = pd.DataFrame(sim.rubric_answers, columns=[f"C{i + 1}" for i in range(k)])
    answers.insert(0, "doc_id", [f"q{q}-d{d}" for q, d in zip(sim.rubric_query, sim.rubric_doc)])
    answers.insert(0, "query_id", [f"q{q}" for q in sim.rubric_query])
    return windows, answers


def true_gains(sim: simulate.SimulatedJudgements) -> pd.DataFrame:
    """``query_id, doc_id, gain`` with the simulator's true gains."""
    out = []
    for q in range(len(sim.truth.relevance)):
        g = sim.truth.gains(q)
        out.append(pd.DataFrame({"query_id": f"q{q}", "doc_id": [f"q{q}-d{d}" for d in range(len(g))], "gain": g}))
    return pd.concat(out, ignore_index=True)


def exact_bt_scores(sim: simulate.SimulatedJudgements) -> pd.DataFrame:
    """``query_id, doc_id, theta`` with noise-free BT scores: ``theta = d_q (r - mean_q r)``.

    The frozen-BT model's own assumption: the scores it is given are exact up to an affine map per
    query, so that ``tau_q theta + alpha_q`` is the true relevance (here ``tau_q = 1 / d_q``,
    ``alpha_q = mean_q r``, with ``d_q`` the simulated judge's decisiveness).
    """
    out = []
    for q, (r, d) in enumerate(zip(sim.truth.relevance, sim.truth.decisiveness)):
        out.append(pd.DataFrame({"query_id": f"q{q}", "doc_id": [f"q{q}-d{i}" for i in range(len(r))],
                                 "theta": d * (r - r.mean())}))
    return pd.concat(out, ignore_index=True)


def simulated_run(sim: simulate.SimulatedJudgements, quality, seed: int = 0, *, depth: int | None = None) -> pd.DataFrame:
    """Rerankers of different quality: score = relevance + N(0, 1/quality^2), optional top-depth cut."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, qual in enumerate(quality):
        for q, rel in enumerate(sim.truth.relevance):
            score = rel + rng.normal(0.0, 1.0 / qual, len(rel))
            idx = np.argsort(-score)[: depth or len(rel)]
            rows.append(pd.DataFrame({"system": f"s{s}", "query_id": f"q{q}",
                                      "doc_id": [f"q{q}-d{d}" for d in idx], "score": score[idx]}))
    return pd.concat(rows, ignore_index=True)


def gain_coverage(post, truth: pd.DataFrame) -> tuple[float, float]:
    """(share of documents whose true gain lies in the posterior interval, mean interval width)."""
    d = post.documents.merge(truth, on=["query_id", "doc_id"])
    inside = (d["gain"] >= d["gain_lo"]) & (d["gain"] <= d["gain_hi"])
    return float(inside.mean()), float((d["gain_hi"] - d["gain_lo"]).mean())

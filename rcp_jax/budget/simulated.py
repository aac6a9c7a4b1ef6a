"""A simulated benchmark for budgeted judging: pools, systems with known quality, and a simulated judge.

Latent relevance per query comes from :func:`rcp_jax.models.simulate.simulate_truth` (``mu_q + sd_q z``); the judge
is :class:`judging.SimulatedJudge` on that latent (a per-query decisiveness and shift, score noise; the
rubric a 2PL with the published NanoBEIR items), answering through the same render -> parse -> store path
as an LLM. The systems rerank the whole pool by ``relevance + N(0, sd_s^2)``, with quality levels
:data:`QUALITY_SD` taken twice each: the two systems of a level are identical in expectation (**null
pairs**: a call of a winner between them is a false call), every other pair differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rcp_jax.judging import SimulatedJudge
from rcp_jax.models.simulate import simulate_truth

@dataclass
class SimulatedCollection:
    """What :func:`rcp_jax.pipeline.judge_collection` and :func:`rcp_jax.budget.judge_budgeted` read of a
    collection (the fields of :class:`rcp_jax.pipeline.PipelineInput`): query texts, per-query document texts,
    pools in pool order, and the dataset name keying the schedule's random streams."""

    queries: dict
    documents: dict
    pools: dict
    dataset: str


#: Noise SD (relevance units) of the systems' scores, one level per pair of twin systems.
QUALITY_SD = (0.5, 0.8, 1.1, 1.4, 1.8, 2.3, 3.0)


@dataclass
class SimulatedBenchmark:
    """``collection`` (:class:`SimulatedCollection`), ``runs`` (``system, query_id, doc_id, score``), ``judge``
    (SimulatedJudge), ``latent`` (query -> doc -> relevance), ``null_pairs`` (set of frozensets of names)."""

    collection: SimulatedCollection
    runs: pd.DataFrame
    judge: SimulatedJudge
    latent: dict
    null_pairs: set


def simulated_benchmark(seed: int, n_queries: int = 50, pool: int = 150, *, levels=QUALITY_SD,
                        judge_noise: float = 1.0) -> SimulatedBenchmark:
    """A collection of ``n_queries`` pools of ``pool`` documents, ``2 * len(levels)`` systems (twins per level)."""
    rng = np.random.default_rng([int(seed), 0x5B])
    truth = simulate_truth(rng, [pool] * n_queries)
    latent, runs = {}, []
    for j, rel in enumerate(truth.relevance):
        q = f"q{j:03d}"
        ids = [f"{q}-d{i:03d}" for i in range(pool)]
        latent[q] = dict(zip(ids, rel.tolist()))
        for li, sd in enumerate(levels):
            for twin in "ab":
                runs.append(pd.DataFrame({"system": f"s{li}{twin}", "query_id": q, "doc_id": ids,
                                          "score": rel + sd * rng.standard_normal(pool)}))
    qids = list(latent)
    collection = SimulatedCollection(
        queries={q: f"simulated query {q}" for q in qids},
        documents={q: {d: f"document {d}" for d in latent[q]} for q in qids},
        pools={q: list(latent[q]) for q in qids}, dataset=f"budget-sim-{seed}",
    )
    judge = SimulatedJudge(latent, decisiveness=dict(zip(qids, truth.decisiveness.tolist())),
                           shift=dict(zip(qids, truth.shift.tolist())), noise=judge_noise, seed=int(seed),
                           decorate=False)
    nulls = {frozenset((f"s{li}a", f"s{li}b")) for li in range(len(levels))}
    return SimulatedBenchmark(collection=collection, runs=pd.concat(runs, ignore_index=True), judge=judge,
                              latent=latent, null_pairs=nulls)

"""What `extend` costs per new document, measured with the simulated judge (issue 30).

For each number ``n`` of new documents per query, a collection of ``--queries`` queries is judged with the
full schedule on pools of ``--pool`` documents and calibrated; one system then ranks the pool plus ``n``
documents nobody judged, and ``rcp_jax.extend`` judges those. Reported per ``n``: the calls the extension
made (tournament + rubric windows, re-asks of invalid answers included), per query and per new document,
beside the plan of :func:`rcp_jax.schedule.extension_counts`.

Run: ``.venv/bin/python benchmarks/extend_cost.py`` (6 queries x 40 documents; a few seconds per ``n`` on
two cores); ``--malformed 0.05`` to count re-asks of invalid answers too.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd


def measure(n_new: int, *, queries: int, pool: int, seed: int, malformed: float) -> dict:
    """Calls of one extension with ``n_new`` new documents in every query."""
    from rcp_jax.judging import SimulatedJudge, synthetic_dataset
    from rcp_jax import calibrate, extend
    from rcp_jax.pipeline import PipelineInput, judge_collection_sync
    from rcp_jax.schedule import extension_counts

    texts, documents, latent = synthetic_dataset(queries, pool + n_new, seed=seed)
    rng = np.random.default_rng(seed)
    old_pools, new = {}, {}
    for q, docs in documents.items():
        ids = list(docs)
        picked = set(rng.choice(ids, n_new, replace=False))
        old_pools[q] = [d for d in ids if d not in picked]
        new[q] = picked
    judge = SimulatedJudge(latent, seed=seed, decorate=False, malformed_rate=malformed)
    runs = pd.DataFrame([("S", q, d, latent[q][d] + float(rng.standard_normal()))
                         for q, docs in documents.items() for d in docs],
                        columns=["system", "query_id", "doc_id", "score"])
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = Path(tmp) / "store"
        col = PipelineInput(queries=texts, documents=documents, pools=old_pools, dataset="cost")
        _, answers, bt, _ = judge_collection_sync(col, judge=judge, store=store, seed=seed, progress=False)
        res = extend(runs, store=store, calibration=calibrate(bt, answers), judge=judge, queries=texts,
                     documents=documents, depth=pool + n_new)
    planned = extension_counts(n_new)
    found = len(res.new_documents)
    return {"new_per_query": n_new, "new_documents": found, "calls": res.calls,
            "calls_per_query": res.calls / queries, "calls_per_new_document": res.calls / found,
            "planned_tournament": planned[0], "planned_rubric": planned[1],
            "planned_per_new_document": sum(planned) / n_new}


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=6)
    p.add_argument("--pool", type=int, default=40, help="documents judged before the extension, per query")
    p.add_argument("--new", type=int, nargs="+", default=[1, 2, 3, 5, 10, 30], help="new documents per query")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--malformed", type=float, default=0.0, help="share of malformed answers (re-asked)")
    args = p.parse_args(argv)
    return [measure(n, queries=args.queries, pool=args.pool, seed=args.seed, malformed=args.malformed)
            for n in args.new]


if __name__ == "__main__":
    rows = main()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.2f}"))

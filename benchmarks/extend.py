"""Extending a judged pool vs a full refit and a full re-judge, on the simulated judge.

Each query's pool of ``--pool`` documents is split: ``1 - --share`` is judged with the full schedule and
calibrated; six simulated rerankers then rank the whole pool, and ``rcp_jax.extend`` judges the rest (the
documents no calibration scored) beside anchors and places them without refitting anything shared. The
reference is a full refit of everything the store then holds (BT and 2PL, every parameter free), which is
also what `rcp-jax fit` gives after an extension. Reported: the new documents' gains, extension vs full
refit (mean and max |diff|); the systems' RCP-nDCG@10 order under both; the calls of the extension vs the
full schedule on the grown pools (planned, and with ``--rejudge`` actually judged into a fresh store);
each gain's error against the simulator's true gain.

Run: ``.venv/bin/python -m benchmarks.extend`` (20 queries x 150 documents, 20% new: about 1-2 min on
two cores); ``--queries 5 --pool 60`` for a quick look.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd


def kendall_tau(a: list[str], b: list[str]) -> float:
    pos = {s: i for i, s in enumerate(b)}
    x = [pos[s] for s in a]
    n = len(x)
    conc = sum(1 if x[i] < x[j] else -1 for i in range(n) for j in range(i + 1, n))
    return conc / (n * (n - 1) / 2)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--pool", type=int, default=150)
    p.add_argument("--share", type=float, default=0.2, help="share of each pool left for the extension")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--new", choices=["random", "low", "high"], default="random",
                   help="which documents are left for the extension: a random share (default), or the share with the "
                        "lowest / highest latent relevance (new documents outside the range the calibration saw)")
    p.add_argument("--rejudge", action="store_true", help="also judge the whole pools from scratch (calls, accuracy)")
    args = p.parse_args(argv)

    from rcp_jax.judging import SimulatedJudge, synthetic_dataset
    from rcp_jax.judging.offline import DEFAULT_BETA, DEFAULT_GAMMA
    from rcp_jax.models.simulate import true_gain
    from rcp_jax import calibrate, evaluate, extend, fit_bradley_terry, leaderboard
    from rcp_jax.pipeline import PipelineInput, judge_collection_sync, store_tables

    queries, documents, latent = synthetic_dataset(args.queries, args.pool, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    old_pools, new_docs = {}, {}
    for q, docs in documents.items():
        ids = list(docs)
        n_new = int(round(args.share * len(ids)))
        if args.new == "random":
            new = set(rng.choice(ids, n_new, replace=False))
        else:
            by_latent = sorted(ids, key=lambda d: latent[q][d], reverse=args.new == "high")
            new = set(by_latent[:n_new])
        old_pools[q] = [d for d in ids if d not in new]
        new_docs[q] = sorted(new)
    judge = SimulatedJudge(latent, seed=args.seed, decorate=False)
    runs = pd.DataFrame([
        (f"S{s}", q, d, latent[q][d] + sd * float(rng.standard_normal()))
        for s, sd in enumerate([0.3, 0.6, 1.0, 1.5, 2.5, 4.0]) for q, docs in documents.items() for d in docs
    ], columns=["system", "query_id", "doc_id", "score"])
    gamma, beta = np.array(DEFAULT_GAMMA), np.array(DEFAULT_BETA)
    truth = {(q, d): float(true_gain(np.array(v), gamma, beta)) for q, ds in latent.items() for d, v in ds.items()}

    out: dict = {"queries": args.queries, "pool": args.pool, "share": args.share, "new": args.new}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = Path(tmp) / "store"
        t0 = time.perf_counter()
        col = PipelineInput(queries=queries, documents=documents, pools=old_pools, dataset="bench")
        _, answers, bt, calls_old = judge_collection_sync(col, judge=judge, store=store, seed=args.seed, progress=False)
        cal = calibrate(bt, answers)
        out["calls_initial"] = calls_old
        t1 = time.perf_counter()
        res = extend(runs, store=store, calibration=cal, judge=judge, queries=queries, documents=documents,
                     depth=args.pool)
        t2 = time.perf_counter()
        out["calls_extension"] = res.calls
        out["new_documents"] = len(res.new_documents)
        out["full_rejudge_planned"] = res.plan.full_rejudge_calls
        out["checks"] = {"rubric_max_abs_z": res.checks["rubric"].get("max_abs_z"),
                         "anchor_agreement": res.checks["anchors"]["agreement"], "notes": len(res.notes)}
        ws_all, ans_all, _ = store_tables(store)
        full = calibrate(fit_bradley_terry(ws_all), ans_all)
        t3 = time.perf_counter()
        out["seconds"] = {"initial judge+fit": t1 - t0, "extend": t2 - t1, "full refit": t3 - t2}

        ext_g = res.calibration.gains().set_index(["query_id", "doc_id"])["gain"]
        full_g = full.gains().set_index(["query_id", "doc_id"])["gain"]
        new_idx = pd.MultiIndex.from_frame(res.new_documents[["query_id", "doc_id"]])
        diff = (ext_g.reindex(new_idx) - full_g.reindex(new_idx)).abs()
        out["new_gain_mean_abs_diff"] = float(diff.mean())
        out["new_gain_max_abs_diff"] = float(diff.max())
        old_idx = ext_g.index.difference(new_idx)
        old_diff = (ext_g.reindex(old_idx) - full_g.reindex(old_idx)).abs()
        out["old_gain_mean_abs_diff"] = float(old_diff.mean())
        tg = pd.Series(truth)
        out["error_vs_truth"] = {
            "new, extension": float((ext_g.reindex(new_idx) - tg.reindex(new_idx)).abs().mean()),
            "new, full refit": float((full_g.reindex(new_idx) - tg.reindex(new_idx)).abs().mean()),
            "old, initial calibration": float((ext_g.reindex(old_idx) - tg.reindex(old_idx)).abs().mean()),
        }
        boards = {}
        for name, c in (("extension", res.calibration), ("full refit", full)):
            boards[name] = leaderboard(evaluate(runs, c, k=args.k))["rcp_ndcg"]
        order_ext = list(boards["extension"].index)
        order_full = list(boards["full refit"].index)
        out["ranking_extension"] = order_ext
        out["ranking_full_refit"] = order_full
        out["ranking_same"] = order_ext == order_full
        out["kendall_tau"] = kendall_tau(order_ext, order_full)
        out["max_abs_rcp_ndcg_diff"] = float((boards["extension"] - boards["full refit"].reindex(boards["extension"].index)).abs().max())
        if args.rejudge:
            store2 = Path(tmp) / "store_full"
            col2 = PipelineInput(queries=queries, documents=documents, pools={q: list(d) for q, d in documents.items()},
                                 dataset="bench")
            _, ans2, bt2, calls_full = judge_collection_sync(col2, judge=judge, store=store2, seed=args.seed,
                                                             progress=False)
            cal2 = calibrate(bt2, ans2)
            g2 = cal2.gains().set_index(["query_id", "doc_id"])["gain"]
            out["calls_full_rejudge"] = calls_full
            out["error_vs_truth"]["new, full re-judge"] = float((g2.reindex(new_idx) - tg.reindex(new_idx)).abs().mean())
    return out


if __name__ == "__main__":
    import json

    result = main()
    print(json.dumps(result, indent=2))

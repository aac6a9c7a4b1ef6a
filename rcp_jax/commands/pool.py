"""``rcp-jax pool``: candidate pools by reciprocal rank fusion of retriever runs (or BM25 + QL)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.commands._common import add_collection_args, emit, load_collection, read_runs

NAME = "pool"
HELP = "build judged pools: RRF (k=60) of retriever runs, or of BM25 + query-likelihood when no run is given"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_collection_args(p)
    p.add_argument("--runs", type=Path, nargs="*", default=[], help="retriever runs to fuse (default: BM25 variants + QL)")
    p.add_argument("--depth", type=int, default=150, help="pool depth per query (default 150)")
    p.add_argument("--no-positives", action="store_true", help="do not swap in qrel positives the retrievers missed")
    p.add_argument("--out", type=Path, required=True, help="pools file to write (TSV/CSV/JSONL/Parquet by extension)")


def run(args) -> int:
    from rcp_jax import data, pools

    col, _ = load_collection(args)
    if args.runs:
        runs = read_runs(args.runs)
        retrievers = sorted(runs["system"].unique())
    else:
        top = max(args.depth * 2, 200)
        frames = [
            pools.bm25_run(col.corpus, col.queries, top_k=top, name="bm25"),
            pools.bm25_run(col.corpus, col.queries, top_k=top, k1=0.9, b=0.4, stem=True, name="bm25_stem"),
            pools.query_likelihood_run(col.corpus, col.queries, top_k=top, name="qlm"),
        ]
        import pandas as pd

        runs = pd.concat(frames, ignore_index=True)
        retrievers = ["bm25", "bm25_stem", "qlm"]
    qrels = None if args.no_positives or not len(col.qrels) else col.qrels
    pool = pools.build_pool(runs, args.depth, qrels=qrels)
    data.write_pools(pool, args.out)
    sizes = pool.groupby("query_id").size()
    payload = {"queries": int(sizes.size), "depth": args.depth, "retrievers": retrievers, "out": str(args.out),
               "min_pool": int(sizes.min()), "max_pool": int(sizes.max())}
    if qrels is not None:
        rec = pools.pool_recall(pool, qrels)
        payload["positive_recall"] = float(rec["recall"].mean()) if "recall" in rec.columns else None
    emit(args, payload, f"pooled {sizes.size} queries (depth {args.depth}, sizes {sizes.min()}-{sizes.max()}) from "
                        f"{', '.join(retrievers)} -> {args.out}")
    return 0

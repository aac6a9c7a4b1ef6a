"""``rcp-jax pool``: candidate pools by reciprocal rank fusion of retriever runs (or BM25 + QL).

Two files come out. The **pools file** (``--out``) is what the judge reads: per query, the top ``--depth``
documents of the fusion, with every qrel positive the retrievers missed swapped in at the tail (it
replaces the lowest-ranked non-positive). Its order is therefore *not* a system ranking: a planted
positive sits at the bottom whatever its fused score, and a query's pool contains positives no retriever
found, so scoring the pools file as a run would credit it with the qrels. The **fusion run**
(``--run-out``, by default ``<pools file without extension>.fusion.trec`` beside it) is the first-stage
system itself, a TREC run (tag ``rrf``) that ``rcp-jax evaluate`` can score: exactly the RRF of the
retrievers (documents, order, fused scores) down to rank ``--depth``, or, in a query where a swapped-in
positive displaced a fused document from the pool, down to just above that document (so every document
of the run is judged, and nDCG@k is exact while ``k`` is at most that query's cut; the output names the
shortest cut). A swapped-in positive never enters it, and nothing below a displaced document is moved up
(which would lift positives the fusion ranked low). An unlabelled collection (no qrels) swaps nothing in:
pools and fusion run are the RRF's top ``--depth``. With
``--baselines-out`` the built-in lexical retrievers also rerank every pool (``bm25``, ``bm25_stem``,
``qlm`` scoring each pooled document), baselines to compare a reranker against.

Page images (``--images DIR`` or an ``image`` field in the corpus): pooling stays text-based. The lexical
retrievers read a document's text (a page's extracted text, when given); a page image without text is
invisible to them and says so: it enters a pool only through ``--runs`` (e.g. a visual retriever's run) or as
a qrel positive swapped in. A corpus whose every document is such an image needs ``--runs``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import add_collection_args, emit, load_collection, pooled_texts, read_runs

NAME = "pool"
HELP = ("build judged pools: RRF (k=60) of retriever runs, or of BM25 + query-likelihood when no run is given; "
        "qrel positives the retrievers missed are swapped in at each pool's tail, so the pools file is NOT a "
        "system ranking: the fusion run itself is written beside it (--run-out) for `rcp-jax evaluate`")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_collection_args(p, pools=False)
    p.add_argument("--runs", type=Path, nargs="*", default=[],
                   help="retriever runs to fuse (TREC or system, query_id, doc_id, score tables; default: none, so "
                        "three lexical retrievers are run: BM25, stemmed BM25 and Dirichlet query likelihood)")
    p.add_argument("--depth", type=int, default=150, help="pool depth per query (default 150)")
    p.add_argument("--no-positives", action="store_true",
                   help="do not swap in qrel positives the retrievers missed (default: swap them in, so every "
                        "known positive is judged)")
    p.add_argument("--out", type=Path, required=True,
                   help="pools file to write, query_id, doc_id, rank (TSV/CSV/JSONL/Parquet by extension); the judge "
                        "reads it; it is not a system ranking (positives are swapped in at the tail)")
    p.add_argument("--run-out", type=Path, default=None,
                   help="the first-stage fusion run as a TREC run file (tag rrf), to score with `rcp-jax evaluate` "
                        "(default: <--out without extension>.fusion.trec, beside the pools file)")
    p.add_argument("--baselines-out", type=Path, default=None,
                   help="also write the lexical retrievers reranking every pool (bm25, bm25_stem, qlm) as one TREC "
                        "run file, baselines for `rcp-jax evaluate` (default: not written)")


def default_run_out(pools_out: Path) -> Path:
    """``pools.tsv`` (or ``pools.tsv.gz``) -> ``pools.fusion.trec`` in the same folder."""
    name = pools_out.name.removesuffix(".gz")
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return pools_out.with_name(f"{stem}.fusion.trec")


def fusion_run(runs, pool, depth: int):
    """The first-stage fusion as a run ``system='rrf', query_id, doc_id, score``: exactly the RRF of ``runs``
    (:func:`rcp_jax.pools.reciprocal_rank_fusion`: the same documents, order and fused scores), per query from
    rank 1 down to ``depth``, or down to just above the first fused document the pool lacks (one a swapped-in
    positive displaced), so that every document of the run is judged. Nothing is moved up: a swapped-in positive
    is never in it, and no document below a displaced one is kept (that would lift the documents under it).

    Returns:
        ``(run, cut)``: the run, and a Series query_id -> ranks kept, for the queries the pool cut short.
    """
    import numpy as np
    import pandas as pd

    from rcp_jax.pools.fusion import reciprocal_rank_fusion

    fused = reciprocal_rank_fusion(runs)
    fused = fused.loc[fused["rank"] <= depth]
    pooled = pd.MultiIndex.from_frame(pool[["query_id", "doc_id"]].astype(str))
    in_pool = pd.MultiIndex.from_frame(fused[["query_id", "doc_id"]]).isin(pooled)
    first_out = fused.loc[~in_pool].groupby("query_id", sort=False)["rank"].min()
    stop = fused["query_id"].map(first_out).fillna(np.inf).to_numpy()
    out = fused.loc[fused["rank"].to_numpy() < stop, ["query_id", "doc_id", "score"]].copy()
    out.insert(0, "system", "rrf")
    return out.reset_index(drop=True), (first_out - 1).astype(int)


def run(args) -> int:
    import warnings

    import pandas as pd

    from rcp_jax import data, pools
    from rcp_jax.errors import DataError

    col, _ = load_collection(args)
    if args.depth < 1:
        raise DataError(f"--depth must be >= 1, got {args.depth}")
    queries = set(col.queries["query_id"].astype(str))
    empty = set(col.corpus.attrs.get("empty", ()))
    image_only = _image_only(col.corpus)
    if image_only and len(image_only) == len(col.corpus) and not args.runs:
        raise DataError(f"every document of the corpus ({len(image_only)}) is a page image without text: the lexical "
                        "retrievers (BM25, query likelihood) have nothing to read. Pool with --runs (e.g. a visual "
                        "retriever's run), or give the pages' extracted text in the corpus")
    if args.runs:
        runs = read_runs(args.runs)
        runs = runs.loc[runs["query_id"].astype(str).isin(queries)]
        retrievers = sorted(runs["system"].unique())
        if runs.empty:
            raise DataError(f"the runs ({', '.join(map(str, args.runs))}) hold none of the selected queries")
    else:
        top = max(args.depth * 2, 200)
        frames = [
            pools.bm25_run(col.corpus, col.queries, top_k=top, name="bm25"),
            pools.bm25_run(col.corpus, col.queries, top_k=top, k1=0.9, b=0.4, stem=True, name="bm25_stem"),
            pools.query_likelihood_run(col.corpus, col.queries, top_k=top, name="qlm"),
        ]
        runs = pd.concat(frames, ignore_index=True)
        retrievers = ["bm25", "bm25_stem", "qlm"]
    qrels = None if args.no_positives or not len(col.qrels) else col.qrels
    if args.missing_text == "drop" and empty:  # an empty document is neither fused nor swapped in
        runs = runs.loc[~runs["doc_id"].astype(str).isin(empty)]
        if qrels is not None:
            qrels = qrels.loc[~qrels["doc_id"].astype(str).isin(empty)]
    pool = pools.build_pool(runs, args.depth, qrels=qrels)
    if args.missing_text == "drop" and empty:
        left_out = sorted(empty & set(col.qrels.loc[col.qrels["grade"] > 0, "doc_id"].astype(str))) if len(col.qrels) else []
        if left_out:
            warnings.warn(f"{len(left_out)} positive qrel document(s) without text left out of the pools "
                          f"(--missing-text drop): {', '.join(left_out[:10])}", UserWarning, stacklevel=1)
    else:
        _refuse_empty_pooled(pool, empty, col.qrels, args.missing_text)
        pool = pooled_texts(col.corpus, pool, args.missing_text)
    data.write_pools(pool, args.out)
    run_out = args.run_out or default_run_out(args.out)
    fused, cut = fusion_run(runs, pool, args.depth)
    data.write_run(fused, run_out)
    sizes = pool.groupby("query_id").size()
    top = pools.reciprocal_rank_fusion(runs)
    top = top.loc[top["rank"] <= args.depth]
    swapped = int((~pd.MultiIndex.from_frame(pool[["query_id", "doc_id"]].astype(str))
                   .isin(pd.MultiIndex.from_frame(top[["query_id", "doc_id"]]))).sum())
    payload = {"queries": int(sizes.size), "depth": args.depth, "retrievers": retrievers, "out": str(args.out),
               "fusion_run": str(run_out), "min_pool": int(sizes.min()), "max_pool": int(sizes.max()),
               "swapped_in": swapped, "fusion_run_cut": {str(q): int(n) for q, n in cut.items()}}
    lines = [f"pooled {sizes.size} queries (depth {args.depth}, sizes {sizes.min()}-{sizes.max()}) from "
             f"{', '.join(retrievers)} -> {args.out}"]
    if qrels is not None:
        rec = pools.pool_recall(pool, qrels)
        payload["positive_recall"] = float(rec["recall"].mean()) if "recall" in rec.columns else None
        payload["labelled_queries"] = int(rec["query_id"].nunique())
        lines.append(f"{swapped} qrel positive(s) the retrievers missed were swapped in at the pools' tails: the "
                     "pools file is what the judge reads, NOT a system ranking (do not score it as a run)")
        if payload["positive_recall"] is not None:
            lines.append(f"positive recall of the pools before the swap: {_recall_before(top, qrels):.3f} "
                         f"(mean over the {payload['labelled_queries']} queries with a positive qrel)")
    lines.append(f"first-stage fusion run (tag rrf: the exact RRF of {', '.join(retrievers)}, top {args.depth}) "
                 f"-> {run_out}")
    if len(cut):
        lines.append(_cut_note(cut, int(sizes.size)))
    if "image" in col.corpus.columns:
        with_image = int((col.corpus["image"].astype(str) != "").sum())
        pooled_images = int(pool["doc_id"].astype(str).isin(set(col.corpus.loc[col.corpus["image"].astype(str) != "",
                                                                               "doc_id"].astype(str))).sum())
        payload.update(documents_with_image=with_image, image_only_documents=len(image_only),
                       pooled_with_image=pooled_images)
        how = "the runs' rankings" if args.runs else "text only (BM25, query likelihood)"
        lines.append(f"page images: {with_image} document(s) have one ({pooled_images} pooled); pooling used {how}; "
                     f"{len(image_only)} image(s) without text " + ("are ranked only by the runs" if args.runs else
                     "are invisible to the lexical retrievers (pooled only as qrel positives; use --runs for more)"))
    if args.baselines_out:
        cand = pool[["query_id", "doc_id"]]
        base = pd.concat([
            pools.bm25_run(col.corpus, col.queries, candidates=cand, name="bm25"),
            pools.bm25_run(col.corpus, col.queries, candidates=cand, k1=0.9, b=0.4, stem=True, name="bm25_stem"),
            pools.query_likelihood_run(col.corpus, col.queries, candidates=cand, name="qlm"),
        ], ignore_index=True)
        data.write_run(base, args.baselines_out)
        payload["baselines"] = str(args.baselines_out)
        lines.append(f"lexical baselines reranking each pool (bm25, bm25_stem, qlm) -> {args.baselines_out}")
    lines.append(f"next: rcp-jax judge --pools {args.out} ...")
    emit(args, payload, "\n".join(lines))
    return 0


def _cut_note(cut, n_queries: int) -> str:
    """The note on the queries whose fusion run stops above ``--depth`` (``cut``: query_id -> ranks kept)."""
    short = cut.sort_values(kind="stable")
    below, empty = short[short < 10], short[short == 0]
    text = (f"note: in {len(cut)} of {n_queries} queries a swapped-in positive displaced a fused document, so their "
            f"fusion run stops just above it (every listed document is judged, none moved up): the shortest keeps "
            f"{int(short.min())} rank(s), so nDCG@k of rrf is exact for k <= {int(short.min())}")
    if len(below):
        text += (f"; {len(below)} quer{'y stops' if len(below) == 1 else 'ies stop'} above rank 10 "
                 f"({', '.join(map(str, below.index[:10]))}{' ...' if len(below) > 10 else ''})")
    if len(empty):
        text += (f", and {len(empty)} ha{'s' if len(empty) == 1 else 've'} no document in the fusion run (its first "
                 "fused document was displaced; evaluate leaves such a query out for every system, saying so)")
    if len(below):
        text += ": raise --depth, or pass --no-positives"
    return text


def _recall_before(top, qrels) -> float:
    """Mean share of each labelled query's positive qrels that the fusion's top depth held (before the swap)."""
    from rcp_jax.pools import pool_recall

    rec = pool_recall(top[["query_id", "doc_id"]], qrels)
    return float(rec["recall"].mean())


def _image_only(corpus) -> set[str]:
    """Ids of the documents that are a page image with neither text nor title."""
    if "image" not in corpus.columns:
        return set()
    blank = (corpus["text"].astype(str).str.strip() == "") & (corpus["title"].astype(str).str.strip() == "")
    return set(corpus.loc[blank & (corpus["image"].astype(str) != ""), "doc_id"].astype(str))


def _refuse_empty_pooled(pool, empty: set, qrels, policy: str) -> None:
    """With ``--missing-text error``: name the first pooled document without text, and whether a qrel put it
    there (a positive swapped in) or a run retrieved it."""
    from rcp_jax.data.table_checks import _where
    from rcp_jax.errors import DataError

    if policy != "error" or not empty:
        return
    hit = pool.loc[pool["doc_id"].astype(str).isin(empty)]
    if hit.empty:
        return
    q, d = str(hit["query_id"].iloc[0]), str(hit["doc_id"].iloc[0])
    why = "retrieved by the runs"
    if qrels is not None and len(qrels):
        row = qrels.loc[(qrels["query_id"].astype(str) == q) & (qrels["doc_id"].astype(str) == d)]
        if len(row):
            why = f"a qrel positive swapped in ({_where(qrels, row.index[0], 'qrels')})"
    raise DataError(
        f"query {q!r}: pooled document {d!r} has no text and no title in the corpus ({why}; "
        f"{hit['doc_id'].nunique()} such pooled document(s): {', '.join(sorted(set(hit['doc_id'].astype(str)))[:10])}); "
        "the judge cannot read an empty document: fix the corpus, or pass --missing-text drop (leave them out of the "
        "pools) or --missing-text warn (judge them as empty documents)"
    )

"""Regenerate the derived files of the embedded demo dataset (pools and runs) from its hand-written ones.

The demo in ``rcp_jax/demo/files/`` has two kinds of files:

- written by hand (the project's own text, never generated): ``corpus.jsonl`` (``_id, title, text``),
  ``queries.jsonl`` (``_id, text``), ``qrels.tsv`` (BEIR layout ``query-id, corpus-id, score``) and
  ``latent.jsonl`` (``query_id, doc_id, latent``: the author's graded judgement of every pooled pair
  on the scale of the calibrated ability, about -3 unrelated, -1 on topic but not useful, +1 partial,
  +3 direct answer, +4.5 thorough direct answer; it drives the offline simulated judge);
- derived here, deterministically: ``pools.tsv`` (``query_id, doc_id, rank``) and ``runs.tsv``
  (``system, query_id, doc_id, score``).

Run ``python -m rcp_jax.demo.rebuild`` to rewrite the derived files in place, or ``--out DIR`` to write
them elsewhere, or ``--check`` to verify that the shipped files are what the build produces.

Pools: RRF (k = 60) of two lexical retrievers over title + text, depth :data:`POOL_DEPTH`, qrel
positives inserted (:func:`rcp_jax.pools.build_pool`):

- ``bm25``: BM25 k1 = 1.2, b = 0.75, our stopword list, no stemming;
- ``bm25_stem_all``: BM25 k1 = 0.9, b = 0.4, plural stemming, no stopword list. Keeping stopwords lets
  every document that shares any word with the query compete, so each pool also holds unrelated
  documents below the on-topic ones, as a real pool does.

Runs: every system scores every pooled document of every query (a reranker over the pool):

- ``bm25``, ``bm25_stem`` (k1 = 0.9, b = 0.4, stemming, stopwords removed), ``bm25_title`` (titles
  only), ``qlm`` (Dirichlet query likelihood, mu = :data:`QLM_MU`);
- ``oracle_noisy``: latent relevance plus Gaussian noise of standard deviation :data:`ORACLE_NOISE`, a
  strong but imperfect reranker;
- ``random``: N(0, 1) scores, the floor.

Noise is drawn from a stream per (system, query), seeded from SHA-256 of ``(SEED, system, query)``, so
no score depends on the order of queries. Scores are rounded to 6 decimals, so the files round-trip
exactly through text. No dense ranker is included: none installs from PyPI with its weights inside
the package, and the demo must run offline.

Editing the corpus, queries or qrels can change the pools; the build then refuses, naming a pooled pair
that has no latent value, until ``latent.jsonl`` judges it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.demo.sources import FILES, read_pools, read_runs, read_sources
from rcp_jax.errors import DataError
from rcp_jax.pools.fusion import build_pool
from rcp_jax.pools.lexical import bm25_run, query_likelihood_run

POOL_DEPTH = 30
"""Documents per demo query pool (small, so the offline demo runs in seconds)."""
QLM_MU = 100.0
"""Dirichlet prior of the ``qlm`` system, in tokens (the demo documents are short: ~40-110 tokens)."""
ORACLE_NOISE = 1.5
"""Standard deviation of the Gaussian noise added to the latent relevance by ``oracle_noisy``."""
SEED = 20260
"""Seed of the ``random`` and ``oracle_noisy`` systems."""
DECIMALS = 6
"""Scores are rounded to this many decimals."""

HAND_WRITTEN = ("corpus.jsonl", "queries.jsonl", "qrels.tsv", "latent.jsonl")
DERIVED = ("pools.tsv", "runs.tsv")
SYSTEMS = ("bm25", "bm25_stem", "bm25_title", "qlm", "oracle_noisy", "random")


def build_pools(corpus: pd.DataFrame, queries: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """The demo pools: RRF of the two pooling retrievers, depth :data:`POOL_DEPTH`, positives inserted."""
    runs = [
        bm25_run(corpus, queries, k1=1.2, b=0.75, top_k=100, name="bm25"),
        bm25_run(corpus, queries, k1=0.9, b=0.4, top_k=100, stopwords=None, stem=True, name="bm25_stem_all"),
    ]
    return build_pool(runs, POOL_DEPTH, qrels)


def _stream(system: str, query_id: str) -> np.random.Generator:
    digest = hashlib.sha256(json.dumps([SEED, system, query_id]).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def build_runs(
    corpus: pd.DataFrame, queries: pd.DataFrame, pools: pd.DataFrame, latent: pd.DataFrame
) -> pd.DataFrame:
    """Scores of every demo system (:data:`SYSTEMS`) for every pooled (query, document) pair.

    Raises:
        DataError: a pooled pair has no latent value (the message names it): add a judgement to
            ``latent.jsonl``.
    """
    cands = pools[["query_id", "doc_id"]]
    frames = [
        bm25_run(corpus, queries, k1=1.2, b=0.75, name="bm25", candidates=cands),
        bm25_run(corpus, queries, k1=0.9, b=0.4, stem=True, name="bm25_stem", candidates=cands),
        bm25_run(corpus, queries, k1=1.2, b=0.75, fields=("title",), name="bm25_title", candidates=cands),
        query_likelihood_run(corpus, queries, mu=QLM_MU, name="qlm", candidates=cands),
    ]
    lat = cands.merge(latent, on=["query_id", "doc_id"], how="left")
    if lat["latent"].isna().any():
        row = lat.loc[lat["latent"].isna()].iloc[0]
        n = int(lat["latent"].isna().sum())
        raise DataError(
            f"pooled document {row.doc_id!r} of query {row.query_id!r} has no latent relevance ({n} pooled "
            "pairs lack one); add a judgement for it to latent.jsonl"
        )
    noisy, rand = np.empty(len(lat)), np.empty(len(lat))
    for qid, idx in lat.groupby("query_id", sort=False).indices.items():
        noisy[idx] = lat["latent"].to_numpy()[idx] + ORACLE_NOISE * _stream("oracle_noisy", qid).standard_normal(len(idx))
        rand[idx] = _stream("random", qid).standard_normal(len(idx))
    frames.append(pd.DataFrame({"system": "oracle_noisy", "query_id": lat["query_id"], "doc_id": lat["doc_id"], "score": noisy}))
    frames.append(pd.DataFrame({"system": "random", "query_id": lat["query_id"], "doc_id": lat["doc_id"], "score": rand}))
    runs = pd.concat(frames, ignore_index=True)
    runs["score"] = runs["score"].round(DECIMALS) + 0.0  # + 0.0 turns -0.0 into 0.0
    return runs.reset_index(drop=True)


def build(folder: Path | str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pools and runs built from the hand-written files in ``folder`` (default: the installed demo)."""
    src = read_sources(folder)
    pools = build_pools(src.corpus, src.queries, src.qrels)
    runs = build_runs(src.corpus, src.queries, pools, src.latent)
    return pools, runs


def write(pools: pd.DataFrame, runs: pd.DataFrame, out: Path | str) -> list[Path]:
    """Write ``pools.tsv`` and ``runs.tsv`` into ``out``; returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "pools.tsv", out / "runs.tsv"]
    pools.to_csv(paths[0], sep="\t", index=False, lineterminator="\n")
    runs.to_csv(paths[1], sep="\t", index=False, lineterminator="\n", float_format=f"%.{DECIMALS}f")
    return paths


def main(argv: list[str] | None = None) -> int:
    """Command line: rebuild (default), write elsewhere (``--out``) or verify (``--check``)."""
    parser = argparse.ArgumentParser(prog="python -m rcp_jax.demo.rebuild", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=None, help="folder of the hand-written files (default: the package's demo_data)")
    parser.add_argument("--out", type=Path, default=None, help="where to write pools.tsv and runs.tsv (default: the source folder)")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the shipped derived files differ from a rebuild")
    args = parser.parse_args(argv)
    source = args.source if args.source is not None else Path(str(FILES))
    pools, runs = build(source)
    if args.check:
        same = pools.equals(read_pools(source / "pools.tsv")) and runs.equals(read_runs(source / "runs.tsv"))
        print("demo pools and runs are up to date" if same else "demo pools/runs differ from a rebuild: run python -m rcp_jax.demo.rebuild")
        return 0 if same else 1
    for path in write(pools, runs, args.out if args.out is not None else source):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

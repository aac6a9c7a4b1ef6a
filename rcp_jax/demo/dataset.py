"""The embedded demo dataset: 212 short documents on 15 topics, 20 queries, pools, runs and latent truth.

Everything was written for rcp-jax (no text comes from elsewhere) so that the demo reads naturally to a
real LLM judge and also drives the offline simulated judge. Per query, the pooled documents span the
relevance range on purpose: thorough direct answers, brief direct answers, partial answers, documents on
the topic that do not answer, lexical traps that share words with the query but not its meaning, and
unrelated documents. The qrels are deliberately sparse, as real qrels are: two or three obvious best
documents per query are labelled, other useful ones are not.

Files (in ``rcp_jax/demo_data/``): ``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv`` and
``latent.jsonl`` are hand-written; ``pools.tsv`` and ``runs.tsv`` are derived by
:mod:`rcp_jax.demo_build` (``python -m rcp_jax.demo_build`` regenerates them).

Example:
    >>> from rcp_jax.demo import load_demo
    >>> demo = load_demo()
    >>> len(demo.corpus), len(demo.queries), int(demo.pools.groupby("query_id").size().max())
    (212, 20, 30)
    >>> sorted(demo.runs["system"].unique())
    ['bm25', 'bm25_stem', 'bm25_title', 'oracle_noisy', 'qlm', 'random']
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.demo_build import read_sources
from rcp_jax.errors import DataError

__all__ = ["DemoData", "INPUT_FILES", "load_demo", "read_pools", "read_runs", "write_demo_inputs"]

INPUT_FILES = ("runs.tsv", "qrels.tsv", "pools.tsv")
"""The demo's inputs copied into a report folder, so every other verb can be tried on them."""


@dataclass(frozen=True)
class DemoData:
    """The demo tables (string ids throughout).

    Attributes:
        corpus: ``doc_id, title, text``.
        queries: ``query_id, text``.
        qrels: ``query_id, doc_id, grade`` (int 0..3, sparse).
        pools: ``query_id, doc_id, rank`` (30 per query, rank 1 = first).
        runs: ``system, query_id, doc_id, score``: every system scores every pooled document.
        latent: ``query_id, doc_id, latent``: the author's judgement of every pooled pair on the scale of
            the calibrated ability (~-3 unrelated, ~-1 on topic, ~+1 partial, ~+3 direct, ~+4.5
            thorough).
    """

    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    pools: pd.DataFrame
    runs: pd.DataFrame
    latent: pd.DataFrame

    def latent_by_query(self) -> dict[str, dict[str, float]]:
        """``{query_id: {doc_id: latent}}``, the shape :class:`judging.offline.SimulatedJudge` reads."""
        return {q: dict(zip(g["doc_id"], g["latent"].astype(float))) for q, g in self.latent.groupby("query_id", sort=False)}

    def document_texts(self) -> dict[str, str]:
        """``{doc_id: "title\\n\\ntext"}``, the text a judge is shown."""
        return {d: f"{t}\n\n{x}" if t else x for d, t, x in zip(self.corpus["doc_id"], self.corpus["title"], self.corpus["text"])}


def _text(source: str | Path | Traversable) -> str:
    """Contents of a path or an ``importlib.resources`` traversable."""
    return (Path(source) if isinstance(source, str) else source).read_text(encoding="utf-8")


def read_pools(source: str | Path | Traversable) -> pd.DataFrame:
    """Read a pools TSV (``query_id, doc_id, rank``; a path or a resource) with string ids and int ranks."""
    df = pd.read_csv(io.StringIO(_text(source)), sep="\t", dtype=str)
    if list(df.columns) != ["query_id", "doc_id", "rank"]:
        raise DataError(f"{source}: expected columns query_id, doc_id, rank; got {list(df.columns)}")
    df["rank"] = df["rank"].astype(np.int64)
    return df


def read_runs(source: str | Path | Traversable) -> pd.DataFrame:
    """Read a runs TSV (``system, query_id, doc_id, score``) with string ids and exact float64 scores."""
    df = pd.read_csv(io.StringIO(_text(source)), sep="\t", dtype=str, keep_default_na=False)
    if list(df.columns) != ["system", "query_id", "doc_id", "score"]:
        raise DataError(f"{source}: expected columns system, query_id, doc_id, score; got {list(df.columns)}")
    # Python's float() is correctly rounded, so "%.6f" text reads back as the very double written.
    df["score"] = np.array([float(v) for v in df["score"]], dtype=np.float64)
    return df


def load_demo() -> DemoData:
    """Load the embedded demo dataset from the installed package (``importlib.resources``).

    Returns:
        :class:`DemoData` of DataFrames; see its attributes for the columns.
    """
    base = resources.files("rcp_jax") / "demo_data"
    src = read_sources()
    return DemoData(
        corpus=src.corpus,
        queries=src.queries,
        qrels=src.qrels,
        pools=read_pools(base / "pools.tsv"),
        runs=read_runs(base / "runs.tsv"),
        latent=src.latent,
    )


def write_demo_inputs(folder: str | Path) -> dict[str, Path]:
    """Copy the embedded ``runs.tsv``, ``qrels.tsv`` and ``pools.tsv`` into ``folder``, byte for byte.

    They are the files ``rcp-jax evaluate --runs/--qrels/--pools`` reads, so the demo's store can be
    refitted (say with ``rcp-jax fit --method nuts``) and its systems scored again.

    Returns:
        ``{"runs": path, "qrels": path, "pools": path}``.
    """
    from rcp_jax.io import atomic_write_bytes

    base = resources.files("rcp_jax") / "demo_data"
    return {name.removesuffix(".tsv"): atomic_write_bytes(Path(folder) / name, (base / name).read_bytes())
            for name in INPUT_FILES}

"""The demo tables in memory: :class:`DemoData` from :func:`load_demo`, and :func:`write_demo_inputs` for a report folder.

Example:
    >>> from rcp_jax.demo import load_demo
    >>> demo = load_demo()
    >>> len(demo.corpus), len(demo.queries), int(demo.pools.groupby("query_id").size().max())
    (212, 20, 30)
    >>> sorted(demo.runs["system"].unique())
    ['bm25', 'bm25_stem', 'bm25_title', 'oracle_noisy', 'qlm', 'random']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rcp_jax.demo.sources import FILES, read_pools, read_runs, read_sources

__all__ = ["DemoData", "INPUT_FILES", "load_demo", "write_demo_inputs"]

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
        """``{query_id: {doc_id: latent}}``, the shape :class:`rcp_jax.judging.offline.SimulatedJudge` reads."""
        return {q: dict(zip(g["doc_id"], g["latent"].astype(float))) for q, g in self.latent.groupby("query_id", sort=False)}

    def document_texts(self) -> dict[str, str]:
        """``{doc_id: "title\\n\\ntext"}``, the text a judge is shown."""
        return {d: f"{t}\n\n{x}" if t else x for d, t, x in zip(self.corpus["doc_id"], self.corpus["title"], self.corpus["text"])}


def load_demo() -> DemoData:
    """Load the embedded demo dataset from the installed package (``importlib.resources``).

    Returns:
        :class:`DemoData` of DataFrames; see its attributes for the columns.
    """
    src = read_sources()
    return DemoData(
        corpus=src.corpus,
        queries=src.queries,
        qrels=src.qrels,
        pools=read_pools(FILES / "pools.tsv"),
        runs=read_runs(FILES / "runs.tsv"),
        latent=src.latent,
    )


def write_demo_inputs(folder: str | Path) -> dict[str, Path]:
    """Copy the embedded ``runs.tsv``, ``qrels.tsv`` and ``pools.tsv`` into ``folder``, byte for byte.

    They are the files ``rcp-jax evaluate --runs/--qrels/--pools`` reads, so the demo's store can be
    refitted (say with ``rcp-jax fit --method nuts``) and its systems scored again.

    Returns:
        ``{"runs": path, "qrels": path, "pools": path}``.
    """
    from rcp_jax.data.atomic import atomic_write_bytes

    return {name.removesuffix(".tsv"): atomic_write_bytes(Path(folder) / name, (FILES / name).read_bytes())
            for name in INPUT_FILES}

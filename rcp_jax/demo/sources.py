"""Read the demo's shipped files (``rcp_jax/demo/files/``): the hand-written tables and the derived pools and runs.

The hand-written files (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``, ``latent.jsonl``) are read by
:func:`read_sources`; the derived ones (``pools.tsv``, ``runs.tsv``, made by :mod:`rcp_jax.demo.rebuild`) by
:func:`read_pools` and :func:`read_runs`. :data:`FILES` is the installed folder.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError

FILES: Traversable = resources.files("rcp_jax.demo") / "files"
"""The installed folder of the demo files (an ``importlib.resources`` traversable)."""


@dataclass(frozen=True)
class Sources:
    """The hand-written tables, as DataFrames with string ids.

    Attributes:
        corpus: ``doc_id, title, text``.
        queries: ``query_id, text``.
        qrels: ``query_id, doc_id, grade`` (int).
        latent: ``query_id, doc_id, latent`` (float).
    """

    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    latent: pd.DataFrame


def _jsonl(text: str, source: str) -> list[dict]:
    rows = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise DataError(f"{source}, line {i}: not valid JSON ({err.msg}); fix the line") from None
    return rows


def read_sources(folder: Path | str | None = None) -> Sources:
    """Read the hand-written demo files from ``folder`` (default: the installed :data:`FILES`)."""
    base = FILES if folder is None else Path(folder)

    def text(name: str) -> str:
        path = base / name
        if not path.is_file():
            raise DataError(f"demo file {name} not found in {base}; reinstall rcp-jax or pass the folder")
        return path.read_text(encoding="utf-8")

    corpus = pd.DataFrame(_jsonl(text("corpus.jsonl"), "corpus.jsonl"))
    corpus = corpus.rename(columns={"_id": "doc_id"})[["doc_id", "title", "text"]].astype(str)
    queries = pd.DataFrame(_jsonl(text("queries.jsonl"), "queries.jsonl"))
    queries = queries.rename(columns={"_id": "query_id"})[["query_id", "text"]].astype(str)
    qrels = pd.read_csv(io.StringIO(text("qrels.tsv")), sep="\t", dtype=str)
    qrels = qrels.rename(columns={"query-id": "query_id", "corpus-id": "doc_id", "score": "grade"})
    qrels["grade"] = qrels["grade"].astype(int)
    latent = pd.DataFrame(_jsonl(text("latent.jsonl"), "latent.jsonl"), columns=["query_id", "doc_id", "latent"])
    latent["query_id"] = latent["query_id"].astype(str)
    latent["doc_id"] = latent["doc_id"].astype(str)
    latent["latent"] = latent["latent"].astype(np.float64)
    return Sources(corpus=corpus, queries=queries, qrels=qrels, latent=latent)


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

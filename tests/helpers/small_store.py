"""A small collection judged once by ``rcp-jax judge`` for the store tests (3 queries x 12 documents).

The CLI's simulated judge is driven by graded qrels, which come from the synthetic latent relevance.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np

from rcp_jax.judging import synthetic_dataset
from rcp_jax.cli import main

QUERIES, DOCUMENTS, LATENT = synthetic_dataset(3, 12, seed=1, doc_chars=60)
POOLS = {q: sorted(d) for q, d in DOCUMENTS.items()}
#: graded qrels from the latent relevance (the CLI's simulated judge is driven by the qrels)
QRELS = {q: {d: int(np.clip(np.floor(v + 2.0), 0, 3)) for d, v in LATENT[q].items()} for q in POOLS}


def write_rows(path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for q, docs in POOLS.items():
            fh.write(json.dumps({"query_id": q, "query": QUERIES[q], "doc_ids": docs,
                                 "docs": [DOCUMENTS[q][d] for d in docs], "qrels": QRELS[q]}) + "\n")
    return path


def cli_judge(rows: Path, store: Path, *extra: str) -> tuple[int, dict | None, str]:
    """``rcp-jax judge --json`` in this process: (exit code, its JSON summary or None, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        rc = main(["judge", "--rows", str(rows), "--store", str(store), "--json", *extra])
    return rc, (json.loads(out.getvalue()) if rc == 0 else None), err.getvalue()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".lock"}

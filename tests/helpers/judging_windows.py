"""Small window sets for the judging tests."""

from __future__ import annotations

from rcp_jax.judging import Window


def make_windows(documents: dict[str, dict[str, str]], *, per_query: int = 3, size: int = 5) -> list[Window]:
    """``per_query`` tournament and ``per_query`` rubric windows of ``size`` documents for each query."""
    out = []
    for qid, docs in documents.items():
        ids = sorted(docs)
        for s in range(per_query):
            chunk = tuple(ids[(s * size + k) % len(ids)] for k in range(size))
            out.append(Window(qid, "tournament", "round1", s, chunk))
            out.append(Window(qid, "rubric", "balanced", s, chunk[::-1]))
    return out

"""Window-score tables for the encoding and fitting tests, and a plain-Python encoding to check them against."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rcp_jax.models.simulate import simulate_judgements


def simulated_windows(seed: int, pools: list[int], *, shared_docs: bool = False, ints: bool = False,
                      placements: float = 4) -> pd.DataFrame:
    """A window-score table of simulated judgements (``len(pools)`` queries of these pool sizes): string ids
    ``q<i>``, ``w<k>-<j>`` (window ids that do not sort in input order), ``q<i>:d<j>`` (``d<j>`` with
    ``shared_docs``: the same document ids in every query), or integer ids with ``ints``. Windows hold 2 to
    10 documents, each window one run of rows."""
    sim = simulate_judgements(seed, pools, tournament_placements=placements)
    top = len(pools) - 1
    rows = []
    for w, (docs, scores, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query)):
        for d, s in zip(docs, scores):
            if d >= 0:
                if ints:
                    rows.append((top - q, w % 7 * 100 + w, 1000 * q + d, s))
                else:
                    rows.append((f"q{top - q}", f"w{(7 * w) % 11}-{w}", f"d{d}" if shared_docs else f"q{q}:d{d}", s))
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])


def reference_numbers(ws: pd.DataFrame) -> tuple[list, dict]:
    """``(windows, numbers)`` by plain Python: the windows ``[(query, window, [(doc, score), ...])]`` sorted by
    (query, window id) as strings, a window's documents in row order, and ``numbers[(query, doc)]``: the
    document's number in its query, by first appearance in that order."""
    windows: dict = {}
    for q, w, d, s in zip(*(ws[c].astype(str) for c in ("query_id", "window_id", "doc_id")), ws["score"]):
        windows.setdefault((q, w), []).append((d, float(s)))
    ordered = [(q, w, windows[(q, w)]) for q, w in sorted(windows)]
    numbers: dict = {}
    count: dict = {}
    for q, _, docs in ordered:
        for d, _ in docs:
            if (q, d) not in numbers:
                numbers[(q, d)] = count.get(q, 0)
                count[q] = numbers[(q, d)] + 1
    return ordered, numbers


def reference_encoding(ws: pd.DataFrame):
    """``(doc_index, scores, window_query, n_docs)`` of :func:`reference_numbers`'s layout: one row per window
    (-1 and 0 in empty slots), queries numbered in sorted order."""
    ordered, numbers = reference_numbers(ws)
    queries = sorted({q for q, _, _ in ordered})
    width = max((len(docs) for _, _, docs in ordered), default=1)
    doc_index = np.full((len(ordered), width), -1)
    scores = np.zeros((len(ordered), width))
    for i, (q, _, docs) in enumerate(ordered):
        doc_index[i, : len(docs)] = [numbers[(q, d)] for d, _ in docs]
        scores[i, : len(docs)] = [s for _, s in docs]
    n_docs = np.bincount([queries.index(q) for q, _ in numbers], minlength=len(queries))
    return doc_index, scores, np.array([queries.index(q) for q, _, _ in ordered]), n_docs


def assert_encodes_like_the_reference(table: pd.DataFrame, enc) -> None:
    """``enc`` (a :class:`rcp_jax.encoding.WindowArrays` of ``table``) has the reference's arrays and the
    documented dtypes; its queries are sorted, ``query_order`` and the pairs follow first appearance in the
    input, and each pair carries its document's number."""
    assert enc.doc_index.dtype == np.int32 and enc.scores.dtype == np.float64
    assert all(a.dtype == np.int64 for a in (enc.window_query, enc.n_docs, enc.pair_query, enc.pair_doc, enc.query_order))
    for got, want in zip((enc.doc_index, enc.scores, enc.window_query, enc.n_docs), reference_encoding(table)):
        np.testing.assert_array_equal(got, want)
    strings = table.assign(**{c: table[c].astype(str) for c in ("query_id", "doc_id")})
    assert list(enc.query_names) == sorted(strings["query_id"].unique())
    assert list(enc.query_names.take(enc.query_order)) == list(pd.unique(strings["query_id"]))
    pairs = list(zip(enc.query_names.take(enc.pair_query), enc.pair_doc_id))
    assert pairs == list(strings[["query_id", "doc_id"]].drop_duplicates().itertuples(index=False, name=None))
    _, numbers = reference_numbers(table)
    assert enc.pair_doc.tolist() == [numbers[pair] for pair in pairs]

"""The usual window-score table (every window one run of equal width, each query
one run, arrow string ids) is numbered and laid out chunk by chunk as its document ids are coded
(:class:`rcp_jax.tournament._ChunkNumbering`), with the work shared by a
:class:`~rcp_jax.data.task_queue.TaskQueue`. Checked here, with chunks forced small so that a small table
takes many: the result equals a plain-Python reference and the general path, bit for bit, whatever the
query and window order and the number of helper threads; the cases it cannot take (a document in two
queries, a document twice in a window) fall back to the general path, with its answers and its messages.
The helpers it is built from (:func:`change_bits`, :func:`run_starts`, :func:`id_codes_at`,
:func:`_with_starts`) equal the functions they replace. Speed: benchmarks/public_api_speed.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax import tournament
from rcp_jax.data import table_checks
from rcp_jax.errors import DataError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_chunked_id_codes import _same_encoding  # noqa: E402  (field by field, dtypes included)
from test_window_encoding_reference import _reference_encoding  # noqa: E402  (plain-Python encoding)

#: Names whose byte order is their code-point order, not their ASCII-lowercase order.
_ODD_NAMES = ["Zeta", "alpha", "é-1", "ä", "b10", "b9", "日本", "a b", "A"]


def _table(n_queries: int = 12, width: int = 5, seed: int = 0, *, shuffle_queries: bool = False,
           shared_docs: bool = False) -> pd.DataFrame:
    """Windows of exactly ``width`` distinct documents, each window one run of rows, each query one run,
    window ids that do not sort in input order; arrow string ids (the ``str`` dtype)."""
    rng = np.random.default_rng(seed)
    rows = []
    order = rng.permutation(n_queries) if shuffle_queries else np.arange(n_queries)
    for q in order:
        n_docs = int(rng.integers(width + 1, 3 * width))
        for w in range(int(rng.integers(3, 9))):
            docs = rng.choice(n_docs, size=width, replace=False)
            name = f"{_ODD_NAMES[w % len(_ODD_NAMES)]}#{int(rng.integers(0, 50))}-{w}"
            for d in docs:
                doc = f"d{d}" if shared_docs else f"q{q}:d{d}"
                rows.append((f"q{q:02d}", name, doc, float(np.round(rng.normal(), 3))))
    table = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    for col in ("query_id", "window_id", "doc_id"):
        table[col] = table[col].astype("str")
    return table


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of >= 16 rows (several per table)."""
    monkeypatch.setattr(table_checks, "CHUNK_ROWS", 16)


@pytest.fixture
def counted(monkeypatch):
    """Counts the chunks numbered by the fast path and those it could not take (False)."""
    seen = {"chunks": 0, "refused": 0}
    numbers = tournament._ChunkNumbering._numbers

    def counting(self, *args):
        out = numbers(self, *args)
        seen["chunks"] += 1
        seen["refused"] += out is False
        return out

    monkeypatch.setattr(tournament._ChunkNumbering, "_numbers", counting)
    return seen


def _general(table: pd.DataFrame) -> tournament.WindowArrays:
    """The general path's encoding of ``table`` (the fast path switched off)."""
    saved = tournament._ChunkNumbering.result
    tournament._ChunkNumbering.result = lambda self: (saved(self), None)[1]
    try:
        return tournament.encode_window_scores(table)
    finally:
        tournament._ChunkNumbering.result = saved


def _equals_reference(table: pd.DataFrame, enc: tournament.WindowArrays) -> None:
    doc_index, scores, window_query, n_docs = _reference_encoding(table)
    np.testing.assert_array_equal(enc.doc_index, doc_index)
    np.testing.assert_array_equal(enc.scores, scores)
    np.testing.assert_array_equal(enc.window_query, window_query)
    np.testing.assert_array_equal(enc.n_docs, n_docs)
    pairs = list(zip(enc.query_names.take(enc.pair_query), enc.pair_doc_id))
    assert pairs == list(table[["query_id", "doc_id"]].drop_duplicates().itertuples(index=False, name=None))


@pytest.mark.parametrize("chunk_rows", [16, 100])  # ~one query a chunk / several
@pytest.mark.parametrize("shuffle_queries", [False, True])  # a chunk's windows one block of rows / scattered
@pytest.mark.parametrize("helpers", [0, 1, 2])
def test_chunk_numbering_equals_the_reference_and_the_general_path(counted, monkeypatch, chunk_rows,
                                                                    shuffle_queries, helpers):
    monkeypatch.setattr(tournament, "id_helpers", lambda: helpers)
    monkeypatch.setattr(table_checks, "CHUNK_ROWS", chunk_rows)
    table = _table(shuffle_queries=shuffle_queries)
    enc = tournament.encode_window_scores(table)
    chunks = len(table_checks.chunk_bounds(np.flatnonzero(table_checks.run_heads(table["query_id"])), len(table))) - 1
    assert counted == {"chunks": chunks, "refused": 0} and chunks > 2  # the fast path took every chunk
    _equals_reference(table, enc)
    _same_encoding(enc, _general(table))


def test_chunk_numbering_fits_bit_for_bit_like_the_general_path(small_chunks, counted):
    table = _table(n_queries=8, seed=3, shuffle_queries=True)
    fast = rcp_jax.fit_bradley_terry(table)
    assert counted["chunks"] > 3 and counted["refused"] == 0
    general = rcp_jax.fit_bradley_terry(table.astype({"doc_id": object}))  # object ids: no chunks
    pd.testing.assert_frame_equal(fast, general, check_exact=True)


@pytest.mark.parametrize("chunk_rows", [16, 100])
def test_a_document_in_two_queries_falls_back_to_the_general_path(monkeypatch, counted, chunk_rows):
    monkeypatch.setattr(table_checks, "CHUNK_ROWS", chunk_rows)
    table = _table(n_queries=10, seed=1, shared_docs=True)  # "d3" in every query
    enc = tournament.encode_window_scores(table)
    # queries of one chunk sharing ids: the general path; one query per chunk: two codes for two queries' "d3"
    assert (counted["refused"] >= 1) == (chunk_rows == 100)
    _equals_reference(table, enc)


def test_a_document_twice_in_a_window_gets_the_general_message(small_chunks, counted):
    table = _table(n_queries=10, seed=2)
    row = len(table) - 7  # inside a late chunk: its window's first row gets the doc id of the next row
    window = table["window_id"].iloc[row]
    first = table.index[table["window_id"].eq(window) & table["query_id"].eq(table["query_id"].iloc[row])][0]
    table.loc[first, "doc_id"] = table.loc[first + 1, "doc_id"]
    with pytest.raises(DataError) as fast:
        tournament.encode_window_scores(table)
    assert counted["refused"] >= 1
    with pytest.raises(DataError) as general:
        tournament.encode_window_scores(table.astype({"doc_id": object}))
    assert str(fast.value) == str(general.value)
    assert "appears more than once in window" in str(fast.value)


def test_an_error_leaves_the_pool_free(small_chunks):
    bad = _table(n_queries=6, seed=4)
    bad.loc[len(bad) - 1, "score"] = np.nan
    for _ in range(3):  # a helper left waiting would hold a worker of the two-worker pool
        with pytest.raises(DataError, match="finite"):
            tournament.encode_window_scores(bad)
    assert table_checks.id_pool().submit(lambda: "free").result(timeout=10) == "free"
    _equals_reference(_table(), tournament.encode_window_scores(_table()))


@pytest.mark.parametrize("kind", ["str", "object", "category", "int"])
def test_run_helpers_equal_the_functions_they_replace(kind):
    rng = np.random.default_rng(5)
    raw = np.repeat(rng.integers(0, 6, size=40), rng.integers(1, 4, size=40))
    column = pd.Series(raw if kind == "int" else [_ODD_NAMES[v] for v in raw])
    column = column.astype({"str": "str", "object": object, "category": "category", "int": np.int64}[kind])
    heads = np.flatnonzero(table_checks.run_heads(column))
    np.testing.assert_array_equal(table_checks.run_starts(len(column), table_checks.change_bits(column)), heads)
    other = pd.Series(np.arange(len(column)) // 7)
    both = np.flatnonzero(table_checks.run_heads(column) | table_checks.run_heads(other))
    bits = (table_checks.change_bits(column), table_checks.change_bits(other))
    np.testing.assert_array_equal(table_checks.run_starts(len(column), *bits), both)
    for sort in (False, True):
        codes, names = table_checks.id_codes_at(column, heads, sort=sort)
        want_codes, want_names = table_checks.id_codes(column.take(heads), sort=sort)
        np.testing.assert_array_equal(codes, want_codes)
        pd.testing.assert_index_equal(names, want_names, exact=True)
    assert len(table_checks.run_starts(0, table_checks.change_bits(column.iloc[:0]))) == 0


def test_with_starts_is_the_sorted_union():
    rng = np.random.default_rng(6)
    for _ in range(50):
        heads = np.unique(rng.integers(0, 200, size=int(rng.integers(1, 60))))
        more = np.unique(rng.integers(0, 220, size=int(rng.integers(0, 8))))
        np.testing.assert_array_equal(tournament._with_starts(heads, more), np.union1d(heads, more))

"""Window scores -> the Bradley-Terry kernel's arrays (:func:`rcp_jax.encoding.encode_window_scores`): every
row layout and id dtype gives the arrays of a plain-Python encoding, a fit does not depend on the order of the
rows, and bad tables are refused naming the row or the query, window and document. Speed is measured by
benchmarks/public_api_speed.py, never here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.encoding import encode_window_scores
from tests.helpers.window_tables import assert_encodes_like_the_reference, simulated_windows

#: Window names whose byte order is their code-point order, not their ASCII-lowercase order.
_ODD_NAMES = ["Zeta", "alpha", "é-1", "ä", "b10", "b9", "日本", "a b", "A"]


@pytest.fixture(scope="module")
def ws() -> pd.DataFrame:
    return simulated_windows(11, [9, 14, 6, 11, 8])


def _full_windows(n_queries: int = 12, width: int = 5, seed: int = 0, *, shuffle: bool = False,
                  shared_docs: bool = False) -> pd.DataFrame:
    """Windows of exactly ``width`` distinct documents (each window one run of rows, each query one run,
    queries in sorted or shuffled order), window names that sort neither in input nor in ASCII order;
    arrow string ids (the ``str`` dtype)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in rng.permutation(n_queries) if shuffle else range(n_queries):
        n_docs = int(rng.integers(width + 1, 3 * width))
        for w in range(int(rng.integers(3, 9))):
            name = f"{_ODD_NAMES[w % len(_ODD_NAMES)]}#{int(rng.integers(0, 50))}-{w}"
            for d in rng.choice(n_docs, size=width, replace=False):
                rows.append((f"q{q:02d}", name, f"d{d}" if shared_docs else f"q{q}:d{d}", float(np.round(rng.normal(), 3))))
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"]).astype(
        {"query_id": "str", "window_id": "str", "doc_id": "str"})


def _layouts(ws: pd.DataFrame) -> dict[str, pd.DataFrame]:
    key = ws.groupby(["query_id", "window_id"], sort=False).cumcount().to_numpy()
    full = ws[ws.groupby(["query_id", "window_id"])["doc_id"].transform("size") == 10]
    return {
        "windows of 2-10 documents": ws,
        "rows reversed": ws.iloc[::-1],
        "windows' rows interleaved": ws.iloc[np.argsort(key, kind="stable")],  # no window is one run of rows
        # a window's rows in two runs with another window's rows between them
        "a window split": pd.concat([ws.iloc[:4], ws.iloc[12:15], ws.iloc[4:12], ws.iloc[15:]]),
        "the same document ids in every query": ws.assign(doc_id=ws["doc_id"].str.split(":").str[1]),
        "every window full": full,
    }


@pytest.mark.parametrize("layout", list(_layouts(simulated_windows(0, [3, 4])).keys()))
def test_every_row_layout_encodes_like_the_reference(ws, layout):
    table = _layouts(ws)[layout]
    assert len(table) > 0
    assert_encodes_like_the_reference(table, encode_window_scores(table))


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("shared_docs", [False, True])
def test_arrow_string_tables_of_full_windows_encode_like_the_reference(shuffle, shared_docs):
    table = _full_windows(shuffle=shuffle, shared_docs=shared_docs)
    assert_encodes_like_the_reference(table, encode_window_scores(table))


def test_an_empty_table_encodes_to_empty_arrays(ws):
    enc = encode_window_scores(ws.iloc[:0])
    assert enc.doc_index.shape[0] == 0 and len(enc.query_names) == 0 and len(enc.pair_doc) == 0


def test_ids_of_any_dtype_fit_as_their_strings():
    ints = simulated_windows(11, [9, 14, 6], ints=True)
    as_str = ints.assign(**{c: ints[c].astype(str) for c in ("query_id", "window_id", "doc_id")})
    ref = rcp_jax.fit_bradley_terry(as_str)
    assert_encodes_like_the_reference(ints, encode_window_scores(ints))
    variants = {
        "ints": ints,
        "categorical": ints.assign(**{c: ints[c].astype(str).astype("category") for c in ("query_id", "window_id", "doc_id")}),
        "objects": as_str.astype({"query_id": object, "doc_id": object}),
        "string[python]": as_str.astype({"query_id": "string[python]", "window_id": "string[python]"}),
        "str": as_str.astype({"query_id": "str", "window_id": "str", "doc_id": "str"}),
    }
    variants["categorical"]["doc_id"] = variants["categorical"]["doc_id"].cat.add_categories(["unused"])
    for name, table in variants.items():
        got = rcp_jax.fit_bradley_terry(table)
        pd.testing.assert_frame_equal(got, ref, check_exact=True, obj=name)
        assert got.attrs == ref.attrs


def test_the_fit_does_not_depend_on_the_order_of_windows_or_on_shared_document_ids(ws):
    key = ["query_id", "doc_id"]
    a = rcp_jax.fit_bradley_terry(ws)
    for name in ("windows' rows interleaved", "a window split"):  # each window's rows keep their order
        b = rcp_jax.fit_bradley_terry(_layouts(ws)[name])
        pd.testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True),
                                      check_exact=True, obj=name)
    # the same documents with ids shared across queries: the same scores
    shared = rcp_jax.fit_bradley_terry(ws.assign(doc_id=ws["doc_id"].str.split(":").str[1]))
    np.testing.assert_array_equal(shared["theta"].to_numpy(), a["theta"].to_numpy())


def test_missing_ids_are_refused_by_row(ws):
    for col, row, dtype in (("doc_id", 5, None), ("window_id", 7, object), ("query_id", 9, object), ("doc_id", 3, "str")):
        bad = ws.astype({col: dtype}) if dtype else ws.copy()
        bad.loc[row, col] = None
        with pytest.raises(rcp_jax.DataError, match=rf"{col} of window-score row {row} is missing; every row needs"):
            encode_window_scores(bad)


@pytest.mark.parametrize("dtype", [object, "str", "category"])
@pytest.mark.parametrize("where", ["first window", "a late window", "rows reversed"])
def test_a_document_twice_in_a_window_is_refused_by_its_ids(ws, dtype, where):
    table = (ws.iloc[::-1] if where == "rows reversed" else ws).reset_index(drop=True)
    row = 1 if where == "first window" else len(table) - 3
    same_window = (table["query_id"] == table["query_id"][row]) & (table["window_id"] == table["window_id"][row])
    first, second = np.flatnonzero(same_window)[:2]
    table.loc[second, "doc_id"] = table.loc[first, "doc_id"]
    table = table.astype({c: dtype for c in ("query_id", "window_id", "doc_id")})
    want = (rf"document '{table.doc_id[first]}' appears more than once in window '{table.window_id[first]}' of query "
            rf"'{table.query_id[first]}'; a window shows each document once")
    with pytest.raises(rcp_jax.DataError, match=want):
        encode_window_scores(table)


def test_a_window_of_one_document_is_refused_by_its_ids():
    ints = simulated_windows(11, [9, 14, 6], ints=True)
    single = ints[~((ints["window_id"] == ints["window_id"][0]) & (ints.index > 0))]
    with pytest.raises(rcp_jax.DataError, match=rf"window '{ints.window_id[0]}' of query '{ints.query_id[0]}' has a "
                                                r"single document; a window needs at least two documents"):
        encode_window_scores(single)
    full = _full_windows(width=2)
    lonely = full.drop(index=full.index[-1])  # the last window of a table of full windows keeps one document
    with pytest.raises(rcp_jax.DataError, match=rf"window '{full.window_id.iloc[-1]}' of query "
                                                rf"'{full.query_id.iloc[-1]}' has a single document"):
        encode_window_scores(lonely)


def test_refusals_come_in_the_order_of_the_checks(ws):
    """A table with several faults is refused for the first in this order: columns, scores, missing ids
    (query, window, document), a document twice in a window, a window of one document."""
    bad = ws.astype({"score": object, "query_id": object})
    bad.loc[40, "window_id"] = "lonely"  # a window of one document
    bad.loc[31, "doc_id"] = bad.loc[30, "doc_id"]  # ... a document twice (later in the table)
    with pytest.raises(rcp_jax.DataError, match="appears more than once"):
        encode_window_scores(bad)
    bad.loc[50, "doc_id"] = None
    with pytest.raises(rcp_jax.DataError, match="doc_id of window-score row 50 is missing"):
        encode_window_scores(bad)
    bad.loc[60, "query_id"] = None
    with pytest.raises(rcp_jax.DataError, match="query_id of window-score row 60 is missing"):
        encode_window_scores(bad)
    bad.loc[70, "score"] = "high"
    with pytest.raises(rcp_jax.DataError, match=r"score of document '.*' in window '.*' of query '.*' is 'high'; "
                                                "scores must be finite"):
        encode_window_scores(bad)
    with pytest.raises(rcp_jax.DataError, match=r"window scores is missing column\(s\) \['window_id'\]"):
        encode_window_scores(bad.drop(columns="window_id"))


def _same_arrays(a, b) -> None:
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, pd.Index):
            pd.testing.assert_index_equal(x, y, exact=True)
        else:
            assert x.dtype == y.dtype and np.array_equal(x, y), name


def _tables_in_blocks() -> dict[str, pd.DataFrame]:
    ws = simulated_windows(5, [9, 14, 6, 11, 8, 12, 5, 10])  # windows of 2-10 documents
    full = _full_windows(n_queries=10, width=4, seed=2)
    narrow = _full_windows(n_queries=6, width=2, seed=3).assign(query_id=lambda t: "z" + t["query_id"])
    again = ws[ws["query_id"] == ws["query_id"].iloc[0]].assign(window_id=lambda t: t["window_id"] + "-again")
    return {
        "windows of 2-10 documents": ws,
        "queries in reverse order": ws.iloc[::-1],
        "full windows, queries shuffled": _full_windows(n_queries=10, width=4, seed=2, shuffle=True),
        "blocks of different widths": pd.concat([narrow, full], ignore_index=True),
        "categorical ids": full.astype({"query_id": "category", "doc_id": "category"}),
        "a query in two blocks": pd.concat([ws, again], ignore_index=True),
        "the same document ids in every query": _full_windows(n_queries=10, width=4, seed=2, shared_docs=True),
    }


@pytest.mark.parametrize("name", list(_tables_in_blocks()))
def test_blocks_of_whole_queries_join_into_the_whole_tables_arrays(monkeypatch, name):
    from rcp_jax.encoding import windows

    table = _tables_in_blocks()[name]
    whole = encode_window_scores(table)
    monkeypatch.setattr(windows, "BLOCK_ROWS", 30)
    cuts = windows._query_cuts(table["query_id"], 30)
    assert len(cuts) > 3 and all(table["query_id"].iloc[c] != table["query_id"].iloc[c - 1] for c in cuts[1:-1])
    joined = []
    monkeypatch.setattr(windows, "_join", lambda blocks, join=windows._join: joined.append(len(blocks)) or join(blocks))
    in_blocks = encode_window_scores(table)
    assert joined == ([] if name == "a query in two blocks" else [len(cuts) - 1])  # else the whole table's encoding
    _same_arrays(in_blocks, whole)
    assert_encodes_like_the_reference(table, in_blocks)


@pytest.mark.parametrize("fault", ["twice late, missing id early", "single early, twice late", "score late"])
def test_a_table_in_blocks_is_refused_as_a_whole(monkeypatch, fault):
    """The blocks' encodings never change which fault is named: the order of the checks over the whole table."""
    from rcp_jax.encoding import windows

    table = simulated_windows(5, [9, 14, 6, 11, 8, 12, 5, 10]).astype({"query_id": object, "score": object})
    late, early = len(table) - 4, 5
    if fault == "twice late, missing id early":
        table.loc[late, "doc_id"] = table.loc[late - 1, "doc_id"]
        table.loc[early, "query_id"] = None
    elif fault == "single early, twice late":
        table.loc[early, "window_id"] = "lonely"
        table.loc[late, "doc_id"] = table.loc[late - 1, "doc_id"]
    else:
        table.loc[late, "score"] = "high"
    with pytest.raises(rcp_jax.DataError) as whole:
        encode_window_scores(table)
    monkeypatch.setattr(windows, "BLOCK_ROWS", 30)
    with pytest.raises(rcp_jax.DataError) as in_blocks:
        encode_window_scores(table)
    assert str(in_blocks.value) == str(whole.value)

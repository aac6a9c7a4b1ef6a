"""Issue 20, second cut: the table -> arrays paths by integer codes (run heads of query and window ids,
ids of any dtype coded by their distinct values, whole-window gathers, calibrate's matching by codes) give
the same answers as plain references and as string-typed inputs, bit for bit; refusals stay clear.
Speed itself is measured by benchmarks/public_api_speed.py, never here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from models.simulate import simulate_judgements
from rcp_jax.calibration import degenerate_data_flags
from rcp_jax.data.table_checks import id_codes, id_positions, id_strings, run_codes, run_heads
from rcp_jax.tournament import encode_window_scores


def _reference_encoding(ws: pd.DataFrame):
    """Plain Python: windows sorted by (query, window id) as strings, slots in row order, each query's
    documents numbered by first appearance in that order."""
    windows: dict = {}
    for q, w, d, s in zip(*(ws[c].astype(str) for c in ("query_id", "window_id", "doc_id")), ws["score"]):
        windows.setdefault((q, w), []).append((d, float(s)))
    queries = sorted({q for q, _ in windows})
    numbering: dict = {q: {} for q in queries}
    rows = []
    for q, w in sorted(windows):
        rows.append(([numbering[q].setdefault(d, len(numbering[q])) for d, _ in windows[(q, w)]],
                     [s for _, s in windows[(q, w)]], queries.index(q)))
    width = max(len(r[0]) for r in rows)
    di = np.full((len(rows), width), -1)
    sc = np.zeros((len(rows), width))
    for i, (d, s, _) in enumerate(rows):
        di[i, : len(d)] = d
        sc[i, : len(s)] = s
    return di, sc, np.array([r[2] for r in rows]), np.array([len(numbering[q]) for q in queries])


@pytest.fixture(scope="module")
def sim():
    return simulate_judgements(11, [9, 14, 6], tournament_placements=4)


def _windows(sim, *, ints: bool = False) -> pd.DataFrame:
    rows = []
    for w, (docs, sc, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query)):
        for d, s in zip(docs, sc):
            if d >= 0:
                rows.append((2 - q, w % 7 * 100 + w, 1000 * q + d, s) if ints else
                            (f"q{2 - q}", f"w{(7 * w) % 11}-{w}", f"q{q}:d{d}", s))
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])


def _answers(sim) -> pd.DataFrame:
    out = pd.DataFrame({"query_id": [f"q{2 - q}" for q in sim.rubric_query],
                        "doc_id": [f"q{q}:d{d}" for q, d in zip(sim.rubric_query, sim.rubric_doc)]})
    for c in range(sim.rubric_answers.shape[1]):
        out[f"C{c + 1}"] = sim.rubric_answers[:, c].astype(np.int8)
    return out


def _check_encoding(table: pd.DataFrame) -> None:
    enc = encode_window_scores(table)
    assert enc.doc_index.dtype == np.int32 and enc.scores.dtype == np.float64
    assert all(a.dtype == np.int64 for a in (enc.window_query, enc.n_docs, enc.pair_query, enc.pair_doc))
    for got, want in zip((enc.doc_index, enc.scores, enc.window_query, enc.n_docs), _reference_encoding(table)):
        assert np.array_equal(got, want)
    pairs = list(zip(enc.query_names.take(enc.pair_query), enc.pair_doc_id))
    strings = table.assign(query_id=table["query_id"].astype(str), doc_id=table["doc_id"].astype(str))
    assert pairs == list(strings[["query_id", "doc_id"]].drop_duplicates().itertuples(index=False, name=None))


def test_layouts_equal_the_reference(sim):
    ws = _windows(sim)
    assert (ws.groupby(["query_id", "window_id"]).size() < 10).any()  # padded windows: the scatter path
    key = ws.groupby(["query_id", "window_id"], sort=False).cumcount().to_numpy()
    interleaved = ws.iloc[np.argsort(key, kind="stable")]  # no window is one run
    # a window's rows split into two runs with another window's rows between them
    split = pd.concat([ws.iloc[:4], ws.iloc[12:15], ws.iloc[4:12], ws.iloc[15:]])
    shared = ws.assign(doc_id=ws["doc_id"].str.split(":").str[1])  # the same doc ids in every query
    full = ws[ws.groupby(["query_id", "window_id"])["doc_id"].transform("size") == 10]  # every window full
    assert len(full) % 10 == 0 and len(full) > 0
    for table in (ws, interleaved, split, shared, full, ws.iloc[::-1]):
        _check_encoding(table)


def test_ids_of_any_dtype_fit_as_their_strings(sim):
    ws = _windows(sim, ints=True)
    as_str = ws.assign(**{c: ws[c].astype(str) for c in ("query_id", "window_id", "doc_id")})
    ref = rcp_jax.fit_bradley_terry(as_str)
    _check_encoding(ws)
    variants = {
        "ints": ws,
        "categorical": ws.assign(**{c: ws[c].astype(str).astype("category") for c in ("query_id", "window_id", "doc_id")}),
        "objects": as_str.astype({"query_id": object, "doc_id": object}),
        "string[python]": as_str.astype({"query_id": "string[python]", "window_id": "string[python]"}),
    }
    variants["categorical"]["doc_id"] = variants["categorical"]["doc_id"].cat.add_categories(["unused"])
    for name, table in variants.items():
        got = rcp_jax.fit_bradley_terry(table)
        pd.testing.assert_frame_equal(got, ref, check_exact=True, obj=name)
        assert got.attrs == ref.attrs


@pytest.mark.parametrize("dtype", ["int64", "object", "category", "float64", "str", "category 1 and '1'",
                                   "category with missing"])
@pytest.mark.parametrize("sort", [False, True])
def test_id_codes_equal_factorize_of_strings(dtype, sort):
    values = {"int64": [30, 4, 30, 200, 4], "object": [1, "1", 2.5, "x", 2.5], "category": ["b", "a", "b", "c", "a"],
              "float64": [1.0, np.nan, 2.5, 1.0, 3.0], "str": ["b", "a", "b", "c", "a"],
              # two categories that read as one id: runs and codes follow the strings, not the categories
              "category 1 and '1'": [1, "1", 1, "a", "1"], "category with missing": ["b", None, None, "a", "b"]}[dtype]
    col = pd.Series(values, dtype=dtype.split()[0])
    codes, names = id_codes(col, sort=sort)
    ref_codes, ref_names = pd.factorize(id_strings(col), sort=sort)
    assert np.array_equal(codes, ref_codes) and names.equals(ref_names) and names.dtype == ref_names.dtype
    run, run_names = run_codes(col, sort=sort)
    assert np.array_equal(run, ref_codes) and run_names.equals(ref_names)
    strings = id_strings(col).astype(object).tolist()
    same = [a == b or (pd.isna(a) and pd.isna(b)) for a, b in zip(strings[1:], strings[:-1])]  # missing: one run
    heads = [0] + [i + 1 for i, s in enumerate(same) if not s]
    assert np.flatnonzero(run_heads(col)).tolist() == heads
    pos = id_positions(col, pd.Index(["c", "1", "30", "a", "2.5"], dtype="str"))
    ref = pd.Index(["c", "1", "30", "a", "2.5"]).get_indexer(id_strings(col).astype(object))
    assert np.array_equal(pos, np.where(id_strings(col).isna().to_numpy(), -1, ref))


def test_refusals_name_the_row_and_the_ids(sim):
    ws = _windows(sim)
    missing = ws.copy()
    missing.loc[5, "doc_id"] = None
    with pytest.raises(rcp_jax.DataError, match=r"doc_id of window-score row 5 is missing; every row needs"):
        encode_window_scores(missing)
    missing = ws.astype({"window_id": object})
    missing.loc[7, "window_id"] = np.nan
    with pytest.raises(rcp_jax.DataError, match=r"window_id of window-score row 7 is missing"):
        encode_window_scores(missing)
    twice = ws.astype({"doc_id": "category"})
    twice.loc[1, "doc_id"] = twice.loc[0, "doc_id"]
    with pytest.raises(rcp_jax.DataError, match=rf"document '{ws.doc_id[0]}' appears more than once in window "
                                                rf"'{ws.window_id[0]}' of query '{ws.query_id[0]}'"):
        encode_window_scores(twice)
    ints = _windows(sim, ints=True)
    single = ints[~((ints["window_id"] == ints["window_id"][0]) & (ints.index > 0))]
    with pytest.raises(rcp_jax.DataError, match=rf"window '{ints.window_id[0]}' of query '{ints.query_id[0]}' has a "
                                                "single document"):
        encode_window_scores(single)


@pytest.fixture(scope="module")
def calibrated(sim):
    ws, ans = _windows(sim), _answers(sim)
    bt = rcp_jax.fit_bradley_terry(ws)
    return bt, ans, rcp_jax.calibrate(bt, ans)


def _same(a: rcp_jax.Calibration, b: rcp_jax.Calibration, sort: bool = False) -> None:
    docs_a, docs_b, q_a, q_b = a.documents, b.documents, a.queries, b.queries
    if sort:
        docs_a, docs_b = (d.sort_values(["query_id", "doc_id"]).reset_index(drop=True) for d in (docs_a, docs_b))
        q_a, q_b = (q.sort_values("query_id").reset_index(drop=True) for q in (q_a, q_b))
    pd.testing.assert_frame_equal(docs_a, docs_b, check_exact=True)
    pd.testing.assert_frame_equal(q_a, q_b, check_exact=True)
    assert np.array_equal(a.gamma, b.gamma) and np.array_equal(a.beta, b.beta)


def test_calibrate_counts_match_pandas_and_do_not_depend_on_layout_or_dtype(calibrated):
    bt, ans, ref = calibrated
    # placements and count gains against pandas' groupby (an independent implementation)
    per = ans.groupby(["query_id", "doc_id"]).agg(n=("C1", "size"), **{c: (c, "sum") for c in ["C1", "C2", "C3", "C4", "C5"]})
    docs = ref.documents.set_index(["query_id", "doc_id"])
    expected = per.reindex(docs.index)
    assert np.array_equal(docs["placements"].to_numpy(), expected["n"].fillna(0).to_numpy())
    passed = expected[["C1", "C2", "C3", "C4", "C5"]].sum(axis=1).to_numpy()
    np.testing.assert_array_equal(docs["count_gain"].to_numpy(), passed / (5 * expected["n"].to_numpy()))
    rng = np.random.default_rng(0)
    shuffled = ans.iloc[rng.permutation(len(ans))]
    _same(rcp_jax.calibrate(bt, shuffled), ref)  # answers' order: nothing changes
    _same(rcp_jax.calibrate(bt.iloc[rng.permutation(len(bt))], ans), ref, sort=True)  # BT rows' order
    typed = shuffled.astype({"query_id": "category", "doc_id": "category"})
    _same(rcp_jax.calibrate(bt.astype({"doc_id": object}), typed), ref)
    # the same doc ids in every query: matched by (query, document) pairs
    strip = {"doc_id": lambda t: t["doc_id"].str.split(":").str[1]}
    shared = rcp_jax.calibrate(bt.assign(**strip), ans.assign(**strip))
    np.testing.assert_array_equal(shared.documents["gain"].to_numpy(), ref.documents["gain"].to_numpy())
    _same(shared, rcp_jax.calibrate(bt.assign(**strip), shuffled.assign(**strip)))


def test_calibrate_refusals_and_flags(calibrated):
    bt, ans, _ = calibrated
    orphan = ans.copy()
    orphan.loc[[3, 8], "doc_id"] = ["nowhere", "nowhere"]
    orphan.loc[9, "query_id"] = "q9"
    with pytest.raises(rcp_jax.CalibrationError, match=r"rubric answers for document 'nowhere' of query "
                                                       rf"'{ans.query_id[3]}' have no BT score \(2 such documents\)"):
        rcp_jax.calibrate(bt, orphan)
    twice = pd.concat([bt, bt.iloc[[4]]])
    with pytest.raises(rcp_jax.DataError, match=rf"document '{bt.doc_id[4]}' of query '{bt.query_id[4]}' has two BT"):
        rcp_jax.calibrate(twice, ans)
    with pytest.raises(rcp_jax.DataError, match=r"criterion C2 of document .* is 2; answers must be 0 or 1"):
        rcp_jax.calibrate(bt, ans.assign(C2=ans["C2"].astype(np.int64).where(ans.index != 6, 2)))
    # degenerate data, flagged by query in sorted order
    docs = pd.DataFrame({"query_id": ["b", "b", "a", "a", "c"], "doc_id": ["1", "2", "1", "2", "1"],
                         "theta": [0.5, 0.5, -1.0, 1.0, 0.0], "placements": [2.0, 1.0, 1.0, 0.0, 0.0],
                         "C1_pass": [0.0, 0.0, 1.0, np.nan, np.nan], "C2_pass": [0.0, 0.0, 1.0, np.nan, np.nan]})
    flags = degenerate_data_flags(docs, ["C1", "C2"], pd.Series([1.0, 5e-4], index=["a", "b"]), {"c": 2})
    assert {f["kind"]: f["ids"] for f in flags} == {
        "query_all_fail": ["b"], "query_all_pass": ["a"], "bt_no_spread": ["b"], "bt_disconnected": ["c"],
        "tau_collapsed": ["b"]}

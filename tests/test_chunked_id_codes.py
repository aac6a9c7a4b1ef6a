"""Ids coded in chunks of whole queries, calibrate's counts by chunks, the
2PL's finer query padding. Each fast path is checked against the general path it replaces (chunks forced
small here, so small tables take several), bit for bit; speed is measured by benchmarks/table_profile.py."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from models import irt
from models.simulate import simulate_judgements
from rcp_jax import calibration
from rcp_jax.data import table_checks
from rcp_jax.errors import CalibrationError, DataError
from rcp_jax.tournament import _owner_by_ranges, encode_window_scores


@pytest.fixture(scope="module")
def sim():
    return simulate_judgements(5, [9, 14, 6, 11, 8], tournament_placements=4, rubric_placements=3)


def _tables(sim, shared: bool = False):
    rows = [(f"q{q}", f"w{w % 5}-{w}", f"d{d}" if shared else f"q{q}:d{d}", s)
            for w, (docs, sc, q) in enumerate(zip(sim.window_docs, sim.window_scores, sim.window_query))
            for d, s in zip(docs, sc) if d >= 0]
    ws = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    ans = pd.DataFrame({"query_id": [f"q{q}" for q in sim.rubric_query],
                        "doc_id": [f"d{d}" if shared else f"q{q}:d{d}" for q, d in zip(sim.rubric_query, sim.rubric_doc)]})
    for c in range(sim.rubric_answers.shape[1]):
        ans[f"C{c + 1}"] = sim.rubric_answers[:, c].astype(np.int8)
    return ws, ans


def _with_chunk_rows(monkeypatch, rows: int, fun):
    monkeypatch.setattr(table_checks, "CHUNK_ROWS", rows)
    try:
        return fun()
    finally:
        monkeypatch.setattr(table_checks, "CHUNK_ROWS", 1 << 17)


def _same_encoding(a, b) -> None:
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, pd.Index):
            pd.testing.assert_index_equal(x, y, exact=True)
        else:
            assert x.dtype == y.dtype and np.array_equal(x, y), name


def test_documents_coded_in_chunks_encode_as_one_hash(sim, monkeypatch):
    ws, _ = _tables(sim)
    shared, _ = _tables(sim, shared=True)  # the same doc ids in every query: ids span chunks
    key = ws.groupby(["query_id", "window_id"], sort=False).cumcount().to_numpy()
    interleaved = ws.iloc[np.argsort(key, kind="stable")]  # queries not one run each: one hash, no chunks
    for table in (ws, shared, ws.iloc[::-1], interleaved, shared.iloc[::-1]):
        whole = encode_window_scores(table)
        chunked = _with_chunk_rows(monkeypatch, 16, lambda t=table: encode_window_scores(t))
        _same_encoding(chunked, whole)
        ref = rcp_jax.fit_bradley_terry(table)
        got = _with_chunk_rows(monkeypatch, 16, lambda t=table: rcp_jax.fit_bradley_terry(t))
        pd.testing.assert_frame_equal(got, ref, check_exact=True)
        assert got.attrs == ref.attrs


def test_chunk_codes_name_every_row_and_equal_factorize_when_no_id_spans_chunks(sim, monkeypatch):
    ws, _ = _tables(sim)
    shared, _ = _tables(sim, shared=True)
    for table, spans in ((ws, False), (shared, True)):
        heads = np.flatnonzero(table_checks.run_heads(table["query_id"]))
        codes, names = _with_chunk_rows(monkeypatch, 16, lambda t=table, h=heads: table_checks.start_chunk_codes(t["doc_id"], h)())
        ref_codes, ref_names = pd.factorize(table["doc_id"])
        assert codes.dtype == np.int32 and names.dtype == ref_names.dtype
        assert list(names.take(codes)) == list(table["doc_id"])  # every row's own id
        bounds = table_checks.chunk_bounds(heads, len(table), 16)
        assert len(bounds) > 3 and set(bounds[1:-1]) <= set(heads)  # cut at query starts only
        if spans:
            assert len(names) > len(ref_names)  # an id in two chunks has two codes
            for a, b in zip(bounds[:-1], bounds[1:]):  # within a chunk a code is one id and one id one code
                part = pd.factorize(codes[a:b])[0]
                assert np.array_equal(part, pd.factorize(table["doc_id"].iloc[a:b])[0])
        else:
            assert np.array_equal(codes, ref_codes) and names.equals(ref_names)
    assert table_checks.start_chunk_codes(ws["doc_id"].astype(object), np.array([0])) is None


def test_owner_by_ranges_only_when_no_document_is_in_two_runs():
    q_heads, qh_code = np.array([0, 3, 5]), np.array([0, 2, 1])
    owner = _owner_by_ranges(np.array([0, 1, 0, 2, 3, 4, 4, 5]), q_heads, qh_code, 6)
    assert owner.tolist() == [0, 0, 2, 2, 1, 1]
    assert _owner_by_ranges(np.array([0, 1, 0, 2, 1, 3, 3, 4]), q_heads, qh_code, 5) is None  # doc 1 in two runs


def test_order_by_code_and_id_equals_a_lexsort_of_strings():
    ids = pd.Series(["b", "a", "c", "a", "bb", "B"], dtype="str")
    codes = np.array([1, 1, 0, 0, 1, 0])
    want = sorted(range(6), key=lambda i: (codes[i], ids[i]))
    for column in (ids, ids.astype(object), ids.astype("category")):
        assert table_checks.order_by_code_and_id(codes, column).tolist() == want


def _same_calibration(a, b) -> None:
    pd.testing.assert_frame_equal(a.queries, b.queries, check_exact=True)
    pd.testing.assert_frame_equal(a.documents, b.documents, check_exact=True)
    assert np.array_equal(a.gamma, b.gamma) and np.array_equal(a.beta, b.beta) and repr(a.info) == repr(b.info)


def test_calibrate_counts_by_chunks_equal_the_general_path(sim, monkeypatch):
    ws, ans = _tables(sim)
    bt = rcp_jax.fit_bradley_terry(ws)
    shared_ws, shared_ans = _tables(sim, shared=True)
    shared_bt = rcp_jax.fit_bradley_terry(shared_ws)
    real = calibration._counts_by_chunks
    took = []

    def spy(*args):
        out = real(*args)
        took.append(out is not None)
        return out

    # (BT, answers, CHUNK_ROWS (a BT chunk holds at least an eighth of it), whether the chunks apply)
    cases = [(bt, ans, 128, True), (bt, ans[ans["query_id"] != "q2"], 128, True),  # q2: BT scores, no answers
             (bt, ans.sample(frac=1.0, random_state=0), 128, False), (bt.iloc[::-1], ans, 128, False),
             (shared_bt, shared_ans, 8, True),  # the same doc ids in every query, one query per chunk
             (shared_bt, shared_ans, 128, False)]  # ... two queries in a chunk: the general path
    for b, a, rows, chunked in cases:
        took.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            monkeypatch.setattr(calibration, "_counts_by_chunks", spy)
            got = _with_chunk_rows(monkeypatch, rows, lambda b=b, a=a: rcp_jax.calibrate(b, a))
            monkeypatch.setattr(calibration, "_counts_by_chunks", lambda *args: None)
            ref = rcp_jax.calibrate(b, a)
        _same_calibration(got, ref)
        assert took == [chunked]


def test_calibrate_by_chunks_still_refuses_two_scores_and_orphans(sim, monkeypatch):
    ws, ans = _tables(sim)
    bt = rcp_jax.fit_bradley_terry(ws)
    twice = pd.concat([bt, bt[bt["query_id"] == "q2"].iloc[:1]]).sort_values("query_id", kind="stable")
    with pytest.raises(DataError, match="has two BT scores"):  # q2's answers dropped: its duplicate still found
        _with_chunk_rows(monkeypatch, 64, lambda: rcp_jax.calibrate(twice, ans[ans["query_id"] != "q2"]))
    orphan = ans.copy()
    orphan.loc[5, "doc_id"] = "nowhere"
    with pytest.raises(CalibrationError, match="'nowhere'.*have no BT score"):
        _with_chunk_rows(monkeypatch, 64, lambda: rcp_jax.calibrate(bt, orphan))


def test_2pl_query_padding_and_layout():
    assert [irt._query_slots(q, 1 << max(0, (q - 1).bit_length()), 1) for q in (3, 64, 65, 1000, 4095)] == \
        [64, 64, 128, 1024, 4096]
    assert [irt._query_slots(q, 1 << (q - 1).bit_length(), 1) for q in (4096, 5000, 10000, 12000)] == \
        [4096, 5120, 10240, 12288]
    assert irt._query_slots(10000, 16384, 3) == 10242  # a multiple of the devices
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(3, 7))
    trials = rng.integers(0, 3, size=(3, 7, 5)).astype(float)
    cells = irt.calibration_cells(theta, np.minimum(trials, 1.0), trials)
    assert cells.criterion.shape == (3, 35) and not cells.criterion.flags.writeable
    wide = irt._criterion_major(cells, 8, bucket=True)
    narrow = irt._criterion_major(cells, 8, bucket=True, dtype=np.float32)
    assert all(n.dtype == np.float32 and np.array_equal(n, w.astype(np.float32)) for n, w in zip(narrow, wide))
    assert np.array_equal(wide[0][:3, 2, :7], theta) and np.array_equal(wide[2][:3, :, :7], trials.transpose(0, 2, 1))


def test_flags_by_runs_equal_flags_by_scatter():
    rng = np.random.default_rng(3)
    q_code = np.repeat(np.arange(6), [3, 1, 4, 2, 3, 2])  # each query one run of rows
    theta = rng.normal(size=len(q_code))
    theta[q_code == 2] = 0.5  # no spread
    theta[q_code == 4] = [np.nan, 1.0, 1.0]  # no spread once NaN is skipped
    placements = np.ones(len(q_code))
    passes = rng.integers(0, 2, size=(len(q_code), 3)).astype(float)
    names = [f"q{i}" for i in range(6)]
    tau = pd.Series(np.ones(6), index=names)
    by_runs = calibration._flags_by_code(q_code, names, theta, placements, passes, ["C1", "C2", "C3"], tau, None)
    perm = rng.permutation(len(q_code))  # queries no longer in runs: the scatter path
    by_scatter = calibration._flags_by_code(q_code[perm], names, theta[perm], placements[perm], passes[perm],
                                            ["C1", "C2", "C3"], tau, None)
    assert by_runs == by_scatter
    assert [f["ids"] for f in by_runs if f["kind"] == "bt_no_spread"] == [["q2", "q4"]]

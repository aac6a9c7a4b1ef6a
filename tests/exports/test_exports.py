"""rcp_jax.exports on a simulated calibration: each format's content, and the integer-scaled qrels scored by
pytrec_eval, ir_measures and ranx equal RCP-nDCG@10 (independent implementations of nDCG; ranx is slow)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.fixtures.simulated_collections import collection_tables, exact_bt_scores, simulated_run
from rcp_jax import exports
from rcp_jax.calibration import calibrate
from rcp_jax.errors import DataError
from rcp_jax.models import simulate


@pytest.fixture(scope="module")
def simulated():
    sim = simulate.simulate_judgements(5, [25] * 6)
    _, answers = collection_tables(sim)
    cal = calibrate(exact_bt_scores(sim), answers)
    run = simulated_run(sim, [0.5, 2.0], seed=1)
    return cal, run


def untied(run: pd.DataFrame) -> pd.DataFrame:
    """The run with distinct scores per (system, query): the order kept, scores made strictly decreasing."""
    run = run.sort_values(["system", "query_id", "score", "doc_id"], ascending=[True, True, False, True])
    run = run.assign(score=-run.groupby(["system", "query_id"]).cumcount().astype(float))
    return run.reset_index(drop=True)


def rcp_per_query(run, cal) -> dict:
    from rcp_jax import evaluate

    per = evaluate(run, cal, k=10, protocol="plain")
    return {(s, q): v for s, q, v in zip(per["system"], per["query_id"], per["rcp_ndcg"])}


def pytrec_per_query(qrels_path, run) -> dict:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    out = {}
    for system, rows in run.groupby("system"):
        r = {}
        for q, d, s in zip(rows["query_id"], rows["doc_id"], rows["score"]):
            r.setdefault(q, {})[d] = float(s)
        res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(r)
        out.update({(system, q): v["ndcg_cut_10"] for q, v in res.items()})
    return out


def check_tools_agree(cal, run, path) -> None:
    """pytrec_eval, ir_measures and ranx on the exported integer qrels give RCP-nDCG@10 per query, to 1e-6."""
    exports.write_trec_qrels(exports.trec_qrels_table(cal), path)
    run = untied(run)
    ours = rcp_per_query(run, cal)
    theirs = pytrec_per_query(path, run)
    assert set(theirs) == set(ours) and len(ours) > 0
    assert max(abs(ours[k] - theirs[k]) for k in ours) < 1e-6
    assert np.std(list(ours.values())) > 0.01  # not a degenerate comparison

    ir_measures = pytest.importorskip("ir_measures")
    qrels = list(ir_measures.read_trec_qrels(str(path)))
    for system, rows in run.groupby("system"):
        irm_run = rows.rename(columns={"system": "_"})[["query_id", "doc_id", "score"]]
        per = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, irm_run)}
        assert max(abs(ours[(system, q)] - v) for q, v in per.items()) < 1e-6 and len(per) == len(theirs) // 2
        agg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, irm_run)[ir_measures.nDCG @ 10]
        assert agg == pytest.approx(np.mean([v for (s, _), v in ours.items() if s == system]), abs=1e-6)



def check_ranx_agrees(cal, run, path) -> None:
    """ranx reads the exported integer qrels back unchanged, and its ndcg@10 equals RCP-nDCG@10 per query."""
    ranx = pytest.importorskip("ranx")
    table = exports.trec_qrels_table(cal)
    exports.write_trec_qrels(table, path)
    run = untied(run)
    ours = rcp_per_query(run, cal)
    rq = ranx.Qrels.from_file(str(path), kind="trec")
    back = {(q, d): g for q, docs in rq.to_dict().items() for d, g in docs.items()}
    assert back == {(q, d): int(g) for q, d, g in zip(table["query_id"], table["doc_id"], table["grade"])}
    headed = exports.write_trec_qrels(table, path.with_name("headed.txt"), header=True)
    with pytest.raises(ValueError):  # ranx refuses the optional header line too
        ranx.Qrels.from_file(str(headed), kind="trec")
    for system, rows in run.groupby("system"):
        r: dict = {}
        for q, d, s in zip(rows["query_id"], rows["doc_id"], rows["score"]):
            r.setdefault(str(q), {})[str(d)] = float(s)
        per = ranx.evaluate(rq, ranx.Run.from_dict(r), "ndcg@10", return_mean=False, make_comparable=True)
        got = dict(zip(rq.keys(), per))
        assert set(got) == {q for s, q in ours if s == system}
        assert max(abs(ours[(system, q)] - v) for q, v in got.items()) < 1e-6


def test_integer_qrels_give_rcp_ndcg_in_pytrec_eval_and_ir_measures(simulated, tmp_path):
    cal, run = simulated
    check_tools_agree(cal, run, tmp_path / "qrels.txt")


@pytest.mark.slow  # ranx's numba kernels compile for ~50 s in a fresh process (tests/metrics/test_ndcg.py says so too)
def test_ranx_reads_the_integer_qrels_without_loss_and_scores_rcp_ndcg(simulated, tmp_path):
    cal, run = simulated
    check_ranx_agrees(cal, run, tmp_path / "qrels.txt")


def test_trec_grades_are_the_scaled_gains(simulated):
    cal, _ = simulated
    t = exports.trec_qrels_table(cal)
    g = cal.gains()
    assert list(t.columns) == ["query_id", "iteration", "doc_id", "grade"] and (t["iteration"] == 0).all()
    assert len(t) == len(g) and t["grade"].max() < 2**31 and t["grade"].min() >= 1
    assert np.abs(t["grade"].to_numpy() / exports.TREC_SCALE - g["gain"].to_numpy()).max() <= 0.5 / exports.TREC_SCALE + 1e-15


def test_a_gain_that_rounds_to_zero_keeps_grade_one_and_uncalibrated_queries_are_left_out(simulated):
    cal, _ = simulated
    docs = cal.documents.copy()
    docs.loc[0, "gain"] = 1e-12
    q_nan = docs["query_id"].iloc[-1]
    docs.loc[docs["query_id"] == q_nan, "gain"] = np.nan
    import dataclasses

    edited = dataclasses.replace(cal, documents=docs)
    t = exports.trec_qrels_table(edited)
    assert t["grade"].iloc[0] == 1
    assert q_nan not in set(t["query_id"]) and exports.uncalibrated_queries(edited) == [q_nan]
    assert q_nan not in set(exports.gains_table(edited)["query_id"])


def test_gains_and_mteb_tables_round_trip(simulated, tmp_path):
    cal, _ = simulated
    for name in ("g.csv", "g.tsv", "g.parquet"):
        path = exports.write_table(exports.gains_table(cal), tmp_path / name)
        back = pd.read_parquet(path) if name.endswith("parquet") else pd.read_csv(path, sep="," if name.endswith("csv") else "\t",
                                                                                    dtype={"query_id": str, "doc_id": str})
        assert list(back.columns) == ["query_id", "doc_id", "gain", "count_gain"]
        assert np.array_equal(back["gain"].to_numpy(), cal.gains()["gain"].to_numpy())  # full precision
    path = exports.write_mteb_qrels(exports.mteb_qrels_table(cal), tmp_path / "qrels.tsv")
    lines = path.read_text().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tgain" and len(lines) == len(cal.gains()) + 1
    q, d, s = lines[1].split("\t")
    assert (q, d, float(s)) == (cal.gains()["query_id"][0], cal.gains()["doc_id"][0], cal.gains()["gain"][0])


def test_write_refuses_an_unknown_extension_and_leaves_no_file(simulated, tmp_path):
    cal, _ = simulated
    with pytest.raises(DataError, match=r"\.csv, \.tsv or \.parquet"):
        exports.write_table(exports.gains_table(cal), tmp_path / "gains.xlsx")
    assert list(tmp_path.iterdir()) == []


def test_writes_are_atomic(simulated, tmp_path, monkeypatch):
    """A write that fails midway leaves the previous file whole and no temporary file behind."""
    import os

    cal, _ = simulated
    path = tmp_path / "qrels.txt"
    path.write_text("old\n")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        exports.write_trec_qrels(exports.trec_qrels_table(cal), path)
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["qrels.txt"]


def test_ids_with_whitespace_are_refused(simulated, tmp_path):
    cal, _ = simulated
    t = exports.trec_qrels_table(cal)
    t.loc[0, "doc_id"] = "a b"
    with pytest.raises(DataError, match="'a b' holds whitespace"):
        exports.write_trec_qrels(t, tmp_path / "q.txt")


def test_the_optional_header_line_is_refused_by_pytrec_eval_and_ir_measures(simulated, tmp_path):
    """Why ``header`` is off by default: the readers split every line into four fields."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ir_measures = pytest.importorskip("ir_measures")
    cal, _ = simulated
    path = exports.write_trec_qrels(exports.trec_qrels_table(cal), tmp_path / "q.txt", header=True)
    assert path.read_text().startswith(f"# rcp-jax integer-scaled qrels: grade = round(gain * {exports.TREC_SCALE})")
    with open(path) as fh, pytest.raises(ValueError):
        pytrec_eval.parse_qrel(fh)
    with pytest.raises(ValueError):
        list(ir_measures.read_trec_qrels(str(path)))

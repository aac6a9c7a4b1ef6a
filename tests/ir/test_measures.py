"""RCP-nDCG and Count-nDCG as ir_measures measures: equal to ``rcp-jax evaluate``, parsed by name, in a
``pt.Experiment`` with a baseline and Holm correction, and refusing queries the calibration never judged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.cli import main
from rcp_jax.errors import DataError

ir_measures = pytest.importorskip("ir_measures", reason='needs the ir extra: pip install "rcp-jax[ir]"')
from rcp_jax.ir import Count_nDCG, RCP_nDCG  # noqa: E402  (after the extra's check)


def small_calibration() -> rcp_jax.Calibration:
    """Two queries, four documents each, untied gains; query ``q2`` has no Count gains for ``d3``."""
    docs = pd.DataFrame({
        "query_id": ["q1"] * 4 + ["q2"] * 4,
        "doc_id": ["a", "b", "c", "d", "a", "e", "f", "g"],
        "theta_bt": np.linspace(-1, 1, 8), "ability": np.linspace(-1, 1, 8),
        "gain": [0.9, 0.1, 0.5, 0.3, 0.2, 0.8, 0.6, 0.05],
        "placements": 2, "count_gain": [1.0, 0.2, 0.6, 0.4, 0.2, 0.8, 0.4, 0.0],
    })
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "tau": 1.0, "alpha": 0.0, "n_docs": 4, "n_answers": 40,
                            "calibrated": True})
    return rcp_jax.Calibration(criteria=["C1", "C2"], gamma=np.array([1.0, 1.0]), beta=np.array([-0.5, 0.5]),
                               queries=queries, documents=docs)


def small_run() -> pd.DataFrame:
    return pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 4, "doc_id": ["b", "a", "d", "c", "a", "e", "g", "f"],
                         "score": [4.0, 3.0, 2.0, 1.0, 4.0, 3.0, 2.0, 1.0]})


def qrels_of(query_ids) -> pd.DataFrame:
    return pd.DataFrame({"query_id": list(query_ids), "doc_id": "a", "relevance": 1})


def per_query_values(measure, qrels, run) -> dict[str, float]:
    return {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}


def test_values_equal_evaluate_at_every_cutoff_and_whole_ranking():
    cal, run = small_calibration(), small_run()
    for k in (1, 2, 3, 10):
        table = rcp_jax.evaluate(run.assign(system="s"), cal, k=k)
        got = per_query_values(RCP_nDCG(cal) @ k, qrels_of(["q1", "q2"]), run)
        assert got == pytest.approx(dict(zip(table["query_id"], table["rcp_ndcg"])), abs=1e-15)
        got = per_query_values(Count_nDCG(cal) @ k, qrels_of(["q1", "q2"]), run)
        assert got == pytest.approx(dict(zip(table["query_id"], table["count_ndcg"])), abs=1e-15)
    # no cutoff: the whole ranking (deeper than any list)
    whole = per_query_values(RCP_nDCG(cal), qrels_of(["q1"]), run)
    assert whole == pytest.approx(dict(zip(*rcp_jax.evaluate(run.assign(system="s"), cal, k=50)[["query_id", "rcp_ndcg"]]
                                            .to_numpy().T)))
    # a perfect ranking scores 1 and a reversed one less
    best = run.drop(columns="score").merge(cal.gains().rename(columns={"gain": "score"}), on=["query_id", "doc_id"])
    assert ir_measures.calc_aggregate([RCP_nDCG(cal) @ 3], qrels_of(["q1"]), best.loc[best.query_id == "q1"])[
        RCP_nDCG(cal) @ 3] == pytest.approx(1.0)


def test_an_unlabelled_collection_passes_no_qrels():
    # ir_measures wants qrels, but RCP-nDCG reads only their query ids: with none, the run's queries count
    cal, run = small_calibration(), small_run()
    table = rcp_jax.evaluate(run.assign(system="s"), cal, k=3)
    assert ir_measures.calc_aggregate([RCP_nDCG(cal) @ 3], [], run)[RCP_nDCG(cal) @ 3] == pytest.approx(
        table["rcp_ndcg"].mean(), abs=1e-15)


def test_the_measure_cuts_ties_as_the_protocol_says_not_by_row_order():
    # four documents tied at the cut: plain (group_mean) averages their gains, so the row order cannot matter
    cal = small_calibration()
    run = pd.DataFrame({"query_id": "q1", "doc_id": ["a", "b", "c", "d"], "score": 1.0})
    values = {per_query_values(RCP_nDCG(cal) @ 2, qrels_of(["q1"]), run.iloc[order])["q1"]
              for order in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2])}
    assert len(values) == 1
    expected = rcp_jax.evaluate(run.assign(system="s"), cal, k=2)["rcp_ndcg"].iloc[0]
    assert values.pop() == pytest.approx(expected, abs=1e-15)
    trec = per_query_values(RCP_nDCG(cal, protocol="bright") @ 2, qrels_of(["q1"]), run)["q1"]
    assert trec == pytest.approx(rcp_jax.evaluate(run.assign(system="s"), cal, k=2, protocol="bright")["rcp_ndcg"].iloc[0])
    assert trec != pytest.approx(expected)


def test_an_unjudged_query_in_the_run_or_the_qrels_raises_naming_it():
    cal, run = small_calibration(), small_run()
    extra = pd.DataFrame({"query_id": "q9", "doc_id": ["x"], "score": [1.0]})
    with pytest.raises(DataError, match=r"'q9'.*would count them as 0.*unjudged='zero'"):
        ir_measures.calc_aggregate([RCP_nDCG(cal) @ 10], qrels_of(["q1", "q2"]), pd.concat([run, extra]))
    with pytest.raises(DataError, match=r"1 of the 3 queries.*'q7'"):
        ir_measures.calc_aggregate([Count_nDCG(cal) @ 10], qrels_of(["q1", "q7"]), run)
    # the documented alternative: such a query scores 0 on purpose, in the run or only in the qrels
    measure = RCP_nDCG(cal, unjudged="zero") @ 10
    both = per_query_values(measure, qrels_of(["q1", "q2", "q7"]), pd.concat([run, extra]))
    assert both["q9"] == 0.0 and both["q7"] == 0.0 and both["q1"] > 0


def test_without_gains_or_with_a_bad_parameter_the_error_names_the_fix(tmp_path):
    with pytest.raises(DataError, match=r"RCP_nDCG\(calibration\)@10"):
        ir_measures.calc_aggregate([RCP_nDCG @ 10], qrels_of(["q1"]), small_run())
    with pytest.raises(DataError, match="unknown protocol 'nope'.*plain"):
        ir_measures.calc_aggregate([RCP_nDCG(small_calibration(), protocol="nope") @ 10], qrels_of(["q1"]), small_run())
    with pytest.raises(DataError, match="rcp-jax fit --out"):
        RCP_nDCG(tmp_path)
    with pytest.raises(DataError, match="got int"):
        RCP_nDCG(3)


def test_measures_of_one_calibration_compare_equal_and_name_it_briefly(tmp_path):
    cal = small_calibration()
    assert RCP_nDCG(cal) @ 10 == RCP_nDCG(small_calibration()) @ 10
    assert hash(RCP_nDCG(cal) @ 10) == hash(RCP_nDCG(small_calibration()) @ 10)
    other = small_calibration()
    other.documents.loc[0, "gain"] = 0.95
    assert RCP_nDCG(cal) @ 10 != RCP_nDCG(other) @ 10
    assert RCP_nDCG(cal) @ 10 != Count_nDCG(cal) @ 10
    assert str(RCP_nDCG(cal) @ 10).startswith("RCP_nDCG(calibration=cal#") and str(RCP_nDCG(cal) @ 10).endswith("@10")
    rcp_jax.save_calibration(cal, tmp_path / "fit" / "calibration")
    parsed = ir_measures.parse_measure(f"RCP_nDCG(calibration='{tmp_path / 'fit'}')@5")
    assert parsed == RCP_nDCG(tmp_path / "fit") @ 5
    assert per_query_values(parsed, qrels_of(["q1", "q2"]), small_run()) == pytest.approx(
        per_query_values(RCP_nDCG(cal) @ 5, qrels_of(["q1", "q2"]), small_run()), abs=1e-12)
    assert ir_measures.parse_measure("Count_nDCG@3") == Count_nDCG @ 3


def test_without_ir_measures_the_import_names_the_extra():
    code = ("import sys; sys.modules['ir_measures'] = None\n"
            "try:\n    import rcp_jax.ir\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 'pip install "rcp-jax[ir]"' in out


# --- the demo and Cranfield: the measure equals `rcp-jax evaluate` to 1e-9, and runs inside pt.Experiment ---


def evaluate_cli(capsys, calibration: Path, runs: list[Path], qrels: Path, out: Path, extra=()) -> tuple[dict, pd.DataFrame]:
    """``rcp-jax evaluate --json --out OUT``: (its JSON, its per_query.csv)."""
    code = main(["evaluate", "--calibration", str(calibration), "--runs", *map(str, runs), "--qrels", str(qrels),
                 "--json", "--no-plots", "--out", str(out), *extra])
    printed, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(printed), pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "system": str})


def integer_qrels(path: Path) -> pd.DataFrame:
    q = rcp_jax.read_qrels(path)
    return pd.DataFrame({"query_id": q["query_id"], "doc_id": q["doc_id"], "relevance": q["grade"].astype(int)})


def assert_measures_equal_evaluate(capsys, calibration: Path, runs: list[Path], qrels: Path, out: Path, extra=()):
    """Per query and per system (mean over the system's queries), ir_measures' values equal `rcp-jax evaluate`'s
    per_query.csv to 1e-9; returns (the evaluate JSON, the run)."""
    result, per_query = evaluate_cli(capsys, calibration, runs, qrels, out, extra)
    run = rcp_jax.data.concat_runs([rcp_jax.read_run(p) for p in runs])
    qrels_table = integer_qrels(qrels)
    rcp, count = RCP_nDCG(calibration) @ 10, Count_nDCG(calibration) @ 10
    judged = set(run["query_id"])
    if not set(qrels_table["query_id"]) <= judged:  # qrels of queries never judged: refused, then left out
        with pytest.raises(DataError, match="have no RCP gains in the calibration"):
            ir_measures.calc_aggregate([rcp], qrels_table, run.loc[run["system"] == run["system"].iloc[0]])
        qrels_table = qrels_table.loc[qrels_table["query_id"].isin(judged)]
    for system, rows in run.groupby("system"):
        rows = rows[["query_id", "doc_id", "score"]]
        mine = per_query.loc[per_query["system"] == system].set_index("query_id")
        got = pd.DataFrame([(m.query_id, str(m.measure), m.value) for m in ir_measures.iter_calc([rcp, count], qrels_table, rows)],
                           columns=["query_id", "measure", "value"]).pivot(index="query_id", columns="measure", values="value")
        # a query the system left empty (the fusion run cut above its first document) is not in evaluate's table;
        # ir_measures scores it 0, its convention for a query without results (trec_eval -c)
        assert set(mine.index) <= set(got.index) and (got.drop(index=mine.index) == 0).all().all(), system
        got = got.loc[mine.index]
        assert np.abs(got[str(rcp)] - mine["rcp_ndcg"].reindex(got.index)).max() < 1e-9, system
        assert np.abs(got[str(count)] - mine["count_ndcg"].reindex(got.index)).max() < 1e-9, system
        agg = ir_measures.calc_aggregate([rcp, count], qrels_table.loc[qrels_table["query_id"].isin(mine.index)], rows)
        assert abs(agg[rcp] - mine["rcp_ndcg"].mean()) < 1e-9 and abs(agg[count] - mine["count_ndcg"].mean()) < 1e-9
    return result, run


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory) -> Path:
    """The folder `rcp-jax demo --out` writes (calibration/, runs.tsv, qrels.tsv, store/)."""
    out = tmp_path_factory.mktemp("ir") / "rcp_runs" / "demo"  # the README's relative path, from its parent's parent
    assert main(["demo", "--out", str(out), "--no-plots", "--json", "--quiet"]) == 0
    return out


@pytest.mark.slow
def test_demo_measure_equals_evaluate_and_runs_in_a_pyterrier_experiment(capsys, tmp_path, demo_report):
    pt = pytest.importorskip("pyterrier", reason='needs the ir extra: pip install "rcp-jax[ir]"')
    out = demo_report
    capsys.readouterr()
    board, run = assert_measures_equal_evaluate(capsys, out, [out / "runs.tsv"], out / "qrels.tsv", tmp_path / "eval")
    board = board["systems"]  # every system ranks every demo query: the leaderboard is the per-system mean

    # PyTerrier: RCP-nDCG beside trec_eval's nDCG, the first system as baseline, Holm-corrected p-values; no Java
    names = sorted(run["system"].unique())
    systems = [run.loc[run["system"] == s, ["query_id", "doc_id", "score"]]
               .rename(columns={"query_id": "qid", "doc_id": "docno"}).reset_index(drop=True) for s in names]
    topics = pd.DataFrame({"qid": sorted(run["query_id"].unique()), "query": "unused"})
    qrels = integer_qrels(out / "qrels.tsv").rename(columns={"query_id": "qid", "doc_id": "docno", "relevance": "label"})
    measure = RCP_nDCG(out) @ 10
    table = pt.Experiment(systems, topics, qrels, eval_metrics=[measure, "ndcg_cut_10"], names=names,
                          baseline=0, correction="holm")
    rcp_column = str(measure)
    assert list(table["name"]) == names
    for name, value in zip(table["name"], table[rcp_column]):
        assert value == pytest.approx(board[name]["rcp_ndcg"], abs=1e-9)
    p_values = table[f"{rcp_column} p-value corrected"]
    assert np.isnan(p_values.iloc[0]) and (p_values.iloc[1:].between(0, 1)).all()
    assert p_values.iloc[1:].min() < 0.05  # the random system is separated from bm25
    assert table["ndcg_cut_10"].between(0, 1).all()
    assert not pt.java.started()


@pytest.mark.slow
def test_the_readme_block_runs_on_the_demo_report(demo_report, monkeypatch, capsys):
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## In PyTerrier, ir_measures and trec_eval", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    monkeypatch.chdir(demo_report.parent.parent)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "RCP_nDCG(calibration='rcp_runs/demo')@10" in printed and "ndcg_cut_10 p-value corrected" in printed


@pytest.mark.slow
def test_posterior_measure_gives_each_querys_posterior_mean_and_interval(capsys, tmp_path, demo_report):
    from rcp_jax.ir import RCP_nDCG_Bayes

    fit = tmp_path / "fit"
    assert main(["fit", "--store", str(demo_report / "store"), "--out", str(fit), "--method", "laplace", "--no-plots"]) == 0
    capsys.readouterr()
    run = rcp_jax.read_run(demo_report / "runs.tsv")
    run = run.loc[run["system"] == "bm25", ["query_id", "doc_id", "score"]]
    qrels = qrels_of(sorted(run["query_id"].unique()))
    expected = rcp_jax.posterior_metrics(run.assign(system="bm25"), rcp_jax.load_posterior(fit / "posterior"), k=10,
                                         ci_prob=0.8).per_query.set_index("query_id")
    for stat in ("mean", "sd", "lo", "hi"):
        got = per_query_values(RCP_nDCG_Bayes(fit, stat=stat, ci=0.8) @ 10, qrels, run)
        assert got == pytest.approx(expected[stat].to_dict(), abs=1e-12), stat
    lo, hi = (per_query_values(RCP_nDCG_Bayes(fit, stat=s, ci=0.8) @ 10, qrels, run) for s in ("lo", "hi"))
    assert all(lo[q] < hi[q] for q in lo)
    assert ir_measures.parse_measure(f"RCP_nDCG_Bayes(posterior='{fit}', stat='lo')@10") == RCP_nDCG_Bayes(fit, stat="lo") @ 10
    with pytest.raises(DataError, match="rcp-jax fit --method"):
        RCP_nDCG_Bayes(demo_report)  # the demo's folder holds a calibration, no posterior


@pytest.mark.slow
def test_cranfield_measure_equals_evaluate(capsys, tmp_path, shared_data):
    cranfield, work = shared_data / "cranfield", tmp_path
    steps = [
        ["pool", "--dataset", cranfield, "--max-queries", "4", "--depth", "20", "--out", work / "pools.tsv",
         "--baselines-out", work / "baselines.trec"],
        ["judge", "--dataset", cranfield, "--pools", work / "pools.tsv", "--store", work / "store", "--quiet"],
        ["fit", "--store", work / "store", "--out", work / "fit", "--method", "map"],
    ]
    for argv in steps:
        code = main([str(a) for a in argv])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()
    assert_measures_equal_evaluate(capsys, work / "fit", [work / "pools.fusion.trec", work / "baselines.trec"],
                                   cranfield / "qrels" / "test.tsv", work / "eval", extra=["--pools", str(work / "pools.tsv")])

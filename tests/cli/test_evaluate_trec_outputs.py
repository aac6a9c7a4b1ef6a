"""``rcp-jax evaluate`` as trec_eval users expect: several cut-offs in one call, per-query files in trec_eval's
``-q`` layout, ``--runs NAME=PATH``, and ir_measures' standard measures beside RCP-nDCG (checked against
pytrec_eval)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from rcp_jax import data
from rcp_jax.cli import main
from rcp_jax.cli.evaluate import run_spec

pytrec_eval = pytest.importorskip("pytrec_eval")
pytest.importorskip("ir_measures")


@pytest.fixture(scope="module")
def fitted(demo_tiny, tmp_path_factory):
    """The fit folder of the three-query demo cut judged by the simulated judge."""
    folder = tmp_path_factory.mktemp("evaluate_trec")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "store"), "--quiet"]) == 0
        assert main(["fit", "--store", str(folder / "store"), "--out", str(folder / "fit"), "--method", "map", "--no-plots"]) == 0
    return folder / "fit"


def evaluate(cli, fitted, demo_tiny, out: Path, *extra: str, runs=None):
    args = ["evaluate", "--calibration", str(fitted), "--runs", *(runs or [str(demo_tiny["runs"])]),
            "--out", str(out), "--no-plots", "--json", *extra]
    res = cli(*args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), pd.read_csv(out / "per_query.csv", dtype={"query_id": str})


def test_several_cutoffs_equal_separate_single_cutoff_calls(cli, fitted, demo_tiny, tmp_path):
    qrels = ["--qrels", str(demo_tiny["qrels"]), "--measures", "none"]
    both, table = evaluate(cli, fitted, demo_tiny, tmp_path / "both", "--k", "3,5", *qrels)
    _, at3 = evaluate(cli, fitted, demo_tiny, tmp_path / "k3", "--k", "3", *qrels)
    _, at5 = evaluate(cli, fitted, demo_tiny, tmp_path / "k5", "--k", "5", *qrels)
    assert list(at3.columns) == ["system", "query_id", "rcp_ndcg", "count_ndcg", "qrel_ndcg"]  # single k: unchanged
    for m in ("rcp_ndcg", "count_ndcg", "qrel_ndcg"):
        pd.testing.assert_series_equal(table[m], at3[m])
        pd.testing.assert_series_equal(table[f"{m}@5"], at5[m], check_names=False)
    assert not table["rcp_ndcg"].equals(table["rcp_ndcg@5"])  # the cut-offs do differ here
    assert both["k"] == 3 and both["cutoffs"] == [3, 5]
    board = pd.read_csv(tmp_path / "both" / "leaderboard.csv").set_index("system")
    board5 = pd.read_csv(tmp_path / "k5" / "leaderboard.csv").set_index("system")
    assert board.loc[board5.index, "rcp_ndcg@5"].tolist() == pytest.approx(board5["rcp_ndcg"].tolist(), abs=1e-12)
    res = cli("compare", str(tmp_path / "both" / "per_query.csv"), "--json", "--permutations", "200",
              "--bootstrap", "50")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["settings"]["metrics"] == ["qrel_ndcg", "count_ndcg", "rcp_ndcg"]


def test_posterior_takes_one_cutoff(cli, fitted, demo_tiny):
    res = cli("evaluate", "--calibration", str(fitted), "--runs", str(demo_tiny["runs"]), "--k", "5,10", "--posterior")
    assert res.returncode == 2 and "--posterior takes one cut-off" in res.stderr


def test_bad_cutoffs_are_refused(fitted, demo_tiny, capsys):
    for bad in ("5,x", "0", "5,5"):
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", "--calibration", str(fitted), "--runs", str(demo_tiny["runs"]), "--k", bad])
        assert exit_.value.code == 2 and "argument --k" in capsys.readouterr().err


def read_eval(path: Path) -> tuple[dict[tuple[str, str], float], dict[str, str]]:
    """A trec_eval -q file: {(measure, query): value} and the 'all' rows {measure: text}."""
    per_query, summary = {}, {}
    for line in path.read_text().splitlines():
        measure, query, value = line.split("\t")
        if query == "all":
            summary[measure.strip()] = value
        else:
            per_query[(measure.strip(), query)] = float(value)
    return per_query, summary


def test_trec_q_layout_parses_back_to_the_per_query_table(cli, fitted, demo_tiny, tmp_path):
    _, table = evaluate(cli, fitted, demo_tiny, tmp_path / "out", "--k", "5,10", "--qrels", str(demo_tiny["qrels"]),
                        "--protocol", "trec_eval", "--trec-q", str(tmp_path / "q"))
    names = {"rcp_ndcg": "rcp_ndcg_cut_5", "count_ndcg": "count_ndcg_cut_5", "qrel_ndcg": "ndcg_cut_5",
             "rcp_ndcg@10": "rcp_ndcg_cut_10", "qrel_ndcg@10": "ndcg_cut_10", "P@10": "P_10", "RR": "recip_rank",
             "AP": "map", "R@100": "recall_100"}
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["bm25.eval", "oracle_noisy.eval"]
    for system, rows in table.groupby("system"):
        values, summary = read_eval(tmp_path / "q" / f"{system}.eval")
        assert summary["runid"] == system
        for column, measure in names.items():
            expected = rows.set_index("query_id")[column].dropna()
            got = {q: v for (m, q), v in values.items() if m == measure}
            assert got == expected.to_dict() and got  # every value, exactly (full precision)
            assert float(summary[measure]) == pytest.approx(expected.mean(), abs=1e-15)


def test_measures_equal_pytrec_eval(cli, fitted, demo_tiny, tmp_path):
    payload, table = evaluate(cli, fitted, demo_tiny, tmp_path / "out", "--qrels", str(demo_tiny["qrels"]))
    assert payload["measures"] == ["P@10", "RR", "AP", "R@100"]  # the default set with --qrels
    run = pd.read_csv(demo_tiny["runs"], dtype={"query_id": str, "doc_id": str})
    qrels = data.read_qrels(demo_tiny["qrels"])
    qd = {q: {d: int(g) for d, g in zip(p["doc_id"], p["grade"])} for q, p in qrels.groupby("query_id")}
    evaluator = pytrec_eval.RelevanceEvaluator(qd, {"P_10", "recip_rank", "map", "recall_100"})
    for system, part in run.groupby("system"):
        truth = evaluator.evaluate({q: dict(zip(p["doc_id"], p["score"].astype(float)))
                                    for q, p in part.groupby("query_id")})
        rows = table.loc[table["system"] == system].set_index("query_id")
        assert set(truth) == set(rows.index)
        for column, measure in (("P@10", "P_10"), ("RR", "recip_rank"), ("AP", "map"), ("R@100", "recall_100")):
            for q, value in truth.items():
                assert rows.loc[q, column] == pytest.approx(value[measure], abs=1e-12)
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    assert {"P@10", "RR", "AP", "R@100"} <= set(board.columns)


def test_measures_are_refused_without_qrels_or_by_an_unknown_name(cli, fitted, demo_tiny):
    base = ("evaluate", "--calibration", str(fitted), "--runs", str(demo_tiny["runs"]))
    res = cli(*base, "--measures", "P@10")
    assert res.returncode == 2 and "needs --qrels" in res.stderr
    res = cli(*base, "--qrels", str(demo_tiny["qrels"]), "--measures", "P@10,Nope@3")
    assert res.returncode == 2 and "'Nope@3'" in res.stderr


def test_without_ir_measures_an_explicit_request_names_the_extra_and_the_default_is_skipped(
        cli, fitted, demo_tiny, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ir_measures", None)  # import ir_measures -> ImportError
    base = ("evaluate", "--calibration", str(fitted), "--runs", str(demo_tiny["runs"]), "--qrels",
            str(demo_tiny["qrels"]), "--json")
    res = cli(*base, "--measures", "AP")
    assert res.returncode == 2 and 'pip install "rcp-jax[ir]"' in res.stderr
    res = cli(*base)
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    assert "measures" not in payload and any("ir_measures is not installed" in n for n in payload["notes"])


def test_run_spec_splits_only_a_plain_name():
    assert run_spec("bm25=runs/a.trec") == ("bm25", Path("runs/a.trec"))
    assert run_spec("runs/a.trec") == (None, Path("runs/a.trec"))
    assert run_spec("runs/k=10.trec") == (None, Path("runs/k=10.trec"))  # the left part is not a plain name
    assert run_spec("=a.trec") == (None, Path("=a.trec"))


def test_run_spec_keeps_an_existing_file_whose_name_holds_an_equals_sign(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("k=10.trec").write_text("q 0 d 1 1.0 t\n")
    assert run_spec("k=10.trec") == (None, Path("k=10.trec"))


@pytest.fixture
def same_tag_runs(demo_tiny, tmp_path):
    """The demo's two systems as two TREC files with one tag, ``same``."""
    run = pd.read_csv(demo_tiny["runs"], dtype={"query_id": str, "doc_id": str})
    paths = {}
    for system, part in run.groupby("system"):
        paths[system] = data.write_run(part.assign(system="same"), tmp_path / f"{system}.trec")
    return paths


def test_two_files_with_one_tag_are_refused_naming_both(cli, fitted, same_tag_runs):
    res = cli("evaluate", "--calibration", str(fitted), "--runs", *map(str, same_tag_runs.values()))
    assert res.returncode == 2
    assert all(str(p) in res.stderr for p in same_tag_runs.values()) and "NAME=PATH" in res.stderr


def test_named_runs_tell_files_with_one_tag_apart(cli, fitted, demo_tiny, same_tag_runs, tmp_path):
    named = [f"{s}_named={p}" for s, p in same_tag_runs.items()]
    _, table = evaluate(cli, fitted, demo_tiny, tmp_path / "named", runs=named)
    _, plain = evaluate(cli, fitted, demo_tiny, tmp_path / "plain")
    assert sorted(table["system"].unique()) == ["bm25_named", "oracle_noisy_named"]
    renamed = plain.assign(system=plain["system"] + "_named").sort_values(["system", "query_id"], ignore_index=True)
    pd.testing.assert_frame_equal(table.sort_values(["system", "query_id"], ignore_index=True), renamed)


def test_a_name_for_a_file_of_several_systems_is_refused(cli, fitted, demo_tiny):
    res = cli("evaluate", "--calibration", str(fitted), "--runs", f"one={demo_tiny['runs']}")
    assert res.returncode == 2 and "holds 2 systems" in res.stderr and str(demo_tiny["runs"]) in res.stderr


def test_trec_q_text_skips_missing_values_and_prefixes_datasets():
    """A query without a value has no line and stays out of the 'all' mean; with several datasets a query id is
    written dataset:query_id (ids may repeat across datasets)."""
    from rcp_jax.cli._trec_eval_layout import trec_q_text

    table = pd.DataFrame({"system": "s", "dataset": ["d1", "d1", "d2"], "query_id": ["1", "2", "1"],
                          "rcp_ndcg": [0.5, 0.25, 1.0], "qrel_ndcg": [0.5, float("nan"), 0.1]})
    lines = [line.split("\t") for line in trec_q_text(table, {"rcp_ndcg": "rcp_ndcg_cut_10",
                                                              "qrel_ndcg": "ndcg_cut_10"}, "s").splitlines()]
    rows = [(m.strip(), q, v) for m, q, v in lines]
    assert ("ndcg_cut_10", "d1:2", "nan") not in rows and len([r for r in rows if r[0] == "ndcg_cut_10"]) == 3
    assert ("rcp_ndcg_cut_10", "d2:1", "1.0") in rows and ("runid", "all", "s") in rows
    assert float(dict((m, v) for m, q, v in rows if q == "all")["ndcg_cut_10"]) == pytest.approx(0.3, abs=1e-15)
    assert all(len(m) >= 22 for m, _, _ in lines)  # trec_eval's %-22s

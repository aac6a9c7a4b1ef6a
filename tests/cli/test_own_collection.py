"""A newcomer's own collection, offline, end to end: pool -> judge -> fit -> evaluate -> compare -> diagnose.

The README's "Your own collection" block, run in-process through :func:`rcp_jax.cli.main` on a small
BEIR folder cut from the demo (with an empty document that is never pooled, as Cranfield has), and on
Cranfield itself (4 queries, skipped without ``../shared/data``). Also the pieces: the query subset
(``--queries`` / ``--max-queries``), ``--missing-text`` on pooled documents only, the fusion run, the
figures and ``--no-plots``, ``evaluate --calibration <fit folder>`` and ``diagnose --fit``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from rcp_jax import data
from rcp_jax.cli import main
from rcp_jax.data.collection import check_pooled_texts, select_queries
from rcp_jax.errors import DataError

PYTHONISH = re.compile(r"[a-z_]+=['\"]|fmt=|np\.(int|float)\d*\(")


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def beir_from_demo(folder: Path, n_queries: int = 5, empty_positive: bool = False) -> Path:
    """A BEIR folder: the demo's first ``n_queries`` queries, their pooled documents (+ 40 others), their
    qrels, and a document without text that nothing retrieves (or, ``empty_positive``, a qrel positive)."""
    from rcp_jax.demo import load_demo

    demo = load_demo()
    qids = list(demo.queries["query_id"])[:n_queries]
    pooled = set(demo.pools.loc[demo.pools["query_id"].isin(qids), "doc_id"])
    others = [d for d in demo.corpus["doc_id"] if d not in pooled][:40]
    corpus = demo.corpus.loc[demo.corpus["doc_id"].isin(pooled | set(others))]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for d, t, x in zip(corpus["doc_id"], corpus["title"], corpus["text"]):
            fh.write(json.dumps({"_id": d, "title": t, "text": x}) + "\n")
        fh.write(json.dumps({"_id": "empty-doc", "title": "", "text": ""}) + "\n")
    with open(folder / "queries.jsonl", "w") as fh:
        for q, t in zip(demo.queries["query_id"], demo.queries["text"]):
            if q in qids:
                fh.write(json.dumps({"_id": q, "text": t}) + "\n")
    (folder / "qrels").mkdir(exist_ok=True)
    qrels = demo.qrels.loc[demo.qrels["query_id"].isin(qids)]
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{int(g)}" for q, d, g in qrels.itertuples(index=False)]
    if empty_positive:
        lines.append(f"{qids[0]}\tempty-doc\t2")
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


# ----------------------------------------------------------------------------------------- the pieces
def test_select_queries_file_ids_max_and_unknown(tmp_path):
    order = ["1", "2", "3", "10", "11"]
    assert select_queries(order) is None
    assert select_queries(order, max_queries=2) == ["1", "2"]
    assert select_queries(order, queries="11,2") == ["2", "11"]  # collection order, not the list's
    ids = tmp_path / "ids.txt"
    ids.write_text("# my queries\n10\n\n3  # a comment\n")
    assert select_queries(order, queries=str(ids)) == ["3", "10"]
    assert select_queries(order, queries=str(ids), max_queries=1) == ["3"]
    assert select_queries(order, max_queries=2, pooled={"2", "10", "11"}) == ["2", "10"]
    with pytest.raises(DataError, match=r"2 query ids not in the collection's queries: 7, x"):
        select_queries(order, queries="1,7,x")
    with pytest.raises(DataError, match=r"ids\.txt: 1 query id not in .*: 99"):
        ids.write_text("1\n99\n")
        select_queries(order, queries=str(ids))
    with pytest.raises(DataError, match=r"no pool in the pools file: 3"):
        select_queries(order, queries="2,3", pooled={"2"})
    with pytest.raises(DataError, match="no such file"):
        select_queries(order, queries="missing/ids.txt")
    with pytest.raises(DataError, match="--max-queries must be >= 1"):
        select_queries(order, max_queries=0)


def test_missing_text_applies_to_pooled_documents_only():
    corpus = pd.DataFrame({"doc_id": ["a", "b", "e"], "title": ["", "", ""], "text": ["x", "y", ""]})
    pools = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "rank": [1, 2]})
    assert check_pooled_texts(corpus, pools, "error") is pools  # 'e' is empty but never pooled
    pools = pd.DataFrame({"query_id": ["q", "q", "q"], "doc_id": ["a", "e", "b"], "rank": [1, 2, 3]})
    with pytest.raises(DataError, match=r"document 'e' has no text and no title, and it is pooled for query 'q'") as err:
        check_pooled_texts(corpus, pools, "error", hint="--missing-text drop")
    assert "--missing-text drop" in str(err.value) and not PYTHONISH.search(str(err.value))
    with pytest.warns(UserWarning, match="removed from the pools"):
        dropped = check_pooled_texts(corpus, pools, "drop")
    assert dropped["doc_id"].tolist() == ["a", "b"] and dropped["rank"].tolist() == [1, 2]
    with pytest.warns(UserWarning, match="judged as empty"):
        assert len(check_pooled_texts(corpus, pools, "warn")) == 3


def test_pool_refuses_an_empty_pooled_positive_with_cli_flags(capsys, tmp_path):
    ds = beir_from_demo(tmp_path / "ds", n_queries=2, empty_positive=True)
    code, out, err = run_cli(capsys, "pool", "--dataset", ds, "--depth", "10", "--out", tmp_path / "pools.tsv")
    assert code == 2 and "pooled document 'empty-doc' has no text" in err and "a qrel positive swapped in" in err
    assert "--missing-text drop" in err and not PYTHONISH.search(err)
    code, out, err = run_cli(capsys, "pool", "--dataset", ds, "--depth", "10", "--out", tmp_path / "pools.tsv",
                             "--missing-text", "drop")
    assert code == 0 and "empty-doc" in err  # the warning names it
    assert "empty-doc" not in set(data.read_pools(tmp_path / "pools.tsv")["doc_id"])


def test_unknown_query_ids_are_named(capsys, tmp_path):
    ds = beir_from_demo(tmp_path / "ds", n_queries=2)
    code, _, err = run_cli(capsys, "pool", "--dataset", ds, "--out", tmp_path / "p.tsv", "--queries", "nope,q999")
    assert code == 2 and "nope, q999" in err and "Traceback" not in err


def test_evaluate_names_the_right_calibration_path(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "evaluate", "--calibration", tmp_path / "empty", "--runs", tmp_path / "r.trec")
    assert code == 2 and "the folder `rcp-jax fit --out` wrote" in err and "calibration/" in err


# ---------------------------------------------------------------------------------------- the flow
def run_flow(capsys, dataset: Path, work: Path, *, queries: list[str], depth: int, judge_queries: str) -> dict:
    """The README's block: pool -> judge -> fit -> evaluate -> compare -> diagnose; returns the outputs."""
    pools, fusion, base = work / "pools.tsv", work / "pools.fusion.trec", work / "baselines.trec"
    out = {}
    code, out["pool"], err = run_cli(capsys, "pool", "--dataset", dataset, "--depth", depth, *queries,
                                     "--out", pools, "--baselines-out", base)
    assert code == 0, err
    code, out["judge"], err = run_cli(capsys, "judge", "--dataset", dataset, "--pools", pools, "--queries",
                                      judge_queries, "--store", work / "store", "--quiet")
    assert code == 0, err
    code, out["fit"], err = run_cli(capsys, "fit", "--store", work / "store", "--out", work / "fit", "--method", "map")
    assert code == 0, err
    code, out["evaluate"], err = run_cli(
        capsys, "evaluate", "--calibration", work / "fit", "--runs", fusion, base, "--pools", pools,
        "--qrels", dataset / "qrels" / "test.tsv", "--out", work / "eval")
    assert code == 0, err
    code, out["compare"], err = run_cli(capsys, "compare", work / "eval" / "per_query.csv")
    assert code == 0, err
    code, out["diagnose"], err = run_cli(capsys, "diagnose", "--fit", work / "fit", "--json")
    assert code == 0, err
    return out


def check_flow(out: dict, work: Path, n_queries: int) -> None:
    assert "NOT a system ranking" in out["pool"] and "pools.fusion.trec" in out["pool"]
    pools = data.read_pools(work / "pools.tsv")
    fusion = data.read_run(work / "pools.fusion.trec")
    assert set(fusion["system"]) == {"rrf"}
    # every fused document is pooled, and no swapped-in positive the fusion did not rank is in the run
    pooled = set(zip(pools["query_id"], pools["doc_id"]))
    assert set(zip(fusion["query_id"], fusion["doc_id"])) <= pooled
    assert f"judged {n_queries} queries" in out["judge"]
    for name in ("item_curves.png", "query_calibration.png"):
        assert (work / "fit" / name).stat().st_size > 10_000 and f"figure: {work / 'fit' / name}" in out["fit"]
    for name in ("leaderboard.png", "per_query_rcp_ndcg.png", "per_query_qrel_ndcg.png"):
        assert (work / "eval" / name).stat().st_size > 10_000 and f"figure: {work / 'eval' / name}" in out["evaluate"]
    board = pd.read_csv(work / "eval" / "leaderboard.csv")
    assert set(board["system"]) == {"rrf", "bm25", "bm25_stem", "qlm"}
    assert board["rcp_ndcg"].between(0, 1).all()
    assert "Pairs separated" in out["compare"]
    diag = json.loads(out["diagnose"])["fit"]
    ece = {(r["model"], r["criterion"]): r["ece"] for r in diag["ece"]}
    assert ece[("calibrated", "all")] < ece[("raw", "all")]  # the simulated judge follows the 2PL
    assert diag["local_dependence"]["residual"] < diag["local_dependence"]["raw"]
    assert diag["tau_spread"] >= 1.0
    assert diag["transfer_kind"] == "query halves" and "one dataset" in diag["transfer_note"]
    assert {Path(f).name for f in diag["files"]} >= {"reliability.png", "predictions.csv", "diagnose.json"}
    pred = pd.read_csv(work / "fit" / "diagnostics" / "predictions.csv")
    assert pred["criterion"].str.fullmatch(r"C\d").all() and pred["p_calibrated"].between(0, 1).all()


def test_own_collection_flow_in_process(capsys, tmp_path):
    ds = beir_from_demo(tmp_path / "my_beir", n_queries=5)
    work = tmp_path / "work"
    out = run_flow(capsys, ds, work, queries=["--max-queries", "4"], depth=20, judge_queries="q01,q02,q03,q04")
    check_flow(out, work, n_queries=4)
    assert data.read_pools(work / "pools.tsv")["query_id"].nunique() == 4
    # --max-queries on judge counts among the pooled queries, in the queries file's order
    code, text, err = run_cli(capsys, "judge", "--dataset", ds, "--pools", work / "pools.tsv", "--max-queries", "2",
                              "--estimate", "--json")
    assert code == 0 and json.loads(text)["queries"] == 2
    code, text, err = run_cli(capsys, "judge", "--dataset", ds, "--pools", work / "pools.tsv", "--queries", "q05",
                              "--estimate")
    assert code == 2 and "no pool in the pools file: q05" in err
    # --no-plots: no figure, none printed
    code, text, err = run_cli(capsys, "fit", "--store", work / "store", "--out", work / "fit2", "--method", "map", "--no-plots")
    assert code == 0 and "figure:" not in text and not list((work / "fit2").glob("*.png"))
    # two fit folders (here the same judgements under two names): leave-one-dataset-out transfer across them
    import shutil

    shutil.copytree(work / "fit", work / "fit_b")
    code, text, err = run_cli(capsys, "diagnose", "--fit", work / "fit", "--fit", work / "fit_b", "--no-plots",
                              "--out", work / "diag2", "--json")
    assert code == 0, err
    table = {r["held_out"]: r for r in json.loads(text)["transfer"]["table"]}
    assert set(table) == {"fit", "fit_b", "all"} and table["all"]["n_answers"] == 2 * table["fit"]["n_answers"]
    assert table["fit"]["reduction"] > 0 and (work / "diag2" / "transfer_across_datasets.csv").is_file()
    # the diagnostics' prediction table is a valid --answers input
    code, text, err = run_cli(capsys, "diagnose", "--answers", work / "fit" / "diagnostics" / "predictions.csv")
    assert code == 0 and "p_calibrated" in text


@pytest.mark.slow
def test_cranfield_flow_four_queries(capsys, tmp_path, shared_data):
    cranfield = shared_data / "cranfield"
    work = tmp_path / "cranfield"
    # the corpus has two empty documents (471, 995); they are not pooled for these queries: no flag needed
    out = run_flow(capsys, cranfield, work, queries=["--max-queries", "4"], depth=20, judge_queries="1,2,3,4")
    check_flow(out, work, n_queries=4)
    # query 125's positive 995 is empty: refused with the CLI flag, dropped on request
    code, _, err = run_cli(capsys, "pool", "--dataset", cranfield, "--queries", "125", "--depth", "20",
                           "--out", tmp_path / "p125.tsv")
    assert code == 2 and "'995'" in err and "--missing-text drop" in err and not PYTHONISH.search(err)
    code, _, err = run_cli(capsys, "pool", "--dataset", cranfield, "--queries", "125", "--depth", "20",
                           "--out", tmp_path / "p125.tsv", "--missing-text", "drop")
    assert code == 0 and "995" not in set(data.read_pools(tmp_path / "p125.tsv")["doc_id"])

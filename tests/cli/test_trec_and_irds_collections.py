"""A TREC-format collection (TREC documents + topics + qrels) and an ir_datasets dataset through the verbs.

Run in this process (:func:`rcp_jax.cli.main`): pool -> judge (the simulated judge, latent relevance from the
qrels) -> fit -> evaluate on the TREC files as they are; ``pool --dataset irds:<id>`` on a dataset registered
here over local files (no network); and the option errors of ``--corpus`` / ``--topics`` / ``--queries FILE``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest

from rcp_jax.cli import main
from rcp_jax.cli._common import collection_name
from tests.helpers.cli_io import cli, ok
from tests.helpers.trec_collection import TOPICS, register_irds, write_trec

pytest.importorskip("ir_datasets")
DEPTH = 4


@pytest.fixture(scope="module")
def trec_flow(tmp_path_factory):
    work = tmp_path_factory.mktemp("trec")
    f = write_trec(work / "files", gz=True)
    w = work / "w"
    src = ["--corpus", f["docs"], "--topics", f["topics"], "--qrels", f["qrels"]]
    res = {"files": f, "w": w}
    res["pool"] = ok(cli("pool", *src, "--depth", DEPTH, "--out", w / "pools.tsv", "--json"))
    res["judge"] = ok(cli("judge", *src, "--pools", w / "pools.tsv", "--model", "simulated", "--store", w / "store",
                          "--quiet", "--json"))
    res["fit"] = ok(cli("fit", "--store", w / "store", "--out", w / "fit", "--method", "map", "--no-plots"))
    res["evaluate"] = ok(cli("evaluate", "--calibration", w / "fit", "--runs", w / "pools.fusion.trec",
                             "--qrels", f["qrels"], "--json"))
    return res


def test_trec_collection_goes_end_to_end(trec_flow):
    pools = pd.read_csv(trec_flow["w"] / "pools.tsv", sep="\t", dtype=str)
    assert sorted(pools["query_id"].unique()) == sorted(TOPICS)
    # every qrel positive (the first three documents of each topic) is in its query's pool
    for t, q in enumerate(TOPICS):
        assert {f"FT{t}-{i}" for i in range(3)} <= set(pools.loc[pools["query_id"] == q, "doc_id"])
    judged = json.loads(trec_flow["judge"][0])
    assert judged["calls"] > 0 and judged["rubric_placements"] > 0
    identity = json.loads((trec_flow["w"] / "store" / "identity.json").read_text())
    assert identity["dataset"] == "docs"  # the --corpus file's stem keys the schedule's random streams
    board = json.loads(trec_flow["evaluate"][0])
    assert board["queries"] == 4 and board["qrels"]["qrel_queries"] == 4  # the TREC qrels label every topic
    scores = board["systems"]["rrf"]
    # the three nDCGs, and with qrels the standard measures through ir_measures (evaluate's default --measures)
    assert set(scores) == {"rcp_ndcg", "count_ndcg", "qrel_ndcg", "P@10", "RR", "AP", "R@100"}
    assert all(0 <= v <= 1 for v in scores.values()) and all(scores[m] > 0 for m in ("rcp_ndcg", "count_ndcg", "qrel_ndcg"))


def test_irds_dataset_pools(tmp_path):
    name = register_irds("rcp-test/cli-labelled", tmp_path / "files")
    out, err = ok(cli("pool", "--dataset", f"irds:{name}", "--depth", DEPTH, "--out", tmp_path / "pools.tsv",
                      "--json"))
    pools = pd.read_csv(tmp_path / "pools.tsv", sep="\t", dtype=str)
    assert sorted(pools["query_id"].unique()) == sorted(TOPICS)
    trec = tmp_path / "trec"
    f = write_trec(trec)
    ok(cli("pool", "--corpus", f["docs"], "--topics", f["topics"], "--qrels", f["qrels"], "--depth", DEPTH,
           "--out", trec / "pools.tsv"))
    assert pools.equals(pd.read_csv(trec / "pools.tsv", sep="\t", dtype=str))  # the same collection, the same pools


def test_irds_dataset_without_qrels_is_unlabelled(tmp_path):
    name = register_irds("rcp-test/cli-unlabelled", tmp_path / "files", qrels=False)
    _, err = ok(cli("pool", "--dataset", f"irds:{name}", "--depth", DEPTH, "--out", tmp_path / "pools.tsv"))
    assert f"unlabelled collection (irds:{name} has no qrels)" in err


def test_unknown_irds_id_is_exit_2_with_suggestions(tmp_path):
    code, _, err = cli("pool", "--dataset", "irds:vaswanii", "--out", tmp_path / "p.tsv")
    assert code == 2 and "did you mean irds:vaswani" in err and "Traceback" not in err


def test_queries_file_stands_for_topics_with_corpus(tmp_path):
    f = write_trec(tmp_path)
    _, err = ok(cli("pool", "--corpus", f["docs"], "--queries", f["topics"], "--depth", DEPTH,
                    "--out", tmp_path / "p.tsv"))
    assert "unlabelled collection (no --qrels given with --corpus)" in err
    ids = tmp_path / "ids.txt"
    ids.write_text("401\n402\n")
    code, _, err = cli("pool", "--corpus", f["docs"], "--queries", ids, "--out", tmp_path / "p2.tsv")
    assert code == 2 and "--corpus needs its queries: --topics FILE" in err and "no tab in this line" in err
    # with --topics, --queries is the subset again
    ok(cli("pool", "--corpus", f["docs"], "--topics", f["topics"], "--queries", ids, "--depth", DEPTH,
           "--out", tmp_path / "p3.tsv"))
    assert sorted(pd.read_csv(tmp_path / "p3.tsv", sep="\t", dtype=str)["query_id"].unique()) == ["401", "402"]


@pytest.mark.parametrize("argv, message", [
    (["--corpus", "C"], "--corpus needs its queries: give --topics FILE"),
    (["--corpus", "C", "--dataset", "D"], "give exactly one of --dataset"),
    (["--rows", "R", "--topics", "T"], "--topics is the queries file of --corpus"),
])
def test_source_option_errors(tmp_path, argv, message):
    code, _, err = cli("pool", *argv, "--out", tmp_path / "p.tsv")
    assert code == 2 and message in err, err


def test_topic_field_picks_the_description(tmp_path):
    f = write_trec(tmp_path)
    out, _ = ok(cli("pool", "--corpus", f["docs"], "--topics", f["topics"], "--topic-field", "desc", "--depth", DEPTH,
                    "--out", tmp_path / "p.tsv", "--json"))
    assert (tmp_path / "p.tsv").exists()


@pytest.mark.parametrize("verb", ["pool", "judge", "doctor", "compare-lists", "extend"])
def test_every_collection_verb_offers_the_new_sources(verb, capsys):
    with pytest.raises(SystemExit) as e:
        main([verb, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--corpus FILE_OR_DIR" in out and "--topics FILE" in out and "irds:<id>" in out


@pytest.mark.parametrize("flags, name", [
    ({"corpus": Path("x/docs.trec.gz")}, "docs"), ({"corpus": Path("x/robust04")}, "robust04"),
    ({"dataset": Path("irds:beir/scifact/test")}, "beir/scifact/test"), ({"dataset": Path("x/scifact")}, "scifact"),
    ({"rows": Path("x/rows.jsonl")}, "rows"), ({"corpus": Path("d.trec"), "name": "mine"}, "mine"),
])
def test_dataset_name_defaults_to_the_source(flags, name):
    args = argparse.Namespace(**{"dataset": None, "rows": None, "corpus": None, "name": None, **flags})
    assert collection_name(args) == name

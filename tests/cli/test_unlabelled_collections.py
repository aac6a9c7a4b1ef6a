"""Collections without human labels, partly labelled ones, and the fusion run.

A tiny BEIR folder made here (4 queries on four topics, 24 documents, no ``qrels/``) goes through every verb
in this process (:func:`rcp_jax.cli.main`): pool -> judge -> fit -> evaluate -> compare -> diagnose -> extend
-> evaluate -> judge --budget, the judge being an OpenAI-compatible fake server on 127.0.0.1
(:class:`benchmarks.fixtures.fake_server.FakeOpenAIServer`, answering with a simulated judge whose latent relevance is
set here, not from qrels). Then the partly labelled case (qrels for 2 of 4 queries, given by ``--qrels FILE``),
the simulated judge's refusal, ``read_beir`` on missing splits, the fusion run against a reference RRF
written here (and ranx's), and two run files with one TREC tag.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.fixtures.fake_server import FakeOpenAIServer
from rcp_jax import data
from rcp_jax.errors import DataError
from rcp_jax.judging import SimulatedJudge
from tests.helpers.cli_io import cli, ok

TOPICS = {  # query id -> (query text, topic words, the first the most telling)
    "q1": ("solar panel efficiency", ["solar", "panel", "efficiency", "photovoltaic", "sunlight"]),
    "q2": ("brewing coffee at home", ["coffee", "brewing", "espresso", "grinder", "beans"]),
    "q3": ("river fish migration", ["river", "fish", "salmon", "migration", "spawning"]),
    "q4": ("mountain climbing safety", ["mountain", "climbing", "rope", "safety", "summit"]),
}
DEPTH = 4  # pools of 4: the two deeper on-topic documents of each query are left for `extend`
UNLABELLED = "unlabelled collection"


def make_beir(folder: Path, qrels: list[tuple[str, str, int]] | None = None) -> Path:
    """A BEIR folder: per topic t (query q<t+1>) six documents d<t><i>, i = 0..5, fewer topic words as i grows."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for t, (_, words) in enumerate(TOPICS.values()):
            for i in range(6):
                text = " ".join(words[: 5 - i % 4]) + f" note {i} about {words[0]} and other things number {t}{i}"
                fh.write(json.dumps({"_id": f"d{t}{i}", "title": f"{words[0].title()} {i}", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w") as fh:
        for q, (text, _) in TOPICS.items():
            fh.write(json.dumps({"_id": q, "text": text}) + "\n")
    if qrels is not None:
        (folder / "qrels").mkdir(exist_ok=True)
        rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in qrels]
        (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The fake OpenAI-compatible server: on-topic documents relevant (the lower i, the more), others not."""
    col = data.read_beir(make_beir(tmp_path_factory.mktemp("texts")))
    documents = {d: f"{t}. {x}" for d, t, x in zip(col.corpus["doc_id"], col.corpus["title"], col.corpus["text"])}
    queries = dict(zip(col.queries["query_id"], col.queries["text"]))
    latent = {q: {d: (2.0 - 0.7 * int(d[2])) if int(d[1]) + 1 == int(q[1]) else -2.0 for d in documents}
              for q in queries}
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "sk-fake-test"  # the fake server takes any key
    try:
        with FakeOpenAIServer(SimulatedJudge(latent, seed=1), queries=queries, documents=documents) as srv:
            yield srv
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old


def judge_flags(server) -> list[str]:
    return ["--model", "openai/fake-judge", "--api-base", server.url, "--concurrency", "4"]


@pytest.fixture(scope="module")
def flow(server, tmp_path_factory):
    """Every verb on the unlabelled collection; returns {verb: (stdout, stderr)} and the folders."""
    work = tmp_path_factory.mktemp("unlabelled")
    ds = make_beir(work / "ds")
    w = work / "w"
    J = judge_flags(server)
    res: dict = {"ds": ds, "w": w}
    res["pool"] = ok(cli("pool", "--dataset", ds, "--depth", DEPTH, "--out", w / "pools.tsv",
                         "--baselines-out", w / "base.trec", "--json"))
    res["judge"] = ok(cli("judge", "--dataset", ds, "--pools", w / "pools.tsv", *J, "--store", w / "store", "--quiet",
                          "--json"))
    res["fit"] = ok(cli("fit", "--store", w / "store", "--out", w / "fit", "--method", "map", "--no-plots"))
    runs = [w / "pools.fusion.trec", w / "base.trec"]
    res["evaluate"] = ok(cli("evaluate", "--calibration", w / "fit", "--runs", *runs, "--pools", w / "pools.tsv",
                             "--out", w / "eval", "--no-plots"))
    res["evaluate_json"] = ok(cli("evaluate", "--calibration", w / "fit", "--runs", *runs, "--json"))
    res["compare"] = ok(cli("compare", w / "eval" / "per_query.csv", "--bootstrap", 200, "--permutations", 200))
    res["diagnose_fit"] = ok(cli("diagnose", "--fit", w / "fit", "--no-plots", "--json"))
    res["diagnose_table"] = ok(cli("diagnose", w / "eval" / "per_query.csv", "--json"))
    # a deeper run: its 5th and 6th documents were never pooled
    from rcp_jax.pools import bm25_run

    col = data.read_beir(ds)
    data.write_run(bm25_run(col.corpus, col.queries, top_k=6, name="bm25_deep"), w / "deep.trec")
    res["extend"] = ok(cli("extend", "--runs", w / "deep.trec", "--store", w / "store", "--calibration", w / "fit",
                           "--dataset", ds, *J, "--out", w / "ext", "--depth", 6, "--placements", 4, "--quiet"))
    res["evaluate_ext"] = ok(cli("evaluate", "--calibration", w / "ext", "--runs", *runs, w / "deep.trec"))
    res["budget"] = ok(cli("judge", "--dataset", ds, "--pools", w / "pools.tsv", *J, "--store", w / "store_budget",
                           "--quiet", "--runs", *runs, "--budget", "0.5", "--out", w / "budget"))
    return res


# ------------------------------------------------------------------------------------- the unlabelled flow
def test_pool_of_an_unlabelled_collection_is_the_fusion(flow):
    out, err = flow["pool"]
    assert err.count(UNLABELLED) == 1 and "qrel figures" in err
    info = json.loads(out)
    assert info["queries"] == 4 and info["swapped_in"] == 0 and "positive_recall" not in info
    pools = data.read_pools(flow["w"] / "pools.tsv")
    fused = data.read_run(flow["w"] / "pools.fusion.trec")
    # nothing swapped in: the pools are the fusion's top DEPTH, in its order
    assert len(fused) == len(pools) == 4 * DEPTH
    assert list(zip(pools["query_id"], pools["doc_id"])) == list(zip(fused["query_id"], fused["doc_id"]))


def test_judge_and_fit_need_no_labels(flow):
    out, err = flow["judge"]
    assert err.count(UNLABELLED) == 1
    assert json.loads(out)["calls"] > 0
    fit_out, _ = flow["fit"]
    assert "fitted 4 queries, 16 documents" in fit_out
    assert (flow["w"] / "fit" / "calibration" / "items.json").is_file()


def test_evaluate_without_labels_has_no_qrel_column(flow):
    out, _ = flow["evaluate"]
    assert "nDCG@10 (plain protocol) of 4 systems over 4 queries" in out
    assert "qrel-nDCG" not in out.split("\n")[1] and "RCP-nDCG" in out and "Count-nDCG" in out
    assert "no --qrels" in out
    per_query = pd.read_csv(flow["w"] / "eval" / "per_query.csv")
    assert "qrel_ndcg" not in per_query.columns and per_query["rcp_ndcg"].between(0, 1).all()
    board = pd.read_csv(flow["w"] / "eval" / "leaderboard.csv")
    assert set(board.columns) == {"system", "rcp_ndcg", "count_ndcg"}
    assert set(board["system"]) == {"rrf", "bm25", "bm25_stem", "qlm"}
    info = json.loads(flow["evaluate_json"][0])
    assert info["k"] == 10 and info["queries"] == 4
    assert all(set(m) == {"rcp_ndcg", "count_ndcg"} for m in info["systems"].values())
    # the gains follow the server's latent relevance (2 - 0.7 i for document d<t><i> of its topic)
    docs = pd.read_csv(flow["w"] / "fit" / "calibration" / "documents.csv", dtype={"query_id": str, "doc_id": str})
    assert (docs["doc_id"].str[1].astype(int) + 1 == docs["query_id"].str[1].astype(int)).all()  # pools on topic
    pairs = [(a.gain > b.gain) == (a.doc_id[2] < b.doc_id[2]) for _, part in docs.groupby("query_id")
             for a in part.itertuples() for b in part.itertuples() if a.doc_id[2] != b.doc_id[2]]
    assert np.mean(pairs) >= 0.8


def test_compare_and_diagnose_without_labels(flow):
    out, _ = flow["compare"]
    assert "rcp_ndcg" in out and "qrel_ndcg" not in out.replace("no qrel_ndcg column", "")
    assert "no qrel_ndcg column (an unlabelled collection" in out
    fit = json.loads(flow["diagnose_fit"][0])["fit"]
    assert fit["n_answers"] > 0 and math.isfinite(fit["tau_spread"])
    table = json.loads(flow["diagnose_table"][0])["undistinguishable"]
    assert {row["metric"] for row in table} == {"rcp_ndcg", "count_ndcg"}


def test_extend_and_budget_without_labels(flow):
    out, err = flow["extend"]
    assert "new documents in 4 queries placed on the existing scale" in out
    info = json.loads((flow["w"] / "ext" / "extension.json").read_text())
    assert info["new_documents"] == 8 and info["ideal_growth"]["of"] == 4
    if info["ideal_growth"]["queries"]:
        assert "grew the ideal top-10" in out and "the baselines" in out
    ev, _ = flow["evaluate_ext"]
    assert "the calibration was extended (1 extension(s), 8 documents added" in ev and "bm25_deep" in ev
    budget_out, _ = flow["budget"]
    assert "budgeted judging of 4 queries" in budget_out
    assert (flow["w"] / "budget" / "budget_pairs.csv").is_file()


def test_extend_grows_the_ideal_and_says_how_much(flow):
    """The note's figure against a direct computation: ideal DCG@10 per query before and after the extension."""
    from rcp_jax.calibration import load_calibration

    before = load_calibration(flow["w"] / "fit" / "calibration").gains()
    after = load_calibration(flow["w"] / "ext" / "calibration").gains()

    def idcg(g):
        return {q: sum(x / math.log2(r + 2) for r, x in enumerate(sorted(part["gain"], reverse=True)[:10]))
                for q, part in g.groupby("query_id")}

    old, new = idcg(before), idcg(after)
    rises = [new[q] / old[q] - 1 for q in new if new[q] > old[q] * (1 + 1e-12)]
    info = json.loads((flow["w"] / "ext" / "extension.json").read_text())["ideal_growth"]
    assert info["queries"] == len(rises) > 0
    assert info["mean_rise"] == pytest.approx(float(np.mean(rises)), rel=1e-9)


# ------------------------------------------------------------------------------------- partly labelled
PARTIAL = [("q1", "d00", 2), ("q1", "d01", 1), ("q1", "d05", 1), ("q2", "d10", 2), ("q2", "d14", 1)]


def reference_ndcg(ranking: list[str], grades: dict[str, float], k: int = 10) -> float:
    """nDCG@k with linear gains, ideal over every positive qrel of the query (trec_eval's convention)."""
    dcg = sum(grades.get(d, 0.0) / math.log2(r + 2) for r, d in enumerate(ranking[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    return dcg / sum(g / math.log2(r + 2) for r, g in enumerate(ideal))


def test_partly_labelled_qrel_figures_stand_on_the_labelled_queries(flow, tmp_path):
    qrels = tmp_path / "partial.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in PARTIAL))
    w = flow["w"]
    out, _ = ok(cli("evaluate", "--calibration", w / "fit", "--runs", w / "pools.fusion.trec", w / "base.trec",
                    "--qrels", qrels, "--out", tmp_path / "eval", "--no-plots"))
    assert "qrel-nDCG on 2 of 4 queries (the labelled ones" in out and "over 4 queries" in out
    per_query = pd.read_csv(tmp_path / "eval" / "per_query.csv", dtype={"query_id": str})
    assert per_query.loc[per_query["query_id"].isin(["q3", "q4"]), "qrel_ndcg"].isna().all()
    board = pd.read_csv(tmp_path / "eval" / "leaderboard.csv").set_index("system")
    runs = pd.concat([data.read_run(w / "pools.fusion.trec"), data.read_run(w / "base.trec")])
    for system, run in runs.groupby("system"):
        values = []
        for q in ("q1", "q2"):
            ranked = run.loc[run["query_id"] == q].sort_values(["score", "doc_id"], ascending=[False, True])
            values.append(reference_ndcg(list(ranked["doc_id"]), {d: g for qq, d, g in PARTIAL if qq == q}))
        # the mean over the two labelled queries, not diluted by zeros for the two unlabelled ones
        assert board.loc[system, "qrel_ndcg"] == pytest.approx(np.mean(values), abs=1e-6)
        assert board.loc[system, "rcp_ndcg"] == pytest.approx(
            per_query.loc[per_query["system"] == system, "rcp_ndcg"].mean(), abs=1e-12)
    compared, _ = ok(cli("compare", tmp_path / "eval" / "per_query.csv", "--bootstrap", 200, "--permutations", 200))
    assert "qrel-nDCG on 2 of 4 queries (the labelled ones" in compared
    diag = json.loads(ok(cli("diagnose", tmp_path / "eval" / "per_query.csv", "--json"))[0])
    assert {row["metric"] for row in diag["undistinguishable"]} == {"qrel_ndcg", "rcp_ndcg", "count_ndcg"}


def test_pool_with_qrels_for_some_queries(flow, server, tmp_path):
    """``--qrels FILE`` on a folder without qrels: positives are swapped in for the labelled queries only, said so."""
    qrels = tmp_path / "partial.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in PARTIAL))
    out, err = ok(cli("pool", "--dataset", flow["ds"], "--qrels", qrels, "--depth", DEPTH, "--out",
                      tmp_path / "pools.tsv", "--json"))
    assert UNLABELLED not in err and err.count("qrels cover 2 of 4 queries (the labelled ones)") == 1
    info = json.loads(out)
    assert info["labelled_queries"] == 2 and info["positive_recall"] == 1.0
    pools = data.read_pools(tmp_path / "pools.tsv")
    pooled = set(zip(pools["query_id"], pools["doc_id"]))
    assert {(q, d) for q, d, _ in PARTIAL} <= pooled
    unlabelled = data.read_pools(flow["w"] / "pools.tsv")
    for q in ("q3", "q4"):  # untouched by the qrels
        assert list(pools.loc[pools["query_id"] == q, "doc_id"]) == list(unlabelled.loc[unlabelled["query_id"] == q, "doc_id"])
    out, err = ok(cli("judge", "--dataset", flow["ds"], "--qrels", qrels, "--pools", tmp_path / "pools.tsv",
                      *judge_flags(server), "--estimate", "--json"))
    assert err.count("qrels cover 2 of 4 queries") == 1 and json.loads(out)["queries"] == 4


def test_split_typo_is_an_error_but_no_qrels_is_unlabelled(tmp_path):
    labelled = make_beir(tmp_path / "labelled", qrels=PARTIAL)
    with pytest.raises(DataError, match=r"test2\.tsv: no such file; the qrels folder holds the split\(s\) test: pass --split test"):
        data.read_beir(labelled, split="test2")
    code, _, err = cli("pool", "--dataset", labelled, "--split", "dev", "--out", tmp_path / "p.tsv")
    assert code == 2 and "--split test" in err and "Traceback" not in err
    # --qrels FILE replaces the dataset's qrels: the split is then not read
    qrels = tmp_path / "q.txt"
    qrels.write_text("q3 0 d20 1\n")
    _, err = ok(cli("pool", "--dataset", labelled, "--split", "dev", "--qrels", qrels, "--depth", DEPTH,
                    "--out", tmp_path / "p.tsv"))
    assert "qrels cover 1 of 4 queries" in err
    bare = make_beir(tmp_path / "bare")
    col = data.read_beir(bare)
    assert col.qrels.empty and col.qrels.attrs["unlabelled"] and list(col.qrels.columns) == ["query_id", "doc_id", "grade"]
    (bare / "qrels").mkdir()  # an empty qrels folder is no labels either
    assert data.read_beir(bare, split="dev").qrels.empty


# ------------------------------------------------------------------------------------- the simulated judge
def test_simulated_judge_refuses_an_unlabelled_collection(flow, tmp_path):
    for argv in (["judge", "--dataset", flow["ds"], "--pools", flow["w"] / "pools.tsv", "--model", "simulated",
                  "--store", tmp_path / "store"],
                 ["extend", "--runs", flow["w"] / "deep.trec", "--store", flow["w"] / "store", "--calibration",
                  flow["w"] / "fit", "--dataset", flow["ds"], "--pools", flow["w"] / "pools.tsv", "--model",
                  "simulated", "--out", tmp_path / "ext"]):
        code, _, err = cli(*argv)
        assert code == 2, err
        assert "no pooled query has a qrel" in err and "unlabelled collection" in err
        assert "--model openai/<name>" in err and "--qrels FILE" in err and "rcp-jax demo" in err
        assert "Traceback" not in err
    assert not (tmp_path / "store").exists() and not (tmp_path / "ext").exists()


def test_simulated_judge_on_a_partly_labelled_collection_names_the_queries_without_latent(flow, tmp_path):
    qrels = tmp_path / "partial.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in PARTIAL))
    out, err = ok(cli("judge", "--dataset", flow["ds"], "--pools", flow["w"] / "pools.tsv", "--qrels", qrels,
                      "--model", "simulated", "--estimate", "--json"))
    assert "2 of 4 pooled queries have none (q3, q4)" in err and "--queries" in err
    assert json.loads(out)["calls"] > 0


# ------------------------------------------------------------------------------------- the fusion run
def reference_rrf(runs: pd.DataFrame, k: int = 60) -> dict[str, list[tuple[str, float]]]:
    """RRF by the formula: each system ranks by score (desc; ties by doc id), a document gains 1 / (k + rank)
    from every system that retrieved it; per query the (doc, score) list by fused score (desc; ties by doc id)."""
    fused: dict[str, dict[str, float]] = {}
    for (_, q), part in runs.groupby(["system", "query_id"]):
        ranked = sorted(zip(part["doc_id"], part["score"]), key=lambda t: (-t[1], t[0]))
        for rank, (d, _) in enumerate(ranked, start=1):
            fused.setdefault(q, {}).setdefault(d, 0.0)
            fused[q][d] += 1.0 / (k + rank)
    return {q: sorted(scores.items(), key=lambda t: (-t[1], t[0])) for q, scores in fused.items()}


def three_runs(tmp_path: Path) -> tuple[list[Path], pd.DataFrame]:
    """Three first-stage runs over the tiny corpus with distinct scores (no ties), as TREC files."""
    rng = np.random.default_rng(7)
    docs = [f"d{t}{i}" for t in range(4) for i in range(6)]
    frames, paths = [], []
    for name in ("lex", "dense", "sparse"):
        rows = [{"system": name, "query_id": q, "doc_id": d, "score": float(s)}
                for q in TOPICS for d, s in zip(docs, rng.permutation(len(docs))[: len(docs)] + rng.random(len(docs)))]
        frame = pd.DataFrame(rows)
        paths.append(data.write_run(frame, tmp_path / f"{name}.trec"))
        frames.append(frame)
    return paths, pd.concat(frames, ignore_index=True)


def test_fusion_run_is_the_rrf_of_the_first_stages(flow, tmp_path):
    paths, runs = three_runs(tmp_path)
    depth = 8
    ok(cli("pool", "--dataset", flow["ds"], "--runs", *paths, "--depth", depth, "--out", tmp_path / "pools.tsv"))
    fused = data.read_run(tmp_path / "pools.fusion.trec")
    ref = reference_rrf(runs)
    for q, part in fused.groupby("query_id"):
        assert list(part["doc_id"]) == [d for d, _ in ref[q][:depth]]
        assert part["score"].to_numpy() == pytest.approx([s for _, s in ref[q][:depth]], rel=1e-12)
    # the built-in first stages (BM25, stemmed BM25, query likelihood, each its top 200) of the unlabelled flow
    from rcp_jax import pools

    col = data.read_beir(flow["ds"])
    stages = pd.concat([pools.bm25_run(col.corpus, col.queries, top_k=200, name="bm25"),
                        pools.bm25_run(col.corpus, col.queries, top_k=200, k1=0.9, b=0.4, stem=True, name="bm25_stem"),
                        pools.query_likelihood_run(col.corpus, col.queries, top_k=200, name="qlm")])
    ref = reference_rrf(stages)
    fused = data.read_run(flow["w"] / "pools.fusion.trec")
    for q, part in fused.groupby("query_id"):
        assert list(part["doc_id"]) == [d for d, _ in ref[q][:DEPTH]]
        assert part["score"].to_numpy() == pytest.approx([s for _, s in ref[q][:DEPTH]], rel=1e-12)


@pytest.mark.slow
def test_fusion_run_agrees_with_ranx(flow, tmp_path):
    """ranx's RRF of the same runs: the same documents, order and scores (ranx compiles numba kernels: ~5 s warm)."""
    import ranx  # a dev dependency

    paths, runs = three_runs(tmp_path)
    depth = 8
    ok(cli("pool", "--dataset", flow["ds"], "--runs", *paths, "--depth", depth, "--out", tmp_path / "pools.tsv"))
    fused = data.read_run(tmp_path / "pools.fusion.trec")
    by_system = {s: ranx.Run({q: dict(zip(p["doc_id"], p["score"])) for q, p in part.groupby("query_id")}, name=s)
                 for s, part in runs.groupby("system")}
    theirs = ranx.fuse(list(by_system.values()), method="rrf", norm=None).to_dict()
    for q, part in fused.groupby("query_id"):
        top = sorted(theirs[q].items(), key=lambda t: (-t[1], t[0]))[:depth]
        assert list(part["doc_id"]) == [d for d, _ in top]
        assert part["score"].to_numpy() == pytest.approx([s for _, s in top], rel=1e-9)


def test_swapped_in_positives_never_lift_the_fusion_run(flow, tmp_path):
    """Positives the runs ranked low are swapped into the pool; the fusion run stays the RRF's own prefix (the
    old run dropped the displaced documents and moved the positives under them up)."""
    paths, runs = three_runs(tmp_path)
    ref = reference_rrf(runs)
    depth = 8
    # q1: the RRF's ranks 12..17 are positives (missed by the top 8), and rank 6 too (kept in place)
    positives = [("q1", ref["q1"][r][0], 1) for r in (5, 11, 12, 13, 14, 15, 16)]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in positives))
    out, _ = ok(cli("pool", "--dataset", flow["ds"], "--runs", *paths, "--depth", depth, "--qrels", qrels,
                    "--out", tmp_path / "pools.tsv", "--json"))
    info = json.loads(out)
    assert info["swapped_in"] == 6
    pools = data.read_pools(tmp_path / "pools.tsv")
    q1_pool = set(pools.loc[pools["query_id"] == "q1", "doc_id"])
    assert {d for _, d, _ in positives} <= q1_pool and len(q1_pool) == depth
    fused = data.read_run(tmp_path / "pools.fusion.trec")
    q1 = list(fused.loc[fused["query_id"] == "q1", "doc_id"])
    # 6 swapped in: only one of the 7 negatives of the top 8 stays, so the run stops above the 2nd negative
    assert q1 == [d for d, _ in ref["q1"][:1]] and info["fusion_run_cut"] == {"q1": 1}
    assert set(q1) <= q1_pool
    for q in ("q2", "q3", "q4"):  # nothing swapped: the whole top 8
        assert list(fused.loc[fused["query_id"] == q, "doc_id"]) == [d for d, _ in ref[q][:depth]]
    text, _ = ok(cli("pool", "--dataset", flow["ds"], "--runs", *paths, "--depth", depth, "--qrels", qrels,
                     "--out", tmp_path / "pools.tsv"))
    assert "nDCG@k of rrf is exact for k <= 1" in text and "above rank 10 (q1)" in text


# ------------------------------------------------------------------------------------- one TREC tag, two files
def test_two_run_files_with_one_tag_are_named(flow, tmp_path):
    w = flow["w"]
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    base = data.read_run(w / "base.trec")
    bm25 = base.loc[base["system"] == "bm25"]
    data.write_run(bm25, a)
    data.write_run(bm25.assign(score=-bm25["score"]), b)
    code, _, err = cli("evaluate", "--calibration", w / "fit", "--runs", a, b)
    assert code == 2 and str(a) in err and str(b) in err and "own tag" in err and "Traceback" not in err
    assert "system 'bm25' ranks query 'q1' in two run files" in err
    # one system split over files by query is fine
    data.write_run(bm25.loc[bm25["query_id"].isin(["q1", "q2"])], a)
    data.write_run(bm25.loc[~bm25["query_id"].isin(["q1", "q2"])], b)
    out, _ = ok(cli("evaluate", "--calibration", w / "fit", "--runs", a, b, "--json"))
    assert set(json.loads(out)["systems"]) == {"bm25"}


# ------------------------------------------------------------------------------------- a real server (opt-in)
@pytest.mark.real_server
@pytest.mark.parametrize("labels", ["none", "partial"])
def test_unlabelled_flow_against_a_real_llama_cpp_server(tmp_path, labels):
    """pool -> judge -> fit -> evaluate -> compare -> diagnose on the unlabelled folder (2 queries, pools of 3) with
    llama-cpp-python's server and SmolLM2-135M (a weak judge: only the exits and the outputs' shape are checked);
    ``partial``: the same with ``--qrels FILE`` labelling q1 only (pool, judge, evaluate read it).
    Skipped unless ``RCP_JAX_LLAMA_PYTHON`` names a Python with ``llama-cpp-python[server]`` (see
    tests/judging/transport/test_real_server.py); a few minutes on a busy two-core CPU."""
    from benchmarks.fixtures import llama_server as bench

    python, gguf, why = bench.find_server()
    if python is None:
        pytest.skip(why)
    ds, w = make_beir(tmp_path / "ds"), tmp_path / "w"
    w.mkdir()
    qrels = []
    if labels == "partial":
        (w / "q1.qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in PARTIAL if q == "q1"))
        qrels = ["--qrels", w / "q1.qrels"]
    with bench.LlamaServer(python, gguf, n_ctx=4096, threads=2, log_path=tmp_path / "server.log") as srv:
        steps = [
            ["pool", "--dataset", ds, *qrels, "--max-queries", 2, "--depth", 3, "--out", w / "pools.tsv",
             "--baselines-out", w / "base.trec"],
            ["judge", "--dataset", ds, *qrels, "--pools", w / "pools.tsv", "--model", f"openai/{bench.ALIAS}",
             "--api-base", srv.url, "--concurrency", 1, "--max-tokens", 512, "--structured-output",
             "json_object_schema", "--store", w / "store", "--quiet"],
            ["fit", "--store", w / "store", "--out", w / "fit", "--method", "map", "--no-plots"],
            ["evaluate", "--calibration", w / "fit", "--runs", w / "pools.fusion.trec", w / "base.trec", *qrels,
             "--out", w / "eval", "--no-plots"],
            ["compare", w / "eval" / "per_query.csv", "--bootstrap", 200, "--permutations", 200],
            ["diagnose", "--fit", w / "fit", "--no-plots"],
        ]
        if labels == "partial":  # the first stages alone rank every query
            steps.append(["evaluate", "--calibration", w / "fit", "--runs", w / "base.trec", *qrels,
                          "--out", w / "eval_base", "--no-plots"])
        outputs = {}
        for argv in steps:
            code, out, err, _ = bench.rcp([str(a) for a in argv], timeout=1500)
            assert code == 0, f"{argv[0]} exit {code}: {err[-3000:]}"
            outputs[argv[0] if argv[0] not in outputs else f"{argv[0]}_2"] = (out, err)
    board = pd.read_csv(w / "eval" / "leaderboard.csv")
    assert board["rcp_ndcg"].between(0, 1).all() and "over 2 queries" in outputs["evaluate"][0]
    if labels == "none":
        assert UNLABELLED in outputs["pool"][1] and UNLABELLED in outputs["judge"][1]
        assert "qrel_ndcg" not in board.columns
    else:
        assert "qrels cover 1 of 2 queries" in outputs["pool"][1] and UNLABELLED not in outputs["judge"][1]
        # the fusion run may be cut above q1's first document (a swapped-in positive): then no labelled query
        # is ranked by every system and qrel-nDCG is left out, said so
        assert ("qrel-nDCG on 1 of 2 queries (the labelled ones" in outputs["evaluate"][0]
                or "qrel-nDCG omitted: no labelled query (1 of 2) is ranked by every system" in outputs["evaluate"][0])
        assert "qrel-nDCG on 1 of 2 queries (the labelled ones" in outputs["evaluate_2"][0]
        per_query = pd.read_csv(w / "eval_base" / "per_query.csv", dtype={"query_id": str})
        assert per_query.loc[per_query["query_id"] == "q2", "qrel_ndcg"].isna().all()
        assert per_query.loc[per_query["query_id"] == "q1", "qrel_ndcg"].notna().all()


def test_qrel_ndcg_is_omitted_when_no_labelled_query_is_ranked_by_every_system(flow, tmp_path):
    """A system with no ranking on any labelled query (an empty fusion run there, say): qrel-nDCG cannot pair the
    systems on any query, so it is left out with the reason, and RCP-nDCG is still reported (found by the
    real-server run of a partly labelled collection, where the fusion run of q1 was cut above its first document)."""
    w = flow["w"]
    qrels = tmp_path / "partial.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in PARTIAL))
    base = data.read_run(w / "base.trec")
    first = base["system"].iloc[0]
    only_unlabelled = base.loc[(base["system"] == first) & base["query_id"].isin(["q3", "q4"])].assign(system="late")
    data.write_run(only_unlabelled, tmp_path / "late.trec")
    out, _ = ok(cli("evaluate", "--calibration", w / "fit", "--runs", w / "base.trec", tmp_path / "late.trec",
                    "--qrels", qrels, "--out", tmp_path / "eval", "--no-plots"))
    assert "qrel-nDCG omitted: no labelled query (2 of 4) is ranked by every system (late rank none" in out
    board = pd.read_csv(tmp_path / "eval" / "leaderboard.csv")
    assert "qrel_ndcg" not in board.columns and "late" in set(board["system"]) and board["rcp_ndcg"].notna().all()

"""The pipeline end to end on simulated truth: gains recovered, systems ranked, resumable, atomic outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

import rcp_jax
from rcp_jax.judging import SimulatedJudge
from rcp_jax.models.simulate import simulate_truth
from rcp_jax.pipeline import PipelineInput, run_pipeline, write_outputs

N_Q, N_DOCS = 8, 40
NOISE = {"s0": 0.9, "s1": 1.1, "s2": 1.3, "s3": 1.5, "s4": 1.8, "s5": 2.1}


def make_world(seed=7):
    rng = np.random.default_rng(seed)
    truth = simulate_truth(rng, [N_DOCS] * N_Q, decisiveness_range=(0.6, 1.6))
    qids = [f"q{j}" for j in range(N_Q)]
    latent = {q: {f"{q}-d{i}": float(truth.relevance[j][i]) for i in range(N_DOCS)} for j, q in enumerate(qids)}
    documents = {q: {d: f"text of {d}" for d in latent[q]} for q in qids}
    pools = {q: list(latent[q]) for q in qids}
    rows = [(s, q, d, v + rng.normal(0, nz)) for s, nz in NOISE.items() for q in qids for d, v in latent[q].items()]
    runs = pd.DataFrame(rows, columns=["system", "query_id", "doc_id", "score"])
    # sparse binary qrels of the same truth: the two most relevant documents of each query, if relevant
    qrels = []
    for q in qids:
        best = sorted(latent[q], key=latent[q].get, reverse=True)[:2]
        qrels += [(q, d, 1) for d in best if latent[q][d] > 1.0]
    qrels = pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"])
    judge = SimulatedJudge(latent, decisiveness={q: float(truth.decisiveness[j]) for j, q in enumerate(qids)},
                           shift={q: float(truth.shift[j]) for j, q in enumerate(qids)}, noise=0.6,
                           malformed_rate=0.05, seed=3)
    collection = PipelineInput({q: f"query {q}" for q in qids}, documents, pools, dataset="sim", qrels=qrels)
    true_gains = pd.DataFrame([(q, d, float(rcp_jax.gain(v, truth.gamma, truth.beta))) for q in qids for d, v in latent[q].items()],
                              columns=["query_id", "doc_id", "gain"])
    return dict(collection=collection, judge=judge, runs=runs, true_gains=true_gains)


@pytest.fixture(scope="module")
def world():
    return make_world()


@pytest.fixture(scope="module")
def first_run(world, tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    result = run_pipeline(world["collection"], judge=world["judge"], store=store, runs=world["runs"], progress=False)
    return store, result


def test_pipeline_recovers_true_gains(world, first_run):
    _, result = first_run
    est = result.calibration.gains().merge(world["true_gains"], on=["query_id", "doc_id"], suffixes=("", "_true"))
    assert len(est) == N_Q * N_DOCS
    assert (est["gain"] - est["gain_true"]).abs().mean() < 0.05


def test_rcp_ranks_systems_better_than_sparse_qrels(world, first_run):
    """Against the true nDCG (true gains), RCP orders systems better than sparse binary qrels do: per
    query (where one or two labels mostly tie the systems) and over the whole leaderboard."""
    _, result = first_run
    truth = rcp_jax.evaluate(world["runs"], gains=world["true_gains"]).set_index(["system", "query_id"])["rcp_ndcg"]
    per_query = result.per_query.set_index(["system", "query_id"]).loc[truth.index]
    tau_rcp, tau_qrel = [], []
    for q in truth.index.get_level_values("query_id").unique():
        t, p = truth.xs(q, level="query_id"), per_query.xs(q, level="query_id")
        tau_rcp.append(kendalltau(t, p["rcp_ndcg"]).statistic)
        tq = kendalltau(t, p["qrel_ndcg"]).statistic
        tau_qrel.append(0.0 if np.isnan(tq) else tq)  # all systems tied under qrels: no information
    assert np.mean(tau_rcp) > np.mean(tau_qrel) + 0.3
    assert np.mean(tau_rcp) > 0.75
    system_truth = truth.groupby("system").mean()
    board = result.leaderboard
    assert kendalltau(system_truth[board.index], board["rcp_ndcg"]).statistic >= max(
        0.8, kendalltau(system_truth[board.index], board["qrel_ndcg"]).statistic
    )


def test_schedule_counts_and_every_document_judged(first_run):
    _, result = first_run
    ws, ans = result.window_scores, result.answers
    counts = rcp_jax.schedule.schedule_counts(N_DOCS)
    per_q = ws.groupby("query_id")["window_id"].nunique()
    assert (per_q <= counts.tournament_calls).all() and (per_q >= counts.tournament_calls - 3).all()
    assert ans.groupby("query_id")["doc_id"].nunique().eq(N_DOCS).all()
    assert ws.groupby("query_id")["doc_id"].nunique().eq(N_DOCS).all()


def test_second_run_spends_nothing_and_reproduces_bit_for_bit(world, first_run):
    store, result = first_run
    again = run_pipeline(world["collection"], judge=world["judge"], store=store, runs=world["runs"], progress=False)
    assert again.calls == 0
    pd.testing.assert_frame_equal(again.calibration.documents, result.calibration.documents)
    pd.testing.assert_frame_equal(again.per_query, result.per_query)


def test_outputs_are_written_and_reload(first_run, tmp_path):
    _, result = first_run
    paths = write_outputs(result, tmp_path)
    cal = rcp_jax.load_calibration(paths["calibration"])
    np.testing.assert_array_equal(cal.gamma, result.calibration.gamma)
    pd.testing.assert_frame_equal(cal.documents, result.calibration.documents)
    assert not list(tmp_path.rglob("*.tmp"))
    per_query = pd.read_csv(paths["per_query"], dtype={"query_id": str})
    np.testing.assert_array_equal(per_query["rcp_ndcg"].to_numpy(), result.per_query["rcp_ndcg"].to_numpy())


def test_collection_refuses_bad_pools():
    with pytest.raises(rcp_jax.DataError, match="twice in the pool of query 'q'"):
        PipelineInput({"q": "x"}, {"a": "t"}, {"q": ["a", "a"]})
    with pytest.raises(rcp_jax.DataError, match="pool of query 'q' is empty"):
        PipelineInput({"q": "x"}, {"a": "t"}, {"q": []})
    with pytest.raises(rcp_jax.DataError, match="without text"):
        PipelineInput({}, {"a": "t"}, {"q": ["a"]})

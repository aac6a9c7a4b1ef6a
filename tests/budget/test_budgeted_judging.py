"""Budgeted judging: the criterion's pieces, the loop's store behaviour (resume, continue, fixed
protocol afterwards pays only the rest) and the CLI, on tiny simulated collections."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from rcp_jax import schedule as S
from rcp_jax.budget import (
    BudgetSettings,
    decide_pairs,
    full_protocol_calls,
    gain_posterior,
    judge_budgeted,
    pair_gradients,
    plan_round,
    resolve_budget,
    run_weights,
    seed_windows,
)
from rcp_jax.budget.compare import oriented_calls, score_calls
from rcp_jax.budget.simulated import simulated_benchmark
from rcp_jax.errors import DataError
from tests.helpers.toy_posterior import toy_posterior


def test_resolve_budget_counts_and_fractions():
    assert resolve_budget(500, 1000) == 500
    assert resolve_budget("0.4", 1000) == 400
    assert resolve_budget("40%", 1000) == 400
    assert resolve_budget(1.0, 1000) == 1000
    for bad in ("0", "1.5", "abc", "-3"):
        with pytest.raises(DataError, match="--budget"):
            resolve_budget(bad, 1000)


def test_seed_windows_are_the_fixed_schedules_own():
    pools = {"q1": [f"d{i}" for i in range(40)], "q2": [f"e{i}" for i in range(25)]}
    seed, rest = seed_windows(pools, seed=3, dataset="x", config=S.DEFAULT_CONFIG, placements=2.0, rubric=5)
    fixed = {w for q, d in pools.items() for w in S.tournament_round1(q, d, seed=3, dataset="x")
             + S.rubric_balanced(q, d, seed=3, dataset="x")}
    assert set(seed) <= fixed
    for q, docs in pools.items():
        tour = [w for w in seed if w.query_id == q and w.stage == "tournament"]
        shown = pd.Series([d for w in tour for d in w.doc_ids]).value_counts()
        assert set(shown.index) == set(docs) and shown.min() >= 2  # every document about twice
        assert sum(w.stage == "rubric" and w.query_id == q for w in seed) == 5
        assert rest[q] == S.rubric_balanced(q, docs, seed=3, dataset="x")[5:]


def _toy_run(post, rng, systems=("a", "b", "c")):
    rows = []
    for i, q in enumerate(post.query_ids):
        for s_i, s in enumerate(systems):
            score = post.theta[i] + (0.3 + s_i) * rng.standard_normal(post.theta.shape[1])
            rows.append(pd.DataFrame({"system": s, "query_id": q, "doc_id": post.doc_ids[i], "score": score}))
    return pd.concat(rows, ignore_index=True)


def test_pair_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    post = toy_posterior(rng)
    pools = {q: list(post.doc_ids[i]) for i, q in enumerate(post.query_ids)}
    weights = run_weights(_toy_run(post, rng), pools, post.query_ids, k=5)
    index = np.array([[0, 1], [2, 0]])
    grad = pair_gradients(weights, post, index, k=5)

    def delta(g):  # mean nDCG@5 difference, ideal = pool in theta order (fixed)
        order = np.argsort(-post.theta, axis=1, kind="stable")[:, :5]
        idcg = (np.take_along_axis(g, order, 1) / np.log2(np.arange(2, 7))).sum(1)
        nd = (weights.weights * g[None]).sum(2) / idcg[None]
        return nd[index[:, 0]].mean(1) - nd[index[:, 1]].mean(1)

    eps = 1e-6
    for q, d in [(0, 0), (1, 3), (2, 7), (0, 11)]:
        g = post.gain.copy()
        g[q, d] += eps
        up = delta(g)
        g[q, d] -= 2 * eps
        numeric = (up - delta(g)) / (2 * eps)
        np.testing.assert_allclose(grad[:, q, d], numeric, rtol=1e-5, atol=1e-9)


def test_decisions_follow_the_rule_and_reach():
    rng = np.random.default_rng(1)
    post = toy_posterior(rng, q=30, n=12)
    pools = {q: list(post.doc_ids[i]) for i, q in enumerate(post.query_ids)}
    run = _toy_run(post, rng)
    run = pd.concat([run, run.loc[run["system"] == "a"].assign(system="a_copy")], ignore_index=True)
    dec = decide_pairs(run_weights(run, pools, post.query_ids, k=5), post, k=5, n_bootstrap=400)
    calls = oriented_calls(dec.pairs)
    assert calls[frozenset(("a", "a_copy"))] == "equivalent"  # identical lists: delta is exactly 0
    assert calls[frozenset(("a", "c"))] == "a>c"  # a ranks by theta + N(0, 0.3^2), c by + N(0, 2.3^2)
    assert dec.pairs["reachable"].dtype == bool and dec.n_decided >= 2


def test_plan_round_is_prefix_consistent_and_explores():
    rng = np.random.default_rng(2)
    post = toy_posterior(rng, q=3, n=30)
    sens = np.zeros(post.mask.shape)
    sens[0, :5] = 1.0  # only five documents of q0 matter
    sens[1, 10:14] = 0.5
    placed = np.full(post.mask.shape, 2.0)
    placed[0, 29] = 0.0  # least shown: must be explored
    args = dict(window_size=10, explore=2, phase="budget_r001", seed=0, dataset="t")
    rubric_next = {q: [S.rubric_balanced(q, list(post.doc_ids[i]), seed=0, dataset="t")[6]]
                   for i, q in enumerate(post.query_ids)}
    big = plan_round(post, sens, np.array([0.0, 0.0, 0.3]), placed, {}, rubric_next, max_windows=6, **args)
    small = plan_round(post, sens, np.array([0.0, 0.0, 0.3]), placed, {}, rubric_next, max_windows=3, **args)
    assert big[:3] == small
    first = big[0]
    assert first.query_id == "q0" and first.stage == "tournament" and len(first.doc_ids) == 10
    assert {f"q0-{j}" for j in range(5)} <= set(first.doc_ids) and "q0-29" in first.doc_ids
    assert any(w.stage == "rubric" and w.query_id == "q2" for w in big)
    assert all(w.query_id != "q2" or w.stage == "rubric" for w in big)  # q2's documents carry no value


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    # pools of 8 (windows as wide as demo_tiny's) and budgets that keep the BT fits in few padded shapes:
    # the compiled programs are shared, so the whole file stays a few seconds of CPU
    sim = simulated_benchmark(3, n_queries=3, pool=8, levels=(0.4, 2.5))
    folder = tmp_path_factory.mktemp("budget")
    settings = BudgetSettings(round_calls=4, n_draws=64, n_bootstrap=300, stop_when_decided=False)
    first = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=folder / "store", budget=22,
                           settings=settings, concurrency=8)
    return sim, folder, settings, first


def test_budgeted_run_respects_budget_and_reports_rounds(tiny):
    sim, _, _, res = tiny
    full = full_protocol_calls(sim.collection.pools)
    assert res.full_calls == full == 60 and res.budget_calls == 22
    assert res.calls == 22 and res.stop_reason == "budget"  # seed of 18, one round of 4
    hist = res.history()
    assert list(hist["round"]) == list(range(len(hist))) and hist["calls"].is_monotonic_increasing
    assert len(res.decisions.pairs) == 6 and res.paid == res.calls  # a fresh store: every window paid
    assert set(res.decisions.systems["system"]) == {"s0a", "s0b", "s1a", "s1b"}


def test_rerun_resumes_without_calls_and_more_budget_pays_only_the_rest(tiny):
    sim, folder, settings, first = tiny
    again = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=folder / "store", budget=22,
                           settings=settings, concurrency=8)
    assert again.paid == 0 and again.calls == first.calls
    pd.testing.assert_frame_equal(again.decisions.pairs, first.decisions.pairs)
    more = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=folder / "store", budget=26,
                          settings=settings, concurrency=8)
    assert more.calls > first.calls and more.paid == more.calls - first.calls


def test_fixed_protocol_afterwards_reuses_the_seed(tiny):
    # the fixed protocol's answer-independent windows (round 1 and the balanced rubric), asked into the
    # budgeted store, cost only those the seed did not ask: the records are the same windows
    from rcp_jax.judging import judge_windows_sync

    sim, folder, settings, _ = tiny
    store = folder / "fixed_after"
    shutil.copytree(folder / "store", store)
    col = sim.collection
    seed, _ = seed_windows(col.pools, seed=0, dataset=col.dataset, config=S.DEFAULT_CONFIG,
                           placements=settings.seed_placements, rubric=settings.seed_rubric)
    fixed = [w for q, d in col.pools.items() for w in S.tournament_round1(q, d, seed=0, dataset=col.dataset)
             + S.rubric_balanced(q, d, seed=0, dataset=col.dataset)]
    calls = {}
    judge_windows_sync(fixed, judge=sim.judge, store=store, documents=col.documents, queries=col.queries,
                       concurrency=8, progress=lambda p: calls.update(n=p.calls, cached=p.cached))
    assert calls["cached"] == len(seed) and calls["n"] == len(fixed) - len(seed)


def test_score_calls_counts_false_calls_on_null_pairs():
    ref = pd.DataFrame({"system_a": ["x", "y"], "system_b": ["y", "z"], "call": ["undecided", "A>B"]})
    mine = pd.DataFrame({"system_a": ["y", "z"], "system_b": ["x", "y"], "call": ["A>B", "B>A"]})
    truth = {frozenset(("x", "y")): 0.0, frozenset(("y", "z")): 0.1}  # y - z > 0: "y>z" is right
    out = score_calls(mine, ref, {frozenset(("x", "y"))}, truth)
    assert out["agree"] == 0.5 and out["false_calls"] == 1 and out["null_pairs"] == 1 and out["wrong_sign"] == 0
    truth[frozenset(("y", "z"))] = -0.1
    assert score_calls(mine, ref, {frozenset(("x", "y"))}, truth)["wrong_sign"] == 1


def test_cli_budget_needs_runs_and_prints_rounds(demo_tiny, tmp_path, capsys):
    from rcp_jax.cli import main

    base = ["judge", "--rows", str(demo_tiny["rows"]), "--store", str(tmp_path / "s")]
    assert main([*base, "--budget", "0.6"]) == 2
    assert "--runs" in capsys.readouterr().err
    assert main([*base, "--runs", str(demo_tiny["runs"])]) == 2
    assert "--budget" in capsys.readouterr().err
    code = main([*base, "--runs", str(demo_tiny["runs"]), "--budget", "24", "--round-calls", "3",
                 "--out", str(tmp_path / "out")])
    assert code == 0
    cap = capsys.readouterr()
    assert "round 0:" in cap.err and "pairs decided" in cap.err and "90% interval" in cap.err
    assert "of the full protocol" in cap.out
    assert (tmp_path / "out" / "budget_rounds.csv").is_file()
    code = main([*base, "--runs", str(demo_tiny["runs"]), "--budget", "24", "--round-calls", "3", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["calls"] == 0 and payload["planned_calls"] <= payload["budget_calls"]


def test_a_round_cut_short_resumes_to_the_same_result(tiny):
    # a run stopped inside a round (here by its budget; a kill leaves the store in the same state) and run
    # again with more budget asks the rest of that round and ends exactly where an uncut run ends
    sim, folder, settings, _ = tiny
    cut = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=folder / "cut", budget=20,
                         settings=settings, concurrency=8)
    assert cut.calls == 20 and cut.rounds[-1].round == 1  # the seed's 18 and 2 of round 1's 4 windows
    whole = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=folder / "cut", budget=26,
                           settings=settings, concurrency=8)
    uncut = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=folder / "store", budget=26,
                           settings=settings, concurrency=8)
    assert whole.paid == 6  # only the rest of round 1 and round 2
    pd.testing.assert_frame_equal(whole.decisions.pairs, uncut.decisions.pairs)
    pd.testing.assert_frame_equal(whole.window_scores, uncut.window_scores)

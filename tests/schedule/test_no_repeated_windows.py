"""No schedule asks the same window twice: same query, same documents, same order (once 25 of 247
tournament calls of one run repeated an earlier prompt verbatim, e.g. ``round3_b1#0`` and ``round3_b5#0``).

Reversed copies of round-1 and round-2 windows are intended: they are a different order."""

from __future__ import annotations

import collections

import numpy as np
import pandas as pd
import pytest

from rcp_jax import schedule as S
from rcp_jax.judging import SimulatedJudge
from rcp_jax.judging.store.jsonl import read_judgements
from rcp_jax.models import simulate
from rcp_jax.pipeline import PipelineInput, judge_collection_sync
from tests.helpers.tournaments import doc_pool, fit_rounds


# pools a first-stage fusion gives at depth 10-50, plus the small ones short queries leave
SIZES = [4, 5, 6, 8, 10, 11, 12, 15, 20, 37, 50]


def _repeats(windows) -> list[tuple]:
    seen = collections.Counter((w.query_id, w.stage, w.doc_ids) for w in windows)
    return [key for key, c in seen.items() if c > 1]


def _full_schedule(seed: int) -> dict[str, list]:
    """Rounds 1-3 with simulated answers and BT refits between batches, then both rubric halves."""
    rng = np.random.default_rng(seed)
    truth = simulate.simulate_truth(rng, SIZES, noise=0.7)
    pools = {f"q{j}": doc_pool(n, f"q{j}-") for j, n in enumerate(SIZES)}
    qix = {q: j for j, q in enumerate(pools)}
    seen = {q: [] for q in pools}
    scores = {q: [] for q in pools}

    def judge(q, wins):
        for win in wins:
            seen[q].append(win)
            scores[q].append(simulate.window_scores(rng, truth, qix[q], np.array([int(d.split("-")[1]) for d in win.doc_ids])))

    for q in pools:
        judge(q, S.tournament_round1(q, pools[q], seed=seed, dataset="sim"))
    theta = fit_rounds(seen, scores, pools)
    for q in pools:
        judge(q, S.tournament_round2(q, pools[q], theta[q], seed=seed, dataset="sim"))
    for b in range(max(len(S.schedule_counts(len(p)).round3_batches) for p in pools.values())):
        theta = fit_rounds(seen, scores, pools)
        for q in pools:
            if b < len(S.schedule_counts(len(pools[q])).round3_batches):
                judge(q, S.adaptive_batch(q, pools[q], theta[q], S.co_occurrence(seen[q], pools[q]), b, asked=seen[q]))
    out = {}
    for q, docs in pools.items():
        abilities = theta[q] + rng.normal(0, 0.3, len(docs))  # stand-in for the balanced half's Rasch fit
        out[q] = seen[q] + S.rubric_balanced(q, docs, seed=seed, dataset="sim") + S.rubric_stratified(
            q, docs, abilities, seed=seed, dataset="sim")
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_full_schedule_never_repeats_a_window(seed):
    by_query = _full_schedule(seed)
    for q, windows in by_query.items():
        assert _repeats(windows) == [], (q, len(windows))
        counts = S.schedule_counts(len({d for w in windows for d in w.doc_ids}))
        phases = collections.Counter(w.phase.removesuffix(S.REVERSED_SUFFIX) for w in windows)
        # rounds 1-2 and the rubric keep their planned counts (a repeat is reshuffled, not dropped)
        assert phases["round1"] == 2 * counts.round1 and phases["round2"] == 2 * counts.round2
        assert (phases["balanced"], phases["stratified"]) == (counts.rubric_balanced, counts.rubric_stratified)
        assert sum(v for p, v in phases.items() if p.startswith("round3_b")) <= counts.round3
        # the mirrored copies are still there, each the reverse of its original
        orig = {(w.phase, w.sequence): w.doc_ids for w in windows if w.phase in ("round1", "round2")}
        assert all(w.doc_ids == orig[(w.phase.removesuffix(S.REVERSED_SUFFIX), w.sequence)][::-1]
                   for w in windows if S.is_reversed(w))


def test_round3_takes_the_next_best_run_instead_of_a_repeat():
    docs = doc_pool(30)
    theta = np.linspace(3, -3, 30)
    co = np.zeros((30, 30), dtype=int)
    first = S.adaptive_batch("q", docs, theta, co, 0)
    again = S.adaptive_batch("q", docs, theta, co, 0)  # the order did not move: without `asked`, the same windows
    assert [w.doc_ids for w in again] == [w.doc_ids for w in first]
    later = S.adaptive_batch("q", docs, theta, co, 1, asked=first)
    assert later and not {w.doc_ids for w in later} & {w.doc_ids for w in first}
    # windows of another query with the same ids do not count
    other = [w.__class__(query_id="other", stage=w.stage, phase=w.phase, sequence=w.sequence, doc_ids=w.doc_ids)
             for w in first]
    assert [w.doc_ids for w in S.adaptive_batch("q", docs, theta, co, 1, asked=other)] == [w.doc_ids for w in first[:len(later)]]


def test_a_small_pool_asks_its_whole_pool_window_once():
    docs = doc_pool(5)
    r1 = S.tournament_round1("q", docs, seed=0)
    r2 = S.tournament_round2("q", docs, np.arange(5.0), seed=0)
    r3 = S.adaptive_batch("q", docs, np.arange(5.0), S.co_occurrence(r1 + r2, docs), 0, asked=r1 + r2)
    assert _repeats(r1 + r2 + r3) == []
    bt_order = tuple(docs[::-1])
    assert (r3 == []) == (bt_order in {w.doc_ids for w in r1 + r2})


@pytest.mark.parametrize("n", [2, 3])
def test_pools_with_fewer_orders_than_windows_get_fewer_windows(n):
    docs = doc_pool(n)
    c = S.schedule_counts(n)
    r1 = S.tournament_round1("q", docs, seed=1)
    r2 = S.tournament_round2("q", docs, np.arange(float(n)), seed=1)
    rb = S.rubric_balanced("q", docs, seed=1)
    rs = S.rubric_stratified("q", docs, np.arange(float(n)), seed=1)
    assert _repeats(r1 + r2) == [] and _repeats(rb + rs) == []
    assert len(r1 + r2) == c.tournament_calls == {2: 2, 3: 6}[n]  # every order of the pool, once
    assert len(rb) + len(rs) == c.rubric_windows == {2: 2, 3: 6}[n]
    assert c.round3_batches == ()


def test_the_pipeline_asks_no_window_twice(tmp_path):
    rng = np.random.default_rng(5)
    sizes = [12, 15, 20]
    truth = simulate.simulate_truth(rng, sizes)
    qids = [f"q{j}" for j in range(len(sizes))]
    latent = {q: {f"{q}-d{i}": float(truth.relevance[j][i]) for i in range(n)} for j, (q, n) in enumerate(zip(qids, sizes))}
    judge = SimulatedJudge(latent, noise=0.3, seed=1)
    collection = PipelineInput({q: f"query {q}" for q in qids}, {q: {d: f"text {d}" for d in latent[q]} for q in qids},
                               {q: list(latent[q]) for q in qids}, dataset="sim", qrels=pd.DataFrame(columns=["query_id", "doc_id", "grade"]))
    judge_collection_sync(collection, judge=judge, store=tmp_path / "store", seed=0, progress=False)
    for stage in ("tournament", "rubric"):
        asked = [j.window for j in read_judgements(tmp_path / "store", stage)]
        assert asked and _repeats(asked) == []


@pytest.mark.parametrize("n_new, n_anchors", [(1, 1), (1, 3), (2, 30), (3, 30), (4, 30), (30, 30)])
def test_an_extension_never_repeats_a_window(n_new, n_anchors):
    new, anchors = doc_pool(n_new, "n"), doc_pool(n_anchors, "a")
    tour = S.extension_tournament("q", new, anchors, phase="extend_x", seed=2, dataset="d")
    rubric = S.extension_rubric("q", new, phase="extend_x", seed=2, dataset="d")
    assert _repeats(tour) == [] and _repeats(rubric) == []
    planned_tournament, planned_rubric = S.extension_counts(n_new)
    # every rubric window shows all the new documents when they fit one: 1, 2, 6 orders for 1, 2, 3 of them
    assert len(rubric) == planned_rubric == {1: 1, 2: 2, 3: 6, 4: 7, 30: 20}[n_new]
    # the tournament keeps its count unless the orders run out (one new document, one anchor: two orders)
    assert len(tour) == (2 if (n_new, n_anchors) == (1, 1) else planned_tournament)
    assert [w.sequence for w in tour] == list(range(len(tour)))

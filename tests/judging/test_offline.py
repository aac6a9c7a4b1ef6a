"""The simulated judge: the generative rules, determinism, malformed answers, and the shared parse path."""

from __future__ import annotations

import json
import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rcp_jax.judging import SimulatedJudge, parse_rubric, parse_tournament
from rcp_jax.judging.offline import DEFAULT_BETA, DEFAULT_GAMMA, distinct_scores


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-20, max_value=20, allow_nan=False), min_size=1, max_size=11))
def test_distinct_scores_are_distinct_in_range_and_keep_the_order(raw):
    s = distinct_scores(raw)
    assert len(set(s)) == len(s)
    assert all(-5 <= x <= 5 and isinstance(x, int) for x in s)
    for i in range(len(raw)):
        for j in range(len(raw)):
            if raw[i] > raw[j]:
                assert s[i] > s[j]


def test_distinct_scores_keep_rounded_values_when_nothing_collides():
    assert distinct_scores([2.2, -0.6, 4.9, -7.0]) == [2, -1, 5, -5]


def test_tournament_score_follows_the_formula_without_noise():
    judge = SimulatedJudge({"q": {"a": 1.0, "b": -0.5, "c": 3.0}}, decisiveness={"q": 1.5}, shift=0.5, noise=0.0, decorate=False)
    text, finish = judge.answer("tournament", "q", ["a", "b", "c"])
    assert finish == "stop"
    # round(1.5 * latent + 0.5): a -> 2, b -> -0.25 -> 0, c -> 5
    assert json.loads(text)["scores"] == {"doc_1": 2, "doc_2": 0, "doc_3": 5}


def test_answers_are_seeded_per_window_not_by_call_order(dataset):
    _, documents, latent = dataset
    ids = sorted(documents["q0"])[:6]
    one = SimulatedJudge(latent, seed=5)
    two = SimulatedJudge(latent, seed=5)
    first = [one.answer(stage, "q0", ids[k:k + 3]) for stage in ("tournament", "rubric") for k in (0, 3)]
    second = [two.answer(stage, "q0", ids[k:k + 3]) for stage in ("rubric", "tournament") for k in (3, 0)]
    assert sorted(first) == sorted(second)


def test_rubric_pass_rates_follow_the_item_curves():
    # 400 documents at latent 0.5: criterion c passes with probability sigmoid(gamma_c (0.5 - beta_c))
    latent = {"q": {f"d{i}": 0.5 for i in range(400)}}
    judge = SimulatedJudge(latent, seed=1)
    passes = [0] * 5
    for k in range(0, 400, 10):
        ids = [f"d{i}" for i in range(k, k + 10)]
        text, _ = judge.answer("rubric", "q", ids)
        r = parse_rubric(text, ids, 5)
        assert r.valid
        for ans in r.criteria.values():
            passes = [p + a for p, a in zip(passes, ans)]
    for c in range(5):
        p = 1 / (1 + math.exp(-DEFAULT_GAMMA[c] * (0.5 - DEFAULT_BETA[c])))
        sd = math.sqrt(p * (1 - p) / 400)
        assert abs(passes[c] / 400 - p) < 4 * sd + 1e-9, (c, passes[c] / 400, p)


def test_malformed_share_exercises_invalid_paths_and_reasks_can_succeed(dataset):
    _, documents, latent = dataset
    judge = SimulatedJudge(latent, malformed_rate=0.5, seed=2)
    ids = sorted(documents["q1"])
    categories = set()
    recovered = 0
    for k in range(60):
        window = random.Random(k).sample(ids, 5)
        results = []
        for attempt in (1, 2, 3):
            text, finish = judge.answer("tournament", "q1", window, attempt=attempt)
            results.append(parse_tournament(text, window, finish_reason=finish))
        categories |= {r.category for r in results if not r.valid}
        recovered += (not results[0].valid) and any(r.valid for r in results[1:])
    assert {"truncated", "incomplete", "schema", "no_json", "refused", "invalid_json"} <= categories
    assert recovered > 0


def test_unknown_documents_get_the_unknown_latent():
    judge = SimulatedJudge({"q": {"a": 4.0}}, noise=0.0, unknown_latent=-4.0, decorate=False)
    text, _ = judge.answer("tournament", "q", ["a", None])
    assert json.loads(text)["scores"] == {"doc_1": 4, "doc_2": -4}


def test_custom_criteria_count_spreads_difficulties():
    judge = SimulatedJudge({"q": {"a": 10.0, "b": -10.0}}, decorate=False)
    text, _ = judge.answer("rubric", "q", ["a", "b"], n_criteria=3)
    r = parse_rubric(text, ["a", "b"], 3)
    assert r.criteria == {"a": (1, 1, 1), "b": (0, 0, 0)}

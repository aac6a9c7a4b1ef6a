"""Answer-quality signals (rcp_jax.answer_quality) on arrays and tables of stored answers.

Each measure is checked against an independent computation (scipy's Spearman, brute-force enumeration of
the chance of a ranking, the null variance by simulation), each bad kind of judge (positional, all tied,
template echo) fails its signal, and a good judge (the simulated judge, whose scores follow a latent
relevance with noise) passes every signal, also at noise levels beyond the spread of relevance.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rcp_jax import answer_quality as Q


def _table(windows):
    """Long window-scores table from (query_id, window_id, doc_ids, scores) in slot order."""
    rows = [(q, w, d, float(s)) for q, w, docs, scores in windows for d, s in zip(docs, scores)]
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])


def _mirrored(rng, n_queries=3, pairs=2, n=10, score=None):
    """Round-1 windows with their reversed copies; ``score(query, doc, slot)`` gives each answer."""
    out = []
    for qi in range(n_queries):
        q = f"q{qi}"
        for seq in range(pairs):
            docs = [f"{q}-d{j}" for j in rng.permutation(n)]
            for phase, shown in (("round1", docs), ("round1_reversed", docs[::-1])):
                out.append((q, f"{phase}#{seq}", shown, [score(q, d, k) for k, d in enumerate(shown)]))
    return out


def _by_name(signals):
    return {s.name: s for s in signals}


# -- the measures against independent computations -----------------------------------------------------


def test_spearman_matches_scipy_with_and_without_ties():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(3, 12))
        x, y = rng.integers(-3, 4, n).astype(float), rng.normal(size=n)
        if np.ptp(x) == 0:
            continue
        assert Q.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert math.isnan(Q.spearman([1, 1, 1], [1, 2, 3]))


def test_null_variance_of_slot_correlation_is_one_over_n_minus_one():
    # the justification of the position z: rho(slot, score) of a random arrangement has variance 1/(n-1)
    rng = np.random.default_rng(1)
    for n in (4, 10):
        rhos = [Q.spearman(np.arange(n), rng.permutation(n)) for _ in range(4000)]
        assert np.mean(rhos) == pytest.approx(0.0, abs=0.02)
        assert np.var(rhos) == pytest.approx(1 / (n - 1), rel=0.08)


def test_chance_of_a_ranking_equals_brute_force_enumeration():
    # q = prod m_i! / n!: the share of arrangements of a window's scores that show a given ranking
    for scores in ([1, 2, 3], [1, 1, 2, 3], [0, 0, 1, 1, 2]):
        target = Q._pattern(np.array(scores, dtype=float))
        arrangements = list(itertools.permutations(scores))
        hits = sum(Q._pattern(np.array(a, dtype=float)) == target for a in arrangements)
        assert math.exp(Q._log_chance(target)) == pytest.approx(hits / len(arrangements))


def test_all_tied_share_counts_windows_of_two_or_more():
    share, tied, n = Q.all_tied_share([np.zeros(5), np.arange(5), np.ones(3), np.array([7.0])])
    assert (share, tied, n) == (2 / 3, 2, 3)
    assert Q.all_tied_share([]) == (None, 0, 0)


def test_position_correlation_of_positional_and_shuffled_scores():
    positional = [np.arange(10, dtype=float) for _ in range(4)]
    mean, z, n = Q.position_correlation(positional)
    assert (mean, n) == (1.0, 4) and z == pytest.approx(4 / math.sqrt(4 / 9))  # = 6
    rng = np.random.default_rng(2)
    mean, z, n = Q.position_correlation([rng.permutation(10).astype(float) for _ in range(200)])
    assert abs(mean) < 0.1 and abs(z) < 3.5


def test_repeated_pattern_and_its_chance_bound():
    same = [np.array([3.0, 1, 2, 0, 5, 4]) for _ in range(5)]
    share, count, n, bound = Q.repeated_pattern(same)
    assert (share, count, n) == (1.0, 5, 5) and bound == pytest.approx((1 / math.factorial(6)) ** 4)
    rng = np.random.default_rng(3)
    share, count, n, bound = Q.repeated_pattern([rng.permutation(10).astype(float) for _ in range(40)])
    assert count == 1 and bound == 1.0
    # two windows of three documents sharing a ranking: C(2,2) * (1/6) is no evidence
    assert Q.repeated_pattern([np.array([1.0, 2, 3])] * 2)[3] == pytest.approx(1 / 6)


def test_mirror_agreement_of_document_and_slot_judges():
    docs = np.arange(10, dtype=float)
    follows_docs = [(docs, docs + 0.1) for _ in range(2)]
    follows_slots = [(docs, docs[::-1]) for _ in range(2)]  # the copy's score for a document = its reversed slot's
    assert Q.mirror_agreement(follows_docs)[0] == pytest.approx(1.0)
    mean, z, n = Q.mirror_agreement(follows_slots)
    assert (mean, n) == (pytest.approx(-1.0), 2) and z == pytest.approx(-2 / math.sqrt(2 / 9))
    assert Q.mirror_agreement([(docs, np.zeros(10))]) == (None, None, 0)  # a tied side: skipped


# -- placeholders ------------------------------------------------------------------------------------------


def test_placeholders_of_the_builtin_templates():
    found = Q.builtin_placeholders()
    for p in ("a few sentences comparing the documents", "most relevant id", "least relevant id", "number",
              "one or two sentences", "a few sentences comparing the two lists"):
        assert p in found
    assert not {"query", "documents", "/query"} & set(found)  # tags are not placeholders


def test_template_placeholders_skip_tags_and_attributes():
    prompt = ('Reply {"why": "<your reason here>", "x": <number>}\n<query>\nq &lt;b&gt;\n</query>\n'
              '<doc id="doc_1">\ntext\n</doc>')
    assert Q.template_placeholders(prompt) == ["your reason here", "number"]


@pytest.mark.parametrize("text, echoed", [
    ('{"reasoning": "<a few sentences comparing the documents>", "scores": {"doc_1": 1}}', True),
    ('{"reasoning": "A few sentences comparing the documents.", "scores": {"doc_1": 1}}', True),
    ('{"ranking": ["<most relevant id>", "...", "<least relevant id>"]}', True),
    ('{"doc_1": {"reasoning": "<one or two sentences>", "criteria": {"C1": 0}}}', True),
    ('{"reasoning": "doc_2 is the most relevant id here; doc_1 compares the documents least well.", '
     '"scores": {"doc_1": -2, "doc_2": 3}}', False),
    ('{"reasoning": "In a few sentences comparing the documents: doc_1 is on topic.", "scores": {}}', False),
    ("", False),
])
def test_echoed_placeholder(text, echoed):
    assert (Q.echoed_placeholder(text, Q.builtin_placeholders()) is not None) == echoed


# -- tables -> signals -------------------------------------------------------------------------------------


def test_positional_judge_fails_position_repeated_and_mirror():
    rng = np.random.default_rng(4)
    windows = _mirrored(rng, score=lambda q, d, k: float(k + 1))  # doc_1: 1, doc_2: 2, ... whatever the documents
    s = _by_name(Q.assess(_table(windows)))
    assert s["position"].failed and s["position"].value == pytest.approx(1.0)
    assert s["repeated"].failed and s["repeated"].value == 1.0
    assert s["mirror"].failed and s["mirror"].value == pytest.approx(-1.0)
    assert not s["all_tied"].failed and not s["echo"].failed and s["echo"].value is None
    assert "+1.00 over 12 windows" in s["position"].message


def test_all_tied_judge_fails_all_tied_only():
    rng = np.random.default_rng(5)
    s = _by_name(Q.assess(_table(_mirrored(rng, score=lambda q, d, k: 0.0))))
    assert s["all_tied"].failed and s["all_tied"].value == 1.0
    assert "12 of 12 tournament windows have every document tied" in s["all_tied"].message
    assert [n for n, x in s.items() if x.failed] == ["all_tied"]
    assert s["position"].value is None and not s["position"].decidable


def test_echoing_judge_fails_echo():
    texts = ['{"reasoning": "<a few sentences comparing the documents>", "scores": {"doc_1": 2, "doc_2": 1}}'] * 3
    texts += ['{"reasoning": "doc_1 covers the query.", "scores": {"doc_1": 2, "doc_2": 1}}'] * 7
    s = _by_name(Q.assess(None, texts))
    assert s["echo"].failed and s["echo"].value == pytest.approx(0.3) and s["echo"].n == 10
    one_in_twenty = texts[:1] + texts[3:] * 3
    assert not _by_name(Q.assess(None, one_in_twenty))["echo"].failed  # a rare glitch: counted, not failed


def test_round3_windows_in_bt_order_are_not_read():
    # round 3 shows documents best first: a good judge's scores fall with the slot there
    rng = np.random.default_rng(6)
    latent = {f"q0-d{j}": float(rng.normal()) for j in range(10)}
    good = _mirrored(rng, n_queries=1, score=lambda q, d, k: latent[d])
    ordered = sorted(latent, key=latent.get, reverse=True)
    round3 = [("q0", f"round3_b{b}#0", ordered, [latent[d] for d in ordered]) for b in range(1, 8)]
    s = _by_name(Q.assess(_table(good + round3)))
    assert not any(x.failed for x in s.values())
    assert s["position"].n == 4  # only the round-1 windows


def test_too_few_documents_to_decide_never_fails():
    rng = np.random.default_rng(7)
    windows = _mirrored(rng, n_queries=1, pairs=2, n=3, score=lambda q, d, k: float(k))  # positional, 3 documents
    s = _by_name(Q.assess(_table(windows)))
    for name in ("position", "repeated", "mirror"):
        assert not s[name].decidable and not s[name].failed and "too few to decide" in s[name].message
    more = _mirrored(rng, n_queries=6, pairs=2, n=3, score=lambda q, d, k: float(k))
    assert _by_name(Q.assess(_table(more)))["position"].failed  # 24 windows of 3: enough


def test_table_needs_its_columns():
    from rcp_jax.errors import DataError

    with pytest.raises(DataError, match="lacks column"):
        Q.assess(pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [1.0]}))


def test_slot_column_orders_rows():
    windows = _mirrored(np.random.default_rng(8), score=lambda q, d, k: float(k))
    table = _table(windows)
    table["slot"] = table.groupby(["query_id", "window_id"]).cumcount()
    shuffled = table.sample(frac=1.0, random_state=0)
    assert _by_name(Q.assess(shuffled))["position"].value == pytest.approx(1.0)


# -- the good judge's distribution (the thresholds' margin) ------------------------------------------------


@pytest.fixture(scope="module")
def demo_windows():
    from rcp_jax import schedule as S
    from rcp_jax.demo.dataset import load_demo

    demo = load_demo()
    latent: dict[str, dict[str, float]] = {}
    for q, d, v in demo.latent[["query_id", "doc_id", "latent"]].itertuples(index=False):
        latent.setdefault(q, {})[d] = float(v)
    pools = {q: list(g["doc_id"]) for q, g in demo.pools.groupby("query_id")}
    windows = {q: S.tournament_round1(q, pools[q], seed=0, dataset="rcp-jax-demo") for q in sorted(pools)}
    return latent, windows


def _judged(judge, picks):
    from rcp_jax.judging.answers.parse import parse_answer

    out = []
    for q, ws in picks:
        for w in ws:
            text, _ = judge.answer("tournament", q, list(w.doc_ids))
            scores = parse_answer(text, stage="tournament", doc_ids=w.doc_ids).scores
            out.append((q, f"{w.phase}#{w.sequence}", list(w.doc_ids), [scores[d] for d in w.doc_ids]))
    return out


@pytest.mark.parametrize("noise", [0.5, 2.0, 5.0])
def test_the_good_judge_passes_doctor_sized_samples(demo_windows, noise):
    # what doctor asks: two pairs of 10 documents from two queries; noise 2 is the spread of relevance within
    # a query (sd 2.2), noise 5 more than twice it
    from rcp_jax.judging import SimulatedJudge

    latent, windows = demo_windows
    queries = sorted(windows)
    mirror = []
    for seed in range(40):
        judge = SimulatedJudge(latent, seed=seed, noise=noise)
        k = seed % (len(queries) - 1)
        picks = [(queries[k], windows[queries[k]][:2]), (queries[k + 1], windows[queries[k + 1]][:2])]
        s = _by_name(Q.assess(_table(_judged(judge, picks))))
        assert not any(x.failed for x in s.values()), [x.message for x in s.values() if x.failed]
        assert s["position"].decidable and s["repeated"].decidable and s["mirror"].decidable
        mirror.append(s["mirror"].value)
    assert min(mirror) > Q.MIRROR_RHO  # the value alone stays above the threshold, before the z gate
    if noise == 0.5:
        assert min(mirror) > 0 and np.mean(mirror) > 0.6  # a consistent judge repeats its ranking


def test_the_good_judge_passes_a_whole_store(demo_windows):
    from rcp_jax.judging import SimulatedJudge

    latent, windows = demo_windows
    table = _table(_judged(SimulatedJudge(latent, seed=0), list(windows.items())))
    s = _by_name(Q.assess(table, [json.dumps({"reasoning": "doc_2 covers the query; doc_1 does not."})] * 20))
    assert not any(x.failed for x in s.values())
    assert s["position"].n == len(table.groupby(["query_id", "window_id"])) and abs(s["position"].value) < 0.1
    assert s["mirror"].value > 0.5

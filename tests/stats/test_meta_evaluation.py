"""``rcp_jax.stats.meta_evaluation``: Kendall's tau-b against scipy, tau_AP against a brute-force reference
written here from Yilmaz, Aslam & Robertson (SIGIR 2008), and the agreement on significant pairs on a
constructed table whose answer is known (and checked again with scipy's paired t-test)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from rcp_jax.errors import DataError
from rcp_jax.stats.meta_evaluation import meta_evaluate, tau_ap


def tau_ap_by_definition(evaluated: list[str], truth: list[str]) -> float:
    """tau_AP from the paper's words: for each item at rank i >= 2 of the evaluated list, C(i) = how many
    of the items above it in the evaluated list are also above it in the true list;
    p' = mean over i of C(i) / (i - 1); tau_AP = 2 p' - 1. Lists are best first."""
    n = len(evaluated)
    total = 0.0
    for i in range(1, n):  # 0-based position i = rank i + 1
        item = evaluated[i]
        correct = sum(1 for above in evaluated[:i] if truth.index(above) < truth.index(item))
        total += correct / i
    return 2 * total / (n - 1) - 1


def ranking(scores: np.ndarray, names: list[str]) -> list[str]:
    return [names[i] for i in np.argsort(-scores, kind="stable")]


def test_tau_ap_matches_the_definition_on_every_permutation_of_five_and_random_scores():
    names = list("abcde")
    truth_scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    for perm in itertools.permutations(range(5)):
        scores = np.empty(5)
        scores[list(perm)] = truth_scores  # item perm[k] gets score 5 - k
        expected = tau_ap_by_definition(ranking(scores, names), names)
        assert tau_ap(scores, truth_scores) == pytest.approx(expected, abs=1e-12)
    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 12):
        names = [f"s{i}" for i in range(n)]
        for _ in range(20):
            x, y = rng.normal(size=n), rng.normal(size=n)
            assert tau_ap(x, y) == pytest.approx(tau_ap_by_definition(ranking(x, names), ranking(y, names)))


def test_tau_ap_known_values_and_top_weighting():
    ref = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    assert tau_ap(ref, ref) == 1.0
    assert tau_ap(-ref, ref) == -1.0
    top_swap = np.array([4.0, 5.0, 3.0, 2.0, 1.0])
    bottom_swap = np.array([5.0, 4.0, 3.0, 1.0, 2.0])
    assert tau_ap(top_swap, ref) == pytest.approx(0.5)
    assert tau_ap(bottom_swap, ref) == pytest.approx(0.875)
    assert sps.kendalltau(top_swap, ref).statistic == pytest.approx(sps.kendalltau(bottom_swap, ref).statistic)
    # asymmetric: the evaluated list's top weighs more
    x, y = np.array([3.0, 1.0, 2.0, 0.0]), np.array([3.0, 2.0, 0.0, 1.0])
    assert tau_ap(x, y) != pytest.approx(tau_ap(y, x))


def test_tau_ap_is_undefined_with_ties_or_too_few_systems():
    assert math.isnan(tau_ap([1.0, 1.0, 0.0], [3.0, 2.0, 1.0]))
    assert math.isnan(tau_ap([3.0, 2.0, 1.0], [1.0, 1.0, 0.0]))
    assert math.isnan(tau_ap([1.0], [1.0]))
    with pytest.raises(DataError, match="one length"):
        tau_ap([1.0, 2.0], [1.0, 2.0, 3.0])


Q = 20


def constructed_table(seed: int = 0) -> pd.DataFrame:
    """Four systems on 20 queries whose separations are known.

    qrel: A 0.9 > B 0.7 > C 0.5 ~ D 0.49 (C - D alternates +-0.2: not separated); rcp: B 0.9 > A 0.7 (a
    swap the t-test sees) > C 0.5 > D 0.3 (separated); count: qrel plus a little noise.
    """
    rng = np.random.default_rng(seed)
    alt = np.where(np.arange(Q) % 2 == 0, 1.0, -1.0)
    qrel = {"A": 0.9, "B": 0.7, "C": 0.5 + 0.1 * alt, "D": 0.49 - 0.1 * alt}
    rcp = {"A": 0.7, "B": 0.9, "C": 0.5, "D": 0.3}
    rows = []
    for s in "ABCD":
        q_val = qrel[s] + 0.01 * rng.normal(size=Q)
        r_val = rcp[s] + 0.01 * rng.normal(size=Q)
        c_val = q_val + 0.001 * rng.normal(size=Q)
        rows += [{"system": s, "query_id": f"q{q}", "rcp_ndcg": r_val[q], "count_ndcg": c_val[q],
                  "qrel_ndcg": q_val[q]} for q in range(Q)]
    return pd.DataFrame(rows)


def test_significant_pair_agreement_on_a_constructed_table():
    table = constructed_table()
    result = meta_evaluate(table)
    rcp = result.summary.set_index("metric").loc["rcp_ndcg"]
    assert rcp.n_reference_separated == 5  # AB AC AD BC BD; not CD
    assert rcp.n_same_order == 4 and rcp.share_same_order == pytest.approx(0.8)
    assert rcp.n_also_separated == 4
    assert rcp.n_swaps == 1 and rcp.share_swaps == pytest.approx(0.2)  # A-B
    assert rcp.n_candidate_separated == 6 and rcp.n_candidate_only == 1  # C-D
    assert rcp.kendall_tau == pytest.approx(4 / 6)
    assert rcp.tau_ap == pytest.approx(1 / 3)  # the swap at the top of RCP's ranking
    count = result.summary.set_index("metric").loc["count_ndcg"]
    assert count.kendall_tau == pytest.approx(1.0) and count.n_swaps == 0 and count.n_same_order == 5

    # the same counts from scipy's paired t-test, pair by pair
    wide = {m: table.pivot(index="query_id", columns="system", values=m) for m in ("qrel_ndcg", "rcp_ndcg")}
    sep = {m: {} for m in wide}
    for m, w in wide.items():
        for a, b in itertools.combinations("ABCD", 2):
            d = w[a] - w[b]
            sep[m][a, b] = (sps.ttest_rel(w[a], w[b]).pvalue < 0.05, np.sign(d.mean()))
    ref_sep = [p for p, (s, _) in sep["qrel_ndcg"].items() if s]
    assert len(ref_sep) == rcp.n_reference_separated
    assert sum(sep["rcp_ndcg"][p][1] == sep["qrel_ndcg"][p][1] for p in ref_sep) == rcp.n_same_order
    assert sum(sep["rcp_ndcg"][p][0] and sep["rcp_ndcg"][p][1] != sep["qrel_ndcg"][p][1]
               for p in ref_sep) == rcp.n_swaps


def test_kendall_tau_agrees_with_scipy_on_system_means_with_ties():
    rng = np.random.default_rng(11)
    rows = []
    means = {"s0": 0.5, "s1": 0.5, "s2": 0.4, "s3": 0.7, "s4": 0.6, "s5": 0.45}
    for s, mu in means.items():
        for q in range(6):
            rows.append({"system": s, "query_id": f"q{q}", "qrel_ndcg": mu,  # constant: tied s0 = s1 means
                         "rcp_ndcg": mu + rng.normal(scale=0.2), "count_ndcg": rng.random()})
    result = meta_evaluate(pd.DataFrame(rows), n_permutations=1000)
    m = result.means
    for metric in ("rcp_ndcg", "count_ndcg"):
        row = result.summary.set_index("metric").loc[metric]
        assert row.kendall_tau == pytest.approx(sps.kendalltau(m[metric], m["qrel_ndcg"]).statistic)
        assert math.isnan(row.tau_ap)  # tied reference means
    assert any("tied qrel_ndcg means (s0 = s1)" in n for n in result.notes)
    assert "n/a" in result.format()


def test_rankings_use_the_common_queries_and_rcp_is_also_reported_on_all():
    table = constructed_table()
    unlabelled = table["query_id"].isin([f"q{q}" for q in range(10, 20)])
    table.loc[unlabelled, "qrel_ndcg"] = np.nan
    table.loc[unlabelled & (table.system == "D"), "rcp_ndcg"] += 0.5  # D only looks good where qrels lack
    result = meta_evaluate(table)
    assert (result.n_queries, result.n_queries_all) == (10, 20)
    d = result.means.set_index("system").loc["D"]
    labelled = table.loc[~unlabelled & (table.system == "D")]
    assert d.rcp_ndcg == pytest.approx(labelled.rcp_ndcg.mean())
    assert d.rcp_ndcg_all_queries == pytest.approx(table.loc[table.system == "D", "rcp_ndcg"].mean())
    assert "10 common queries (20 with the other metrics)" in result.format()
    assert set(result.table().columns) >= {"tau", "tau_AP", "same_order", "swaps"}


def test_correction_and_alpha_reach_the_pairs():
    table = constructed_table()
    plain = meta_evaluate(table)
    holm = meta_evaluate(table, correction="holm")
    assert holm.correction == "holm" and "p_holm" in holm.pairs.columns
    assert (holm.pairs["p_holm"] >= plain.pairs["p"] - 1e-15).all()
    none = meta_evaluate(table, alpha=1e-300)
    row = none.summary.set_index("metric").loc["rcp_ndcg"]
    assert row.n_reference_separated == 0 and math.isnan(row.share_same_order)
    assert "separates no pair" in none.format()


@pytest.mark.parametrize("change, message", [
    (lambda t: t.drop(columns="qrel_ndcg"), "evaluate with --qrels"),
    (lambda t: t.assign(qrel_ndcg=np.nan), "evaluate with --qrels"),
    (lambda t: t[t.system.isin(["A", "B"])], "at least 3 systems"),
    (lambda t: t.drop(columns=["rcp_ndcg", "count_ndcg"]), "no metric to compare"),
])
def test_clear_errors(change, message):
    with pytest.raises(DataError, match=message):
        meta_evaluate(change(constructed_table()))

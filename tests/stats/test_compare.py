"""System comparison tables: known answers and oracles (scipy) on constructed per-query tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rcp_jax.stats import (
    compare_systems,
    format_table,
    gain_rank_correlation,
    robustness,
    sensitivity_report,
    sign_agreement,
)
from rcp_jax.errors import DataError
from rcp_jax.per_query import prepare_per_query, score_matrix, system_scores

FAST = dict(n_permutations=2000, n_bootstrap=200)


def _table(values: dict[str, np.ndarray], dataset: str | None = None, metric: str = "rcp_ndcg") -> pd.DataFrame:
    rows = []
    for system, v in values.items():
        for q, x in enumerate(v):
            row = {"system": system, "query_id": f"q{q}", metric: x}
            if dataset is not None:
                row["dataset"] = dataset
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def two_datasets() -> pd.DataFrame:
    """d1: A = B + 0.3 (+ noise) and C == B exactly -> 2 of 3 pairs separated; d2: all identical -> 0 of 3."""
    rng = np.random.default_rng(0)
    b = rng.uniform(0.2, 0.6, size=20)
    d1 = _table({"A": b + 0.3 + rng.normal(0, 0.02, 20), "B": b, "C": b.copy()}, "d1")
    e = rng.uniform(0.2, 0.9, size=8)
    d2 = _table({"A": e, "B": e.copy(), "C": e.copy()}, "d2")
    return pd.concat([d1, d2], ignore_index=True)


def test_sensitivity_known_answer(two_datasets):
    c = compare_systems(two_datasets, **FAST)
    s = c.sensitivity.set_index("dataset")
    assert (s.loc["d1", "n_separated"], s.loc["d1", "n_pairs"]) == (2, 3)
    assert (s.loc["d2", "n_separated"], s.loc["d2", "n_pairs"]) == (0, 3)
    assert c.sensitivity_summary().mean_share.iloc[0] == pytest.approx((2 / 3 + 0) / 2)
    sep = c.pairs[c.pairs.separated][["dataset", "system_a", "system_b"]].values.tolist()
    assert sorted(sep) == [["d1", "A", "B"], ["d1", "A", "C"]]


def test_pair_statistics_match_scipy(two_datasets):
    rng = np.random.default_rng(3)
    df = two_datasets.copy()
    df["rcp_ndcg"] += rng.normal(0, 0.05, size=len(df))  # make every pair non-degenerate
    c = compare_systems(df, **FAST)
    for r in c.pairs.itertuples():
        systems, _, x = score_matrix(prepare_per_query(df)[0], "rcp_ndcg", dataset=r.dataset)
        a, b = x[systems.index(r.system_a)], x[systems.index(r.system_b)]
        ref = stats.ttest_rel(a, b)
        assert r.t == pytest.approx(ref.statistic, rel=1e-10)
        assert r.p_t == pytest.approx(ref.pvalue, rel=1e-9)
        assert r.p_wilcoxon == pytest.approx(stats.wilcoxon(a, b, method="exact").pvalue, rel=1e-9)
        assert r.diff == pytest.approx(np.mean(a - b), abs=1e-14)
        assert r.mean_a == pytest.approx(a.mean()) and r.mean_b == pytest.approx(b.mean())
        assert r.ci_low <= r.diff <= r.ci_high


def test_overall_is_unweighted_mean_over_datasets(two_datasets):
    c = compare_systems(two_datasets, **FAST)
    ab = c.pairs[(c.pairs.system_a == "A") & (c.pairs.system_b == "B")].set_index("dataset")["diff"]
    row = c.overall[(c.overall.system_a == "A") & (c.overall.system_b == "B")].iloc[0]
    assert row["diff"] == pytest.approx((ab["d1"] + ab["d2"]) / 2)
    assert row.n_datasets == 2
    # system score = mean over datasets of per-dataset means
    sc = c.systems.set_index("system")["score"]
    d = two_datasets
    a_expected = np.mean([d[(d.system == "A") & (d.dataset == ds)].rcp_ndcg.mean() for ds in ("d1", "d2")])
    assert sc["A"] == pytest.approx(a_expected)


def test_missing_values_are_dropped_pairwise():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(0, 1, 15), rng.uniform(0, 1, 15)
    df = _table({"A": a, "B": b}, metric="qrel_ndcg")
    df.loc[(df.system == "A") & (df.query_id == "q3"), "qrel_ndcg"] = np.nan
    df.loc[df.query_id == "q7", "qrel_ndcg"] = np.nan  # a query without a positive qrel
    c = compare_systems(df, tests=["t"], n_bootstrap=50)
    keep = [i for i in range(15) if i not in (3, 7)]
    row = c.pairs.iloc[0]
    assert row.n_queries == 13
    sign = 1 if row.system_a == "A" else -1
    ref = stats.ttest_rel(a[keep], b[keep])
    assert row.p_t == pytest.approx(ref.pvalue, rel=1e-10)
    assert row.t == pytest.approx(sign * ref.statistic, rel=1e-10)


def test_permutation_column_matches_direct_call(two_datasets):
    c = compare_systems(two_datasets, tests=["permutation"], test="permutation", n_permutations=3000,
                        n_bootstrap=20, seed=5)
    assert "p_t" not in c.pairs and "p_wilcoxon" not in c.pairs
    s = c.pairs.set_index(["dataset", "system_a", "system_b"])
    assert s.loc[("d1", "A", "B"), "p_permutation"] == pytest.approx(1 / 3001)
    assert s.loc[("d2", "A", "B"), "p_permutation"] == 1.0  # identical systems


def test_corrections_change_separation():
    rng = np.random.default_rng(8)
    base = rng.uniform(0.3, 0.7, 12)
    # five systems with small shifts: several pairs borderline at 0.05
    vals = {f"S{i}": base + 0.012 * i + rng.normal(0, 0.03, 12) for i in range(5)}
    df = _table(vals)
    none = compare_systems(df, tests=["t"], n_bootstrap=20)
    holm = compare_systems(df, tests=["t"], n_bootstrap=20, correction="holm")
    bonf = compare_systems(df, tests=["t"], n_bootstrap=20, correction="bonferroni")
    n0, nh, nb = (x.pairs.separated.sum() for x in (none, holm, bonf))
    assert n0 > nb and nh >= nb and n0 >= nh
    np.testing.assert_allclose(bonf.pairs.p_bonferroni, np.minimum(1, none.pairs.p_t * 10))


def test_sign_agreement_hand_built():
    pairs = pd.DataFrame({
        "metric": ["qrel_ndcg"] * 3 + ["rcp_ndcg"] * 3,
        "dataset": ["x"] * 6,
        "system_a": ["A", "A", "B"] * 2, "system_b": ["B", "C", "C"] * 2,
        "diff": [0.1, -0.2, 0.05, 0.3, 0.1, 0.2],
        "separated": [True, True, False, True, True, True],
    })
    out = sign_agreement(pairs, "qrel_ndcg", "rcp_ndcg").set_index("dataset").loc["all datasets"]
    assert out.n_reference_separated == 2
    assert out.n_same_sign == 1 and out.share_same_sign == 0.5
    assert out.n_other_separated_same_sign == 1 and out.n_other_separated_opposite == 1


def test_kendall_between_metrics_matches_scipy():
    rng = np.random.default_rng(11)
    rows = []
    for s in range(6):
        for q in range(10):
            r = 0.4 + 0.05 * s + rng.normal(0, 0.1)
            rows.append({"system": f"s{s}", "query_id": f"q{q}", "rcp_ndcg": r, "qrel_ndcg": r + rng.normal(0, 0.2)})
    df = pd.DataFrame(rows)
    c = compare_systems(df, ["qrel_ndcg", "rcp_ndcg"], tests=["t"], n_bootstrap=20)
    wide = df.groupby("system")[["qrel_ndcg", "rcp_ndcg"]].mean()
    k = c.kendall.iloc[0]
    assert k.kendall_tau == pytest.approx(stats.kendalltau(wide.qrel_ndcg, wide.rcp_ndcg).statistic)
    assert k.spearman_rho == pytest.approx(stats.spearmanr(wide.qrel_ndcg, wide.rcp_ndcg).statistic)
    assert set(c.agreement.reference) == {"qrel_ndcg", "rcp_ndcg"}


def test_tables_and_report(two_datasets):
    df = two_datasets.assign(qrel_ndcg=two_datasets.rcp_ndcg.round(1))
    c = compare_systems(df, ["qrel_ndcg", "rcp_ndcg"], **FAST)
    md = c.to_markdown(include_pairs=True)
    assert "| dataset | qrel_ndcg | rcp_ndcg |" in md and "| d1 |" in md and "## Pairs" in md
    tex = c.to_latex()
    assert r"\begin{tabular}" in tex and r"qrel\_ndcg" in tex and r"\%" in tex
    text = sensitivity_report(c)
    assert text.splitlines()[0].startswith("d1: rcp_ndcg 2/3 (66.7%) vs qrel_ndcg")
    assert "mean over datasets" in text.splitlines()[-1]
    with pytest.raises(DataError, match="count_ndcg"):
        sensitivity_report(c, candidate="count_ndcg")


def test_sensitivity_table_with_a_metric_missing_in_a_dataset():
    rng = np.random.default_rng(6)
    rows = [{"dataset": ds, "system": s, "query_id": str(q), "rcp_ndcg": rng.uniform(),
             "qrel_ndcg": np.nan if ds == "d2" else rng.uniform()}
            for ds in ("d1", "d2") for q in range(6) for s in "ABC" if not (ds == "d2" and s == "C")]
    c = compare_systems(pd.DataFrame(rows), tests=["t"], n_bootstrap=20)
    t = c.sensitivity_table()
    assert t.dataset.tolist() == ["d1", "d2", "mean"]
    assert t.set_index("dataset").loc["d2", "qrel_ndcg"] == ""
    assert t.set_index("dataset").loc["d2", "rcp_ndcg"] == "0/1 (0.0%)"  # C has no d2 queries: one testable pair
    assert (c.pairs[(c.pairs.dataset == "d2") & (c.pairs.system_a == "C")].n_queries == 0).all()


def test_format_table_latex_escapes():
    tex = format_table(pd.DataFrame({"a_b": ["x&y"], "p": [0.5]}), "latex")
    assert r"a\_b & p \\" in tex and r"x\&y & 0.500 \\" in tex


def test_input_errors_name_column_and_row():
    good = _table({"A": [0.1, 0.2], "B": [0.3, 0.4]})
    with pytest.raises(DataError, match="missing column.*system"):
        compare_systems(good.drop(columns="system"))
    with pytest.raises(DataError, match="more than one row for query 'q0'"):
        compare_systems(pd.concat([good, good.iloc[:1]]))
    bad = good.astype({"rcp_ndcg": object})
    bad.loc[1, "rcp_ndcg"] = "high"
    with pytest.raises(DataError, match="'rcp_ndcg' row 1 .*not a number"):
        compare_systems(bad)
    with pytest.raises(DataError, match="not found"):
        compare_systems(good, ["count_ndcg"])
    with pytest.raises(DataError, match="at least two systems"):
        compare_systems(good[good.system == "A"])
    with pytest.raises(DataError, match="unknown test"):
        compare_systems(good, test="anova")


def test_system_scores_drop_nan_before_averaging():
    df = _table({"A": [0.2, np.nan, 0.4], "B": [0.1, 0.1, 0.1]})
    s = system_scores(df).set_index("system")
    assert s.loc["A", "score"] == pytest.approx(0.3) and s.loc["A", "n_queries"] == 2


def test_robustness_counts_flips():
    rng = np.random.default_rng(2)
    base = rng.uniform(0.2, 0.5, 25)
    ref = {"A": base + 0.3, "B": base + 0.15, "C": base}
    ref = {k: v + rng.normal(0, 0.01, 25) for k, v in ref.items()}
    same = _table(ref)
    swapped = _table({"A": ref["C"], "B": ref["B"], "C": ref["A"]})  # A and C exchange places
    out = robustness({"rubric-v1": _table(ref), "copy": same, "swap": swapped}).set_index("variant")
    assert out.loc["copy", "n_significant_reference"] == 3
    assert out.loc["copy", ["n_flipped", "n_lost", "n_gained"]].tolist() == [0, 0, 0]
    assert out.loc["copy", "kendall_tau"] == pytest.approx(1.0)
    # swapping A and C reverses all three orderings (A>B, A>C, B>C all flip)
    assert out.loc["swap", "n_flipped"] == 3 and out.loc["swap", "n_flipped_significant"] == 3
    assert out.loc["swap", "kendall_tau"] == pytest.approx(-1.0)


def test_gain_rank_correlation():
    g = pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 4, "doc_id": list("abcdabcd"),
                      "gain": [0.9, 0.5, 0.3, 0.1, 0.8, 0.6, 0.2, 0.05]})
    rev = g.assign(gain=g.groupby("query_id").gain.transform(lambda s: s.iloc[::-1].to_numpy()))
    out = gain_rank_correlation({"ref": g, "same": g.copy(), "rev": rev}).set_index("variant")
    assert out.loc["same", "spearman_rho"] == pytest.approx(1.0)
    assert out.loc["same", "kendall_tau"] == pytest.approx(1.0)
    assert out.loc["rev", "mean_query_spearman"] == pytest.approx(-1.0)
    assert out.loc["rev", "n_docs"] == 8

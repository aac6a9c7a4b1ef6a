"""The PPI++ estimator against independent formulas (scipy, numpy.polyfit), and its table-level checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rcp_jax import DataError, anchored_comparison, anchored_mean, plan_labels
from rcp_jax.anchored import human_only_mean
from rcp_jax.anchored.simulate import simulate_benchmark


def _sample(n_all=60, n=15, seed=0):
    rng = np.random.default_rng(seed)
    f = rng.normal(size=n_all)
    y_all = 0.5 + 1.7 * f + rng.normal(scale=0.4, size=n_all)
    lab = np.zeros(n_all, bool)
    lab[rng.choice(n_all, n, replace=False)] = True
    return y_all, f, lab


def test_human_only_is_the_textbook_finite_population_t_interval():
    y_all, _, lab = _sample()
    est = human_only_mean(np.where(lab, y_all, np.nan), level=0.9)
    y, n, big_n = y_all[lab], lab.sum(), lab.size
    se = np.sqrt((1 - n / big_n) * y.var(ddof=1) / n)
    low, high = stats.t.interval(0.9, n - 1, loc=y.mean(), scale=se)
    assert est.estimate == pytest.approx(y.mean())
    assert (est.low, est.high) == pytest.approx((low, high))


def _ppi_plus_plus(y_lab, f_lab, f_all):
    lam, _ = np.polyfit(f_lab, y_lab, 1)
    return lam * f_all.mean() + (y_lab - lam * f_lab).mean(), lam


def test_anchored_is_ppi_plus_plus_with_the_least_squares_lambda():
    y_all, f, lab = _sample()
    est = anchored_mean(np.where(lab, y_all, np.nan), f, level=0.9)
    theta, lam = _ppi_plus_plus(y_all[lab], f[lab], f)
    assert est.lam == pytest.approx(lam)
    assert est.estimate == pytest.approx(theta)


def test_anchored_variance_is_the_leave_one_out_one_of_the_estimator_s_linear_weights():
    """The se from independent pieces: each label's weight in the estimate (finite differences of PPI++ written
    here), each query's residual under the line fitted without it (np.polyfit), the centring's n - 1 divisor."""
    y_all, f, lab = _sample()
    est = anchored_mean(np.where(lab, y_all, np.nan), f, level=0.9)
    y, fl, n, big_n = y_all[lab], f[lab], lab.sum(), lab.size
    theta, _ = _ppi_plus_plus(y, fl, f)
    weights = np.array([(_ppi_plus_plus(y + 1e-3 * np.eye(n)[i], fl, f)[0] - theta) / 1e-3 for i in range(n)])
    loo = np.array([y[i] - np.polyval(np.polyfit(np.delete(fl, i), np.delete(y, i), 1), fl[i]) for i in range(n)])
    pi = n / big_n
    terms = ((weights - 1 / big_n) ** 2 + (1 - pi) / (pi * big_n**2)) * loo**2 * (1 - 1 / n)
    assert est.se == pytest.approx(np.sqrt(terms.sum()), rel=1e-6)
    # Satterthwaite degrees of freedom of a sum of chi^2_1-like terms, capped at n - 2
    df = min(n - 2, 3 * terms.sum() ** 2 / (terms**2).sum())
    assert est.df == pytest.approx(df, rel=1e-6)
    assert est.high - est.estimate == pytest.approx(stats.t.ppf(0.95, df) * est.se)
    # one query carrying most of the variance: few degrees of freedom, a wider t quantile
    y_out = y_all.copy()
    y_out[np.flatnonzero(lab)[0]] += 5.0
    assert float(anchored_mean(np.where(lab, y_out, np.nan), f).df) < 6 < n - 2
    # with the judge's f balanced (labelled mean = benchmark mean) and equal leverage it is the design-based
    # (1 - n/N) S_r^2 / n up to the leave-one-out factor, which is above 1
    resid = y - np.polyval(np.polyfit(fl, y, 1), fl)
    assert est.se > np.sqrt((1 - pi) * resid.var(ddof=2) / n) * 0.9


def test_every_query_labelled_gives_the_exact_benchmark_mean():
    y_all, f, _ = _sample()
    est = anchored_mean(y_all, f)
    assert est.estimate == pytest.approx(y_all.mean()) and est.width == 0


def test_bad_probabilities_are_refused():
    y_all, f, lab = _sample()
    with pytest.raises(DataError, match="probability"):
        anchored_mean(np.where(lab, y_all, np.nan), f, np.where(lab, 0.0, 0.5))


def _table(frac=0.25, seed=0, queries=80):
    b = simulate_benchmark(np.random.default_rng(seed), replications=1, queries=queries)
    lab = np.random.default_rng(seed + 1).random(queries) < frac
    rows = [{"system": name, "query_id": f"q{q}", "rcp_ndcg": b.judge[0, s, q],
             "qrel_ndcg": b.human[0, s, q] if lab[q] else np.nan}
            for s, name in enumerate(b.systems) for q in range(queries)]
    return pd.DataFrame(rows), b


def test_table_comparison_reports_systems_pairs_and_assumptions():
    table, _ = _table()
    comp = anchored_comparison(table)
    assert list(comp.systems["system"]) == ["A", "B", "C", "D"] and len(comp.pairs) == 6
    text = comp.to_text()
    assert "simple random sample" in text and "inference target" in text
    assert set(comp.pairs["verdict"]) <= {"undecided", "A better", "B better", "C better", "D better"}


def test_partly_labelled_query_is_refused_with_its_id():
    table, _ = _table()
    i = table.index[table["qrel_ndcg"].notna()][0]
    table.loc[i, "qrel_ndcg"] = np.nan
    with pytest.raises(DataError, match="for some systems only"):
        anchored_comparison(table)


def test_a_plan_round_is_read_back_and_its_rules_enforced():
    table, b = _table()
    plan = plan_labels(table, 15, seed=3)
    assert plan["pi"].sum() == pytest.approx(15) and set(plan["selected"]) <= {0, 1}
    chosen = set(plan.loc[plan["selected"] == 1, "query_id"])
    with pytest.raises(DataError, match="no human label"):
        anchored_comparison(table, plan=plan)
    labelled = table.copy()
    mask = labelled["query_id"].isin(chosen)
    labelled.loc[mask, "qrel_ndcg"] = [b.human[0, "ABCD".index(r.system), int(r.query_id[1:])]
                                       for r in labelled.loc[mask].itertuples()]
    comp = anchored_comparison(labelled, plan=plan)
    assert comp.n_labelled == int(table["qrel_ndcg"].notna().sum() / 4) + len(chosen)
    outside = plan.loc[plan["selected"] == 0, "query_id"].iloc[0]
    labelled.loc[labelled["query_id"] == outside, "qrel_ndcg"] = 0.5
    with pytest.raises(DataError, match="did not select"):
        anchored_comparison(labelled, plan=plan)


def test_a_first_plan_round_from_the_sd_column_is_the_horvitz_thompson_estimate():
    b = simulate_benchmark(np.random.default_rng(4), replications=1, queries=80, slip_share=0.1, slip_sd=0.4)
    table = pd.DataFrame([{"system": name, "query_id": f"q{q}", "rcp_ndcg": b.judge[0, s, q], "qrel_ndcg": np.nan,
                           "sd": b.judge_sd[0, s, q]} for s, name in enumerate(b.systems) for q in range(80)])
    plan = plan_labels(table, 20, uncertainty="sd", seed=1)
    assert plan["pi"].sum() == pytest.approx(20) and plan["pi"].std() > 0
    # larger reported sd, larger probability (sd is the same for every system of a query here)
    sd = table.groupby("query_id", sort=False)["sd"].first().loc[plan["query_id"]].to_numpy()
    assert np.corrcoef(sd, plan["pi"])[0, 1] > 0.5
    chosen = plan.loc[plan["selected"] == 1, "query_id"]
    lab = table["query_id"].isin(chosen)
    table.loc[lab, "qrel_ndcg"] = [b.human[0, "ABCD".index(r.system), int(r.query_id[1:])]
                                   for r in table.loc[lab].itertuples()]
    comp = anchored_comparison(table, plan=plan)
    pi = plan.set_index("query_id")["pi"].reindex([f"q{q}" for q in range(80)]).to_numpy()
    y = b.human[0, 0] - b.human[0, 1]
    mask = np.isin([f"q{q}" for q in range(80)], chosen)
    # the pivot sorts query ids as strings: compare on the one-design estimator with the same order
    order = np.argsort([f"q{q}" for q in range(80)])
    direct = anchored_mean(np.where(mask, y, np.nan)[order], (b.judge[0, 0] - b.judge[0, 1])[order], pi[order])
    row = comp.pairs.iloc[0]
    assert (row["anchored"], row["anchored_low"], row["anchored_high"]) == pytest.approx(
        (float(direct.estimate), float(direct.low), float(direct.high)))

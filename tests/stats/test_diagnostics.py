"""Undistinguishable queries and calibration diagnostics: constructed cases and simulations with known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from rcp_jax.stats.diagnostics import (
    answers_long,
    brier_score,
    calibration_report,
    expected_calibration_error,
    fit_query_scales,
    item_transfer,
    local_dependence,
    mean_abs_correlation,
    predict_answers,
    reliability_table,
    tau_spread,
    undistinguishable_queries,
    undistinguishable_summary,
)
from rcp_jax.errors import DataError
from rcp_jax.plots import plot_reliability

GAMMA = np.array([1.169, 1.047, 0.940, 1.157, 0.687])
BETA = np.array([-2.572, -2.002, -0.251, 0.709, 4.116])


# ------------------------------------------------------------------------------ undistinguishable
def _per_query(scores: dict[str, list[float]], dataset: str = "d") -> pd.DataFrame:
    rows = []
    for q, vals in scores.items():
        for s, v in enumerate(vals):
            rows.append({"dataset": dataset, "system": f"s{s}", "query_id": q, "qrel_ndcg": v})
    return pd.DataFrame(rows)


def test_undistinguishable_constructed_systems():
    df = _per_query({
        "sat": [1.0, 1.0, 1.0, 1.0],
        "floor": [0.0, 0.0, 0.0, 0.0],
        "half": [0.5, 0.5, 0.5, 0.7],       # 3 of 6 pairs tie: exactly half, not "more than half"
        "comp": [0.3, 0.3, 0.3, 0.3 + 1e-12],  # all pairs tie within atol
        "fine": [0.1, 0.4, 0.6, 0.9],
        "noqrel": [np.nan] * 4,              # no positive qrel: left out
        "mixed": [1.0, 1.0, 1.0, 0.0],       # not saturated; 3 of 6 ties
        "most": [0.2, 0.2, 0.2, 0.2, ][:3] + [0.9],  # 3 ties of 6 again
    })
    flags = undistinguishable_queries(df).set_index("query_id")
    assert "noqrel" not in flags.index
    assert flags.loc["sat", ["saturated", "floor", "compressed"]].tolist() == [True, False, False]
    assert flags.loc["floor", ["saturated", "floor", "compressed"]].tolist() == [False, True, False]
    assert flags.loc["comp", "compressed"] and flags.loc["comp", "tie_share"] == 1.0
    assert flags.loc["half", "tie_share"] == 0.5 and not flags.loc["half", "undistinguishable"]
    assert not flags.loc["fine", "undistinguishable"] and not flags.loc["mixed", "undistinguishable"]
    summ = undistinguishable_summary(flags.reset_index()).iloc[0]
    assert (summ.n_queries, summ.saturated, summ.floor, summ.compressed, summ.undistinguishable) == (7, 1, 1, 1, 3)
    assert summ.share == pytest.approx(3 / 7)


def test_undistinguishable_more_than_half_and_subset_of_systems():
    # 5 systems: 10 pairs; four equal values -> 6 tied pairs (> half)
    df = _per_query({"q": [0.4, 0.4, 0.4, 0.4, 0.8], "r": [0.4, 0.4, 0.4, 0.7, 0.8]})
    flags = undistinguishable_queries(df).set_index("query_id")
    assert flags.loc["q", "compressed"] and flags.loc["q", "tie_share"] == 0.6
    assert not flags.loc["r", "compressed"] and flags.loc["r", "tie_share"] == 0.3
    # restricted to the three tied systems of r, it becomes compressed
    sub = undistinguishable_queries(df, systems=["s0", "s1", "s2"]).set_index("query_id")
    assert sub.loc["r", "compressed"] and sub.loc["r", "n_systems"] == 3
    with pytest.raises(DataError, match="not in the per-query table"):
        undistinguishable_queries(df, systems=["nope"])


def test_undistinguishable_summary_pools_datasets_per_metric():
    a = _per_query({"q1": [1.0, 1.0], "q2": [0.2, 0.5]}, "A")
    b = _per_query({"q1": [0.0, 0.0]}, "B")
    df = pd.concat([a, b]).assign(rcp_ndcg=lambda x: x.qrel_ndcg * 0.9 + 0.05)
    summ = undistinguishable_summary(undistinguishable_queries(df)).set_index(["metric", "dataset"])
    assert summ.loc[("qrel_ndcg", "all"), "undistinguishable"] == 2
    assert summ.loc[("qrel_ndcg", "all"), "n_queries"] == 3
    assert summ.loc[("rcp_ndcg", "all"), "undistinguishable"] == 2  # ties survive an affine map (compressed)
    assert summ.loc[("rcp_ndcg", "A"), "compressed"] == 1


# ------------------------------------------------------------------------------------- ECE, Brier
def _ece_loop(p, y, n_bins=10):
    total, n = 0.0, len(p)
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = (p >= lo) & ((p < hi) if b < n_bins - 1 else (p <= hi))
        if sel.any():
            total += sel.sum() * abs(p[sel].mean() - y[sel].mean())
    return total / n


def test_ece_hand_worked_and_bin_edges():
    # bins: [0,.1): .05 vs 0 -> .05 x1; [.1,.2): .15 vs .5 -> .35 x2; [.9,1]: .95 vs 1 -> .05 x1
    assert expected_calibration_error([0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1]) == pytest.approx(0.2)
    t = reliability_table([0.1, 1.0, 0.0999], [1, 1, 0])
    assert t["count"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        expected_calibration_error([1.2], [1])
    with pytest.raises(DataError, match="0 or 1"):
        brier_score([0.5], [2])


def test_ece_of_perfectly_calibrated_simulator_is_small():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 50_000)
    y = (rng.uniform(0, 1, p.size) < p).astype(float)
    ece = expected_calibration_error(p, y)
    assert ece < 0.02
    assert ece == pytest.approx(_ece_loop(p, y), abs=1e-12)
    bad = p**0.3  # overconfident in "yes"
    assert expected_calibration_error(bad, y) > 0.15
    assert brier_score(p, y) == pytest.approx(1 / 6, abs=0.01)  # E[p(1-p)] for p ~ U(0, 1)


def _simulate_rubric(rng, n_queries=60, n_docs=20, placements=2, tau_range=(0.5, 1.6)):
    """2PL answers with per-query scale/offset; BT scores = (ability - alpha) / tau."""
    rows = []
    for j in range(n_queries):
        tau = np.exp(rng.uniform(*np.log(tau_range)))
        alpha = rng.normal(0.0, 1.0)
        theta_bt = rng.normal(0.0, 2.0, n_docs)
        ability = tau * theta_bt + alpha
        for i in range(n_docs):
            for _ in range(placements):
                y = (rng.uniform(size=5) < predict_answers(np.full(5, ability[i]), np.arange(5), GAMMA, BETA)).astype(int)
                rows.append({"query_id": f"q{j}", "doc_id": f"q{j}-d{i}", "theta": theta_bt[i],
                             "ability": ability[i], "tau": tau, **{f"C{c + 1}": y[c] for c in range(5)}})
    return pd.DataFrame(rows)


def test_calibration_report_raw_vs_calibrated():
    df = _simulate_rubric(np.random.default_rng(1))
    long = answers_long(df[["query_id", "doc_id", "theta", "ability", "C1", "C2", "C3", "C4", "C5"]])
    assert len(long) == 5 * len(df) and long.criterion.between(0, 4).all()
    p_cal = predict_answers(long.ability, long.criterion, GAMMA, BETA)
    p_raw = 1.0 / (1.0 + np.exp(-long.theta.to_numpy()))  # sigmoid of raw BT, no items, no query scaling
    rep = calibration_report(long.answer, {"raw": p_raw, "calibrated": p_cal}, long.criterion)
    assert set(rep.criterion) == {"C1", "C2", "C3", "C4", "C5", "all"}
    r = rep.set_index(["model", "criterion"])
    assert r.loc[("calibrated", "all"), "ece"] < 0.02
    assert r.loc[("raw", "all"), "ece"] > 0.1
    assert r.loc[("calibrated", "all"), "brier"] < r.loc[("raw", "all"), "brier"]
    assert r.loc[("calibrated", "C5"), "n"] == len(df)
    c1 = long.criterion == 0
    assert r.loc[("raw", "C1"), "ece"] == pytest.approx(_ece_loop(p_raw[c1], long.answer[c1].to_numpy()))


def test_local_dependence_raw_high_residual_low():
    df = _simulate_rubric(np.random.default_rng(2), n_queries=80, placements=1)
    y = df[[f"C{c}" for c in range(1, 6)]].to_numpy()
    expected = np.stack([predict_answers(df.ability, np.full(len(df), c), GAMMA, BETA) for c in range(5)], 1)
    out = local_dependence(y, expected)
    assert out["raw"] > 0.2
    assert out["residual"] < 0.05 < out["raw"] / 4
    assert local_dependence(y).keys() == {"raw"}


def test_mean_abs_correlation_hand_case():
    x = np.array([[1, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=float)  # third column constant
    # corr(c1, c2) = 0 here; the constant column's pairs are skipped
    assert mean_abs_correlation(x) == pytest.approx(0.0)
    x2 = np.array([[1, 0], [0, 1], [1, 0]], dtype=float)
    assert mean_abs_correlation(x2) == pytest.approx(1.0)


def test_tau_spread():
    assert tau_spread([1.0, 2.0, 3.0, np.nan], lo=0, hi=100) == pytest.approx(3.0)
    t = np.exp(np.random.default_rng(0).uniform(np.log(0.5), np.log(1.5), 10_000))
    # log-uniform on [0.5, 1.5]: the 5th..95th percentiles span 90% of log(3)
    assert tau_spread(t) == pytest.approx(3.0**0.9, rel=0.03)
    with pytest.raises(DataError, match="positive"):
        tau_spread([0.0, 1.0])


# ---------------------------------------------------------------------------------------- transfer
def _logistic_items(train: pd.DataFrame, bt: pd.DataFrame):
    """A simple fit we control: per criterion, a 1-D logistic regression of the answers on raw BT scores."""
    th = train.merge(bt, on=["query_id", "doc_id"])["theta"].to_numpy()
    gammas, betas = [], []
    for c in range(1, 6):
        y = train[f"C{c}"].to_numpy(dtype=float)

        def nll(w):
            z = w[0] * (th - w[1])
            return np.sum(np.logaddexp(0, z) - y * z)

        w = optimize.minimize(nll, x0=[1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-8}).x
        gammas.append(w[0])
        betas.append(w[1])
    return np.array(gammas), np.array(betas)


def test_fit_query_scales_matches_scipy_and_recovers_truth():
    df = _simulate_rubric(np.random.default_rng(5), n_queries=6, n_docs=40, placements=3)
    long = answers_long(df[["query_id", "doc_id", "theta", "tau", "C1", "C2", "C3", "C4", "C5"]])
    q = pd.factorize(long.query_id)[0]
    tau, alpha = fit_query_scales(q, long.theta, long.criterion, long.answer, GAMMA, BETA)
    for j in range(6):
        sel = q == j
        th, c, y = long.theta[sel].to_numpy(), long.criterion[sel].to_numpy(), long.answer[sel].to_numpy()

        def f(x):
            z = GAMMA[c] * (x[0] * th + x[1] - BETA[c])
            return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * (x[0] - 1) ** 2 + x[1] ** 2 / 8

        ref = optimize.minimize(f, [1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12}).x
        assert (tau[j], alpha[j]) == pytest.approx(tuple(ref), abs=1e-5)
    true_tau = df.groupby("query_id", sort=False).tau.first().to_numpy()
    assert np.corrcoef(tau, true_tau)[0, 1] > 0.9


@pytest.fixture(scope="module")
def three_datasets():
    rng = np.random.default_rng(3)
    parts = []
    for k, ds in enumerate(["A", "B", "C"]):
        df = _simulate_rubric(rng, n_queries=12, n_docs=15, placements=2)
        df["query_id"] = ds + df["query_id"]
        df["doc_id"] = ds + df["doc_id"]
        df["dataset"] = ds
        parts.append(df)
    df = pd.concat(parts, ignore_index=True)
    bt = df.drop_duplicates(["query_id", "doc_id"])[["query_id", "doc_id", "theta"]]
    answers = df[["dataset", "query_id", "doc_id", "ability", "C1", "C2", "C3", "C4", "C5"]]
    return answers, bt


def test_item_transfer_oracle_and_controlled_fit(three_datasets):
    answers, bt = three_datasets
    oracle = item_transfer(answers, bt, fit_items=lambda train: (GAMMA, BETA)).set_index("dataset")
    assert list(oracle.index) == ["A", "B", "C", "all"]
    assert oracle.loc["all", "reduction"] > 0.3
    assert oracle.loc["all", "n_answers"] == len(answers) * 5
    simple = item_transfer(answers, bt, fit_items=lambda train: _logistic_items(train, bt)).set_index("dataset")
    assert 0.1 < simple.loc["all", "reduction"] <= oracle.loc["all", "reduction"] + 0.02
    flat = item_transfer(answers, bt, fit_items=lambda train: (np.full(5, 1e-3), np.zeros(5)))
    assert flat.set_index("dataset").loc["all", "reduction"] < 0.0  # p ~ 0.5 everywhere is worse than base rates
    # with given abilities (no query fit) the oracle also transfers
    given = item_transfer(answers, None, fit_items=lambda train: (GAMMA, BETA)).set_index("dataset")
    assert given.loc["all", "reduction"] > 0.3
    # base-rate cross-entropy is the same whatever the item fit
    np.testing.assert_allclose(oracle.ce_base, simple.ce_base)


def test_item_transfer_default_uses_rcp_calibrate(three_datasets):
    answers, bt = three_datasets
    out = item_transfer(answers, bt).set_index("dataset")
    oracle = item_transfer(answers, bt, fit_items=lambda train: (GAMMA, BETA)).set_index("dataset")
    assert out.loc["all", "reduction"] > 0.3
    assert out.loc["all", "reduction"] == pytest.approx(oracle.loc["all", "reduction"], abs=0.05)


def test_item_transfer_input_errors(three_datasets):
    answers, bt = three_datasets
    with pytest.raises(DataError, match="at least two datasets"):
        item_transfer(answers[answers.dataset == "A"], bt, fit_items=lambda t: (GAMMA, BETA))
    with pytest.raises(DataError, match="no BT score"):
        item_transfer(answers, bt.iloc[5:], fit_items=lambda t: (GAMMA, BETA))
    clash = answers.copy()
    clash.loc[clash.dataset == "B", "query_id"] = clash.loc[clash.dataset == "A", "query_id"].iloc[0]
    with pytest.raises(DataError, match="several datasets"):
        item_transfer(clash, None, fit_items=lambda t: (GAMMA, BETA))
    with pytest.raises(DataError, match=r"expected \(5,\)"):
        item_transfer(answers, bt, fit_items=lambda t: (GAMMA[:3], BETA[:3]))


# --------------------------------------------------------------------------------------- plotting
def test_reliability_diagram_written(tmp_path):
    rng = np.random.default_rng(0)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p).astype(float)
    out = plot_reliability({"calibrated": p, "raw": p**0.5}, y, tmp_path / "sub" / "reliability.png", title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = plot_reliability(p, y, tmp_path / "r.svg")
    assert "<svg" in svg.read_text()[:500]
    with pytest.raises(DataError, match="png"):
        plot_reliability(p, y, tmp_path / "r.txt")


# ------------------------------------------------------------------------------------- real answers
def test_local_dependence_on_real_nanobeir_answers(shared_data):
    """Real Stage B answers (Qwen3.5-397B, 1,200 placements) with the published NanoBEIR items: criteria
    correlate raw and mostly stop correlating given each document's ability (paper: 0.60 -> 0.123)."""
    import json

    data = json.loads((shared_data / "reference" / "rubric_verdicts_nanobeir.json").read_text())
    crit = [f"C{i}" for i in range(1, 6)]
    rows = [{"query_id": key, "doc_id": r[0], **dict(zip(crit, r[1:]))}
            for key, q in data["queries"].items() for w in q["windows"] for r in w]
    ans = pd.DataFrame(rows)
    assert len(ans) == 1200
    cnt = ans.groupby(["query_id", "doc_id"])[crit].agg(["sum", "count"])
    passes = np.stack([cnt[(c, "sum")] for c in crit], 1)
    trials = np.stack([cnt[(c, "count")] for c in crit], 1)
    grid = np.linspace(-10, 12, 441)  # EAP ability per document, prior N(0, 3^2), items frozen
    logit = GAMMA * (grid[:, None] - BETA)
    ll = passes @ (-np.logaddexp(0, -logit)).T + (trials - passes) @ (-np.logaddexp(0, logit)).T - 0.5 * (grid / 3) ** 2
    w = np.exp(ll - ll.max(1, keepdims=True))
    docs = cnt.index.to_frame(index=False).assign(ability=(w @ grid) / w.sum(1))
    ab = ans.merge(docs, on=["query_id", "doc_id"])
    expected = np.stack([predict_answers(ab.ability, np.full(len(ab), c), GAMMA, BETA) for c in range(5)], 1)
    out = local_dependence(ab[crit].to_numpy(), expected)
    assert out["raw"] > 0.3
    assert out["residual"] < min(0.2, out["raw"] / 2)
    long = answers_long(ab[["query_id", "doc_id", "ability", *crit]])
    rep = calibration_report(long.answer, {"published items": predict_answers(long.ability, long.criterion, GAMMA, BETA)},
                             long.criterion).set_index("criterion")
    assert rep.loc["all", "ece"] < 0.1

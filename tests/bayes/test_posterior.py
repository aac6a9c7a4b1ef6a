"""rcp_jax.bayes.posterior: arviz DataTree, tables, Calibration export, posterior metrics, formatting."""

from __future__ import annotations

import io
import json
import warnings

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.bayes import fit_posterior, format_posterior_table, posterior_metrics
from rcp_jax.errors import DataError


@pytest.fixture(scope="module")
def map_posterior(collection):
    _, windows, answers = collection
    return fit_posterior(windows, answers, method="map")


def test_datatree_has_named_dims_and_diagnostic_groups(frozen_posterior):
    dt = frozen_posterior.idata
    post = dt.posterior
    assert dict(post.sizes) == {"chain": 4, "draw": 500, "criterion": 5, "query": 50, "doc": 60}
    assert post["gamma"].dims == ("chain", "draw", "criterion")
    assert post["tau"].dims == ("chain", "draw", "query")
    assert post["gain"].dims == ("chain", "draw", "query", "doc")
    assert list(post["criterion"].values) == ["C1", "C2", "C3", "C4", "C5"]
    assert post["doc_id"].dims == ("query", "doc") and post["doc_id"].values[0, 0].startswith("q0-")
    assert {"diverging", "acceptance_rate", "n_steps", "energy", "step_size"} <= set(dt.sample_stats.data_vars)
    assert "passes" in dt.observed_data and "trials" in dt.constant_data
    np.testing.assert_allclose(post["gamma"].values.sum(-1), 5.0, rtol=1e-4)


def test_tables_and_summary(frozen_posterior):
    p = frozen_posterior
    assert len(p.items) == 5 and len(p.queries) == 50 and len(p.documents) == 50 * 60
    d = p.documents
    assert ((d["gain_lo"] <= d["gain_mean"]) & (d["gain_mean"] <= d["gain_hi"])).all()
    assert ((d["gain_lo"] > 0) & (d["gain_hi"] < 1)).all()
    assert {"eti90_lb", "eti90_ub", "r_hat", "ess_bulk"} <= set(p.summary.columns)
    assert len(p.summary) == 5 + 5 + 50 + 50
    assert p.gain_draws.shape == (2000, 50, 60) and p.gain_draws.dtype == np.float32


def test_calibration_export_feeds_evaluate(frozen_posterior, run_table):
    cal = frozen_posterior.calibration()
    assert isinstance(cal, rcp_jax.Calibration)
    per_query = rcp_jax.evaluate(run_table, cal, k=10)
    assert per_query["rcp_ndcg"].between(0, 1).all() and per_query["count_ndcg"].notna().all()
    np.testing.assert_allclose(cal.gamma, frozen_posterior.items["gamma_mean"])


def test_map_posterior_equals_calibrate(collection, map_posterior):
    _, windows, answers = collection
    cal = rcp_jax.calibrate(rcp_jax.fit_bradley_terry(windows, float64=True), answers, float64=True)
    m = map_posterior.gains().merge(cal.gains(), on=["query_id", "doc_id"])
    assert len(m) == 3000
    np.testing.assert_allclose(m["gain_x"], m["gain_y"], atol=1e-3)
    np.testing.assert_allclose(map_posterior.items["gamma_mean"], cal.gamma, atol=1e-3)


@pytest.mark.parametrize("protocol", ["plain", "nanobeir", "bright", "trecdl", "vidore"])
def test_posterior_ndcg_of_a_point_posterior_equals_evaluate(map_posterior, run_table, protocol):
    """The vectorised weights-times-gains nDCG reproduces the metric core exactly (ties, pools, exclusions)."""
    run = run_table.copy()
    run.loc[run.index % 7 == 0, "score"] = 0.0  # ties
    extra = pd.DataFrame({"system": "s0", "query_id": "q1", "doc_id": ["outside-pool"], "score": [99.0]})
    run = pd.concat([run, extra], ignore_index=True)
    excluded = {"q2": ["q2-d3", "q2-d5"]}
    gains = map_posterior.gains()
    expected = rcp_jax.evaluate(run, gains=gains, k=10, protocol=protocol, excluded=excluded)
    got = posterior_metrics(run, map_posterior, k=10, protocol=protocol, excluded=excluded, n_bootstrap=50).per_query
    m = expected.merge(got, on=["system", "query_id"])
    assert len(m) == len(expected) == 250
    np.testing.assert_allclose(m["rcp_ndcg"], m["mean"], atol=1e-12)
    np.testing.assert_allclose(m["lo"], m["hi"], atol=1e-12)  # one draw: no calibration uncertainty


def test_posterior_metrics_pairs(frozen_posterior, run_table, collection):
    met = posterior_metrics(run_table, frozen_posterior, k=10, n_bootstrap=500, seed=1)
    assert list(met.systems["system"]) == ["s4", "s3", "s2", "s1", "s0"]  # quality order of the simulation
    s = met.systems
    assert ((s["cal_lo"] <= s["mean"]) & (s["mean"] <= s["cal_hi"])).all()
    # both sources of uncertainty: combined intervals are at least as wide as either alone (up to MC error)
    width = lambda a, b: (s[b] - s[a]).to_numpy()  # noqa: E731
    assert (width("lo", "hi") >= 0.9 * np.maximum(width("cal_lo", "cal_hi"), width("boot_lo", "boot_hi"))).all()
    p = met.pairs
    assert len(p) == 10
    assert ((p["p_a_better"] >= 0) & (p["p_a_better"] <= 1) & (p["p_rope"] >= 0) & (p["p_rope"] <= 1)).all()
    best_worst = p[(p.system_a == "s4") & (p.system_b == "s0")].iloc[0]
    assert best_worst["call"] == "A>B" and best_worst["p_a_better"] == 1.0 and best_worst["t_p"] < 0.01
    assert set(p["call"]) <= {"A>B", "B>A", "equivalent", "undecided"}
    # the calibration draws give the pair differences exactly
    i, j = met.systems_order.index("s4"), met.systems_order.index("s0")
    np.testing.assert_allclose(best_worst["delta"], (met.draws[:, i] - met.draws[:, j]).mean())


def test_p_better_matrix_is_the_pairs_table_both_ways(frozen_posterior, run_table):
    met = posterior_metrics(run_table, frozen_posterior, k=10, n_bootstrap=200, seed=1)
    for source, column in (("combined", "p_a_better"), ("calibration", "cal_p_a_better"),
                           ("bootstrap", "boot_p_a_better")):
        m = met.p_better_matrix(source)
        assert list(m.index) == list(m.columns) == list(met.systems["system"])  # leaderboard order
        assert np.isnan(np.diag(m.to_numpy())).all()
        off = ~np.eye(len(m), dtype=bool)
        np.testing.assert_allclose((m.to_numpy() + m.to_numpy().T)[off], 1.0)
        for a, b, p in zip(met.pairs["system_a"], met.pairs["system_b"], met.pairs[column]):
            assert m.loc[a, b] == p
    assert met.to_dict()["p_better_matrix"]["s4"]["s0"] == 1.0
    text = format_posterior_table(met, table="matrix")
    rows = text.strip().splitlines()[2:]  # the caption, the header, then one row per system
    assert text.startswith("P(row > column)") and len(rows) == 5
    assert all(row.split().count("-") == 1 for row in rows)  # the diagonal, blank
    csv = pd.read_csv(io.StringIO(format_posterior_table(met, table="matrix", fmt="csv")), index_col=0)
    np.testing.assert_allclose(csv.to_numpy(), met.p_better_matrix().to_numpy())
    assert "P(row > column)" in met.format()
    with pytest.raises(DataError, match="unknown source"):
        met.p_better_matrix("posterior")


def test_posterior_ndcg_of_a_tie_of_equal_gains_is_at_most_one():
    """Five tied documents of one gain at k=1: each gets a fifth of the top discount, and the sum of the
    five rounded products once came to 1.0000000000000002 of the ideal."""
    from types import SimpleNamespace

    gain = 0.9127555772777217
    docs = [f"d{i}" for i in range(5)]
    inputs = SimpleNamespace(mask=np.ones((1, 5), bool), query_ids=["q1"], doc_ids=np.array([docs], dtype=object))
    post = SimpleNamespace(inputs=inputs, gain_draws=np.full((4, 1, 5), gain), method="nuts", model="frozen")
    run = pd.DataFrame({"system": ["tied"] * 5 + ["ordered"] * 5, "query_id": "q1", "doc_id": docs * 2,
                        "score": [1.0] * 5 + [4.0, 3.0, 2.0, 1.0, 0.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        met = posterior_metrics(run, post, k=1, n_bootstrap=20)
    assert (met.per_query[["mean", "lo", "hi"]].to_numpy() == 1.0).all()
    assert (met.systems[["mean", "lo", "hi"]].to_numpy() == 1.0).all()


def test_posterior_metrics_with_datasets_weights_each_dataset_equally(frozen_posterior, run_table):
    run = run_table.copy()
    qnum = run["query_id"].str[1:].astype(int)
    run["dataset"] = np.where(qnum < 10, "small", "large")
    met = posterior_metrics(run, frozen_posterior, k=10, n_bootstrap=100)
    pq = met.per_query.assign(dataset=lambda d: np.where(d.query_id.str[1:].astype(int) < 10, "small", "large"))
    expected = pq.groupby(["system", "dataset"])["mean"].mean().groupby("system").mean()
    got = met.systems.set_index("system")["mean"]
    np.testing.assert_allclose(got.loc[expected.index], expected, atol=1e-10)


def test_queries_without_gains_are_dropped_with_a_warning(frozen_posterior, run_table):
    extra = pd.DataFrame({"system": ["s0", "s1"], "query_id": "unknown", "doc_id": "x", "score": 1.0})
    with pytest.warns(UserWarning, match="dropped from system means"):
        met = posterior_metrics(pd.concat([run_table, extra]), frozen_posterior, n_bootstrap=50)
    assert met.per_query.loc[met.per_query.query_id == "unknown", "mean"].isna().all()


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json"])
def test_format_posterior_table(frozen_posterior, run_table, fmt):
    met = posterior_metrics(run_table, frozen_posterior, n_bootstrap=50)
    out = format_posterior_table(met, fmt=fmt)
    assert "p_a_better" in out
    if fmt == "json":
        assert len(json.loads(out)) == 10
    if fmt in ("text", "markdown"):
        assert "ROPE |delta| < 0.02" in out
    assert "s4" in format_posterior_table(met, table="systems", fmt=fmt)


def test_bad_arguments_are_domain_errors(collection):
    _, windows, answers = collection
    bt = pd.DataFrame({"query_id": ["q0"], "doc_id": ["q0-d0"], "theta": [0.0]})
    with pytest.raises(DataError, match="joint model needs the tournament"):
        fit_posterior(bt, answers, model="joint")
    with pytest.raises(DataError, match="unknown method"):
        fit_posterior(windows, answers, method="hmc")
    with pytest.raises(rcp_jax.CalibrationError, match="no BT score"):
        fit_posterior(bt, answers[answers.query_id.isin(["q0"])], method="map")


def test_uncalibrated_queries_are_reported_not_invented(collection):
    _, windows, answers = collection
    ans = answers[answers.query_id != "q3"]
    with pytest.warns(UserWarning, match="stay uncalibrated"):
        post = fit_posterior(windows, ans, method="map")
    row = post.queries.set_index("query_id").loc["q3"]
    assert not row["calibrated"] and np.isnan(row["tau_mean"])
    assert "q3" not in set(post.documents["query_id"])


def test_rubric_only_posterior(collection):
    sim, _, answers = collection
    small = answers[answers.query_id.isin([f"q{i}" for i in range(8)])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit_posterior(None, small, num_warmup=200, num_samples=200, seed=3)
    assert post.model == "rubric_only" and post.diagnostics["divergences"] == 0
    # the largest of ~490 rank-normalised R-hats from 4 x 200 draws: seeds 3-6 gave 1.007-1.021 (1.007-1.013
    # with vectorised chains); chains that fail to mix give > 1.1
    assert post.diagnostics["max_rhat"] < 1.03
    np.testing.assert_allclose(post.items["gamma_mean"].sum(), 5.0, rtol=1e-3)
    ml = rcp_jax.fit_rubric_only(small)
    assert np.abs(post.items["beta_mean"] - ml.beta).max() < 0.5
    d = post.documents.merge(ml.documents, on=["query_id", "doc_id"])
    assert np.corrcoef(d["ability_mean"], d["ability"])[0, 1] > 0.98


def test_save_and_load_round_trip(frozen_posterior, run_table, tmp_path):
    from rcp_jax.bayes import diagnostics_summary, load_posterior, save_posterior

    folder = save_posterior(frozen_posterior, tmp_path / "posterior")
    back = load_posterior(folder)
    pd.testing.assert_frame_equal(back.documents, frozen_posterior.documents)
    pd.testing.assert_frame_equal(back.items, frozen_posterior.items)
    np.testing.assert_array_equal(back.gain_draws, frozen_posterior.gain_draws)
    assert back.diagnostics == frozen_posterior.diagnostics
    assert json.loads(json.dumps(diagnostics_summary(back)))["divergences"] == 0
    a = posterior_metrics(run_table, back, n_bootstrap=100).to_dict()
    b = posterior_metrics(run_table, frozen_posterior, n_bootstrap=100).to_dict()
    assert a == b and len(a["pairs"]) == 10
    with pytest.raises(DataError, match="holds no posterior"):
        load_posterior(tmp_path / "nothing")

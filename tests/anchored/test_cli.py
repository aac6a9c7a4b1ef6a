"""``rcp-jax anchor`` and ``rcp-jax plan-labels`` on a per-query table shaped like `rcp-jax evaluate --out`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rcp_jax.anchored.simulate import simulate_benchmark


def _write(tmp_path, frac=0.3):
    b = simulate_benchmark(np.random.default_rng(0), replications=1, queries=60)
    lab = np.random.default_rng(1).random(60) < frac
    rows = [{"system": name, "query_id": f"q{q}", "rcp_ndcg": b.judge[0, s, q], "count_ndcg": b.judge[0, s, q],
             "qrel_ndcg": b.human[0, s, q] if lab[q] else np.nan}
            for s, name in enumerate(b.systems) for q in range(60)]
    path = tmp_path / "per_query.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path, b


def test_anchor_prints_pairs_assumptions_and_draws_the_figure(cli, tmp_path):
    path, _ = _write(tmp_path)
    res = cli("anchor", str(path), "--figure", str(tmp_path / "pairs.png"))
    assert res.returncode == 0, res.stderr
    assert "anchored" in res.stdout and "assumptions:" in res.stdout and "simple random sample" in res.stdout
    assert (tmp_path / "pairs.png").stat().st_size > 1000
    res = cli("anchor", str(path), "--json")
    payload = json.loads(res.stdout)
    assert len(payload["pairs"]) == 6 and payload["n_queries"] == 60


def test_plan_labels_then_anchor_with_the_plan(cli, tmp_path):
    path, b = _write(tmp_path)
    plan = tmp_path / "plan.csv"
    res = cli("plan-labels", str(path), "--budget", "10", "--out", str(plan), "--json")
    assert res.returncode == 0, res.stderr
    chosen = json.loads(res.stdout)["selected"]
    res = cli("anchor", str(path), "--plan", str(plan))
    assert res.returncode == 2 and "no human label" in res.stderr
    table = pd.read_csv(path, dtype={"query_id": str})
    mask = table["query_id"].isin(chosen)
    table.loc[mask, "qrel_ndcg"] = [b.human[0, "ABCD".index(r.system), int(r.query_id[1:])]
                                    for r in table.loc[mask].itertuples()]
    table.to_csv(path, index=False)
    res = cli("anchor", str(path), "--plan", str(plan))
    assert res.returncode == 0, res.stderr and "labelling plan" in res.stdout


def test_missing_column_is_a_usage_error(cli, tmp_path):
    path, _ = _write(tmp_path)
    res = cli("anchor", str(path), "--judge", "nope")
    assert res.returncode == 2 and "no column 'nope'" in res.stderr


def test_plan_labels_reads_the_uncertainty_column_or_a_posterior_file(cli, tmp_path):
    b = simulate_benchmark(np.random.default_rng(2), replications=1, queries=60, slip_share=0.2, slip_sd=0.4)
    rows = [{"system": name, "query_id": f"q{q}", "rcp_ndcg": b.judge[0, s, q], "qrel_ndcg": np.nan,
             "sd": b.judge_sd[0, s, q]} for s, name in enumerate(b.systems) for q in range(60)]
    path = tmp_path / "per_query.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    res = cli("plan-labels", str(path), "--budget", "12", "--out", str(tmp_path / "plan.csv"))
    assert res.returncode == 0, res.stderr
    assert "the judge's uncertainty (sd)" in res.stdout
    plan = pd.read_csv(tmp_path / "plan.csv")
    assert abs(plan["pi"].sum() - 12) < 1e-9 and plan["pi"].nunique() > 1
    # the same sd from a posterior_per_query.csv-shaped file gives the same probabilities
    posterior = tmp_path / "posterior_per_query.csv"
    pd.DataFrame(rows)[["system", "query_id", "sd"]].assign(mean=0.5).to_csv(posterior, index=False)
    pd.DataFrame(rows).drop(columns="sd").to_csv(path, index=False)
    res = cli("plan-labels", str(path), "--budget", "12", "--out", str(tmp_path / "plan2.csv"),
              "--uncertainty", str(posterior))
    assert res.returncode == 0, res.stderr
    assert np.allclose(pd.read_csv(tmp_path / "plan2.csv")["pi"], plan["pi"])
    res = cli("plan-labels", str(path), "--budget", "12", "--out", str(tmp_path / "plan3.csv"))
    assert res.returncode == 0 and "the pair's typical one" in res.stdout and "uncertainty" not in res.stdout
    res = cli("plan-labels", str(path), "--budget", "12", "--out", str(tmp_path / "plan5.csv"), "--no-spread")
    assert res.returncode == 0 and "uniform (no uncertainty column" in res.stdout
    assert pd.read_csv(tmp_path / "plan5.csv")["pi"].nunique() == 1
    assert pd.read_csv(tmp_path / "plan5.csv")["selected"].sum() == 12  # exactly the budget
    res = cli("plan-labels", str(path), "--budget", "12", "--out", str(tmp_path / "plan4.csv"), "--uncertainty", "nope")
    assert res.returncode == 2 and "neither a column" in res.stderr


def test_every_query_labelled_reports_for_the_population_not_zero_width_calls(cli, tmp_path):
    # with every query labelled the benchmark mean is known exactly; zero-width intervals would call any
    # difference, so the comparison is for queries like these (superpopulation), said in the assumptions
    path, _ = _write(tmp_path, frac=1.1)
    res = cli("anchor", str(path), "--json")
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    assert payload["target"] == "superpopulation"
    assert all(p["anchored_high"] > p["anchored_low"] for p in payload["pairs"])
    assert any("every one of the 60 queries is labelled" in a for a in payload["assumptions"])
    assert "warning" not in res.stderr
    human_only = pd.read_csv(path).pivot(index="query_id", columns="system", values="qrel_ndcg").mean()
    systems = {r["system"]: r for r in payload["systems"]}
    assert all(abs(systems[s]["anchored"] - human_only[s]) < 1e-12 for s in human_only.index)

"""`rcp-jax fit --calibration-model ... --method ...` and `rcp-jax evaluate --posterior` on a three-query cut of the demo (in process)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rcp_jax.cli import main


@pytest.fixture(scope="module")
def tiny_store(demo_tiny, tmp_path_factory):
    """(judgement store of a three-query cut of the demo, runs.csv of its two systems)."""
    folder = tmp_path_factory.mktemp("tiny")
    assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "store"), "--quiet"]) == 0
    return folder / "store", demo_tiny["runs"]


def _fit_and_evaluate(store, runs, out, capsys, *fit_args, eval_args=()):
    capsys.readouterr()
    assert main(["fit", "--store", str(store), "--out", str(out), *fit_args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (out / "posterior" / "draws.npz").is_file()
    code = main(["evaluate", "--calibration", str(out / "calibration"), "--runs", str(runs), "--k", "5", "--posterior",
                 "--json", *eval_args])
    assert code == 0
    return info, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_fit_nuts_then_evaluate_posterior(tiny_store, tmp_path, capsys):
    store, runs = tiny_store
    info, out = _fit_and_evaluate(store, runs, tmp_path / "fit", capsys, "--method", "nuts", "--warmup", "200",
                                  "--draws", "200", "--chains", "2", eval_args=("--out", str(tmp_path / "eval")))
    assert info["method"] == "nuts" and info["model"] == "joint"  # the default with a posterior method
    assert info["diagnostics"]["num_chains"] == 2 and info["diagnostics"]["num_draws"] == 200
    pairs = out["posterior"]["pairs"]
    assert len(pairs) == 1 and {"p_a_better", "p_rope", "call"} <= set(pairs[0])
    assert 0 <= pairs[0]["p_a_better"] <= 1
    # fit: posterior intervals of every criterion and the item curves with bands
    assert [r["criterion"] for r in info["items_posterior"]] == info["criteria"]
    assert all(r["gamma_lo"] < r["gamma_mean"] < r["gamma_hi"] for r in info["items_posterior"])
    assert (tmp_path / "fit" / "item_curves_posterior.png").stat().st_size > 5000
    # evaluate --out: the printed posterior tables as CSV and the forest plot
    written = pd.read_csv(tmp_path / "eval" / "posterior_pairs.csv")
    assert written["p_a_better"].tolist() == pytest.approx([pairs[0]["p_a_better"]])
    assert written["call"].tolist() == [pairs[0]["call"]]  # one decision in the JSON and the CSV
    assert len(pd.read_csv(tmp_path / "eval" / "posterior_systems.csv")) == 2
    assert set(pd.read_csv(tmp_path / "eval" / "posterior_per_query.csv").columns) >= {"system", "query_id", "lo", "hi"}
    assert (tmp_path / "eval" / "pairs_forest.png").stat().st_size > 5000
    matrix = pd.read_csv(tmp_path / "eval" / "posterior_p_better.csv", index_col="system")
    a, b = pairs[0]["system_a"], pairs[0]["system_b"]
    assert matrix.loc[a, b] == pytest.approx(pairs[0]["p_a_better"]) and matrix.loc[b, a] == pytest.approx(1 - pairs[0]["p_a_better"])
    assert out["posterior"]["p_better_matrix"][a][b] == pytest.approx(pairs[0]["p_a_better"])


def test_fit_frozen_model_then_evaluate_posterior_says_what_its_intervals_leave_out(tiny_store, tmp_path, capsys):
    from rcp_jax.bayes.posterior import FROZEN_NOTE, load_posterior

    store, runs = tiny_store
    info, out = _fit_and_evaluate(store, runs, tmp_path / "fit", capsys, "--calibration-model", "frozen", "--method", "nuts",
                                  "--warmup", "150", "--draws", "100", "--chains", "1", "--seed", "3")
    assert info["model"] == "frozen" and info["diagnostics"]["model"] == "frozen"
    assert info["diagnostics"]["num_draws"] == 100
    assert FROZEN_NOTE in info["notes"] and FROZEN_NOTE in out["notes"]  # fit and evaluate both say it
    post = load_posterior(tmp_path / "fit" / "posterior")
    assert post.model == "frozen" and "theta" not in post.idata.posterior  # the BT scores were fixed
    systems = out["posterior"]["systems"]
    assert len(systems) == 2 and all(s["lo"] <= s["mean"] <= s["hi"] for s in systems)


def test_fit_rubric_only_by_laplace_then_evaluate_posterior(tiny_store, tmp_path, capsys):
    store, runs = tiny_store
    info, out = _fit_and_evaluate(store, runs, tmp_path / "fit", capsys, "--calibration-model", "rubric-only", "--method",
                                  "laplace", "--draws", "100", "--svi-steps", "300", "--no-plots",
                                  eval_args=("--out", str(tmp_path / "eval"), "--no-plots"))
    assert info["model"] == "rubric-only" and info["diagnostics"]["method"] == "laplace"
    assert info["diagnostics"]["max_rhat"] is None  # no chains to compare
    cal = json.loads((tmp_path / "fit" / "calibration" / "items.json").read_text())
    assert cal["method"] == "rubric_only"  # evaluate's point gains come from the rubric-only fit
    assert len(out["posterior"]["systems"]) == 2
    assert not (tmp_path / "fit" / "item_curves_posterior.png").exists()  # --no-plots
    assert not (tmp_path / "eval" / "pairs_forest.png").exists()
    assert (tmp_path / "eval" / "posterior_pairs.csv").is_file()  # the tables still are written


@pytest.mark.parametrize("args, message", [
    (["--calibration-model", "joint", "--method", "map"], "--calibration-model joint has no point fit"),
    (["--method", "nuts", "--chains", "0"], "--chains must be >= 1"),
])
def test_fit_refuses_meaningless_combinations(tiny_store, tmp_path, capsys, args, message):
    store, _ = tiny_store
    capsys.readouterr()
    assert main(["fit", "--store", str(store), "--out", str(tmp_path / "fit"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "fit").exists()  # refused before anything was written


def test_fit_nuts_with_one_chain_prints_its_diagnostics_without_r_hat(tiny_store, tmp_path, capsys):
    """One chain has no R-hat: the summary says so instead of failing after the posterior was saved (the
    frozen test's settings, so its compiled sampler is reused)."""
    store, _ = tiny_store
    capsys.readouterr()
    code = main(["fit", "--store", str(store), "--out", str(tmp_path / "fit"), "--calibration-model", "frozen", "--method", "nuts",
                 "--warmup", "150", "--draws", "100", "--chains", "1", "--seed", "3", "--no-plots"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "NUTS: 1 chain x 100 draws" in printed and "max R-hat n/a (R-hat needs two chains or more)" in printed
    assert (tmp_path / "fit" / "posterior" / "draws.npz").is_file()

"""The posterior of large benchmarks: ``method="auto"`` and the block Laplace through ``rcp_jax.fit_posterior`` and
``rcp-jax fit`` (small collections here; the sizes and the coverage are in benchmarks/posterior_scale.py and
benchmarks/coverage.py)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import rcp_jax
from benchmarks.fixtures.simulated_collections import collection_tables, true_gains
from rcp_jax.bayes import large
from rcp_jax.cli import main
from rcp_jax.errors import DataError
from rcp_jax.models import simulate


@pytest.fixture(scope="module")
def tables():
    sim = simulate.simulate_judgements(5, np.full(6, 20))
    return (*collection_tables(sim), true_gains(sim))


@pytest.fixture(scope="module")
def block_post(tables):
    windows, answers, _ = tables
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rcp_jax.fit_posterior(windows, answers, method="block_laplace", check_queries=2, num_samples=400)


def test_auto_picks_nuts_small_and_the_block_laplace_large():
    assert large.choose_method("nuts", "joint", 10**6) == ("nuts", None)
    method, why = large.choose_method("auto", "joint", 150_000)
    assert method == "block_laplace" and "150,000 documents" in why
    assert large.choose_method("auto", "joint", 500)[0] == "nuts"
    assert large.choose_method("auto", "frozen", 150_000)[0] == "nuts"  # 2Q + 8 parameters: NUTS copes
    assert large.choose_method("auto", "rubric_only", 150_000)[0] == "svi"


def test_block_laplace_posterior_is_checked_against_nuts_and_covers(block_post, tables):
    post = block_post
    d = post.diagnostics
    assert post.method == "block_laplace" and post.model == "joint"
    assert d["newton_converged"] and d["check_queries"] == 2
    # every query's block drawn by HMC from its exact conditional posterior: chains that agree, a sane acceptance
    blocks = post.draws.info["exact_blocks"]
    assert blocks["chains"] == 2 and blocks["draws_per_chain"] == 200 and blocks["rhat_queries"] == []
    assert d["exact_block_max_rhat"] < large.BLOCK_RHAT_MAX and 0.6 < d["exact_block_min_accept"] < 0.98
    # ... whose gain intervals match NUTS's on the same conditional posterior of two queries (two exact samplers)
    assert d["check_median_gap"] < 0.1 and d["check_max_rhat"] < 1.1
    docs = post.documents.merge(tables[2], on=["query_id", "doc_id"])
    assert (docs["gain_lo"] < docs["gain_mean"]).all() and (docs["gain_mean"] < docs["gain_hi"]).all()
    inside = ((docs["gain_lo"] <= docs["gain"]) & (docs["gain"] <= docs["gain_hi"])).mean()
    assert 0.75 <= inside <= 1.0  # 120 correlated documents of one collection; 0.90 at 100 x 150 (RESULTS.md)
    assert post.gain_draws.shape == (400,) + post.inputs.doc_ids.shape


def test_block_laplace_posterior_saves_and_loads(block_post, tmp_path):
    rcp_jax.save_posterior(block_post, tmp_path / "posterior")
    back = rcp_jax.load_posterior(tmp_path / "posterior")
    assert back.method == "block_laplace"
    np.testing.assert_array_equal(back.gain_draws, block_post.gain_draws)
    assert back.diagnostics["check_median_gap"] == pytest.approx(block_post.diagnostics["check_median_gap"])


def test_blocks_whose_chains_disagree_are_named(tables, monkeypatch):
    windows, answers, _ = tables
    monkeypatch.setattr(large, "BLOCK_RHAT_MAX", 1.0)  # every query's chains "disagree"
    with pytest.warns(UserWarning, match=r"HMC chains of 6 queries disagree .*rhat_queries"):
        post = rcp_jax.fit_posterior(windows, answers, method="block_laplace", check_queries=0, num_samples=60)
    assert post.draws.info["exact_blocks"]["rhat_queries"] == [f"q{i}" for i in range(6)]
    assert post.diagnostics["exact_block_rhat_queries"] == 6


def test_the_exact_block_draws_move_the_gains_off_the_gaussians(tables, monkeypatch):
    # the per-query Gaussian's gains are symmetric about the mode's; the exact draws' are not: the means move
    windows, answers, _ = tables
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(large, "EXACT_BLOCKS", False)
        gaussian = rcp_jax.fit_posterior(windows, answers, method="block_laplace", check_queries=0, num_samples=400)
    assert "exact_blocks" not in gaussian.draws.info and "exact_block_max_rhat" not in gaussian.diagnostics
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = rcp_jax.fit_posterior(windows, answers, method="block_laplace", check_queries=0, num_samples=400)
    a, b = gaussian.documents, exact.documents
    assert np.allclose(a["gain_mean"], b["gain_mean"], atol=0.1)  # the same posterior, roughly
    shift = np.abs(a["gain_mean"] - b["gain_mean"]) / (b["gain_hi"] - b["gain_lo"])
    assert shift.max() > 0.1, shift.max()


def test_auto_says_what_it_chose(tables, monkeypatch):
    windows, answers, _ = tables
    monkeypatch.setattr(large, "AUTO_NUTS_MAX_DOCS", 50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = rcp_jax.fit_posterior(windows, answers, method="auto", check_queries=0, num_samples=50)
    assert post.method == "block_laplace" and post.settings["auto"].startswith("block_laplace: 120 documents")
    with pytest.raises(DataError, match="approximates the joint model"):
        rcp_jax.fit_posterior(windows, answers, model="frozen", method="block_laplace")


def test_cli_fit_block_laplace_then_evaluate_posterior(demo_tiny, tmp_path, capsys):
    store, out = tmp_path / "store", tmp_path / "fit"
    assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["fit", "--store", str(store), "--out", str(out), "--method", "block-laplace", "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "block Laplace: 500 draws, Newton converged" in text and "against NUTS on 3 queries" in text
    assert "each query's block by HMC (largest R-hat" in text
    assert main(["evaluate", "--calibration", str(out), "--runs", str(demo_tiny["runs"]), "--k", "5", "--posterior",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["posterior"]["pairs"]) == 1


def test_newton_steps_estimate_follows_a_geometric_fall():
    est = large.NewtonSteps()
    assert est.total(1, 1.0, 1e-4) == 1 + 14  # no rate seen yet: halves per step, 2^-14 < 1e-4
    assert est.total(2, 0.1, 1e-4) == 2 + 3  # falls by 10 per step: 3 more steps reach 1e-4
    assert est.total(3, 1e-5, 1e-4) == 3  # below the tolerance: done


class _RecordingBar:
    """tqdm's surface that FitProgress uses, recording what a user would see."""

    def __init__(self):
        self.n, self.total, self.seen = 0, None, []

    def reset(self, total=None):
        self.n, self.total = 0, total

    def set_description(self, desc, refresh=True):
        self.seen.append(desc)

    def update(self, k):
        self.n += k
        self.seen.append((self.n, self.total))


def test_a_block_laplace_fit_reports_each_stage_with_a_total(tables, monkeypatch):
    import contextlib

    bar = _RecordingBar()

    @contextlib.contextmanager
    def recording(enabled, *, check_queries=large.CHECK_QUERIES, exact_item_queries=large.EXACT_ITEM_QUERIES,
                  exact_blocks=large.EXACT_BLOCKS, desc="block Laplace"):
        assert enabled
        yield large.FitProgress(bar, desc, 3 + (check_queries > 0) + (exact_item_queries > 0) + bool(exact_blocks))

    monkeypatch.setattr(large, "fit_progress", recording)
    windows, answers, _ = tables
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rcp_jax.fit_posterior(windows, answers, method="block_laplace", check_queries=1, num_samples=120,
                              progress=True)
    stages = [s for s in bar.seen if isinstance(s, str)]
    queries = len(set(windows["query_id"]))
    assert stages == ["block Laplace 1/6: Newton steps", "block Laplace 2/6: item correction",
                      f"block Laplace 3/6: exact draws of {queries} queries (HMC)",
                      "block Laplace 4/6: items' exact gradient, from every query's draws",
                      "block Laplace 5/6: draws", "block Laplace 6/6: NUTS check on 1 queries"]
    by_stage, current = {}, None
    for item in bar.seen:
        if isinstance(item, str):
            current = item.split(": ", 1)[1]
        else:
            by_stage.setdefault(current, []).append(item)
    newton = by_stage["Newton steps"]
    assert all(total is not None and total >= done for done, total in newton)
    assert newton[-1][0] == newton[-1][1]  # the last step closes the bar: the estimate ends at the truth
    assert by_stage["draws"][-1] == (120, 120)  # chunks of 50: 50, 100, 120
    assert [d for d, _ in by_stage["draws"]] == [50, 100, 120]
    check = by_stage["NUTS check on 1 queries"]
    assert check[-1][0] == check[-1][1] > 0  # NUTS reports iterations against its known total


def test_a_query_whose_answers_ignore_its_order_is_named_not_a_crash():
    # q0's rubric answers are coin flips: in w = tau * theta its density has no mode (the funnel towards tau -> 0);
    # Newton stops its tau at the floor, the fit finishes, and the warning names the query
    sim = simulate.simulate_judgements(5, [20] * 6, noise=1.5, tournament_placements=14.4, rubric_placements=6.67)
    windows, answers = collection_tables(sim)
    rng = np.random.default_rng(0)
    rows = answers["query_id"] == "q0"
    for criterion in ("C1", "C2", "C3", "C4", "C5"):
        answers.loc[rows, criterion] = rng.integers(0, 2, rows.sum()).astype(answers[criterion].dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = rcp_jax.fit_posterior(windows, answers, method="block_laplace", seed=1, check_queries=0)
    messages = [str(w.message) for w in caught if "has no mode" in str(w.message)]
    assert len(messages) == 1 and "(q0)" in messages[0]
    assert post.diagnostics["tau_floor_queries"] == 1 and post.diagnostics["newton_converged"]
    taus = post.queries.set_index("query_id")["tau_mean"]
    assert taus["q0"] < 0.01 and taus.drop("q0").min() > 0.2
    assert np.isfinite(post.documents["gain_mean"]).all()


def test_a_failure_in_the_items_marginal_mode_is_a_calibration_error(tables, monkeypatch):
    from rcp_jax.errors import CalibrationError
    from rcp_jax.models import block_laplace

    def broken(*args, **kwargs):
        raise FloatingPointError("block Laplace: 1 query blocks are not positive definite at the mode")

    monkeypatch.setattr(block_laplace, "marginal_item_mode", broken)
    with pytest.raises(CalibrationError, match="items' marginal mode.*not positive definite.*'svi'.*'nuts'"):
        rcp_jax.fit_posterior(*tables[:2], method="block_laplace", check_queries=0)

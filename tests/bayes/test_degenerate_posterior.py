"""The posterior path runs the MAP path's degeneracy checks, and says why RCP-nDCG can exceed 1.

* an all-tied tournament, a criterion nobody passes, a criterion everybody passes: ``fit_posterior`` warns
  (``CalibrationWarning``, the MAP's messages, ``Posterior.flags``), ``posterior_metrics`` warns again and
  keeps the messages in its notes, and ``rcp-jax evaluate --posterior`` prints them;
* the rubric-only posterior rests such a criterion on the prior as ``fit_rubric_only`` does (before: gamma of
  the never-passed criterion about 2 of 5, mean gain 0.38 against the MAP's 0.51 on a simulated collection);
* an all-tied query's ideal list is the posterior-mean gain order, not the pool order (before: the oracle
  scored 1.56 and the pool order [1, 1]);
* the per-system quantity: with gains monotone in the BT scores in every draw (frozen model) no list exceeds
  1 and the Stage A order is exactly 1; where a draw departs from the Stage A order a value above 1 is
  explained in the notes.

Small simulated collections (4 queries x 12 documents) and short single chains keep each fit to seconds.
"""

from __future__ import annotations

import json
import shutil
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from benchmarks.fixtures.simulated_collections import collection_tables
import rcp_jax
from rcp_jax.models import simulate
from rcp_jax.bayes import fit_posterior, posterior_metrics
from rcp_jax.bayes.degenerate import JOINT_NO_SPREAD
from rcp_jax.calibration import CalibrationWarning, fit_rubric_only
from rcp_jax.errors import CalibrationError

SHORT = dict(method="nuts", num_warmup=100, num_samples=100, num_chains=1, seed=0)


@pytest.fixture(scope="module")
def small():
    sim = simulate.simulate_judgements(0, [12] * 4)
    windows, answers = collection_tables(sim)
    return sim, windows, answers


def _fit(*args, **kwargs):
    """fit_posterior, returning (posterior, CalibrationWarning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit_posterior(*args, **kwargs)
    return post, [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]


def _metrics(run, post, **kwargs):
    """posterior_metrics, returning (metrics, CalibrationWarning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        met = posterior_metrics(run, post, n_bootstrap=50, **kwargs)
    return met, [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]


def _run(post, sim, extra: dict | None = None) -> pd.DataFrame:
    """Systems over every pool document: ``oracle`` (true relevance), ``pool`` (pool order), ``by_mean``
    (posterior-mean gain) and ``extra`` {name: float[Q, N] scores in the posterior's layout}."""
    inp = post.inputs
    mean_gain = np.asarray(post.gain_draws, dtype=np.float64).mean(0)
    rows = []
    for qi, q in enumerate(inp.query_ids):
        n = int(inp.n_docs[qi])
        ids = list(inp.doc_ids[qi, :n])
        rel = sim.truth.relevance[int(q[1:])]
        scores = {"oracle": np.array([rel[int(d.split("-d")[1])] for d in ids]), "pool": -np.arange(n, dtype=float),
                  "by_mean": mean_gain[qi, :n], **{k: v[qi, :n] for k, v in (extra or {}).items()}}
        rows += [pd.DataFrame({"system": s, "query_id": q, "doc_id": ids, "score": v}) for s, v in scores.items()]
    return pd.concat(rows, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# an all-tied tournament
# --------------------------------------------------------------------------------------------------
def test_an_all_tied_tournament_is_warned_and_its_ideal_is_the_posterior_mean_order(small):
    sim, windows, answers = small
    post, warned = _fit(windows.assign(score=0.0), answers, model="joint", **SHORT)
    flag = [f for f in post.flags if f["kind"] == "bt_no_spread"]
    assert len(flag) == 1 and flag[0]["ids"] == ["q0", "q1", "q2", "q3"]
    assert flag[0]["message"] in warned and "has the same Bradley-Terry score" in flag[0]["message"]
    assert JOINT_NO_SPREAD in flag[0]["message"] and "one gain" not in flag[0]["message"]  # not the MAP's claim
    met, warned = _metrics(_run(post, sim), post, k=5)
    assert f"posterior RCP-nDCG rests on degenerate data: {flag[0]['message']}" in warned
    assert any("has the same Bradley-Terry score" in n for n in met.notes)
    assert "note: posterior RCP-nDCG rests on degenerate data" in met.format()
    s = met.systems.set_index("system")
    pq = met.per_query.set_index("system")
    # the ideal list is the posterior-mean gain order: that order scores exactly 1 in every draw; the pool
    # order (the ideal before, [1, 1]) and the oracle are scored against it (the oracle scored 1.56 before)
    assert (pq.loc["by_mean", ["lo", "mean", "hi"]].to_numpy() == 1.0).all()
    assert s.loc["pool", "hi"] < 0.95
    assert s.loc["oracle", "mean"] <= 1.0 and s.loc["oracle", "mean"] > s.loc["pool", "mean"]


def test_an_all_tied_tournament_under_the_frozen_model_gives_one_gain_per_query_and_says_so(small):
    sim, windows, answers = small
    post, warned = _fit(windows.assign(score=0.0), answers, model="frozen", method="laplace", svi_steps=300,
                        num_samples=100, seed=0)
    assert any("has the same Bradley-Terry score" in m and "the documents get one gain" in m for m in warned)
    met, warned = _metrics(_run(post, sim), post, k=5)
    assert (met.per_query[["lo", "mean", "hi"]].to_numpy() == 1.0).all()  # every list is ideal: said so
    assert any("rests on degenerate data" in m and "one gain" in m for m in warned)


# --------------------------------------------------------------------------------------------------
# a criterion nobody / everybody passes
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("column, value, kind, text", [
    ("C5", 0, "criterion_never_passed", "no document passes criterion 'C5'"),
    ("C1", 1, "criterion_always_passed", "every document passes criterion 'C1'"),
])
def test_rubric_only_posterior_rests_a_degenerate_criterion_on_the_prior_as_the_map(small, column, value, kind, text):
    sim, _, answers = small
    answers = answers.assign(**{column: value})
    j = int(column[1:]) - 1
    post, warned = _fit(None, answers, **SHORT)
    assert post.model == "rubric_only"
    assert [f["kind"] for f in post.flags] == [kind] and any(text in m for m in warned)
    g = post.idata.posterior["gamma"].values.reshape(-1, 5)
    b = post.idata.posterior["beta"].values.reshape(-1, 5)
    assert (g[:, j] == 1.0).all()  # discrimination 1 in every draw (before: ~2 of 5, the most of any criterion)
    np.testing.assert_allclose(g.sum(1), 5.0, rtol=1e-5)
    np.testing.assert_allclose(b.mean(1), 0.0, atol=1e-4)
    assert (b[:, j] == (b.max(1) if value == 0 else b.min(1))).all()
    # the MAP's resting rule in every draw: the draw's abilities pass (fail) it half an answer in answers + 1
    n = float(post.inputs.trials[..., j].sum())
    target = 0.5 / (n + 1) if value == 0 else 1 - 0.5 / (n + 1)
    ability = post.idata.posterior["ability"].values.reshape(len(g), -1)
    weight = post.inputs.trials[..., 0].reshape(-1)
    judged = weight > 0
    p = 1 / (1 + np.exp(-(ability[:, judged] - b[:, [j]])))
    np.testing.assert_allclose(p @ weight[judged] / weight[judged].sum(), target, rtol=2e-3)
    # and the gains agree with the MAP's (rubric-only marginal ML) instead of shrinking towards 0
    cal = _quiet(fit_rubric_only, answers)
    assert abs(post.documents["gain_mean"].mean() - cal.documents["gain"].mean()) < 0.03
    met, warned = _metrics(_run(post, sim), post, k=5)
    assert any(m.startswith("posterior RCP-nDCG rests on degenerate data: ") and text in m for m in warned)
    assert any(text in n for n in met.notes)


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return fn(*args)


def test_rubric_only_posterior_refuses_when_every_criterion_is_degenerate(small):
    _, _, answers = small
    with pytest.raises(CalibrationError, match="every criterion is never or always passed"):
        _fit(None, answers.assign(C1=1, C2=1, C3=0, C4=0, C5=0), **SHORT)


def test_frozen_posterior_warns_a_never_passed_criterion_as_calibrate_does(small):
    _, windows, answers = small
    answers = answers.assign(C5=0)
    post, warned = _fit(windows, answers, model="frozen", method="laplace", svi_steps=300, num_samples=100, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rcp_jax.calibrate(rcp_jax.fit_bradley_terry(windows), answers)
    map_flags = [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]
    assert [f["kind"] for f in post.flags] == ["criterion_never_passed"]
    assert warned == map_flags and "no document passes criterion 'C5'" in warned[0]  # the same message


# --------------------------------------------------------------------------------------------------
# the per-system quantity and values above 1
# --------------------------------------------------------------------------------------------------
def _synthetic(draws: np.ndarray, theta: np.ndarray, model: str):
    q, n = theta.shape
    docs = np.array([[f"q{i}-d{j}" for j in range(n)] for i in range(q)], dtype=object)
    inputs = SimpleNamespace(mask=np.ones((q, n), bool), query_ids=[f"q{i}" for i in range(q)], doc_ids=docs,
                             theta=theta, n_docs=np.full(q, n))
    return SimpleNamespace(inputs=inputs, gain_draws=draws.astype(np.float32), method="nuts", model=model)


def _random_run(post, rng, n_systems: int = 6) -> pd.DataFrame:
    """``stage_a`` (the BT scores) and ``n_systems`` random rankers with rounded scores (ties too)."""
    inp = post.inputs
    rows = []
    for qi, q in enumerate(inp.query_ids):
        scores = {"stage_a": inp.theta[qi], **{f"s{s}": np.round(rng.normal(size=len(inp.theta[qi])), 1)
                                               for s in range(n_systems)}}
        rows += [pd.DataFrame({"system": s, "query_id": q, "doc_id": inp.doc_ids[qi], "score": v})
                 for s, v in scores.items()]
    return pd.concat(rows, ignore_index=True)


def test_with_gains_monotone_in_the_bt_scores_no_list_exceeds_one_and_stage_a_is_one_in_every_draw():
    """The frozen model: every draw's gains are increasing in the fixed BT scores (tau > 0), so the Stage A
    order is each draw's sorted order and posterior RCP-nDCG is plain nDCG, draw by draw - the MAP's number
    for a one-draw posterior (rcp_jax.evaluate)."""
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(5, 15))
    tau, alpha = rng.uniform(0.3, 2.0, (200, 5, 1)), rng.normal(size=(200, 5, 1))
    draws = 1 / (1 + np.exp(-(tau * theta + alpha)))
    post = _synthetic(draws, theta, "frozen")
    run = _random_run(post, rng)
    met, _ = _metrics(run, post, k=5)
    pq = met.per_query.set_index("system")
    assert (pq.loc["stage_a", ["lo", "mean", "hi"]].to_numpy() == 1.0).all()
    assert met.per_query["hi"].max() <= 1.0 and met.systems["hi"].max() <= 1.0
    assert met.notes == []
    for d in (0, 137):  # draw by draw: the MAP path's nDCG (ideal = the draw's gains, sorted)
        one = _synthetic(draws[d : d + 1], theta, "frozen")
        gains = pd.DataFrame({"query_id": np.repeat(one.inputs.query_ids, 15), "doc_id": one.inputs.doc_ids.ravel(),
                              "gain": one.gain_draws[0].ravel().astype(np.float64)})
        expected = rcp_jax.evaluate(run, gains=gains, k=5)
        got = _metrics(run, one, k=5)[0].per_query.merge(expected, on=["system", "query_id"])
        np.testing.assert_allclose(got["mean"], got["rcp_ndcg"], rtol=1e-6)


def test_a_value_above_one_is_explained_in_the_notes_and_the_table():
    """Draws that order documents unlike the Stage A order (as the joint model's do): a list that follows the
    draws scores above 1, and the notes say why, in the metrics and under the printed tables."""
    theta = np.array([[3.0, 2.0, 1.0, 0.0]])
    draws = np.array([[[0.5, 0.9, 0.3, 0.1]], [[0.6, 0.8, 0.3, 0.1]]])  # both draws put d1 first
    post = _synthetic(draws, theta, "joint")
    run = pd.DataFrame({"system": ["stage_a"] * 4 + ["follows"] * 4, "query_id": "q0",
                        "doc_id": list(post.inputs.doc_ids[0]) * 2,
                        "score": [4.0, 3.0, 2.0, 1.0, 3.0, 4.0, 2.0, 1.0]})
    met, _ = _metrics(run, post, k=2)
    s = met.systems.set_index("system")
    assert s.loc["follows", "mean"] > 1.0 and s.loc["stage_a", "mean"] == 1.0
    assert len(met.notes) == 1 and met.notes[0].startswith("RCP-nDCG above 1 (system mean 'follows' ")
    assert "Stage A order" in met.notes[0] and "not a ceiling" in met.notes[0]
    assert "note: RCP-nDCG above 1" in met.format() and met.to_dict()["notes"] == met.notes


# --------------------------------------------------------------------------------------------------
# through the CLI: fit --method nuts, then evaluate --posterior
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_store(demo_tiny, tmp_path_factory):
    from rcp_jax.cli import main

    folder = tmp_path_factory.mktemp("degenerate")
    assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "store"), "--quiet"]) == 0
    return folder / "store", demo_tiny["runs"]


def _edited_store(store, folder, kind: str, edit) -> str:
    """A copy of ``store`` whose ``kind`` judgements (tournament / rubric) are rewritten by ``edit(dict)``."""
    from rcp_jax.judging import Judgement, JudgementStore, read_judgements

    copy = folder / "store"
    shutil.copytree(store, copy)
    records = read_judgements(copy, kind)
    (copy / f"{kind}.jsonl").unlink()
    with JudgementStore(copy) as st:
        for j in records:
            st.append(Judgement.from_dict(edit(j.to_dict())))
    return str(copy)


def _tied(d: dict) -> dict:
    return {**d, "scores": {doc: 0.0 for doc in d["scores"]}} if d.get("scores") else d


def _criterion(name: str, value: int):
    def edit(d: dict) -> dict:
        if d.get("criteria"):
            d["criteria"] = {doc: {**c, name: value} for doc, c in d["criteria"].items()}
        return d
    return edit


@pytest.mark.parametrize("case, kind, edit, model, text", [
    ("tied", "tournament", _tied, "joint", "has the same Bradley-Terry score"),
    ("never", "rubric", _criterion("C5", 0), "rubric-only", "no document passes criterion 'C5'"),
    ("always", "rubric", _criterion("C1", 1), "rubric-only", "every document passes criterion 'C1'"),
])
def test_evaluate_posterior_prints_the_degeneracy(tiny_store, tmp_path, capsys, case, kind, edit, model, text):
    from rcp_jax.cli import main

    store, runs = tiny_store
    edited = _edited_store(store, tmp_path, kind, edit)
    out = tmp_path / "fit"
    capsys.readouterr()
    assert main(["fit", "--store", edited, "--out", str(out), "--model", model, "--method", "nuts", "--warmup", "100",
                 "--draws", "100", "--chains", "1", "--no-plots", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert any(text in n for n in fitted["notes"])
    if case == "tied":
        assert any(JOINT_NO_SPREAD in n for n in fitted["notes"])  # the posterior's own words beside the MAP's
    args = ["evaluate", "--calibration", str(out), "--runs", str(runs), "--k", "5", "--posterior", "--no-plots"]
    assert main([*args, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    said = [n for n in payload["notes"] if n.startswith("posterior RCP-nDCG rests on degenerate data: ")]
    assert any(text in n for n in said) and said == [n for n in payload["posterior"]["notes"] if n in said]
    assert main(args) == 0
    printed = capsys.readouterr()
    assert "note: posterior RCP-nDCG rests on degenerate data: " in printed.out and text in printed.out
    assert "Warning" not in printed.err  # said as notes, not as raw Python warnings

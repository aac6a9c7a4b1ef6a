"""Several judges, one calibration: kappa, the pooled 2PL's recovery, the store's judges,
``rcp-jax fit --judges`` and ``rcp-jax compare --by-judge``, with their refusal paths.

Sizes are small on purpose (the whole file stays within a few seconds of CPU after compilation); the
recovery figures at realistic sizes are in ``benchmarks/judges.py`` and ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pandas as pd
import pytest

from rcp_jax.judging import judge_windows
from rcp_jax.judging.offline import SimulatedJudge, synthetic_dataset
from rcp_jax.models import simulate as sim
from rcp_jax.models.irt_judges import JudgeCells, fit_pooled_judges
from rcp_jax.cli import main
from rcp_jax.errors import DataError
from rcp_jax.judges import cohen_kappa, list_judges, select_judges, shared_answers
from rcp_jax.schedule import ScheduleConfig, rubric_balanced, tournament_round1


# --------------------------------------------------------------------------------------------------
# Cohen's kappa against the hand formula
# --------------------------------------------------------------------------------------------------
def test_cohen_kappa_matches_the_hand_formula():
    # 2x2 table: both yes 4, a yes b no 1, a no b yes 2, both no 3 (n = 10)
    a = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 1, 1, 0, 0, 0]
    p_o = (4 + 3) / 10
    p_e = (5 / 10) * (6 / 10) + (5 / 10) * (4 / 10)
    assert cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-12)  # 0.4
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa(a, [1 - x for x in a]) == pytest.approx(-1.0)
    assert np.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # p_e = 1: undefined, not 1
    assert np.isnan(cohen_kappa([], []))


def test_shared_answers_pair_only_windows_with_the_same_documents():
    a = pd.DataFrame({"query_id": ["q"] * 4, "window_id": ["balanced#0", "balanced#0", "stratified#0", "stratified#0"],
                      "doc_id": ["x", "y", "x", "z"], "C1": [1, 0, 1, 1], "C2": [0, 0, 1, 0]})
    b = a.copy()
    b.loc[3, "doc_id"] = "w"  # stratified#0 shows other documents to judge b: not a shared context
    b["C1"] = [1, 1, 0, 0]
    both = shared_answers(a, b)
    assert sorted(both["doc_id"]) == ["x", "y"]
    assert list(both.sort_values("doc_id")["C1_b"]) == [1, 1]


# --------------------------------------------------------------------------------------------------
# the pooled 2PL recovers known offsets (models level)
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_pooled_fit_recovers_known_severity_and_scale():
    # theta = the true relevance (as an exact tournament would give up to tau, alpha), so this checks the
    # 2PL alone; the store-to-fit path with BT scores is checked below
    q, n = 5, 16
    truth = sim.simulate_truth(np.random.default_rng(3), [n] * q)
    severity, scale = np.array([-0.5, 0.5]), np.array([0.8, 1.25])  # sum 0, geometric mean 1: the fit's convention
    rows = []
    for k in range(2):
        s = sim.simulate_judgements(20 + k, [n] * q, truth=truth, rubric_placements=12.0,
                                    severity=severity[k], discrimination=scale[k])
        rows += [(j, truth.relevance[j][d], c, k, a[c])
                 for j, d, a in zip(s.rubric_query, s.rubric_doc, s.rubric_answers) for c in range(5)]
    r = np.array(rows, dtype=np.float64)
    jc = JudgeCells(query=r[:, 0].astype(int), theta=r[:, 1], criterion=r[:, 2].astype(int), judge=r[:, 3].astype(int),
                    passes=r[:, 4], trials=np.ones(len(r)), n_queries=q, n_criteria=5, n_judges=2)
    fit = fit_pooled_judges(jc)
    assert fit.converged
    assert fit.delta.sum() == pytest.approx(0.0, abs=1e-9)
    assert np.exp(np.log(fit.scale).mean()) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(fit.delta, severity, atol=0.15)
    np.testing.assert_allclose(fit.scale, scale, rtol=0.12)
    # the truth lies within 3 Laplace standard errors, and the errors are not absurdly wide
    assert np.all(np.abs(fit.delta - severity) < 3 * fit.delta_se)
    assert np.all(fit.delta_se < 0.15)
    _check_nuts_path(jc, fit, severity, scale)


def _check_nuts_path(jc, fit, severity, scale):
    """The Bayesian path of the pooled model (``fit --judges --method nuts``): a short NUTS run from the MAP
    keeps the conventions (sum 0, geometric mean 1), centres near the MAP and covers the known offsets."""
    from rcp_jax.models import inference
    from rcp_jax.models.bayes_judges import init_values, pooled_judges_model
    from rcp_jax.models.irt_judges import padded_arrays

    query, theta, criterion, judge, passes, trials = (
        x.astype(np.float32) if x.dtype.kind == "f" else x for x in padded_arrays(jc))
    kwargs = dict(query=query, theta=theta, criterion=criterion, judge=judge, passes=passes, trials=trials,
                  n_queries=jc.n_queries, n_criteria=jc.n_criteria, n_judges=jc.n_judges, fit_scale=True)
    draws = inference.run_nuts(pooled_judges_model, kwargs, seed=0, num_warmup=150, num_samples=150, num_chains=1,
                               init_values=init_values(fit.gamma, fit.beta, fit.tau, fit.alpha, fit.delta, fit.scale))
    delta = np.asarray(draws.samples["delta"]).reshape(-1, 2)
    lam = np.asarray(draws.samples["scale"]).reshape(-1, 2)
    np.testing.assert_allclose(delta.sum(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(np.exp(np.log(lam).mean(axis=1)), 1.0, atol=1e-5)
    np.testing.assert_allclose(delta.mean(axis=0), fit.delta, atol=0.05)
    lo, hi = np.quantile(delta, [0.005, 0.995], axis=0)
    assert np.all((lo < severity) & (severity < hi)), (lo, hi, severity)
    lo, hi = np.quantile(lam, [0.005, 0.995], axis=0)
    assert np.all((lo < scale) & (scale < hi)), (lo, hi, scale)


# --------------------------------------------------------------------------------------------------
# a store with two simulated judges (the real render -> parse -> store path, no pipeline rounds)
# --------------------------------------------------------------------------------------------------
SEVERITY_B = 1.0


@pytest.fixture(scope="module")
def two_judge_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("judges")
    queries, documents, latent = synthetic_dataset(5, 16, seed=4, doc_chars=60)
    cfg = ScheduleConfig()
    windows = []
    for qid, docs in documents.items():
        ids = list(docs)
        windows += tournament_round1(qid, ids, seed=0, dataset="t", config=cfg)
        windows += rubric_balanced(qid, ids, seed=0, dataset="t", config=cfg)
    store = root / "store"
    for model, severity, seed in (("sim-a", 0.0, 1), ("sim-b", SEVERITY_B, 2)):
        judge = SimulatedJudge(latent, model=model, severity=severity, seed=seed, decorate=False, noise=0.3)
        asyncio.run(judge_windows(windows, judge=judge, store=store, documents=documents, queries=queries))
    rng = np.random.default_rng(0)
    rows = [(name, q, d, latent[q][d] + rng.normal(0, noise))
            for q, docs in documents.items() for name, noise in (("good", 0.2), ("bad", 4.0)) for d in docs]
    runs = root / "runs.csv"
    pd.DataFrame(rows, columns=["system", "query_id", "doc_id", "score"]).to_csv(runs, index=False)
    return store, runs


def test_the_store_lists_both_judges_and_select_refuses_bad_names(two_judge_store):
    store, _ = two_judge_store
    held = list_judges(store)
    assert [j.name for j in held] == ["sim-a", "sim-b"]
    assert all(set(j.families) == {"tournament", "rubric"} for j in held)
    picked = select_judges(store, "first=sim-a,sim-b")
    assert [j.name for j in picked] == ["first", "sim-b"]
    with pytest.raises(DataError, match=r"judge 'sim-c' named in --judges is not in the store .*'sim-a'"):
        select_judges(store, "sim-a,sim-c")
    with pytest.raises(DataError, match="needs at least two judges"):
        select_judges(store, "sim-a")
    with pytest.raises(DataError, match="twice"):
        select_judges(store, "sim-a,x=sim-a")


@pytest.fixture(scope="module")
def judges_fit(two_judge_store, tmp_path_factory):
    store, _ = two_judge_store
    out = tmp_path_factory.mktemp("fit")
    code = main(["fit", "--store", str(store), "--judges", "sim-a,sim-b", "--out", str(out), "--json"])
    assert code == 0
    return out


def test_fit_judges_writes_offsets_with_intervals_and_agreement(judges_fit, capsys):
    payload = json.loads((judges_fit / "fit.json").read_text())
    off = {r["judge"]: r for r in payload["offsets"]}
    assert set(off) == {"sim-a", "sim-b"}
    # sim-b is stricter by SEVERITY_B ability units (on the simulator's latent scale); the pooled fit's
    # scale differs from the latent's by the judges' mean discrimination (~1 here), so allow a margin
    gap = off["sim-b"]["delta"] - off["sim-a"]["delta"]
    assert 0.6 * SEVERITY_B < gap < 1.5 * SEVERITY_B
    for r in off.values():
        assert r["delta_lo"] < r["delta"] < r["delta_hi"] and r["scale_lo"] < r["scale"] < r["scale_hi"]
    kappa = [r for r in payload["agreement"] if r["criterion"] == "all"][0]
    assert kappa["n"] > 0 and 0.0 < kappa["kappa"] < 1.0
    for name in ("calibration/items.json", "judges/offsets.csv", "judges/agreement.csv", "judges/judges.json",
                 "judges/1_sim-a/calibration/items.json", "judges/2_sim-b/calibration/items.json"):
        assert (judges_fit / name).is_file(), name


def test_compare_by_judge_reports_each_pairs_call_under_each_judge(judges_fit, two_judge_store, capsys):
    _, runs = two_judge_store
    capsys.readouterr()
    assert main(["compare", "--by-judge", str(judges_fit), "--runs", str(runs), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["judges"] == ["sim-a", "sim-b"]
    (pair,) = out["pairs"]
    assert (pair["system_a"], pair["system_b"]) == ("good", "bad")
    assert pair["call_sim-a"] == pair["call_sim-b"] == "A>B" and pair["agree"] is True
    assert out["agree"] == 1 and len(out["offsets"]) == 2
    assert main(["compare", "--by-judge", str(judges_fit), "--runs", str(runs)]) == 0
    text = capsys.readouterr().out
    assert "1 of 1 pairs get the same call under every judge" in text and "Cohen's kappa" in text


def test_refusals_exit_2_with_the_fix(judges_fit, two_judge_store, tmp_path, capsys):
    store, runs = two_judge_store
    out = str(tmp_path / "x")
    assert main(["fit", "--store", str(store), "--judges", "sim-a,nobody", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "judge 'nobody' named in --judges is not in the store" in err and "sim-b" in err
    assert main(["fit", "--store", str(store), "--judges", "sim-a", "--out", out]) == 2
    assert "at least two judges" in capsys.readouterr().err
    assert main(["fit", "--store", str(store), "--judges", "sim-a,sim-b", "--method", "svi", "--out", out]) == 2
    assert "--method map" in capsys.readouterr().err
    # --by-judge on a folder that is not a several-judges fit, and on a fit of one judge only
    assert main(["compare", "--by-judge", str(tmp_path), "--runs", str(runs)]) == 2
    assert "is not a fit of several judges" in capsys.readouterr().err
    one = tmp_path / "one"
    (one / "judges").mkdir(parents=True)
    (one / "judges" / "judges.json").write_text(json.dumps({"judges": [{"name": "sim-a", "folder": "1_sim-a"}]}))
    assert main(["compare", "--by-judge", str(one), "--runs", str(runs)]) == 2
    assert "compares at least two" in capsys.readouterr().err
    assert main(["compare", "--by-judge", str(judges_fit)]) == 2
    assert "needs --runs" in capsys.readouterr().err

"""Extending a judged pool with a new reranker: anchors, the anchored BT fit, the refusals,
resume and the extension log, and one in-process CLI round trip (judge -> fit -> extend -> evaluate).

The agreement with a full refit at a realistic size (20 queries x 150 documents) is measured by
``benchmarks/extend.py`` (figures in benchmarks/RESULTS.md); here one small collection, built once.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from rcp_jax.judging import SimulatedJudge, judge_windows_sync
from rcp_jax.calibration import load_calibration
from rcp_jax.cli import main
from rcp_jax.errors import DataError
from rcp_jax.extension import extend, find_new_documents, plan_extension, read_extension_log
from rcp_jax.extension.log import append_event
from rcp_jax.schedule import ExtensionConfig, extension_counts, extension_rubric, extension_tournament, select_anchors

N_Q, N_OLD, N_NEW = 3, 12, 4


# --------------------------------------------------------------------------------------------------
# windows (pure)
# --------------------------------------------------------------------------------------------------
def test_anchors_spread_over_the_score_range():
    scores = {f"d{i}": float(i) for i in range(100)}
    picked = select_anchors("q", scores, 10)
    values = [scores[d] for d in picked]
    assert len(set(picked)) == 10 and values == sorted(values, reverse=True)
    assert values[0] >= 90 and values[-1] <= 9  # the top and the bottom decile are both anchored
    assert all(9 <= a - b <= 11 for a, b in zip(values, values[1:]))  # evenly spaced quantiles
    assert select_anchors("q", {"a": 1.0, "b": 2.0}, 30) == ("b", "a")  # few documents: all of them
    with pytest.raises(DataError, match="not finite"):
        select_anchors("q", {"a": float("nan"), "b": 0.0}, 2)


def test_extension_windows_mix_new_documents_with_anchors_of_every_stratum():
    new = [f"n{i}" for i in range(7)]
    anchors = [f"a{i}" for i in range(20)]  # highest score first
    cfg = ExtensionConfig()
    wins = extension_tournament("q", new, anchors, phase="extend_x", seed=0, dataset="t", config=cfg)
    assert len(wins) == extension_counts(7, cfg)[0] == 17  # round(12 * 7 / 5)
    placements = {d: 0 for d in new}
    for w in wins:
        ids = w.doc_ids
        assert len(ids) == 10 and len(set(ids)) == 10
        got_new = [d for d in ids if d in placements]
        got_anchor = sorted(int(d[1:]) for d in ids if d.startswith("a"))
        assert len(got_new) == 5
        assert [a // 4 for a in got_anchor] == [0, 1, 2, 3, 4]  # one anchor from each of 5 strata of 4
        for d in got_new:
            placements[d] += 1
    assert max(placements.values()) - min(placements.values()) <= 1  # balanced: 85 placements over 7
    again = extension_tournament("q", new, anchors, phase="extend_x", seed=0, dataset="t", config=cfg)
    assert again == wins  # a pure function: a resumed extension asks the same windows
    rub = extension_rubric("q", new, phase="extend_x", seed=0, dataset="t", config=cfg)
    assert len(rub) == 7 and all(len(set(w.doc_ids)) == 7 and w.stage == "rubric" for w in rub)
    with pytest.raises(DataError, match="both new and an anchor"):
        extension_tournament("q", ["a1"], anchors, phase="p", seed=0)


# --------------------------------------------------------------------------------------------------
# the anchored BT fit
# --------------------------------------------------------------------------------------------------
def test_anchored_fit_recovers_a_known_score_exactly():
    from rcp_jax.models.anchored import fit_anchored

    rng = np.random.default_rng(0)
    anchors = np.linspace(-2.0, 2.0, 9)
    theta = np.concatenate([anchors, [0.7, -1.3]])
    windows = [rng.permutation(np.concatenate([rng.choice(9, 6, replace=False), [9, 10]])) for _ in range(6)]
    doc_index = np.array(windows)
    scores = theta[doc_index]  # scores equal to the true BT scores: the soft labels are exact
    fixed = np.zeros((1, 11))
    fixed[0, :9] = anchors
    free = np.zeros((1, 11), dtype=bool)
    free[0, 9:] = True
    fit = fit_anchored(doc_index, scores, np.zeros(6, dtype=int), fixed, free, np.array([1e9]), ridge=0.0)
    np.testing.assert_allclose(fit.theta[0, 9:], [0.7, -1.3], atol=1e-7)
    np.testing.assert_array_equal(fit.theta[0, :9], anchors)  # anchors never move
    assert np.isfinite(fit.se[0, 9:]).all() and np.isnan(fit.se[0, :9]).all()


def test_anchored_fit_at_the_full_optimum_returns_the_full_fit():
    # fixing the anchors at the full BT optimum (same normaliser and ridge) must give back the full optimum's
    # scores of the new documents: the conditional optimum at the joint optimum is the joint optimum. The full
    # optimum comes from an independent implementation: the METHOD's pairwise loss minimised by scipy
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    from rcp_jax.extension import anchored_scores

    rng = np.random.default_rng(1)
    n, ridge = 14, 1e-4
    truth = rng.normal(0, 1.5, n)
    docs = [f"d{i}" for i in range(n)]
    rows, pairs = [], []
    for w in range(30):
        pick = rng.choice(n, 6, replace=False)
        score = np.clip(np.round(truth[pick] + rng.normal(0, 0.7, 6)), -5, 5)
        rows += [("q", f"w{w}", docs[i], float(v)) for i, v in zip(pick, score)]
        for a in range(6):
            for b in range(a + 1, 6):  # weight 2 / size, soft label clip(sigmoid(s_a - s_b), 0.01, 0.99)
                pairs.append((pick[a], pick[b], 2 / 6, float(np.clip(expit(score[a] - score[b]), 0.01, 0.99))))
    ia, ib, wt, p = (np.array(c) for c in zip(*pairs))
    total = wt.sum()

    def loss(theta):
        d = theta[ia] - theta[ib]
        return -(wt * (p * log_expit(d) + (1 - p) * log_expit(-d))).sum() / total + 0.5 * ridge * (theta**2).sum()

    def grad(theta):
        r = wt * (expit(theta[ia] - theta[ib]) - p) / total
        return np.bincount(ia, r, n) - np.bincount(ib, r, n) + ridge * theta

    full = minimize(loss, np.zeros(n), jac=grad, method="BFGS", options={"gtol": 1e-12}).x
    ws = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    new = ["d0", "d1", "d2"]
    ext = ws[ws["window_id"].isin(ws.loc[ws["doc_id"].isin(new), "window_id"])]
    fixed = {"q": {d: float(full[i]) for i, d in enumerate(docs) if d not in new}}
    got = anchored_scores(ext, fixed, {"q": new}, {"q": 30 * 5.0}).set_index("doc_id")["theta_bt"]
    np.testing.assert_allclose(got[new].to_numpy(), full[:3], atol=1e-6)
    assert total == pytest.approx(30 * 5.0)  # each window of 6 adds size - 1 to the normaliser


# --------------------------------------------------------------------------------------------------
# one small collection judged, fitted and extended (in process), shared by the tests below
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("extend")
    rng = np.random.default_rng(7)
    rows, pools, run = [], [], []
    for qi in range(N_Q):
        q = f"q{qi}"
        ids = [f"{q}-d{i}" for i in range(N_OLD + N_NEW)]
        grades = {d: int(rng.integers(0, 3)) for d in ids}
        rows.append({"query_id": q, "query": f"query number {qi} about topic {qi}", "doc_ids": ids,
                     "docs": [f"text of document {d}, words {rng.integers(1000)}" for d in ids], "qrels": grades})
        pools += [(q, d, r + 1) for r, d in enumerate(ids[:N_OLD])]
        scores = {d: grades[d] + rng.normal(0, 0.5) for d in ids}
        run += [f"{q} Q0 {d} {r + 1} {s:.4f} newsys" for r, (d, s) in
                enumerate(sorted(scores.items(), key=lambda t: -t[1]))]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pd.DataFrame(pools, columns=["query_id", "doc_id", "rank"]).to_csv(folder / "pools.csv", index=False)
    (folder / "new.trec").write_text("\n".join(run) + "\n")
    paths = {k: folder / v for k, v in (("rows", "rows.jsonl"), ("pools", "pools.csv"), ("run", "new.trec"),
                                        ("store", "store"), ("fit", "fit"), ("out", "ext"))}
    common = ["--rows", str(paths["rows"]), "--pools", str(paths["pools"])]
    _judge_small_store(paths["store"], rows, {q: [d for qq, d, _ in pools if qq == q] for q, *_ in pools})
    _quick_calibration(paths["store"], paths["fit"] / "calibration")
    paths["common"] = common
    return paths


def _quick_calibration(store, folder) -> None:
    """A calibration of the store's documents without a JAX fit (the fixture stays cheap): each document's BT
    score is its mean within-window centred score, tau 1, alpha 0, the simulator's items. The extension reads
    only these numbers; the fits themselves are checked above and by benchmarks/extend.py."""
    from rcp_jax.judging.offline import DEFAULT_BETA, DEFAULT_GAMMA
    from rcp_jax.calibration import Calibration, save_calibration
    from rcp_jax.metrics import gain
    from rcp_jax.pipeline import store_tables

    ws, answers, _ = store_tables(store)
    ws["centred"] = ws["score"] - ws.groupby(["query_id", "window_id"])["score"].transform("mean")
    docs = ws.groupby(["query_id", "doc_id"], as_index=False)["centred"].mean().rename(columns={"centred": "theta_bt"})
    docs["ability"] = docs["theta_bt"]
    gamma, beta = np.array(DEFAULT_GAMMA), np.array(DEFAULT_BETA)
    docs["gain"] = gain(docs["ability"].to_numpy(), gamma, beta)
    crit = [c for c in answers.columns if c.startswith("C")]
    counts = answers.groupby(["query_id", "doc_id"])[crit].agg(["sum", "count"])
    placements = counts[(crit[0], "count")]
    share = sum(counts[(c, "sum")] for c in crit) / (len(crit) * placements)
    key = pd.MultiIndex.from_frame(docs[["query_id", "doc_id"]])
    docs["placements"] = placements.reindex(key).fillna(0).astype(int).to_numpy()
    docs["count_gain"] = share.reindex(key).to_numpy()
    queries = docs.groupby("query_id", as_index=False).agg(n_docs=("doc_id", "size"))
    queries = queries.assign(tau=1.0, alpha=0.0, n_answers=0, calibrated=True)
    save_calibration(Calibration(crit, gamma, beta, queries[["query_id", "tau", "alpha", "n_docs", "n_answers", "calibrated"]],
                                 docs[["query_id", "doc_id", "theta_bt", "ability", "gain", "placements", "count_gain"]]),
                     folder)


def _judge_small_store(store, rows, pools) -> None:
    """A store judged like `rcp-jax judge --model simulated` would, but only round 1 and the balanced rubric half
    (no refits between rounds, so the fixture compiles little): the same judge, latent and identity."""
    from rcp_jax.judging import JudgementStore
    from rcp_jax import schedule as S
    from rcp_jax.cli._common import latent_from_qrels
    from rcp_jax.store_identity import check_store_identity

    qrels = pd.DataFrame([(r["query_id"], d, g) for r in rows for d, g in r["qrels"].items()],
                         columns=["query_id", "doc_id", "grade"])
    judge = SimulatedJudge(latent_from_qrels(pools, qrels, 0), seed=0)
    windows = [w for q, docs in pools.items() for w in (S.tournament_round1(q, docs, seed=0, dataset="rows")
                                                        + S.rubric_balanced(q, docs, seed=0, dataset="rows"))]
    texts = {d: t for r in rows for d, t in zip(r["doc_ids"], r["docs"])}
    with JudgementStore(store) as st:
        check_store_identity(st, dataset="rows", seed=0, config=S.DEFAULT_CONFIG, pools=pools)
        judge_windows_sync(windows, judge=judge, store=st, documents=texts,
                           queries={r["query_id"]: r["query"] for r in rows})


def _cli_extend(world, *extra):
    return main(["extend", "--runs", str(world["run"]), "--store", str(world["store"]), "--calibration",
                 str(world["fit"]), "--depth", str(N_OLD + N_NEW), *world["common"], *extra])


def test_cli_round_trip_extends_resumes_and_evaluates(world, capsys):
    # resume: a killed run left some windows answered and a 'started' event; the next run asks only the rest
    from rcp_jax import read_run
    from rcp_jax.cli._common import latent_from_qrels

    cal = load_calibration(world["fit"] / "calibration")
    runs = read_run(world["run"])
    plan = plan_extension(runs, cal, store=world["store"], depth=N_OLD + N_NEW)
    assert len(plan.new_documents) == N_Q * N_NEW
    assert _cli_extend(world, "--estimate", "--json") == 0  # plans, asks and writes nothing
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["planned_calls"] == plan.calls and estimate["new_documents"] == N_Q * N_NEW
    assert read_extension_log(world["store"]) == []
    pools = pd.read_csv(world["pools"], dtype=str)
    added = plan.new_documents.groupby("query_id")["doc_id"].agg(list)  # in the order the CLI draws them
    grown = {q: list(g["doc_id"]) + added[q] for q, g in pools.groupby("query_id")}
    qrels = pd.DataFrame([(r["query_id"], d, g) for r in map(json.loads, world["rows"].read_text().splitlines())
                          for d, g in r["qrels"].items()], columns=["query_id", "doc_id", "grade"])
    rows = [json.loads(line) for line in world["rows"].read_text().splitlines()]
    texts = {d: t for r in rows for d, t in zip(r["doc_ids"], r["docs"])}
    judge = SimulatedJudge(latent_from_qrels(grown, qrels, 0), seed=0)
    from rcp_jax.judging import JudgementStore

    with JudgementStore(world["store"]) as st:
        append_event(world["store"], "started", plan.extension)
        judge_windows_sync(plan.windows[:5], judge=judge, store=st, documents=texts,
                           queries={r["query_id"]: r["query"] for r in rows})
    capsys.readouterr()

    assert _cli_extend(world, "--out", str(world["out"]), "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["calls"] == plan.calls - 5  # only what the 'killed' run had not asked
    assert summary["full_rejudge_calls"] > summary["planned_calls"]
    events = [e["event"] for e in read_extension_log(world["store"]) if e["extension"] == plan.extension]
    assert events == ["started", "resumed", "finished"]
    new = pd.read_csv(world["out"] / "new_documents.csv", dtype={"query_id": str, "doc_id": str})
    assert len(new) == N_Q * N_NEW and new["gain"].between(0, 1).all() and (new["placements"] > 0).all()
    extended = load_calibration(world["out"] / "calibration")
    np.testing.assert_array_equal(extended.gamma, cal.gamma)  # nothing shared was refitted
    np.testing.assert_array_equal(extended.beta, cal.beta)
    pd.testing.assert_frame_equal(extended.queries[["query_id", "tau", "alpha"]], cal.queries[["query_id", "tau", "alpha"]])
    assert len(extended.gains()) == len(cal.gains()) + N_Q * N_NEW

    # run again: every answer is in the store, nothing is asked, the log is not touched
    assert _cli_extend(world, "--out", str(world["out"]), "--json") == 0
    assert json.loads(capsys.readouterr().out)["calls"] == 0
    assert len(read_extension_log(world["store"])) == 3

    # the extended calibration scores the new system; the old one has no gain for its new documents
    assert main(["evaluate", "--calibration", str(world["out"]), "--runs", str(world["run"]), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)["systems"]
    assert 0 < board["newsys"]["rcp_ndcg"] <= 1

    # extending with the extended calibration: nothing new, refused with exit 2 and the fix
    assert main(["extend", "--runs", str(world["run"]), "--store", str(world["store"]), "--calibration",
                 str(world["out"]), "--depth", str(N_OLD + N_NEW), *world["common"], "--out", str(world["out"] / "x")]) == 2
    assert "nothing to extend" in capsys.readouterr().err


def test_refuses_unknown_queries_and_rubric_only_calibrations(world):
    cal = load_calibration(world["fit"] / "calibration")
    runs = pd.DataFrame({"system": "s", "query_id": ["q0", "zz", "yy"], "doc_id": ["x", "y", "z"], "score": [3.0, 2, 1]})
    with pytest.raises(DataError, match=r"2 queries unknown to the calibration \('yy', 'zz'\).*rcp-jax judge"):
        find_new_documents(runs, cal)
    import dataclasses

    with pytest.raises(DataError, match="without Bradley-Terry scores"):
        find_new_documents(runs, dataclasses.replace(cal, method="rubric_only"))
    with pytest.raises(DataError, match=r"system\(s\) \['other'\] are not in"):
        find_new_documents(runs, cal, systems=["other"])


def test_refuses_another_judge_or_another_store(world, tmp_path):
    from rcp_jax import read_run
    from rcp_jax.calibration import save_calibration

    cal = load_calibration(world["fit"] / "calibration")
    runs = read_run(world["run"])
    texts = dict(queries={"q0": "x"}, documents={})
    other_judge = SimulatedJudge({}, seed=5)  # another simulator seed: another judge family
    with pytest.raises(DataError, match=r"holds no tournament answers of this run's judge.*--seed"):
        extend(runs, store=world["store"], calibration=cal, judge=other_judge, **texts)
    # a calibration whose documents this store never judged (fitted from another store)
    moved = cal.documents.copy()
    moved["doc_id"] = "elsewhere-" + moved["doc_id"]
    foreign = type(cal)(**{**cal.__dict__, "documents": moved})
    save_calibration(foreign, tmp_path / "cal")
    judge = SimulatedJudge({}, seed=0)
    with pytest.raises(DataError, match="fitted from another store or schedule"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extend(runs, store=world["store"], calibration=tmp_path / "cal", judge=judge, **texts)
    with pytest.raises(DataError, match="no tournament answers"):
        extend(runs, store=tmp_path / "empty", calibration=cal, judge=judge, **texts)
    assert not (tmp_path / "empty").exists()  # refused before anything was written


def test_extension_log_survives_a_torn_last_line(tmp_path):
    append_event(tmp_path, "started", "extend_a", depth=10)
    with open(tmp_path / "extensions.jsonl", "ab") as fh:
        fh.write(b'{"format":1,"event":"fini')  # a crash mid-write
    with pytest.warns(UserWarning, match="torn last line"):
        assert [e["event"] for e in read_extension_log(tmp_path)] == ["started"]
    append_event(tmp_path, "resumed", "extend_a")  # the torn fragment is moved aside first
    assert [e["event"] for e in read_extension_log(tmp_path)] == ["started", "resumed"]
    assert (tmp_path / "extensions.jsonl.torn").read_bytes() == b'{"format":1,"event":"fini\n'
    (tmp_path / "extensions.jsonl").write_bytes(b'{"event":"started"}\nnot json\n{"event":"x"}\n')
    with pytest.raises(DataError, match=r"extensions.jsonl, line 2: not an extension event"):
        read_extension_log(tmp_path)


def test_rubric_check_tells_a_misplaced_document_from_a_well_placed_one():
    # answers drawn at the placed ability fit (small z); answers drawn 1.5 lower (documents placed too high,
    # as when tau and alpha are extrapolated) do not (large z, the criterion's observed share below its prediction)
    from rcp_jax.judging.offline import DEFAULT_BETA, DEFAULT_GAMMA
    from rcp_jax.calibration import Calibration
    from rcp_jax.extension import rubric_check

    gamma, beta = np.array(DEFAULT_GAMMA), np.array(DEFAULT_BETA)
    cal = Calibration([f"C{i}" for i in range(1, 6)], gamma, beta, pd.DataFrame(), pd.DataFrame())
    rng = np.random.default_rng(3)
    placed = pd.DataFrame({"query_id": "q", "doc_id": [f"d{i}" for i in range(60)], "ability": rng.normal(-1, 1, 60)})

    def answers(shift):
        rows = []
        for d, a in zip(placed["doc_id"], placed["ability"]):
            for _ in range(7):
                p = 1 / (1 + np.exp(-gamma * (a + shift - beta)))
                rows.append(("q", d, *(rng.random(5) < p).astype(int)))
        return pd.DataFrame(rows, columns=["query_id", "doc_id", "C1", "C2", "C3", "C4", "C5"])

    good, bad = rubric_check(cal, placed, answers(0.0)), rubric_check(cal, placed, answers(-1.5))
    assert good["answers"] == bad["answers"] == 60 * 7 * 5
    assert good["max_abs_z"] < 4 < bad["max_abs_z"]
    assert all(bad["observed"][c] < bad["predicted"][c] for c in ("C1", "C2", "C3"))

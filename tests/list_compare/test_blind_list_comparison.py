"""Blind comparison of ideal lists (rcp_jax.list_compare) with simulated judges whose answer is known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rcp_jax.judging import JudgeFamily, Judgement, SimulatedJudge, Usage, Window, read_judgements
from rcp_jax.calibration import Calibration, save_calibration
from rcp_jax.errors import DataError
from rcp_jax.list_compare import (
    compare_ideal_lists_sync,
    ideal_lists,
    list_decisions,
    list_pairs,
    list_windows,
    summarize_decisions,
)

N_QUERIES, N_DOCS = 6, 16


def toy_calibration(seed: int = 0, identical: tuple[str, ...] = ()) -> Calibration:
    """RCP gains continuous; Count gains a coarse, noisy reading of them (so most top-10 lists differ)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(N_QUERIES):
        qid = f"q{q}"
        gain = rng.uniform(0.02, 0.98, N_DOCS)
        count = np.round(np.clip(gain + rng.normal(0, 0.15, N_DOCS), 0, 1) * 5) / 5
        if qid in identical:
            count = gain.copy()
        for d in range(N_DOCS):
            rows.append({"query_id": qid, "doc_id": f"{qid}-d{d}", "theta_bt": 0.0, "ability": 0.0,
                         "gain": gain[d], "placements": 6, "count_gain": count[d]})
    docs = pd.DataFrame(rows)
    queries = pd.DataFrame({"query_id": [f"q{q}" for q in range(N_QUERIES)], "tau": 1.0, "alpha": 0.0})
    return Calibration(criteria=[f"C{i}" for i in range(1, 6)], gamma=np.ones(5), beta=np.zeros(5),
                       queries=queries, documents=docs)


def texts(cal: Calibration):
    docs = {d: f"text of {d}" for d in cal.documents["doc_id"]}
    queries = {q: f"query {q}" for q in cal.queries["query_id"]}
    return docs, queries


def oracle_latent(cal: Calibration) -> dict[str, dict[str, float]]:
    """A judge whose latent is the RCP gain itself (its DCG is monotone in it, so the RCP list is ideal)."""
    return {q: dict(zip(g["doc_id"], g["gain"])) for q, g in cal.documents.groupby("query_id")}


# ------------------------------------------------------------------------------------------ the lists
def test_ideal_lists_sort_cut_and_break_ties_by_a_seeded_order_independent_of_rows():
    g = pd.DataFrame({"query_id": ["q"] * 5, "doc_id": list("abcde"), "gain": [0.5, 0.9, 0.5, 0.5, np.nan]})
    lists = ideal_lists(g, k=3, seed=1)
    assert lists["q"][0] == "b" and set(lists["q"][1:]) <= {"a", "c", "d"} and "e" not in lists["q"]
    assert ideal_lists(g.iloc[::-1], k=3, seed=1) == lists  # row order does not matter
    orders = {ideal_lists(g, k=4, seed=s)["q"][1:] for s in range(12)}
    assert len(orders) > 1  # ties really are broken by the seed, not by doc id
    with pytest.raises(DataError, match="twice"):
        ideal_lists(pd.concat([g, g]), k=3)


def test_pairs_and_windows_mark_identical_and_missing_queries():
    first = {"q1": ("a", "b"), "q2": ("a", "b"), "q3": ("x",)}
    second = {"q1": ("b", "a"), "q2": ("a", "b"), "q4": ("y",)}
    pairs = list_pairs(first, second)
    assert dict(zip(pairs.query_id, pairs.status)) == {"q1": "compared", "q2": "identical", "q3": "missing", "q4": "missing"}
    windows = list_windows(pairs)
    assert [(w.query_id, w.phase, w.doc_ids, w.split) for w in windows] == [
        ("q1", "rcp_first", ("a", "b", "b", "a"), 2), ("q1", "count_first", ("b", "a", "a", "b"), 2)]


# -------------------------------------------------------------------------------------- known answers
def test_a_judge_whose_latent_is_the_rcp_gain_prefers_the_rcp_list_every_time(tmp_path):
    cal = toy_calibration()
    docs, queries = texts(cal)
    oracle = SimulatedJudge(oracle_latent(cal), list_noise=0.0, decorate=True)
    res = compare_ideal_lists_sync(cal, judges={"oracle": oracle}, store=tmp_path, documents=docs, queries=queries, k=10)
    n = int((res.pairs.status == "compared").sum())
    assert n >= N_QUERIES - 1
    row = res.summary.set_index("judge").loc["oracle"]
    assert row.n_decided == n and row.wins_rcp == n and row.wins_count == 0 and row.share_rcp == 1.0
    assert row.first_shown_rate == 0.5  # A in one order, B in the other
    assert res.calls == 2 * n
    assert len(read_judgements(tmp_path, "lists", valid_only=True)) == 2 * n
    again = compare_ideal_lists_sync(cal, judges={"oracle": oracle}, store=tmp_path, documents=docs, queries=queries)
    assert again.calls == 0 and again.summary.equals(res.summary)  # every answer came from the store


def test_a_judge_that_always_says_a_decides_nothing_and_the_majority_follows_the_consistent_judges(tmp_path):
    cal = toy_calibration(seed=3)
    docs, queries = texts(cal)
    latent = oracle_latent(cal)
    judges = {"oracle1": SimulatedJudge(latent, list_noise=0.0, seed=1),
              "oracle2": SimulatedJudge(latent, list_noise=0.0, seed=2),
              "first": SimulatedJudge(latent, position_bias=10.0)}
    res = compare_ideal_lists_sync(cal, judges=judges, store=tmp_path, documents=docs, queries=queries, k=10)
    s = res.summary.set_index("judge")
    n = int((res.pairs.status == "compared").sum())
    assert s.loc["first", "n_decided"] == 0 and s.loc["first", "n_undecided"] == n
    assert s.loc["first", "first_shown_rate"] == 1.0 and np.isnan(s.loc["first", "share_rcp"])
    assert s.loc["majority", "n_decided"] == n and s.loc["majority", "wins_rcp"] == n
    assert s.loc["unanimous", "n_decided"] == 0
    assert "first" in res.to_text() and "majority" in res.to_text()


def test_identical_lists_are_not_asked_and_are_reported(tmp_path):
    cal = toy_calibration(identical=("q0", "q4"))
    docs, queries = texts(cal)
    judge = SimulatedJudge(oracle_latent(cal), list_noise=0.0)
    res = compare_ideal_lists_sync(cal, judges=[judge], store=tmp_path, documents=docs, queries=queries)
    assert set(res.pairs.loc[res.pairs.status == "identical", "query_id"]) == {"q0", "q4"}
    assert not {"q0", "q4"} & set(res.decisions.query_id)
    assert any("identical" in n and "q0" in n for n in res.notes)
    assert "2 skipped (identical lists)" in res.to_text()


def test_decisions_need_the_same_pick_in_both_orders_and_the_summary_adds_up():
    # per query: the list picked with rcp shown first, and with count shown first (None: no valid answer)
    picks = [("rcp", "rcp"), ("count", "count"), ("rcp", "count"), (None, "rcp")]
    fam = JudgeFamily("m", "p", "1")
    js = []
    for q, (px, py) in enumerate(picks):
        for first, pick in (("rcp", px), ("count", py)):
            if pick is None:
                continue
            w = Window(f"q{q}", "lists", f"{first}_first", 0, ("a", "b"), split=1)
            js.append(Judgement("r", fam, w, True, None, "", None, None, "", "stop", 1, Usage(), {}, "", "",
                                better="A" if pick == first else "B"))
    dec = list_decisions({"j": js}, [f"q{q}" for q in range(4)])
    assert dec.decided.tolist() == [True, True, False, False]
    s = summarize_decisions(dec).iloc[0]
    assert (s.n_decided, s.n_undecided, s.wins_rcp, s.wins_count, s.n_answered) == (2, 2, 1, 1, 3)
    assert s.share_rcp == 0.5 and s.p_binomial == 1.0


def test_gains_tables_can_be_given_directly_and_bad_input_is_refused(tmp_path):
    cal = toy_calibration()
    docs, queries = texts(cal)
    judge = SimulatedJudge(oracle_latent(cal), list_noise=0.0)
    res = compare_ideal_lists_sync(gains={"fine": cal.gains(), "coarse": cal.count_gains()}, judges=judge,
                                   store=tmp_path, documents=docs, queries=queries, k=5)
    assert res.names == ("fine", "coarse") and "wins_fine" in res.summary.columns
    with pytest.raises(DataError, match="exactly two"):
        compare_ideal_lists_sync(gains={"a": cal.gains()}, judges=judge, store=tmp_path, documents=docs, queries=queries)
    with pytest.raises(DataError, match="reserved"):
        compare_ideal_lists_sync(cal, judges={"majority": judge}, store=tmp_path, documents=docs, queries=queries)


# ------------------------------------------------------------------------------------------------ CLI
def test_cli_compare_lists_on_a_demo_calibration(tmp_path, capsys):
    from rcp_jax.cli import main
    from rcp_jax.demo import load_demo

    demo = load_demo()
    lat = demo.latent.copy()
    lat["gain"] = 1 / (1 + np.exp(-lat["latent"]))
    lat = lat[lat.query_id.isin(["q01", "q02", "q03"])]
    lat["count_gain"] = np.round(lat["gain"] * 3) / 3  # coarse: many ties
    docs = lat.assign(theta_bt=lat["latent"], ability=lat["latent"], placements=6)[
        ["query_id", "doc_id", "theta_bt", "ability", "gain", "placements", "count_gain"]]
    cal = Calibration(criteria=[f"C{i}" for i in range(1, 6)], gamma=np.ones(5), beta=np.zeros(5),
                      queries=pd.DataFrame({"query_id": ["q01", "q02", "q03"], "tau": 1.0, "alpha": 0.0}),
                      documents=docs.reset_index(drop=True))
    report = tmp_path / "report"
    save_calibration(cal, report / "calibration")
    assert main(["compare-lists", "--report", str(report), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"]["compared"] + out["queries"]["identical"] == 3
    assert set(out["judges"]) == {"simulated-0", "simulated-1", "simulated-2"}
    assert {r["judge"] for r in out["summary"]} >= {"simulated-0", "majority", "unanimous"}
    assert (report / "list_comparison.csv").is_file() and (report / "store" / "lists.jsonl").is_file()
    assert main(["compare-lists", "--report", str(report)]) == 0
    text = capsys.readouterr().out
    assert "judge calls this run: 0" in text and "rcp share" in text
    assert main(["compare-lists"]) == 2  # nothing to read

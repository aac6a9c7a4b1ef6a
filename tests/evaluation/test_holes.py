"""Holes: top-k documents without a gain (never judged). The hole table against a brute-force count, the three
policies of ``evaluate(holes=...)`` against hand-built equivalents, the refusal naming the worst systems and
queries, and the CLI's ``--holes`` / ``--max-hole-rate`` with holes.csv. Small, hand-built calibration (no fit)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rcp_jax.calibration import Calibration, save_calibration
from rcp_jax.cli import main
from rcp_jax.errors import DataError
from rcp_jax.evaluation import HoleError, evaluate, hole_table, system_hole_rates


def brute_holes(run: pd.DataFrame, judged: set, k: int, tie: str) -> dict:
    """Expected unjudged documents in each list's top k, list by list: ties ordered by doc id descending
    (``doc_id_desc``), or (``group_mean``) a tie straddling rank k contributing its hole share per slot."""
    out = {}
    for (system, q), lst in run.groupby(["system", "query_id"]):
        lst = lst.assign(hole=[(q, d) not in judged for d in lst["doc_id"]])
        if tie == "doc_id_desc":
            top = lst.sort_values(["score", "doc_id"], ascending=[False, False]).head(k)
            out[system, q] = float(top["hole"].sum())
            continue
        holes, slots = 0.0, k
        for _, tied in sorted(lst.groupby("score"), key=lambda t: -t[0]):
            take = min(slots, len(tied))
            holes += take * tied["hole"].mean()
            slots -= take
            if slots == 0:
                break
        out[system, q] = holes
    return out


@pytest.fixture(scope="module")
def toy():
    """Three systems x four queries over pools of 8; documents d6, d7 of each query were never judged.
    ``good`` ranks them last, ``bad`` first, ``tied`` scores everything in ties of two."""
    rng = np.random.default_rng(5)
    queries, docs = [f"q{i}" for i in range(4)], [f"d{j}" for j in range(8)]
    gains = pd.DataFrame([(q, d, rng.uniform()) for q in queries for d in docs[:6]], columns=["query_id", "doc_id", "gain"])
    rows = []
    for q in queries:
        for j, d in enumerate(docs):
            rows += [("good", q, d, 8.0 - j), ("bad", q, d, float(j)), ("tied", q, d, float((j + int(q[1])) // 2))]
    run = pd.DataFrame(rows, columns=["system", "query_id", "doc_id", "score"])
    return run, gains


@pytest.mark.parametrize("protocol, tie", [("plain", "group_mean"), ("bright", "doc_id_desc")])
def test_hole_table_matches_a_brute_force_count(toy, protocol, tie):
    run, gains = toy
    table = hole_table(run, gains, k=5, protocol=protocol)
    expected = brute_holes(run, set(zip(gains["query_id"], gains["doc_id"])), 5, tie)
    got = {(s, q): h for s, q, h in zip(table["system"], table["query_id"], table["holes"])}
    assert got == pytest.approx(expected)
    assert (table["top_k"] == 5).all()
    assert table["hole_rate"].to_numpy() == pytest.approx(table["holes"].to_numpy() / 5)
    rates = system_hole_rates(table)
    assert rates.index[0] == "bad" and rates["bad"] == pytest.approx(0.4) and rates["good"] == 0.0
    # a query without any gain is not scored at all (NaN nDCG), so it has no holes either
    unscored = pd.concat([run, run.loc[run["query_id"] == "q0"].assign(query_id="q9")], ignore_index=True)
    assert hole_table(unscored, gains, k=5, protocol=protocol).equals(table)


def test_refuse_names_the_worst_systems_and_queries_and_the_fixes(toy):
    run, gains = toy
    with pytest.raises(HoleError) as info:
        evaluate(run, gains=gains, k=5)
    message = str(info.value)
    assert "bad 40.0%" in message and "q0 2/5" in message and "good" not in message.split("unjudged")[1]
    for fix in ("rcp-jax extend", "--holes zero", "--holes ignore", "--max-hole-rate"):
        assert fix in message
    assert isinstance(info.value, DataError) and len(info.value.table) == 12
    ok = evaluate(run.loc[run["system"] == "good"], gains=gains, k=5)  # no hole: no refusal
    assert ok.attrs["holes"]["holes"].sum() == 0
    assert len(evaluate(run, gains=gains, k=5, max_hole_rate=0.5)) == 12  # under a raised threshold


def test_zero_and_ignore_equal_their_hand_built_equivalents(toy):
    run, gains = toy
    zero = evaluate(run, gains=gains, k=5, holes="zero")
    judged = set(zip(gains["query_id"], gains["doc_id"]))
    unjudged = run.loc[[(q, d) not in judged for q, d in zip(run["query_id"], run["doc_id"])], ["query_id", "doc_id"]]
    with_zeros = pd.concat([gains, unjudged.drop_duplicates().assign(gain=0.0)], ignore_index=True)
    explicit = evaluate(run, gains=with_zeros, k=5)  # the unjudged ones judged 0: no holes left
    assert explicit.attrs["holes"]["holes"].sum() == 0
    assert zero["rcp_ndcg"].to_numpy() == pytest.approx(explicit["rcp_ndcg"].to_numpy())
    ignore = evaluate(run, gains=gains, k=5, holes="ignore")
    kept = run.loc[[(q, d) in judged for q, d in zip(run["query_id"], run["doc_id"])]]
    assert ignore["rcp_ndcg"].to_numpy() == pytest.approx(evaluate(kept, gains=gains, k=5)["rcp_ndcg"].to_numpy())
    bad = ignore["system"] == "bad"
    assert (ignore.loc[bad, "rcp_ndcg"].to_numpy() > zero.loc[bad, "rcp_ndcg"].to_numpy()).all()
    assert ignore.attrs["holes"]["holes"].sum() == zero.attrs["holes"]["holes"].sum() > 0  # before dropping
    with pytest.raises(DataError, match="holes must be one of refuse, zero, ignore"):
        evaluate(run, gains=gains, holes="skip")


def test_cli_refuses_writes_holes_csv_and_ranks_when_told(toy, tmp_path, capsys):
    run, gains = toy
    docs = gains.assign(theta_bt=0.0, ability=0.0, placements=1, count_gain=gains["gain"])
    queries = pd.DataFrame({"query_id": sorted(gains["query_id"].unique()), "tau": 1.0, "alpha": 0.0, "n_docs": 6,
                            "n_answers": 6, "calibrated": True})
    cal = Calibration([f"C{i}" for i in range(1, 6)], np.ones(5), np.zeros(5), queries, docs)
    save_calibration(cal, tmp_path / "fit" / "calibration")
    run.to_csv(tmp_path / "runs.csv", index=False)
    run[["query_id", "doc_id"]].drop_duplicates().to_csv(tmp_path / "pools.csv", index=False)
    argv = ["evaluate", "--calibration", str(tmp_path / "fit"), "--runs", str(tmp_path / "runs.csv"), "--pools",
            str(tmp_path / "pools.csv"), "--k", "5", "--no-plots", "--out", str(tmp_path / "eval")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "bad 40.0%" in err and "--holes zero" in err and str(tmp_path / "eval" / "holes.csv") in err
    assert "Traceback" not in err
    assert main([*argv, "--holes", "zero"]) == 0
    assert "holes (top-5 documents without a gain, scored as gain 0): bad 40.0%, tied" in capsys.readouterr().out
    holes = pd.read_csv(tmp_path / "eval" / "holes.csv")
    assert list(holes.columns) == ["system", "query_id", "top_k", "holes", "hole_rate"] and len(holes) == 12
    assert main([*argv, "--max-hole-rate", "0.5", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["holes"]["systems"]["bad"] == pytest.approx(0.4) and payload["holes"]["policy"] == "refuse"
    with pytest.raises(SystemExit) as info:
        main([*argv, "--max-hole-rate", "2"])
    assert info.value.code == 2 and "--max-hole-rate: must be a share in [0, 1], got 2" in capsys.readouterr().err

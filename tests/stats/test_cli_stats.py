"""``rcp-jax compare`` and ``rcp-jax diagnose`` end to end on small files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rcp_jax.cli import main


@pytest.fixture(scope="module")
def per_query_df() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for ds in ("d1", "d2"):
        for q in range(15):
            base = rng.uniform(0.2, 0.7)
            for s in range(4):
                r = base + 0.08 * s + rng.normal(0, 0.04)
                rows.append({"system": f"s{s}", "query_id": f"{q}", "dataset": ds, "rcp_ndcg": r,
                             "qrel_ndcg": 1.0 if q < 3 else float(np.clip(round(r, 1), 0, 1))})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_compare_reads_formats_and_prints_report(tmp_path, capsys, per_query_df, suffix):
    path = tmp_path / f"pq{suffix}"
    if suffix == ".csv":
        per_query_df.to_csv(path, index=False)
    elif suffix == ".jsonl":
        per_query_df.to_json(path, orient="records", lines=True)
    else:
        per_query_df.to_parquet(path)
    code = main(["compare", str(path), "--permutations", "2000", "--bootstrap", "100"])
    out = capsys.readouterr().out
    assert code == 0
    assert "| dataset | qrel_ndcg | rcp_ndcg |" in out
    assert "mean over datasets: rcp_ndcg" in out


def test_compare_json_and_pairs_file(tmp_path, capsys, per_query_df):
    path = tmp_path / "pq.csv"
    per_query_df.to_csv(path, index=False)
    pairs = tmp_path / "out" / "pairs.csv"
    code = main(["compare", str(path), "--json", "--test", "permutation", "--correction", "holm",
                 "--permutations", "1000", "--bootstrap", "50", "--out-pairs", str(pairs)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["test"] == "permutation"
    assert {r["metric"] for r in data["sensitivity"]} == {"qrel_ndcg", "rcp_ndcg"}
    assert len(data["pairs"]) == 2 * 2 * 6
    assert len(pd.read_csv(pairs)) == 24


def test_compare_latex(tmp_path, capsys, per_query_df):
    path = tmp_path / "pq.csv"
    per_query_df.to_csv(path, index=False)
    assert main(["compare", str(path), "--format", "latex", "--metrics", "rcp_ndcg",
                 "--bootstrap", "20", "--permutations", "500"]) == 0
    out = capsys.readouterr().out
    assert r"\begin{tabular}" in out and "qrel" not in out


def test_compare_errors_exit_2(tmp_path, capsys, per_query_df):
    bad = tmp_path / "bad.csv"
    per_query_df.drop(columns="query_id").to_csv(bad, index=False)
    assert main(["compare", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "query_id" in err
    assert main(["compare", str(tmp_path / "nope.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    per_query_df.to_csv(tmp_path / "ok.csv", index=False)
    assert main(["compare", str(tmp_path / "ok.csv"), "--metrics", "count_ndcg"]) == 2
    assert "count_ndcg" in capsys.readouterr().err


def test_diagnose_per_query_and_answers(tmp_path, capsys, per_query_df):
    pq = tmp_path / "pq.csv"
    per_query_df.to_csv(pq, index=False)
    rng = np.random.default_rng(1)
    p = rng.uniform(size=2000)
    ans = pd.DataFrame({"criterion": [f"C{i % 5 + 1}" for i in range(2000)],
                        "answer": (rng.uniform(size=2000) < p).astype(int), "p_calibrated": p, "p_raw": p**0.3})
    ans_path = tmp_path / "answers.csv"
    ans.to_csv(ans_path, index=False)
    pd.DataFrame({"query_id": ["a", "b", "c"], "tau": [0.5, 1.0, 1.5]}).to_csv(tmp_path / "q.csv", index=False)
    plot = tmp_path / "rel.png"
    code = main(["diagnose", str(pq), "--answers", str(ans_path), "--reliability-plot", str(plot),
                 "--queries", str(tmp_path / "q.csv"), "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    und = {(r["metric"], r["dataset"]): r for r in data["undistinguishable"]}
    assert und[("qrel_ndcg", "all")]["saturated"] == 6  # queries 0-2 of both datasets score 1 for everyone
    cal = {(r["model"], r["criterion"]): r for r in data["calibration"]}
    assert cal[("p_calibrated", "all")]["ece"] < 0.05 < cal[("p_raw", "all")]["ece"]
    assert plot.exists() and data["tau_spread_5_95"] > 2
    assert main(["diagnose", str(pq)]) == 0
    assert "Undistinguishable queries" in capsys.readouterr().out


def test_diagnose_errors(tmp_path, capsys):
    assert main(["diagnose"]) == 2
    assert "nothing to diagnose" in capsys.readouterr().err
    bad = tmp_path / "a.csv"
    pd.DataFrame({"criterion": ["C1"], "answer": [2], "p_x": [0.5]}).to_csv(bad, index=False)
    assert main(["diagnose", "--answers", str(bad)]) == 2
    assert "row 0" in capsys.readouterr().err

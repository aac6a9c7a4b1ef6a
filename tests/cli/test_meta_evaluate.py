"""``rcp-jax meta-evaluate`` on the per_query.csv that ``rcp_jax.evaluate`` writes for the embedded demo's six
systems (gains given as tables: no calibration, no judge), and its error messages."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from rcp_jax.cli import main


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def per_query_csv(tmp_path_factory):
    """``per_query.csv`` of the demo's six systems: RCP and Count gains a noisy function of the qrel grades; the
    qrels of q16..q20 withheld (unlabelled queries: qrel_ndcg NaN there)."""
    import rcp_jax
    from rcp_jax.demo import load_demo

    demo = load_demo()
    rng = np.random.default_rng(0)
    pooled = demo.pools[["query_id", "doc_id"]].drop_duplicates().merge(demo.qrels, how="left").fillna({"grade": 0})
    gains = pooled.assign(gain=np.clip(pooled["grade"] / 3 + 0.15 * rng.normal(size=len(pooled)), 0, 1))
    count = pooled.assign(gain=(pooled["grade"] > 1).astype(float))
    qrels = demo.qrels.loc[~demo.qrels["query_id"].isin([f"q{i}" for i in range(16, 21)])]
    table = rcp_jax.evaluate(demo.runs, gains=gains[["query_id", "doc_id", "gain"]],
                             count_gains=count[["query_id", "doc_id", "gain"]], qrels=qrels, k=5, holes="zero")
    path = tmp_path_factory.mktemp("meta") / "per_query.csv"
    table.to_csv(path, index=False)
    return path


def test_meta_evaluate_writes_the_table_the_means_and_the_figure(per_query_csv, tmp_path):
    code, out, err = cli("meta-evaluate", "--per-query", per_query_csv, "--out", tmp_path / "meta")
    assert code == 0, err
    assert "meta-evaluation against qrel_ndcg on 15 common queries (20 with the other metrics)" in out
    assert "rcp_ndcg_all_queries" in out and "tau_AP" in out
    summary = pd.read_csv(tmp_path / "meta" / "meta_evaluation.csv")
    means = pd.read_csv(tmp_path / "meta" / "system_means.csv")
    assert list(summary["metric"]) == ["rcp_ndcg", "count_ndcg"]
    assert len(means) == 6
    for row in summary.itertuples():
        assert row.kendall_tau == pytest.approx(sps.kendalltau(means[row.metric], means["qrel_ndcg"]).statistic)
        assert row.n_same_order <= row.n_reference_separated
    png = (tmp_path / "meta" / "meta_evaluation.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_meta_evaluate_json(per_query_csv):
    code, out, err = cli("meta-evaluate", "--json", "--per-query", per_query_csv, "--alpha", "0.01",
                         "--correction", "holm")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["settings"] == {"reference": "qrel_ndcg", "alpha": 0.01, "test": "t", "correction": "holm"}
    assert (payload["n_queries"], payload["n_queries_all"]) == (15, 20)
    assert {r["metric"] for r in payload["summary"]} == {"rcp_ndcg", "count_ndcg"}
    assert len(payload["means"]) == 6


def test_errors_are_clear(per_query_csv, tmp_path):
    table = pd.read_csv(per_query_csv)
    no_qrels = tmp_path / "no_qrels.csv"
    table.drop(columns="qrel_ndcg").to_csv(no_qrels, index=False)
    code, _, err = cli("meta-evaluate", "--per-query", no_qrels)
    assert code == 2 and "no qrel_ndcg column" in err and "--qrels" in err
    two = tmp_path / "two.csv"
    table[table.system.isin(["bm25", "qlm"])].to_csv(two, index=False)
    code, _, err = cli("meta-evaluate", "--per-query", two)
    assert code == 2 and "at least 3 systems" in err and str(two) in err
    code, _, err = cli("meta-evaluate", "--per-query", tmp_path / "absent.csv")
    assert code == 2 and "does not exist" in err
    code, _, err = cli("meta-evaluate", "--per-query", per_query_csv, "--alpha", "2")
    assert code == 2 and "--alpha" in err

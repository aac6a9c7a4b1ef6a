"""Systems are compared on the queries they all have: a system lacking a query is not ranked on an
easier subset, and every left-out query or empty cell is reported, never dropped silently."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from rcp_jax.cli import main
from rcp_jax.errors import DataError
from rcp_jax.evaluation import leaderboard
from rcp_jax.per_query import prepare_per_query
from rcp_jax.per_query import PairingWarning, pair_queries
from rcp_jax.stats import compare_systems

FAST = dict(n_permutations=500, n_bootstrap=50, tests=["t", "wilcoxon"])


def _table() -> pd.DataFrame:
    """B beats A by 0.05 on every query; q0 is hard (0.1 / 0.15) and A has no row for it, so averaging
    each system over its own queries would put A (0.6 on its easy queries) above B (0.545)."""
    rows = []
    for q in range(10):
        base = 0.1 if q == 0 else 0.6
        rows.append({"system": "B", "query_id": f"q{q}", "rcp_ndcg": base + 0.05,
                     "qrel_ndcg": np.nan if q == 9 else base})  # q9: no positive qrel, NaN for everyone
        if q != 0:
            rows.append({"system": "A", "query_id": f"q{q}", "rcp_ndcg": base,
                         "qrel_ndcg": np.nan if q == 9 else base - 0.01 * (q % 3)})
    rows.append({"system": "C", "query_id": "q0", "rcp_ndcg": 0.12, "qrel_ndcg": 0.1})
    for q in range(1, 10):
        rows.append({"system": "C", "query_id": f"q{q}", "rcp_ndcg": 0.58, "qrel_ndcg": np.nan if q in (5, 9) else 0.5})
    return pd.DataFrame(rows)


def test_leaderboard_tests_and_report_use_the_common_queries():
    with pytest.warns(PairingWarning, match="A lacks q0 \\(no row\\)"):
        c = compare_systems(_table(), **FAST)
    rcp = c.systems[c.systems.metric == "rcp_ndcg"].set_index("system")
    assert list(rcp.index) == ["B", "A", "C"]  # B first: it beats A on every common query
    assert rcp.loc["A", "score"] == pytest.approx(0.6) and rcp.loc["B", "score"] == pytest.approx(0.65)
    assert (rcp["n_queries"] == 9).all()
    pairs = c.pairs[c.pairs.metric == "rcp_ndcg"]
    assert (pairs["n_queries"] == 9).all()
    ab = pairs[(pairs.system_a == "B") & (pairs.system_b == "A")].iloc[0]
    assert ab["diff"] == pytest.approx(0.05)
    # qrel_ndcg: q9 has no value for any system (excluded), q0 (A: no row) and q5 (C: NaN) are dropped
    q = c.pairs[c.pairs.metric == "qrel_ndcg"]
    assert (q["n_queries"] == 7).all()
    dropped = c.dropped[c.dropped.metric == "qrel_ndcg"].sort_values("system")
    assert dropped[["system", "query_id", "reason"]].values.tolist() == [["A", "q0", "no row"], ["C", "q5", "NaN"]]
    assert c.excluded.values.tolist() == [["qrel_ndcg", "all", "q9"]]
    notes = "\n".join(c.notes)
    assert "qrel_ndcg: 1 query without positive qrels excluded from qrel_ndcg" in notes
    assert "qrel_ndcg: 2 queries dropped for every system because 2 system/query cells lack a value" in notes
    assert "use the 7 queries every system has" in notes
    report = c.to_markdown()
    assert "## Queries left out" in report and "C lacks q5 (NaN)" in report


def test_evaluate_leaderboard_follows_the_same_rule():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        board = leaderboard(_table(), ["rcp_ndcg", "qrel_ndcg"])
    texts = [str(w.message) for w in caught]
    assert any("A lacks q0 (no row)" in t for t in texts)
    assert any("without positive qrels excluded" in t for t in texts)
    assert list(board.index) == ["B", "A", "C"]
    assert board.loc["A", "rcp_ndcg"] == pytest.approx(0.6)


def test_complete_tables_are_unchanged_and_silent():
    df = _table()
    df = df[df.query_id != "q0"].assign(qrel_ndcg=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PairingWarning)
        pairing = pair_queries(*prepare_per_query(df))
    assert pairing.dropped.empty and pairing.excluded.empty and pairing.notes() == []
    assert pairing.table["rcp_ndcg"].notna().all()


def test_no_common_query_is_refused_with_a_clear_message():
    df = pd.DataFrame({"system": ["A", "B"], "query_id": ["q1", "q2"], "rcp_ndcg": [0.5, 0.4]})
    with pytest.raises(DataError, match="no query has a rcp_ndcg value for every system \\(A lacks 1, B lacks 1 of 2"):
        compare_systems(df, **FAST)


def test_cli_reports_left_out_queries(tmp_path, capsys):
    path = tmp_path / "pq.csv"
    _table().to_csv(path, index=False)
    assert main(["compare", str(path), "--permutations", "500", "--bootstrap", "50"]) == 0
    captured = capsys.readouterr()
    assert "## Queries left out" in captured.out and "A lacks q0 (no row)" in captured.out
    assert "np." not in captured.out + captured.err
    assert main(["compare", str(path), "--json", "--permutations", "500", "--bootstrap", "50"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any("without positive qrels" in n for n in data["notes"])
    assert {(r["system"], r["query_id"]) for r in data["dropped"]} == {("A", "q0"), ("C", "q5")}

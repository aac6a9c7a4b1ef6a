"""`rcp-jax demo` end to end: JSON leaderboard with three metrics, a reusable store, the report folder."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_runs_offline_twice_and_reuses_the_store(tmp_path):
    out = tmp_path / "demo"
    first = subprocess.run([sys.executable, "-m", "rcp_jax", "demo", "--out", str(out), "--json"],
                           capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-2000:]
    result = json.loads(first.stdout)
    assert result["calls"] > 1000 and result["queries"] == 20
    assert len(result["systems"]) == 6
    for metrics in result["systems"].values():
        assert set(metrics) == {"qrel_ndcg", "count_ndcg", "rcp_ndcg"}
        assert all(0.0 <= v <= 1.0 for v in metrics.values())
    sep = result["pairs_separated"]
    assert sep["rcp_ndcg"]["separated"] > sep["qrel_ndcg"]["separated"]
    for name in ("leaderboard.csv", "per_query.csv", "comparison.md", "item_curves.png", "leaderboard.png",
                 "query_calibration.png", "calibration/items.json", "store/tournament.jsonl", "store/rubric.jsonl"):
        assert (out / name).is_file(), name

    second = subprocess.run([sys.executable, "-m", "rcp_jax", "demo", "--out", str(out), "--json", "--no-plots"],
                            capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]
    again = json.loads(second.stdout)
    assert again["calls"] == 0
    assert again["systems"] == result["systems"]

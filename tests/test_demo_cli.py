"""`rcp-jax demo` end to end: JSON leaderboard with three metrics, a reusable store, the report folder.

The first run is the README's command, the installed ``rcp-jax`` console script in a fresh process;
the second (reusing the store) calls the same entry point, ``rcp_jax.cli.main``, in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rcp_jax.cli import main


def console_script() -> str:
    script = Path(sys.executable).with_name("rcp-jax")
    if not script.is_file():
        pytest.fail(f"the rcp-jax console script is not installed beside {sys.executable}: pip install -e .")
    return str(script)


def test_demo_runs_offline_twice_and_reuses_the_store(tmp_path, capfd):
    out = tmp_path / "demo"
    first = subprocess.run([console_script(), "demo", "--out", str(out), "--json"], capture_output=True, text=True)
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

    capfd.readouterr()
    code = main(["demo", "--out", str(out), "--json", "--no-plots"])
    stdout, stderr = capfd.readouterr()
    assert code == 0, stderr[-2000:]
    again = json.loads(stdout)
    assert again["calls"] == 0
    assert again["systems"] == result["systems"]

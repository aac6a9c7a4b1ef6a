"""The demo says what its three metrics are: the legend ``metric_legend`` prints, as the README's demo block
shows it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def test_the_demo_says_what_its_three_metrics_are():
    from rcp_jax.cli._common import metric_legend

    board = pd.DataFrame({"qrel_ndcg": [0.5], "count_ndcg": [0.6], "rcp_ndcg": [0.7]}, index=["s"])
    legend = metric_legend(board, 10).splitlines()
    assert legend[0] == "nDCG@10, mean over queries; each metric's gain:"
    assert [line.split(":")[0].strip() for line in legend[1:]] == ["qrel-nDCG", "Count-nDCG", "RCP-nDCG"]
    assert len(metric_legend(board[["rcp_ndcg"]], 5).splitlines()) == 2
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "\n".join(legend) in readme  # the README's demo block shows it as the demo prints it

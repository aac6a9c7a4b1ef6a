"""Report figures: the leaderboard's axis names its cut-off and query count; query names in
``query_calibration.png`` do not overlap, and every query is named or listed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def drawn(monkeypatch):
    """The figures the report functions draw, kept open (their PNG is still written)."""
    import rcp_jax.plots.report as report

    figures = []
    real_save = report._save

    def keep(fig, path):
        figures.append(fig)
        fig.canvas.draw()
        from matplotlib.text import Text

        # the text's own box (an annotation's window extent would include its leader line)
        snapshot = [(t.get_text(), Text.get_window_extent(t)) for ax in fig.axes for t in ax.texts]
        fig.snapshot = snapshot
        return real_save(fig, path)

    monkeypatch.setattr(report, "_save", keep)
    return figures


def test_the_leaderboard_axis_names_the_cut_off_and_queries(drawn, tmp_path):
    from rcp_jax import evaluate, leaderboard
    from rcp_jax.plots.report import write_evaluation_plots

    run = pd.DataFrame([(s, f"q{q}", f"d{d}", float((d * (3 if s == "a" else 7)) % 5))
                        for s in ("a", "b") for q in range(4) for d in range(8)], columns=["system", "query_id", "doc_id", "score"])
    gains = pd.DataFrame([(f"q{q}", f"d{d}", d / 8) for q in range(4) for d in range(8)], columns=["query_id", "doc_id", "gain"])
    per_query = evaluate(run, gains=gains, k=5)
    assert per_query.attrs["k"] == 5
    write_evaluation_plots(per_query, leaderboard(per_query), tmp_path)
    assert drawn[0].axes[0].get_xlabel() == "mean nDCG@5 over 4 queries"
    write_evaluation_plots(per_query, leaderboard(per_query), tmp_path, k=3)  # an explicit k wins
    labels = [f.axes[0].get_xlabel() for f in drawn]
    assert [x for x in labels if x.startswith("mean")] == ["mean nDCG@5 over 4 queries", "mean nDCG@3 over 4 queries"]


@pytest.mark.parametrize("n", [8, 30])
def test_query_names_do_not_overlap(drawn, tmp_path, n):
    import types

    from rcp_jax.plots.report import query_calibration

    rng = np.random.default_rng(1)
    queries = pd.DataFrame({"query_id": [f"PLAIN-{1000 + 37 * i}" for i in range(n)],
                            "alpha": np.r_[rng.normal(-1.3, 0.15, n - 4), rng.normal(0, 0.5, 4)],
                            "tau": np.r_[rng.normal(0.65, 0.05, n - 4), rng.normal(0.8, 0.1, 4)]})
    path = query_calibration(types.SimpleNamespace(queries=queries), tmp_path / "query_calibration.png")
    assert path.is_file()
    texts = drawn[-1].snapshot
    names = [(t, box) for t, box in texts if t.startswith("PLAIN-")]
    for i, (a, box_a) in enumerate(names):
        for b, box_b in names[i + 1:]:
            assert not box_a.overlaps(box_b), (a, b)
    left_out = [t for t, _ in texts if t.startswith("not named")]
    named = {t for t, _ in names}
    listed = set(left_out[0].split(": ", 1)[1].replace(" and ", ", ").split(", ")) if left_out else set()
    assert named | {x for x in listed if x.startswith("PLAIN-")} == set(queries["query_id"])  # every query accounted for
    assert len(named) >= n - 4

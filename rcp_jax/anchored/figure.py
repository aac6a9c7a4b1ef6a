"""The figure of an anchored comparison: human-only and human-anchored intervals of every pair (matplotlib)."""

from __future__ import annotations

from pathlib import Path

from rcp_jax.anchored.comparison import AnchoredComparison


def plot_pair_intervals(comparison: AnchoredComparison, path: str | Path | None = None):
    """One row per pair: the human-only interval (grey), the anchored one (blue) and the judge-only difference
    (a red cross, in the judge's units: biased where the judge's bias differs between the systems).

    Returns the matplotlib Figure; writes it to ``path`` (PNG/PDF/SVG by suffix) when given.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    pairs = comparison.pairs
    n = len(pairs)
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * n + 1.4))
    ys = range(n)
    for i, r in enumerate(pairs.itertuples(index=False)):
        ax.plot([r.human_only_low, r.human_only_high], [i + 0.15, i + 0.15], color="0.6", lw=3,
                label="human-only" if i == 0 else None)
        ax.plot([r.anchored_low, r.anchored_high], [i - 0.15, i - 0.15], color="tab:blue", lw=3,
                label="human-anchored (PPI++)" if i == 0 else None)
        ax.plot(r.anchored, i - 0.15, "o", color="tab:blue", ms=4)
        ax.plot(r.human_only, i + 0.15, "o", color="0.4", ms=4)
        ax.plot(r.judge_diff, i, "x", color="tab:red", label="judge-only" if i == 0 else None)
    ax.axvline(0.0, color="k", lw=0.8)
    ax.set_yticks(list(ys), [f"{r.system_a} - {r.system_b}" for r in pairs.itertuples(index=False)])
    ax.invert_yaxis()
    ax.set_xlabel(f"difference in mean {comparison.human} ({comparison.level:.0%} intervals; "
                  f"{comparison.n_labelled}/{comparison.n_queries} queries labelled)")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig

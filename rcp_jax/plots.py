"""Report figures (matplotlib, Agg backend): item curves, per-query calibration, leaderboard, nDCG spread.

Each function takes plain tables, draws one figure, saves it to ``path`` (PNG) and returns the path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> Path:
    from rcp_jax.io import atomic_write_bytes
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight")
    _plt().close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def item_curves(calibration, path, *, theta_range: tuple[float, float] | None = None) -> Path:
    """Item characteristic curves P(C_c = 1 | t) of every criterion and the gain curve g(t).

    A rug shows where the calibrated documents lie.
    """
    plt = _plt()
    gamma, beta = np.asarray(calibration.gamma), np.asarray(calibration.beta)
    ability = calibration.documents["ability"].dropna().to_numpy()
    lo, hi = theta_range or (min(beta.min() - 3, np.percentile(ability, 1) if ability.size else -6),
                             max(beta.max() + 3, np.percentile(ability, 99) if ability.size else 6))
    t = np.linspace(lo, hi, 400)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = plt.cm.viridis(np.linspace(0.05, 0.85, len(gamma)))
    for c, (g, b) in enumerate(zip(gamma, beta)):
        ax.plot(t, 1 / (1 + np.exp(-g * (t - b))), color=colors[c], lw=1.4,
                label=f"{calibration.criteria[c]}  γ={g:.2f} β={b:+.2f}")
    ax.plot(t, calibration.gain_of(t), color="black", lw=2.4, label="gain g(t)")
    if ability.size:
        ax.plot(ability, np.full_like(ability, -0.03), "|", color="grey", alpha=0.25, ms=8)
    ax.set_xlabel("calibrated ability t = τ·θ_BT + α")
    ax.set_ylabel("P(criterion passed) / gain")
    ax.set_ylim(-0.06, 1.02)
    ax.set_title("Rubric item characteristic curves and the RCP gain")
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def query_calibration(calibration, path) -> Path:
    """Per-query scale tau and offset alpha (scatter, with the 5th-95th percentile tau ratio)."""
    plt = _plt()
    q = calibration.queries.dropna(subset=["tau"])
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.scatter(q["alpha"], q["tau"], s=22, alpha=0.8)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    if len(q) >= 2:
        lo, hi = np.percentile(q["tau"], [5, 95])
        ax.set_title(f"Per-query calibration (τ 95th/5th percentile = {hi / lo:.2f})")
    ax.set_xlabel("offset α (query relevance level)")
    ax.set_ylabel("scale τ (BT units -> common scale)")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def leaderboard_bars(board: pd.DataFrame, path, metrics=("qrel_ndcg", "count_ndcg", "rcp_ndcg")) -> Path:
    """Grouped bars: each system's mean of each metric side by side (systems sorted by the last metric)."""
    plt = _plt()
    metrics = [m for m in metrics if m in board.columns]
    board = board.sort_values(metrics[-1], ascending=True)
    y = np.arange(len(board))
    h = 0.8 / max(1, len(metrics))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(board) + 1.5))
    for i, m in enumerate(metrics):
        ax.barh(y + (i - (len(metrics) - 1) / 2) * h, board[m], height=h, label=m.replace("_", "-").replace("ndcg", "nDCG"))
    ax.set_yticks(y, board.index)
    ax.set_xlim(0, 1)
    ax.set_xlabel("mean nDCG@k")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Leaderboard")
    return _save(fig, path)


def ndcg_distribution(per_query: pd.DataFrame, path, metric: str = "rcp_ndcg") -> Path:
    """Per-query distribution of one metric per system (box plot with the points)."""
    plt = _plt()
    order = per_query.groupby("system")[metric].mean().sort_values().index
    data = [per_query.loc[per_query["system"] == s, metric].dropna().to_numpy() for s in order]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(order) + 1.5))
    ax.boxplot(data, orientation="horizontal", tick_labels=list(order), showfliers=False)
    rng = np.random.default_rng(0)
    for i, d in enumerate(data, start=1):
        ax.scatter(d, i + rng.uniform(-0.15, 0.15, len(d)), s=8, alpha=0.5, color="tab:blue")
    ax.set_xlabel(f"per-query {metric.replace('_', '-')}")
    ax.set_xlim(-0.02, 1.02)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def write_report_plots(result, folder) -> dict[str, Path]:
    """All report figures of a :class:`rcp_jax.pipeline.PipelineResult` into ``folder``."""
    folder = Path(folder)
    out = {
        "item_curves": item_curves(result.calibration, folder / "item_curves.png"),
        "query_calibration": query_calibration(result.calibration, folder / "query_calibration.png"),
    }
    if result.per_query is not None:
        out["leaderboard"] = leaderboard_bars(result.leaderboard, folder / "leaderboard.png")
        for m in ("rcp_ndcg", "qrel_ndcg"):
            if m in result.per_query.columns:
                out[f"distribution_{m}"] = ndcg_distribution(result.per_query, folder / f"per_query_{m}.png", m)
    return out

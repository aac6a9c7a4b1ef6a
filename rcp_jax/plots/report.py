"""Report figures (matplotlib, Agg backend): item curves, per-query calibration, leaderboard, nDCG spread.

Each function takes plain tables, draws one figure, saves it to ``path`` (PNG) and returns the path.
:func:`write_calibration_plots` (``rcp-jax fit``), :func:`write_evaluation_plots` (``rcp-jax evaluate``)
and :func:`write_report_plots` (``rcp-jax demo``, both) draw the sets the commands write; the leaderboard
carries an interval per bar (a bootstrap over queries by default, :func:`bootstrap_leaderboard`).
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
    from rcp_jax.data.atomic import atomic_write_bytes
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight")
    _plt().close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def _labels(calibration) -> list:
    """Criterion names of a calibration (its rubric's names, else ``C1..CK``)."""
    return list(getattr(calibration, "labels", calibration.criteria))


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
                label=f"{_labels(calibration)[c]}  γ={g:.2f} β={b:+.2f}")
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


#: Label offsets tried around a point, in points: distances (nearest first) and directions (right-up first).
_LABEL_DISTANCES = (4, 9, 15, 22, 30, 40, 52)
_LABEL_DIRECTIONS = (45, 0, 90, 135, 180, 315, 270, 225)


def place_labels(ax, xs, ys, labels, *, fontsize: float = 7) -> list[str]:
    """Name scatter points without overlaps: each label goes to the nearest free spot around its point
    (:data:`_LABEL_DISTANCES` x :data:`_LABEL_DIRECTIONS`), inside the axes and clear of every other label
    and point, with a thin leader line once it sits away from its point. Labels are placed from the most
    crowded point out.

    Returns:
        the labels no free spot was found for (not drawn; the caller can list them).
    """
    from matplotlib.transforms import Bbox

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    scale = fig.dpi / 72.0  # points -> pixels
    pts = ax.transData.transform(np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]))
    frame = ax.get_window_extent(renderer)
    dot = 4.0 * scale
    taken = [Bbox.from_bounds(px - dot, py - dot, 2 * dot, 2 * dot) for px, py in pts]
    crowd = np.array([(np.hypot(*(pts - p).T) < 40 * scale).sum() for p in pts])
    left_out = []
    for i in np.argsort(-crowd, kind="stable"):
        (x, y), label = (xs[i], ys[i]), str(labels[i])
        text = ax.annotate(label, (x, y), textcoords="offset points", xytext=(0, 0), fontsize=fontsize, color="0.25")
        placed = False
        for dist in _LABEL_DISTANCES:
            for angle in _LABEL_DIRECTIONS:
                dx, dy = dist * np.cos(np.radians(angle)), dist * np.sin(np.radians(angle))
                text.set_position((dx, dy))
                text.set_ha("left" if dx > 1e-9 else "right" if dx < -1e-9 else "center")
                text.set_va("bottom" if dy > 1e-9 else "top" if dy < -1e-9 else "center")
                box = text.get_window_extent(renderer).expanded(1.05, 1.1)
                inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
                if inside and not any(box.overlaps(t) for j, t in enumerate(taken) if j != i):
                    placed = True
                    break
            if placed:
                break
        if not placed:
            text.remove()
            left_out.append(label)
            continue
        taken.append(box)
        if dist > _LABEL_DISTANCES[1]:
            text.remove()
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize, color="0.25",
                        ha=text.get_ha(), va=text.get_va(),
                        arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.6", "shrinkA": 0, "shrinkB": 3})
    return left_out


def query_calibration(calibration, path) -> Path:
    """Per-query scale tau and offset alpha (scatter, with the 5th-95th percentile tau ratio).

    Up to 30 queries are named beside their points, without overlaps (:func:`place_labels`); names that find
    no free spot are listed under the plot.
    """
    plt = _plt()
    q = calibration.queries.dropna(subset=["tau"])
    named = len(q) <= 30
    fig, ax = plt.subplots(figsize=(7.5, 5.2) if named and len(q) > 10 else (6.4, 4.4))
    ax.scatter(q["alpha"], q["tau"], s=22, alpha=0.8, zorder=3)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    if len(q) >= 2:
        lo, hi = np.percentile(q["tau"], [5, 95])
        ax.set_title(f"Per-query calibration (τ 95th/5th percentile = {hi / lo:.2f})")
    ax.set_xlabel("offset α (query relevance level)")
    ax.set_ylabel("scale τ (BT units -> common scale)")
    ax.grid(alpha=0.3)
    ax.margins(0.12)  # room for the names at the edges
    if named and len(q):
        left_out = place_labels(ax, q["alpha"].to_numpy(), q["tau"].to_numpy(), q["query_id"].to_numpy())
        if left_out:
            shown = ", ".join(left_out[:12]) + (f" and {len(left_out) - 12} more" if len(left_out) > 12 else "")
            ax.text(0.0, -0.16, f"not named (no room): {shown}", transform=ax.transAxes, fontsize=7, color="0.3",
                    va="top")
    return _save(fig, path)


METRIC_LABELS = {"qrel_ndcg": "qrel-nDCG", "count_ndcg": "Count-nDCG", "rcp_ndcg": "RCP-nDCG"}


def bootstrap_leaderboard(per_query: pd.DataFrame, metrics=("qrel_ndcg", "count_ndcg", "rcp_ndcg"), *,
                          n_bootstrap: int = 2000, level: float = 0.95, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Percentile bootstrap interval of each system's mean, queries resampled (within datasets).

    The statistic is :func:`rcp_jax.leaderboard`'s (mean over queries within a dataset, then over
    datasets); NaN cells (a query without a positive qrel) are left out as there.

    Returns:
        ``{metric: DataFrame indexed by system with columns lo, hi}``.
    """
    from rcp_jax.stats.paired import bootstrap_mean_ci

    df = per_query.copy()
    if "dataset" not in df.columns:
        df["dataset"] = "all"
    df["_key"] = df["dataset"].astype(str) + "\x1f" + df["query_id"].astype(str)
    out = {}
    for m in metrics:
        if m not in df.columns:
            continue
        wide = df.pivot_table(index="system", columns="_key", values=m, aggfunc="mean", dropna=False)
        groups = [k.split("\x1f", 1)[0] for k in wide.columns]
        lo, hi = bootstrap_mean_ci(wide.to_numpy(dtype=np.float64), groups=groups, n_bootstrap=n_bootstrap,
                                   level=level, seed=seed)
        out[m] = pd.DataFrame({"lo": lo, "hi": hi}, index=wide.index)
    return out


def leaderboard_bars(board: pd.DataFrame, path, metrics=("qrel_ndcg", "count_ndcg", "rcp_ndcg"), *,
                     intervals: dict[str, pd.DataFrame] | None = None, interval_note: str | None = None,
                     k: int | None = None, n_queries: int | None = None) -> Path:
    """Grouped bars: each system's mean of each metric side by side (systems sorted by the last metric),
    with an error bar per bar when ``intervals`` (``{metric: DataFrame system -> lo, hi}``) has it.

    ``interval_note`` says what the bars are (e.g. "95% bootstrap interval over queries"); it is shown
    under the title. ``k`` (the cut-off) and ``n_queries`` label the axis (``mean nDCG@10 over 50 queries``).
    """
    plt = _plt()
    metrics = [m for m in metrics if m in board.columns]
    board = board.sort_values(metrics[-1], ascending=True)
    y = np.arange(len(board))
    h = 0.8 / max(1, len(metrics))
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(board) * max(1, len(metrics)) / 2 + 1.8))
    colors = {"qrel_ndcg": "tab:grey", "count_ndcg": "tab:orange", "rcp_ndcg": "tab:blue"}
    for i, m in enumerate(metrics):
        pos = y + (i - (len(metrics) - 1) / 2) * h
        values = board[m].to_numpy(dtype=np.float64)
        xerr = None
        if intervals and m in intervals:
            iv = intervals[m].reindex(board.index)
            lo, hi = iv["lo"].to_numpy(dtype=np.float64), iv["hi"].to_numpy(dtype=np.float64)
            xerr = np.vstack([np.clip(values - lo, 0, None), np.clip(hi - values, 0, None)])
            xerr = np.where(np.isfinite(xerr), xerr, 0.0)
        ax.barh(pos, values, height=h, color=colors.get(m), alpha=0.85, label=METRIC_LABELS.get(m, m),
                xerr=xerr, error_kw={"elinewidth": 1.1, "capsize": 2.5, "ecolor": "black"})
    ax.set_yticks(y, [str(s) for s in board.index])
    ax.set_xlim(0, 1)
    cut = f"nDCG@{int(k)}" if k else "nDCG"
    ax.set_xlabel(f"mean {cut} over {n_queries} queries" if n_queries else f"mean {cut} over queries")
    handles, labels = ax.get_legend_handles_labels()  # listed top to bottom as the bars are drawn
    ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="lower right", framealpha=0.9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Leaderboard" + (f"\n(error bars: {interval_note})" if interval_note and intervals else ""), fontsize=10)
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
    ax.set_xlabel(f"per-query {METRIC_LABELS.get(metric, metric)}")
    ax.set_title(f"Per-query {METRIC_LABELS.get(metric, metric)} of each system "
                 f"({per_query['query_id'].nunique()} queries; box = quartiles, line = median)", fontsize=10)
    ax.set_xlim(-0.02, 1.02)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def write_calibration_plots(calibration, folder) -> dict[str, Path]:
    """``item_curves.png`` (item characteristic curves and the gain curve) and ``query_calibration.png``
    (per-query tau and alpha) of a :class:`rcp_jax.Calibration` into ``folder``."""
    folder = Path(folder)
    out = {"item_curves": item_curves(calibration, folder / "item_curves.png")}
    if "tau" in calibration.queries.columns and calibration.queries["tau"].notna().any():
        out["query_calibration"] = query_calibration(calibration, folder / "query_calibration.png")
    return out


def write_evaluation_plots(per_query: pd.DataFrame, board: pd.DataFrame, folder, *,
                           intervals: dict[str, pd.DataFrame] | None = None,
                           interval_note: str | None = None, k: int | None = None) -> dict[str, Path]:
    """``leaderboard.png`` (with intervals: by default a 95% bootstrap over queries) and the per-query
    spread ``per_query_<metric>.png`` of RCP- and qrel-nDCG into ``folder``.

    ``k``: the cut-off the metrics were computed at (default: ``per_query.attrs["k"]``, which
    :func:`rcp_jax.evaluate` sets), shown on the leaderboard's axis.
    """
    folder = Path(folder)
    k = k if k is not None else per_query.attrs.get("k")
    if intervals is None:
        intervals = bootstrap_leaderboard(per_query)
        interval_note = "95% bootstrap interval over queries"
    keys = per_query[[c for c in ("dataset", "query_id") if c in per_query.columns]].drop_duplicates()
    out = {"leaderboard": leaderboard_bars(board, folder / "leaderboard.png", intervals=intervals,
                                           interval_note=interval_note, k=k, n_queries=len(keys))}
    for m in ("rcp_ndcg", "qrel_ndcg"):
        if m in per_query.columns and per_query[m].notna().any():
            out[f"distribution_{m}"] = ndcg_distribution(per_query, folder / f"per_query_{m}.png", m)
    return out


def write_report_plots(result, folder, *, k: int | None = None) -> dict[str, Path]:
    """All report figures of a :class:`rcp_jax.pipeline.PipelineResult` into ``folder`` (``k``: the nDCG
    cut-off, as :func:`write_evaluation_plots`)."""
    out = write_calibration_plots(result.calibration, folder)
    if result.per_query is not None:
        out.update(write_evaluation_plots(result.per_query, result.leaderboard, folder, k=k))
    return out


def meta_evaluation_scatter(means: pd.DataFrame, summary: pd.DataFrame, path, *,
                            reference: str = "qrel_ndcg", metric: str = "rcp_ndcg") -> Path:
    """Scatter of the system means, ``metric`` (y) against ``reference`` (x), one labelled point per system,
    the diagonal dashed; the title carries Kendall's tau and tau_AP of ``summary`` (a
    :attr:`rcp_jax.stats.MetaEvaluation.summary`). ``means`` has columns ``system, <reference>, <metric>``.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.6, 5.2))
    x = means[reference].to_numpy(dtype=np.float64)
    y = means[metric].to_numpy(dtype=np.float64)
    ax.scatter(x, y, color="tab:blue", zorder=3)
    for sx, sy, name in zip(x, y, means["system"]):
        ax.annotate(str(name), (sx, sy), textcoords="offset points", xytext=(4, 3), fontsize=8)
    ax.plot([0, 1], [0, 1], ls="--", lw=0.8, color="grey", zorder=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"mean {METRIC_LABELS.get(reference, reference)}")
    ax.set_ylabel(f"mean {METRIC_LABELS.get(metric, metric)}")
    row = summary.loc[summary["metric"] == metric]
    if len(row):
        r = row.iloc[0]
        fmt = lambda v: "n/a" if not np.isfinite(v) else f"{v:.3f}"  # noqa: E731
        ax.set_title(f"{len(means)} systems, {int(r['n_queries'])} queries: Kendall's tau {fmt(r['kendall_tau'])}, "
                     f"tau_AP {fmt(r['tau_ap'])}", fontsize=10)
    ax.grid(alpha=0.3)
    return _save(fig, path)

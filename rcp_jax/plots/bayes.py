"""Plots of Bayesian RCP results (matplotlib, backend independent: figures are built without pyplot).

* :func:`plot_pairwise_forest` - posterior of every system-pair difference of RCP-nDCG@k, with the
  calibration-only and the combined (calibration + query sampling) intervals and the ROPE band.
* :func:`plot_item_curves` - item characteristic curves ``P(yes | ability) = sigmoid(gamma_c (t -
  beta_c))`` of every criterion and the gain curve, each with a posterior band.

Both return a :class:`matplotlib.figure.Figure` and save it when ``path`` is given (PNG, PDF, SVG:
whatever the suffix says), so they run headless (Agg) and inside notebooks alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch


def _save(fig: Figure, path) -> Figure:
    if path is not None:
        fig.savefig(Path(path), bbox_inches="tight", dpi=150)
    return fig


_CALL_COLOUR = {"A>B": "tab:blue", "B>A": "tab:blue", "equivalent": "tab:green", "undecided": "0.45"}


def _call_label(row, rope: float) -> str:
    """Right-margin text of a pair: the probability the call rests on, then the call."""
    if row.call == "A>B":
        return f"P(A-B>{rope:g})={row.p_a_practically_better:.3f} A>B"
    if row.call == "B>A":
        return f"P(B-A>{rope:g})={row.p_b_practically_better:.3f} B>A"
    if row.call == "equivalent":
        return f"P(|A-B|<{rope:g})={row.p_rope:.3f} equivalent"
    return f"P(A>B)={row.p_a_better:.3f} undecided"


def plot_pairwise_forest(metrics, *, path=None, max_pairs: int | None = 40, title: str | None = None) -> Figure:
    """Forest plot of pairwise RCP-nDCG differences with the ROPE band.

    Args:
        metrics: :class:`rcp_jax.bayes.PosteriorMetrics`.
        path: where to save the figure (optional).
        max_pairs: show the pairs with the largest |delta| first, at most this many (None: all).
        title: heading above the legend (default names k and the interval probability; the ROPE is a key).

    Returns:
        The figure: one row per pair ``A - B``; thick bar = calibration interval, thin bar = combined
        interval, dot = posterior mean; shaded band = ROPE; colour = the pair's ``call`` column, the one
        decision rule of :func:`rcp_jax.bayes.posterior_ndcg.decide` (blue A>B or B>A, green practically
        equivalent, grey undecided); right margin: the probability behind the call and the call.
    """
    pairs = metrics.pairs.copy()
    pairs = pairs.reindex(pairs["delta"].abs().sort_values(ascending=False).index)
    if max_pairs is not None:
        pairs = pairs.head(max_pairs)
    pairs = pairs.iloc[::-1]
    n = len(pairs)
    fig = Figure(figsize=(7.5, 0.32 * n + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(n)
    ax.axvspan(-metrics.rope, metrics.rope, color="0.88", zorder=0)
    ax.axvline(0.0, color="0.5", lw=0.8, zorder=1)
    colour = [_CALL_COLOUR[c] for c in pairs["call"]]
    ax.hlines(y, pairs["lo"], pairs["hi"], colors=colour, lw=1.2, zorder=2)
    ax.hlines(y, pairs["cal_lo"], pairs["cal_hi"], colors=colour, lw=4.0, zorder=3)
    ax.scatter(pairs["delta"], y, c="black", s=12, zorder=4)
    ax.set_yticks(y, [f"{a} - {b}" for a, b in zip(pairs["system_a"], pairs["system_b"])], fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(f"difference of mean RCP-nDCG@{metrics.k}")
    for yi, row in enumerate(pairs.itertuples(index=False)):
        ax.annotate(_call_label(row, metrics.rope), xy=(1.01, yi), xycoords=("axes fraction", "data"), fontsize=7,
                    va="center")
    pct = round(100 * metrics.ci_prob)
    handles = [  # black keys for the bar widths, coloured keys for the decision
        Patch(color="0.88", label=f"ROPE |delta| < {metrics.rope:g}"),
        Line2D([], [], color="black", lw=4.0, label="calibration only"),
        Line2D([], [], color="black", lw=1.2, label="calibration + query sampling"),
        Line2D([], [], color=_CALL_COLOUR["A>B"], lw=2.5, label="called A>B or B>A"),
        Line2D([], [], color=_CALL_COLOUR["equivalent"], lw=2.5, label="practically equivalent"),
        Line2D([], [], color=_CALL_COLOUR["undecided"], lw=2.5, label="undecided"),
    ]
    # the title heads the legend block above the axes, so the two can never overlap
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=7, frameon=False,
              title=title or f"Pairwise differences of RCP-nDCG@{metrics.k}, {pct}% intervals",
              title_fontproperties={"size": 10})
    return _save(fig, path)


def plot_item_curves(posterior, *, path=None, grid: tuple[float, float] = (-6.0, 8.0), ci_prob: float | None = None,
                     n_points: int = 200, max_draws: int = 1000, labels=None) -> Figure:
    """Item characteristic curves and the gain curve with posterior bands.

    Args:
        posterior: :class:`rcp_jax.bayes.Posterior`.
        path: where to save the figure (optional).
        grid: range of calibrated ability on the x axis.
        ci_prob: band probability (default: the posterior's).
        n_points: grid points; max_draws: posterior draws used (evenly thinned).
        labels: criterion names for the legend (e.g. ``Calibration.labels``; default ``C1..CK``).

    Returns:
        The figure: left, ``P(yes)`` per criterion (median and equal-tailed band); right, the gain
        ``g(t)`` with its band and a rug of the calibrated documents' posterior-mean abilities.
    """
    ci = posterior.ci_prob if ci_prob is None else ci_prob
    post = posterior.idata.posterior
    gamma = post["gamma"].values.reshape(-1, post.sizes["criterion"])
    beta = post["beta"].values.reshape(-1, post.sizes["criterion"])
    if len(gamma) > max_draws:
        keep = np.linspace(0, len(gamma) - 1, max_draws).round().astype(np.int64)
        gamma, beta = gamma[keep], beta[keep]
    t = np.linspace(grid[0], grid[1], n_points)
    z = gamma[:, None, :] * (t[None, :, None] - beta[:, None, :])
    p = 0.5 * (1.0 + np.tanh(0.5 * z))  # [D, T, C]
    g = (gamma[:, None, :] * p).sum(-1) / gamma.sum(-1, keepdims=True)
    lo_q, hi_q = (1 - ci) / 2, 1 - (1 - ci) / 2
    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    names = list(labels) if labels is not None and len(labels) == len(posterior.criteria) else posterior.criteria
    for c, name in enumerate(names):
        lo, med, hi = np.quantile(p[:, :, c], [lo_q, 0.5, hi_q], axis=0)
        line = ax1.plot(t, med, lw=1.4, label=name)[0]
        ax1.fill_between(t, lo, hi, color=line.get_color(), alpha=0.25, lw=0)
    ax1.set_xlabel("calibrated ability")
    ax1.set_ylabel("P(criterion met)")
    ax1.set_title(f"Item characteristic curves ({round(100 * ci)}% bands)", fontsize=10)
    ax1.legend(fontsize=8, frameon=False)
    lo, med, hi = np.quantile(g, [lo_q, 0.5, hi_q], axis=0)
    ax2.plot(t, med, color="black", lw=1.4, label="gain g(t)")
    ax2.fill_between(t, lo, hi, color="0.6", alpha=0.4, lw=0)
    ab = posterior.documents["ability_mean"].to_numpy()
    ab = ab[(ab >= grid[0]) & (ab <= grid[1])]
    ax2.plot(ab, np.full(len(ab), -0.02), "|", color="tab:blue", alpha=0.3, ms=6, label="documents")
    ax2.set_ylim(-0.05, 1.02)
    ax2.set_xlabel("calibrated ability")
    ax2.set_ylabel("gain")
    ax2.set_title("RCP gain curve", fontsize=10)
    ax2.legend(fontsize=8, frameon=False, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


__all__ = ["plot_item_curves", "plot_pairwise_forest"]

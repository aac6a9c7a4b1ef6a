"""The budgeted-judging plot: system pairs decided against judge calls spent, per judging strategy.

:func:`plot_budget_curves` takes a long table with columns ``variant`` (``budgeted``, ``random``,
``fixed``), ``seed``, ``fraction`` (calls / the full protocol's calls) and ``decided`` (pairs decided),
optionally ``agree`` (share of pairs with the full protocol's call), as ``benchmarks/budgeted.py`` and
:meth:`rcp_jax.budget.BudgetResult.history` give it. Returns a :class:`matplotlib.figure.Figure` (built
without pyplot, so it runs headless) and saves it when ``path`` is given.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

_STYLE = {"budgeted": ("tab:blue", "o", "budgeted (posterior-guided)"),
          "random": ("tab:orange", "s", "random windows, same loop"),
          "fixed": ("0.2", "D", "fixed schedule (scaled)")}


def plot_budget_curves(curves: pd.DataFrame, *, path=None, title: str | None = None) -> Figure:
    """Pairs decided (and, when given, agreement with the full protocol) against the share of its calls.

    Each seed is one thin line; the mean over seeds (per round, or per fixed fraction) a thick one.
    """
    panels = ["decided"] + (["agree"] if "agree" in curves.columns else [])
    fig = Figure(figsize=(5.2 * len(panels), 4.0))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, column in zip(axes, panels):
        for variant, (colour, marker, label) in _STYLE.items():
            c = curves[curves["variant"] == variant]
            if c.empty:
                continue
            for _, g in c.groupby("seed"):
                g = g.sort_values("fraction")
                ax.plot(g["fraction"], g[column], color=colour, alpha=0.25, lw=0.8)
            if "round" in c.columns and c["round"].notna().all():
                mean = c.groupby("round").agg(fraction=("fraction", "mean"), value=(column, "mean"))
            else:
                mean = c.groupby("fraction")[column].mean().rename("value").reset_index()
            mean = mean.sort_values("fraction")
            ax.plot(mean["fraction"], mean["value"], color=colour, marker=marker, lw=2, ms=4, label=label)
        ax.set_xlabel("judge calls / the full protocol's calls")
        ax.set_ylabel("system pairs decided" if column == "decided" else "share of pairs with the full protocol's call")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path), bbox_inches="tight", dpi=150)
    return fig

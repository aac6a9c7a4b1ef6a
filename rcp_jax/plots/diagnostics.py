"""Reliability diagram of predicted rubric answers (or of gains read as probabilities).

Drawn on a bare :class:`matplotlib.figure.Figure` with the Agg canvas: no pyplot, no global backend
switch, safe in headless CI and inside other programs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rcp_jax.errors import DataError
from rcp_jax.stats.diagnostics import expected_calibration_error, reliability_table


def plot_reliability(
    predictions: Mapping[str, np.ndarray] | np.ndarray,
    observed,
    path: str | Path,
    *,
    n_bins: int = 10,
    title: str | None = None,
    dpi: int = 120,
) -> Path:
    """Save a reliability diagram: observed rate versus mean predicted probability per bin.

    Args:
        predictions: float[N] predicted P(yes), or name -> float[N] for several predictors of the same
            answers (e.g. ``{"sigmoid(raw BT)": p_raw, "2PL calibrated": p_cal}``).
        observed: {0,1}[N] observed answers.
        path: output file; the format follows the suffix (``.png``, ``.pdf``, ``.svg``).
        n_bins: equal-width bins.
        title: figure title.
        dpi: raster resolution.

    Returns:
        The path written. Each curve's legend shows its ECE; marker area grows with the bin count.

    Example:
        >>> import tempfile, os
        >>> p = np.linspace(0.01, 0.99, 200); y = (np.arange(200) % 2).astype(float)
        >>> out = plot_reliability({"model": p}, y, os.path.join(tempfile.mkdtemp(), "rel.png"))
        >>> out.suffix, out.stat().st_size > 0
        ('.png', True)
    """
    preds = {"predicted": predictions} if not isinstance(predictions, Mapping) else dict(predictions)
    if not preds:
        raise DataError("no predictions to plot")
    path = Path(path)
    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise DataError(f"reliability diagram {path}: use a .png, .pdf or .svg file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(4.6, 4.4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfect")
    for name, p in preds.items():
        table = reliability_table(p, observed, n_bins=n_bins)
        table = table[table["count"] > 0]
        ece = expected_calibration_error(p, observed, n_bins=n_bins)
        size = 12 + 140 * table["count"] / table["count"].max()
        line = ax.plot(table["mean_pred"], table["obs_rate"], marker="", linewidth=1.4,
                       label=f"{name} (ECE {ece:.3f})")[0]
        ax.scatter(table["mean_pred"], table["obs_rate"], s=size, color=line.get_color(), alpha=0.8, zorder=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean predicted probability")
    ax.set_ylabel("observed rate")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    return path

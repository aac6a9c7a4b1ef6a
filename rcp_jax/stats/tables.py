"""Render a table as Markdown or LaTeX (no dependency beyond pandas): the reports' and the CLI's tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError


def format_table(df: pd.DataFrame, fmt: str = "markdown", *, floatfmt: str = ".3f") -> str:
    """Render a DataFrame as a Markdown pipe table or a LaTeX ``tabular`` (no extra dependencies).

    Example:
        >>> print(format_table(pd.DataFrame({"metric": ["rcp"], "share": [0.635]})))
        | metric | share |
        |---|---|
        | rcp | 0.635 |
    """
    if fmt not in ("markdown", "latex"):
        raise DataError(f"unknown table format {fmt!r}; choose markdown or latex")

    def cell(v) -> str:
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else format(float(v), floatfmt)
        return str(v)

    header = [str(c) for c in df.columns]
    body = [[cell(v) for v in row] for row in df.itertuples(index=False)]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)

    def esc(s: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
            s = s.replace(a, b)
        return s

    lines = [r"\begin{tabular}{" + "l" * len(header) + "}", r"\hline",
             " & ".join(esc(h) for h in header) + r" \\", r"\hline"]
    lines += [" & ".join(esc(c) for c in r) + r" \\" for r in body]
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines)

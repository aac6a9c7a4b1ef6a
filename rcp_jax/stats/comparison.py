"""Reports of a system comparison in words and tables: the sensitivity sentence, Markdown and LaTeX tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError

if TYPE_CHECKING:
    from rcp_jax.system_pairs import Comparison


def sensitivity_report(comparison: Comparison, reference: str = "qrel_ndcg", candidate: str = "rcp_ndcg") -> str:
    """One line per dataset and the mean: pairs separated by ``candidate`` versus ``reference``.

    This is the check "RCP separates more pairs than qrels" in words, e.g.
    ``dl19: rcp_ndcg 60/91 (65.9%) vs qrel_ndcg 14/91 (15.4%), +46 pairs``.
    """
    for m in (reference, candidate):
        if m not in comparison.metrics:
            raise DataError(f"metric {m!r} was not compared (have: {', '.join(comparison.metrics)})")
    s = comparison.sensitivity.set_index(["metric", "dataset"])
    lines = []
    for ds in sorted(comparison.sensitivity.dataset.unique()):
        if (reference, ds) not in s.index or (candidate, ds) not in s.index:
            continue
        r, c = s.loc[(reference, ds)], s.loc[(candidate, ds)]
        lines.append(f"{ds}: {candidate} {int(c.n_separated)}/{int(c.n_pairs)} ({100 * c.share:.1f}%) vs "
                     f"{reference} {int(r.n_separated)}/{int(r.n_pairs)} ({100 * r.share:.1f}%), "
                     f"{int(c.n_separated) - int(r.n_separated):+d} pairs")
    summ = comparison.sensitivity_summary().set_index("metric")
    rs, cs = summ.loc[reference, "mean_share"], summ.loc[candidate, "mean_share"]
    lines.append(f"mean over datasets: {candidate} {100 * cs:.1f}% vs {reference} {100 * rs:.1f}% "
                 f"({'more' if cs > rs else 'not more'} pairs separated; alpha={comparison.alpha}, "
                 f"test={comparison.test}, correction={comparison.correction})")
    return "\n".join(lines)


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


def _report(c: Comparison, fmt: str, include_pairs: bool) -> str:
    head = (lambda s: f"## {s}") if fmt == "markdown" else (lambda s: f"% {s}")
    corr = "" if c.correction == "none" else f", {c.correction}-corrected"
    parts = [head(f"Pairs separated (test={c.test}, alpha={c.alpha}{corr})"), format_table(c.sensitivity_table(), fmt)]
    wide = c.systems.pivot(index="system", columns="metric", values="score")[list(c.metrics)]
    wide = wide.sort_values(c.metrics[0], ascending=False).reset_index()
    parts += [head("System scores (mean over datasets of per-dataset means)"), format_table(wide, fmt)]
    if len(c.agreement):
        parts += [head("Sign agreement on separated pairs"), format_table(c.agreement, fmt)]
    if len(c.kendall):
        parts += [head("Rank correlation of system orderings"), format_table(c.kendall, fmt)]
    if c.notes:
        bullet = "- " if fmt == "markdown" else "% "
        parts += [head("Queries left out (systems are compared on the queries they all have)"),
                  "\n".join(bullet + note for note in c.notes)]
    if include_pairs:
        cols = [col for col in ("metric", "dataset", "system_a", "system_b", "n_queries", "diff", "ci_low",
                                "ci_high", "p_t", "p_wilcoxon", "p_permutation", "p_holm", "separated")
                if col in c.pairs.columns]
        parts += [head("Pairs"), format_table(c.pairs[cols], fmt, floatfmt=".4g")]
    return "\n\n".join(parts) + "\n"

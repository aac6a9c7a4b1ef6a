"""The result of a system comparison and its reports: :class:`Comparison`, the sensitivity sentence, Markdown and LaTeX.

:func:`rcp_jax.stats.system_pairs.compare_systems` computes a :class:`Comparison`; this module holds the
object and renders it (tables through :func:`rcp_jax.stats.tables.format_table`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.stats.tables import format_table


@dataclass(frozen=True)
class Comparison:
    """Everything :func:`~rcp_jax.stats.system_pairs.compare_systems` computed; every table is tidy.

    Attributes:
        pairs: one row per (metric, dataset, system_a, system_b): ``n_queries, mean_a, mean_b, diff``
            (mean of a - b over common queries), ``ci_low, ci_high`` (bootstrap), ``ci_excludes_0`` (bool:
            the interval lies on one side of 0; ends and ``diff`` within rounding of zero count as 0, see
            :func:`rcp_jax.stats.paired.snap_to_zero`), ``t, p_t, p_wilcoxon,
            p_permutation`` (those computed), ``p`` (of the chosen test), ``p_holm, p_bonferroni`` (within
            the metric x dataset family), ``separated`` (bool).
        overall: one row per (metric, system_a, system_b): ``n_datasets, diff`` (mean over datasets of
            the per-dataset mean difference), ``ci_low, ci_high`` (queries resampled within dataset),
            ``ci_excludes_0``.
        sensitivity: one row per (metric, dataset): ``n_pairs, n_separated, share``.
        systems: aggregate score per (metric, system), see :func:`rcp_jax.per_query.system_scores`.
        kendall: Kendall tau-b between the system orderings of every two metrics.
        agreement: sign agreement on separated pairs for every (reference, other) metric pair, see
            :func:`~rcp_jax.stats.system_pairs.sign_agreement`.
        metrics, alpha, test, correction: the settings used.
        dropped: system/query cells without a value whose query was therefore left out for every system
            (``metric, dataset, system, query_id, reason``); see :func:`rcp_jax.per_query.pair_queries`.
        excluded: queries no system has a value on (``metric, dataset, query_id``), e.g. qrel-nDCG of a
            query without a positive qrel.
        notes: the same in sentences, as the reports print them.
    """

    pairs: pd.DataFrame
    overall: pd.DataFrame
    sensitivity: pd.DataFrame
    systems: pd.DataFrame
    kendall: pd.DataFrame
    agreement: pd.DataFrame
    metrics: tuple[str, ...]
    alpha: float
    test: str
    correction: str
    dropped: pd.DataFrame = field(default_factory=pd.DataFrame)
    excluded: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: tuple[str, ...] = ()

    def sensitivity_summary(self) -> pd.DataFrame:
        """Per metric: mean share of separated pairs over datasets, and the totals."""
        g = self.sensitivity.groupby("metric", sort=False)
        out = g.agg(mean_share=("share", "mean"), n_separated=("n_separated", "sum"),
                    n_pairs=("n_pairs", "sum"), n_datasets=("dataset", "size")).reset_index()
        return out

    def sensitivity_table(self) -> pd.DataFrame:
        """Metrics side by side: rows = datasets + ``mean``, cells ``"k/n (xx.x%)"``."""
        cells = {}
        for m in self.metrics:
            s = self.sensitivity[self.sensitivity.metric == m].set_index("dataset")
            col = {ds: f"{int(r.n_separated)}/{int(r.n_pairs)} ({100 * r.share:.1f}%)" for ds, r in s.iterrows()}
            col["mean"] = f"{100 * s.share.mean():.1f}%" if len(s) else ""
            cells[m] = col
        datasets = sorted(self.sensitivity.dataset.unique())
        table = pd.DataFrame(cells).reindex(datasets + ["mean"]).fillna("")
        table.index.name = "dataset"
        return table.reset_index()

    def to_markdown(self, *, include_pairs: bool = False) -> str:
        """Markdown report: sensitivity side by side, system scores, sign agreement, Kendall tau."""
        return _report(self, "markdown", include_pairs)

    def to_latex(self, *, include_pairs: bool = False) -> str:
        """The same report as LaTeX ``tabular`` environments."""
        return _report(self, "latex", include_pairs)



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

"""Statistics over per-query tables: comparing systems, robustness, calibration diagnostics (METHOD section 5).

Input is a tidy **per-query table**, one row per (system, query): columns ``system``, ``query_id``,
optionally ``dataset`` (default: one dataset named ``all``) and one column per metric (e.g.
``qrel_ndcg``, ``count_ndcg``, ``rcp_ndcg``; NaN = not scored, e.g. qrel-nDCG of a query without a
positive qrel). Query ids are only unique within a dataset.

For each metric, dataset and pair of systems :func:`compare_systems` reports the mean difference over
the queries every system has (queries some systems lack are dropped for all and reported, see
:func:`rcp_jax.per_query.pair_queries`), a paired t-test (scipy ``ttest_rel``), a Wilcoxon signed-rank
test (exact and tie-aware up to 100 non-zero differences), a randomisation test (JAX, all pairs at
once), a percentile bootstrap interval, Holm and Bonferroni adjusted p-values, and whether the pair is *separated*. Sensitivity is the share of pairs separated in
each dataset, then the unweighted mean over datasets (the paper's "pairs distinguished"). The array-level
tests live in :mod:`rcp_jax.stats.paired`.

Where things live: the per-query table itself (columns, pairing of queries) in :mod:`rcp_jax.per_query`;
here, the array-level paired tests in :mod:`rcp_jax.stats.paired`, the pairwise comparison in
:mod:`rcp_jax.stats.system_pairs`, its result and reports in :mod:`rcp_jax.stats.comparison`, Markdown and
LaTeX tables in :mod:`rcp_jax.stats.tables`, robustness to the rubric or judge in
:mod:`rcp_jax.stats.variant_agreement`, whether a metric ranks systems as qrel-nDCG does (Kendall's tau,
tau_AP, agreement on significant pairs) in :mod:`rcp_jax.stats.meta_evaluation`, and the diagnostics of a calibration (undistinguishable queries,
ECE, local dependence, tau spread, item transfer) in :mod:`rcp_jax.stats.diagnostics`.
"""

from rcp_jax.stats.comparison import Comparison, sensitivity_report
from rcp_jax.stats.diagnostics import (
    brier_score,
    calibration_report,
    expected_calibration_error,
    fit_report,
    item_transfer,
    local_dependence,
    reliability_table,
    tau_spread,
    undistinguishable_queries,
    undistinguishable_summary,
)
from rcp_jax.stats.meta_evaluation import MetaEvaluation, meta_evaluate, tau_ap
from rcp_jax.stats.paired import (
    CORRECTIONS,
    adjust_pvalues,
    bootstrap_mean_ci,
    kendall_tau_b,
    paired_t_test,
    randomisation_test,
    spearman_rho,
    wilcoxon_signed_rank,
)
from rcp_jax.stats.system_pairs import TESTS, compare_systems, sign_agreement
from rcp_jax.stats.tables import format_table
from rcp_jax.stats.variant_agreement import gain_rank_correlation, robustness

__all__ = [
    # comparing systems
    "TESTS",
    "Comparison",
    "compare_systems",
    "sign_agreement",
    "sensitivity_report",
    "format_table",
    "robustness",
    "gain_rank_correlation",
    # ranking systems as the human labels do
    "meta_evaluate",
    "MetaEvaluation",
    "tau_ap",
    # paired tests on arrays of differences
    "CORRECTIONS",
    "paired_t_test",
    "wilcoxon_signed_rank",
    "randomisation_test",
    "bootstrap_mean_ci",
    "adjust_pvalues",
    "kendall_tau_b",
    "spearman_rho",
    # diagnostics
    "undistinguishable_queries",
    "undistinguishable_summary",
    "reliability_table",
    "expected_calibration_error",
    "brier_score",
    "calibration_report",
    "local_dependence",
    "tau_spread",
    "item_transfer",
    "fit_report",
]

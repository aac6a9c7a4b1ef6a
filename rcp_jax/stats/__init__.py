"""Comparing systems: pairwise significance, sensitivity, agreement between metrics (METHOD section 5).

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
tests live in :mod:`rcp_jax.paired`.

Where things live (this module is the import point and re-exports them): per-query tables in
:mod:`rcp_jax.per_query`, the pairwise comparison in :mod:`rcp_jax.system_pairs`, robustness to the
rubric or judge in :mod:`rcp_jax.variant_agreement`, reports and tables in :mod:`rcp_jax.compare_report`.
"""

from __future__ import annotations

from rcp_jax.compare_report import format_table, sensitivity_report
from rcp_jax.per_query import (
    DEFAULT_METRICS,
    ID_COLUMNS,
    SINGLE_DATASET,
    metric_columns,
    prepare_per_query,
    score_matrix,
    system_scores,
)
from rcp_jax.system_pairs import TESTS, Comparison, compare_systems, sign_agreement
from rcp_jax.variant_agreement import gain_rank_correlation, robustness

__all__ = [
    "DEFAULT_METRICS",
    "ID_COLUMNS",
    "SINGLE_DATASET",
    "TESTS",
    "metric_columns",
    "prepare_per_query",
    "score_matrix",
    "system_scores",
    "Comparison",
    "compare_systems",
    "sign_agreement",
    "sensitivity_report",
    "robustness",
    "gain_rank_correlation",
    "format_table",
]

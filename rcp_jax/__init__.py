"""rcp-jax: Rubric-Calibrated Preferences in JAX.

The public API. Everything not listed in ``__all__`` is private and may change.

Typical use::

    import rcp_jax
    bt = rcp_jax.fit_bradley_terry(window_scores)   # query_id, window_id, doc_id, score
    cal = rcp_jax.calibrate(bt, answers)             # query_id, doc_id, C1..C5 (one row per placement)
    per_query = rcp_jax.evaluate(run, cal, qrels=qrels, k=10)
    rcp_jax.leaderboard(per_query)
    rcp_jax.compare_systems(per_query).sensitivity_table()
"""

__version__ = "0.1.0"

from rcp_jax import data, schedule
from rcp_jax.calibration import Calibration, calibrate, fit_rubric_only, load_calibration, save_calibration
from rcp_jax.compare import Comparison, compare_systems, gain_rank_correlation, robustness, sensitivity_report
from rcp_jax.data import check_run_against_pools, read_beir, read_pools, read_qrels, read_rows, read_run
from rcp_jax.diagnostics import (
    brier_score,
    calibration_report,
    expected_calibration_error,
    item_transfer,
    local_dependence,
    tau_spread,
    undistinguishable_queries,
    undistinguishable_summary,
)
from rcp_jax.errors import CalibrationError, DataError, RcpError
from rcp_jax.evaluation import evaluate, leaderboard
from rcp_jax.list_compare import ListComparison, compare_ideal_lists, compare_ideal_lists_sync, ideal_lists
from rcp_jax.human import ContestSet, contest_verdicts, head_to_head, human_agreement_report, load_contests
from rcp_jax.metrics import PROTOCOLS, Protocol, QueryScore, gain, score_query
from rcp_jax.posterior import Posterior, fit_posterior, load_posterior, save_posterior
from rcp_jax.posterior_metrics import PosteriorMetrics, format_posterior_table, posterior_metrics
from rcp_jax.schedule import ScheduleConfig, schedule_counts
from rcp_jax.tournament import fit_bradley_terry

__all__ = [
    "__version__",
    # errors
    "RcpError", "DataError", "CalibrationError",
    # gains and metrics
    "gain", "score_query", "Protocol", "PROTOCOLS", "QueryScore", "evaluate", "leaderboard",
    # fits
    "fit_bradley_terry", "calibrate", "fit_rubric_only", "Calibration", "save_calibration", "load_calibration",
    # data and schedules
    "data", "schedule", "read_run", "read_qrels", "read_pools", "read_beir", "read_rows",
    "check_run_against_pools", "ScheduleConfig", "schedule_counts",
    # statistics
    "compare_systems", "Comparison", "sensitivity_report", "robustness", "gain_rank_correlation",
    "undistinguishable_queries", "undistinguishable_summary", "expected_calibration_error", "brier_score",
    "calibration_report", "local_dependence", "item_transfer", "tau_spread",
    "ListComparison", "compare_ideal_lists", "compare_ideal_lists_sync", "ideal_lists",
    # Bayesian
    "fit_posterior", "Posterior", "posterior_metrics", "PosteriorMetrics", "format_posterior_table",
    "save_posterior", "load_posterior",
    # agreement with humans
    "load_contests", "ContestSet", "contest_verdicts", "head_to_head", "human_agreement_report",
]

"""rcp-jax: Rubric-Calibrated Preferences in JAX.

The public API. Everything not listed in ``__all__`` is private and may change.

Typical use::

    import rcp_jax
    bt = rcp_jax.fit_bradley_terry(window_scores)   # query_id, window_id, doc_id, score
    cal = rcp_jax.calibrate(bt, answers)             # query_id, doc_id, C1..C5 (one row per placement)
    per_query = rcp_jax.evaluate(run, cal, qrels=qrels, k=10)
    rcp_jax.leaderboard(per_query)
    rcp_jax.compare_systems(per_query).sensitivity_table()

Importing the package is cheap: the public names are resolved on first use (PEP 562), so
``import rcp_jax`` and ``rcp-jax --help`` do not pay for JAX, pandas and SciPy until a name needs them.
``from rcp_jax import X``, ``rcp_jax.X``, ``dir(rcp_jax)`` and ``from rcp_jax import *`` work as usual.
Each name comes from the subpackage or module that holds its concern; ARCHITECTURE.md maps them.
"""

import importlib as _importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> the module or subpackage of ``rcp_jax`` that names it (see ARCHITECTURE.md)
_EXPORTS: dict[str, str] = {
    # errors
    "RcpError": "errors", "DataError": "errors", "CalibrationError": "errors",
    # gains and metrics
    "gain": "metrics", "score_query": "metrics", "Protocol": "metrics", "PROTOCOLS": "metrics",
    "QueryScore": "metrics", "evaluate": "evaluation", "leaderboard": "evaluation",
    "hole_table": "evaluation", "HoleError": "evaluation",
    # fits
    "fit_bradley_terry": "tournament", "calibrate": "calibration", "fit_rubric_only": "calibration",
    "Calibration": "calibration", "save_calibration": "calibration", "load_calibration": "calibration",
    # data and schedules
    "data": "data", "schedule": "schedule", "read_run": "data", "read_qrels": "data", "read_pools": "data",
    "read_beir": "data", "read_rows": "data", "load_collection": "data", "check_run_against_pools": "data",
    "ScheduleConfig": "schedule", "schedule_counts": "schedule", "store_tables": "pipeline",
    # budgeted judging
    "judge_budgeted": "budget", "BudgetSettings": "budget", "BudgetResult": "budget",
    # extending a judged pool with a new reranker
    "extend": "extension", "ExtensionResult": "extension", "read_extension_log": "extension",
    # statistics
    "compare_systems": "stats", "Comparison": "stats", "sensitivity_report": "stats",
    "robustness": "stats", "gain_rank_correlation": "stats",
    "undistinguishable_queries": "stats", "undistinguishable_summary": "stats",
    "expected_calibration_error": "stats", "brier_score": "stats",
    "calibration_report": "stats", "local_dependence": "stats", "item_transfer": "stats",
    "tau_spread": "stats",
    "meta_evaluate": "stats", "MetaEvaluation": "stats", "tau_ap": "stats",
    "ListComparison": "list_compare", "compare_ideal_lists": "list_compare",
    "compare_ideal_lists_sync": "list_compare", "ideal_lists": "list_compare",
    # Bayesian
    "fit_posterior": "bayes", "Posterior": "bayes", "save_posterior": "bayes",
    "load_posterior": "bayes",
    "posterior_metrics": "bayes", "PosteriorMetrics": "bayes",
    "format_posterior_table": "bayes",
    # agreement with humans
    "load_contests": "human", "ContestSet": "human", "contest_verdicts": "human", "head_to_head": "human",
    "human_agreement_report": "human",
    # human-anchored comparisons (prediction-powered inference)
    "anchored_comparison": "anchored", "AnchoredComparison": "anchored", "plan_labels": "anchored",
    "anchored_mean": "anchored",
}

#: public names that are subpackages themselves
_MODULE_EXPORTS = frozenset({"data", "schedule"})

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    """Resolve a public name on first use and cache it in the module namespace."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod = _importlib.import_module(f"{__name__}.{module}")
    value = mod if name in _MODULE_EXPORTS else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from rcp_jax import data, schedule
    from rcp_jax.anchored import AnchoredComparison, anchored_comparison, anchored_mean, plan_labels
    from rcp_jax.bayes import (
        Posterior,
        PosteriorMetrics,
        fit_posterior,
        format_posterior_table,
        load_posterior,
        posterior_metrics,
        save_posterior,
    )
    from rcp_jax.budget import BudgetResult, BudgetSettings, judge_budgeted
    from rcp_jax.calibration import Calibration, calibrate, fit_rubric_only, load_calibration, save_calibration
    from rcp_jax.data import check_run_against_pools, load_collection, read_beir, read_pools, read_qrels, read_rows, read_run
    from rcp_jax.errors import CalibrationError, DataError, RcpError
    from rcp_jax.evaluation import HoleError, evaluate, hole_table, leaderboard
    from rcp_jax.extension import ExtensionResult, extend, read_extension_log
    from rcp_jax.human import ContestSet, contest_verdicts, head_to_head, human_agreement_report, load_contests
    from rcp_jax.list_compare import ListComparison, compare_ideal_lists, compare_ideal_lists_sync, ideal_lists
    from rcp_jax.metrics import PROTOCOLS, Protocol, QueryScore, gain, score_query
    from rcp_jax.pipeline import store_tables
    from rcp_jax.schedule import ScheduleConfig, schedule_counts
    from rcp_jax.stats import (
        Comparison,
        MetaEvaluation,
        brier_score,
        calibration_report,
        compare_systems,
        expected_calibration_error,
        gain_rank_correlation,
        item_transfer,
        local_dependence,
        meta_evaluate,
        robustness,
        sensitivity_report,
        tau_ap,
        tau_spread,
        undistinguishable_queries,
        undistinguishable_summary,
    )
    from rcp_jax.tournament import fit_bradley_terry

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
"""

import importlib as _importlib
import sys as _sys
import types as _types
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> the submodule of ``rcp_jax`` defining it
_EXPORTS: dict[str, str] = {
    # errors
    "RcpError": "errors", "DataError": "errors", "CalibrationError": "errors",
    # gains and metrics
    "gain": "metrics", "score_query": "metrics", "Protocol": "metrics", "PROTOCOLS": "metrics",
    "QueryScore": "metrics", "evaluate": "evaluation", "leaderboard": "evaluation",
    # fits
    "fit_bradley_terry": "tournament", "calibrate": "calibration", "fit_rubric_only": "calibration",
    "Calibration": "calibration", "save_calibration": "calibration", "load_calibration": "calibration",
    # data and schedules
    "data": "data", "schedule": "schedule", "read_run": "data", "read_qrels": "data", "read_pools": "data",
    "read_beir": "data", "read_rows": "data", "check_run_against_pools": "data",
    "ScheduleConfig": "schedule", "schedule_counts": "schedule", "store_tables": "pipeline",
    # statistics
    "compare_systems": "compare", "Comparison": "compare", "sensitivity_report": "compare",
    "robustness": "compare", "gain_rank_correlation": "compare",
    "undistinguishable_queries": "diagnostics", "undistinguishable_summary": "diagnostics",
    "expected_calibration_error": "diagnostics", "brier_score": "diagnostics",
    "calibration_report": "diagnostics", "local_dependence": "diagnostics", "item_transfer": "diagnostics",
    "tau_spread": "diagnostics",
    "ListComparison": "list_compare", "compare_ideal_lists": "list_compare",
    "compare_ideal_lists_sync": "list_compare", "ideal_lists": "list_compare",
    # Bayesian
    "fit_posterior": "posterior", "Posterior": "posterior", "save_posterior": "posterior",
    "load_posterior": "posterior",
    "posterior_metrics": "posterior_metrics", "PosteriorMetrics": "posterior_metrics",
    "format_posterior_table": "posterior_metrics",
    # agreement with humans
    "load_contests": "human", "ContestSet": "human", "contest_verdicts": "human", "head_to_head": "human",
    "human_agreement_report": "human",
}

#: public names that are submodules themselves
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


class _Package(_types.ModuleType):
    """``rcp_jax`` itself: keeps a public function from being shadowed by its submodule of the same name.

    Importing a submodule binds it on the package (``rcp_jax.posterior_metrics`` = the module), which
    would hide the public function ``posterior_metrics`` once that module was imported before the name
    was first used. Such a binding is skipped, so the name resolves to the function, as with an eager import.
    """

    def __setattr__(self, name, value):
        if (isinstance(value, _types.ModuleType) and _EXPORTS.get(name) == name and name not in _MODULE_EXPORTS
                and value.__name__ == f"{__name__}.{name}"):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
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
    from rcp_jax.human import ContestSet, contest_verdicts, head_to_head, human_agreement_report, load_contests
    from rcp_jax.list_compare import ListComparison, compare_ideal_lists, compare_ideal_lists_sync, ideal_lists
    from rcp_jax.metrics import PROTOCOLS, Protocol, QueryScore, gain, score_query
    from rcp_jax.pipeline import store_tables
    from rcp_jax.posterior import Posterior, fit_posterior, load_posterior, save_posterior
    from rcp_jax.posterior_metrics import PosteriorMetrics, format_posterior_table, posterior_metrics
    from rcp_jax.schedule import ScheduleConfig, schedule_counts
    from rcp_jax.tournament import fit_bradley_terry

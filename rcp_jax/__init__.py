"""rcp-jax: Rubric-Calibrated Preferences in JAX.

The public API. Everything not listed in ``__all__`` is private and may change.

Typical use::

    import rcp_jax
    bt = rcp_jax.fit_bradley_terry(window_scores)   # query_id, window_id, doc_id, score
    cal = rcp_jax.calibrate(bt, answers)             # query_id, doc_id, C1..C5 (one row per placement)
    per_query = rcp_jax.evaluate(run, cal, qrels=qrels, k=10)
    rcp_jax.leaderboard(per_query)
"""

__version__ = "0.1.0"

from rcp_jax.calibration import Calibration, calibrate, fit_rubric_only, load_calibration, save_calibration
from rcp_jax.errors import CalibrationError, DataError, RcpError
from rcp_jax.evaluation import evaluate, leaderboard
from rcp_jax.metrics import PROTOCOLS, Protocol, QueryScore, gain, score_query
from rcp_jax.tournament import fit_bradley_terry
from rcp_jax import schedule  # noqa: E402  (public submodule)

__all__ = [
    "__version__",
    "RcpError",
    "DataError",
    "CalibrationError",
    "gain",
    "score_query",
    "Protocol",
    "PROTOCOLS",
    "QueryScore",
    "fit_bradley_terry",
    "calibrate",
    "fit_rubric_only",
    "Calibration",
    "save_calibration",
    "load_calibration",
    "evaluate",
    "leaderboard",
]

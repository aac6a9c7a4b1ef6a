"""rcp-jax: Rubric-Calibrated Preferences in JAX.

The public API. Everything not listed in ``__all__`` is private and may change.
"""

__version__ = "0.1.0"

from rcp_jax.errors import CalibrationError, DataError, RcpError
from rcp_jax.metrics import PROTOCOLS, Protocol, QueryScore, gain, score_query

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
]

"""Domain errors raised by rcp-jax.

Every message names what is wrong (file, line, query id, document id) and what to do about it, so a
user never has to read a traceback from deep inside JAX to find the cause.
"""

from __future__ import annotations


class RcpError(Exception):
    """Base class of every error rcp-jax raises on purpose."""


class DataError(RcpError, ValueError):
    """Input data (a file, a DataFrame, a mapping) is malformed or inconsistent."""


class CalibrationError(RcpError, ValueError):
    """A calibration cannot be fitted or used as asked (missing answers, mismatched ids, ...)."""

"""The rule for negative qrel grades: they count as non-relevant (gain 0), with one warning per table.

Some collections grade below zero (ClueWeb's ``-2`` marks spam, some TREC tracks use ``-1`` for "junk").
trec_eval (and so pytrec_eval) treats a document graded ``<= 0`` as non-relevant in nDCG: it adds no gain
to a ranking and is left out of the ideal list, so a negative grade scores exactly as a ``0``. rcp-jax
follows that rule rather than refusing such qrels: every grade below zero is raised to 0 before any gain
is computed (also before ``2**grade - 1`` of exponential gains, which would otherwise be negative), and
one :class:`QrelsWarning` says which table, how many rows and the first of them. Without the rule a
negative grade subtracts gain, and a qrel-nDCG of -0.69 came out where trec_eval reports 0.32.
"""

from __future__ import annotations

import warnings

import numpy as np

RULE = "negative grades count as non-relevant (gain 0), as in trec_eval"


class QrelsWarning(UserWarning):
    """Qrels were read with a documented adjustment (negative grades raised to 0)."""


def clip_negative_grades(grade: np.ndarray, source: str, first: str = "", *, stacklevel: int = 3) -> np.ndarray:
    """``grade`` (float64[n]) with values below 0 replaced by 0; warns once when any was.

    Args:
        grade: float64[n] qrel grades.
        source: the table's name in the warning (a file path, or "qrels").
        first: optional description of the first negative row (e.g. ``"line 4: document 'd1' of query
            'q1', grade -2"``).
        stacklevel: forwarded to :func:`warnings.warn`.

    Returns:
        float64[n], a copy when any grade was negative, else ``grade`` itself.
    """
    grade = np.asarray(grade, dtype=np.float64)
    negative = grade < 0
    n = int(negative.sum())
    if n == 0:
        return grade
    where = f" (first at {first})" if first else ""
    warnings.warn(
        f"{source}: {n} qrel row{'' if n == 1 else 's'} with a negative grade{where}; {RULE}",
        QrelsWarning,
        stacklevel=stacklevel,
    )
    return np.where(negative, 0.0, grade)

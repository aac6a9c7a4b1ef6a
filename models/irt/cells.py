"""Rubric answers laid out for the compiled 2PL calibration: padded binomial cells, criterion-major.

Queries are padded to few distinct counts (:func:`_query_slots`) and cells per criterion to few distinct
sizes (:func:`_cell_slots`), so refits of other collections reuse the compiled solver; padding carries no
answers (trials 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class CalibrationCells:
    """Rubric answers of many queries as padded binomial cells.

    Attributes:
        theta: float[Q, M] frozen BT score of the cell's document.
        criterion: int[Q, M] criterion index in ``[0, C)``.
        passes: float[Q, M] number of "yes" answers.
        trials: float[Q, M] number of answers (0 marks padding).
        n_criteria: C.
    """

    theta: np.ndarray
    criterion: np.ndarray
    passes: np.ndarray
    trials: np.ndarray
    n_criteria: int


@dataclass(frozen=True)
class CriterionMajorCells:
    """Rubric answers already laid out for the compiled 2PL solve (:func:`criterion_major_cells`).

    Attributes:
        theta, passes, trials: float[Q_pad, C, K_pad] in the fit's dtype: cell ``k`` of criterion ``c`` of query
            ``j`` at ``[j, c, k]``, as :func:`_criterion_major` lays out :class:`CalibrationCells` (queries
            beyond ``n_queries`` and cells beyond a query's documents are padding with trials 0). ``theta`` and
            ``trials`` may be float[Q_pad, 1, K_pad]: the same for every criterion (read once per cell by the
            compiled solve).
        n_queries: Q, the real queries (the first rows).
        n_criteria: C.
    """

    theta: np.ndarray
    passes: np.ndarray
    trials: np.ndarray
    n_queries: int
    n_criteria: int


def calibration_cells(theta: np.ndarray, passes: np.ndarray, trials: np.ndarray) -> CalibrationCells:
    """Binomial cells of the 2PL calibration from per-document counts.

    Args:
        theta: float[Q, N] frozen BT scores.
        passes, trials: float[Q, N, C] (:func:`~rcp_jax.models.irt.items.collapse_placements`).

    Returns:
        :class:`CalibrationCells` with M = N x C cells per query (documents without answers have
        trials 0 and drop out of the likelihood); ``criterion`` is a read-only view of one row.
    """
    q, n, c = passes.shape
    th = np.broadcast_to(np.asarray(theta, dtype=np.float64)[:, :, None], (q, n, c)).reshape(q, n * c)
    crit = np.broadcast_to(np.tile(np.arange(c), n)[None, :], (q, n * c))  # one row, read-only view
    return CalibrationCells(
        theta=np.ascontiguousarray(th), criterion=crit,
        passes=passes.reshape(q, n * c), trials=trials.reshape(q, n * c), n_criteria=c,
    )


#: Fewest queries and cells per criterion of a compiled 2PL calibration
#: (:func:`~rcp_jax.models.irt.calibration_fit.fit_2pl_calibration`): the padding of a small fit costs little, and refits of
#: other small collections reuse one program.
MIN_CAL_QUERIES = 64
MIN_CAL_CELLS = 64


def _cell_slots(k: int) -> int:
    """Cells per criterion of a compiled calibration: at least :data:`MIN_CAL_CELLS`, above it ``k`` rounded
    up to 1, 1.25, 1.5 or 1.75 times a power of two (at most 25% padding, few distinct shapes)."""
    if k <= MIN_CAL_CELLS:
        return MIN_CAL_CELLS
    top = 1 << (int(k).bit_length() - 1)
    return next(m for m in (top, top * 5 // 4, top * 3 // 2, top * 7 // 4, 2 * top) if m >= k)


#: From this many queries on, a 2PL calibration pads its query axis as it pads cells (:func:`_cell_slots`:
#: 1, 1.25, 1.5 or 1.75 times a power of two) instead of to the next power of two: 10,000 queries run as
#: 10,240, not 16,384. Smaller fits keep the coarse power-of-two shapes (no more compiled programs).
FINE_QUERY_SLOTS = 4096


def _query_slots(q: int, n_damp: int, n_dev: int) -> int:
    """Padded query count of a compiled calibration, a multiple of the device count ``n_dev``: ``n_damp``
    (the power of two >= q), at least :data:`MIN_CAL_QUERIES`, below :data:`FINE_QUERY_SLOTS` queries,
    else :func:`_cell_slots` of ``q``. Padding queries carry no answers."""
    slots = max(n_damp, MIN_CAL_QUERIES) if q < FINE_QUERY_SLOTS else _cell_slots(q)
    return -(-slots // n_dev) * n_dev


def _damping_queries(q: int, n_dev: int) -> int:
    """The query count the damping of the per-query blocks divides by: the power of two >= ``q`` (at least
    the device count), a multiple of ``n_dev``."""
    n_damp = max(n_dev, 1 << max(0, int(q - 1).bit_length()))
    return -(-n_damp // n_dev) * n_dev


def _criterion_major(
    cells: CalibrationCells, q_pad: int, k_multiple: int = 16, *, bucket: bool = False, dtype=np.float64
):
    """Rearrange cells to ``dtype[q_pad, C, K]`` (theta, passes, trials), K padded to ``k_multiple``
    (or to :func:`_cell_slots` with ``bucket``).

    Cells of criterion c of query j fill ``[j, c, :count]`` in their original order; padding has
    trials 0. The layout of :func:`calibration_cells` (criterion = cell index mod C) is a reshape. The
    values are written straight into the padded ``dtype`` arrays (rounded once from float64, as a cast of
    the float64 layout would round them).
    """
    q, m = cells.theta.shape
    c = cells.n_criteria
    crit = np.asarray(cells.criterion)
    fields = [np.asarray(x, dtype=np.float64) for x in (cells.theta, cells.passes, cells.trials)]
    if crit.ndim == 2 and crit.shape[0] > 1 and crit.strides[0] == 0:  # one row for every query (a view)
        crit = crit[:1]
    if m % c == 0 and np.array_equal(crit, np.broadcast_to(np.arange(m) % c, crit.shape)):
        k = m // c
        moved = [x.reshape(q, k, c).transpose(0, 2, 1) for x in fields]
    else:
        counts = np.stack([(crit == j).sum(axis=1) for j in range(c)], axis=1)  # [Q, C]
        k = int(counts.max()) if counts.size else 0
        order = np.argsort(crit, axis=1, kind="stable")
        crit_sorted = np.take_along_axis(crit, order, axis=1)
        start = np.concatenate([np.zeros((q, 1), np.int64), np.cumsum(counts, axis=1)[:, :-1]], axis=1)
        pos = np.arange(m)[None, :] - np.take_along_axis(start, crit_sorted, axis=1)
        rows = np.broadcast_to(np.arange(q)[:, None], (q, m))
        moved = []
        for x in fields:
            y = np.zeros((q, c, k))
            y[rows, crit_sorted, pos] = np.take_along_axis(x, order, axis=1)
            moved.append(y)
    k_pad = _cell_slots(k) if bucket else max(k_multiple, -(-k // k_multiple) * k_multiple)
    out = []
    for y in moved:
        z = np.zeros((q_pad, c, k_pad), dtype=dtype)
        z[:q, :, :k] = y
        out.append(z)
    return out


def criterion_major_cells(
    query: np.ndarray, slot: np.ndarray, theta: np.ndarray, passes: np.ndarray, trials: np.ndarray, n_queries: int,
    *, dtype=jnp.float32, devices=None,
) -> CriterionMajorCells:
    """The criterion-major layout of :func:`~rcp_jax.models.irt.calibration_fit.fit_2pl_calibration` straight from
    per-document counts.

    Args:
        query: int[n] query index of each document in ``[0, n_queries)``; slot: int[n] its position among the
            query's documents (``[0, N)``, each (query, slot) once).
        theta: float[n] frozen BT scores; passes: float[n, C] "yes" answers; trials: float[n] answers per
            criterion (placements).
        n_queries: Q.
        dtype, devices: as the fit will be called with (they fix the padded shape and the dtype).

    Returns:
        :class:`CriterionMajorCells`: ``passes`` float[Q_pad, C, K_pad] and ``theta``, ``trials`` float[Q_pad, 1,
        K_pad] (one row for all criteria); broadcast over C they are the arrays (bit for bit) that
        :func:`_criterion_major` makes of ``calibration_cells`` of the dense ``[Q, N]`` / ``[Q, N, C]`` counts,
        without those float64 arrays: each value is rounded once, from float64 to ``dtype``, as there.
    """
    c = passes.shape[1]
    devs = tuple(jax.devices() if devices is None else devices)
    q_pad = _query_slots(n_queries, _damping_queries(n_queries, len(devs)), len(devs))
    n = int(slot.max()) + 1 if len(slot) else 0
    k_pad = _cell_slots(n)
    np_dtype = np.dtype(dtype)
    cell = np.asarray(query, dtype=np.int64) * k_pad + np.asarray(slot, dtype=np.int64)
    th, tr = np.zeros((q_pad, 1, k_pad), dtype=np_dtype), np.zeros((q_pad, 1, k_pad), dtype=np_dtype)
    th.reshape(-1)[cell] = np.asarray(theta, dtype=np.float64)
    tr.reshape(-1)[cell] = np.asarray(trials, dtype=np.float64)
    # a document-major scatter (a row's C values side by side), then one transposing copy: several times faster
    # than scattering straight into [Q_pad, C, K_pad] (C writes K_pad apart per row)
    by_doc = np.zeros((q_pad * k_pad, c), dtype=np_dtype)
    by_doc[cell] = np.asarray(passes, dtype=np.float64)
    ps = np.ascontiguousarray(by_doc.reshape(q_pad, k_pad, c).transpose(0, 2, 1))
    return CriterionMajorCells(theta=th, passes=ps, trials=tr, n_queries=int(n_queries), n_criteria=c)


def _padded_queries(x: np.ndarray, q_pad: int, dtype) -> np.ndarray:
    """``x`` float[Q', C, K] with ``q_pad`` rows (zeros added or trailing padding rows dropped) in ``dtype``;
    ``x`` itself when it has them already."""
    if x.shape[0] == q_pad and x.dtype == dtype:
        return x
    out = np.zeros((q_pad, *x.shape[1:]), dtype=dtype)
    rows = min(q_pad, x.shape[0])
    out[:rows] = x[:rows]
    return out

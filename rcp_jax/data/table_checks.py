"""Checks of table columns and cells that name the offending file, line and id in every error.

The tables come from :mod:`rcp_jax.data.formats` (index = source line, ``attrs["source"]`` = file path).
These helpers select columns by name or alias, turn cells into id strings or finite floats, and find
duplicate keys; each refusal is a :class:`~rcp_jax.errors.DataError` that says where and how to fix it.
:func:`finite_column` serves any table (runs, window scores) and leaves the message to the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError

_ALIASES = {
    "query_id": ("query_id", "query-id", "qid", "_id"),
    "doc_id": ("doc_id", "corpus-id", "docid", "_id"),
    "grade": ("grade", "score", "relevance", "label"),
}


def _where(df: pd.DataFrame, label, what: str = "table") -> str:
    """``file:line`` (or ``file, row n``) of the row labelled ``label``."""
    source = df.attrs.get("source")
    unit = df.index.name
    if source and unit == "line":
        return f"{source}:{label}"
    if source:
        return f"{source}, {unit or 'row'} {label}"
    return f"{what} row {label}"


def plain(value):
    """``value`` with NumPy scalars (also inside lists, tuples, sets and dicts) as plain Python values,
    so that a message shows ``nan`` or ``2``, never ``np.float64(nan)`` or ``np.int64(2)``."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, set)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def show(value) -> str:
    """``repr`` of a cell for a message, with NumPy scalars shown as plain Python values (``nan``, ``2``,
    ``'q1'``)."""
    return repr(plain(value))


_show = show


def _unit(df: pd.DataFrame) -> str:
    return df.index.name or "row"


def _id_string(value) -> str | None:
    """A cell as an id string; integral floats (from JSON or Parquet) lose their '.0'; None if missing."""
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return str(int(value))
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    s = str(value).strip()
    return s if s else None


def _rename(df: pd.DataFrame, wanted: Sequence[str], optional: Sequence[str] = (), what: str = "") -> pd.DataFrame:
    """Select ``wanted`` (+ present ``optional``) columns, accepting the aliases of :data:`_ALIASES`."""
    mapping = {}
    for col in list(wanted) + list(optional):
        for alias in _ALIASES.get(col, (col,)):
            if alias in df.columns and alias not in mapping:
                mapping[alias] = col
                break
    got = set(mapping.values())
    missing = [c for c in wanted if c not in got]
    if missing:
        raise DataError(
            f"{df.attrs.get('source', what)}: missing column(s) {missing} for {what}; expected "
            f"{list(wanted)}{' [+ ' + ', '.join(optional) + ']' if optional else ''}, got {list(df.columns)}"
        )
    out = df.loc[:, list(mapping)].rename(columns=mapping)
    out.attrs = dict(df.attrs)
    return out


def _ids(df: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    for col in columns:
        values = [_id_string(v) for v in df[col].tolist()]
        bad = [i for i, v in enumerate(values) if v is None]
        if bad:
            label = df.index[bad[0]]
            raise DataError(f"{_where(df, label)}: empty {col} in {what}; every row needs a {col}")
        df[col] = pd.Series(values, index=df.index, dtype=str)
    return df


def _numbers(df: pd.DataFrame, col: str, describe) -> np.ndarray:
    """Column ``col`` as float64, refusing text, NaN and infinities; ``describe(row)`` names the row."""
    raw = df[col]
    values = pd.to_numeric(raw.map(lambda v: v.strip() if isinstance(v, str) else v), errors="coerce")
    values = values.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        label = df.index[i]
        raise DataError(
            f"{_where(df, label)}: {col} {_show(raw.iloc[i])} of {describe(df.iloc[i])} is not a finite number; "
            f"fix the value or drop the {_unit(df)}"
        )
    return values


def finite_column(df: pd.DataFrame, col: str) -> tuple[np.ndarray, pd.Series | None]:
    """Column ``col`` as float64[n] (cells that are not numbers become NaN; a float64 column is not copied:
    the array is then a read-only view) and the first row whose value is not finite, or None when all are
    finite; the row's ``name`` is its index label, so a message can quote the original cell
    (``df.loc[row.name, col]``)."""
    column = df[col]
    if column.dtype == np.dtype(np.float64):  # already numbers: a read-only view of the column, no copy
        values = column.to_numpy().view()
        values.flags.writeable = False
    else:
        values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    if np.isfinite(values).all():
        return values, None
    return values, df.loc[~np.isfinite(values)].iloc[0]


def _first_duplicate(df: pd.DataFrame, keys: Sequence[str]):
    dup = df.duplicated(list(keys), keep=False)
    if not dup.any():
        return None
    rows = df.loc[dup]
    first_key = tuple(rows.iloc[0][k] for k in keys)
    same = rows[np.all([rows[k] == v for k, v in zip(keys, first_key)], axis=0)]
    return first_key, list(same.index[:2])

"""Id columns as integer codes, so that table encodings never group, merge or sort string columns.

An id is the string ``astype(str)`` gives for a cell (a column that holds strings is read as it is; a
missing cell stays missing and gets code -1). Arrow-backed string columns without missing cells are
compared, taken, hashed and sorted by pyarrow, which releases the GIL while it works; integer and
categorical columns are coded by their distinct values, and only those are turned into strings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def id_strings(column: pd.Series) -> pd.Series:
    """An id column as strings (a column that already holds strings is returned as is; others are cast
    with ``astype(str)``, which keeps missing cells missing)."""
    return column if isinstance(column.dtype, pd.StringDtype) else column.astype(str)


def arrow_strings(values: pd.Series | pd.Index):
    """The ``pyarrow.Array`` of an arrow-backed string column (or Index) without missing cells, else None."""
    if not (isinstance(values.dtype, pd.StringDtype) and values.dtype.storage == "pyarrow"):
        return None
    array = values.array.__arrow_array__()
    if array.null_count:
        return None
    if hasattr(array, "num_chunks"):  # a ChunkedArray
        array = array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()
    return array


def id_codes(column: pd.Series, *, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
    """``(codes int64[n], names)`` of an id column: exactly ``pd.factorize(id_strings(column), sort=sort)``
    (names: a string Index, sorted or in order of first appearance; code -1 for a missing cell).

    String columns are factorized as they are. Other columns (integers, categoricals, objects) are
    factorized by value first (a categorical by its codes) and only the distinct values are turned into
    strings; values that read as the same string (``1`` and ``"1"``) are then merged. A column with
    missing cells takes the plain path.
    """
    values = arrow_strings(column)
    if values is not None and not sort:  # hashed by pyarrow itself (pandas would convert its output)
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(values)
        names = pd.Index(type(column.array)(encoded.dictionary, dtype=column.dtype))
        return encoded.indices.to_numpy().astype(np.int64), names
    if isinstance(column.dtype, pd.StringDtype) or column.hasnans:
        codes, names = pd.factorize(id_strings(column), sort=sort)
        return np.asarray(codes, dtype=np.int64), names
    if isinstance(column.dtype, pd.CategoricalDtype):
        raw_codes, used = pd.factorize(column.cat.codes.to_numpy())
        raw_names = column.cat.categories.take(used)
    else:
        raw_codes, raw_names = pd.factorize(column)
    codes, names = pd.factorize(id_strings(pd.Series(raw_names)), sort=sort)
    return np.asarray(codes, dtype=np.int64)[raw_codes], names


def codes_at(column: pd.Series, rows: np.ndarray, *, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
    """``id_codes(column.take(rows), sort=sort)``: ``(codes int64[m], names)`` of the ids at positions ``rows``
    int[m]. Arrow strings are taken and hashed by pyarrow (sorted names in pyarrow's order: UTF-8 bytes,
    which is Python's string order)."""
    values = arrow_strings(column)
    if values is None:
        return id_codes(column.take(rows), sort=sort)
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(values.take(pa.array(np.asarray(rows, dtype=np.int64))))
    codes = encoded.indices.to_numpy().astype(np.int64)
    names = encoded.dictionary
    if sort and len(names):
        order = pc.sort_indices(names).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes, names = rank[codes], names.take(order)
    return codes, pd.Index(type(column.array)(names, dtype=column.dtype))


def run_starts(*columns: pd.Series) -> np.ndarray:
    """int64[R]: the first rows of the runs of rows whose ids are equal in every one of ``columns`` (all of
    ``n`` rows): row 0, then every row where some column's id differs from the previous row's. Two missing
    cells in a row are one run."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    arrow = [arrow_strings(c) for c in columns]
    if all(a is not None for a in arrow):
        import pyarrow.compute as pc

        change = None
        for a in arrow:
            bits = pc.not_equal(a.slice(1), a.slice(0, n - 1))
            change = bits if change is None else pc.or_(change, bits)
        hits = pc.indices_nonzero(change).to_numpy().astype(np.int64)
    else:
        change = np.zeros(n - 1, dtype=bool)
        for column in columns:
            codes, _ = id_codes(column)
            change |= codes[1:] != codes[:-1]
        hits = np.flatnonzero(change)
    return np.concatenate([np.zeros(1, dtype=np.int64), hits + 1])


def id_positions(column: pd.Series, names: pd.Index) -> np.ndarray:
    """int64[n]: the position of each row's id in ``names`` (distinct string ids), -1 where it is absent or
    missing."""
    values, value_set = arrow_strings(column), arrow_strings(names)
    if values is not None and value_set is not None and values.type == value_set.type:
        import pyarrow.compute as pc

        return pc.index_in(values, value_set=value_set).fill_null(-1).to_numpy().astype(np.int64)
    codes, distinct = id_codes(column)
    return np.where(codes >= 0, names.get_indexer(distinct)[codes], -1) if len(codes) else codes


def order_by_code_and_id(codes: np.ndarray, column: pd.Series) -> np.ndarray:
    """int64[n]: the stable order of rows by ``codes`` int[n], then by the id of ``column`` as a string."""
    values = arrow_strings(column)
    if values is None:
        id_code, names = id_codes(column)
        rank = np.empty(len(names), dtype=np.int64)
        rank[names.argsort()] = np.arange(len(names))
        return np.lexsort((rank[id_code], codes))
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table({"code": np.asarray(codes), "id": values})
    return pc.sort_indices(table, sort_keys=[("code", "ascending"), ("id", "ascending")]).to_numpy().astype(np.int64)

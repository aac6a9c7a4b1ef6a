"""Id columns as integer codes (:mod:`rcp_jax.encoding.ids`): every dtype gives the codes, runs, positions and
orders of its ids read as strings (``pd.factorize`` of ``astype(str)``, plain Python)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rcp_jax.encoding.ids import codes_at, id_codes, id_positions, id_strings, order_by_code_and_id, run_starts

_VALUES = {
    "int64": [30, 4, 30, 30, 200, 4],
    "object": [1, "1", 2.5, "x", "x", 2.5],
    "category": ["b", "a", "a", "b", "c", "a"],
    "float64": [1.0, np.nan, np.nan, 2.5, 1.0, 3.0],
    "str": ["b", "a", "a", "b", "c", "a"],
    "string[python]": ["b", "a", "a", "é", "日本", "a"],
    # two categories that read as one id: runs and codes follow the strings, not the categories
    "category 1 and '1'": [1, "1", 1, "a", "a", "1"],
    "category with missing": ["b", None, None, "a", "b", "b"],
    "str with missing": ["b", None, None, "a", "b", "b"],
}


def _column(kind: str) -> pd.Series:
    return pd.Series(_VALUES[kind], dtype=kind.split(" ")[0])


def _strings(col: pd.Series) -> list:
    """The ids as plain Python strings (None: missing)."""
    return [None if pd.isna(v) else v for v in id_strings(col).astype(object).tolist()]


@pytest.mark.parametrize("kind", list(_VALUES))
@pytest.mark.parametrize("sort", [False, True])
def test_id_codes_equal_factorize_of_strings(kind, sort):
    col = _column(kind)
    codes, names = id_codes(col, sort=sort)
    ref_codes, ref_names = pd.factorize(id_strings(col), sort=sort)
    np.testing.assert_array_equal(codes, ref_codes)
    assert names.equals(ref_names) and names.dtype == ref_names.dtype
    rows = np.array([5, 0, 3, 3])
    codes, names = codes_at(col, rows, sort=sort)
    ref_codes, ref_names = pd.factorize(id_strings(col.take(rows)), sort=sort)
    np.testing.assert_array_equal(codes, ref_codes)
    assert list(names) == list(ref_names)


@pytest.mark.parametrize("kind", list(_VALUES))
def test_run_starts_are_where_some_id_changes(kind):
    col = _column(kind)
    strings = _strings(col)
    want = [0] + [i for i in range(1, len(strings)) if strings[i] != strings[i - 1]]  # missing after missing: one run
    assert run_starts(col).tolist() == want
    other = pd.Series(["x", "x", "x", "y", "y", "y"], dtype="str")
    both = sorted(set(want) | {0, 3})
    assert run_starts(col, other).tolist() == both
    assert run_starts(col.iloc[:0]).tolist() == []


@pytest.mark.parametrize("kind", list(_VALUES))
def test_id_positions_find_each_id_in_the_names(kind):
    col = _column(kind)
    names = pd.Index(["c", "1", "30", "a", "2.5", "é"], dtype="str")
    want = [list(names).index(s) if s in list(names) else -1 for s in _strings(col)]
    assert id_positions(col, names).tolist() == want


@pytest.mark.parametrize("dtype", ["str", object, "category"])
def test_order_by_code_and_id_sorts_by_code_then_id_string(dtype):
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 30, size=500)
    ids = pd.Series([f"d{v}" for v in rng.integers(0, 40, size=len(codes))], dtype=dtype)  # ties: stable
    want = sorted(range(len(codes)), key=lambda i: (codes[i], ids[i]))
    assert order_by_code_and_id(codes, ids).tolist() == want

"""The window-score encoding's cheaper passes give what the passes they replaced gave.

* :func:`rcp_jax.tournament._window_layout` orders the window runs by a counting sort when the (query, window)
  keys are dense: the order of ``np.lexsort``; a key held by two runs still takes the per-row path;
* :func:`rcp_jax.tournament._twice` in blocks of windows equals the whole-array comparison;
* :func:`rcp_jax.tournament._first_numbers` by the ranks of the first rows numbers keys by first appearance.
"""

from __future__ import annotations

import numpy as np

from rcp_jax import tournament


def test_window_layout_counting_sort_equals_lexsort():
    rng = np.random.default_rng(0)
    n_q, n_w = 30, 12
    keys = rng.permutation(n_q * n_w)[: 200]  # distinct (query, window) keys, in any order
    head_q, head_w = keys // n_w, keys % n_w
    heads = np.sort(rng.choice(np.arange(1, 2_000), size=len(keys) - 1, replace=False))
    heads = np.concatenate([[0], heads])
    runs, win, slot = tournament._window_layout(heads, head_q, head_w, 2_100, n_w)
    assert win is None and slot is None
    np.testing.assert_array_equal(runs, np.lexsort((head_w, head_q)))
    # sparse keys take the lexsort itself
    runs, _, _ = tournament._window_layout(heads, head_q * 1_000, head_w, 2_100, n_w)
    np.testing.assert_array_equal(runs, np.lexsort((head_w, head_q)))


def test_window_layout_key_in_two_runs_takes_the_row_path():
    heads = np.array([0, 3, 5, 9])
    head_q, head_w = np.array([0, 0, 1, 0]), np.array([2, 1, 0, 2])  # (0, 2) is two runs: rows 0-2 and 9-10
    runs, win, slot = tournament._window_layout(heads, head_q, head_w, 11, 3)
    assert runs is None
    # windows sorted by (query, window): (0, 1), (0, 2), (1, 0); rows of a window in input order
    np.testing.assert_array_equal(win, [1, 1, 1, 0, 0, 2, 2, 2, 2, 1, 1])
    np.testing.assert_array_equal(slot, [0, 1, 2, 0, 1, 0, 1, 2, 3, 3, 4])


def test_twice_in_blocks_equals_the_whole_comparison(monkeypatch):
    rng = np.random.default_rng(1)
    names = rng.integers(-1, 40, size=(1_000, 7)).astype(np.int32)
    names[rng.random(1_000) < 0.5] = np.arange(7)  # distinct rows too
    want = np.array([len(set(r[r >= 0].tolist())) < (r >= 0).sum() for r in names])
    monkeypatch.setattr(tournament, "_TWICE_ROWS", 64)
    np.testing.assert_array_equal(tournament._twice(names), want)
    monkeypatch.setattr(tournament, "_TWICE_ROWS", 1 << 14)
    np.testing.assert_array_equal(tournament._twice(names), want)


def test_first_numbers_by_ranks_equal_the_cumulative_count():
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 500, size=20_000).astype(np.int32)
    keys[:500] = rng.permutation(500)  # every key appears
    first = {}
    for i, k in enumerate(keys.tolist()):
        first.setdefault(k, i)
    want = np.empty(500, dtype=np.int64)
    want[sorted(first, key=first.get)] = np.arange(500)
    np.testing.assert_array_equal(tournament._first_numbers(keys, 500), want)


def test_small_pages_restores_numpy_huge_page_advice():
    from rcp_jax.data.table_checks import small_pages

    toggle = np._core.multiarray._set_madvise_hugepage
    before = toggle(True)
    try:
        with small_pages():
            assert toggle(False) is False  # off inside
            with small_pages():
                pass
            assert toggle(False) is False  # still off after a nested use
        assert toggle(True) is True  # restored
    finally:
        toggle(before)


def test_run_heads_split_over_the_pool_equals_one_pass(monkeypatch):
    import pandas as pd

    from rcp_jax.data import table_checks

    rng = np.random.default_rng(3)
    ids = np.repeat(rng.integers(0, 30, size=400), rng.integers(1, 40, size=400))
    column = pd.Series([f"q{v}" for v in ids], dtype="str")
    monkeypatch.setattr(table_checks, "CHUNK_ROWS", 64)  # long enough to split
    want = np.r_[True, ids[1:] != ids[:-1]]
    np.testing.assert_array_equal(table_checks.run_heads(column, split=True), want)
    np.testing.assert_array_equal(table_checks.run_heads(column), want)
    breaks = np.zeros(len(ids), dtype=bool)
    breaks[5] = True
    np.testing.assert_array_equal(table_checks.run_heads(column, breaks, split=True), want | breaks)

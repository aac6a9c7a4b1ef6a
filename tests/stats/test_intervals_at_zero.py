"""A bootstrap interval end within rounding of zero is zero: it decides nothing about excluding 0
(``rcp_jax.stats.paired`` and ``compare_systems``'s ``ci_excludes_0``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def test_an_interval_end_of_rounding_noise_does_not_exclude_zero():
    from rcp_jax.stats.paired import ZERO_RTOL, bootstrap_mean_ci, excludes_zero, snap_to_zero

    # mean of -0.1 and 0.1 (and of -0.3, 0.2 and 0.1) is 0 exactly; in floating point the 97.5th percentile
    # of these resamples came out as -5.6e-18 before, an interval "excluding 0" by noise
    d = np.array([[-0.1, -0.2, -0.4, -0.3, 0.1]])
    lo, hi = bootstrap_mean_ci(d, n_bootstrap=200, seed=3047)
    assert lo[0] < -0.1 and hi[0] == 0.0
    assert not excludes_zero(lo, hi)[0]
    # the rule is relative to the differences' size: small real effects are kept
    tiny = d * 1e-9
    lo_t, hi_t = bootstrap_mean_ci(tiny, n_bootstrap=200, seed=3047)
    assert hi_t[0] == 0.0 and lo_t[0] == pytest.approx(lo[0] * 1e-9)
    assert snap_to_zero([5e-13, -5e-13, 2e-12], 1.0).tolist() == [0.0, 0.0, 2e-12]
    assert snap_to_zero(1e-22, 1e-9) == 0.0 and snap_to_zero(1e-20, 1e-30) == 1e-20
    assert ZERO_RTOL == 1e-12
    assert excludes_zero([0.1, -0.2, 0.0, np.nan], [0.2, -0.1, 0.3, 1.0]).tolist() == [True, True, False, False]


def test_compare_reports_which_intervals_exclude_zero_and_no_sign_of_noise():
    from rcp_jax.stats import compare_systems

    # b differs from a by +0.1, +0.2, -0.3 on three queries: a mean difference that is 0 in exact arithmetic
    rows = []
    for q, (x, dx) in enumerate([(0.5, 0.1), (0.4, 0.2), (0.6, -0.3), (0.3, 0.0)]):
        rows += [("a", f"q{q}", x + dx, x + dx), ("b", f"q{q}", x, x), ("c", f"q{q}", 0.1 * q, 0.0)]
    table = pd.DataFrame(rows, columns=["system", "query_id", "qrel_ndcg", "rcp_ndcg"])
    c = compare_systems(table, n_permutations=200, n_bootstrap=300)
    ab = c.pairs.set_index(["metric", "system_a", "system_b"]).sort_index()
    row = ab.loc[("qrel_ndcg", "a", "b")]
    assert row["diff"] == 0.0  # not 1.4e-17
    assert {"ci_excludes_0"} <= set(c.pairs.columns) and {"ci_excludes_0"} <= set(c.overall.columns)
    assert c.pairs["ci_excludes_0"].dtype == bool
    np.testing.assert_array_equal(c.pairs["ci_excludes_0"], (c.pairs["ci_low"] > 0) | (c.pairs["ci_high"] < 0))
    assert c.overall.set_index(["metric", "system_a", "system_b"]).loc[("qrel_ndcg", "a", "b"), "diff"] == 0.0

"""Run rows joined to their pool positions and gains (rcp_jax.encoding.runs) equal pandas' left merges, and the
(system, query) groups number the lists in sorted order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rcp_jax.encoding.runs import attach_pool_and_gains, system_query_groups


def _tables(seed: int, repeat_gain: bool):
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(12)]
    run = pd.DataFrame({"system": rng.choice(["bm25", "ce"], 40), "query_id": rng.choice(["q2", "q10", "q1"], 40),
                        "doc_id": rng.choice(docs, 40), "score": rng.normal(size=40)})
    pool = pd.DataFrame({"query_id": np.repeat(["q1", "q2"], 6), "doc_id": docs[:6] * 2, "_pos": np.arange(12.0)})
    gains = pd.DataFrame({"query_id": ["q1", "q2", "q10"] * 3, "doc_id": docs[3:12], "gain": rng.uniform(size=9)})
    if repeat_gain:  # a repeated (query, document) key: the merges' semantics (run rows repeated) are kept
        gains = pd.concat([gains, gains.iloc[:1]], ignore_index=True)
    return run, pool, gains


@pytest.mark.parametrize("repeat_gain", [False, True])
@pytest.mark.parametrize("pool_only", [False, True])
def test_attach_pool_and_gains_equals_left_merges(repeat_gain, pool_only):
    run, pool, gains = _tables(3, repeat_gain)
    got = attach_pool_and_gains(run, pool, gains, pool_only)
    want = run.merge(pool, on=["query_id", "doc_id"], how="left")
    if pool_only:
        want = want.loc[want["_pos"].notna()]
    want = want.merge(gains, on=["query_id", "doc_id"], how="left")
    want["gain"] = want["gain"].fillna(0.0)
    assert len(got) == len(want) > 0
    key = ["system", "query_id", "doc_id", "score", "_pos", "gain"]
    pd.testing.assert_frame_equal(got[key].sort_values(key).reset_index(drop=True),
                                  want[key].sort_values(key).reset_index(drop=True))


def test_system_query_groups_number_lists_in_sorted_order():
    run, _, _ = _tables(5, False)
    codes, index = system_query_groups(run)
    assert list(index) == sorted(set(zip(run["system"], run["query_id"])))
    assert [index[c] for c in codes] == list(zip(run["system"], run["query_id"]))
    empty_codes, empty_index = system_query_groups(run.iloc[:0])
    assert len(empty_codes) == 0 and len(empty_index) == 0

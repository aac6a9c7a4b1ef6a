"""The calibration's degenerate-data flags and answer checks (:mod:`rcp_jax.calibration`): flags by query
runs equal flags by scatter, flags with every document judged equal the masked path, the flags of a small
table name the expected ids, and checking answers leaves the caller's frame untouched."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rcp_jax import calibration
from rcp_jax.calibration import degenerate_data_flags


def test_flags_by_runs_equal_flags_by_scatter():
    rng = np.random.default_rng(3)
    q_code = np.repeat(np.arange(6), [3, 1, 4, 2, 3, 2])  # each query one run of rows
    theta = rng.normal(size=len(q_code))
    theta[q_code == 2] = 0.5  # no spread
    theta[q_code == 4] = [np.nan, 1.0, 1.0]  # no spread once NaN is skipped
    placements = np.ones(len(q_code))
    passes = rng.integers(0, 2, size=(len(q_code), 3)).astype(float)
    names = [f"q{i}" for i in range(6)]
    tau = pd.Series(np.ones(6), index=names)
    by_runs = calibration._flags_by_code(q_code, names, theta, placements, passes, ["C1", "C2", "C3"], tau, None)
    perm = rng.permutation(len(q_code))  # queries no longer in runs: the scatter path
    by_scatter = calibration._flags_by_code(q_code[perm], names, theta[perm], placements[perm], passes[perm],
                                            ["C1", "C2", "C3"], tau, None)
    assert by_runs == by_scatter
    assert [f["ids"] for f in by_runs if f["kind"] == "bt_no_spread"] == [["q2", "q4"]]



def test_flags_with_every_document_judged_match_the_masked_path():
    rng = np.random.default_rng(4)
    n, k, n_q = 3_000, 3, 40
    q_code = np.sort(rng.integers(0, n_q, size=n))
    names = [f"q{i:02d}" for i in range(n_q)]
    theta = rng.normal(size=n)
    placements = rng.integers(1, 4, size=n).astype(float)
    passes = np.minimum(rng.integers(0, 4, size=(n, k)), placements[:, None]).astype(float)
    passes[q_code == 3] = 0.0  # a query whose answers all fail
    passes[q_code == 5] = placements[q_code == 5, None]  # one whose answers all pass
    tau = pd.Series(np.ones(n_q), index=names)
    every = calibration._flags_by_code(q_code, names, theta, placements, passes, ["C1", "C2", "C3"], tau, None)
    # the same documents with unjudged ones (placements 0, passes NaN) among them take the masked path
    at = np.arange(0, n, 7)
    q2, theta2 = np.insert(q_code, at, q_code[at]), np.insert(theta, at, theta[at])
    placements2 = np.insert(placements, at, 0.0)
    passes2 = np.insert(passes, at, np.nan, axis=0)
    masked = calibration._flags_by_code(q2, names, theta2, placements2, passes2, ["C1", "C2", "C3"], tau, None)
    kinds = {f["kind"]: f["ids"] for f in every}
    assert kinds["query_all_fail"] == ["q03"] and kinds["query_all_pass"] == ["q05"]
    assert [(f["kind"], f["ids"], f["message"]) for f in every] == [(f["kind"], f["ids"], f["message"]) for f in masked]
    # a criterion nobody passes, counted over the judged documents only
    passes[:, 2] = 0.0
    passes2[~np.isnan(passes2[:, 0]), 2] = 0.0
    every = calibration._flags_by_code(q_code, names, theta, placements, passes, ["C1", "C2", "C3"], tau, None)
    masked = calibration._flags_by_code(q2, names, theta2, placements2, passes2, ["C1", "C2", "C3"], tau, None)
    assert {f["kind"]: f["ids"] for f in every}["criterion_never_passed"] == ["C3"]
    assert [(f["kind"], f["ids"], f["message"]) for f in every] == [(f["kind"], f["ids"], f["message"]) for f in masked]


def test_validate_answers_leaves_the_callers_frame_untouched():
    answers = pd.DataFrame({"query_id": ["q", "q", "r"], "doc_id": [1, 2, 3], "C1": np.array([0, 1, 1], dtype=np.int64),
                            "C2": np.array([1, 0, 1], dtype=np.int8), "extra": ["x", "y", "z"]})
    before = answers.copy()
    df, crit = calibration.validate_answers(answers)
    assert crit == ["C1", "C2"] and list(df.columns) == ["query_id", "doc_id", "C1", "C2"]
    assert df["C1"].dtype == np.int8 and df["C2"].dtype == np.int8 and df["doc_id"].tolist() == ["1", "2", "3"]
    df.loc[0, "C2"] = 0
    df.loc[1, "C1"] = 0
    pd.testing.assert_frame_equal(answers, before)



def test_degenerate_data_flags_name_the_ids():
    # degenerate data, flagged by query in sorted order
    docs = pd.DataFrame({"query_id": ["b", "b", "a", "a", "c"], "doc_id": ["1", "2", "1", "2", "1"],
                         "theta": [0.5, 0.5, -1.0, 1.0, 0.0], "placements": [2.0, 1.0, 1.0, 0.0, 0.0],
                         "C1_pass": [0.0, 0.0, 1.0, np.nan, np.nan], "C2_pass": [0.0, 0.0, 1.0, np.nan, np.nan]})
    flags = degenerate_data_flags(docs, ["C1", "C2"], pd.Series([1.0, 5e-4], index=["a", "b"]), {"c": 2})
    assert {f["kind"]: f["ids"] for f in flags} == {
        "query_all_fail": ["b"], "query_all_pass": ["a"], "bt_no_spread": ["b"], "bt_disconnected": ["c"],
        "tau_collapsed": ["b"]}

"""Properties: loaders round-trip any ids and scores; ``score_query`` stays in
[0, 1], ignores what documents are called (group_mean, input_order), and its group_mean is the
average over every order of the tied documents; whole-run evaluation ignores row order bit for bit.
"""

from __future__ import annotations

import itertools
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from rcp_jax import data as D
from rcp_jax.evaluation import evaluate
from rcp_jax.metrics import Protocol, score_query

# ids: any printable text without whitespace or control characters (TREC files split on whitespace)
ID_CHARS = st.characters(blacklist_categories=("Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"), blacklist_characters="\ufeff")
IDS = st.text(ID_CHARS, min_size=1, max_size=10).filter(lambda s: s == s.strip() and len(s.split()) == 1)
# No subnormal scores. Whether 5e-324 equals 0 depends on the thread's FTZ/DAZ flags, which any library
# built with fast-math may set, so tie detection on subnormals depends on what else the process loaded.
# One run failed the group_mean property on scores {0.0, 5e-324} in a worktree whose code changed during
# the run; it did not reproduce (3,000 random cases over subnormals, every library of the suite loaded).
# Subnormal reranker scores do not occur in practice; ties of normal floats are tested bit for bit.
SCORES = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False, width=64)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def runs(draw):
    systems = draw(st.lists(IDS, min_size=1, max_size=2, unique=True))
    queries = draw(st.lists(IDS, min_size=1, max_size=3, unique=True))
    rows = []
    for s in systems:
        for q in queries:
            docs = draw(st.lists(IDS, min_size=1, max_size=5, unique=True))
            rows += [(s, q, d, draw(SCORES)) for d in docs]
    return pd.DataFrame(rows, columns=["system", "query_id", "doc_id", "score"])


def _key(df: pd.DataFrame, cols) -> pd.DataFrame:
    return df.sort_values(cols).reset_index(drop=True)


@SETTINGS
@given(run=runs(), ext=st.sampled_from(["trec", "csv", "tsv", "jsonl", "parquet", "trec.gz", "csv.gz"]))
def test_runs_round_trip_any_ids_and_scores(run, ext):
    with tempfile.TemporaryDirectory() as tmp:
        back = D.read_run(D.write_run(run, Path(tmp) / f"run.{ext}"))
    cols = ["system", "query_id", "doc_id"]
    a, b = _key(run, cols), _key(back.loc[:, list(run.columns)], cols)
    assert a[cols].equals(b[cols])
    assert np.array_equal(a["score"].to_numpy(), b["score"].to_numpy())  # bit for bit


@SETTINGS
@given(rows=st.lists(st.tuples(IDS, IDS, st.one_of(st.integers(-1, 4).map(float), SCORES)), min_size=1, max_size=12,
                     unique_by=lambda r: (r[0], r[1])),
       ext=st.sampled_from(["trec", "csv", "tsv", "jsonl", "parquet"]))
def test_qrels_round_trip(rows, ext):
    qrels = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        back = D.read_qrels(D.write_qrels(qrels, Path(tmp) / f"qrels.{ext}"))
    assert back["query_id"].tolist() == qrels["query_id"].tolist()
    assert back["doc_id"].tolist() == qrels["doc_id"].tolist()
    # negative grades read back as 0 (non-relevant, as in trec_eval), with one warning saying how many
    assert np.array_equal(back["grade"].to_numpy(), np.maximum(qrels["grade"].to_numpy(), 0.0))
    n_negative = int((qrels["grade"] < 0).sum())
    assert back.attrs["negative_grades"] == n_negative
    assert sum("negative grade" in str(w.message) for w in caught) == (1 if n_negative else 0)


@SETTINGS
@given(pools=st.dictionaries(IDS, st.lists(IDS, min_size=2, max_size=6, unique=True), min_size=1, max_size=3),
       ext=st.sampled_from(["trec", "csv", "tsv", "jsonl", "parquet"]))
def test_pools_round_trip_in_pool_order(pools, ext):
    table = pd.DataFrame([(q, d) for q, docs in pools.items() for d in docs], columns=["query_id", "doc_id"])
    with tempfile.TemporaryDirectory() as tmp:
        back = D.read_pools(D.write_pools(table, Path(tmp) / f"pools.{ext}"))
    got = {q: g["doc_id"].tolist() for q, g in back.groupby("query_id", sort=False)}
    assert got == pools
    assert all(g["rank"].tolist() == list(range(1, len(g) + 1)) for _, g in back.groupby("query_id"))


# --------------------------------------------------------------------------------------------------
# score_query
# --------------------------------------------------------------------------------------------------
GAINS = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
#: few distinct score values, so ties are common
TIED_SCORES = st.sampled_from([-1.5, 0.0, 0.25, 0.25000000000000006, 1.0, 3.0])


@st.composite
def query_case(draw, max_docs=8):
    n = draw(st.integers(1, max_docs))
    docs = [f"d{i}" for i in range(n)]
    scores = {d: draw(st.one_of(TIED_SCORES, SCORES)) for d in docs}
    gains = {d: draw(GAINS) for d in docs}
    return scores, gains, draw(st.integers(1, 12))


@settings(max_examples=300, deadline=None)
@given(case=query_case(), protocol=st.sampled_from(["plain", "nanobeir", "bright", "trecdl", "vidore", "mteb"]))
@example(  # found by this test in CI: the mean of three equal gains missed the gain by an ulp (nDCG 1 + 2e-16)
    case=({f"d{i}": 0.25000000000000006 for i in range(3)}, {f"d{i}": 0.48289262461815075 for i in range(3)}, 1),
    protocol="plain",
)
def test_ndcg_is_in_unit_interval(case, protocol):
    scores, gains, k = case
    value = score_query(scores, gains, k=k, protocol=protocol, pool=list(gains)).rcp_ndcg
    assert 0.0 <= value <= 1.0


@settings(max_examples=200, deadline=None)
@given(case=query_case(), protocol=st.sampled_from(["plain", "trecdl", "vidore"]), data=st.data())
def test_ndcg_ignores_document_names(case, protocol, data):
    """group_mean and input_order ties do not look at ids (doc_id_desc does, by design)."""
    scores, gains, k = case
    names = data.draw(st.lists(IDS, min_size=len(gains), max_size=len(gains), unique=True))
    rename = dict(zip(gains, names))
    pool = list(gains)
    before = score_query(scores, gains, k=k, protocol=protocol, pool=pool).rcp_ndcg
    after = score_query({rename[d]: v for d, v in scores.items()}, {rename[d]: v for d, v in gains.items()}, k=k,
                        protocol=protocol, pool=[rename[d] for d in pool]).rcp_ndcg
    assert before == after  # bit for bit


@settings(max_examples=150, deadline=None)
@given(case=query_case(max_docs=5))  # every order of up to 5 documents: <= 120 per case (6 took 720, ~10 s of CPU)
@example(  # found by this test on a bare clone's second run: a subnormal gain; the tie's mean underflowed to 0
    case=({"d0": -1.5, "d1": -1.5}, {"d0": 0.0, "d1": 5e-324}, 1),
)
def test_group_mean_is_the_average_over_tie_orders(case):
    scores, gains, k = case
    docs = list(gains)
    mean = score_query(scores, gains, k=k, protocol="plain").rcp_ndcg
    in_order = Protocol("in-order", "input_order", pool_only=False)
    values = [score_query(scores, gains, k=k, protocol=in_order, pool=list(p)).rcp_ndcg
              for p in itertools.permutations(docs)]
    assert math.isclose(mean, float(np.mean(values)), rel_tol=1e-12, abs_tol=1e-12)
    if len(set(scores.values())) == len(scores):  # no ties: every order gives the same value
        assert max(values) - min(values) <= 1e-15


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(run=runs(), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_evaluate_ignores_row_order_bit_for_bit(run, seed, data):
    run = run.assign(score=run["score"].round(0))  # plenty of ties
    pairs = run[["query_id", "doc_id"]].drop_duplicates()
    gains = pairs.assign(gain=data.draw(st.lists(GAINS, min_size=len(pairs), max_size=len(pairs))))
    assume(len(run) > 1)
    shuffled = run.sample(frac=1.0, random_state=seed % (2**32))
    for protocol in ("plain", "mteb"):
        a = evaluate(run, gains=gains, k=5, protocol=protocol)
        b = evaluate(shuffled, gains=gains.sample(frac=1.0, random_state=seed % (2**32)), k=5, protocol=protocol)
        pd.testing.assert_frame_equal(a, b, check_exact=True)

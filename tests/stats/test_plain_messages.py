"""Messages show plain numbers (nan, inf, 2), never NumPy reprs such as np.float64(nan) or np.int64(2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rcp_jax
from rcp_jax.cli import main
from rcp_jax.data.table_checks import plain, show
from rcp_jax.errors import DataError
from rcp_jax.pools.fusion import _positives
from rcp_jax.stats import compare_systems


def _message(call) -> str:
    with pytest.raises(DataError) as info:
        call()
    text = str(info.value)
    assert "np." not in text, text
    return text


def test_plain_helper():
    assert show(np.float64("nan")) == "nan" and show(np.int64(2)) == "2" and show(np.str_("q1")) == "'q1'"
    assert repr(plain([np.int64(1), (np.float64(0.5), {"a": np.bool_(True)})])) == "[1, (0.5, {'a': True})]"


def test_run_score_nan_and_inf():
    gains = pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "gain": [0.5]})
    for bad, shown in ((np.nan, "is nan;"), (np.inf, "is inf;")):
        run = pd.DataFrame({"system": "s", "query_id": "q", "doc_id": ["a", "b"], "score": [1.0, bad]})
        assert shown in _message(lambda: rcp_jax.evaluate(run, gains=gains))


def test_window_score_nan():
    ws = pd.DataFrame({"query_id": "q", "window_id": "w", "doc_id": ["a", "b"], "score": [1.0, np.nan]})
    assert "is nan;" in _message(lambda: rcp_jax.fit_bradley_terry(ws))


def test_rubric_answer_and_qrel_grade():
    bt = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b"], "theta": [0.0, 1.0]})
    ans = pd.DataFrame({"query_id": "q", "doc_id": ["a", "b"], "C1": [0, 2], "C2": [1, 1]})
    assert "is 2;" in _message(lambda: rcp_jax.calibrate(bt, ans))
    qrels = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": [1.0, np.nan]})
    assert "not a number: nan" in _message(lambda: _positives(qrels))


def test_per_query_metric_and_score_query():
    pq = pd.DataFrame({"system": ["a", "b"], "query_id": ["q", "q"], "rcp_ndcg": [np.inf, 0.2]})
    _message(lambda: compare_systems(pq))
    assert "is nan" in _message(lambda: rcp_jax.metrics.score_query({"a": 1.0}, {"a": np.float64("nan")}))


def test_cli_answer_that_is_not_0_or_1(tmp_path, capsys):
    bad = tmp_path / "a.csv"
    pd.DataFrame({"criterion": ["C1", "C1"], "answer": [1, 2], "p_x": [0.5, 0.5]}).to_csv(bad, index=False)
    assert main(["diagnose", "--answers", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "answer 2 is not 0 or 1" in err and "np." not in err

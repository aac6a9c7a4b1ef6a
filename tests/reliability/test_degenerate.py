"""Degenerate data. Queries whose documents all fail or all pass every criterion, a
criterion nobody passes, a judge that always gives the same score, a disconnected tournament: the fits
finish, name the problem in warnings and in ``calibration.info["flags"]`` (saved with the
calibration, printed by ``rcp-jax fit``), and never hand on NaN gains silently.

The tables are the reference run's (4 queries x 16 documents), edited.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from rcp_jax.judging import Judgement, JudgementStore, read_judgements
from rcp_jax.models import irt
from rcp_jax.calibration import CalibrationWarning, calibrate
from rcp_jax.cli import main
from rcp_jax.errors import CalibrationError
from rcp_jax.tournament import fit_bradley_terry

CRIT = ["C1", "C2", "C3", "C4", "C5"]


@pytest.fixture(scope="module")
def tables(reference):
    read = lambda name: pd.read_csv(io.BytesIO(reference.outputs[name]), dtype={"query_id": str, "doc_id": str})  # noqa: E731
    return read("window_scores.csv"), read("answers.csv")


def fit(window_scores, answers):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = calibrate(fit_bradley_terry(window_scores), answers)
    return cal, [str(w.message) for w in caught]


def kinds(cal) -> dict[str, list[str]]:
    return {f["kind"]: f["ids"] for f in cal.info["flags"]}


def assert_finite(cal):
    assert np.isfinite(cal.gamma).all() and np.isfinite(cal.beta).all()
    assert np.isfinite(cal.queries[["tau", "alpha"]].to_numpy()).all()
    assert np.isfinite(cal.documents["gain"].to_numpy()).all()
    assert ((cal.documents["gain"] > 0) & (cal.documents["gain"] < 1)).all()


def test_queries_where_every_document_fails_or_passes_everything(tables):
    window_scores, answers = tables
    answers = answers.copy()
    answers.loc[answers.query_id == "q0", CRIT] = 0
    answers.loc[answers.query_id == "q1", CRIT] = 1
    cal, messages = fit(window_scores, answers)
    assert_finite(cal)
    assert kinds(cal) == {"query_all_fail": ["q0"], "query_all_pass": ["q1"]}
    assert any("every rubric answer of query 'q0' is 0" in m for m in messages)
    # the ordinary queries keep their scale (the 2PL Newton used to leave them at tau = 0 here)
    assert (cal.queries.set_index("query_id")["tau"][["q2", "q3"]] > 0.5).all()
    assert cal.info["converged"]
    # ... and the first Newton run gets there itself: the trust region on t (rcp_jax.models.irt.MAX_T_STEP)
    # keeps tau from collapsing, so the warm-restart safety net is not needed
    assert cal.info["restarts"] == 0
    gains = cal.documents.groupby("query_id")["gain"]
    assert gains.max()["q0"] < gains.min()["q2"] and gains.min()["q1"] > gains.max()["q2"]


def test_a_criterion_nobody_passes(tables):
    window_scores, answers = tables
    cal, messages = fit(window_scores, answers.assign(C5=0))
    assert_finite(cal)
    assert kinds(cal) == {"criterion_never_passed": ["C5"]}
    assert cal.beta[4] == cal.beta.max()  # the hardest criterion, at a finite difficulty
    assert any("no document passes criterion 'C5'" in m for m in messages)


def test_a_judge_that_always_gives_the_same_answer(tables):
    window_scores, answers = tables
    flat = window_scores.assign(score=2.0)
    same = answers.assign(C1=1, C2=1, C3=0, C4=0, C5=0)
    cal, messages = fit(flat, same)
    assert_finite(cal)
    found = kinds(cal)
    assert found["bt_no_spread"] == ["q0", "q1", "q2", "q3"]
    assert found["criterion_always_passed"] == ["C1", "C2"]
    assert found["criterion_never_passed"] == ["C3", "C4", "C5"]
    assert cal.documents.groupby("query_id")["gain"].nunique().eq(1).all()  # one gain per query, said so
    assert any("has the same Bradley-Terry score" in m for m in messages)


def test_a_disconnected_tournament(tables):
    window_scores, answers = tables
    # every window of q2 cut in two: documents d00-d07 and d08-d15 are never compared
    q2 = window_scores.query_id == "q2"
    half = window_scores["doc_id"].str[-2:].astype(int) < 8
    split = window_scores.assign(window_id=np.where(q2, window_scores["window_id"] + np.where(half, "/a", "/b"),
                                                    window_scores["window_id"]))
    sizes = split.groupby(["query_id", "window_id"])["doc_id"].transform("size")
    cal, messages = fit(split[sizes >= 2], answers)
    assert_finite(cal)
    assert kinds(cal)["bt_disconnected"] == ["q2"]
    assert any("comparison graph is disconnected" in m and "'q2'" in m for m in messages)


def test_a_fit_that_produces_nan_is_an_error_not_nan_gains(tables, monkeypatch):
    window_scores, answers = tables
    bt = fit_bradley_terry(window_scores)
    real = irt.fit_2pl_calibration

    def broken(*args, **kwargs):
        out = real(*args, **kwargs)
        return dataclasses.replace(out, tau=np.full_like(out.tau, np.nan))

    monkeypatch.setattr(irt, "fit_2pl_calibration", broken)
    with pytest.raises(CalibrationError, match=r"non-finite values \(tau; ability of documents \['q0-d.*--float64"):
        calibrate(bt, answers)


def test_rcp_jax_fit_reports_the_flags(reference, tmp_path, capsys):
    """Through the CLI: the flags are printed as notes and kept in fit.json and items.json."""
    store = tmp_path / "store"
    shutil.copytree(reference.folder / "store", store)
    rubric = read_judgements(store, "rubric")
    (store / "rubric.jsonl").unlink()
    with JudgementStore(store) as st:
        for j in rubric:
            d = j.to_dict()
            if j.window.query_id == "q3" and j.criteria is not None:
                d["criteria"] = {doc: {c: 0 for c in CRIT} for doc in d["criteria"]}
            st.append(Judgement.from_dict(d))
    assert main(["fit", "--store", str(store), "--out", str(tmp_path / "fit"), "--method", "map"]) == 0
    out = capsys.readouterr().out
    assert "note: every rubric answer of query 'q3' is 0" in out
    fitted = json.loads((tmp_path / "fit" / "fit.json").read_text())
    assert any("query 'q3'" in n for n in fitted["notes"])
    items = json.loads((tmp_path / "fit" / "calibration" / "items.json").read_text())
    assert [f["kind"] for f in items["info"]["flags"]] == ["query_all_fail"]
    assert pytest.approx(sum(items["gamma"]), abs=1e-4) == 5

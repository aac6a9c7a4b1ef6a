"""Rubric-only calibration with a criterion nobody (or everybody) passes: warned with counts, and the
criterion rests on the prior instead of taking most of the discrimination and shifting every gain."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from rcp_jax.models import irt
from rcp_jax.calibration import CalibrationWarning, fit_rubric_only
from rcp_jax.errors import CalibrationError
from rcp_jax.metrics import gain


@pytest.fixture(scope="module")
def answers() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    gam = np.array([1.2, 1.0, 0.9, 1.1, 0.8])
    bet = np.array([-1.5, -0.5, 0.3, 1.0, 2.0])
    rows = []
    for q in range(5):
        for d in range(12):
            theta = rng.normal()
            for _ in range(3):
                yes = rng.random(5) < 1 / (1 + np.exp(-gam * (theta - bet)))
                rows.append({"query_id": f"q{q}", "doc_id": f"d{d}", **{f"C{i + 1}": int(yes[i]) for i in range(5)}})
    return pd.DataFrame(rows)


def _fit(answers):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = fit_rubric_only(answers)
    return cal, [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]


def test_a_criterion_nobody_passes_is_warned_and_rests_on_the_prior(answers):
    cal, messages = _fit(answers.assign(C5=0))
    n = len(answers)
    assert messages == [m for m in messages if "criterion 'C5' (yes in 0 of " + str(n) + " answers)" in m]
    assert len(messages) == 1 and "np." not in messages[0]
    assert [f["kind"] for f in cal.info["flags"]] == ["criterion_never_passed"]
    assert cal.gamma.sum() == pytest.approx(5.0) and cal.beta.mean() == pytest.approx(0.0, abs=1e-12)
    assert cal.gamma[4] == pytest.approx(1.0)  # not 2.9 of 5
    assert cal.beta[4] == cal.beta.max() and np.isfinite(cal.beta).all()
    # the other criteria are exactly the fit without C5, and C5 adds (almost) nothing to any gain
    alone = fit_rubric_only(answers.drop(columns="C5"))
    both = cal.documents.merge(alone.documents, on=["query_id", "doc_id"], suffixes=("", "_4"))
    np.testing.assert_allclose(both["gain"], both["gain_4"] * 4 / 5, atol=5e-3)
    np.testing.assert_allclose(cal.gamma[:4], alone.gamma, rtol=1e-10)
    # C5's pass probability over the judged documents is the half count 0.5 / (answers + 1)
    p5 = 1 / (1 + np.exp(-cal.gamma[4] * (cal.documents["ability"] - cal.beta[4])))
    assert float(np.average(p5, weights=cal.documents["placements"])) == pytest.approx(0.5 / (n + 1), rel=1e-6)


def test_a_criterion_everybody_passes(answers):
    cal, messages = _fit(answers.assign(C1=1))
    assert len(messages) == 1 and "every document passes criterion 'C1'" in messages[0]
    assert cal.gamma[0] == pytest.approx(1.0) and cal.beta[0] == cal.beta.min()
    alone = fit_rubric_only(answers.drop(columns="C1").rename(columns={f"C{i}": f"C{i - 1}" for i in range(2, 6)}))
    both = cal.documents.merge(alone.documents, on=["query_id", "doc_id"], suffixes=("", "_4"))
    np.testing.assert_allclose(both["gain"], (both["gain_4"] * 4 + 1) / 5, atol=5e-3)


def test_without_degenerate_criteria_nothing_changes(answers):
    cal, messages = _fit(answers)
    assert messages == [] and cal.info["flags"] == []
    counts = answers.groupby(["query_id", "doc_id"], sort=False)[[f"C{i}" for i in range(1, 6)]]
    passes = counts.sum().to_numpy(dtype=float)
    trials = counts.count().to_numpy(dtype=float)
    direct = irt.fit_rubric_only(passes, trials)
    np.testing.assert_allclose(cal.gamma, direct.gamma, rtol=1e-12)
    np.testing.assert_allclose(cal.documents["gain"], gain(direct.ability, direct.gamma, direct.beta), rtol=1e-12)


def test_all_criteria_degenerate_is_refused(answers):
    with pytest.raises(CalibrationError, match="every criterion is never or always passed"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationWarning)
            fit_rubric_only(answers.assign(C1=1, C2=1, C3=0, C4=0, C5=0))

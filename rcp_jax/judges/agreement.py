"""How often two judges give the same rubric answer: Cohen's kappa per criterion.

Answers are paired only where both judges saw the same document *in the same window* (same query, same
window name and the same set of documents): the balanced rubric windows, which the schedule makes
identical for every judge of a store, and any stratified window that happens to coincide. So both
answers were given in the same context. A document placed in several shared windows counts once per
window.

Cohen's kappa of two binary raters with ``n`` paired answers, observed agreement ``p_o`` and yes-rates
``p_a``, ``p_b``: ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_e = p_a p_b + (1 - p_a)(1 - p_b)``;
undefined (NaN) when ``p_e = 1`` (both judges always gave the same single answer).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
import pandas as pd

from rcp_jax.calibration import criterion_columns


def cohen_kappa(a, b) -> float:
    """Cohen's kappa of two 0/1 answer vectors of equal length (NaN when empty or undefined)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"kappa needs paired answers: {a.shape} vs {b.shape}")
    if a.size == 0:
        return float("nan")
    p_o = float(np.mean(a == b))
    pa, pb = float(a.mean()), float(b.mean())
    p_e = pa * pb + (1 - pa) * (1 - pb)
    return float("nan") if p_e >= 1.0 else (p_o - p_e) / (1.0 - p_e)


def _window_sets(answers: pd.DataFrame) -> pd.Series:
    return answers.groupby(["query_id", "window_id"], sort=False)["doc_id"].agg(lambda d: tuple(sorted(d)))


def shared_answers(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Rows ``query_id, window_id, doc_id, C*_a, C*_b`` of the answers both judges gave in one shared window."""
    crit = criterion_columns(a)
    sets_a, sets_b = _window_sets(a), _window_sets(b)
    common = sets_a.index.intersection(sets_b.index)
    same = [key for key in common if sets_a[key] == sets_b[key]]
    keys = pd.MultiIndex.from_tuples(same, names=["query_id", "window_id"]) if same else None
    if keys is None:
        return pd.DataFrame(columns=["query_id", "window_id", "doc_id", *[f"{c}_a" for c in crit], *[f"{c}_b" for c in crit]])
    pick = lambda t: t.loc[pd.MultiIndex.from_frame(t[["query_id", "window_id"]]).isin(keys)]  # noqa: E731
    return pick(a).merge(pick(b), on=["query_id", "window_id", "doc_id"], suffixes=("_a", "_b"))


def judge_agreement(answers: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Agreement of every pair of judges on every criterion.

    Args:
        answers: judge name -> rubric answers ``query_id, window_id, doc_id, C1..CK`` (one row per placement).

    Returns:
        DataFrame ``judge_a, judge_b, criterion, n, agreement, yes_a, yes_b, kappa`` (one row per pair and
        criterion, plus a row ``criterion = "all"`` pooling every criterion's answers).
    """
    rows = []
    for (na, ta), (nb, tb) in combinations(answers.items(), 2):
        both = shared_answers(ta, tb)
        crit = criterion_columns(ta)
        cols = [(c, both[f"{c}_a"].to_numpy(float), both[f"{c}_b"].to_numpy(float)) for c in crit]
        cols.append(("all", np.concatenate([x for _, x, _ in cols]), np.concatenate([y for _, _, y in cols])))
        for c, x, y in cols:
            rows.append({"judge_a": na, "judge_b": nb, "criterion": c, "n": int(x.size),
                         "agreement": float(np.mean(x == y)) if x.size else float("nan"),
                         "yes_a": float(x.mean()) if x.size else float("nan"),
                         "yes_b": float(y.mean()) if y.size else float("nan"), "kappa": cohen_kappa(x, y)})
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "criterion", "n", "agreement", "yes_a", "yes_b", "kappa"])

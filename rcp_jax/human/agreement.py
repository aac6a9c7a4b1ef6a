"""Agreement of metrics with human graders (METHOD section 5, "Agreement with humans").

A **contest** shows graders one query and two systems' top-k lists (A and B); each grader grades every
shown document (0-3 by default). Each grader's own nDCG@k over the two lists picks a winner; the
majority of graders is the **verdict**. A metric (RCP-nDCG, qrel-nDCG, ...) names the list it scores
higher. This module holds the contest-level analyses (verdicts, head-to-head, hit rates, margin AUC) and
:func:`human_agreement_report`, which gathers them with the document-level ones of
:mod:`rcp_jax.human.documents`. Contest files are read by :mod:`rcp_jax.human.contests`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rcp_jax.errors import DataError
from rcp_jax.human.contests import ContestSet
from rcp_jax.human.documents import (
    document_table,
    gain_ece,
    pairwise_accuracy,
    qrel_disagreement,
    query_mean_spearman,
)
from rcp_jax.metrics import discounts

__all__ = [
    "DEFAULT_BANDS",
    "grader_verdicts",
    "contest_verdicts",
    "clustered_proportion_ci",
    "HeadToHead",
    "head_to_head",
    "hit_rates",
    "margin_auc",
    "human_agreement_report",
]

DEFAULT_BANDS = (("< 0.02", 0.0, 0.02), (">= 0.02", 0.02, math.inf), (">= 0.20", 0.20, math.inf))
_EPS = 1e-12


# ------------------------------------------------------------------------------------------ verdicts
def _pick(diff: np.ndarray, margin: float) -> np.ndarray:
    out = np.full(diff.shape, "tie", dtype=object)
    out[diff > margin + _EPS] = "a"
    out[diff < -margin - _EPS] = "b"
    return out


def grader_verdicts(cs: ContestSet, *, k: int | None = None) -> pd.DataFrame:
    """Each grader's own nDCG@k of lists A and B (their grades as gains) and the list it picks.

    The ideal list of a grader is their grades of every document shown in the contest, sorted, so both
    lists share one IDCG and the pick is the higher DCG. ``k`` defaults to the longer list.

    Returns:
        ``contest_id, grader, ndcg_a, ndcg_b, pick`` (``a``, ``b`` or ``tie``).
    """
    k = int(cs.shown["rank"].max()) if k is None else int(k)
    disc = discounts(k)
    sh = cs.shown[cs.shown["rank"] <= k]
    graded = sh.merge(cs.grades, on=["contest_id", "doc_id"])
    graded["dg"] = graded["grade"] * disc[graded["rank"].to_numpy() - 1]
    dcg = graded.pivot_table(index=["contest_id", "grader"], columns="side", values="dg", aggfunc="sum",
                             fill_value=0.0)
    ideal = (cs.grades.sort_values("grade", ascending=False)
             .assign(pos=lambda x: x.groupby(["contest_id", "grader"]).cumcount()))
    ideal = ideal[ideal.pos < k]
    ideal = ideal.assign(dg=ideal.grade * disc[ideal.pos.to_numpy()]).groupby(["contest_id", "grader"])["dg"].sum()
    idcg = ideal.reindex(dcg.index).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        na = np.where(idcg > 0, dcg.get("a", 0.0) / np.where(idcg > 0, idcg, 1), 0.0)
        nb = np.where(idcg > 0, dcg.get("b", 0.0) / np.where(idcg > 0, idcg, 1), 0.0)
    out = dcg.index.to_frame(index=False)
    out["ndcg_a"], out["ndcg_b"] = na, nb
    out["pick"] = _pick(na - nb, 0.0)
    return out


def contest_verdicts(cs: ContestSet, *, k: int | None = None, tie_margin: float = 0.0) -> pd.DataFrame:
    """Majority verdict of every contest and each metric's pick.

    The verdict is the list more graders pick; graders who see a tie abstain; equal vote counts give a
    tie. A metric picks the list it scores higher by more than ``tie_margin``; a NaN value names no list.

    Returns:
        One row per contest: ``contest_id, query_id, dataset, votes_a, votes_b, votes_tie, verdict`` and
        per metric m: ``m_margin`` (value of A minus value of B), ``m_pick`` and ``m_hit`` (pick equals
        a decisive verdict; NaN when the verdict is a tie).
    """
    gv = grader_verdicts(cs, k=k)
    votes = gv.pivot_table(index="contest_id", columns="pick", values="grader", aggfunc="count", fill_value=0)
    out = cs.contests[["contest_id", "query_id", "dataset"]].copy()
    for p in ("a", "b", "tie"):
        out[f"votes_{p}"] = out["contest_id"].map(votes[p] if p in votes.columns else {}).fillna(0).astype(int)
    out["verdict"] = _pick((out.votes_a - out.votes_b).to_numpy(dtype=np.float64), 0.0)
    decisive = out["verdict"] != "tie"
    for m in cs.metrics:
        diff = (cs.contests[f"{m}_a"] - cs.contests[f"{m}_b"]).to_numpy()
        out[f"{m}_margin"] = diff
        out[f"{m}_pick"] = _pick(np.nan_to_num(diff, nan=0.0), tie_margin)
        out[f"{m}_hit"] = np.where(decisive, (out[f"{m}_pick"] == out["verdict"]).astype(float), np.nan)
    return out


# ------------------------------------------------------------------------------------ contest stats
def clustered_proportion_ci(success, cluster, *, level: float = 0.95) -> tuple[float, float, float]:
    """Proportion with a normal interval clustered by ``cluster`` (e.g. query), G/(G-1) corrected.

    ``var = G/(G-1) * sum_g (s_g - p n_g)^2 / n^2`` with s_g successes and n_g trials of cluster g.
    Success values may be fractional (e.g. 0.5 for half credit). With one trial per cluster this is
    ``p(1-p)/(n-1)``.

    Returns:
        ``(p, low, high)``, the bounds clipped to [0, 1]; NaNs without trials; ``(p, nan, nan)`` with a
        single cluster.

    Example:
        >>> p, lo, hi = clustered_proportion_ci([1] * 134 + [0] * 51, range(185))
        >>> round(100 * p, 1), round(100 * lo, 1), round(100 * hi, 1)   # the paper's 72.4% [66.0, 78.9]
        (72.4, 66.0, 78.9)
    """
    s = np.asarray(success, dtype=np.float64)
    labels = np.asarray(list(cluster))
    if s.shape != labels.shape:
        raise DataError(f"success ({s.size}) and cluster ({labels.size}) differ in length")
    n = s.size
    if n == 0:
        return math.nan, math.nan, math.nan
    p = float(s.mean())
    codes = pd.factorize(labels)[0]
    g = int(codes.max()) + 1
    if g < 2:
        return p, math.nan, math.nan
    s_g = np.bincount(codes, weights=s)
    n_g = np.bincount(codes)
    var = g / (g - 1) * float(((s_g - p * n_g) ** 2).sum()) / n**2
    z = stats.norm.ppf(0.5 + level / 2)
    half = z * math.sqrt(var)
    return p, float(max(0.0, p - half)), float(min(1.0, p + half))


@dataclass(frozen=True)
class HeadToHead:
    """Contests where exactly one of two metrics names the human verdict.

    Attributes:
        metric, other: the two metrics.
        wins: contests ``metric`` names and ``other`` misses; n: contests exactly one names.
        share, ci_low, ci_high: wins / n with a query-clustered normal interval.
        chance: expected share if verdicts were coin flips, from the mix of contests (picks differ: 1/2;
            ``other`` tied: 1; ``metric`` tied: 0).
        n_queries: clusters; n_opposite, n_other_tied, n_metric_tied: the mix.
    """

    metric: str
    other: str
    wins: int
    n: int
    share: float
    ci_low: float
    ci_high: float
    chance: float
    n_queries: int
    n_opposite: int
    n_other_tied: int
    n_metric_tied: int


def head_to_head(verdicts: pd.DataFrame, metric: str = "rcp_ndcg", other: str = "qrel_ndcg", *,
                 level: float = 0.95) -> HeadToHead:
    """Share of contests won by ``metric`` among those where exactly one of the two names the verdict.

    Args:
        verdicts: :func:`contest_verdicts` output.
        metric, other: metric names (columns ``<name>_pick``).
        level: interval coverage.
    """
    for m in (metric, other):
        if f"{m}_pick" not in verdicts.columns:
            raise DataError(f"no picks for metric {m!r}; the contests hold "
                            f"{sorted(c[:-5] for c in verdicts.columns if c.endswith('_pick'))}")
    dec = verdicts[verdicts.verdict != "tie"]
    right_m = dec[f"{metric}_pick"] == dec.verdict
    right_o = dec[f"{other}_pick"] == dec.verdict
    one = dec[right_m ^ right_o]
    won = (one[f"{metric}_pick"] == one.verdict).to_numpy()
    pm, po = one[f"{metric}_pick"], one[f"{other}_pick"]
    chance_each = np.where(pm == "tie", 0.0, np.where(po == "tie", 1.0, 0.5))
    p, lo, hi = clustered_proportion_ci(won.astype(float), one.query_id.astype(str), level=level)
    return HeadToHead(
        metric=metric, other=other, wins=int(won.sum()), n=len(one), share=p, ci_low=lo, ci_high=hi,
        chance=float(chance_each.mean()) if len(one) else math.nan, n_queries=int(one.query_id.nunique()),
        n_opposite=int(((pm != "tie") & (po != "tie")).sum()), n_other_tied=int((po == "tie").sum()),
        n_metric_tied=int((pm == "tie").sum()),
    )


def hit_rates(verdicts: pd.DataFrame, metric: str = "rcp_ndcg", *,
              bands: Sequence[tuple[str, float, float]] = DEFAULT_BANDS, tie_credit: float = 0.5,
              level: float = 0.95) -> pd.DataFrame:
    """Agreement of a metric's pick with decisive verdicts, by the metric's margin ``|A - B|``.

    Args:
        verdicts: :func:`contest_verdicts` output.
        metric: metric name.
        bands: ``(label, lo, hi)``: contests with ``lo <= |margin| < hi`` (bands may overlap, as the paper's
            ``< 0.02``, ``>= 0.02``, ``>= 0.20``).
        tie_credit: credit of a metric tie (0.5: a coin flip).
        level: interval coverage (query-clustered).

    Returns:
        One row per band plus ``all``: ``band, n, hits, rate, ci_low, ci_high``.
    """
    if f"{metric}_pick" not in verdicts.columns:
        raise DataError(f"no picks for metric {metric!r}")
    dec = verdicts[verdicts.verdict != "tie"]
    margin = dec[f"{metric}_margin"].abs().fillna(0.0).to_numpy()
    credit = np.where(dec[f"{metric}_pick"] == "tie", tie_credit,
                      (dec[f"{metric}_pick"] == dec.verdict).astype(float))
    rows = []
    for label, lo, hi in [*bands, ("all", 0.0, math.inf)]:
        sel = (margin >= lo) & (margin < hi)
        p, l_, h_ = clustered_proportion_ci(credit[sel], dec.query_id.astype(str).to_numpy()[sel], level=level)
        rows.append({"band": label, "n": int(sel.sum()), "hits": float(credit[sel].sum()), "rate": p,
                     "ci_low": l_, "ci_high": h_})
    return pd.DataFrame(rows)


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(pos > neg) + P(pos = neg) / 2 via average ranks (Mann-Whitney U / (n1 n0))."""
    if pos.size == 0 or neg.size == 0:
        return math.nan
    ranks = stats.rankdata(np.r_[pos, neg])
    u = ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2
    return float(u / (pos.size * neg.size))


def margin_auc(cs: ContestSet, metric: str = "rcp_ndcg", *, k: int | None = None) -> tuple[float, int]:
    """How well a metric's margin separates graders' picks (Mann-Whitney AUC).

    Over every grader pick that is not a tie: the probability that a random pick of list A carries a
    larger margin ``m_A - m_B`` than a random pick of list B (ties count half). 0.5 = the margin says
    nothing about what graders prefer; 1 = it orders them perfectly.

    Returns:
        ``(auc, n_picks)``.
    """
    if metric not in cs.metrics:
        raise DataError(f"metric {metric!r} not in the contests ({', '.join(cs.metrics)})")
    gv = grader_verdicts(cs, k=k)
    gv = gv[gv.pick != "tie"].merge(cs.contests[["contest_id", f"{metric}_a", f"{metric}_b"]], on="contest_id")
    margin = (gv[f"{metric}_a"] - gv[f"{metric}_b"]).fillna(0.0).to_numpy()
    is_a = (gv.pick == "a").to_numpy()
    return _auc(margin[is_a], margin[~is_a]), len(gv)


# ---------------------------------------------------------------------------------------------- report
def human_agreement_report(
    cs: ContestSet,
    gains: pd.DataFrame | None = None,
    *,
    metric: str = "rcp_ndcg",
    other: str = "qrel_ndcg",
    gain_cols: Sequence[str] = (),
    qrel_col: str | None = None,
    k: int | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Every human-agreement statistic in one tidy table.

    Args:
        cs: the contests.
        gains: gains table for the document-level statistics (optional).
        metric, other: the two contest metrics compared head to head.
        gain_cols: gain columns of ``gains`` for pairwise accuracy, Spearman and (when in [0, 1]) ECE.
        qrel_col: qrel column of ``gains`` for the disagreement shares.
        k: cut-off of the graders' nDCG (default: list length).
        level: interval coverage.

    Returns:
        Columns ``analysis, metric, value, k, n, ci_low, ci_high``.
    """
    v = contest_verdicts(cs, k=k)
    rows = []
    h = head_to_head(v, metric, other, level=level)
    rows.append({"analysis": f"head-to-head vs {other}", "metric": metric, "value": h.share, "k": h.wins,
                 "n": h.n, "ci_low": h.ci_low, "ci_high": h.ci_high})
    rows.append({"analysis": f"chance rate vs {other}", "metric": metric, "value": h.chance, "n": h.n})
    for m in cs.metrics:
        for r in hit_rates(v, m, level=level).itertuples():
            rows.append({"analysis": f"hit rate, margin {r.band}", "metric": m, "value": r.rate, "k": r.hits,
                         "n": r.n, "ci_low": r.ci_low, "ci_high": r.ci_high})
        auc, n = margin_auc(cs, m, k=k)
        rows.append({"analysis": "margin AUC", "metric": m, "value": auc, "n": n})
    if gains is not None:
        docs = document_table(cs, gains)
        for col in gain_cols:
            acc, n = pairwise_accuracy(docs, col)
            rows.append({"analysis": "pairwise accuracy", "metric": col, "value": acc, "n": n})
            rho, nq = query_mean_spearman(docs, col)
            rows.append({"analysis": "query-mean Spearman", "metric": col, "value": rho, "n": nq})
            vals = docs[col].dropna()
            if len(vals) and vals.between(0, 1).all():
                ece, ng = gain_ece(cs, gains, col)
                rows.append({"analysis": "ECE of gain as P(useful)", "metric": col, "value": ece, "n": ng})
        if qrel_col is not None:
            dis = qrel_disagreement(docs, qrel_col)
            rows.append({"analysis": "useful without positive qrel", "metric": qrel_col,
                         "value": dis["useful_without_positive"], "n": dis["n_without_positive"]})
            rows.append({"analysis": "not useful with positive qrel", "metric": qrel_col,
                         "value": dis["not_useful_with_positive"], "n": dis["n_with_positive"]})
    return pd.DataFrame(rows, columns=["analysis", "metric", "value", "k", "n", "ci_low", "ci_high"])

"""Document-level agreement with human graders: pooled grades, pairwise accuracy, ECE, query-mean Spearman.

Document-level analyses take a separate **gains table** ``query_id, doc_id, [dataset], <gain columns>``
(e.g. the RCP gain, a 0/1 qrel, a raw BT score, and optionally ``qrel`` grades). Grades come from a
:class:`~rcp_jax.human.ContestSet`; a document is **useful** when its mean grade is at least
``USEFUL_GRADE``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.human.contests import ContestSet
from rcp_jax.stats.diagnostics import expected_calibration_error
from rcp_jax.stats.paired import spearman_rho

USEFUL_GRADE = 2.0


def document_grades(cs: ContestSet, *, useful_grade: float = USEFUL_GRADE) -> pd.DataFrame:
    """Human grades per (query, document), pooled over graders and contests.

    Returns:
        ``dataset, query_id, doc_id, n_grades, mean_grade, share_useful`` (share of grades >=
        ``useful_grade``) and ``useful`` (mean grade >= ``useful_grade``).
    """
    g = cs.grades.merge(cs.contests[["contest_id", "query_id", "dataset"]], on="contest_id")
    g = g.assign(is_useful=(g.grade >= useful_grade).astype(float))
    out = g.groupby(["dataset", "query_id", "doc_id"], sort=False).agg(
        n_grades=("grade", "size"), mean_grade=("grade", "mean"), share_useful=("is_useful", "mean")).reset_index()
    out["useful"] = out["mean_grade"] >= useful_grade
    return out


def document_table(cs: ContestSet, gains: pd.DataFrame | None = None, *,
                   useful_grade: float = USEFUL_GRADE) -> pd.DataFrame:
    """:func:`document_grades` joined with a gains table (``query_id, doc_id, [dataset], <columns>``).

    Documents without a row in ``gains`` get NaN gains (each statistic drops them).
    """
    docs = document_grades(cs, useful_grade=useful_grade)
    if gains is None:
        return docs
    for c in ("query_id", "doc_id"):
        if c not in gains.columns:
            raise DataError(f"gains table is missing column {c!r}; expected query_id, doc_id, <gain columns>")
    keys = ["query_id", "doc_id"] + (["dataset"] if "dataset" in gains.columns else [])
    g = gains.copy()
    for c in keys:
        g[c] = g[c].astype(str)
    if g.duplicated(keys).any():
        row = g[g.duplicated(keys)].iloc[0]
        raise DataError(f"gains table has two rows for document {row.doc_id!r} of query {row.query_id!r}")
    clash = [c for c in g.columns if c in docs.columns and c not in keys]
    if clash:
        raise DataError(f"gains table columns {clash} clash with the human-grade columns; rename them")
    return docs.merge(g, on=keys, how="left")


def pairwise_accuracy(docs: pd.DataFrame, gain_col: str, *, useful_col: str = "useful") -> tuple[float, int]:
    """Share of (useful, not useful) document pairs of the same query that ``gain_col`` orders correctly.

    Ties in the gain count half (so a binary qrel is penalised for every tie it cannot break). Pairs are
    pooled over queries; documents with a NaN gain are dropped.

    Returns:
        ``(accuracy, n_pairs)``.
    """
    if gain_col not in docs.columns:
        raise DataError(f"document table has no column {gain_col!r}")
    d = docs.dropna(subset=[gain_col])
    qkey = ["dataset", "query_id"] if "dataset" in d.columns else ["query_id"]
    score, pairs = 0.0, 0
    for _, q in d.groupby(qkey, sort=False):
        u = q.loc[q[useful_col].astype(bool), gain_col].to_numpy(dtype=np.float64)
        n = np.sort(q.loc[~q[useful_col].astype(bool), gain_col].to_numpy(dtype=np.float64))
        if u.size == 0 or n.size == 0:
            continue
        below = np.searchsorted(n, u, side="left")
        equal = np.searchsorted(n, u, side="right") - below
        score += float(below.sum() + 0.5 * equal.sum())
        pairs += u.size * n.size
    return (score / pairs if pairs else math.nan), pairs


def gain_ece(cs: ContestSet, gains: pd.DataFrame, gain_col: str = "gain", *,
             useful_grade: float = USEFUL_GRADE, n_bins: int = 10) -> tuple[float, int]:
    """ECE of a gain read as P(a grader rates the document useful or better), over individual grades.

    Returns:
        ``(ece, n_grades)`` over the grades of documents that have a gain.
    """
    g = cs.grades.merge(cs.contests[["contest_id", "query_id", "dataset"]], on="contest_id")
    docs = document_table(cs, gains)[["dataset", "query_id", "doc_id", gain_col]].dropna()
    g = g.merge(docs, on=["dataset", "query_id", "doc_id"])
    if g.empty:
        return math.nan, 0
    pred = g[gain_col].to_numpy(dtype=np.float64)
    if (pred < 0).any() or (pred > 1).any():
        raise DataError(f"gain column {gain_col!r} must lie in [0, 1] to be read as a probability")
    return expected_calibration_error(pred, (g.grade >= useful_grade).to_numpy(float), n_bins=n_bins), len(g)


def query_mean_spearman(docs: pd.DataFrame, gain_col: str, *, grade_col: str = "mean_grade") -> tuple[float, int]:
    """Spearman correlation, across queries, of the query-mean gain and the query-mean human grade.

    Both means are over the query's graded documents that have a gain (each document weighted once);
    they are rounded to 12 decimals so that equal means tie whatever the summation order.

    Returns:
        ``(rho, n_queries)``.
    """
    if gain_col not in docs.columns:
        raise DataError(f"document table has no column {gain_col!r}")
    d = docs.dropna(subset=[gain_col])
    qkey = ["dataset", "query_id"] if "dataset" in d.columns else ["query_id"]
    per_q = d.groupby(qkey, sort=False)[[gain_col, grade_col]].mean().round(12)
    return spearman_rho(per_q[gain_col], per_q[grade_col]), len(per_q)


def qrel_disagreement(docs: pd.DataFrame, qrel_col: str = "qrel") -> dict[str, float]:
    """How often qrels and humans disagree, in each direction.

    Args:
        docs: :func:`document_table` output with a qrel column (grade; NaN or 0 = no positive qrel).
        qrel_col: that column.

    Returns:
        ``useful_without_positive`` (share of documents without a positive qrel that humans find useful;
        paper 27.8%), ``not_useful_with_positive`` (share with a positive qrel that humans do not; paper
        37.5%), and the two denominators ``n_without_positive``, ``n_with_positive``.
    """
    if qrel_col not in docs.columns:
        raise DataError(f"document table has no column {qrel_col!r}")
    pos = docs[qrel_col].fillna(0).to_numpy(dtype=np.float64) > 0
    useful = docs["useful"].astype(bool).to_numpy()
    return {
        "useful_without_positive": float(useful[~pos].mean()) if (~pos).any() else math.nan,
        "n_without_positive": int((~pos).sum()),
        "not_useful_with_positive": float((~useful[pos]).mean()) if pos.any() else math.nan,
        "n_with_positive": int(pos.sum()),
    }

"""Agreement of metrics with human graders (METHOD section 5, "Agreement with humans").

A **contest** shows graders one query and two systems' top-k lists (A and B); each grader grades every
shown document (0-3 by default). Each grader's own nDCG@k over the two lists picks a winner; the
majority of graders is the **verdict**. A metric (RCP-nDCG, qrel-nDCG, ...) names the list it scores
higher. This module loads contest files and computes the paper's analyses.

Contest file schema
-------------------
**JSONL** (or a JSON list), one object per contest::

    {"contest_id": "c1", "query_id": "q7", "dataset": "nfcorpus",        # dataset optional
     "systems": ["sysA", "sysB"],                                        # optional
     "lists": [["d1", "d2", "d3", "d4", "d5"], ["d3", "d9", "d1", "d8", "d7"]],   # A then B, rank order
     "metrics": {"rcp_ndcg": [0.81, 0.62], "qrel_ndcg": [1.0, 1.0]},    # each metric on A and on B
     "grades": {"ann1": {"d1": 3, "d2": 0, ...}, "ann2": {...}, "ann3": {...}}}   # grader -> doc -> grade

**CSV / TSV / Parquet**, long, one row per (contest, list position, grader)::

    contest_id, query_id, [dataset], [system_a, system_b], side (a|b), rank (1..k), doc_id, grader, grade,
    <metric>_a, <metric>_b, ...        # metric columns repeat the contest's values on every row

Every grader of a contest must grade every document shown in it (a document shown in both lists is graded
once). Metric values may be NaN (e.g. qrel-nDCG without a positive qrel): that metric then names no list.
Document-level analyses take a separate **gains table** ``query_id, doc_id, [dataset], <gain columns>``
(e.g. the RCP gain, a 0/1 qrel, a raw BT score, and optionally ``qrel`` grades).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from rcp_jax.diagnostics import expected_calibration_error
from rcp_jax.errors import DataError
from rcp_jax.metrics import discounts
from rcp_jax.paired import spearman_rho

USEFUL_GRADE = 2.0
DEFAULT_BANDS = (("< 0.02", 0.0, 0.02), (">= 0.02", 0.02, math.inf), (">= 0.20", 0.20, math.inf))
_EPS = 1e-12


@dataclass(frozen=True)
class ContestSet:
    """Contests in tidy tables.

    Attributes:
        contests: one row per contest: ``contest_id, query_id, dataset, system_a, system_b`` and, per
            metric m, ``m_a`` and ``m_b`` (the metric's value of list A and of list B).
        shown: ``contest_id, side ('a' | 'b'), rank (1-based), doc_id``.
        grades: ``contest_id, grader, doc_id, grade`` (one row per grader and shown document).
        metrics: the metric names m.
    """

    contests: pd.DataFrame
    shown: pd.DataFrame
    grades: pd.DataFrame
    metrics: tuple[str, ...]


# --------------------------------------------------------------------------------------------- input
def load_contests(path: str | Path) -> ContestSet:
    """Read a contest file (``.jsonl``, ``.json``, ``.csv``, ``.tsv``, ``.parquet``; schema in the module doc)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"contest file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        if suffix == ".json":
            try:
                records = json.loads(text)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}: not valid JSON ({err})") from None
            if not isinstance(records, list):
                raise DataError(f"{path}: expected a JSON list of contest objects")
        else:
            records = []
            for i, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise DataError(f"{path} line {i}: not valid JSON ({err})") from None
        return contests_from_records(records, source=str(path))
    if suffix in (".csv", ".tsv"):
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype={"contest_id": str, "query_id": str,
                                                                               "doc_id": str, "grader": str})
    elif suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        raise DataError(f"{path}: unknown contest file type; use .jsonl, .json, .csv, .tsv or .parquet")
    return contests_from_frame(frame, source=str(path))


def contests_from_records(records: Iterable[Mapping], *, source: str = "contests") -> ContestSet:
    """Build a :class:`ContestSet` from JSON-style contest objects (schema in the module doc)."""
    c_rows, s_rows, g_rows = [], [], []
    metric_names: list[str] | None = None
    for i, rec in enumerate(records, 1):
        where = f"{source} record {i}"
        for key in ("query_id", "lists", "metrics", "grades"):
            if key not in rec:
                raise DataError(f"{where}: missing key {key!r}; a contest needs query_id, lists, metrics, grades")
        cid = str(rec.get("contest_id", i))
        where = f"{source} contest {cid!r}"
        lists = rec["lists"]
        if not isinstance(lists, Sequence) or len(lists) != 2:
            raise DataError(f"{where}: 'lists' must hold exactly two ranked lists (A, B)")
        systems = rec.get("systems") or [None, None]
        row = {"contest_id": cid, "query_id": str(rec["query_id"]), "dataset": str(rec.get("dataset", "all")),
               "system_a": systems[0], "system_b": systems[1]}
        names = sorted(rec["metrics"])
        if metric_names is None:
            metric_names = names
        elif names != metric_names:
            raise DataError(f"{where}: metrics {names} differ from the first contest's {metric_names}; give every "
                            f"contest the same metrics")
        for m, pair in rec["metrics"].items():
            if not isinstance(pair, Sequence) or len(pair) != 2:
                raise DataError(f"{where}: metric {m!r} must be [value of A, value of B]")
            row[f"{m}_a"], row[f"{m}_b"] = (np.nan if v is None else float(v) for v in pair)
        c_rows.append(row)
        for side, docs in zip("ab", lists):
            for r, d in enumerate(docs, 1):
                s_rows.append({"contest_id": cid, "side": side, "rank": r, "doc_id": str(d)})
        if not isinstance(rec["grades"], Mapping) or not rec["grades"]:
            raise DataError(f"{where}: 'grades' must map grader -> {{doc_id: grade}} with at least one grader")
        for grader, per_doc in rec["grades"].items():
            for d, g in per_doc.items():
                g_rows.append({"contest_id": cid, "grader": str(grader), "doc_id": str(d), "grade": g})
    if not c_rows:
        raise DataError(f"{source}: no contests")
    return _validated(pd.DataFrame(c_rows), pd.DataFrame(s_rows), pd.DataFrame(g_rows), metric_names or [], source)


def contests_from_frame(frame: pd.DataFrame, *, source: str = "contests") -> ContestSet:
    """Build a :class:`ContestSet` from the long table format (schema in the module doc)."""
    need = ["contest_id", "query_id", "side", "rank", "doc_id", "grader", "grade"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}; the long contest format needs "
                        f"{', '.join(need)} and <metric>_a, <metric>_b columns")
    metrics = sorted(c[:-2] for c in frame.columns
                     if c.endswith("_a") and f"{c[:-2]}_b" in frame.columns and c != "system_a")
    if not metrics:
        raise DataError(f"{source}: no metric columns; add pairs such as rcp_ndcg_a, rcp_ndcg_b")
    f = frame.copy()
    for c in ("contest_id", "query_id", "doc_id", "grader"):
        f[c] = f[c].astype(str)
    f["side"] = f["side"].astype(str).str.lower()
    bad_side = ~f["side"].isin(["a", "b"])
    if bad_side.any():
        raise DataError(f"{source}: side of contest {f.loc[bad_side, 'contest_id'].iloc[0]!r} is "
                        f"{frame.loc[bad_side, 'side'].iloc[0]!r}; use a or b")
    if "dataset" not in f.columns:
        f["dataset"] = "all"
    for c in ("system_a", "system_b"):
        if c not in f.columns:
            f[c] = None
    per_contest = ["query_id", "dataset", "system_a", "system_b"] + [f"{m}_{s}" for m in metrics for s in "ab"]
    nunique = f.groupby("contest_id")[per_contest].nunique(dropna=False)
    varying = nunique.columns[(nunique > 1).any()]
    if len(varying):
        col = varying[0]
        cid = nunique.index[nunique[col] > 1][0]
        raise DataError(f"{source}: column {col!r} varies within contest {cid!r}; it must be constant per contest")
    contests = f.groupby("contest_id", sort=False)[per_contest].first().reset_index()
    shown = f[["contest_id", "side", "rank", "doc_id"]].drop_duplicates()
    try:
        shown = shown.assign(rank=shown["rank"].astype(int))
    except (TypeError, ValueError):
        raise DataError(f"{source}: column 'rank' must hold integers 1..k") from None
    dup = shown.duplicated(["contest_id", "side", "rank"], keep=False)
    if dup.any():
        row = shown[dup].iloc[0]
        raise DataError(f"{source}: contest {row.contest_id!r} list {row.side} has two documents at rank {row['rank']}")
    grades = f[["contest_id", "grader", "doc_id", "grade"]].drop_duplicates(["contest_id", "grader", "doc_id"])
    return _validated(contests, shown, grades, metrics, source)


def _validated(contests: pd.DataFrame, shown: pd.DataFrame, grades: pd.DataFrame, metrics, source) -> ContestSet:
    dup = contests["contest_id"].duplicated()
    if dup.any():
        raise DataError(f"{source}: contest id {contests.contest_id[dup].iloc[0]!r} appears twice")
    for m in metrics:
        for s in "ab":
            vals = pd.to_numeric(contests[f"{m}_{s}"], errors="coerce")
            if (vals.isna() & contests[f"{m}_{s}"].notna()).any() or np.isinf(vals).any():
                cid = contests.contest_id[(vals.isna() & contests[f"{m}_{s}"].notna()) | np.isinf(vals)].iloc[0]
                raise DataError(f"{source}: metric {m!r} of list {s.upper()} in contest {cid!r} is not a finite number")
            contests[f"{m}_{s}"] = vals.astype(np.float64)
    shown = shown.sort_values(["contest_id", "side", "rank"]).reset_index(drop=True)
    twice = shown.duplicated(["contest_id", "side", "doc_id"])
    if twice.any():
        row = shown[twice].iloc[0]
        raise DataError(f"{source}: document {row.doc_id!r} appears twice in list {row.side.upper()} of contest "
                        f"{row.contest_id!r}")
    for cid in contests.contest_id:
        for s in "ab":
            if not ((shown.contest_id == cid) & (shown.side == s)).any():
                raise DataError(f"{source}: contest {cid!r} has an empty list {s.upper()}")
    g = pd.to_numeric(grades["grade"], errors="coerce")
    if g.isna().any() or np.isinf(g).any():
        row = grades[g.isna() | np.isinf(g)].iloc[0]
        raise DataError(f"{source}: grade of document {row.doc_id!r} by grader {row.grader!r} in contest "
                        f"{row.contest_id!r} is {row.grade!r}; grades must be numbers (e.g. 0-3)")
    grades = grades.assign(grade=g.astype(np.float64)).reset_index(drop=True)
    # every grader of a contest grades every document shown in it
    docs = shown[["contest_id", "doc_id"]].drop_duplicates()
    graders = grades[["contest_id", "grader"]].drop_duplicates()
    expected = docs.merge(graders, on="contest_id")
    have = expected.merge(grades[["contest_id", "grader", "doc_id"]], how="left", indicator=True)
    gap = have["_merge"] == "left_only"
    if gap.any():
        row = have[gap].iloc[0]
        raise DataError(f"{source}: grader {row.grader!r} did not grade document {row.doc_id!r} shown in contest "
                        f"{row.contest_id!r}; every grader must grade every shown document (drop the grader's "
                        f"review of that contest or complete it)")
    no_grader = sorted(set(contests.contest_id) - set(graders.contest_id))
    if no_grader:
        raise DataError(f"{source}: contest {no_grader[0]!r} has no grades")
    return ContestSet(contests=contests.reset_index(drop=True), shown=shown, grades=grades, metrics=tuple(metrics))


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


# ----------------------------------------------------------------------------------- document level
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

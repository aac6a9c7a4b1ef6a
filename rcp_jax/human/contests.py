"""Contest files of the human-agreement study: read JSONL / JSON / CSV / TSV / Parquet into checked tables.

A **contest** shows graders one query and two systems' top-k lists (A and B); each grader grades every
shown document (0-3 by default). The analyses are in :mod:`rcp_jax.human`.

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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.data.table_checks import show
from rcp_jax.errors import DataError


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
                        f"{row.contest_id!r} is {show(row.grade)}; grades must be numbers (e.g. 0-3)")
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

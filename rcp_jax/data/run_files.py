"""Readers and writers of runs, qrels and pools in every supported format (TREC, CSV/TSV, JSONL, Parquet).

Columns: runs ``system, query_id, doc_id, score[, dataset]``; qrels ``query_id, doc_id, grade``; pools
``query_id, doc_id, rank``. Each reader validates what it reads and names the file, line and id of a bad
row (the formats and the policies are described in :mod:`rcp_jax.data`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.data.formats import _frame, _path, _read_table, _read_whitespace, _write_table, _write_text, detect_format
from rcp_jax.data.pool_checks import check_pools
from rcp_jax.data.qrel_grades import clip_negative_grades
from rcp_jax.data.table_checks import _first_duplicate, _ids, _numbers, _rename, _unit, _where
from rcp_jax.errors import DataError


# --------------------------------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------------------------------
def read_run(
    path: str | Path, *, fmt: str | None = None, system: str | None = None, dataset: str | None = None
) -> pd.DataFrame:
    """Read a reranker run.

    Args:
        path: TREC run (``qid Q0 docid rank score tag``; the tag is the system) or a CSV/TSV/JSONL/Parquet
            table with columns ``system, query_id, doc_id, score[, dataset]``.
        fmt: override the format detected from the extension.
        system: the system name for tables without a ``system`` column (or to rename a TREC tag).
        dataset: add (or overwrite) a constant ``dataset`` column.

    Returns:
        DataFrame ``system, query_id, doc_id, score[, dataset]``: ids str, score float64, rows in file
        order, index = source line (``"line"``) or Parquet row (``"row"``).

    Raises:
        DataError: malformed lines (field count, non-numeric rank or score), NaN/inf scores, missing
            columns, empty ids, or a document scored twice by one system for one query, naming the file,
            line and ids.
    """
    path = _path(path)
    fmt = detect_format(path, fmt)
    if fmt == "trec":
        rows, lines = _read_whitespace(path, 6, "qid Q0 docid rank score tag")
        cols = ["query_id", "q0", "doc_id", "rank", "score", "system"]
        df = _frame([dict(zip(cols, r)) for r in rows], lines, path)
        if df.empty:
            df = pd.DataFrame(columns=cols, index=pd.Index([], dtype=np.int64, name="line"))
            df.attrs["source"] = str(path)
        _numbers(df, "rank", lambda r: f"document {r['doc_id']!r} for query {r['query_id']!r}")
        df = df.loc[:, ["system", "query_id", "doc_id", "score"]]
        df.attrs["source"] = str(path)
    else:
        df = _read_table(path, fmt)
        if system is not None and "system" not in df.columns:
            df["system"] = system
        df = _rename(df, ["system", "query_id", "doc_id", "score"], ["dataset"], what="a run")
    if system is not None:
        df["system"] = system
    if dataset is not None:
        df["dataset"] = dataset
    return _validate_run(df)


def _validate_run(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        raise DataError(f"{df.attrs.get('source', 'run')}: the run has no rows; expected one score per (system, query, document)")
    id_cols = ["system", "query_id", "doc_id"] + (["dataset"] if "dataset" in df.columns else [])
    df = _ids(df, id_cols, "a run")
    df["score"] = _numbers(df, "score", lambda r: f"document {r['doc_id']!r} for query {r['query_id']!r} by system {r['system']!r}")
    dup = _first_duplicate(df, ["system", "query_id", "doc_id"])
    if dup is not None:
        (sysname, q, d), labels = dup
        raise DataError(
            f"{_where(df, labels[1])}: system {sysname!r} scores document {d!r} of query {q!r} again (first at "
            f"{_unit(df)} {labels[0]}); keep one score per (system, query, document)"
        )
    return df


def concat_runs(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Several runs read by :func:`read_run` as one table, refusing two files that rank the same query under one
    system name (two TREC files with the same tag would merge into one system's ranking, or clash).

    A system may be split over files by query (one file per query range); a (system, query) pair must come
    from one file.

    Returns:
        The concatenated run (index reset; ``attrs["sources"]``: the files, in order).

    Raises:
        DataError: a system ranks a query in two files, naming both files, their lines, and the fix.
    """
    if not frames:
        raise DataError("no run files given")
    seen: dict[tuple[str, str], int] = {}
    for i, df in enumerate(frames):
        pairs = df[["system", "query_id"]].astype(str).drop_duplicates()
        for label, sysname, q in zip(pairs.index, pairs["system"], pairs["query_id"]):
            j = seen.setdefault((sysname, q), i)
            if j == i:
                continue
            first, other = frames[j], df
            at = first.index[(first["system"].astype(str) == sysname) & (first["query_id"].astype(str) == q)][0]
            a, b = first.attrs.get("source", f"run {j + 1}"), other.attrs.get("source", f"run {i + 1}")
            raise DataError(
                f"system {sysname!r} ranks query {q!r} in two run files: {a} ({_unit(first)} {at}) and {b} "
                f"({_unit(other)} {label}); a TREC run's system is its tag (the 6th column), so two runs with the same "
                f"tag would be merged into one ranking. Give each run its own tag (e.g. rename it in {b}: "
                f"awk '{{$6=\"{sysname}_2\"}}1' {b} > renamed.trec), or name each file on the command line "
                f"(rcp-jax evaluate --runs NAME=PATH), or a table's 'system' column its own name"
            )
    out = pd.concat(frames, ignore_index=True)
    out.attrs["sources"] = [str(f.attrs.get("source", "")) for f in frames]
    return out


def write_run(run: pd.DataFrame, path: str | Path, *, fmt: str | None = None) -> Path:
    """Write a run; TREC ranks are 1..n by descending score within (system, query) (ties: input order)."""
    path = _path(path)
    fmt = detect_format(path, fmt)
    cols = ["system", "query_id", "doc_id", "score"] + (["dataset"] if "dataset" in run.columns else [])
    df = run.loc[:, cols].reset_index(drop=True)
    if fmt == "trec":
        order = df.assign(_i=np.arange(len(df))).sort_values(["system", "query_id", "score", "_i"], ascending=[True, True, False, True], kind="stable")
        order["rank"] = order.groupby(["system", "query_id"], sort=False).cumcount() + 1
        lines = [f"{q} Q0 {d} {r} {float(s)!r} {t}\n" for q, d, r, s, t in zip(order.query_id, order.doc_id, order["rank"], order.score.astype(float), order.system)]
        _write_text(path, "".join(lines))
    else:
        _write_table(df, path, fmt)
    return path


# --------------------------------------------------------------------------------------------------
# qrels
# --------------------------------------------------------------------------------------------------
def read_qrels(path: str | Path, *, fmt: str | None = None) -> pd.DataFrame:
    """Read relevance judgements.

    Args:
        path: TREC qrels (``qid iteration docid grade``), BEIR ``qrels/*.tsv`` (header ``query-id
            corpus-id score``) or a CSV/TSV/JSONL/Parquet table ``query_id, doc_id, grade``.

    Returns:
        DataFrame ``query_id, doc_id, grade`` (grade float64, never below 0), index = source line;
        ``attrs["negative_grades"]`` = the number of rows whose grade was raised to 0.

    Raises:
        DataError: malformed lines, non-numeric grades, or a (query, document) judged twice.
    Warns:
        QrelsWarning: once, when grades below 0 were read; they count as non-relevant (0), as trec_eval
            does (see :mod:`rcp_jax.data.qrel_grades`).
    """
    path = _path(path)
    fmt = detect_format(path, fmt)
    if fmt == "trec":
        rows, lines = _read_whitespace(path, 4, "qid iteration docid grade")
        df = _frame([{"query_id": r[0], "doc_id": r[2], "grade": r[3]} for r in rows], lines, path)
        if df.empty:
            df = pd.DataFrame(columns=["query_id", "doc_id", "grade"], index=pd.Index([], dtype=np.int64, name="line"))
            df.attrs["source"] = str(path)
    else:
        df = _rename(_read_table(path, fmt), ["query_id", "doc_id", "grade"], what="qrels")
    df = _ids(df, ["query_id", "doc_id"], "qrels")
    grade = _numbers(df, "grade", lambda r: f"document {r['doc_id']!r} for query {r['query_id']!r}")
    negative = np.flatnonzero(grade < 0)
    if len(negative):
        i = int(negative[0])
        first = (f"{_unit(df)} {df.index[i]}: document {df['doc_id'].iloc[i]!r} of query {df['query_id'].iloc[i]!r}, "
                 f"grade {float(grade[i]):g}")
        grade = clip_negative_grades(grade, str(path), first)
    df["grade"] = grade
    df.attrs["negative_grades"] = len(negative)
    dup = _first_duplicate(df, ["query_id", "doc_id"])
    if dup is not None:
        (q, d), labels = dup
        raise DataError(
            f"{_where(df, labels[1])}: document {d!r} of query {q!r} is judged again (first at {_unit(df)} {labels[0]}); "
            "keep one grade per (query, document)"
        )
    return df


def write_qrels(qrels: pd.DataFrame, path: str | Path, *, fmt: str | None = None) -> Path:
    """Write qrels as TREC (``qid 0 docid grade``; integral grades without decimals) or a table."""
    path = _path(path)
    fmt = detect_format(path, fmt)
    df = qrels.loc[:, ["query_id", "doc_id", "grade"]].reset_index(drop=True)
    if fmt == "trec":
        fmtg = lambda g: str(int(g)) if float(g).is_integer() else repr(float(g))  # noqa: E731
        _write_text(path, "".join(f"{q} 0 {d} {fmtg(g)}\n" for q, d, g in zip(df.query_id, df.doc_id, df.grade)))
    else:
        _write_table(df, path, fmt)
    return path


# --------------------------------------------------------------------------------------------------
# pools
# --------------------------------------------------------------------------------------------------
def read_pools(path: str | Path, *, fmt: str | None = None) -> pd.DataFrame:
    """Read judged pools (the candidates of each query, in pool order).

    Args:
        path: a CSV/TSV/JSONL/Parquet table ``query_id, doc_id[, rank]`` (file order is pool order
            unless a ``rank`` column is given), or a TREC run (pool order = its rank field).

    Returns:
        DataFrame ``query_id, doc_id, rank`` (rank 1..n per query), sorted by query (first appearance)
        then rank; index = source line.

    Raises:
        DataError: no rows, or a document listed twice in one pool (naming file, lines, ids).
    Warns:
        PoolWarning: a pool of a single document.
    """
    path = _path(path)
    fmt = detect_format(path, fmt)
    if fmt == "trec":
        rows, lines = _read_whitespace(path, 6, "qid Q0 docid rank score tag")
        df = _frame([{"query_id": r[0], "doc_id": r[2], "rank": r[3]} for r in rows], lines, path)
    else:
        df = _read_table(path, fmt)
        df = _rename(df, ["query_id", "doc_id"], ["rank"], what="pools")
    if df.empty:
        raise DataError(f"{path}: no pools (the file has no rows); expected query_id, doc_id per pooled document")
    df = _ids(df, ["query_id", "doc_id"], "pools")
    if "rank" in df.columns:
        key = _numbers(df, "rank", lambda r: f"document {r['doc_id']!r} of query {r['query_id']!r}")
    else:
        key = np.arange(len(df), dtype=np.float64)
    qorder = pd.factorize(df["query_id"])[0]
    df = df.iloc[np.lexsort((np.arange(len(df)), key, qorder))].copy()
    df["rank"] = df.groupby("query_id", sort=False).cumcount().to_numpy() + 1
    df = df.loc[:, ["query_id", "doc_id", "rank"]]
    df.attrs["source"] = str(path)
    check_pools(df)
    return df


def write_pools(pools: pd.DataFrame, path: str | Path, *, fmt: str | None = None) -> Path:
    """Write pools as a table ``query_id, doc_id, rank`` or a TREC run (score = -rank, tag ``pool``)."""
    path = _path(path)
    fmt = detect_format(path, fmt)
    df = pools.loc[:, ["query_id", "doc_id"]].reset_index(drop=True)
    df["rank"] = pools["rank"].to_numpy() if "rank" in pools.columns else df.groupby("query_id", sort=False).cumcount() + 1
    if fmt == "trec":
        _write_text(path, "".join(f"{q} Q0 {d} {r} {-int(r)} pool\n" for q, d, r in zip(df.query_id, df.doc_id, df["rank"])))
    else:
        _write_table(df, path, fmt)
    return path

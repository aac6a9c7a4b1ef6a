"""Readers, writers and validators for runs, qrels, pools, corpora and queries.

Every reader returns a pandas DataFrame with string ids, and remembers where each row came from: the
index is the 1-based **line** of the row in its file (``index.name == "line"``; for Parquet the
1-based ``"row"``) and ``df.attrs["source"]`` is the file path. Validators use both to name the file,
the line and the id in every :class:`~rcp_jax.errors.DataError`, and to say how to fix it.

========  =================================================================  ============================
table     columns                                                            readers
========  =================================================================  ============================
runs      ``system, query_id, doc_id, score[, dataset]`` (higher = better)   :func:`read_run`
qrels     ``query_id, doc_id, grade`` (float)                                :func:`read_qrels`
pools     ``query_id, doc_id, rank`` (rank 1..n per query, pool order)       :func:`read_pools`
corpus    ``doc_id, title, text``                                            :func:`read_corpus`
queries   ``query_id, text``                                                 :func:`read_queries`
========  =================================================================  ============================

File formats (``fmt=``; detected from the extension, optionally followed by ``.gz``):

- ``trec``: whitespace-separated, no header. Runs ``qid Q0 docid rank score tag`` (tag = system);
  qrels ``qid iteration docid grade``. Extensions ``.trec .run .txt .qrels``.
- ``csv`` / ``tsv``: a header row naming the columns (``.csv``, ``.tsv``). BEIR's qrels header
  ``query-id corpus-id score`` is accepted, as are ``_id`` for ids in corpora and queries.
- ``jsonl``: one JSON object per line (``.jsonl .ndjson``); BEIR's ``corpus.jsonl`` (``_id, title,
  text``) and ``queries.jsonl`` (``_id, text``).
- ``parquet`` (``.parquet .pq``).

Collections: :func:`read_beir` reads a BEIR folder (``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``); :func:`read_rows` reads JSONL rows, one query per line with ``query_id, query,
doc_ids, docs[, qrels][, excluded]`` (the rows are the query's pool, in order).

Policies: a pool of one document is allowed with a :class:`PoolWarning` (it can be rubric-judged but
has no tournament); an empty pool is an error. A document with neither text nor title has "missing
text" and is refused unless ``missing_text="warn"`` (keep it) or ``"drop"``.

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "bm25.trec").write_text("q1 Q0 d1 1 12.5 bm25\\nq1 Q0 d2 2 11.0 bm25\\n")
    >>> run = read_run(d / "bm25.trec")
    >>> run.to_dict("list")
    {'system': ['bm25', 'bm25'], 'query_id': ['q1', 'q1'], 'doc_id': ['d1', 'd2'], 'score': [12.5, 11.0]}
    >>> _ = (d / "bad.trec").write_text("q1 Q0 d1 1 12.5 bm25\\nq1 Q0 d2 2 high bm25\\n")
    >>> read_run(d / "bad.trec")
    Traceback (most recent call last):
    ...
    rcp_jax.errors.DataError: ...bad.trec:2: score 'high' of document 'd2' for query 'q1' by system 'bm25' is not a finite number; ...
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.io import atomic_write_bytes

__all__ = [
    "FORMATS",
    "PoolWarning",
    "Collection",
    "detect_format",
    "read_run",
    "read_qrels",
    "read_pools",
    "read_corpus",
    "read_queries",
    "read_beir",
    "read_rows",
    "write_run",
    "write_qrels",
    "write_pools",
    "check_pools",
    "check_run_against_pools",
    "check_pools_against_collection",
]

FORMATS = ("trec", "csv", "tsv", "jsonl", "parquet")
_EXTENSIONS = {
    ".trec": "trec", ".run": "trec", ".txt": "trec", ".qrels": "trec",
    ".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".parquet": "parquet", ".pq": "parquet",
}
_ALIASES = {
    "query_id": ("query_id", "query-id", "qid", "_id"),
    "doc_id": ("doc_id", "corpus-id", "docid", "_id"),
    "grade": ("grade", "score", "relevance", "label"),
}
_MISSING_TEXT = ("error", "warn", "drop")


class PoolWarning(UserWarning):
    """A pool is usable but degenerate (one document: no tournament possible)."""


# --------------------------------------------------------------------------------------------------
# low level: formats, bytes, tables with line numbers
# --------------------------------------------------------------------------------------------------
def detect_format(path: str | Path, fmt: str | None = None) -> str:
    """The format of ``path``: ``fmt`` if given, else from its extension (``.gz`` is looked through)."""
    if fmt is not None:
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise DataError(f"{path}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if suffixes and suffixes[-1] in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1]]
    raise DataError(
        f"{path}: cannot tell the format from the extension {''.join(Path(path).suffixes) or '(none)'!r}; "
        f"pass fmt= one of {', '.join(FORMATS)}"
    )


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a file")
    data = path.read_bytes()
    if path.suffix.lower() == ".gz":
        try:
            data = gzip.decompress(data)
        except OSError as err:
            raise DataError(f"{path}: not a valid gzip file ({err}); decompress it or fix the extension") from None
    return data


def _read_text(path: Path) -> str:
    """The file as text, strictly UTF-8 (a leading BOM is dropped); bad bytes name line and offset."""
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        bad = data[err.start : err.start + 4]
        raise DataError(
            f"{path}:{line}: byte offset {err.start} ({bad!r}) is not valid UTF-8; re-encode the file as UTF-8 "
            f"(e.g. `iconv -f latin1 -t utf-8`)"
        ) from None
    return text.removeprefix("\ufeff")


def _frame(records: list[dict], lines: list[int], path: Path, unit: str = "line") -> pd.DataFrame:
    df = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    df.index = pd.Index(np.asarray(lines, dtype=np.int64), name=unit)
    df.attrs["source"] = str(path)
    return df


def _read_delimited(path: Path, delimiter: str) -> pd.DataFrame:
    reader = csv.reader(io.StringIO(_read_text(path), newline=""), delimiter=delimiter)
    header: list[str] | None = None
    records, lines = [], []
    prev = 0
    for row in reader:
        start, prev = prev + 1, reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if header is None:
            header = [c.strip() for c in row]
            continue
        if len(row) != len(header):
            raise DataError(
                f"{path}:{start}: {len(row)} fields, but the header names {len(header)} ({', '.join(header)}); "
                "fix the line (quote fields that contain the delimiter)"
            )
        records.append(dict(zip(header, row)))
        lines.append(start)
    df = _frame(records, lines, path)
    if header is not None and df.empty:
        df = pd.DataFrame(columns=header, index=pd.Index([], dtype=np.int64, name="line"))
        df.attrs["source"] = str(path)
    return df


def _read_jsonl(path: Path) -> pd.DataFrame:
    records, lines = [], []
    for i, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{i}: not valid JSON ({err.msg} at column {err.colno}); one JSON object per line") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{i}: expected a JSON object, got {type(obj).__name__}")
        records.append(obj)
        lines.append(i)
    return _frame(records, lines, path)


def _read_parquet(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise DataError(f"{path}: no such file")
    try:
        df = pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several unrelated types
        raise DataError(f"{path}: cannot read as Parquet ({type(err).__name__}: {err})") from None
    df = df.reset_index(drop=True)
    df.index = pd.Index(np.arange(1, len(df) + 1), name="row")
    df.attrs["source"] = str(path)
    return df


def _table_format(path: Path, fmt: str | None, what: str) -> str:
    fmt = detect_format(path, fmt)
    if fmt == "trec":
        raise DataError(f"{path}: {what} cannot be read from a TREC file; use JSONL, CSV, TSV or Parquet (pass fmt=)")
    return fmt


def _read_table(path: Path, fmt: str) -> pd.DataFrame:
    if fmt == "csv":
        return _read_delimited(path, ",")
    if fmt == "tsv":
        return _read_delimited(path, "\t")
    if fmt == "jsonl":
        return _read_jsonl(path)
    if fmt == "parquet":
        return _read_parquet(path)
    raise AssertionError(fmt)


def _read_whitespace(path: Path, n_fields: int, layout: str) -> tuple[list[list[str]], list[int]]:
    rows, lines = [], []
    for i, line in enumerate(_read_text(path).splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != n_fields:
            raise DataError(
                f"{path}:{i}: {len(parts)} fields ({line.strip()[:80]!r}), expected {n_fields}: {layout}; "
                "fix or remove the line"
            )
        rows.append(parts)
        lines.append(i)
    return rows, lines


def _where(df: pd.DataFrame, label, what: str = "table") -> str:
    """``file:line`` (or ``file, row n``) of the row labelled ``label``."""
    source = df.attrs.get("source")
    unit = df.index.name
    if source and unit == "line":
        return f"{source}:{label}"
    if source:
        return f"{source}, {unit or 'row'} {label}"
    return f"{what} row {label}"


def _show(value) -> str:
    """``repr`` of a cell, with NumPy scalars shown as plain Python values."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _unit(df: pd.DataFrame) -> str:
    return df.index.name or "row"


def _id_string(value) -> str | None:
    """A cell as an id string; integral floats (from JSON or Parquet) lose their '.0'; None if missing."""
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return str(int(value))
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    s = str(value).strip()
    return s if s else None


def _rename(df: pd.DataFrame, wanted: Sequence[str], optional: Sequence[str] = (), what: str = "") -> pd.DataFrame:
    """Select ``wanted`` (+ present ``optional``) columns, accepting the aliases of :data:`_ALIASES`."""
    mapping = {}
    for col in list(wanted) + list(optional):
        for alias in _ALIASES.get(col, (col,)):
            if alias in df.columns and alias not in mapping:
                mapping[alias] = col
                break
    got = set(mapping.values())
    missing = [c for c in wanted if c not in got]
    if missing:
        raise DataError(
            f"{df.attrs.get('source', what)}: missing column(s) {missing} for {what}; expected "
            f"{list(wanted)}{' [+ ' + ', '.join(optional) + ']' if optional else ''}, got {list(df.columns)}"
        )
    out = df.loc[:, list(mapping)].rename(columns=mapping)
    out.attrs = dict(df.attrs)
    return out


def _ids(df: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    for col in columns:
        values = [_id_string(v) for v in df[col].tolist()]
        bad = [i for i, v in enumerate(values) if v is None]
        if bad:
            label = df.index[bad[0]]
            raise DataError(f"{_where(df, label)}: empty {col} in {what}; every row needs a {col}")
        df[col] = pd.Series(values, index=df.index, dtype=str)
    return df


def _numbers(df: pd.DataFrame, col: str, describe) -> np.ndarray:
    """Column ``col`` as float64, refusing text, NaN and infinities; ``describe(row)`` names the row."""
    raw = df[col]
    values = pd.to_numeric(raw.map(lambda v: v.strip() if isinstance(v, str) else v), errors="coerce")
    values = values.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        label = df.index[i]
        raise DataError(
            f"{_where(df, label)}: {col} {_show(raw.iloc[i])} of {describe(df.iloc[i])} is not a finite number; "
            f"fix the value or drop the {_unit(df)}"
        )
    return values


def _first_duplicate(df: pd.DataFrame, keys: Sequence[str]):
    dup = df.duplicated(list(keys), keep=False)
    if not dup.any():
        return None
    rows = df.loc[dup]
    first_key = tuple(rows.iloc[0][k] for k in keys)
    same = rows[np.all([rows[k] == v for k, v in zip(keys, first_key)], axis=0)]
    return first_key, list(same.index[:2])


def _path(path) -> Path:
    return Path(path).expanduser()


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
        DataFrame ``query_id, doc_id, grade`` (grade float64), index = source line.

    Raises:
        DataError: malformed lines, non-numeric grades, or a (query, document) judged twice.
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
    df["grade"] = _numbers(df, "grade", lambda r: f"document {r['doc_id']!r} for query {r['query_id']!r}")
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


def check_pools(pools: pd.DataFrame, queries: Iterable[str] | None = None) -> None:
    """Validate pools ``query_id, doc_id[, rank]``.

    Args:
        pools: the pools (e.g. from :func:`read_pools` or ``rcp_jax.pools.build_pool``).
        queries: query ids that must each have a pool (a query without one has an empty pool).

    Raises:
        DataError: a document twice in one pool; an empty pool (a listed query has no documents, or
            there are no rows at all).
    Warns:
        PoolWarning: pools of one document (they get rubric windows but no tournament).
    """
    if pools.empty:
        raise DataError(f"{pools.attrs.get('source', 'pools')}: no pools (no rows); every judged query needs a pool")
    dup = _first_duplicate(pools.astype({"query_id": str, "doc_id": str}), ["query_id", "doc_id"])
    if dup is not None:
        (q, d), labels = dup
        raise DataError(
            f"{_where(pools, labels[1], 'pools')}: document {d!r} appears twice in the pool of query {q!r} (also at "
            f"{pools.index.name or 'row'} {labels[0]}); list each pooled document once"
        )
    sizes = pools.groupby(pools["query_id"].astype(str), sort=False).size()
    if queries is not None:
        empty = [str(q) for q in queries if str(q) not in sizes.index]
        if empty:
            raise DataError(
                f"{pools.attrs.get('source', 'pools')}: query {empty[0]!r} has an empty pool ({len(empty)} "
                f"such queries, e.g. {empty[:5]}); build a pool for it or drop the query"
            )
    singles = sizes[sizes == 1]
    if len(singles):
        q = singles.index[0]
        label = pools.index[np.flatnonzero(pools["query_id"].astype(str).to_numpy() == q)[0]]
        warnings.warn(
            f"{_where(pools, label, 'pools')}: the pool of query {q!r} has a single document ({len(singles)} such "
            f"pools, e.g. {list(singles.index[:5])}); it can get rubric answers but no tournament comparison",
            PoolWarning, stacklevel=2,
        )


def check_pools_against_collection(
    pools: pd.DataFrame,
    *,
    corpus: pd.DataFrame | None = None,
    queries: pd.DataFrame | None = None,
    min_size: int = 1,
) -> None:
    """Check pools against the collection they will be judged from, before any judge call.

    Args:
        pools: ``query_id, doc_id[, rank]`` (e.g. from :func:`read_pools`; its index and
            ``attrs["source"]`` locate offending lines).
        corpus: ``doc_id, ...``: every pooled document needs its text here.
        queries: ``query_id, ...``: every pooled query needs its text here.
        min_size: the smallest pool allowed (the RCP pipeline needs 2: a tournament compares documents).

    Raises:
        DataError: naming the pools file, line and id, and the fix.
    """
    q = pools["query_id"].astype(str).to_numpy()
    d = pools["doc_id"].astype(str).to_numpy()
    for ids, table, col, what in ((q, queries, "query_id", "queries"), (d, corpus, "doc_id", "corpus")):
        if table is None:
            continue
        unknown = ~np.isin(ids, table[col].astype(str).to_numpy())
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            name = f"query {q[i]!r}" if col == "query_id" else f"document {d[i]!r} of query {q[i]!r}"
            raise DataError(
                f"{_where(pools, pools.index[i], 'pools')}: {name} is not in the {what} "
                f"({table.attrs.get('source', what)}; {len(set(ids[unknown]))} such ids, e.g. "
                f"{sorted(set(ids[unknown]))[:5]}); fix the id in the pools or add the missing "
                f"{'query' if col == 'query_id' else 'document'} to the {what}"
            )
    sizes = pools.groupby(pools["query_id"].astype(str), sort=False).size()
    small = sizes[sizes < min_size]
    if len(small):
        qid = small.index[0]
        i = int(np.flatnonzero(q == qid)[0])
        raise DataError(
            f"{_where(pools, pools.index[i], 'pools')}: the pool of query {qid!r} has {int(small.iloc[0])} "
            f"document(s) ({len(small)} such pools, e.g. {list(small.index[:5])}); at least {min_size} are "
            "needed (the tournament compares documents, and a query is calibrated through it): add candidates "
            "to the pool or drop the query"
        )


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


def check_run_against_pools(
    run: pd.DataFrame, pools: pd.DataFrame, *, unknown_docs: str = "error", against: str | None = None
) -> None:
    """Check that a run scores only pooled queries and documents.

    Args:
        run: ``system, query_id, doc_id, score`` (e.g. from :func:`read_run`; its index and
            ``attrs["source"]`` locate offending lines).
        pools: ``query_id, doc_id[, rank]``.
        unknown_docs: a scored document outside its query's pool: ``"error"`` (default), ``"warn"``
            or ``"ignore"`` (protocols such as ``bright`` and ``plain`` rank unpooled documents with
            gain 0).
        against: what the pools are, for messages (default: ``pools.attrs["source"]`` or "the pools").

    Raises:
        DataError: a query of the run has no pool, or (``unknown_docs="error"``) a document is not in
            its query's pool; the message names the file, line, system and ids.
    """
    if unknown_docs not in ("error", "warn", "ignore"):
        raise ValueError(f"unknown_docs must be 'error', 'warn' or 'ignore', got {unknown_docs!r}")
    rq = run["query_id"].astype(str).to_numpy()
    rd = run["doc_id"].astype(str).to_numpy()
    pq = pools["query_id"].astype(str)
    where_pools = against or pools.attrs.get("source") or "the pools"
    pooled_queries = set(pq)
    missing_q = ~np.isin(rq, list(pooled_queries))
    if missing_q.any():
        i = int(np.flatnonzero(missing_q)[0])
        n = len(set(rq[missing_q]))
        raise DataError(
            f"{_where(run, run.index[i], 'run')}: query {rq[i]!r} (system {str(run['system'].iloc[i])!r}) has no pool "
            f"in {where_pools} ({n} such queries, e.g. {sorted(set(rq[missing_q]))[:5]}); fix the query id, judge "
            "that query, or drop it from the run"
        )
    pairs = pd.MultiIndex.from_arrays([pq.to_numpy(), pools["doc_id"].astype(str).to_numpy()])
    outside = ~pd.MultiIndex.from_arrays([rq, rd]).isin(pairs)
    if outside.any() and unknown_docs != "ignore":
        i = int(np.flatnonzero(outside)[0])
        msg = (
            f"{_where(run, run.index[i], 'run')}: system {str(run['system'].iloc[i])!r} scores document {rd[i]!r} "
            f"of query {rq[i]!r}, which is not in that query's pool in {where_pools} ({int(outside.sum())} such rows)"
        )
        if unknown_docs == "error":
            raise DataError(msg + "; score only pooled documents, or pass unknown_docs='ignore' (on the command "
                            "line --unknown-docs ignore) for protocols that rank unpooled documents with gain 0")
        warnings.warn(msg, PoolWarning, stacklevel=2)


# --------------------------------------------------------------------------------------------------
# corpora, queries, collections
# --------------------------------------------------------------------------------------------------
def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _missing_text(df: pd.DataFrame, missing_text: str) -> pd.DataFrame:
    if missing_text not in _MISSING_TEXT:
        raise ValueError(f"missing_text must be one of {_MISSING_TEXT}, got {missing_text!r}")
    empty = np.array([_blank(t) and _blank(h) for t, h in zip(df["text"], df["title"])], dtype=bool)
    if not empty.any():
        return df
    ids = df.loc[empty, "doc_id"].tolist()
    where = _where(df, df.index[np.flatnonzero(empty)[0]])
    msg = f"{where}: document {ids[0]!r} has no text and no title ({len(ids)} such documents: {ids[:10]})"
    if missing_text == "error":
        raise DataError(msg + "; the judge cannot read an empty document: fix the corpus, or pass "
                        "missing_text='drop' (remove them) or 'warn' (keep them empty)")
    warnings.warn(msg + ("; dropped" if missing_text == "drop" else "; kept as empty documents"), UserWarning, stacklevel=3)
    if missing_text == "warn":
        return df
    out = df.loc[~empty].copy()
    out.attrs = {**df.attrs, "dropped": [str(d) for d in ids]}
    return out


def read_corpus(path: str | Path, *, fmt: str | None = None, missing_text: str = "error") -> pd.DataFrame:
    """Read documents: BEIR ``corpus.jsonl`` (``_id, title, text``) or a table ``doc_id, text[, title]``.

    Args:
        missing_text: what to do with a document that has neither text nor title: ``"error"``
            (default), ``"warn"`` (keep it, warn) or ``"drop"`` (remove it, warn; the dropped ids are
            listed in ``attrs["dropped"]``, and :func:`read_beir` keeps their qrels, :func:`read_rows`
            removes them from the pools).

    Returns:
        DataFrame ``doc_id, title, text`` (str; a missing title is ""), index = source line.

    Raises:
        DataError: a duplicate or empty id, missing columns, a missing text (by default), bad UTF-8.
    """
    path = _path(path)
    df = _rename(_read_table(path, _table_format(path, fmt, "a corpus")), ["doc_id", "text"], ["title"], what="a corpus")
    if "title" not in df.columns:
        df["title"] = ""
    df = _ids(df, ["doc_id"], "the corpus")
    dup = _first_duplicate(df, ["doc_id"])
    if dup is not None:
        (d,), labels = dup
        raise DataError(f"{_where(df, labels[1])}: document id {d!r} appears again (first at {_unit(df)} {labels[0]}); ids must be unique")
    df = _missing_text(df, missing_text)
    for col in ("title", "text"):
        df[col] = ["" if _blank(v) else str(v) for v in df[col]]
    return df.loc[:, ["doc_id", "title", "text"]]


def read_queries(path: str | Path, *, fmt: str | None = None) -> pd.DataFrame:
    """Read queries: BEIR ``queries.jsonl`` (``_id, text``) or a table ``query_id, text``.

    Returns:
        DataFrame ``query_id, text``, index = source line.

    Raises:
        DataError: a duplicate or empty id, or a query without text.
    """
    path = _path(path)
    df = _rename(_read_table(path, _table_format(path, fmt, "queries")), ["query_id", "text"], what="queries")
    df = _ids(df, ["query_id"], "the queries")
    dup = _first_duplicate(df, ["query_id"])
    if dup is not None:
        (q,), labels = dup
        raise DataError(f"{_where(df, labels[1])}: query id {q!r} appears again (first at {_unit(df)} {labels[0]}); ids must be unique")
    blank = [i for i, t in enumerate(df["text"]) if _blank(t)]
    if blank:
        raise DataError(f"{_where(df, df.index[blank[0]])}: query {df['query_id'].iloc[blank[0]]!r} has no text; give every query its text")
    df["text"] = df["text"].astype(str)
    return df


@dataclass(frozen=True)
class Collection:
    """A test collection as tables (see the module docstring for the columns).

    Attributes:
        corpus, queries, qrels: DataFrames; qrels may be empty.
        pools: ``query_id, doc_id, rank`` when the source fixes the pools (JSONL rows), else None.
        excluded: ``query_id, doc_id`` ids to leave out of rankings and ideals (empty if none).
    """

    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    pools: pd.DataFrame | None = None
    excluded: pd.DataFrame | None = None


def _check_qrels_ids(qrels: pd.DataFrame, queries: pd.DataFrame, corpus: pd.DataFrame) -> None:
    for col, table, what in (("query_id", queries, "queries"), ("doc_id", corpus, "corpus")):
        known = set(table[col]) | set(table.attrs.get("dropped", ()))  # dropped documents keep their qrels
        bad = ~qrels[col].isin(known).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{_where(qrels, qrels.index[i])}: {col} {qrels[col].iloc[i]!r} is not in the {what} "
                f"({table.attrs.get('source', what)}; {int(bad.sum())} such qrels); fix the ids or pass strict=False"
            )


def read_beir(folder: str | Path, *, split: str = "test", missing_text: str = "error", strict: bool = True) -> Collection:
    """Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

    Args:
        folder: the dataset folder. split: the qrels file name (without ``.tsv``).
        missing_text: see :func:`read_corpus`.
        strict: refuse qrels whose query or document id is unknown (else keep them).

    Returns:
        :class:`Collection` (pools None: build them with ``rcp_jax.pools.build_pool``).
    """
    folder = _path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory; a BEIR dataset is a folder with corpus.jsonl, queries.jsonl, qrels/")
    corpus = read_corpus(folder / "corpus.jsonl", missing_text=missing_text)
    queries = read_queries(folder / "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise DataError(f"{qrels_path}: no such file; available splits: {found or 'none'}")
    qrels = read_qrels(qrels_path, fmt="tsv")
    if strict:
        _check_qrels_ids(qrels, queries, corpus)
    return Collection(corpus=corpus, queries=queries, qrels=qrels)


def read_rows(path: str | Path, *, missing_text: str = "error") -> Collection:
    """Read JSONL rows, one query per line: ``query_id, query, doc_ids, docs[, qrels][, excluded]``.

    ``doc_ids`` (the pool, in order) and ``docs`` (their texts) have equal lengths; ``qrels`` maps
    doc id -> grade (positives outside the pool are kept, for qrel-nDCG ideals); ``excluded`` lists ids
    to leave out. A document id shared by two queries must have the same text.

    Returns:
        :class:`Collection` with ``pools`` set; every table's index is the source line.
    """
    path = _path(path)
    raw = _read_jsonl(path)
    if raw.empty:
        raise DataError(f"{path}: no rows; expected one JSON object per query")
    qrecs, drecs, precs, rrecs, xrecs = [], [], [], [], []
    qlines, dlines, plines, rlines, xlines = [], [], [], [], []
    texts: dict[str, tuple[str, int]] = {}
    for line, row in zip(raw.index, raw.to_dict("records")):
        for key in ("query_id", "query", "doc_ids", "docs"):
            if key not in row:
                raise DataError(f"{path}:{line}: row is missing {key!r}; rows need query_id, query, doc_ids, docs")
        q = _id_string(row["query_id"])
        if q is None:
            raise DataError(f"{path}:{line}: empty query_id")
        if _blank(row["query"]):
            raise DataError(f"{path}:{line}: query {q!r} has no text")
        doc_ids, docs = row["doc_ids"], row["docs"]
        if not isinstance(doc_ids, list) or not isinstance(docs, list) or len(doc_ids) != len(docs):
            raise DataError(
                f"{path}:{line}: query {q!r}: doc_ids and docs must be lists of equal length "
                f"(got {len(doc_ids) if isinstance(doc_ids, list) else type(doc_ids).__name__} and "
                f"{len(docs) if isinstance(docs, list) else type(docs).__name__})"
            )
        if not doc_ids:
            raise DataError(f"{path}:{line}: query {q!r} has an empty pool (doc_ids is []); give it documents or drop the row")
        qrecs.append({"query_id": q, "text": str(row["query"])})
        qlines.append(line)
        seen: set[str] = set()
        for rank, (d, text) in enumerate(zip(doc_ids, docs), start=1):
            d = _id_string(d)
            if d is None:
                raise DataError(f"{path}:{line}: query {q!r}: empty document id at pool position {rank}")
            if d in seen:
                raise DataError(f"{path}:{line}: document {d!r} appears twice in the pool of query {q!r}; list each document once")
            seen.add(d)
            precs.append({"query_id": q, "doc_id": d, "rank": rank})
            plines.append(line)
            text = "" if _blank(text) else str(text)
            if d in texts:
                if texts[d][0] != text:
                    raise DataError(
                        f"{path}:{line}: document {d!r} has a different text than at line {texts[d][1]}; a document id "
                        "must name one text"
                    )
                continue
            texts[d] = (text, line)
            drecs.append({"doc_id": d, "title": "", "text": text})
            dlines.append(line)
        for d, g in (row.get("qrels") or {}).items():
            try:
                grade = float(g)
            except (TypeError, ValueError):
                grade = math.nan
            if not math.isfinite(grade):
                raise DataError(f"{path}:{line}: qrel grade {g!r} of document {d!r} for query {q!r} is not a finite number")
            rrecs.append({"query_id": q, "doc_id": str(d), "grade": grade})
            rlines.append(line)
        for d in row.get("excluded") or ():
            xrecs.append({"query_id": q, "doc_id": str(d)})
            xlines.append(line)
    queries = _frame(qrecs, qlines, path)
    dup = _first_duplicate(queries, ["query_id"])
    if dup is not None:
        (q,), labels = dup
        raise DataError(f"{path}:{labels[1]}: query id {q!r} appears again (first at line {labels[0]}); one row per query")
    corpus = _missing_text(_frame(drecs, dlines, path), missing_text)
    pools = _frame(precs, plines, path)
    if corpus.attrs.get("dropped"):
        pools = pools.loc[~pools["doc_id"].isin(corpus.attrs["dropped"])].copy()
        pools["rank"] = pools.groupby("query_id", sort=False).cumcount().to_numpy() + 1
    check_pools(pools, queries=[r["query_id"] for r in qrecs])
    qrels = _frame(rrecs, rlines, path) if rrecs else _empty(["query_id", "doc_id", "grade"], path)
    excluded = _frame(xrecs, xlines, path) if xrecs else _empty(["query_id", "doc_id"], path)
    return Collection(corpus=corpus, queries=queries, qrels=qrels, pools=pools, excluded=excluded)


def _empty(columns: list[str], path: Path) -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype=np.float64 if c == "grade" else object) for c in columns})
    df.index = pd.Index([], dtype=np.int64, name="line")
    df.attrs["source"] = str(path)
    return df


# --------------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------------
def _write_text(path: Path, text: str) -> None:
    """Write ``text`` (gzipped for ``.gz``) atomically: the file appears whole or not at all."""
    data = text.encode("utf-8")
    atomic_write_bytes(path, gzip.compress(data, mtime=0) if path.suffix.lower() == ".gz" else data)


def _write_table(df: pd.DataFrame, path: Path, fmt: str) -> None:
    df = df.reset_index(drop=True)
    if fmt == "parquet":
        buffer = io.BytesIO()
        df.to_parquet(buffer, index=False)
        atomic_write_bytes(path, buffer.getvalue())
    elif fmt in ("csv", "tsv"):
        _write_text(path, df.to_csv(index=False, sep="," if fmt == "csv" else "\t", lineterminator="\n"))
    elif fmt == "jsonl":
        # json.dumps writes floats with repr (exact round trip); pandas' to_json keeps only 10 digits
        records = df.astype(object).where(df.notna(), None).to_dict("records")
        _write_text(path, "".join(json.dumps(_plain_record(r), ensure_ascii=False) + "\n" for r in records))
    else:
        raise DataError(f"{path}: cannot write format {fmt!r} for this table")


def _plain_record(record: dict) -> dict:
    """A table row with NumPy scalars as Python values (for ``json.dumps``)."""
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in record.items()}

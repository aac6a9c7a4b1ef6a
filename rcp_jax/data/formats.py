"""File formats of the data tables: detect them, read files into tables that know their lines, write atomically.

Every reader here returns a DataFrame whose index is the 1-based **line** of the row in its file
(``index.name == "line"``; for Parquet the 1-based ``"row"``) and whose ``attrs["source"]`` is the file
path, so that validators (:mod:`rcp_jax.data.table_checks`) can name the file and line of a bad value. The
formats and extensions are listed in :mod:`rcp_jax.data`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.data.atomic import atomic_write_bytes
from rcp_jax.errors import DataError

FORMATS = ("trec", "csv", "tsv", "jsonl", "parquet")
_EXTENSIONS = {
    ".trec": "trec", ".run": "trec", ".txt": "trec", ".qrels": "trec",
    ".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".parquet": "parquet", ".pq": "parquet",
}


# --------------------------------------------------------------------------------------------------
# reading: formats, bytes, tables with line numbers
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
        f"rename the file with one of the extensions {' '.join(_EXTENSIONS)} (optionally + .gz); from Python you may "
        f"also pass the format ({', '.join(FORMATS)})"
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
        raise DataError(f"{path}: {what} cannot be read from a TREC file; write it as JSONL, CSV, TSV or Parquet (.jsonl, .csv, .tsv, .parquet)")
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


def _path(path) -> Path:
    return Path(path).expanduser()


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

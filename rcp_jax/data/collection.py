"""Test collections: corpora, queries, BEIR folders and JSONL rows (one query and its pool per line).

A document with neither text nor title has "missing text" and is refused unless ``missing_text="warn"``
(keep it) or ``"drop"`` (remove it; its qrels are kept, and it leaves the pools of JSONL rows);
``"keep"`` keeps it silently and lists it in ``attrs["empty"]``, so that a caller can apply its policy to
the documents it will actually judge (:func:`check_pooled_texts`: the command line does this, so an empty
document that is never pooled does not matter). :func:`select_queries` picks a query subset (the CLI's
``--queries`` / ``--max-queries``). The tables and formats are described in :mod:`rcp_jax.data`.

Page images: a corpus may carry an ``image`` column (BEIR-style ``image`` field): a PNG/JPEG file path
(relative paths count from the corpus file's folder), an ``http(s)`` URL or a ``data:`` URL; a document
is then text, an image or both, and a document with an image is never "missing text". A folder of page
images named by document id (``<doc_id>.png``, ``.jpg`` or ``.jpeg``) is attached with
:func:`attach_images` (the CLI's ``--images DIR``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.data.formats import _frame, _path, _read_jsonl, _read_table, _table_format
from rcp_jax.data.pool_checks import check_pools
from rcp_jax.data.run_files import read_qrels
from rcp_jax.data.table_checks import _first_duplicate, _id_string, _ids, _rename, _unit, _where
from rcp_jax.errors import DataError

_MISSING_TEXT = ("error", "warn", "drop", "keep")
PYTHON_HINT = 'missing_text="drop" (remove them) or missing_text="warn" (keep them empty)'
CLI_HINT = "--missing-text drop (remove them) or --missing-text warn (keep them empty)"


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _has_image(df: pd.DataFrame) -> np.ndarray:
    """bool[n]: which rows carry a page image."""
    if "image" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return np.array([not _blank(v) for v in df["image"]], dtype=bool)


def _missing_text(df: pd.DataFrame, missing_text: str) -> pd.DataFrame:
    if missing_text not in _MISSING_TEXT:
        raise ValueError(f"missing_text must be one of {_MISSING_TEXT}, got {missing_text!r}")
    empty = np.array([_blank(t) and _blank(h) for t, h in zip(df["text"], df["title"])], dtype=bool) & ~_has_image(df)
    if not empty.any():
        return df
    ids = [str(d) for d in df.loc[empty, "doc_id"]]
    if missing_text == "keep":
        out = df.copy()
        out.attrs = {**df.attrs, "empty": ids}
        return out
    where = _where(df, df.index[np.flatnonzero(empty)[0]])
    msg = f"{where}: document {ids[0]!r} has no text and no title ({len(ids)} such documents: {ids[:10]})"
    if missing_text == "error":
        raise DataError(msg + f"; the judge cannot read an empty document: fix the corpus, or pass {PYTHON_HINT}")
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
            removes them from the pools), or ``"keep"`` (keep it silently, listed in ``attrs["empty"]``;
            then apply a policy to the pooled documents only with :func:`check_pooled_texts`).

    A corpus with an ``image`` column (file path, URL or data URL; module docstring) may leave ``text`` out.

    Returns:
        DataFrame ``doc_id, title, text[, image]`` (str; a missing title, text or image is ""; image paths made
        absolute), index = source line.

    Raises:
        DataError: a duplicate or empty id, missing columns, a missing text (by default), bad UTF-8, an image
            file that does not exist.
    """
    path = _path(path)
    raw = _read_table(path, _table_format(path, fmt, "a corpus"))
    images = "image" in raw.columns
    wanted, optional = (["doc_id"], ["text", "title", "image"]) if images else (["doc_id", "text"], ["title"])
    df = _rename(raw, wanted, optional, what="a corpus")
    for col in ("title", "text"):
        if col not in df.columns:
            df[col] = ""
    if images:
        df["image"] = _image_sources(df, path.parent)
    df = _ids(df, ["doc_id"], "the corpus")
    dup = _first_duplicate(df, ["doc_id"])
    if dup is not None:
        (d,), labels = dup
        raise DataError(f"{_where(df, labels[1])}: document id {d!r} appears again (first at {_unit(df)} {labels[0]}); ids must be unique")
    df = _missing_text(df, missing_text)
    for col in ("title", "text"):
        df[col] = ["" if _blank(v) else str(v) for v in df[col]]
    return df.loc[:, ["doc_id", "title", "text"] + (["image"] if images else [])]


def _image_sources(df: pd.DataFrame, base: Path) -> list[str]:
    """The ``image`` column as strings: URLs as given, file paths absolute (relative to ``base``) and existing."""
    out = []
    for label, value in zip(df.index, df["image"]):
        if _blank(value):
            out.append("")
            continue
        if not isinstance(value, str):
            raise DataError(f"{_where(df, label)}: image {value!r} is not a string; give a PNG/JPEG file path, an "
                            "http(s) URL or a data: URL")
        value = value.strip()
        if value.startswith(("http://", "https://", "data:")):
            out.append(value)
            continue
        file = Path(value) if Path(value).is_absolute() else base / value
        if not file.is_file():
            raise DataError(f"{_where(df, label)}: image file {value!r} not found (looked for {file}); relative paths "
                            "count from the corpus file's folder")
        out.append(str(file.resolve()))
    return out


def attach_images(corpus: pd.DataFrame, folder: str | Path) -> pd.DataFrame:
    """``corpus`` with the page images of ``folder`` (files ``<doc_id>.png``, ``.jpg`` or ``.jpeg``) in its ``image``
    column; a document without a file keeps its own image (or none). Images named by no document are ignored
    with one warning.

    Raises:
        DataError: ``folder`` is not a folder, holds no page image, or none of its images names a document.
    """
    folder = _path(folder)
    if not folder.is_dir():
        raise DataError(f"--images {folder}: not a folder; give the folder of page images named <doc_id>.png or .jpg")
    suffixes = (".png", ".jpg", ".jpeg")
    files = {p.stem: p for p in sorted(folder.iterdir()) if p.suffix.lower() in suffixes and p.is_file()}
    if not files:
        raise DataError(f"--images {folder}: no .png, .jpg or .jpeg file; name each page image <doc_id>.png")
    ids = corpus["doc_id"].astype(str)
    known = set(ids)
    unmatched = sorted(set(files) - known)
    if len(unmatched) == len(files):
        raise DataError(f"--images {folder}: none of its {len(files)} images is named by a document id of the corpus "
                        f"(e.g. {unmatched[0]!r} vs documents {', '.join(map(repr, list(ids[:3])))}); name each file "
                        "<doc_id>.png")
    if unmatched:
        warnings.warn(f"--images {folder}: {len(unmatched)} image(s) named by no document of the corpus were ignored: "
                      f"{', '.join(unmatched[:10])}", UserWarning, stacklevel=2)
    out = corpus.copy()
    old = out["image"] if "image" in out.columns else pd.Series("", index=out.index)
    out["image"] = [str(files[d].resolve()) if d in files else v for d, v in zip(ids, old)]
    out.attrs = dict(corpus.attrs)
    if "empty" in out.attrs:  # a document given an image here is no longer empty
        out.attrs["empty"] = [d for d in out.attrs["empty"] if d not in files]
    return out


def check_image_paths(corpus: pd.DataFrame, roots: list[str | Path], *, opt_in: str = "--allow-outside-images") -> None:
    """Refuse a page-image file of ``corpus`` (its ``image`` column, absolute paths as :func:`read_corpus` and
    :func:`attach_images` leave them) that does not resolve inside one of the folders ``roots`` (the dataset's
    folder, the ``--images`` folder): a corpus row could otherwise have any readable PNG/JPEG of the machine sent to
    the judge (``../outside/page.png``, an absolute path, a symbolic link leading out). URLs are not files and pass.

    Raises:
        DataError: naming the corpus file and line, the document and the file, and ``opt_in``.
    """
    if "image" not in corpus.columns:
        return
    inside = [Path(r).resolve() for r in roots]
    for label, doc_id, value in zip(corpus.index, corpus["doc_id"], corpus["image"]):
        if _blank(value) or str(value).startswith(("http://", "https://", "data:")):
            continue
        file = Path(str(value)).resolve()
        if any(file.is_relative_to(r) for r in inside):
            continue
        folders = " or ".join(str(r) for r in inside) or "no folder"
        raise DataError(f"{_where(corpus, label)}: document {str(doc_id)!r}: image file {file} lies outside {folders}; "
                        "page images must resolve inside the dataset's folder (or the --images folder), so that a "
                        "corpus cannot send other files of this machine to the judge. Move the image there, or pass "
                        f"{opt_in} if you trust this corpus")


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


def read_beir(
    folder: str | Path, *, split: str = "test", missing_text: str = "error", strict: bool = True, labels: bool = True
) -> Collection:
    """Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

    A folder without qrels (no ``qrels/`` folder, or one holding no ``.tsv`` file) is an **unlabelled**
    collection: its qrels table is empty and ``qrels.attrs["unlabelled"]`` is True (LLM judging needs no
    labels; qrel figures are then omitted). A ``qrels/`` folder holding other splits but not ``split`` is an
    error (a mistyped split must not silently drop the labels).

    Args:
        folder: the dataset folder. split: the qrels file name (without ``.tsv``).
        missing_text: see :func:`read_corpus`.
        strict: refuse qrels whose query or document id is unknown (else keep them).
        labels: read the qrels (False: leave them empty, e.g. when another qrels file replaces them).

    Returns:
        :class:`Collection` (pools None: build them with ``rcp_jax.pools.build_pool``).

    Raises:
        DataError: not a folder, a bad corpus or queries file, or ``qrels/<split>.tsv`` missing while the
            ``qrels/`` folder holds other splits (the message lists them).
    """
    folder = _path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory; a BEIR dataset is a folder with corpus.jsonl, queries.jsonl "
                        "[and qrels/<split>.tsv]")
    corpus = read_corpus(folder / "corpus.jsonl", missing_text=missing_text)
    queries = read_queries(folder / "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not labels:
        return Collection(corpus=corpus, queries=queries, qrels=_empty(["query_id", "doc_id", "grade"], qrels_path))
    if not qrels_path.exists():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        if found:
            raise DataError(f"{qrels_path}: no such file; the qrels folder holds the split(s) {', '.join(found)}: "
                            f"pass --split {found[0]} (split={found[0]!r}), or --qrels FILE")
        qrels = _empty(["query_id", "doc_id", "grade"], folder / "qrels")
        qrels.attrs["unlabelled"] = True
        return Collection(corpus=corpus, queries=queries, qrels=qrels)
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


def check_pooled_texts(
    corpus: pd.DataFrame, pools: pd.DataFrame, missing_text: str = "error", *, hint: str = PYTHON_HINT
) -> pd.DataFrame:
    """Apply the missing-text policy to the documents a judge will read: the pooled ones.

    A corpus may hold empty documents (Cranfield has two) that are never pooled; they do not matter.
    Only a pooled document without text is refused (``"error"``), kept with a warning (``"warn"``) or
    removed from its pools, the remaining documents re-ranked 1..n in order (``"drop"``).

    Args:
        corpus: ``doc_id, title, text`` (e.g. :func:`read_corpus` with ``missing_text="keep"``).
        pools: ``query_id, doc_id[, rank]``; its index and ``attrs["source"]`` locate lines in messages.
        missing_text: ``"error"``, ``"warn"``, ``"drop"`` (``"keep"``: nothing checked).
        hint: how the reader chooses another policy, for the message (the CLI passes its flags).

    Returns:
        The pools (without the dropped documents for ``"drop"``; else unchanged).

    Raises:
        DataError: a pooled document without text (``"error"``), naming the pools line, query and document.
    """
    if missing_text not in _MISSING_TEXT:
        raise DataError(f"unknown missing-text policy {missing_text!r}; choose one of {', '.join(_MISSING_TEXT[:3])}")
    if missing_text == "keep" or pools is None or not len(pools):
        return pools
    blank = np.array([_blank(t) and _blank(h) for t, h in zip(corpus["text"], corpus.get("title", corpus["text"]))], dtype=bool)
    blank &= ~_has_image(corpus)
    empty = set(corpus.loc[blank, "doc_id"].astype(str))
    if not empty:
        return pools
    hit = pools["doc_id"].astype(str).isin(empty).to_numpy()
    if not hit.any():
        return pools
    i = int(np.flatnonzero(hit)[0])
    docs = sorted(set(pools["doc_id"].astype(str)[hit]))
    msg = (f"{_where(pools, pools.index[i], 'pools')}: document {str(pools['doc_id'].iloc[i])!r} has no text and no "
           f"title, and it is pooled for query {str(pools['query_id'].iloc[i])!r} ({len(docs)} such pooled "
           f"document{'s' if len(docs) != 1 else ''}: {', '.join(docs[:10])})")
    if missing_text == "error":
        raise DataError(msg + f"; the judge cannot read an empty document: fix the corpus, or pass {hint}")
    warnings.warn(msg + ("; removed from the pools" if missing_text == "drop" else "; judged as empty documents"),
                  UserWarning, stacklevel=2)
    if missing_text == "warn":
        return pools
    out = pools.loc[~hit].copy()
    if "rank" in out.columns:
        order = out.sort_values(["query_id", "rank"], kind="stable")
        out.loc[order.index, "rank"] = order.groupby("query_id", sort=False).cumcount().to_numpy() + 1
    out.attrs = {**pools.attrs, "dropped": docs}
    return out


def _read_id_list(spec: str) -> tuple[list[str], str]:
    """Ids from ``spec``: a file with one id per line (blank lines and ``#`` comments skipped), else a
    comma-separated list. Returns ``(ids, where)`` with ``where`` naming the source for messages."""
    path = Path(spec)
    if path.is_file():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: not valid UTF-8 ({err.reason} at byte {err.start}); save the id list as UTF-8") from None
        ids = [ln.split("#", 1)[0].strip() for ln in lines]
        return [i for i in ids if i], str(path)
    looks_like_file = any(ch in spec for ch in "/\\") or path.suffix.lower() in (".txt", ".tsv", ".csv", ".ids", ".lst", ".list")
    if spec.strip() and ("," in spec or not looks_like_file):
        return [i.strip() for i in spec.split(",") if i.strip()], "--queries (no file of that name; read as comma-separated ids)"
    raise DataError(f"--queries {spec!r}: no such file; give a file with one query id per line or comma-separated ids")


def select_queries(
    order: list[str], *, queries: str | None = None, max_queries: int | None = None, pooled: set[str] | None = None
) -> list[str] | None:
    """The query subset of ``--queries FILE|ids`` and ``--max-queries N``, in collection order.

    Args:
        order: every query id of the collection, in its order (the queries file's).
        queries: a file with one query id per line, or comma-separated ids (None: all).
        max_queries: keep the first N of the selection in collection order (None: all).
        pooled: the queries that have a pool (when pools are given): ``max_queries`` counts among these,
            and a requested query without a pool is an error.

    Returns:
        The selected ids in collection order, or None when neither option is given.

    Raises:
        DataError: unknown ids (all named, up to 20), a requested query without a pool, an empty list or
            ``max_queries < 1``.
    """
    if queries is None and max_queries is None:
        return None
    if max_queries is not None and max_queries < 1:
        raise DataError(f"--max-queries must be >= 1, got {max_queries}")
    known = set(order)
    chosen = [q for q in order if pooled is None or q in pooled]
    if queries is not None:
        wanted, where = _read_id_list(queries)
        if not wanted:
            raise DataError(f"{where}: no query ids; give one id per line or comma-separated ids")
        unknown = list(dict.fromkeys(q for q in wanted if q not in known))
        if unknown:
            raise DataError(f"{where}: {len(unknown)} query id{'s' if len(unknown) != 1 else ''} not in the "
                            f"collection's queries: {', '.join(unknown[:20])}{' ...' if len(unknown) > 20 else ''}; "
                            f"fix the ids (the collection has {len(order)} queries, e.g. {', '.join(order[:5])})")
        if pooled is not None:
            unpooled = [q for q in dict.fromkeys(wanted) if q not in pooled]
            if unpooled:
                raise DataError(f"{where}: {len(unpooled)} requested quer{'y has' if len(unpooled) == 1 else 'ies have'} "
                                f"no pool in the pools file: {', '.join(unpooled[:20])}; pool them first "
                                f"(rcp-jax pool --queries ...) or leave them out")
        wanted_set = set(wanted)
        chosen = [q for q in chosen if q in wanted_set]
    if max_queries is not None:
        chosen = chosen[:max_queries]
    return chosen

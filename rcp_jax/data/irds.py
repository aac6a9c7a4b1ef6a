"""Collections from ir_datasets (``irds:<id>``, e.g. ``irds:vaswani``, ``irds:beir/scifact/test``).

ir_datasets downloads a dataset's files on first use into ``IR_DATASETS_HOME`` (default ``~/.ir_datasets``),
logging its own progress; a failed download becomes a :class:`rcp_jax.errors.DataError` saying what was tried
and where to put the files by hand. Every document is read into memory (the lexical first stages of
``rcp-jax pool`` need the whole corpus): about the corpus' text size again in RAM.

Fields: a document's ``title`` field (if its type has one) is the title column; its text is the first of
``text``, ``body``, ``abstract``, ``contents``, ``passage`` that the type has (else its ``default_text()``).
A query's text is its ``text`` field, else ``title`` (TREC topics), else ``query`` (else ``default_text()``);
``query_field`` picks another (e.g. ``"description"``).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pandas as pd

from rcp_jax.data.collection import Collection, _missing_text
from rcp_jax.errors import DataError

PREFIX = "irds:"
INSTALL_HINT = 'pip install "rcp-jax[ir]"'
DOC_TEXT_FIELDS = ("text", "body", "abstract", "contents", "passage")
QUERY_TEXT_FIELDS = ("text", "title", "query")


def _ir_datasets():
    try:
        import ir_datasets
    except ImportError as e:
        raise DataError(f"reading irds: datasets needs ir_datasets ({e}); install it with {INSTALL_HINT}") from None
    return ir_datasets


def _home() -> str:
    return os.environ.get("IR_DATASETS_HOME", str(Path.home() / ".ir_datasets"))


def _dataset(irds, dataset_id: str):
    if dataset_id not in set(irds.registry):
        try:  # a pattern-registered id (e.g. some clueweb subsets) resolves on lookup
            return irds.registry[dataset_id]
        except KeyError:
            pass
        close = difflib.get_close_matches(dataset_id, list(irds.registry), n=5, cutoff=0.6)
        hint = f"; did you mean {', '.join('irds:' + c for c in close)}?" if close else ""
        raise DataError(f"irds:{dataset_id}: ir_datasets does not know this dataset id{hint} (the ids are listed at "
                        "https://ir-datasets.com)")
    return irds.registry[dataset_id]


def _fetch(dataset_id: str, what: str, produce):
    """``produce()``, with a failed download or a missing file turned into a DataError."""
    try:
        return produce()
    except DataError:
        raise
    except (OSError, RuntimeError, ImportError, ValueError) as e:
        raise DataError(
            f"irds:{dataset_id}: ir_datasets could not read the {what} ({type(e).__name__}: {e}). It downloads a "
            f"dataset's files on first use into IR_DATASETS_HOME ({_home()}); without network, fetch them on a "
            f"machine with network (python -c \"import ir_datasets; ir_datasets.load('{dataset_id}')."
            f"{'docs' if what == 'documents' else what}_iter().__next__()\") and copy that folder's "
            f"{dataset_id.split('/')[0]}/ subfolder into {_home()}, or set IR_DATASETS_HOME to a folder holding it"
        ) from None


def _pick(fields: tuple[str, ...], wanted: tuple[str, ...]) -> str | None:
    return next((f for f in wanted if f in fields), None)


def _documents(ds, dataset_id: str, missing_text: str) -> pd.DataFrame:
    cls = ds.docs_cls()
    fields = tuple(getattr(cls, "_fields", ()))
    text_field = _pick(fields, DOC_TEXT_FIELDS)
    has_title = "title" in fields

    def rows():
        for doc in ds.docs_iter():
            text = getattr(doc, text_field) if text_field else doc.default_text()
            yield str(doc.doc_id), str(doc.title or "") if has_title else "", str(text or "")

    df = pd.DataFrame(_fetch(dataset_id, "documents", lambda: list(rows())), columns=["doc_id", "title", "text"])
    df.index = pd.RangeIndex(1, len(df) + 1, name="document")
    df.attrs["source"] = f"irds:{dataset_id}"
    dup = df["doc_id"].duplicated()
    if dup.any():
        raise DataError(f"irds:{dataset_id}: document id {df['doc_id'][dup].iloc[0]!r} appears twice; ids must be unique")
    return _missing_text(df, missing_text)


def _queries(ds, dataset_id: str, query_field: str | None) -> pd.DataFrame:
    fields = tuple(getattr(ds.queries_cls(), "_fields", ()))
    field = query_field or _pick(fields, QUERY_TEXT_FIELDS)
    if query_field and query_field not in fields:
        raise DataError(f"irds:{dataset_id}: its queries have no field {query_field!r}; they have "
                        f"{', '.join(f for f in fields if f != 'query_id')}")

    def rows():
        return [(str(q.query_id), str(getattr(q, field) if field else q.default_text()).strip())
                for q in ds.queries_iter()]

    df = pd.DataFrame(_fetch(dataset_id, "queries", rows), columns=["query_id", "text"])
    df.index = pd.RangeIndex(1, len(df) + 1, name="query")
    df.attrs["source"] = f"irds:{dataset_id}"
    blank = df["text"] == ""
    if blank.any():
        raise DataError(f"irds:{dataset_id}: query {df['query_id'][blank].iloc[0]!r} has no {field or 'text'}; "
                        f"pick another field (query_field=, one of {', '.join(f for f in fields if f != 'query_id')})")
    return df


def _qrels(ds, dataset_id: str) -> pd.DataFrame:
    if not ds.has_qrels():
        df = pd.DataFrame({"query_id": pd.Series(dtype=str), "doc_id": pd.Series(dtype=str),
                           "grade": pd.Series(dtype="float64")})
        df.attrs["source"] = f"irds:{dataset_id}"
        df.attrs["unlabelled"] = True
        return df
    rows = _fetch(dataset_id, "qrels", lambda: [(str(r.query_id), str(r.doc_id), float(r.relevance))
                                               for r in ds.qrels_iter()])
    df = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
    df["grade"] = df["grade"].clip(lower=0.0)  # ir_datasets' -1/-2 (spam, junk) grades count as non-relevant
    df = df.drop_duplicates(["query_id", "doc_id"], keep="last")
    df.index = pd.RangeIndex(1, len(df) + 1, name="qrel")
    df.attrs["source"] = f"irds:{dataset_id}"
    return df


def read_irds(source: str, *, query_field: str | None = None, missing_text: str = "error") -> Collection:
    """Read an ir_datasets dataset as a :class:`Collection` (module docstring: fields, downloads, memory).

    Args:
        source: ``"irds:<id>"`` (or the bare id).
        query_field: the queries' field to use as text (default: ``text``, else ``title``, else ``query``).
        missing_text: see :func:`rcp_jax.data.read_corpus`.

    Returns:
        :class:`Collection`: corpus ``doc_id, title, text``, queries ``query_id, text``, qrels ``query_id,
        doc_id, grade`` (empty with ``attrs["unlabelled"]`` when the dataset has none; negative grades read
        as 0), pools None.

    Raises:
        DataError: ir_datasets missing (names the extra), an unknown id (suggests close ones), a dataset
            without documents or queries, a failed download (says where the files go).
    """
    dataset_id = source.removeprefix(PREFIX)
    irds = _ir_datasets()
    ds = _dataset(irds, dataset_id)
    for part, has in (("documents", ds.has_docs()), ("queries", ds.has_queries())):
        if not has:
            raise DataError(f"irds:{dataset_id}: this dataset has no {part}; pick a subset that has both (e.g. "
                            f"irds:{dataset_id}/test), see https://ir-datasets.com")
    corpus = _documents(ds, dataset_id, missing_text)
    return Collection(corpus=corpus, queries=_queries(ds, dataset_id, query_field), qrels=_qrels(ds, dataset_id))

"""One entry point for a collection's source: an ir_datasets id, a BEIR folder, a JSONL rows file, or a TREC
corpus with its topics (:func:`load_collection`)."""

from __future__ import annotations

from pathlib import Path

from rcp_jax.data.collection import Collection, read_beir, read_rows
from rcp_jax.data.formats import _path
from rcp_jax.data.irds import PREFIX, read_irds
from rcp_jax.data.run_files import read_qrels
from rcp_jax.data.trec_text import read_documents, read_topics
from rcp_jax.errors import DataError


def read_corpus_and_topics(corpus: str | Path, topics: str | Path, *, qrels: str | Path | None = None,
                           topic_field: str = "title", missing_text: str = "error") -> Collection:
    """A collection from a documents file or folder (TREC SGML or a corpus table), a queries file (TREC topics,
    ``qid<TAB>text`` or a queries table) and optionally a qrels file (TREC or BEIR TSV); without qrels it is
    unlabelled (empty qrels, ``attrs["unlabelled"]``)."""
    docs = read_documents(corpus, missing_text=missing_text)
    queries = read_topics(topics, field=topic_field)
    if qrels is not None:
        labels = read_qrels(qrels)
    else:
        import pandas as pd

        labels = pd.DataFrame({"query_id": pd.Series(dtype=str), "doc_id": pd.Series(dtype=str),
                               "grade": pd.Series(dtype="float64")})
        labels.attrs["unlabelled"] = True
    return Collection(corpus=docs, queries=queries, qrels=labels)


def load_collection(source: str | Path, *, topics: str | Path | None = None, qrels: str | Path | None = None,
                    split: str = "test", topic_field: str = "title", query_field: str | None = None,
                    missing_text: str = "error") -> Collection:
    """Read a test collection from any source rcp-jax knows.

    Args:
        source: ``"irds:<id>"`` (an ir_datasets dataset, downloaded on first use: :mod:`rcp_jax.data.irds`),
            a BEIR folder (:func:`read_beir`), a JSONL rows file (:func:`read_rows`), or, with ``topics``, a
            documents file or folder (TREC SGML ``<DOC>`` files, possibly gzipped, or a corpus table).
        topics: the queries file of a documents ``source`` (TREC topics, ``qid<TAB>text``, or a queries table).
        qrels: a qrels file replacing the source's (TREC or BEIR TSV).
        split: a BEIR folder's qrels split. topic_field: ``title`` (default), ``desc`` or ``title+desc`` of
            TREC topics. query_field: the ir_datasets queries' field (default ``text``, else ``title``, else
            ``query``). missing_text: see :func:`rcp_jax.data.read_corpus`.

    Returns:
        :class:`Collection` (pools set only for rows files).

    Raises:
        DataError: an unreadable source (the message names the file, line or id).
    """
    import dataclasses

    text = str(source)
    if topics is not None:
        return read_corpus_and_topics(source, topics, qrels=qrels, topic_field=topic_field, missing_text=missing_text)
    if text.startswith(PREFIX):
        col = read_irds(text, query_field=query_field, missing_text=missing_text)
    else:
        path = _path(source)
        if path.is_dir():
            col = read_beir(path, split=split, missing_text=missing_text, labels=qrels is None)
        elif path.is_file():
            col = read_rows(path, missing_text=missing_text)
        else:
            raise DataError(f"{path}: no such file or folder; give 'irds:<id>', a BEIR folder, a JSONL rows file, "
                            "or a documents file with topics=")
    if qrels is not None:
        col = dataclasses.replace(col, qrels=read_qrels(qrels))
    return col

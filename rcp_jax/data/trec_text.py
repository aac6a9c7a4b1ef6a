"""TREC text collections read directly: SGML document files and topics files, as the corpus and queries tables.

Documents (:func:`read_trec_docs`): ``<DOC> ... <DOCNO> id </DOCNO> ... </DOC>`` blocks, one file (optionally
gzip-compressed, ``.gz``) or a folder of such files (read recursively, in sorted path order). A document's
title is the content of its ``<HEADLINE>``, ``<TITLE>``, ``<HL>``, ``<HEAD>`` or ``<TTL>`` elements; its text
the content of ``<TEXT>``, ``<LP>``, ``<LEADPARA>``, ``<DD>`` and ``<DATE>`` (the tags Anserini and ir_datasets
read), or, when it has none of those, its whole body without the ``<DOCNO>``/``<DOCID>``/``<DOCHDR>`` elements.
Inner markup (``<P>`` ...) is removed and runs of white space become one space.

Topics (:func:`read_topics`): ``<top>`` blocks with ``<num> Number: 401`` (or ``<num>401</num>``), ``<title>``
and optional ``<desc> Description:`` / ``<narr> Narrative:`` sections; a plain tab-separated ``qid<TAB>text``
file; or a queries table :func:`rcp_jax.data.read_queries` reads (JSONL/CSV/TSV with a header, Parquet).
The query text is the topic's title by default (``field="title"``), or ``"desc"``, or ``"title+desc"``.

Both return the tables of :func:`rcp_jax.data.read_corpus` (``doc_id, title, text``) and
:func:`rcp_jax.data.read_queries` (``query_id, text``), index = the line the document or topic starts on,
``attrs["source"]`` the file. Errors name the file and line.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pandas as pd

from rcp_jax.data.collection import _missing_text, read_corpus, read_queries
from rcp_jax.data.formats import _path
from rcp_jax.errors import DataError

TITLE_TAGS = ("HEADLINE", "TITLE", "HL", "HEAD", "TTL")
TEXT_TAGS = ("TEXT", "LP", "LEADPARA", "DD", "DATE")
_META_TAGS = ("DOCNO", "DOCID", "DOCHDR")
TOPIC_FIELDS = ("title", "desc", "title+desc")

_TABLE_EXTENSIONS = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet", ".pq")
_DOC_TAG = re.compile(r"<(/?)DOC\s*>", re.IGNORECASE)
_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.IGNORECASE | re.DOTALL)
_MARKUP = re.compile(r"<[^>]*>")
_TOP_TAG = re.compile(r"<(/?)top\s*>", re.IGNORECASE)
_TOPIC_SECTION = re.compile(r"<(num|title|desc|narr)>(.*?)(?=</?(?:num|title|desc|narr|top)\s*>|\Z)",
                            re.IGNORECASE | re.DOTALL)
_SECTION_LABEL = re.compile(r"^\s*(Number|Topic|Description|Narrative)\s*:", re.IGNORECASE)


def _read_text(path: Path) -> str:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix.lower() == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read it ({e})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 ({e.reason}); re-encode the file as UTF-8") from None


class _Lines:
    """Line numbers of increasing positions in ``text``, counted incrementally (linear in the file's size)."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _clean(fragment: str) -> str:
    return " ".join(_MARKUP.sub(" ", fragment).split())


def _elements(body: str, tags: tuple[str, ...]) -> list[str]:
    names = "|".join(tags)
    return [m.group(2) for m in re.finditer(rf"<({names})\b[^>]*>(.*?)</\1\s*>", body, re.IGNORECASE | re.DOTALL)]


def looks_like_trec_docs(path: str | Path) -> bool:
    """True when the file's first non-blank characters open a ``<DOC>`` (gzip read through)."""
    path = _path(path)
    try:
        head = gzip.open(path).read(4096) if path.suffix.lower() == ".gz" else path.open("rb").read(4096)
    except (OSError, EOFError):
        return False
    return bool(re.match(rb"\s*<DOC\s*>", head, re.IGNORECASE))


def _tagged_blocks(path: Path, text: str, tag_pattern: re.Pattern, tag: str, noun: str):
    """Yield ``(body, line)`` of every ``<tag> ... </tag>`` block of ``text`` (line: where it opens), refusing an
    unclosed block or a stray close tag with the file and line."""
    _line = _Lines(text)
    start = None
    for m in tag_pattern.finditer(text):
        if m.group(1) != "/":
            if start is not None:
                raise DataError(f"{path}:{_line(start)}: <{tag}> is not closed (another <{tag}> opens at line "
                                f"{_line(m.start())}); close every {noun} with </{tag}>")
            start, body_from = m.start(), m.end()
            continue
        if start is None:
            raise DataError(f"{path}:{_line(m.start())}: </{tag}> without an open <{tag}>")
        yield text[body_from:m.start()], _line(start)
        start = None
    if start is not None:
        raise DataError(f"{path}:{_line(start)}: <{tag}> is not closed at the end of the file; close every "
                        f"{noun} with </{tag}>")


def _parse_docs(path: Path, text: str, seen: dict[str, str]) -> tuple[list[dict], list[int]]:
    records, lines = [], []
    for body, line in _tagged_blocks(path, text, _DOC_TAG, "DOC", "document"):
        where = f"{path}:{line}"
        docno = _DOCNO.search(body)
        if docno is None or not _clean(docno.group(1)):
            raise DataError(f"{where}: a <DOC> without a <DOCNO> id; every document needs <DOCNO> id </DOCNO>")
        doc_id = _clean(docno.group(1))
        if doc_id in seen:
            raise DataError(f"{where}: document id {doc_id!r} appears again (first at {seen[doc_id]}); ids must be "
                            "unique")
        seen[doc_id] = where
        title = " ".join(_clean(t) for t in _elements(body, TITLE_TAGS)).strip()
        parts = _elements(body, TEXT_TAGS)
        if not parts:  # no content tags: the whole body without the ids and the title
            rest = body
            for tag in _META_TAGS + TITLE_TAGS:
                rest = re.sub(rf"<{tag}\b[^>]*>.*?</{tag}\s*>", " ", rest, flags=re.IGNORECASE | re.DOTALL)
            parts = [rest]
        records.append({"doc_id": doc_id, "title": title, "text": " ".join(_clean(p) for p in parts).strip()})
        lines.append(line)
    return records, lines


def read_trec_docs(path: str | Path, *, missing_text: str = "error") -> pd.DataFrame:
    """Read a TREC SGML document file (``.gz`` read through) or a folder of them (recursively, sorted).

    Args:
        missing_text: a document with neither title nor text, as :func:`rcp_jax.data.read_corpus` treats it.

    Returns:
        DataFrame ``doc_id, title, text`` (str); index = the line of the document's ``<DOC>`` (a folder: its
        position, index name ``document``), ``attrs["source"]`` = the path.

    Raises:
        DataError: an unclosed ``<DOC>``, a document without ``<DOCNO>``, a duplicate id (also across the files
            of a folder), a file with no document at all, an empty folder; each names the file and line.
    """
    path = _path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder (a TREC document file or a folder of them)")
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
    if not files:
        raise DataError(f"{path}: an empty folder; a TREC corpus folder holds document files (<DOC> blocks)")
    seen: dict[str, str] = {}
    records: list[dict] = []
    lines: list[int] = []
    for f in files:
        text = _read_text(f)
        recs, lns = _parse_docs(f, text, seen)
        if not recs:
            raise DataError(f"{f}: no <DOC> ... </DOC> document in it; not a TREC document file")
        records += recs
        lines += lns
    df = pd.DataFrame.from_records(records, columns=["doc_id", "title", "text"])
    if path.is_dir():
        df.index = pd.RangeIndex(1, len(df) + 1, name="document")
    else:
        df.index = pd.Index(lines, name="line")
    df.attrs["source"] = str(path)
    return _missing_text(df, missing_text)


def read_documents(path: str | Path, *, missing_text: str = "error") -> pd.DataFrame:
    """A corpus from a TREC document file or folder (:func:`read_trec_docs`), else a corpus table
    (:func:`rcp_jax.data.read_corpus`: JSONL/CSV/TSV/Parquet with ``doc_id, text[, title]``)."""
    path = _path(path)
    if path.is_dir() or looks_like_trec_docs(path):
        return read_trec_docs(path, missing_text=missing_text)
    if not path.is_file():
        raise DataError(f"{path}: no such file or folder (a TREC document file, a folder of them, or a corpus table)")
    if not path.name.lower().removesuffix(".gz").endswith(_TABLE_EXTENSIONS):
        raise DataError(f"{path}: none of the corpus formats: not a TREC document file (it does not start with "
                        "<DOC>) nor a corpus table (doc_id, text[, title] as .jsonl, .csv, .tsv or .parquet)")
    return read_corpus(path, missing_text=missing_text)


def _topic_text(sections: dict[str, str], field: str) -> str:
    if field == "title+desc":
        return " ".join(t for t in (sections.get("title", ""), sections.get("desc", "")) if t)
    return sections.get(field, "")


def _parse_topics(path: Path, text: str, field: str) -> pd.DataFrame:
    records, lines = [], []
    for body, line in _tagged_blocks(path, text, _TOP_TAG, "top", "topic"):
        where = f"{path}:{line}"
        sections: dict[str, str] = {}
        for s in _TOPIC_SECTION.finditer(body):
            sections.setdefault(s.group(1).lower(), _clean(_SECTION_LABEL.sub("", s.group(2), count=1)))
        qid = sections.get("num", "")
        if not qid:
            raise DataError(f"{where}: a topic without a number; every <top> needs <num> Number: ID")
        query = _topic_text(sections, field)
        if not query:
            raise DataError(f"{where}: topic {qid!r} has no {field} text; give it one, or read another field "
                            f"({', '.join(f for f in TOPIC_FIELDS if f != field)})")
        records.append({"query_id": qid, "text": query})
        lines.append(line)
    return _checked(pd.DataFrame.from_records(records, columns=["query_id", "text"]), lines, path)


def _checked(df: pd.DataFrame, lines: list[int], path: Path) -> pd.DataFrame:
    df.index = pd.Index(lines, name="line")
    df.attrs["source"] = str(path)
    first: dict[str, int] = {}
    for qid, line in zip(df["query_id"], lines):
        if qid in first:
            raise DataError(f"{path}:{line}: query id {qid!r} appears again (first at line {first[qid]}); ids must "
                            "be unique")
        first[qid] = line
    return df


_HEADER_IDS = {"query_id", "qid", "_id", "id"}


def read_topics(path: str | Path, *, field: str = "title") -> pd.DataFrame:
    """Read queries from a TREC topics file, a headerless ``qid<TAB>text`` file or a queries table.

    Args:
        field: the topic section that becomes the query text: ``"title"`` (default), ``"desc"`` or
            ``"title+desc"`` (only TREC topics have sections; the other layouts have one text).

    Returns:
        DataFrame ``query_id, text`` (str), index = the line the query starts on, ``attrs["source"]``.

    Raises:
        DataError: a topic without a number or without the chosen text, an unclosed ``<top>``, a duplicate id,
            a line without a tab in a ``qid<TAB>text`` file, or a file that is none of these formats.
    """
    if field not in TOPIC_FIELDS:
        raise DataError(f"topic field {field!r}: choose one of {', '.join(TOPIC_FIELDS)}")
    path = _path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (a TREC topics file, qid<TAB>text lines or a queries table)")
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".json", ".csv", ".parquet")):
        return read_queries(path)
    text = _read_text(path)
    if _TOP_TAG.search(text):
        return _parse_topics(path, text, field)
    rows = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not rows:
        raise DataError(f"{path}: no query in it (empty file)")
    if rows[0][1].split("\t")[0].strip().lower() in _HEADER_IDS:  # a TSV table with a header
        return read_queries(path, fmt="tsv")
    records, lines = [], []
    for i, line in rows:
        if "\t" not in line:
            raise DataError(f"{path}:{i}: no tab in this line; not a queries file this reader knows: TREC topics "
                            "(<top> blocks), qid<TAB>text lines, or a JSONL/CSV/TSV table with query_id, text")
        qid, query = (s.strip() for s in line.split("\t", 1))
        if not qid or not query:
            raise DataError(f"{path}:{i}: a query without {'an id' if not qid else 'text'}; write qid<TAB>text")
        records.append({"query_id": qid, "text": query})
        lines.append(i)
    return _checked(pd.DataFrame.from_records(records, columns=["query_id", "text"]), lines, path)

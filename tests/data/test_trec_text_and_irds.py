"""TREC document and topics files, ir_datasets collections and ``load_collection``.

The TREC readers are checked against ir_datasets' own parsers on the same files (an independent
implementation); ir_datasets datasets are registered here over local files (no network).
"""

from __future__ import annotations

import builtins
import gzip
import json

import pytest

from rcp_jax import data
from rcp_jax.data.trec_text import read_documents, read_topics, read_trec_docs
from rcp_jax.errors import DataError
from tests.helpers.trec_collection import TOPICS, doc_ids, register_irds, write_trec

ir_datasets = pytest.importorskip("ir_datasets")


def words(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------------- documents
@pytest.mark.parametrize("gz", [False, True])
def test_trec_docs_match_ir_datasets_parser(tmp_path, gz):
    from ir_datasets.formats import TrecDocs
    from ir_datasets.util import LocalDownload

    paths = write_trec(tmp_path, gz=gz)
    mine = read_trec_docs(paths["docs"])
    plain_file = write_trec(tmp_path / "plain")["docs"]  # ir_datasets streams a lone file as is (no gunzip)
    theirs = list(TrecDocs(LocalDownload(plain_file), parser="sax").docs_iter())
    assert list(mine["doc_id"]) == [d.doc_id for d in theirs] == doc_ids()
    assert list(mine["title"]) == [words(d.title) for d in theirs]
    assert list(mine["text"]) == [words(d.body) for d in theirs]
    # the line-based parser of ir_datasets reads title and text as one: the same words in the same order
    plain = list(TrecDocs(LocalDownload(plain_file), parser="text").docs_iter())
    assert [words(f"{t} {x}") for t, x in zip(mine["title"], mine["text"])] == [words(d.text) for d in plain]
    assert list(mine.index[:2]) == [1, 10] and mine.attrs["source"] == str(paths["docs"])


def test_trec_docs_inline_tags_markup_and_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.sgml").write_text("<DOC><DOCNO>A1</DOCNO><TITLE>Title A</TITLE><TEXT>alpha <P>beta</P>"
                                             "\n gamma</TEXT></DOC>\n")
    (tmp_path / "a" / "two.gz").write_bytes(gzip.compress(b"<DOC>\n<DOCNO>A2</DOCNO>\nno content tags here\n</DOC>\n"))
    df = read_trec_docs(tmp_path / "a")
    assert df.to_dict("records") == [{"doc_id": "A1", "title": "Title A", "text": "alpha beta gamma"},
                                     {"doc_id": "A2", "title": "", "text": "no content tags here"}]


@pytest.mark.parametrize("content, message", [
    ("<DOC>\n<DOCNO>A</DOCNO>\n<TEXT>x</TEXT>\n", ":1: <DOC> is not closed at the end of the file"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n<DOC>\n<DOCNO>B</DOCNO>\n</DOC>\n", ":1: <DOC> is not closed (another <DOC> opens at line 3)"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n</DOC>\n<DOC>\n<TEXT>x</TEXT>\n</DOC>\n", ":4: a <DOC> without a <DOCNO> id"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n</DOC>\n<DOC>\n<DOCNO>A</DOCNO>\n</DOC>\n", ":4: document id 'A' appears again (first at"),
    ("</DOC>\n", ":1: </DOC> without an open <DOC>"),
])
def test_trec_docs_errors_name_file_and_line(tmp_path, content, message):
    f = tmp_path / "bad.trec"
    f.write_text(content)
    with pytest.raises(DataError, match=None) as e:
        read_trec_docs(f)
    assert str(f) + message in str(e.value)


def test_duplicate_docno_across_files_of_a_folder(tmp_path):
    for name in ("a.trec", "b.trec"):
        (tmp_path / name).write_text("<DOC>\n<DOCNO>X</DOCNO>\n<TEXT>t</TEXT>\n</DOC>\n")
    with pytest.raises(DataError, match=r"b\.trec:1: document id 'X' appears again \(first at .*a\.trec:1\)"):
        read_trec_docs(tmp_path)


def test_a_document_without_text_follows_missing_text(tmp_path):
    f = tmp_path / "d.trec"
    f.write_text("<DOC>\n<DOCNO>E</DOCNO>\n<TEXT> </TEXT>\n</DOC>\n<DOC>\n<DOCNO>F</DOCNO>\n<TEXT>f</TEXT>\n</DOC>\n")
    with pytest.raises(DataError, match="d.trec:1: document 'E' has no text and no title"):
        read_trec_docs(f)
    assert read_trec_docs(f, missing_text="keep").attrs["empty"] == ["E"]


def test_read_documents_sniffs_trec_or_a_corpus_table(tmp_path):
    paths = write_trec(tmp_path)
    assert list(read_documents(paths["docs"])["doc_id"]) == doc_ids()
    table = tmp_path / "corpus.jsonl"
    table.write_text(json.dumps({"_id": "c1", "title": "T", "text": "body"}) + "\n")
    assert read_documents(table).to_dict("records") == [{"doc_id": "c1", "title": "T", "text": "body"}]
    junk = tmp_path / "notes.txt"
    junk.write_text("hello world\n")
    with pytest.raises(DataError, match=r"notes\.txt: none of the corpus formats: not a TREC document file"):
        read_documents(junk)


# ------------------------------------------------------------------------------- topics
def test_topics_match_ir_datasets_parser(tmp_path):
    from ir_datasets.formats import TrecQueries
    from ir_datasets.util import LocalDownload

    paths = write_trec(tmp_path)
    theirs = list(TrecQueries(LocalDownload(paths["topics"])).queries_iter())
    for field, pick in (("title", lambda q: q.title), ("desc", lambda q: q.description),
                        ("title+desc", lambda q: f"{q.title} {q.description}")):
        mine = read_topics(paths["topics"], field=field)
        assert list(mine["query_id"]) == [q.query_id for q in theirs] == list(TOPICS)
        assert list(mine["text"]) == [words(pick(q)) for q in theirs]
    assert list(read_topics(paths["topics"]).index) == [1, 12, 23, 34]


def test_topics_closed_tag_style_and_tsv_and_tables(tmp_path):
    f = tmp_path / "t.xml"
    f.write_text("<top>\n<num>7</num>\n<title>short title</title>\n<desc>A longer description.</desc>\n</top>\n")
    assert read_topics(f).to_dict("records") == [{"query_id": "7", "text": "short title"}]
    assert read_topics(f, field="desc")["text"].tolist() == ["A longer description."]
    tsv = tmp_path / "q.tsv"
    tsv.write_text("1\tfirst query\n\n2\tsecond query\n")
    df = read_topics(tsv)
    assert df.to_dict("records") == [{"query_id": "1", "text": "first query"}, {"query_id": "2", "text": "second query"}]
    assert list(df.index) == [1, 3]
    header = tmp_path / "h.tsv"
    header.write_text("query_id\ttext\n5\tfive\n")
    assert read_topics(header)["query_id"].tolist() == ["5"]
    js = tmp_path / "q.jsonl"
    js.write_text(json.dumps({"_id": "9", "text": "nine"}) + "\n")
    assert read_topics(js).to_dict("records") == [{"query_id": "9", "text": "nine"}]


@pytest.mark.parametrize("content, message", [
    ("<top>\n<title> no number\n</top>\n", ":1: a topic without a number"),
    ("<top>\n<num> Number: 1\n<title> t\n", ":1: <top> is not closed"),
    ("<top>\n<num> 1\n<title> a\n</top>\n<top>\n<num> 1\n<title> b\n</top>\n", ":5: query id '1' appears again"),
    ("<top>\n<num> 3\n<desc> only a description\n</top>\n", ":1: topic '3' has no title text"),
    ("just some words\nand more\n", ":1: no tab in this line; not a queries file"),
    ("1\t\n", ":1: a query without text"),
])
def test_topics_errors_name_file_and_line(tmp_path, content, message):
    f = tmp_path / "topics.txt"
    f.write_text(content)
    with pytest.raises(DataError) as e:
        read_topics(f)
    assert str(f) + message in str(e.value)


def test_unknown_topic_field_is_refused(tmp_path):
    with pytest.raises(DataError, match="choose one of title, desc, title\\+desc"):
        read_topics(write_trec(tmp_path)["topics"], field="narr")


# ------------------------------------------------------------------------------- ir_datasets
def test_irds_collection_matches_the_files(tmp_path):
    name = register_irds("rcp-test/data-labelled", tmp_path)
    col = data.load_collection(f"irds:{name}")
    assert list(col.corpus["doc_id"]) == doc_ids()
    assert col.corpus["title"].iloc[0] == "Solar 0" and col.corpus["text"].iloc[0].startswith("solar panel")
    assert col.queries.to_dict("records")[0] == {"query_id": "401", "text": "solar panel efficiency"}
    assert len(col.qrels) == 24 and col.qrels["grade"].sum() == 16.0
    trec = data.load_collection(tmp_path / "docs.trec", topics=tmp_path / "topics.txt", qrels=tmp_path / "qrels.txt")
    assert trec.corpus[["doc_id", "title", "text"]].values.tolist() == col.corpus.values.tolist()
    assert trec.qrels[["query_id", "doc_id", "grade"]].values.tolist() == col.qrels.values.tolist()
    desc = data.load_collection(f"irds:{name}", query_field="description")
    assert desc.queries["text"].iloc[0] == "How efficient are solar panels?"
    with pytest.raises(DataError, match="no field 'nope'; they have title, description, narrative"):
        data.load_collection(f"irds:{name}", query_field="nope")


def test_irds_dataset_without_qrels_is_unlabelled(tmp_path):
    col = data.load_collection("irds:" + register_irds("rcp-test/data-unlabelled", tmp_path, qrels=False))
    assert col.qrels.empty and col.qrels.attrs["unlabelled"] and len(col.queries) == 4


def test_unknown_irds_id_suggests_close_ones():
    with pytest.raises(DataError, match=r"irds:vaswanii: ir_datasets does not know .*did you mean irds:vaswani"):
        data.load_collection("irds:vaswanii")


def test_irds_without_ir_datasets_names_the_extra(monkeypatch):
    real = builtins.__import__

    def no_irds(name, *args, **kwargs):
        if name == "ir_datasets" or name.startswith("ir_datasets."):
            raise ImportError("No module named 'ir_datasets'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_irds)
    with pytest.raises(DataError, match=r'pip install "rcp-jax\[ir\]"'):
        data.load_collection("irds:vaswani")


def test_irds_missing_files_say_where_they_go(tmp_path, monkeypatch):
    name = register_irds("rcp-test/data-gone", tmp_path / "gone")
    (tmp_path / "gone" / "docs.trec").unlink()
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "home"))
    with pytest.raises(DataError) as e:
        data.load_collection(f"irds:{name}")
    msg = str(e.value)
    assert f"irds:{name}: ir_datasets could not read the documents" in msg and "FileNotFoundError" in msg
    assert str(tmp_path / "home") in msg and "without network" in msg


def test_load_collection_dispatches_beir_and_rows(tmp_path):
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d", "text": "x"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "y"}) + "\n")
    assert data.load_collection(beir).queries["query_id"].tolist() == ["q"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"query_id": "q", "query": "y", "doc_ids": ["d", "e"], "docs": ["x", "z"]}) + "\n")
    assert data.load_collection(rows).pools is not None
    with pytest.raises(DataError, match="no such file or folder; give 'irds:<id>'"):
        data.load_collection(tmp_path / "nothing")

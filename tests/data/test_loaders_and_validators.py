"""Loaders and validators: every bad input names file, line and id; round trips; real Cranfield data."""

from __future__ import annotations

import doctest
import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rcp_jax import data as D
from rcp_jax.errors import DataError


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return p


RUN = "q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 2.0 bm25\nq2 Q0 d1 1 -1e3 bm25\nq1 Q0 d1 1 0.7 dense\n"


# --------------------------------------------------------------------------------------------------
# formats
# --------------------------------------------------------------------------------------------------
def test_trec_run_reads_with_line_numbers(tmp_path):
    run = D.read_run(_write(tmp_path, "r.trec", "\n" + RUN))
    assert list(run.columns) == ["system", "query_id", "doc_id", "score"]
    assert run["system"].tolist() == ["bm25", "bm25", "bm25", "dense"]
    assert run["score"].tolist() == [3.5, 2.0, -1000.0, 0.7]
    assert run.index.name == "line" and run.index.tolist() == [2, 3, 4, 5]
    assert run.attrs["source"].endswith("r.trec")
    ds = D.read_run(_write(tmp_path, "r.txt", RUN), dataset="nano")
    assert ds["dataset"].tolist() == ["nano"] * 4
    renamed = D.read_run(_write(tmp_path, "one.run", RUN.splitlines()[0] + "\n"), system="x")
    assert renamed["system"].tolist() == ["x"]


def test_ids_stay_strings(tmp_path):
    p = _write(tmp_path, "r.csv", "system,query_id,doc_id,score\nbm25,001,0042,1.5\n")
    run = D.read_run(p)
    assert run["query_id"].tolist() == ["001"] and run["doc_id"].tolist() == ["0042"]
    p = _write(tmp_path, "r.jsonl", json.dumps({"system": "s", "query_id": 7, "doc_id": 8.0, "score": 1}) + "\n")
    run = D.read_run(p)
    assert run["query_id"].tolist() == ["7"] and run["doc_id"].tolist() == ["8"]


def test_format_detection_and_override(tmp_path):
    assert D.detect_format("a/run.trec.gz") == "trec"
    assert D.detect_format("x.PARQUET") == "parquet"
    with pytest.raises(DataError, match=r"x\.dat.*rename the file with one of the extensions"):
        D.detect_format("x.dat")
    with pytest.raises(DataError, match="unknown format 'xml'"):
        D.detect_format("x.csv", "xml")
    p = _write(tmp_path, "run.dat", RUN)
    assert len(D.read_run(p, fmt="trec")) == 4
    g = tmp_path / "run.trec.gz"
    g.write_bytes(gzip.compress(RUN.encode()))
    assert len(D.read_run(g)) == 4


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl", "parquet", "trec", "trec.gz"])
def test_run_round_trip(tmp_path, ext):
    run = D.read_run(_write(tmp_path, "r.trec", RUN))
    back = D.read_run(D.write_run(run, tmp_path / f"out.{ext}"))
    key = ["system", "query_id", "doc_id"]
    a = run.sort_values(key).reset_index(drop=True)
    b = back.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_run_with_dataset_round_trips(tmp_path):
    run = D.read_run(_write(tmp_path, "r.trec", RUN), dataset="nano")
    back = D.read_run(D.write_run(run, tmp_path / "r.parquet"))
    assert back["dataset"].tolist() == ["nano"] * 4 and back.index.name == "row"


@pytest.mark.parametrize("ext", ["trec", "tsv", "csv", "jsonl", "parquet"])
def test_qrels_round_trip(tmp_path, ext):
    q = D.read_qrels(_write(tmp_path, "q.qrels", "1 0 d1 2\n1 0 d2 0\n2 0 d9 1.5\n"))
    assert q["grade"].tolist() == [2.0, 0.0, 1.5]
    back = D.read_qrels(D.write_qrels(q, tmp_path / f"out.{ext}"))
    pd.testing.assert_frame_equal(q.reset_index(drop=True), back.reset_index(drop=True), check_dtype=False)


def test_beir_qrels_header(tmp_path):
    q = D.read_qrels(_write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\n1\t184\t3\n1\t29\t0\n"))
    assert q.to_dict("list") == {"query_id": ["1", "1"], "doc_id": ["184", "29"], "grade": [3.0, 0.0]}
    assert q.index.tolist() == [2, 3]


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet", "trec"])
def test_pools_round_trip_keep_order(tmp_path, ext):
    pools = pd.DataFrame({"query_id": ["b", "b", "b", "a", "a"], "doc_id": ["z", "x", "y", "k", "j"]})
    p = D.write_pools(pools, tmp_path / f"pools.{ext}")
    back = D.read_pools(p)
    assert back["doc_id"].tolist() == ["z", "x", "y", "k", "j"]
    assert back["rank"].tolist() == [1, 2, 3, 1, 2]


def test_pools_from_trec_follow_rank_field(tmp_path):
    p = _write(tmp_path, "pool.run", "q1 Q0 c 3 0.1 rrf\nq1 Q0 a 1 0.9 rrf\nq1 Q0 b 2 0.5 rrf\n")
    assert D.read_pools(p)["doc_id"].tolist() == ["a", "b", "c"]


def test_corpus_and_queries_tables(tmp_path):
    c = D.read_corpus(_write(tmp_path, "docs.csv", 'doc_id,text\nd1,"hello, world"\nd2,second\n'))
    assert c.to_dict("list") == {"doc_id": ["d1", "d2"], "title": ["", ""], "text": ["hello, world", "second"]}
    q = D.read_queries(_write(tmp_path, "q.tsv", "query_id\ttext\n1\twhat is it\n"))
    assert q.to_dict("list") == {"query_id": ["1"], "text": ["what is it"]}


def test_module_example_runs():
    result = doctest.testmod(D, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 4


# --------------------------------------------------------------------------------------------------
# bad inputs: each message names the file, the line and the id
# --------------------------------------------------------------------------------------------------
def test_trec_run_wrong_field_count(tmp_path):
    p = _write(tmp_path, "r.trec", "q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 2.0\n")
    with pytest.raises(DataError, match=r"r\.trec:2: 5 fields \('q1 Q0 d2 2 2\.0'\), expected 6: qid Q0 docid rank score tag"):
        D.read_run(p)


def test_trec_run_non_numeric_score_and_rank(tmp_path):
    p = _write(tmp_path, "r.trec", "q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 abc bm25\n")
    with pytest.raises(DataError, match=r"r\.trec:2: score 'abc' of document 'd2' for query 'q1' by system 'bm25'"):
        D.read_run(p)
    p = _write(tmp_path, "r2.trec", "q1 Q0 d1 first 3.5 bm25\n")
    with pytest.raises(DataError, match=r"r2\.trec:1: rank 'first' of document 'd1' for query 'q1'"):
        D.read_run(p)


@pytest.mark.parametrize("bad", ["nan", "inf", "-Infinity"])
def test_non_finite_scores(tmp_path, bad):
    p = _write(tmp_path, "r.tsv", f"system\tquery_id\tdoc_id\tscore\ns\tq1\td1\t1\ns\tq1\td7\t{bad}\n")
    with pytest.raises(DataError, match=rf"r\.tsv:3: score '{bad}' of document 'd7' for query 'q1' by system 's' is not a finite number"):
        D.read_run(p)


def test_non_finite_score_in_parquet_names_row(tmp_path):
    p = tmp_path / "r.parquet"
    pd.DataFrame({"system": ["s", "s"], "query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, np.nan]}).to_parquet(p)
    with pytest.raises(DataError, match=r"r\.parquet, row 2: score nan of document 'b'"):
        D.read_run(p)


def test_duplicate_query_doc_in_a_run(tmp_path):
    p = _write(tmp_path, "r.trec", "q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 2.0 bm25\nq1 Q0 d1 3 1.0 bm25\n")
    with pytest.raises(DataError, match=r"r\.trec:3: system 'bm25' scores document 'd1' of query 'q1' again \(first at line 1\)"):
        D.read_run(p)


def test_run_table_missing_column(tmp_path):
    p = _write(tmp_path, "r.csv", "query_id,doc_id,score\nq,d,1\n")
    with pytest.raises(DataError, match=r"r\.csv: missing column\(s\) \['system'\]"):
        D.read_run(p)
    assert D.read_run(p, system="mine")["system"].tolist() == ["mine"]


def test_csv_ragged_line(tmp_path):
    p = _write(tmp_path, "r.csv", "system,query_id,doc_id,score\ns,q,d,1\ns,q,e,1,extra\n")
    with pytest.raises(DataError, match=r"r\.csv:3: 5 fields, but the header names 4"):
        D.read_run(p)


def test_invalid_jsonl_line(tmp_path):
    p = _write(tmp_path, "r.jsonl", '{"system": "s", "query_id": "q", "doc_id": "d", "score": 1}\n{"system": \n')
    with pytest.raises(DataError, match=r"r\.jsonl:2: not valid JSON"):
        D.read_run(p)


def test_non_utf8_bytes_name_file_line_and_offset(tmp_path):
    raw = b"q1 Q0 d1 1 3.5 bm25\nq1 Q0 caf\xe9 2 2.0 bm25\n"
    p = _write(tmp_path, "latin.trec", raw)
    assert raw.index(b"\xe9") == 29
    with pytest.raises(DataError, match=r"latin\.trec:2: byte offset 29 \(b'\\xe9 2 '\) is not valid UTF-8; re-encode"):
        D.read_run(p)
    p = _write(tmp_path, "corpus.jsonl", b'{"_id": "1", "text": "ok"}\n{"_id": "2", "text": "\xff"}\n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: byte offset \d+"):
        D.read_corpus(p)


def test_trec_qrels_malformed(tmp_path):
    with pytest.raises(DataError, match=r"q\.qrels:2: 3 fields.*qid iteration docid grade"):
        D.read_qrels(_write(tmp_path, "q.qrels", "1 0 d1 1\n1 0 d2\n"))
    with pytest.raises(DataError, match=r"q2\.qrels:1: grade 'high' of document 'd1' for query '1'"):
        D.read_qrels(_write(tmp_path, "q2.qrels", "1 0 d1 high\n"))
    with pytest.raises(DataError, match=r"q3\.qrels:2: document 'd1' of query '1' is judged again \(first at line 1\)"):
        D.read_qrels(_write(tmp_path, "q3.qrels", "1 0 d1 1\n1 0 d1 2\n"))


def test_run_against_pools(tmp_path):
    run = D.read_run(_write(tmp_path, "r.trec", "q1 Q0 d1 1 3.5 s\nq1 Q0 d2 2 2.0 s\nq1 Q0 zz 3 1.0 s\nq9 Q0 d1 1 1.0 s\n"))
    pools = D.read_pools(_write(tmp_path, "p.csv", "query_id,doc_id\nq1,d1\nq1,d2\n"))
    with pytest.raises(DataError, match=r"r\.trec:4: query 'q9' \(system 's'\) has no pool"):
        D.check_run_against_pools(run, pools)
    run = run.loc[run["query_id"] == "q1"]
    with pytest.raises(DataError, match=r"r\.trec:3: system 's' scores document 'zz' of query 'q1', which is not in that query's pool"):
        D.check_run_against_pools(run, pools)
    with pytest.warns(D.PoolWarning, match="'zz'"):
        D.check_run_against_pools(run, pools, unknown_docs="warn")
    D.check_run_against_pools(run, pools, unknown_docs="ignore")
    D.check_run_against_pools(run.loc[run["doc_id"] != "zz"], pools)


def test_in_memory_run_against_pools_names_the_row():
    run = pd.DataFrame({"system": ["s"], "query_id": ["q2"], "doc_id": ["a"], "score": [1.0]})
    pools = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "rank": [1]})
    with pytest.raises(DataError, match=r"run row 0: query 'q2'"):
        D.check_run_against_pools(run, pools)


def test_empty_pools(tmp_path):
    with pytest.raises(DataError, match=r"p\.csv: no pools"):
        D.read_pools(_write(tmp_path, "p.csv", "query_id,doc_id\n"))
    pools = D.read_pools(_write(tmp_path, "p2.csv", "query_id,doc_id\nq1,a\nq1,b\n"))
    with pytest.raises(DataError, match=r"p2\.csv: query 'q2' has an empty pool"):
        D.check_pools(pools, queries=["q1", "q2"])
    rows = _write(tmp_path, "rows.jsonl", json.dumps({"query_id": "q5", "query": "x", "doc_ids": [], "docs": []}) + "\n")
    with pytest.raises(DataError, match=r"rows\.jsonl:1: query 'q5' has an empty pool"):
        D.read_rows(rows)


def test_pool_of_one_warns(tmp_path):
    p = _write(tmp_path, "p.tsv", "query_id\tdoc_id\nq1\ta\nq1\tb\nq2\tsolo\n")
    with pytest.warns(D.PoolWarning, match=r"p\.tsv:4: the pool of query 'q2' has a single document"):
        pools = D.read_pools(p)
    assert len(pools) == 3


def test_duplicate_doc_in_a_pool(tmp_path):
    p = _write(tmp_path, "p.csv", "query_id,doc_id\nq1,a\nq1,b\nq1,a\n")
    with pytest.raises(DataError, match=r"p\.csv:4: document 'a' appears twice in the pool of query 'q1' \(also at line 2\)"):
        D.read_pools(p)
    rows = _write(tmp_path, "rows.jsonl", json.dumps({"query_id": "q5", "query": "x", "doc_ids": ["a", "a"], "docs": ["t", "t"]}) + "\n")
    with pytest.raises(DataError, match=r"rows\.jsonl:1: document 'a' appears twice in the pool of query 'q5'"):
        D.read_rows(rows)


def test_missing_text(tmp_path):
    lines = [{"_id": "1", "title": "t", "text": "ok"}, {"_id": "2", "title": "", "text": ""}, {"_id": "3", "title": "only title"}, {"_id": "4"}]
    p = _write(tmp_path, "corpus.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: document '2' has no text and no title \(2 such documents: \['2', '4'\]\)"):
        D.read_corpus(p)
    with pytest.warns(UserWarning, match="dropped"):
        assert D.read_corpus(p, missing_text="drop")["doc_id"].tolist() == ["1", "3"]
    with pytest.warns(UserWarning, match="kept"):
        kept = D.read_corpus(p, missing_text="warn")
    assert kept["text"].tolist() == ["ok", "", "", ""] and kept["title"].tolist()[2] == "only title"
    rows = _write(tmp_path, "rows.jsonl", json.dumps({"query_id": "q", "query": "x", "doc_ids": ["a", "b"], "docs": ["t", " "]}) + "\n")
    with pytest.raises(DataError, match=r"rows\.jsonl:1: document 'b' has no text"):
        D.read_rows(rows)


def test_queries_problems(tmp_path):
    with pytest.raises(DataError, match=r"queries\.jsonl:2: query '7' has no text"):
        D.read_queries(_write(tmp_path, "queries.jsonl", '{"_id": "1", "text": "a"}\n{"_id": 7, "text": ""}\n'))
    with pytest.raises(DataError, match=r"q2\.jsonl:2: query id '1' appears again \(first at line 1\)"):
        D.read_queries(_write(tmp_path, "q2.jsonl", '{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n'))


def test_corpus_duplicate_id_and_trec_refused(tmp_path):
    with pytest.raises(DataError, match=r"c\.jsonl:2: document id 'x' appears again"):
        D.read_corpus(_write(tmp_path, "c.jsonl", '{"_id": "x", "text": "a"}\n{"_id": "x", "text": "b"}\n'))
    with pytest.raises(DataError, match="cannot be read from a TREC file"):
        D.read_corpus(_write(tmp_path, "c.trec", "x"))


def test_beir_folder_unknown_qrel_ids(tmp_path):
    (tmp_path / "qrels").mkdir()
    _write(tmp_path, "corpus.jsonl", '{"_id": "d1", "title": "", "text": "a"}\n')
    _write(tmp_path, "queries.jsonl", '{"_id": "1", "text": "q"}\n')
    _write(tmp_path, "qrels/test.tsv", "query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t1\n")
    with pytest.raises(DataError, match=r"test\.tsv:3: doc_id 'd2' is not in the corpus"):
        D.read_beir(tmp_path)
    assert len(D.read_beir(tmp_path, strict=False).qrels) == 2
    with pytest.raises(DataError, match=r"dev\.tsv: no such file; the qrels folder holds the split\(s\) test: pass --split test"):
        D.read_beir(tmp_path, split="dev")


# --------------------------------------------------------------------------------------------------
# real data, read in place from ../shared/data
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cranfield(shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return D.read_beir(shared_data / "cranfield", missing_text="warn")


def test_cranfield_counts(cranfield):
    assert len(cranfield.corpus) == 1400 and len(cranfield.queries) == 225 and len(cranfield.qrels) == 1837
    counts = cranfield.qrels["grade"].value_counts().to_dict()
    assert counts == {4.0: 128, 3.0: 387, 2.0: 734, 1.0: 363, 0.0: 225}
    assert cranfield.queries["query_id"].tolist() == [str(i) for i in range(1, 226)]
    assert cranfield.qrels["query_id"].nunique() == 225
    assert cranfield.corpus["doc_id"].is_unique and cranfield.corpus.index[0] == 1


def test_cranfield_empty_documents_are_named(shared_data):
    with pytest.raises(DataError, match=r"cranfield/corpus\.jsonl:471: document '471' has no text and no title \(2 such documents: \['471', '995'\]\)"):
        D.read_beir(shared_data / "cranfield")


def test_tiny_rows(demo_tiny):
    col = D.read_rows(demo_tiny["rows"])
    assert col.queries["query_id"].tolist() == ["q01", "q03", "q04"]
    assert col.pools.groupby("query_id").size().tolist() == [8, 8, 8]
    assert col.pools["rank"].tolist()[:3] == [1, 2, 3]
    assert len(col.corpus) == 24 and (col.corpus["text"].str.len() > 0).all()
    assert (col.qrels["grade"] > 0).all() and set(col.qrels["query_id"]) <= {"q01", "q03", "q04"}


def test_dropped_documents_leave_pools_but_keep_qrels(tmp_path):
    rows = _write(tmp_path, "rows.jsonl", json.dumps(
        {"query_id": "q", "query": "x", "doc_ids": ["a", "b", "c"], "docs": ["t", "", "u"], "qrels": {"b": 1}}) + "\n")
    with pytest.warns(UserWarning, match="dropped"):
        col = D.read_rows(rows, missing_text="drop")
    assert col.pools["doc_id"].tolist() == ["a", "c"] and col.pools["rank"].tolist() == [1, 2]
    assert col.qrels["doc_id"].tolist() == ["b"]


def test_cranfield_dropped_documents_keep_qrels(shared_data):
    with pytest.warns(UserWarning, match="dropped"):
        cran = D.read_beir(shared_data / "cranfield", missing_text="drop")
    assert len(cran.corpus) == 1398 and len(cran.qrels) == 1837

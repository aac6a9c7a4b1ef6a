"""Through the CLI: every bad input file is refused with exit code 2 and one message
on stderr naming the file, the line and the id, and saying what to do; never a traceback, and never
after spending judge calls. (``tests/data/test_loaders_and_validators.py`` covers the loaders themselves.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rcp_jax.judging import JudgeFamily, Judgement, JudgementStore, read_judgements, record_id
from rcp_jax.cli import main


def refused(capsys, argv, *needles):
    """Run the CLI in process: exit 2, each needle in stderr, no traceback; returns stderr."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, f"{needle!r} not in: {err}"
    return err


def write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def rows_of(collection) -> list[dict]:
    return [json.loads(line) for line in collection["rows"].read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------------------------------
# runs (evaluate)
# --------------------------------------------------------------------------------------------------
@pytest.fixture()
def evaluate_argv(reference):
    return ["evaluate", "--calibration", reference.folder / "out" / "calibration"]


@pytest.mark.parametrize(("name", "content", "needles"), [
    ("bad.trec", "q0 Q0 q0-d00 1 2.5 good\nq0 Q0 q0-d01 2 2.0\n",
     ["bad.trec:2:", "5 fields", "expected 6: qid Q0 docid rank score tag", "fix or remove the line"]),
    ("dup.csv", "system,query_id,doc_id,score\ngood,q0,q0-d00,1\ngood,q0,q0-d01,2\ngood,q0,q0-d00,3\n",
     ["dup.csv:4:", "'q0-d00'", "'q0'", "again (first at line 2)", "keep one score per"]),
    ("nan.tsv", "system\tquery_id\tdoc_id\tscore\ngood\tq1\tq1-d03\tNaN\n",
     ["nan.tsv:2:", "'NaN'", "'q1-d03'", "not a finite number", "fix the value or drop the line"]),
    ("inf.csv", "system,query_id,doc_id,score\ngood,q1,q1-d03,1\ngood,q1,q1-d04,-inf\n",
     ["inf.csv:3:", "'-inf'", "'q1-d04'", "not a finite number"]),
    ("unknown_query.csv", "system,query_id,doc_id,score\ngood,q0,q0-d00,1\ngood,q9,q0-d00,1\n",
     ["unknown_query.csv:3:", "query 'q9'", "has no pool in the calibration", "drop it from the run"]),
    ("unknown_doc.trec", "q0 Q0 q0-d00 1 2 good\nq0 Q0 q1-d00 2 1 good\n",
     ["unknown_doc.trec:2:", "document 'q1-d00' of query 'q0'", "not in that query's pool", "--unknown-docs ignore"]),
    ("latin1.trec", b"q0 Q0 q0-d00 1 2 good\nq0 Q0 caf\xe9 2 1 good\n",
     ["latin1.trec:2:", "not valid UTF-8", "re-encode the file as UTF-8"]),
])
def test_bad_run_files_are_refused(capsys, tmp_path, evaluate_argv, name, content, needles):
    run = write(tmp_path, name, content)
    refused(capsys, [*evaluate_argv, "--runs", run, "--out", tmp_path / "out"], *needles)
    assert not (tmp_path / "out").exists()


def test_runs_are_checked_against_the_pools_given(capsys, tmp_path, evaluate_argv, collection):
    pools = write(tmp_path, "pools.tsv", "query_id\tdoc_id\n" + "".join(
        f"{r['query_id']}\t{d}\n" for r in rows_of(collection) if r["query_id"] != "q3" for d in r["doc_ids"]))
    refused(capsys, [*evaluate_argv, "--runs", collection["runs"], "--pools", pools],
            "runs.csv:", "query 'q3'", f"has no pool in {pools}")
    # a document outside the pool can be let through on purpose
    run = write(tmp_path, "extra.csv", "system,query_id,doc_id,score\ngood,q0,q0-d00,2\ngood,q0,elsewhere,1\n")
    # ... and ranked with gain 0 when told so (else it is a hole in half of good's top-k: refused)
    assert main([*map(str, evaluate_argv), "--runs", str(run), "--unknown-docs", "warn"]) == 2
    assert "good 50.0% (worst queries: q0 1/2)" in capsys.readouterr().err
    assert main([*map(str, evaluate_argv), "--runs", str(run), "--unknown-docs", "warn", "--holes", "zero"]) == 0
    assert "warning" not in capsys.readouterr().err  # reported as a note in the output, not a stray warning


# --------------------------------------------------------------------------------------------------
# pools, collections (judge): refused before any judge call
# --------------------------------------------------------------------------------------------------
def pools_file(tmp_path, collection, name="pools.tsv", *, keep=None, extra=""):
    lines = ["query_id\tdoc_id"]
    for r in rows_of(collection):
        ids = r["doc_ids"] if keep is None else keep(r["query_id"], r["doc_ids"])
        lines += [f"{r['query_id']}\t{d}" for d in ids]
    return write(tmp_path, name, "\n".join(lines) + "\n" + extra)


def judge_argv(collection, tmp_path, *extra):
    return ["judge", "--rows", collection["rows"], "--store", tmp_path / "store", "--quiet", *extra]


@pytest.mark.parametrize(("case", "needles"), [
    ("unknown_doc", ["pools.tsv:66:", "document 'nowhere' of query 'q3' is not in the corpus", "fix the id"]),
    ("unknown_query", ["pools.tsv:66:", "query 'q7' is not in the queries", "add the missing query"]),
    ("pool_of_one", ["pools.tsv:18:", "pool of query 'q1' has 1 document", "add candidates", "drop the query"]),
    ("duplicate", ["pools.tsv:66:", "document 'q3-d00' appears twice in the pool of query 'q3'", "list each"]),
    ("empty", ["pools.tsv: no pools", "expected query_id, doc_id"]),
])
def test_bad_pools_are_refused_before_any_call(capsys, tmp_path, collection, case, needles):
    if case == "unknown_doc":
        pools = pools_file(tmp_path, collection, extra="q3\tnowhere\n")
    elif case == "unknown_query":
        pools = pools_file(tmp_path, collection, extra="q7\tq0-d00\n")
    elif case == "pool_of_one":
        pools = pools_file(tmp_path, collection, keep=lambda q, ids: ids[:1] if q == "q1" else ids)
    elif case == "duplicate":
        pools = pools_file(tmp_path, collection, extra="q3\tq3-d00\n")
    else:
        pools = write(tmp_path, "pools.tsv", "query_id\tdoc_id\n")
    refused(capsys, judge_argv(collection, tmp_path, "--pools", pools), *needles)
    assert not (tmp_path / "store").exists()  # nothing was asked


def test_bad_collection_files_are_refused(capsys, tmp_path, collection):
    rows = rows_of(collection)
    rows[2]["docs"][5] = "   "
    missing = write(tmp_path, "missing.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    refused(capsys, ["judge", "--rows", missing, "--store", tmp_path / "store"],
            "missing.jsonl:3:", "document 'q2-d05' has no text", "--missing-text drop")
    raw = collection["rows"].read_bytes().replace("Zürich".encode(), "Zürich".encode("latin-1"), 1)
    latin = write(tmp_path, "latin1.jsonl", raw)
    refused(capsys, ["judge", "--rows", latin, "--store", tmp_path / "store"], "latin1.jsonl:", "not valid UTF-8")
    assert not (tmp_path / "store").exists()


# --------------------------------------------------------------------------------------------------
# judgement stores (fit)
# --------------------------------------------------------------------------------------------------
def copy_store(reference, folder: Path, change=None, stages=("tournament", "rubric")) -> Path:
    """The reference store, plus a copy of its records in ``stages`` re-labelled by ``change(family)``."""
    shutil.copytree(reference.folder / "store", folder)
    if change is not None:
        with JudgementStore(folder) as store:
            for stage in stages:
                for j in read_judgements(folder, stage):
                    store.append(relabel(j, change(j.family)))
    return folder


def relabel(j: Judgement, family: JudgeFamily) -> Judgement:
    """The same answer as if another judge family had given it (its own record id)."""
    d = j.to_dict()
    d["family"] = family.to_dict()
    d["record_id"] = record_id(family, j.window)
    return Judgement.from_dict(d)


def other(family: JudgeFamily, **changes) -> JudgeFamily:
    return JudgeFamily(**{"model": family.model, "prompt_hash": family.prompt_hash, "parser_version": family.parser_version,
                          "decoding": dict(family.decoding), "n_criteria": family.n_criteria, **changes})


def test_a_store_mixing_judge_families_is_refused(capsys, tmp_path, reference):
    prompt = copy_store(reference, tmp_path / "prompt", lambda f: other(f, prompt_hash="0123456789abcdef"))
    refused(capsys, ["fit", "--store", prompt, "--out", tmp_path / "fit"],
            "tournament.jsonl mixes 2 judge families", "model 'simulated', prompt 01234567", "pick one with --family")
    assert not (tmp_path / "fit").exists()
    refused(capsys, ["fit", "--store", prompt, "--out", tmp_path / "fit", "--family", "nobody"],
            "no tournament judgements of family 'nobody'", "pass one of these models or family ids to --family")


def test_tournament_and_rubric_from_different_judges_are_refused(capsys, tmp_path, reference):
    store = tmp_path / "store"
    shutil.copytree(reference.folder / "store", store)
    (store / "rubric.jsonl").unlink()
    with JudgementStore(store) as st:
        for j in read_judgements(reference.folder / "store", "rubric"):
            st.append(relabel(j, other(j.family, model="another-judge")))
    refused(capsys, ["fit", "--store", store, "--out", tmp_path / "fit"],
            "the tournament was judged by family", "model 'simulated'", "model 'another-judge'", "one calibration needs one judge")


def test_missing_or_damaged_stores_are_refused(capsys, tmp_path, reference):
    refused(capsys, ["fit", "--store", tmp_path / "nowhere", "--out", tmp_path / "fit"], "no such judgement store folder")
    store = copy_store(reference, tmp_path / "damaged")
    lines = (store / "tournament.jsonl").read_bytes().splitlines(keepends=True)
    lines[4] = b'{"record_id": "half a line\n'
    (store / "tournament.jsonl").write_bytes(b"".join(lines))
    refused(capsys, ["fit", "--store", store, "--out", tmp_path / "fit"],
            "tournament.jsonl, line 5: not a judgement record", "restore the file")


def test_the_console_script_prints_no_traceback(tmp_path, collection):
    """The same refusals through the installed entry point (a fresh interpreter, real stderr)."""
    pools = pools_file(tmp_path, collection, keep=lambda q, ids: ids[:1] if q == "q1" else ids)
    done = subprocess.run([sys.executable, "-m", "rcp_jax", *map(str, judge_argv(collection, tmp_path, "--pools", pools))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "pools.tsv:18:" in done.stderr
    assert done.stderr.count("error:") == 1

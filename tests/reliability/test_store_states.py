"""``rcp-jax fit`` never fails on a state the judge can write.

Each state below is one a judging run can leave behind (a crash, a judge that never answers some windows
usably, answers flagged as prompt injections). Each gives either a correct fit (exit 0, with a note saying
what was left out and why) or a clear refusal (exit 2) naming the store file, the window and the fix;
never a traceback. (Two schedules in one store: ``test_store_identity.py``.)
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rcp_jax.cli import main


def fit(store: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["fit", "--store", str(store), "--out", str(out), "--method", "map", "--no-plots"])
    return rc, err.getvalue()


def rewrite(store: Path, stage: str, change) -> None:
    """Rewrite ``stage``'s records through ``change(record) -> list of records`` (whole lines)."""
    path = store / f"{stage}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for rec in records for r in change(rec)), encoding="utf-8")


def invalid_copy(record: dict, attempt: int) -> dict:
    """An invalid answer attempt of ``record``'s window, as the judge stores one."""
    return {**record, "valid": False, "invalid_category": "no_json", "invalid_detail": "no JSON object found",
            "scores": None, "criteria": None, "raw_response": "Sorry, I cannot rank these.", "attempts": attempt}


@pytest.fixture
def store(small_judged, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(small_judged, copy)
    return copy


def test_invalid_only_windows_a_torn_tail_and_a_query_without_tournament_still_fit(store, tmp_path):
    # q0: every tournament window answered only invalidly (three attempts each, as a failing judge leaves them)
    rewrite(store, "tournament", lambda r: [invalid_copy(r, a) for a in (1, 2, 3)] if r["window"]["query_id"] == "q0" else [r])
    # q1: one rubric window without a valid answer
    rewrite(store, "rubric", lambda r: [invalid_copy(r, 1)] if (r["window"]["query_id"], r["window"]["sequence"]) == ("q1", 0) else [r])
    with open(store / "rubric.jsonl", "ab") as fh:  # a crash tore the last line
        fh.write(b'{"record_id": "torn-by-a-crash", "fam')

    out = tmp_path / "fit"
    rc, err = fit(store, out)
    assert rc == 0, err
    assert "Traceback" not in err
    assert f"{store}: 12 document(s) of 1 queries have rubric answers but no usable tournament answer" in err
    assert "query 'q0' has none at all" in err and f"rcp-jax judge --store {store}" in err
    documents = pd.read_csv(out / "calibration" / "documents.csv", dtype={"query_id": str, "doc_id": str})
    assert "q0" not in set(documents["query_id"]) and {"q1", "q2"} <= set(documents["query_id"])
    answers = pd.read_csv(out / "answers.csv", dtype={"query_id": str})
    assert not ((answers["query_id"] == "q1") & (answers["window_id"] == "balanced#0")).any()


@pytest.mark.parametrize("stage", ["tournament", "rubric"])
def test_a_stage_whose_answers_are_all_flagged_is_refused_clearly(store, tmp_path, stage):
    rewrite(store, stage, lambda r: [{**r, "flags": ["echoes_document:q0-d1"]} if r["valid"] else r])
    rc, err = fit(store, tmp_path / "fit")
    assert rc == 2
    assert f"{store / (stage + '.jsonl')}: every valid {stage} answer" in err and "--keep-flagged" in err
    assert "Traceback" not in err


def test_a_store_interrupted_before_the_rubric_is_refused_clearly(store, tmp_path):
    (store / "rubric.jsonl").unlink()
    rc, err = fit(store, tmp_path / "fit")
    assert rc == 2
    assert str(store / "rubric.jsonl") in err and "rcp-jax judge" in err


def test_a_torn_tail_is_reported_once(store, tmp_path, caplog):
    with open(store / "tournament.jsonl", "ab") as fh:
        fh.write(b'{"record_id": "torn')
    rc, err = fit(store, tmp_path / "fit")
    assert rc == 0, err
    torn = [r for r in caplog.records if "torn last line" in r.getMessage()]
    assert len(torn) == 1  # fit reads the file several times; one warning

"""Custom rubrics from the CLI: a K = 3 rubric file through judge -> fit -> doctor in this
process, and the refusals (another rubric into the same store or fit, a legacy identity, a bad file)."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rcp_jax.calibration import load_calibration
from rcp_jax.cli import main
from rcp_jax.extension import check_store
from rcp_jax.judging import JudgementStore, SimulatedJudge, synthetic_dataset
from rcp_jax.judging.prompts.rubric import RubricError, builtin_rubric, load_rubric
from rcp_jax.schedule import DEFAULT_CONFIG
from rcp_jax.store_identity import StoreIdentityError, check_store_identity, make_identity

THREE = """name = "support"
[[criteria]]
name = "On topic"
question = "is the document about what the query asks?"
[[criteria]]
name = "Useful detail"
question = "does it give specific, usable information for the query?"
[[criteria]]
name = "Complete answer"
question = "does it answer the query completely, with nothing important missing?"
"""
NAMES = ["On topic", "Useful detail", "Complete answer"]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[str, Path]:
    """Three queries x 12 documents judged with the K = 3 rubric into a store (simulated judge).

    The collection and its name are those of ``tests/helpers/small_store.py``, so the tournament's fits
    have the shapes that tests' judge runs compile already (most of this test's cost is XLA compilation)."""
    folder = tmp_path_factory.mktemp("rubric_cli")
    queries, documents, latent = synthetic_dataset(3, 12, seed=1, doc_chars=60)
    with open(folder / "demo.jsonl", "w", encoding="utf-8") as fh:
        for q, docs in documents.items():
            ids = sorted(docs)
            qrels = {d: int(np.clip(np.floor(latent[q][d] + 2.0), 0, 3)) for d in ids}
            fh.write(json.dumps({"query_id": q, "query": queries[q], "doc_ids": ids, "docs": [docs[d] for d in ids],
                                 "qrels": qrels}) + "\n")
    (folder / "support.toml").write_text(THREE, encoding="utf-8")
    paths = {"rows": folder / "demo.jsonl", "rubric": folder / "support.toml", "store": folder / "store",
             "fit": folder / "fit", "folder": folder}
    rc, out, err = cli("judge", "--rows", str(paths["rows"]), "--store", str(paths["store"]), "--rubric",
                       str(paths["rubric"]), "--quiet", "--json")
    assert rc == 0, err
    return paths


def test_a_three_criterion_rubric_goes_through_judge_fit_and_doctor(judged):
    identity = json.loads((judged["store"] / "identity.json").read_text())
    assert identity["rubric"]["name"] == "support" and identity["rubric"]["criteria"] == NAMES
    records = [json.loads(line) for line in (judged["store"] / "rubric.jsonl").read_text().splitlines()]
    assert {r["family"]["n_criteria"] for r in records} == {3}
    assert {r["family"]["rubric"]["hash"] for r in records} == {load_rubric(judged["rubric"]).hash}
    assert all(len(a) == 3 for r in records if r["valid"] for a in r["criteria"].values())

    rc, out, err = cli("fit", "--store", str(judged["store"]), "--out", str(judged["fit"]), "--method", "map", "--no-plots",
                       "--rubric", str(judged["rubric"]))
    assert rc == 0, err
    assert "criteria (rubric 'support'):" in out and "C3 Complete answer" in out and "C5" not in out
    fit = json.loads((judged["fit"] / "fit.json").read_text())
    assert fit["criteria"] == ["C1", "C2", "C3"] and fit["criterion_names"] == NAMES
    assert len(fit["gamma"]) == 3 and abs(sum(fit["gamma"]) - 3) < 1e-6
    items = json.loads((judged["fit"] / "calibration" / "items.json").read_text())
    assert items["rubric"]["criteria"] == NAMES
    assert list(pd.read_csv(judged["fit"] / "answers.csv").columns[-3:]) == ["C1", "C2", "C3"]

    # extend refuses a judge asking another rubric than the calibration's store was judged with, before any call
    with pytest.raises(RubricError, match=r"(?s)calibration .* was judged with rubric 'support'.*uses rubric 'paper'"):
        check_store(judged["store"], load_calibration(judged["fit"] / "calibration"), SimulatedJudge({}))

    rc, out, err = cli("doctor", "--rows", str(judged["rows"]), "--rubric", str(judged["rubric"]), "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["ok"] and report["rubric"]["name"] == "support"
    stages = [w["stage"] for w in report["windows"]]
    assert stages[-1] == "rubric" and set(stages[:-1]) == {"tournament"} and report["windows"][-1]["valid"]


def test_a_store_judged_with_another_rubric_is_refused_before_any_call(judged):
    before = snapshot(judged["store"])
    rc, _, err = cli("judge", "--rows", str(judged["rows"]), "--store", str(judged["store"]), "--quiet")
    assert rc == 2
    assert "was judged with another rubric" in err and "Nothing was asked" in err
    assert "store rubric 'support'" in err and "this run rubric 'paper' (built-in" in err
    assert f"run again with --rubric {judged['rubric']}" in err
    other = judged["folder"] / "reworded.toml"
    other.write_text(THREE.replace("usable information", "usable facts").replace("support", "support-2"))
    rc, _, err = cli("judge", "--rows", str(judged["rows"]), "--store", str(judged["store"]), "--rubric", str(other),
                     "--quiet")
    assert rc == 2 and "rubric 'support-2'" in err and "rubric 'support'" in err
    assert snapshot(judged["store"]) == before  # nothing asked, nothing written


def test_fit_refuses_another_rubric_than_the_stores(judged):
    rc, _, err = cli("fit", "--store", str(judged["store"]), "--out", str(judged["folder"] / "fit2"), "--rubric", "paper")
    assert rc == 2
    assert "was judged with rubric 'support'" in err and "this run uses rubric 'paper'" in err
    assert "leave --rubric out: fit reads the rubric from the store" in err
    assert not (judged["folder"] / "fit2" / "fit.json").exists()


def test_a_bad_rubric_file_is_refused_before_a_store_is_made(judged, tmp_path):
    bad = tmp_path / "one.toml"
    bad.write_text('[[criteria]]\nname = "Only"\nquestion = "is it relevant?"\n')
    rc, _, err = cli("judge", "--rows", str(judged["rows"]), "--store", str(tmp_path / "store"), "--rubric", str(bad))
    assert rc == 2 and f"rubric file {bad}: has 1 criterion; a rubric needs at least 2" in err
    assert not (tmp_path / "store").exists()


def test_an_identity_written_before_rubric_files_means_the_builtin_rubric(tmp_path):
    pools = {"q": ["a", "b", "c"]}
    store = JudgementStore(tmp_path / "store")
    store.open()
    try:
        legacy = {**make_identity("d", 0, DEFAULT_CONFIG, pools), "created": "then", "updated": "then"}
        store.write_identity(legacy)
        custom = load_rubric(_write(tmp_path / "support.toml", THREE)).summary()
        with pytest.raises(StoreIdentityError, match=r"(?s)store rubric 'paper' \(built-in.*this run rubric 'support'.*"
                                                     r"run again with no --rubric"):
            check_store_identity(store, dataset="d", seed=0, config=DEFAULT_CONFIG, pools=pools, rubric=custom)
        check_store_identity(store, dataset="d", seed=0, config=DEFAULT_CONFIG, pools=pools,
                             rubric=builtin_rubric().summary())
        assert json.loads((store.folder / "identity.json").read_text())["rubric"]["name"] == "paper"  # now recorded
    finally:
        store.close()


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path

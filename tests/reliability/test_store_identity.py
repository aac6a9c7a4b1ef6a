"""A store records its schedule identity and is never poisoned by a second schedule.

Resuming with the same data under another name (a renamed folder), another --seed or an edited pools file
used to judge a whole second schedule into the same store, and `fit` then died on a duplicate document.
Now the first run writes ``identity.json``; a run with another identity is refused before any judge call,
saying what differs and what to do; without --name the store's recorded name is resumed; stores written
before identity files are adopted when their windows match; and a store that already holds two schedules
fits, each window on its own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from scipy.stats import spearmanr

from rcp_jax import schedule as S
from rcp_jax.cli import main
from rcp_jax.judging import SimulatedJudge, read_judgements
from rcp_jax.judging.store.jsonl import IDENTITY_FILE
from rcp_jax.pipeline import PipelineInput, judge_collection_sync
from rcp_jax.store_identity import StoreIdentityError, pool_hash

from tests.helpers.small_store import DOCUMENTS, LATENT, POOLS, QRELS, QUERIES, cli_judge, snapshot


def collection(name: str = "demo", pools=None) -> PipelineInput:
    return PipelineInput(queries=QUERIES, documents=DOCUMENTS, pools=pools or POOLS, dataset=name)


def api_judge(store, *, name="demo", seed=0, pools=None, **kw):
    """The Python API on the same collection; returns the calls made (its judge's family is not the CLI's,
    so only refusals and identity checks are asked of it)."""
    sim = SimulatedJudge(LATENT, seed=3)
    try:
        out = judge_collection_sync(collection(name, pools), judge=sim, store=store, seed=seed, progress=False, **kw)
    finally:
        api_judge.calls = sim.ledger.calls
    return out[3]


@pytest.fixture
def store(small_judged, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(small_judged, copy)
    return copy


def test_the_first_run_records_the_identity(small_judged):
    identity = json.loads((small_judged / IDENTITY_FILE).read_text())
    assert identity["kind"] == "rcp-jax schedule identity" and identity["format"] == 1
    assert (identity["dataset"], identity["seed"]) == ("demo", 0)
    assert identity["schedule"] == S.DEFAULT_CONFIG.to_dict()
    assert identity["queries"] == {q: {"pool_hash": pool_hash(d), "documents": len(d)} for q, d in POOLS.items()}
    assert len(identity["pools_hash"]) == 16


def test_the_same_identity_resumes_without_calls_or_rewrites(small_rows, store):
    before = snapshot(store)
    rc, summary, err = cli_judge(small_rows, store)
    assert rc == 0, err
    assert summary["calls"] == 0
    assert snapshot(store) == before  # identity.json untouched, nothing appended


@pytest.mark.parametrize(("change", "says", "fix"), [
    ({"seed": 1}, "seed: store 0, this run 1", "--seed 0"),
    ({"name": "demo-renamed"}, "dataset name: store 'demo', this run 'demo-renamed'", "--name demo"),
    ({"pools": {**POOLS, "q1": POOLS["q1"][::-1]}}, "q1 (12 documents then, 12 now)", "the pools file the store was judged with"),
    ({"pools": {**POOLS, "q2": POOLS["q2"][:-1]}}, "q2 (12 documents then, 11 now)", "the pools file"),
])
def test_another_identity_is_refused_before_any_call(store, change, says, fix):
    before = snapshot(store)
    with pytest.raises(StoreIdentityError) as err:
        api_judge(store, name=change.get("name", "demo"), seed=change.get("seed", 0), pools=change.get("pools"))
    assert api_judge.calls == 0
    assert snapshot(store) == before
    message = str(err.value)
    assert str(store) in message and "Nothing was asked" in message
    assert says in message and fix in message and "a new --store" in message


def test_cli_refusal_exit_code_and_a_renamed_rows_file(small_rows, store, tmp_path):
    rc, _, err = cli_judge(small_rows, store, "--seed", "7")
    assert rc == 2
    assert "rcp-jax judge: error:" in err and "seed: store 0, this run 7" in err and "--seed 0" in err
    assert "Traceback" not in err
    renamed = tmp_path / "renamed-folder.jsonl"  # the same data under another name: the default --name differs
    shutil.copy(small_rows, renamed)
    rc, summary, err = cli_judge(renamed, store)
    assert rc == 0, err
    assert summary["calls"] == 0
    assert "resuming judgement store" in err and "recorded dataset name 'demo'" in err
    assert "default was 'renamed-folder'" in err
    rc, _, err = cli_judge(renamed, store, "--name", "renamed")  # an explicit name is never overridden
    assert rc == 2 and "--name demo" in err
    rc, _, err = cli_judge(renamed, store, "--seed", "3")  # the default name never hides another seed
    assert rc == 2 and "--seed 0" in err


def test_new_queries_are_added_to_the_identity(tmp_path):
    from rcp_jax.judging import JudgementStore
    from rcp_jax.store_identity import check_store_identity

    first = {q: POOLS[q] for q in ("q0", "q1")}
    lines = []
    with JudgementStore(tmp_path / "store") as st:
        assert check_store_identity(st, dataset="demo", seed=0, config=S.DEFAULT_CONFIG, pools=first, say=lines.append) == "demo"
        recorded = json.loads((st.folder / IDENTITY_FILE).read_text())
        assert set(recorded["queries"]) == {"q0", "q1"}
        check_store_identity(st, dataset="demo", seed=0, config=S.DEFAULT_CONFIG, pools=POOLS, say=lines.append)
        grown = json.loads((st.folder / IDENTITY_FILE).read_text())
        assert set(grown["queries"]) == {"q0", "q1", "q2"} and grown["created"] == recorded["created"]
        assert grown["pools_hash"] != recorded["pools_hash"]
        check_store_identity(st, dataset="demo", seed=0, config=S.DEFAULT_CONFIG, pools=first)  # a subset: fine
        with pytest.raises(StoreIdentityError, match="q2"):
            check_store_identity(st, dataset="demo", seed=0, config=S.DEFAULT_CONFIG, pools={**POOLS, "q2": POOLS["q2"][1:]})
        other = S.ScheduleConfig(w=8)
        with pytest.raises(StoreIdentityError, match=r"schedule\.w: store 10, this run 8"):
            check_store_identity(st, dataset="demo", seed=0, config=other, pools=POOLS)
    assert any("1 new queries added" in line for line in lines)


def test_a_store_without_identity_file_is_adopted_when_its_windows_match(small_rows, store):
    (store / IDENTITY_FILE).unlink()
    rc, summary, err = cli_judge(small_rows, store)
    assert rc == 0, err
    assert summary["calls"] == 0
    assert "had no identity file" in err
    identity = json.loads((store / IDENTITY_FILE).read_text())
    assert (identity["dataset"], identity["seed"], identity["adopted"]) == ("demo", 0, True)


@pytest.mark.parametrize("change", [{"name": "other"}, {"seed": 2}])
def test_a_store_without_identity_file_judged_under_another_identity_is_refused(store, change):
    (store / IDENTITY_FILE).unlink()
    before = snapshot(store)
    with pytest.raises(StoreIdentityError, match="predates identity files") as err:
        api_judge(store, name=change.get("name", "demo"), seed=change.get("seed", 0), dataset_from_store=True)
    assert api_judge.calls == 0
    assert "round1#" in str(err.value) and "a new --store" in str(err.value)
    assert snapshot(store) == before  # not even an identity file


@pytest.fixture(scope="module")
def poisoned(small_rows, small_judged, tmp_path_factory) -> Path:
    """What the old code wrote: a second schedule (the same data under another name) judged into the store,
    here its round-1 and balanced-rubric windows, asked by the same judge as the CLI's."""
    from rcp_jax.cli import build_parser
    from rcp_jax.cli._common import latent_from_qrels, load_collection, make_judge, pipeline_input
    from rcp_jax.judging import judge_windows_sync

    store = tmp_path_factory.mktemp("poisoned") / "store"
    shutil.copytree(small_judged, store)
    (store / IDENTITY_FILE).unlink()
    args = build_parser().parse_args(["judge", "--rows", str(small_rows), "--store", str(store)])
    col, pools = load_collection(args)
    other = pipeline_input(col, pools, "demo-copy")
    judge = make_judge(args, latent_from_qrels(other.pools, other.qrels, 0))
    windows = [w for q, d in other.pools.items()
               for w in S.tournament_round1(q, d, seed=0, dataset="demo-copy") + S.rubric_balanced(q, d, seed=0, dataset="demo-copy")]
    judge_windows_sync(windows, judge=judge, store=store, documents=other.documents, queries=other.queries)
    return store


def test_fit_keeps_two_schedules_apart_and_says_why(poisoned, tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", "--store", str(poisoned), "--out", str(out), "--method", "map", "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert f"{poisoned / 'tournament.jsonl'} holds windows of two schedules" in err
    assert "another --name, --seed or pools file" in err and "new --store" in err
    scores = pd.read_csv(out / "window_scores.csv", dtype={"query_id": str, "doc_id": str})
    assert not scores.duplicated(["query_id", "window_id", "doc_id"]).any()
    assert scores["window_id"].str.contains("@").any()
    windows = {j.window for j in read_judgements(poisoned, "tournament", valid_only=True) if not j.flags}
    assert scores.groupby(["query_id", "window_id"]).ngroups == len(windows)  # every answer kept, each window apart
    gains = pd.read_csv(out / "calibration" / "documents.csv", dtype={"query_id": str, "doc_id": str})
    truth = [QRELS[q][d] for q, d in zip(gains["query_id"], gains["doc_id"])]
    assert spearmanr(gains["gain"], truth).statistic > 0.7  # still a good fit


def test_a_poisoned_store_without_identity_resumes_its_schedule_with_a_note(small_rows, poisoned, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(poisoned, store)
    rc, summary, err = cli_judge(small_rows, store)
    assert rc == 0, err
    assert summary["calls"] == 0
    assert "also holds windows of another schedule" in err and "had no identity file" in err
    assert "holds windows of two schedules" not in err  # judging reads only its own windows


def test_identity_file_mode_follows_the_umask(small_judged):
    import os

    current = os.umask(0)
    os.umask(current)
    assert (small_judged / IDENTITY_FILE).stat().st_mode & 0o777 == 0o666 & ~current


def test_a_damaged_identity_file_is_a_clear_error(small_rows, store):
    (store / IDENTITY_FILE).write_text("{not json")
    rc, _, err = cli_judge(small_rows, store)
    assert rc == 2
    assert "identity file is damaged" in err and "delete it" in err and str(store / IDENTITY_FILE) in err

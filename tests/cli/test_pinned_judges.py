"""Pinned judges from the command line: `fit` refuses a judge whose answers came from two served models (an alias
that moved mid-store) and `fit --judges` pools them; `judge`'s report of the change; the floating-alias note of
the judge the CLI builds. In process."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rcp_jax.judging import judge_windows
from rcp_jax.judging.judge import Ledger
from rcp_jax.judging.offline import SimulatedJudge, synthetic_dataset

from rcp_jax.cli import _judge_options as J
from rcp_jax.cli import build_parser, main
from rcp_jax.cli.judge import run_usage, served_summary
from rcp_jax.judges import list_judges
from rcp_jax.schedule import ScheduleConfig, rubric_balanced, tournament_round1

OLD, NEW = "sim-2024-07-18", "sim-2025-01-31"


def _rewrite(store, served_of) -> None:
    """Give each stored record the served model (and fingerprint) ``served_of(record dict)`` names, as replies
    from a provider whose alias moved would have."""
    for stage in ("tournament", "rubric"):
        path = store / f"{stage}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for r in rows:
            r["served_model"], r["system_fingerprint"] = served_of(r)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One simulated judge's store, three ways: answered by two served models (alternate windows), by one served
    model under two fingerprints, and by one served model throughout."""
    root = tmp_path_factory.mktemp("pinned")
    queries, documents, latent = synthetic_dataset(5, 16, seed=4, doc_chars=60)
    windows = []
    for qid, docs in documents.items():
        windows += tournament_round1(qid, list(docs), seed=0, dataset="t", config=ScheduleConfig())
        windows += rubric_balanced(qid, list(docs), seed=0, dataset="t", config=ScheduleConfig())
    out = {}
    for name in ("mixed", "fingerprints", "pinned"):
        store = root / name
        judge = SimulatedJudge(latent, model="sim", seed=1, decorate=False, noise=0.3)
        asyncio.run(judge_windows(windows, judge=judge, store=store, documents=documents, queries=queries))
        out[name] = store
    _rewrite(out["mixed"], lambda r: (OLD if r["window"]["sequence"] % 2 == 0 else NEW, None))
    _rewrite(out["fingerprints"], lambda r: (OLD, "fp_a" if r["window"]["sequence"] % 2 == 0 else "fp_b"))
    _rewrite(out["pinned"], lambda r: (OLD, "fp_a"))
    return out


def test_fit_refuses_a_judge_answered_by_two_served_models(stores, tmp_path, capsys):
    store = stores["mixed"]
    code = main(["fit", "--store", str(store), "--out", str(tmp_path / "fit")])
    err = capsys.readouterr().err
    assert code == 2, err
    n_old = sum(json.loads(x)["served_model"] == OLD for s in ("tournament", "rubric")
                for x in (store / f"{s}.jsonl").read_text().splitlines())
    n_new = sum(json.loads(x)["served_model"] == NEW for s in ("tournament", "rubric")
                for x in (store / f"{s}.jsonl").read_text().splitlines())
    assert f"'{OLD}' {n_old}, '{NEW}' {n_new}" in err  # each served model with its answers
    assert "re-judge into a fresh store with a pinned model" in err
    assert f"--judges sim~{OLD},sim~{NEW}" in err  # the pooling command, ready to paste
    assert "Traceback" not in err and not (tmp_path / "fit" / "calibration").exists()


def test_fit_judges_pools_the_served_models_as_two_judges(stores, tmp_path, capsys):
    store = stores["mixed"]
    held = list_judges(store)
    assert [(j.name, j.served) for j in held] == [(f"sim~{OLD}", OLD), (f"sim~{NEW}", NEW)]
    out = tmp_path / "fit"
    code = main(["fit", "--store", str(store), "--out", str(out), "--judges", f"old=sim~{OLD},new=sim~{NEW}",
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert [(j["name"], j["served_model"]) for j in payload["judges"]] == [("old", OLD), ("new", NEW)]
    answers = {r["judge"]: r["answers"] for r in payload["offsets"]}
    assert set(answers) == {"old", "new"} and all(n > 0 for n in answers.values())


def test_fingerprint_changes_are_reported_not_refused(stores, tmp_path, capsys):
    code = main(["fit", "--store", str(stores["fingerprints"]), "--out", str(tmp_path / "fit"), "--method", "map", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    notes = json.loads(captured.out)["notes"]
    assert any("2 system fingerprints" in n and "'fp_a'" in n and "not refused" in n for n in notes), notes
    assert [j.served for j in list_judges(stores["fingerprints"])] == [None]  # one served model: one judge


def test_judge_reports_a_change_inside_the_store(stores):
    rows, lines = served_summary(stores["mixed"])
    assert {r["stage"] for r in rows} == {"tournament", "rubric"}
    for r in rows:
        assert [s["model"] for s in r["served"]] == [OLD, NEW] and all(s["answers"] > 0 for s in r["served"])
    assert any(line.startswith("warning: tournament family") and f"'{OLD}'" in line for line in lines)
    assert any("`rcp-jax fit` refuses" in line for line in lines)
    fp_rows, fp_lines = served_summary(stores["fingerprints"])
    assert len(fp_rows) == 2 and all("by system_fingerprint" in x for x in fp_lines)
    assert not any("refuses" in x for x in fp_lines)  # a fingerprint change alone is reported, not refused
    assert served_summary(stores["pinned"]) == ([], [])


def test_the_cli_notes_a_floating_alias_before_judging():
    args = build_parser().parse_args(["judge", "--rows", "rows.jsonl", "--model", "openai/gpt-4o-mini"])
    J.build_judge(args, None)
    assert any("names no dated snapshot" in n and "gpt-4o-mini-2024-07-18" in n for n in args.judge_notes)
    pinned = build_parser().parse_args(["judge", "--rows", "rows.jsonl", "--model", "openai/gpt-4o-mini-2024-07-18"])
    J.build_judge(pinned, None)
    assert not any("dated snapshot" in n for n in pinned.judge_notes)


def test_the_usage_line_prices_cached_tokens():
    judge = type("J", (), {})()
    judge.ledger = Ledger(calls=2, prompt_tokens=2000, completion_tokens=200, cached_tokens=1200, cost_usd=0.0123)
    payload, line = run_usage(judge, 3.0)
    assert payload["cached_tokens"] == 1200 and payload["cost_usd"] == pytest.approx(0.0123)
    assert "2,000 prompt (1,200 of them from the provider's prompt cache)" in line
    assert "cost this run: $0.0123 (cached prompt tokens at the model's cached-input rate)" in line
    judge.ledger = Ledger(calls=2, unpriced_calls=2)
    assert run_usage(judge, 1.0)[0]["cost_usd"] is None


@pytest.mark.slow  # two judge runs with their refits: ~20 s of CPU
def test_judge_over_http_reports_the_alias_that_moved_between_runs(demo_tiny, tmp_path, capsys, monkeypatch):
    """`rcp-jax judge` against the fake server: one query answered as OLD, then the server's alias moves to NEW and
    the next query is answered by it; the second run's summary warns (text and --json), and `fit` refuses."""
    from benchmarks.fixtures.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test")
    rows = [json.loads(line) for line in demo_tiny["rows"].read_text().splitlines()]
    queries = {r["query_id"]: r["query"] for r in rows}
    documents = {r["query_id"]: dict(zip(r["doc_ids"], r["docs"])) for r in rows}
    latent = {q: {d: 0.3 * i for i, d in enumerate(docs)} for q, docs in documents.items()}
    store = tmp_path / "store"
    with FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents,
                          served_model=OLD, system_fingerprint="fp_a") as server:
        base = ["judge", "--rows", str(demo_tiny["rows"]), "--model", "openai/fake-judge", "--api-base", server.url,
                "--store", str(store), "--quiet"]
        assert main([*base, "--max-queries", "1"]) == 0
        first = capsys.readouterr().out
        assert "served model" not in first  # one model so far: nothing to report
        server.served_model = NEW
        assert main([*base, "--max-queries", "2", "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
    assert {r["stage"] for r in payload["served_models"]} == {"tournament", "rubric"}
    for r in payload["served_models"]:
        assert [s["model"] for s in r["served"]] == [OLD, NEW] and r["model"] == "openai/fake-judge"
    code = main(["fit", "--store", str(store), "--out", str(tmp_path / "fit")])
    err = capsys.readouterr().err
    assert code == 2 and f"'{OLD}'" in err and f"'{NEW}'" in err and "--judges" in err

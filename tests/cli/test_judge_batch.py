"""``rcp-jax judge --batch`` (the fake Files + Batches API over HTTP) and ``--batch-files DIR`` (this test plays the
``vllm run-batch`` engine): the same store as online judging through the fake's chat endpoint, record for record,
and the same fit. In process; each judge run refits BT between rounds (JAX), so the module is marked slow."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rcp_jax.judging import SimulatedJudge  # noqa: E402

from benchmarks.fixtures.fake_batches import BatchFault, FakeBatchServer  # noqa: E402
from benchmarks.fixtures.fake_server import FakeOpenAIServer  # noqa: E402
from tests.helpers.cli_io import cli, ok  # noqa: E402
from tests.helpers.memory_batches import window_key  # noqa: E402
from tests.helpers.store_records import comparable_records  # noqa: E402

pytestmark = pytest.mark.slow

MODEL = "openai/fake-judge"
COMMON = ("--model", MODEL, "--structured-output", "none", "--quiet", "--json")


def collection(rows: Path) -> tuple[dict, dict, dict]:
    """(queries, documents, latent relevance) of a rows file, the latent from the qrels (as the crash driver)."""
    data = [json.loads(line) for line in rows.read_text().splitlines()]
    queries = {r["query_id"]: r["query"] for r in data}
    documents = {r["query_id"]: dict(zip(r["doc_ids"], r["docs"])) for r in data}
    latent = {r["query_id"]: {d: float(r.get("qrels", {}).get(d, 0)) - 1.0 for d in r["doc_ids"]} for r in data}
    return queries, documents, latent


def fake_judge(latent) -> SimulatedJudge:
    return SimulatedJudge(latent, seed=2, malformed_rate=0.15)


def comparable(folder) -> list[dict]:
    return comparable_records(folder)


def fit(store: Path, out: Path) -> dict[str, bytes]:
    ok(cli("fit", "--store", store, "--out", out, "--method", "map", "--no-plots", "--json"))
    return {p.name: p.read_bytes() for p in sorted((out / "calibration").iterdir()) if p.suffix in (".json", ".csv")}


def evaluation(fitted: Path, runs: Path) -> dict:
    """``rcp-jax evaluate --json`` of a fit on the demo's runs (per system and per query), without paths."""
    out, _ = ok(cli("evaluate", "--calibration", fitted, "--runs", runs, "--json"))
    payload = json.loads(out)
    return {k: v for k, v in payload.items() if k not in ("calibration", "out", "runs", "wall_seconds", "figures")}


@pytest.fixture(scope="module")
def online(demo_tiny, tmp_path_factory):
    """The store and fit of online judging through the fake's chat endpoint."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-fake")
    queries, documents, latent = collection(demo_tiny["rows"])
    folder = tmp_path_factory.mktemp("online")
    with FakeOpenAIServer(fake_judge(latent), queries=queries, documents=documents) as server:
        ok(cli("judge", "--rows", demo_tiny["rows"], *COMMON, "--api-base", server.url, "--concurrency", "2",
               "--store", folder / "store"))
    return folder / "store", fit(folder / "store", folder / "fit")


def test_batch_api_gives_the_online_store_and_fit(demo_tiny, online, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    queries, documents, latent = collection(demo_tiny["rows"])
    with FakeBatchServer(fake_judge(latent), queries=queries, documents=documents, batch_delay=0.01,
                         batch_faults=[None, BatchFault(expire_after=3)]) as server:
        out, err = ok(cli("judge", "--rows", demo_tiny["rows"], *COMMON, "--api-base", server.url, "--batch",
                          "--batch-poll", "0.05", "--store", tmp_path / "store"))
        keys = Counter(b["metadata"]["rcp_jax_key"] for b in server.batches.values())
        created = server.batches_created
    payload = json.loads(out)
    assert "batch mode: the protocol asks" in err and payload["sequential_batches"] >= 5
    assert created == len(keys) and set(keys.values()) == {1}, "no batch submitted twice"
    assert created >= payload["sequential_batches"] + 1  # the expired one's windows went into one more batch
    store, fitted = online
    assert comparable(tmp_path / "store") == comparable(store)
    assert fit(tmp_path / "store", tmp_path / "fit") == fitted
    evaluated = evaluation(tmp_path / "fit", demo_tiny["runs"])
    assert len(evaluated["systems"]) == 2 and evaluated == evaluation(store.parent / "fit", demo_tiny["runs"])


def play_engine(folder: Path, server: FakeOpenAIServer, answered: Counter) -> int:
    """What ``vllm run-batch`` does for every request file without its output: answer each line (the fake's
    simulated judge, attempts counted per window as the chat server counts them). Returns files answered."""
    n = 0
    for requests in sorted(folder.glob("*.requests.jsonl")):
        output = requests.with_name(requests.name.replace(".requests.", ".output."))
        if output.exists():
            continue
        lines = []
        for raw in requests.read_text().splitlines():
            line = json.loads(raw)
            key, content = window_key(line["body"])
            answered[key] += 1
            text, finish = server.answer_prompt(content, attempt=answered[key])
            body = {"id": "chatcmpl-vllm", "object": "chat.completion", "created": 0, "model": line["body"]["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": len(content) // 4, "completion_tokens": len(text) // 4,
                              "total_tokens": len(content) // 4 + len(text) // 4}}
            lines.append(json.dumps({"id": "vllm-x", "custom_id": line["custom_id"],
                                     "response": {"status_code": 200, "request_id": "r", "body": body}, "error": None}))
        output.write_text("\n".join(lines) + "\n")
        n += 1
    return n


def test_batch_files_with_the_vllm_command_give_the_online_store(demo_tiny, online, tmp_path):
    queries, documents, latent = collection(demo_tiny["rows"])
    engine = FakeOpenAIServer(fake_judge(latent), queries=queries, documents=documents)  # not started: its answers
    answered: Counter = Counter()
    folder = tmp_path / "batches"
    commands = []
    for _ in range(40):
        out, _ = ok(cli("judge", "--rows", demo_tiny["rows"], *COMMON, "--batch-files", folder, "--batch-wait", "0",
                        "--store", tmp_path / "store"))
        payload = json.loads(out)
        if not payload.get("pending"):
            break
        commands.append(payload["command"])
        assert play_engine(folder, engine, answered) == 1
    else:
        pytest.fail("the batch files never completed")
    assert commands[0] == (f"vllm run-batch -i {folder}/round1.requests.jsonl -o {folder}/round1.output.jsonl "
                           "--model fake-judge")
    assert len(commands) >= payload["sequential_batches"]
    store, fitted = online
    assert comparable(tmp_path / "store") == comparable(store)
    assert fit(tmp_path / "store", tmp_path / "fit") == fitted


def test_batch_needs_a_litellm_model(demo_tiny, tmp_path):
    code, _, err = cli("judge", "--rows", demo_tiny["rows"], "--batch", "--store", tmp_path / "s")
    assert code == 2 and "need a litellm judge" in err


def test_budgeted_judging_with_batch_files_resumes_round_by_round(demo_tiny, tmp_path, monkeypatch):
    """``--budget --runs --batch-files``: the seed and each round one request file; every run of the same command
    ingests the last file and writes the next, until the budget ends; the same store as budgeted online judging."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    queries, documents, latent = collection(demo_tiny["rows"])
    budget = ("--runs", demo_tiny["runs"], "--budget", "24", "--round-calls", "3")
    with FakeOpenAIServer(fake_judge(latent), queries=queries, documents=documents) as server:
        online, _ = ok(cli("judge", "--rows", demo_tiny["rows"], *COMMON, *budget, "--api-base", server.url,
                           "--concurrency", "1", "--store", tmp_path / "online"))
    engine = FakeOpenAIServer(fake_judge(latent), queries=queries, documents=documents)
    answered: Counter = Counter()
    folder = tmp_path / "batches"
    for _ in range(40):
        out, _ = ok(cli("judge", "--rows", demo_tiny["rows"], *COMMON, *budget, "--batch-files", folder,
                        "--batch-wait", "0", "--store", tmp_path / "store"))
        payload = json.loads(out)
        if not payload.get("pending"):
            break
        assert play_engine(folder, engine, answered) == 1
    else:
        pytest.fail("the budgeted batch files never completed")
    files = sorted(p.name for p in folder.glob("*.requests.jsonl"))
    assert files[0] == "budget_seed.requests.jsonl"  # the seed, then one file per round (here: out of reach at once)
    assert payload["planned_calls"] <= payload["budget_calls"]
    expected = json.loads(online)
    assert [(r["round"], r["calls"]) for r in payload["rounds"]] == [(r["round"], r["calls"]) for r in expected["rounds"]]
    assert payload["stop_reason"] == expected["stop_reason"]
    assert comparable(tmp_path / "store") == comparable(tmp_path / "online")

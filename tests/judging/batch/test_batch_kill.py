"""Batch judging SIGKILLed at many moments (while uploading, creating, waiting, ingesting), resumed each time,
against one fake Files + Batches server living in this test process: no batch is submitted twice (the server's
count of created batches equals the distinct batches of the journal, each metadata key once) and the store ends
record for record as a run never killed, every window with exactly one valid record."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rcp_jax.judging import read_judgements  # noqa: E402
from rcp_jax.judging.batch.journal import BatchJournal  # noqa: E402

from benchmarks.fixtures.fake_batches import FakeBatchServer  # noqa: E402
from tests.helpers.batch_kill_driver import plan_windows  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
DRIVER = REPO / "tests" / "helpers" / "batch_kill_driver.py"
#: Moments a kill can land at (see the driver); ``time:`` moments are drawn apart.
POINTS = ("journal:1", "journal:2", "journal:3", "journal:4", "journal:6", "upload:1", "create:1", "create:2",
          "retrieve:1", "retrieve:2", "append:1", "append:2")


def drive(tmp: Path, spec: dict, n: int) -> subprocess.CompletedProcess:
    path = tmp / f"spec{n}.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-kill", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, str(DRIVER), str(path)], capture_output=True, text=True, env=env,
                          timeout=600, check=False)


def records(store: Path):
    return read_judgements(store, "tournament") + read_judgements(store, "rubric")


def comparable(store: Path) -> list[dict]:
    out = []
    for j in records(store):
        d = j.to_dict()
        for k in ("started_at", "finished_at", "batch"):
            d.pop(k, None)
        out.append(d)
    return sorted(out, key=lambda d: (d["record_id"], d["attempts"]))


def check_nothing_twice(server: FakeBatchServer, store: Path) -> None:
    keys = Counter(b["metadata"]["rcp_jax_key"] for b in server.batches.values())
    assert set(keys.values()) == {1}, "a batch was submitted twice"
    journaled = {e["key"] for e in BatchJournal(store).events() if e["event"] == "created"}
    assert server.batches_created == len(keys) == len(journaled) and set(keys) == journaled
    stored = records(store)
    assert set(Counter((r.record_id, r.attempts) for r in stored).values()) == {1}, "a record was stored twice"
    assert set(Counter(r.record_id for r in stored if r.valid).values()) == {1}


def server_for(queries, documents, latent, **kw) -> FakeBatchServer:
    from rcp_jax.judging import SimulatedJudge

    return FakeBatchServer(SimulatedJudge(latent, seed=11, malformed_rate=0.3), queries=queries, documents=documents,
                           batch_delay=0.05, line_delay=0.003, **kw)


def run_plan(windows, queries, documents, url: str, store: Path):
    """The driver's ``plan`` run, in this process."""
    from rcp_jax.judging import LiteLLMJudge, ProviderBatches, judge_windows_batch_sync

    judge = LiteLLMJudge("openai/fake-judge", api_base=url, api_key="sk-kill", structured_output="off")
    backend = ProviderBatches.for_judge(judge)
    backend.backoff_base = backend.backoff_max = 0.01
    return judge_windows_batch_sync(windows, judge=judge, store=store, documents=documents, queries=queries,
                                    batches=backend, poll_seconds=0.02)


def test_three_kills_of_a_batch_run_submit_nothing_twice(tmp_path):
    """The fast variant: the runner over a fixed plan (no JAX), killed right after a batch was created (its id not
    yet journaled), half-way through an ingest, and right after a file was uploaded."""
    queries, documents, latent, windows = plan_windows()
    store = tmp_path / "store"
    with server_for(queries, documents, latent) as server:
        for n, kill in enumerate(("create:1", "append:1", "journal:2")):
            done = drive(tmp_path, {"plan": {"url": server.url, "store": str(store)}, "kill": kill}, n)
            assert done.returncode == -9, f"{kill}: the kill did not land ({done.returncode}): {done.stderr[-2000:]}"
        assert len(run_plan(windows, queries, documents, server.url, store)) == len(windows)  # resumed here
        check_nothing_twice(server, store)
    with server_for(queries, documents, latent) as clean:  # the same run never killed
        run_plan(windows, queries, documents, clean.url, tmp_path / "clean")
    assert comparable(store) == comparable(tmp_path / "clean")


@pytest.mark.slow
def test_twenty_random_kills_of_rcp_jax_judge_batch(demo_tiny, tmp_path, monkeypatch):
    """`rcp-jax judge --batch` in a subprocess, SIGKILLed at 20 random moments (seeded) and resumed each time.

    How many kills one run survives depends on the machine's speed (a late ``time:`` kill may come after the run
    has finished), so the kills are spread over rounds: when a run finishes before the 20th kill, that round's
    store is checked and the next round starts a fresh store, until 20 kills have landed."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kill")  # the clean run's, in this process
    rows = [json.loads(line) for line in demo_tiny["rows"].read_text().splitlines()]
    queries = {r["query_id"]: r["query"] for r in rows}
    documents = {r["query_id"]: dict(zip(r["doc_ids"], r["docs"])) for r in rows}
    latent = {r["query_id"]: {d: float(r.get("qrels", {}).get(d, 0)) - 1.0 for d in r["doc_ids"]} for r in rows}
    rng = random.Random(34)

    def argv(url: str, store: Path) -> list[str]:
        return ["judge", "--rows", str(demo_tiny["rows"]), "--model", "openai/fake-judge", "--api-base", url, "--batch",
                "--batch-poll", "0.05", "--structured-output", "none", "--max-attempts", "8", "--quiet", "--json",
                "--store", str(store)]

    from tests.helpers.cli_io import cli, ok

    with server_for(queries, documents, latent) as clean:  # the same run never killed
        ok(cli(*argv(clean.url, tmp_path / "clean")))
    landed: list[str] = []
    for round_ in range(4):
        store = tmp_path / f"store{round_}"
        with server_for(queries, documents, latent) as server:
            for n in range(40):
                kill = rng.choice(POINTS) if rng.random() < 0.7 else f"time:{rng.uniform(0.2, 4.0):.2f}"
                done = drive(tmp_path, {"argv": argv(server.url, store), "kill": kill}, 100 * round_ + n)
                if done.returncode == 0:
                    break  # the run finished before this kill's moment
                assert done.returncode == -9, f"{kill}: {done.returncode}: {done.stderr[-3000:]}"
                landed.append(kill)
                if len(landed) == 20:
                    break
            done = drive(tmp_path, {"argv": argv(server.url, store)}, 100 * round_ + 99)  # resumed (or a no-op)
            assert done.returncode == 0, done.stderr[-3000:]
            check_nothing_twice(server, store)
        assert comparable(store) == comparable(tmp_path / "clean"), f"round {round_} (kills so far: {landed})"
        if len(landed) == 20:
            break
    assert len(landed) == 20, f"only {len(landed)} kills landed in 4 rounds: {landed}"

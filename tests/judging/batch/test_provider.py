"""judge_windows_batch through litellm's batch API against the fake Files + Batches server over HTTP: the same store
as online judging through the same fake's chat endpoint, and every fault of the fake handled."""

from __future__ import annotations

import os
from collections import Counter

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rcp_jax.judging import (  # noqa: E402
    BatchPending,
    LiteLLMJudge,
    ProviderBatches,
    SimulatedJudge,
    judge_windows_batch_sync,
    judge_windows_sync,
    read_judgements,
    synthetic_dataset,
)
from rcp_jax.judging.batch.journal import BatchJournal  # noqa: E402

from benchmarks.fixtures.fake_batches import BatchFault, FakeBatchServer  # noqa: E402
from tests.helpers.store_records import comparable_records  # noqa: E402
from tests.helpers.judging_windows import make_windows  # noqa: E402

MODEL = "openai/fake-judge"
KEY = "sk-test-batches"


@pytest.fixture(scope="module")
def data():
    queries, documents, latent = synthetic_dataset(3, 12, seed=7, doc_chars=300)
    return queries, documents, latent, make_windows(documents)


def server(data, malformed_rate: float = 0.0, **kw) -> FakeBatchServer:
    queries, documents, latent, _ = data
    return FakeBatchServer(SimulatedJudge(latent, seed=11, malformed_rate=malformed_rate), queries=queries,
                           documents=documents, batch_delay=0.01, **kw)


def judge(url: str) -> LiteLLMJudge:
    return LiteLLMJudge(MODEL, api_base=url, api_key=KEY, structured_output="off", backoff_base=0.01)


def backend(j: LiteLLMJudge) -> ProviderBatches:
    b = ProviderBatches.for_judge(j)
    b.backoff_base = b.backoff_max = 0.01
    return b


def run_batch(data, url, folder, **kw):
    queries, documents, _, windows = data
    j = judge(url)
    return judge_windows_batch_sync(windows, judge=j, store=folder, documents=documents, queries=queries,
                                    batches=backend(j), poll_seconds=0.02, **kw)


def comparable(folder) -> list[dict]:
    return comparable_records(folder)


def one_valid_each(folder, n: int) -> None:
    records = read_judgements(folder, "tournament") + read_judgements(folder, "rubric")
    valid = Counter(r.record_id for r in records if r.valid)
    assert len(valid) == n and set(valid.values()) == {1}


def test_batch_api_store_equals_the_online_store(data, tmp_path):
    queries, documents, _, windows = data
    with server(data, malformed_rate=0.3) as online_server:
        judge_windows_sync(windows, judge=judge(online_server.url), store=tmp_path / "online", documents=documents,
                           queries=queries, concurrency=2)
    with server(data, malformed_rate=0.3) as batch_server:
        got = run_batch(data, batch_server.url, tmp_path / "batch")
        created = batch_server.batches_created
    a, b = comparable(tmp_path / "online"), comparable(tmp_path / "batch")
    assert any(not r["valid"] for r in a) and a == b
    assert len(got) == len(windows) and created == max(r["attempts"] for r in b)


FAULTS = {
    "fail": BatchFault(fail="injected"),
    "expire": BatchFault(expire_after=4),
    "cancel": BatchFault(cancel_after=4),
    "drop": BatchFault(drop=(0, 3)),
    "malformed": BatchFault(malformed={0: "not_json", 1: "no_custom_id", 2: "empty_choices", 3: "no_response"}),
    "duplicate": BatchFault(duplicate=(0, 1)),
    "stray": BatchFault(stray=("feedfacefeedface",)),
    "line_errors": BatchFault(line_errors={0: 500, 1: "server_error"}),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_of_a_batch_is_handled(data, tmp_path, name):
    with server(data, batch_faults=[FAULTS[name]]) as s:
        got = run_batch(data, s.url, tmp_path / "s")
        created = s.batches_created
    assert len(got) == len(data[3])
    one_valid_each(tmp_path / "s", len(data[3]))
    clean = name in ("duplicate", "stray")
    assert created == (1 if clean else 2)
    ingested = [e for e in BatchJournal(tmp_path / "s").events() if e["event"] == "ingested"]
    if name == "stray":
        assert ingested[0]["refused"] == ["feedfacefeedface"]
    if name == "duplicate":
        assert ingested[0]["duplicates"] == 2
    if name == "malformed":
        assert ingested[0]["n_malformed"] == 3  # empty_choices is a readable reply without an answer: stored invalid


def test_a_lost_create_answer_is_found_by_its_key(data, tmp_path):
    with server(data, batch_faults=[BatchFault(lost_response=500)]) as s:
        got = run_batch(data, s.url, tmp_path / "s")
        created = s.batches_created
    assert len(got) == len(data[3]) and created == 1


def test_transient_api_errors_are_retried(data, tmp_path):
    faults = {"upload": [503], "retrieve": [500, 429], "content": [502], "list": [503]}
    with server(data, api_faults=faults) as s:
        got = run_batch(data, s.url, tmp_path / "s")
        assert len(s.api_faults_served) == 4
    assert len(got) == len(data[3])


def test_a_held_batch_is_polled_after_a_restart_never_resubmitted(data, tmp_path):
    with server(data, batch_faults=[BatchFault(hold=True)]) as s:
        with pytest.raises(BatchPending):
            run_batch(data, s.url, tmp_path / "s", wait_seconds=0.2)
        s.release()
        got = run_batch(data, s.url, tmp_path / "s")
        assert s.batches_created == 1
    assert len(got) == len(data[3])


def test_a_phase_beyond_the_providers_limits_goes_out_as_several_batches(data, tmp_path):
    """The fake server refuses a batch of more than 5 requests (as OpenAI refuses more than 50,000): with the
    backend's limit at 5 the phase is split into batches created together, and the store equals online judging's."""
    queries, documents, _, windows = data
    with server(data, malformed_rate=0.3) as online_server:
        judge_windows_sync(windows, judge=judge(online_server.url), store=tmp_path / "online", documents=documents,
                           queries=queries, concurrency=2)
    with server(data, malformed_rate=0.3, max_batch_requests=5) as limited:
        j = judge(limited.url)
        b = backend(j)
        b.max_requests = 5
        got = judge_windows_batch_sync(windows, judge=j, store=tmp_path / "batch", documents=documents,
                                       queries=queries, batches=b, poll_seconds=0.02)
        sizes = [len(ids) for ids in limited.batch_custom_ids.values()]
        statuses = [bt["status"] for bt in limited.batches.values()]
    assert len(got) == len(windows) and comparable(tmp_path / "online") == comparable(tmp_path / "batch")
    assert max(sizes) <= 5 and sum(sizes[: -(-len(windows) // 5)]) == len(windows)  # round 1: every window once
    assert set(statuses) == {"completed"}  # none refused by the server's limit

"""judge_windows_batch against an in-process batch backend: the same store as online judging, re-asks, every fault
of a batch handled, and resuming from the journal without submitting twice."""

from __future__ import annotations

import json
import logging
from collections import Counter

import pytest
from rcp_jax.judging import (
    JudgementStore,
    LiteLLMJudge,
    SimulatedJudge,
    judge_windows_batch_sync,
    judge_windows_sync,
    read_judgements,
    synthetic_dataset,
)
from rcp_jax.judging.batch.backends import BatchPending
from rcp_jax.judging.batch.journal import BatchJournal

from benchmarks.fixtures.fake_server import FakeOpenAIServer
from tests.helpers.memory_batches import MemoryBatches
from tests.helpers.store_records import comparable_records
from tests.helpers.judging_windows import make_windows  # noqa: E402

MODEL = "openai/fake-judge"


@pytest.fixture(scope="module")
def data():
    queries, documents, latent = synthetic_dataset(3, 12, seed=7, doc_chars=300)
    return queries, documents, latent, make_windows(documents)


def fake(data, malformed_rate: float = 0.0) -> FakeOpenAIServer:
    queries, documents, latent, _ = data
    return FakeOpenAIServer(SimulatedJudge(latent, seed=11, malformed_rate=malformed_rate), queries=queries,
                            documents=documents)


def judge(api_base: str = "http://127.0.0.1:9/v1") -> LiteLLMJudge:
    return LiteLLMJudge(MODEL, api_base=api_base, api_key="sk-test", structured_output="off", backoff_base=0.01)


def comparable(folder) -> list[dict]:
    return comparable_records(folder, without_cost=True)


def batch(data, folder, backend, **kw):
    queries, documents, _, windows = data
    return judge_windows_batch_sync(windows, judge=kw.pop("judge", None) or judge(), store=folder,
                                    documents=documents, queries=queries, batches=backend, poll_seconds=0, **kw)


def test_batch_store_equals_the_online_store_record_for_record(data, tmp_path):
    """Answers with invalid ones (re-asked with the online repair note, seed and temperature): the same records."""
    queries, documents, _, windows = data
    with fake(data, malformed_rate=0.3) as server:
        online = judge_windows_sync(windows, judge=judge(server.url), store=tmp_path / "online",
                                    documents=documents, queries=queries, concurrency=1)
    backend = MemoryBatches(fake(data, malformed_rate=0.3))
    got = batch(data, tmp_path / "batch", backend)
    assert len(got) == len(online) == len(windows)
    a, b = comparable(tmp_path / "online"), comparable(tmp_path / "batch")
    assert any(not r["valid"] for r in a), "the malformed answers made re-asks"
    assert any(r.get("reask", {}).get("repair") for r in b), "re-asks carry the repair note"
    assert a == b
    assert backend.created == max(r["attempts"] for r in b)  # one batch per round of re-asks
    assert all(j.batch and j.batch.startswith("batch-") for j in got)


def test_request_lines_carry_the_online_body(data, tmp_path):
    queries, documents, _, windows = data
    backend = MemoryBatches(fake(data))
    batch(data, tmp_path / "s", backend)
    lines = backend.files["file-1"]
    assert {line["url"] for line in lines} == {"/v1/chat/completions"} and {line["method"] for line in lines} == {"POST"}
    j = judge()
    from rcp_jax.judging import JudgeRequest, record_id
    w = windows[0]
    rendered = j.render(w, queries[w.query_id], [documents[w.query_id][d] for d in w.doc_ids])
    body = next(line["body"] for line in lines if line["custom_id"] == record_id(j.family(w.stage), w))
    assert body == j.request_body(JudgeRequest(w, rendered))
    assert body["model"] == "fake-judge" and body["temperature"] == 0.0


@pytest.mark.parametrize("faults", [["expire"], ["fail"], ["malformed"], ["error"], ["expire", "duplicate"]])
def test_faulty_batches_leave_their_windows_to_the_next_batch(data, tmp_path, faults):
    backend = MemoryBatches(fake(data), faults={1: faults})
    got = batch(data, tmp_path / "s", backend)
    assert len(got) == len(data[3])
    valid = Counter(j.record_id for j in read_judgements(tmp_path / "s", "tournament") + read_judgements(tmp_path / "s", "rubric")
                    if j.valid)
    assert set(valid.values()) == {1}
    assert backend.created == 2
    ingested = [e for e in BatchJournal(tmp_path / "s").events() if e["event"] == "ingested"]
    assert ingested[0]["missing"] > 0
    if "malformed" in faults:
        assert ingested[0]["n_malformed"] == 1 and "line 1" in ingested[0]["malformed"][0]


def test_duplicate_and_stranger_lines(data, tmp_path, caplog):
    backend = MemoryBatches(fake(data), faults={1: ["duplicate", "stranger"]})
    with caplog.at_level(logging.WARNING):
        got = batch(data, tmp_path / "s", backend)
    assert len(got) == len(data[3]) and backend.created == 1
    records = read_judgements(tmp_path / "s", "tournament") + read_judgements(tmp_path / "s", "rubric")
    assert len(records) == len(data[3])  # nothing of the stranger, the second line of the duplicate ignored
    assert "a second, different answer" not in {r.raw_response for r in records}
    assert "0123456789abcdef" in caplog.text and "refused" in caplog.text
    ingested = [e for e in BatchJournal(tmp_path / "s").events() if e["event"] == "ingested"][0]
    assert ingested["refused"] == ["0123456789abcdef"] and ingested["duplicates"] == 1


def test_three_empty_batches_stop_the_run(data, tmp_path):
    from rcp_jax.judging import BatchError

    backend = MemoryBatches(fake(data), faults={1: ["fail"], 2: ["fail"], 3: ["fail"]})
    with pytest.raises(BatchError, match="answered nothing"):
        batch(data, tmp_path / "s", backend)
    assert backend.created == 3
    got = batch(data, tmp_path / "s", backend)  # the next run asks them again
    assert len(got) == len(data[3])


def test_pending_batch_resumes_by_polling_never_resubmitting(data, tmp_path):
    backend = MemoryBatches(fake(data), faults={1: ["slow:3"]})
    with pytest.raises(BatchPending, match="run the same command again"):
        batch(data, tmp_path / "s", backend, wait_seconds=0)
    assert backend.created == 1
    got = batch(data, tmp_path / "s", backend)
    assert len(got) == len(data[3]) and backend.created == 1
    events = [e["event"] for e in BatchJournal(tmp_path / "s").events()]
    assert events == ["intent", "uploaded", "created", "terminal", "ingesting", "ingested"]


def test_an_intent_without_a_batch_id_is_found_on_the_server(data, tmp_path):
    """Killed after create_batch returned but before the id reached the journal: found by its key, not recreated."""
    backend = MemoryBatches(fake(data), faults={1: ["slow:1"]})
    with pytest.raises(BatchPending):
        batch(data, tmp_path / "s", backend, wait_seconds=0)
    journal = tmp_path / "s" / "batches.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(line for line in lines if b'"created"' not in line))  # the id never written
    got = batch(data, tmp_path / "s", backend)
    assert len(got) == len(data[3]) and backend.created == 1 and "find" in backend.calls


def test_an_ingest_killed_half_way_stores_nothing_twice(data, tmp_path):
    backend = MemoryBatches(fake(data))
    batch(data, tmp_path / "s", backend)
    folder = tmp_path / "s"
    # as if killed mid-ingest: half the records stored, the journal without its last line
    for stage in ("tournament", "rubric"):
        path = folder / f"{stage}.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[: len(lines) // 2]))
    journal = folder / "batches.jsonl"
    journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[:-1]))
    got = batch(data, folder, backend)
    assert len(got) == len(data[3]) and backend.created == 1
    records = read_judgements(folder, "tournament") + read_judgements(folder, "rubric")
    assert Counter(r.record_id for r in records).most_common(1)[0][1] == 1
    assert len(records) == len(data[3])


def test_a_finished_run_asks_nothing(data, tmp_path):
    backend = MemoryBatches(fake(data))
    batch(data, tmp_path / "s", backend)
    calls = list(backend.calls)
    got = batch(data, tmp_path / "s", backend)
    assert len(got) == len(data[3]) and backend.calls == calls


def test_all_invalid_first_batch_gives_the_verdict(data, tmp_path):
    from rcp_jax.judging import JudgeVerdictError

    backend = MemoryBatches(fake(data, malformed_rate=1.0))
    with pytest.raises(JudgeVerdictError, match="stopped early"):
        batch(data, tmp_path / "s", backend, stop_after_invalid=5)
    assert backend.created == 1


def test_a_simulated_judge_is_refused(data, tmp_path):
    from rcp_jax.judging import JudgeInputError

    with pytest.raises(JudgeInputError, match="litellm judge"):
        batch(data, tmp_path / "s", MemoryBatches(fake(data)), judge=SimulatedJudge(data[2]))


def test_old_records_read_the_same(data, tmp_path):
    """A record without ``batch`` writes no ``batch`` field (old stores keep their exact form)."""
    queries, documents, latent, windows = data
    judge_windows_sync(windows[:2], judge=SimulatedJudge(latent), store=tmp_path / "s", documents=documents,
                       queries=queries)
    for line in (tmp_path / "s" / "tournament.jsonl").read_text().splitlines():
        assert "batch" not in json.loads(line)
    with JudgementStore(tmp_path / "s"):
        pass


def answer_files(folder, server, answered: Counter, keep=lambda i: True) -> None:
    """Play the offline engine: answer every request file of ``folder`` that has no output yet (lines ``keep``s)."""
    from tests.helpers.memory_batches import window_key

    for requests in sorted(folder.glob("*.requests.jsonl")):
        output = requests.with_name(requests.name.replace(".requests.", ".output."))
        if output.exists():
            continue
        lines = []
        for i, raw in enumerate(requests.read_text().splitlines()):
            if not keep(i):
                continue
            line = json.loads(raw)
            key, content = window_key(line["body"])
            answered[key] += 1
            text, finish = server.answer_prompt(content, attempt=answered[key])
            body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": len(content) // 4, "completion_tokens": len(text) // 4}}
            lines.append(json.dumps({"custom_id": line["custom_id"], "response": {"status_code": 200, "body": body},
                                     "error": None}))
        output.write_text("".join(f"{x}\n" for x in lines))


def test_batch_files_partial_output_with_a_done_marker(data, tmp_path):
    """Offline files: wait 0 names the vllm command; an output missing lines counts once DIR/<name>.done exists, and
    the missing windows go into <name>.r2; the same call again resumes each time."""
    from rcp_jax.judging import FileBatches

    folder, store = tmp_path / "files", tmp_path / "store"
    engine, answered = fake(data), Counter()
    files = FileBatches(folder, model="fake-judge")
    with pytest.raises(BatchPending) as pending:
        batch(data, store, files, wait_seconds=0, phase="round1")
    assert pending.value.command == (f"vllm run-batch -i {folder}/round1.requests.jsonl -o "
                                     f"{folder}/round1.output.jsonl --model fake-judge")
    answer_files(folder, engine, answered, keep=lambda i: i % 3 != 0)  # a third of the lines never written
    with pytest.raises(BatchPending):  # not complete: lines missing and no .done marker
        batch(data, store, files, wait_seconds=0, phase="round1")
    (folder / "round1.done").touch()
    with pytest.raises(BatchPending) as pending:  # ingested; the missing third asked in round1.r2
        batch(data, store, files, wait_seconds=0, phase="round1")
    assert "round1.r2.requests.jsonl" in pending.value.command
    answer_files(folder, engine, answered)
    got = batch(data, store, files, wait_seconds=0, phase="round1")
    assert len(got) == len(data[3])
    assert len((folder / "round1.r2.requests.jsonl").read_text().splitlines()) == -(-len(data[3]) // 3)


def test_the_ledger_counts_the_batch_answers(data, tmp_path):
    j = judge()
    batch(data, tmp_path / "s", MemoryBatches(fake(data)), judge=j)
    records = read_judgements(tmp_path / "s", "tournament") + read_judgements(tmp_path / "s", "rubric")
    assert j.ledger.calls == len(records) and j.ledger.prompt_tokens == sum(r.usage.prompt_tokens for r in records) > 0


def test_split_parts_respects_both_limits_with_as_few_parts_as_possible():
    from rcp_jax.judging.batch.runner import split_parts
    from rcp_jax.judging.batch.backends import BatchError

    assert split_parts([10] * 7, max_requests=None, max_bytes=None) == [(0, 7)]
    assert split_parts([10] * 7, max_requests=3, max_bytes=None) == [(0, 3), (3, 6), (6, 7)]
    assert split_parts([10, 10, 10, 25, 5], max_requests=None, max_bytes=30) == [(0, 3), (3, 5)]
    assert split_parts([10] * 4, max_requests=3, max_bytes=25) == [(0, 2), (2, 4)]
    assert split_parts([], max_requests=3, max_bytes=25) == [(0, 0)]
    with pytest.raises(BatchError, match="request 2 is 40 bytes"):
        split_parts([10, 40], max_requests=None, max_bytes=30, what="round1")


def test_several_parts_of_one_round_resume_after_a_kill_between_them(data, tmp_path):
    """A run stopped after the first of two parts was created (the second never asked): the next run settles the
    first and asks the rest; every window ends with exactly the online answers, no batch asked twice."""
    queries, documents, _, windows = data
    backend = MemoryBatches(fake(data))
    backend.max_requests = (len(windows) + 1) // 2
    real_create, calls = backend.create, {"n": 0}

    def create_once_then_die(file_id, name, key):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the process stops between the two creations
        return real_create(file_id, name, key)

    backend.create = create_once_then_die
    with pytest.raises(KeyboardInterrupt):
        batch(data, tmp_path / "s", backend)
    backend.create = real_create
    got = batch(data, tmp_path / "s", backend)
    assert len(got) == len(windows) and backend.created == 2
    assert sorted(len(b.requests) for b in backend.batches.values()) == sorted(
        [backend.max_requests, len(windows) - backend.max_requests])


def test_batch_files_written_by_other_tools_crlf_bom_and_blank_lines(data, tmp_path):
    """An output file with a byte-order mark, CRLF line ends and blank lines (an engine or a Windows tool between
    the cluster and this machine): every answer is read, none re-asked."""
    from rcp_jax.judging import FileBatches

    folder, store = tmp_path / "files", tmp_path / "store"
    engine, answered = fake(data), Counter()
    files = FileBatches(folder, model="fake-judge")
    with pytest.raises(BatchPending):
        batch(data, store, files, wait_seconds=0, phase="round1")
    answer_files(folder, engine, answered)
    output = folder / "round1.output.jsonl"
    lines = output.read_text().splitlines()
    output.write_bytes(b"\xef\xbb\xbf" + "\r\n\r\n".join(lines).encode() + b"\r\n")
    got = batch(data, store, files, wait_seconds=0, phase="round1")
    assert len(got) == len(data[3]) and sum(answered.values()) == len(data[3])
    assert not list(folder.glob("round1.r2.*"))

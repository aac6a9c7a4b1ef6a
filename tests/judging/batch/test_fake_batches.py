"""The fake Files + Batches API (``benchmarks/fixtures/fake_batches.py``) driven through litellm's own batch functions.

Everything goes over real HTTP on 127.0.0.1 through ``litellm.create_file`` / ``create_batch`` /
``retrieve_batch`` / ``file_content`` / ``list_batches`` / ``cancel_batch`` (the OpenAI SDK underneath), with
request lines made from real rendered windows and the chat body the online judge sends.
"""

from __future__ import annotations

import json
import time

import httpx
import litellm
import openai
import pytest

from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
    convert_to_model_response_object,
)

from benchmarks.fixtures.fake_batches import TERMINAL, BatchFault, FakeBatchServer
from rcp_jax.judging import LiteLLMJudge
from rcp_jax.judging.judge import JudgeRequest

MODEL = "openai/fake-judge"
KEY = "sk-test"
#: litellm call options that are not part of the chat body a batch line carries.
CLIENT_ONLY = frozenset({"timeout", "num_retries", "max_retries"})


def chat_kwargs(windows, queries, documents) -> dict[str, dict]:
    """``{custom_id: the keyword arguments the online judge gives litellm.completion}`` for each window."""
    judge = LiteLLMJudge(MODEL, api_base="http://127.0.0.1:9/v1", api_key=KEY)
    out = {}
    for w in windows:
        rendered = judge.render(w, queries[w.query_id], [documents[w.query_id][d] for d in w.doc_ids])
        out[f"{w.query_id}:{w.stage}:{w.phase}:{w.sequence}"] = judge._kwargs(JudgeRequest(w, rendered))  # noqa: SLF001
    return out


def request_file(kwargs_by_id: dict[str, dict], model: str = "fake-judge") -> bytes:
    """The batch input JSONL: one chat request line per custom_id."""
    lines = []
    for custom_id, kw in kwargs_by_id.items():
        body = {"model": model, **{k: v for k, v in kw.items() if k not in CLIENT_ONLY}}
        lines.append({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def via(server, **kw) -> dict:
    return {"custom_llm_provider": "openai", "api_base": server.url, "api_key": KEY, **kw}


def submit(server, data: bytes, metadata: dict | None = None, **kw):
    """Upload ``data`` and create a batch over it (litellm); the batch object litellm returns."""
    uploaded = litellm.create_file(file=("requests.jsonl", data), purpose="batch", **via(server, **kw))
    return litellm.create_batch(completion_window="24h", endpoint="/v1/chat/completions",
                                input_file_id=uploaded.id, metadata=metadata, **via(server, **kw))


def finished(server, batch_id: str, **kw):
    """The batch as litellm retrieves it once the server says it reached a terminal status."""
    server.wait_terminal(batch_id)
    batch = litellm.retrieve_batch(batch_id=batch_id, **via(server, **kw))
    assert batch.status in TERMINAL
    return batch


def jsonl(server, file_id: str | None) -> list[str]:
    """The text lines of a file as litellm downloads it ([] for no file)."""
    if file_id is None:
        return []
    return litellm.file_content(file_id=file_id, **via(server)).content.decode().splitlines()


def answers(lines: list[str]) -> dict[str, str]:
    out = {}
    for text in lines:
        line = json.loads(text)
        assert line["custom_id"] not in out
        out[line["custom_id"]] = line["response"]["body"]["choices"][0]["message"]["content"]
    return out


@pytest.fixture()
def batch_server(dataset, sim):
    """A factory of started fake batch servers over the judging tests' dataset (stopped at teardown)."""
    queries, documents, _ = dataset
    started = []

    def make(**kw):
        server = FakeBatchServer(kw.pop("judge", sim), queries=queries, documents=documents, **kw).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()


@pytest.fixture()
def requests_by_id(dataset, windows):
    queries, documents, _ = dataset
    return chat_kwargs(windows, queries, documents)


def test_a_batch_of_rendered_windows_completes_with_the_chat_endpoints_answers(batch_server, served,
                                                                                requests_by_id):
    server = batch_server()
    batch = submit(server, request_file(requests_by_id), metadata={"rcp_jax_key": "k1"})
    assert batch.status == "validating" and batch.metadata == {"rcp_jax_key": "k1"}
    done = finished(server, batch.id)
    assert done.status == "completed" and done.error_file_id is None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (
        len(requests_by_id), len(requests_by_id), 0)
    assert done.in_progress_at is not None and done.finalizing_at is not None and done.completed_at is not None
    out = [json.loads(t) for t in jsonl(server, done.output_file_id)]
    assert [o["custom_id"] for o in out] == list(requests_by_id)
    assert all(o["response"]["status_code"] == 200 and o["error"] is None for o in out)
    assert done.usage.input_tokens == sum(o["response"]["body"]["usage"]["prompt_tokens"] for o in out)
    # the same requests sent online, one by one, to a chat-only server: the same answers, raw and as litellm
    # reads them (litellm moves a <think> block to reasoning_content: a batch runner must read the body the same way)
    online = served()
    batch_bodies = {o["custom_id"]: o["response"]["body"] for o in out}
    decorated = 0
    for custom_id, kw in requests_by_id.items():
        body = {"model": "fake-judge", **{k: v for k, v in kw.items() if k not in CLIENT_ONLY}}
        raw = httpx.post(f"{online.url}/chat/completions", json=body).json()["choices"][0]["message"]["content"]
        assert raw == batch_bodies[custom_id]["choices"][0]["message"]["content"]
        decorated += "<think>" in raw
        reply = litellm.completion(model=MODEL, api_base=online.url, api_key=KEY, **kw)
        read = convert_to_model_response_object(response_object=batch_bodies[custom_id],
                                                 model_response_object=litellm.ModelResponse())
        assert reply.choices[0].message.content == read.choices[0].message.content
    assert decorated > 0  # the comparison above covers answers wrapped in <think> blocks
    # and the chat endpoint of the batch server itself still answers as before
    kw = next(iter(requests_by_id.values()))
    assert litellm.completion(model=MODEL, api_base=server.url, api_key=KEY, **kw).choices[0].message.content
    assert server.batches_created == 1 and server.files_uploaded == 1
    assert server.batch_custom_ids == {batch.id: list(requests_by_id)}


def test_litellm_uploads_multipart_and_uses_the_v1_paths(batch_server, requests_by_id):
    server = batch_server()
    batch = submit(server, request_file(requests_by_id))
    done = finished(server, batch.id)
    jsonl(server, done.output_file_id)
    litellm.list_batches(limit=5, **via(server))
    methods_paths = [(m, p) for m, p, _ in server.api_calls]
    assert methods_paths == [
        ("POST", "/v1/files"),
        ("POST", "/v1/batches"),
        ("GET", f"/v1/batches/{batch.id}"),
        ("GET", f"/v1/files/{done.output_file_id}/content"),
        ("GET", "/v1/batches"),
    ]
    assert server.api_calls[0][2] == "multipart/form-data"
    uploaded = server.files[done.input_file_id]
    assert uploaded["purpose"] == "batch" and uploaded["filename"] == "requests.jsonl"
    assert uploaded["bytes"] == len(request_file(requests_by_id))


def test_an_api_base_without_v1_reaches_the_same_endpoints(batch_server, requests_by_id):
    server = batch_server()
    bare = server.url.removesuffix("/v1")
    batch = submit(server, request_file(requests_by_id), api_base=bare)
    assert finished(server, batch.id, api_base=bare).status == "completed"
    assert {p for _, p, _ in server.api_calls} >= {"/files", "/batches"}


def test_list_is_newest_first_pages_with_after_and_finds_a_batch_by_metadata(batch_server, requests_by_id):
    server = batch_server()
    data = request_file(requests_by_id)
    ids = [submit(server, data, metadata={"rcp_jax_key": f"key-{i}"}).id for i in range(3)]
    first = litellm.list_batches(limit=2, **via(server))
    assert [b.id for b in first.data] == ids[::-1][:2] and first.has_more
    rest = litellm.list_batches(after=first.data[-1].id, limit=2, **via(server))
    assert [b.id for b in rest.data] == [ids[0]] and not rest.has_more
    everything = litellm.list_batches(limit=100, **via(server)).data
    found = [b.id for b in everything if (b.metadata or {}).get("rcp_jax_key") == "key-1"]
    assert found == [ids[1]]
    assert server.batches_created == 3 and server.files_uploaded == 3
    for bid in ids:
        server.wait_terminal(bid)


def test_unknown_ids_and_bad_requests_are_refused_with_openai_errors(batch_server, requests_by_id):
    server = batch_server()
    with pytest.raises(openai.NotFoundError):
        litellm.retrieve_batch(batch_id="batch_missing", **via(server))
    with pytest.raises(openai.BadRequestError):
        litellm.create_batch(completion_window="24h", endpoint="/v1/chat/completions", input_file_id="file-missing",
                             **via(server))
    assert server.batches_created == 0


def test_a_key_is_required_when_the_server_has_one(batch_server, requests_by_id):
    server = batch_server(api_key="sk-right")
    with pytest.raises(openai.AuthenticationError):
        litellm.create_file(file=("r.jsonl", b"{}\n"), purpose="batch", **via(server))
    uploaded = litellm.create_file(file=("r.jsonl", request_file(requests_by_id)), purpose="batch",
                                   **via(server, api_key="sk-right"))
    assert uploaded.id in server.files and server.files_uploaded == 1


# -- faults ---------------------------------------------------------------------------------------------------


def until(condition, timeout: float = 10.0) -> None:
    """Wait for ``condition()`` to hold (a bounded wait for the server's background task, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the fake batch server never got there"
        time.sleep(0.005)


def error_lines(server, batch) -> dict[str, dict]:
    return {line["custom_id"]: line for line in map(json.loads, jsonl(server, batch.error_file_id))}


def test_a_failed_batch_has_errors_and_no_files(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(fail="the provider refused the batch")])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    assert done.status == "failed" and done.failed_at is not None
    assert done.output_file_id is None and done.error_file_id is None
    assert [e.message for e in done.errors.data] == ["the provider refused the batch"]


def test_an_invalid_input_file_fails_validation_naming_its_lines(batch_server, requests_by_id):
    server = batch_server()
    good = request_file(requests_by_id).decode().splitlines()
    data = "\n".join([good[0], good[0], "not json", good[1]]).encode()
    done = finished(server, submit(server, data).id)
    assert done.status == "failed" and done.output_file_id is None
    assert [(e.code, e.line) for e in done.errors.data] == [("duplicate_custom_id", 2), ("invalid_json_line", 3)]


def test_an_expired_batch_keeps_the_lines_done_before_expiry(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(expire_after=5)])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    ids = list(requests_by_id)
    assert done.status == "expired" and done.expired_at is not None
    assert list(answers(jsonl(server, done.output_file_id))) == ids[:5]
    errors = error_lines(server, done)
    assert list(errors) == ids[5:]
    assert all(e["response"] is None and e["error"]["code"] == "batch_expired" for e in errors.values())
    assert (done.request_counts.completed, done.request_counts.failed) == (5, len(ids) - 5)


def test_a_batch_that_cancels_itself_keeps_its_partial_output(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(cancel_after=3)])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    assert done.status == "cancelled" and done.cancelling_at is not None and done.cancelled_at is not None
    assert list(answers(jsonl(server, done.output_file_id))) == list(requests_by_id)[:3]
    assert {e["error"]["code"] for e in error_lines(server, done).values()} == {"batch_cancelled"}


def test_a_held_batch_waits_in_progress_until_released(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(hold=True), BatchFault(hold=True)])
    first = submit(server, request_file(requests_by_id))
    second = submit(server, request_file(requests_by_id))
    until(lambda: server.batches[first.id]["status"] == server.batches[second.id]["status"] == "in_progress")
    for _ in range(3):  # held: it stays there, whoever asks
        polled = litellm.retrieve_batch(batch_id=first.id, **via(server))
        assert polled.status == "in_progress" and polled.request_counts.completed == 0
    server.release(first.id)
    assert finished(server, first.id).status == "completed"
    assert server.batches[second.id]["status"] == "in_progress"  # released one by one
    httpx.post(server.url.removesuffix("/v1") + "/_fake/release", json={"batch_id": second.id})
    assert finished(server, second.id).status == "completed"


def test_a_client_cancels_a_held_batch(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(hold=True)])
    batch = submit(server, request_file(requests_by_id))
    until(lambda: server.batches[batch.id]["status"] == "in_progress")
    assert litellm.cancel_batch(batch_id=batch.id, **via(server)).status == "cancelling"
    done = finished(server, batch.id)
    assert done.status == "cancelled" and done.output_file_id is None
    assert list(error_lines(server, done)) == list(requests_by_id)
    with pytest.raises(openai.ConflictError):
        litellm.cancel_batch(batch_id=finished(server, submit(server, request_file(requests_by_id)).id).id,
                             **via(server))


def test_partial_results_leave_lines_out_while_the_counts_claim_them(batch_server, requests_by_id):
    ids = list(requests_by_id)
    server = batch_server(batch_faults=[BatchFault(drop=(0, ids[4]))])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    assert done.status == "completed" and done.request_counts.completed == len(ids)
    assert list(answers(jsonl(server, done.output_file_id))) == [i for i in ids if i not in (ids[0], ids[4])]


def test_malformed_output_lines_of_each_kind(batch_server, requests_by_id):
    ids = list(requests_by_id)
    kinds = ["not_json", "not_object", "no_custom_id", "no_response", "no_body", "empty_choices", "no_content"]
    server = batch_server(batch_faults=[BatchFault(malformed={ids[k]: kind for k, kind in enumerate(kinds)})])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    lines = jsonl(server, done.output_file_id)
    assert len(lines) == len(ids)
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[0])
    read = [json.loads(t) for t in lines[1:]]
    assert read[0] == [ids[1]]
    assert "custom_id" not in read[1]
    assert "response" not in read[2] and read[2]["custom_id"] == ids[3]
    assert "body" not in read[3]["response"]
    assert read[4]["response"]["body"]["choices"] == []
    assert "content" not in read[5]["response"]["body"]["choices"][0]["message"]
    assert list(answers(lines[len(kinds):])) == ids[len(kinds):]  # the rest are sound


def test_duplicate_and_stray_result_lines(batch_server, requests_by_id):
    ids = list(requests_by_id)
    server = batch_server(batch_faults=[BatchFault(duplicate=(2,), stray=("never-asked",))])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    read = [json.loads(t) for t in jsonl(server, done.output_file_id)]
    seen = [r["custom_id"] for r in read]
    assert seen.count(ids[2]) == 2 and seen.count("never-asked") == 1 and len(seen) == len(ids) + 2
    copies = [r for r in read if r["custom_id"] == ids[2]]
    assert copies[0]["id"] != copies[1]["id"] and copies[0]["response"] == copies[1]["response"]
    assert "never-asked" not in server.batch_custom_ids[done.id]
    assert done.request_counts.completed == len(ids)


def test_per_line_errors_go_to_the_error_file(batch_server, requests_by_id):
    ids = list(requests_by_id)
    server = batch_server(batch_faults=[BatchFault(line_errors={1: 500, ids[3]: "invalid_request"})])
    done = finished(server, submit(server, request_file(requests_by_id)).id)
    assert done.status == "completed"
    assert (done.request_counts.completed, done.request_counts.failed) == (len(ids) - 2, 2)
    assert set(answers(jsonl(server, done.output_file_id))) == set(ids) - {ids[1], ids[3]}
    errors = error_lines(server, done)
    assert errors[ids[1]]["response"]["status_code"] == 500 and errors[ids[1]]["error"] is None
    assert "message" in errors[ids[1]]["response"]["body"]["error"]
    assert errors[ids[3]]["response"] is None and errors[ids[3]]["error"]["code"] == "invalid_request"


def test_fault_plans_go_to_batches_in_creation_order(batch_server, requests_by_id):
    data = request_file(requests_by_id)
    server = batch_server(batch_faults=[None, BatchFault(fail="second")])
    server.add_faults(BatchFault(expire_after=0))
    statuses = [finished(server, submit(server, data).id).status for _ in range(4)]
    assert statuses == ["completed", "failed", "expired", "completed"]
    picked = []
    by_index = batch_server(batch_faults=lambda index, custom_ids: picked.append((index, len(custom_ids)))
                            or (BatchFault(fail="odd") if index % 2 else None))
    statuses = [finished(by_index, submit(by_index, data).id).status for _ in range(3)]
    assert statuses == ["completed", "failed", "completed"]
    assert picked == [(i, len(requests_by_id)) for i in range(3)]


def test_a_lost_create_response_leaves_a_batch_the_client_can_find_by_metadata(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(lost_response=500)])
    with pytest.raises(openai.InternalServerError):
        submit(server, request_file(requests_by_id), metadata={"rcp_jax_key": "lost"}, max_retries=0)
    assert server.batches_created == 1
    found = [b for b in litellm.list_batches(limit=100, **via(server)).data if b.metadata == {"rcp_jax_key": "lost"}]
    assert len(found) == 1 and finished(server, found[0].id).status == "completed"


def test_the_sdks_default_retries_submit_a_lost_batch_again(batch_server, requests_by_id):
    server = batch_server(batch_faults=[BatchFault(lost_response=502)])
    batch = submit(server, request_file(requests_by_id), metadata={"rcp_jax_key": "twice"})  # no max_retries
    assert server.batches_created == 2  # what a runner must prevent: pass max_retries=0 to create_batch
    assert batch.id == list(server.batches)[1]


def test_transient_api_errors_are_served_in_order(batch_server, requests_by_id):
    server = batch_server(api_faults={"retrieve": [503, None, 429], "upload": [500]})
    with pytest.raises(openai.InternalServerError):
        submit(server, request_file(requests_by_id), max_retries=0)
    batch = submit(server, request_file(requests_by_id), max_retries=0)
    server.wait_terminal(batch.id)
    with pytest.raises(openai.InternalServerError):
        litellm.retrieve_batch(batch_id=batch.id, **via(server, max_retries=0))
    assert litellm.retrieve_batch(batch_id=batch.id, **via(server, max_retries=0)).status == "completed"
    with pytest.raises(openai.RateLimitError):
        litellm.retrieve_batch(batch_id=batch.id, **via(server, max_retries=0))
    assert litellm.retrieve_batch(batch_id=batch.id, **via(server, max_retries=0)).status == "completed"
    assert server.api_faults_served == [("upload", 500), ("retrieve", 503), ("retrieve", 429)]
    assert server.files_uploaded == 1 and server.batches_created == 1
    with pytest.raises(ValueError, match="unknown api_faults"):
        FakeBatchServer(server.judge, api_faults={"poll": [500]})

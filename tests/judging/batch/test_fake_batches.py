"""The fake Files + Batches API (``benchmarks/fixtures/fake_batches.py``) driven through litellm's own batch functions.

Everything goes over real HTTP on 127.0.0.1 through ``litellm.create_file`` / ``create_batch`` /
``retrieve_batch`` / ``file_content`` / ``list_batches`` / ``cancel_batch`` (the OpenAI SDK underneath), with
request lines made from real rendered windows and the chat body the online judge sends.
"""

from __future__ import annotations

import json

import httpx
import litellm
import openai
import pytest

from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
    convert_to_model_response_object,
)

from benchmarks.fixtures.fake_batches import TERMINAL, FakeBatchServer
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

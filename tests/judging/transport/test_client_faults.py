"""Faults a real server produced that the judge once handled badly, each against the fake server on 127.0.0.1.

- a body trickled one byte a second kept a call open far past its timeout: now a total deadline;
- an empty / null ``choices``, a choice without message, ``content: null``: an IndexError traceback on
  every rerun; now a stored invalid answer (``malformed_response``), re-asked;
- missing credentials (a litellm 500) and a rejected ``response_format`` were retried as "overloaded";
  now they fail at once saying the cause and the fix;
- re-asks at temperature 0 were byte-identical; now seed, temperature and a repair note vary.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from benchmarks.fixtures.fake_server import Fault, per_window
from rcp_jax.judging import (
    JudgeCredentialsError,
    JudgeStructuredOutputError,
    JudgeTimeoutError,
    LiteLLMJudge,
    judge_windows_sync,
    read_judgements,
)
from rcp_jax.judging.transport.client import REPAIR_MARKER

MODEL = "openai/fake-judge"
FAKE_KEY = "sk-test-SECRET789-do-not-leak-4c1d2e"


def judge_for(server, **kw):
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("backoff_max", 0.01)
    kw.setdefault("api_key", FAKE_KEY)
    return LiteLLMJudge(kw.pop("model", MODEL), api_base=server.url, **kw)


def records(folder):
    return read_judgements(folder, "tournament") + read_judgements(folder, "rubric")


# -- 1. a timeout is a deadline ------------------------------------------------------------------------


def test_a_trickling_answer_ends_at_the_deadline_and_is_retried(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    # ~1 KB at one byte per 0.05 s: about a minute per answer if the client waited for it
    server = served(faults=lambda ctx: Fault(trickle=0.05))
    judge = judge_for(server, timeout=1.0, max_transport_retries=1)
    judge.prepare()  # litellm's import (seconds, once) is not the call's
    started = time.monotonic()
    with pytest.raises(JudgeTimeoutError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    elapsed = time.monotonic() - started
    assert elapsed < 2 * 1.0 + 1.5, f"two tries of a 1 s deadline took {elapsed:.1f} s"
    assert server.status_counts[200] == 2  # the first try was retried once, like any timeout
    message = str(info.value)
    assert "1 s deadline" in message and "--timeout" in message and "--concurrency" in message
    assert records(tmp_path) == []


def test_a_trickle_once_then_a_normal_answer_is_stored_with_its_retry(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(trickle=0.05)))
    judge = judge_for(server, timeout=0.8)
    judge.prepare()
    started = time.monotonic()
    out = judge_windows_sync(windows[:2], judge=judge, store=tmp_path, documents=documents, queries=queries,
                             concurrency=2)
    elapsed = time.monotonic() - started
    stored = records(tmp_path)
    assert len(out) == 2 and len(stored) == 2 and all(r.valid and r.transport_retries >= 1 for r in stored)
    # each record counts its own retries: one per request the server saw beyond the first of its window. Usually
    # one (the trickle); on a loaded machine a normal answer may miss the 0.8 s deadline too and count another
    assert sum(r.transport_retries + 1 for r in stored) == len(server.requests)
    tries = max(r.transport_retries for r in stored) + 1
    assert elapsed < tries * 0.8 + 2.0, f"{tries} tries of a 0.8 s deadline took {elapsed:.1f} s"  # not ~50 s


# -- 2. replies without an answer ------------------------------------------------------------------------

NO_ANSWER = {
    "empty choices": {"choices": []},
    "null choices": {"choices": None},
    "no message": {"choices": [{"index": 0, "finish_reason": "stop"}]},
    "null content": {"choices": [{"index": 0, "message": {"role": "assistant", "content": None},
                                  "finish_reason": "stop"}]},
}


@pytest.mark.parametrize("body", list(NO_ANSWER.values()), ids=list(NO_ANSWER))
def test_a_reply_without_an_answer_is_an_invalid_answer_and_is_reasked(tmp_path, dataset, windows, served, body):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(body=body)))
    judge = judge_for(server)
    out = judge_windows_sync(windows[:2], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert len(out) == 2 and all(j.attempts == 2 for j in out)
    first = [r for r in records(tmp_path) if r.attempts == 1]
    assert len(first) == 2
    assert all(not r.valid and r.invalid_category == "malformed_response" and r.invalid_detail for r in first)
    assert server.status_counts == Counter({200: 4})  # no transport retry: one call per attempt


def test_a_server_that_never_answers_ends_the_run_cleanly_every_time(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=lambda ctx: Fault(body={"choices": []}))
    for _ in range(2):  # a rerun meets the same server: no traceback either time
        out = judge_windows_sync(windows[:2], judge=judge_for(server), store=tmp_path, documents=documents,
                                 queries=queries, max_attempts=2)
        assert out == []
    stored = records(tmp_path)
    assert len(stored) == 8 and {r.invalid_category for r in stored} == {"malformed_response"}
    assert sorted(r.attempts for r in stored) == [1, 1, 2, 2, 3, 3, 4, 4]  # numbered across runs


# -- 3. misclassified errors fail fast with their cause ------------------------------------------------


def test_missing_credentials_fail_at_once_naming_the_variable(tmp_path, dataset, windows, served, monkeypatch):
    queries, documents, _ = dataset
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    server = served()
    judge = judge_for(server, api_key=None)
    started = time.monotonic()
    with pytest.raises(JudgeCredentialsError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "hosted_vllm/" in message
    assert "overloaded" not in message
    assert judge.ledger.transport_retries == 0 and server.status_counts == Counter()  # nothing was sent


@pytest.mark.parametrize("status, said", [
    (500, "Internal error: response_format json_schema is not supported by this server"),
    (400, 'Either "json_schema" or "grammar" can be specified, but not both'),
    (422, "unsupported value for response_format.type: json_schema"),
])
def test_a_rejected_response_format_fails_at_once_and_names_the_modes_to_try(
        tmp_path, dataset, windows, served, status, said):
    queries, documents, _ = dataset
    server = served(faults=lambda ctx: Fault(status=status, message=said))
    judge = judge_for(server, structured_output="json_schema")
    with pytest.raises(JudgeStructuredOutputError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    message = str(info.value)
    assert "response_format=json_schema" in message
    assert "--structured-output json_object_schema" in message and "none" in message
    assert server.status_counts == Counter({status: 1})  # not retried


def test_a_plain_500_is_still_retried_as_a_server_error(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(status=500, message="CUDA out of memory")))
    out = judge_windows_sync(windows[:1], judge=judge_for(server, structured_output="json_schema"), store=tmp_path,
                             documents=documents, queries=queries)
    assert len(out) == 1 and server.status_counts == Counter({500: 1, 200: 1})


# -- 4. re-asks vary what can vary ---------------------------------------------------------------------


def test_a_reask_differs_from_the_first_request_and_says_so_in_the_record(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(content="I think document 2 is the most relevant one.")))
    judge = judge_for(server)
    out = judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert len(out) == 1 and out[0].valid and out[0].attempts == 2  # bad once, then well: stored valid
    first, second = server.requests
    assert first["key"] == second["key"]  # the same window
    assert first["messages"] != second["messages"]
    assert (first["seed"], second["seed"]) == (None, 1)
    assert (first["temperature"], second["temperature"]) == (0.0, 0.2)
    assert first["repair"] == [] and second["repair"][0].startswith(REPAIR_MARKER)
    assert "no_json" in second["repair"][0]
    assert [m["role"] for m in first["messages"]] == [m["role"] for m in second["messages"]]  # roles still alternate
    bad, good = sorted(records(tmp_path), key=lambda r: r.attempts)
    assert bad.reask is None and not bad.valid
    assert good.reask == {"attempt": 2, "seed": 1, "temperature": 0.2, "repair": good.reask["repair"]}
    assert good.reask["repair"].startswith("no_json")
    assert "reask" not in bad.to_dict() and good.to_dict()["reask"]["seed"] == 1
    assert good.record_id == bad.record_id  # what a re-ask varies is not part of the record id


def test_a_reask_in_a_later_run_quotes_the_stored_error(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(content="{\"ranking\": []}")))
    kw = dict(store=tmp_path, documents=documents, queries=queries)
    assert judge_windows_sync(windows[:1], judge=judge_for(server), max_attempts=1, **kw) == []
    out = judge_windows_sync(windows[:1], judge=judge_for(server), **kw)  # the same family: a resume
    assert len(out) == 1 and out[0].attempts == 2
    again = server.requests[-1]
    assert again["seed"] == 1 and again["repair"]
    first_category = records(tmp_path)[0].invalid_category
    assert first_category in again["repair"][0]


def test_seed_and_temperature_stay_put_when_asked(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(content="nope")))
    judge_windows_sync(windows[:1], judge=judge_for(server, vary_reasks=False), store=tmp_path, documents=documents,
                       queries=queries)
    first, second = server.requests
    assert first["messages"] == second["messages"] and first["seed"] == second["seed"]
    assert first["temperature"] == second["temperature"] == 0.0
    assert all(r.reask is None for r in records(tmp_path))


def test_reask_temperature_is_capped_at_one_and_never_lowered():
    from rcp_jax.judging.judge import JudgeRequest
    from rcp_jax.judging.prompts.render import builtin_template, render_window
    from rcp_jax.judging.store.records import Window

    w = Window("q", "tournament", "p", 0, ("a", "b"))
    rendered = render_window(builtin_template("tournament"), "query", w.doc_ids, ["x", "y"])
    hot = LiteLLMJudge(MODEL, temperature=0.9)
    assert hot.reask_settings(JudgeRequest(w, rendered, 4, ("schema", "bad")))["temperature"] == 1.0
    assert hot.reask_settings(JudgeRequest(w, rendered, 1)) is None
    above = LiteLLMJudge(MODEL, temperature=1.3)
    assert above.reask_settings(JudgeRequest(w, rendered, 2))["temperature"] is None  # left as configured
    unset = LiteLLMJudge(MODEL, temperature=None)
    assert unset.reask_settings(JudgeRequest(w, rendered, 2))["temperature"] is None
    no_seed = LiteLLMJudge("anthropic/claude-3-haiku-20240307")  # litellm: anthropic takes no seed
    assert no_seed.reask_settings(JudgeRequest(w, rendered, 2))["seed"] is None


# -- structured-output forms -------------------------------------------------------------------------------


def test_llama_cpp_json_object_schema_form_and_none(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()
    judge = judge_for(server, structured_output="json_object_schema")
    judge_windows_sync(windows[:2], judge=judge, store=tmp_path / "a", documents=documents, queries=queries)
    formats = [r["response_format"] for r in server.requests]
    assert all(f["type"] == "json_object" and f["schema"]["type"] == "object" for f in formats)
    assert {tuple(sorted(f["schema"]["required"])) for f in formats if "scores" in f["schema"]["properties"]}
    # llama.cpp's grammar ignores minimum / maximum: the scores must carry the schema module's grid
    for f in formats:
        if "scores" in f["schema"]["properties"]:
            for spec in f["schema"]["properties"]["scores"]["properties"].values():
                assert min(spec["enum"]) == -5 and max(spec["enum"]) == 5
    none = judge_for(server, structured_output="none")
    judge_windows_sync(windows[2:4], judge=none, store=tmp_path / "b", documents=documents, queries=queries)
    assert all(r["response_format"] is None for r in server.requests[2:])
    assert none.family("tournament") == judge_for(server, structured_output="off").family("tournament")


def test_extra_params_reach_the_server(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()
    judge = judge_for(server, extra_params={"top_k": 20})
    judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert server.requests[0]["extra"].get("top_k") == 20

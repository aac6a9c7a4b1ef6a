"""The litellm judge over real HTTP on 127.0.0.1 against the fake OpenAI-compatible server.

litellm's own network path is used end to end (no mocks): requests, status codes, timeouts and the
exception mapping are litellm's and the OpenAI SDK's.
"""

from __future__ import annotations

import logging
import traceback
from collections import Counter

import pytest

from benchmarks.fixtures.fake_server import Fault, per_window
from rcp_jax.judging import (
    JudgeAuthError,
    JudgeNotFoundError,
    JudgeTransportError,
    LiteLLMJudge,
    SimulatedJudge,
    estimate_cost,
    judge_windows_sync,
    read_judgements,
)

MODEL = "openai/fake-judge"
#: A key that must never appear in a message, a log line or a stored record.
FAKE_KEY = "sk-test-SECRET123-do-not-leak-7f3a9c"


def judge_for(server, **kw):
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("backoff_max", 0.01)
    return LiteLLMJudge(kw.pop("model", MODEL), api_base=kw.pop("api_base", server.url), api_key=FAKE_KEY, **kw)


def records(folder):
    return read_judgements(folder, "tournament") + read_judgements(folder, "rubric")


def test_batch_over_http_every_window_stored_once_and_parsed(tmp_path, dataset, windows, served, sim):
    queries, documents, latent = dataset
    server = served()
    judge = judge_for(server)
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=6)
    assert len(out) == len(windows) and all(j.valid for j in out)
    stored = records(tmp_path)
    assert Counter(r.record_id for r in stored) == Counter(j.record_id for j in out)  # once each
    assert server.status_counts == Counter({200: len(windows)})  # one call per window, no hidden retries
    assert all(r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0 for r in stored)
    assert judge.ledger.calls == len(windows)
    assert judge.ledger.prompt_tokens == sum(r.usage.prompt_tokens for r in stored)
    assert all(r.family.model == MODEL for r in stored)
    assert {req["temperature"] for req in server.requests} == {0.0}
    # the server read the documents back from the prompt text alone: its answers equal the in-process ones
    local = {(j.window.stage, j.window.sequence, j.window.query_id): (j.scores, j.criteria)
             for j in judge_windows_sync(windows, judge=SimulatedJudge(latent, seed=11), store=tmp_path / "local",
                                         documents=documents, queries=queries)}
    assert {(j.window.stage, j.window.sequence, j.window.query_id): (j.scores, j.criteria) for j in out} == local


def test_one_judge_serves_several_runs_and_caps_calls_in_flight(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(latency=0.02)
    judge = judge_for(server, max_in_flight=2)
    kw = dict(judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=8)
    first = judge_windows_sync(windows[:6], **kw)  # two event loops, one judge
    second = judge_windows_sync(windows, **kw)
    assert len(first) == 6 and len(second) == len(windows)
    assert judge.ledger.calls == len(windows) == server.status_counts[200]
    assert server.max_in_flight <= 2


def test_rate_limits_and_server_errors_are_retried_then_succeed(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(status=429, retry_after=0), Fault(status=500)))
    judge = judge_for(server)
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=4)
    assert len(out) == len(windows)
    assert server.status_counts == Counter({429: len(windows), 500: len(windows), 200: len(windows)})
    assert all(r.transport_retries == 2 for r in records(tmp_path))
    assert judge.ledger.transport_retries == 2 * len(windows)


def test_slow_answers_time_out_and_are_retried(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(delay=2.0)))
    judge = judge_for(server, timeout=0.3)
    few = windows[:3]
    out = judge_windows_sync(few, judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=3)
    assert len(out) == len(few)
    stored = records(tmp_path)
    assert len(stored) == len(few) and all(r.transport_retries >= 1 for r in stored)
    # one retry per window for the delayed first answer; on a loaded machine a normal answer may miss the 0.3 s
    # deadline too: each record still counts exactly the requests the server saw for its window, less one
    assert sum(r.transport_retries + 1 for r in stored) == len(server.requests)


def test_persistent_failures_end_in_a_transport_error(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=lambda ctx: Fault(status=503))
    judge = judge_for(server, max_transport_retries=2)
    with pytest.raises(JudgeTransportError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert MODEL in str(info.value) and server.url in str(info.value)
    assert server.status_counts == Counter({503: 3})  # 1 call + 2 retries: litellm added none of its own
    assert records(tmp_path) == []


def test_a_port_where_nothing_listens_says_could_not_connect_not_overloaded(tmp_path, dataset, windows, caplog):
    """A real refused connection (no fake server: a port just closed), which litellm labels HTTP 500."""
    import socket

    queries, documents, _ = dataset
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    judge = LiteLLMJudge(MODEL, api_base=url, api_key=FAKE_KEY, max_transport_retries=1,
                         backoff_base=0.001, backoff_max=0.01)
    with caplog.at_level(logging.WARNING), pytest.raises(JudgeTransportError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    message = str(info.value)
    assert "could not connect" in message and url in message and "--api-base" in message
    assert "overloaded" not in message and FAKE_KEY not in message
    assert "could not connect (nothing answered)" in caplog.text
    assert records(tmp_path) == []


def test_401_fails_fast_naming_model_and_endpoint_never_the_key(tmp_path, dataset, windows, served, caplog, capfd):
    queries, documents, _ = dataset
    server = served(api_key="sk-" + "the-right-key-0000")  # the server echoes the wrong key it was given
    judge = judge_for(server)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(JudgeAuthError) as info:
        judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=2)
    err = info.value
    message = str(err)
    assert MODEL in message and server.url in message and "401" in message
    assert err.__cause__ is None and err.__context__ is None  # the provider's exception is not chained
    assert server.status_counts[401] <= 2  # at most the calls already in flight; nothing retried
    rendered = "".join(traceback.format_exception(err))
    out, errs = capfd.readouterr()
    stored = "".join(p.read_text() for p in tmp_path.glob("*"))
    for secret in (FAKE_KEY, FAKE_KEY[-6:]):
        assert secret not in message
        assert secret not in rendered
        assert secret not in caplog.text
        assert secret not in out + errs
        assert secret not in stored
        assert secret not in repr(judge)


def test_content_filter_is_a_refused_answer_and_is_reasked(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    blocked = Fault(status=400, message="invalid_request_error: content_policy_violation: the request was rejected")
    server = served(faults=per_window(blocked))
    judge = judge_for(server)
    out = judge_windows_sync(windows[:2], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert len(out) == 2
    first = [r for r in records(tmp_path) if r.attempts == 1]
    assert all(r.invalid_category == "refused" and r.finish_reason == "content_filter" for r in first)


def test_context_overflow_fails_fast_and_names_the_budget(tmp_path, dataset, windows, served):
    from rcp_jax.judging import JudgeRequestError

    queries, documents, _ = dataset
    too_long = Fault(status=400, message="This model's maximum context length is 8192 tokens. However, you requested 9000 tokens")
    server = served(faults=lambda ctx: too_long)
    with pytest.raises(JudgeRequestError, match="--max-window-chars .max_window_chars= in Python"):
        judge_windows_sync(windows[:1], judge=judge_for(server), store=tmp_path, documents=documents, queries=queries)
    assert server.status_counts == Counter({400: 1})


def test_404_fails_fast_as_not_found(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()
    wrong = server.url.replace("/v1", "/nowhere/v1")
    judge = judge_for(server, api_base=wrong)
    with pytest.raises(JudgeNotFoundError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert MODEL in str(info.value) and wrong in str(info.value)


def test_litellm_retries_nothing_by_itself(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(faults=per_window(Fault(status=429)))
    judge = judge_for(server, max_transport_retries=0)
    with pytest.raises(JudgeTransportError):
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert server.status_counts == Counter({429: 1})


def test_several_endpoints_share_the_load(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    one, two = served(), served()
    judge = LiteLLMJudge(MODEL, endpoints=[one.url, {"api_base": two.url, "api_key": FAKE_KEY}], api_key=FAKE_KEY)
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=6)
    assert len(out) == len(windows)
    assert one.status_counts[200] > 0 and two.status_counts[200] > 0
    assert one.status_counts[200] + two.status_counts[200] == len(windows)
    assert "sk-" not in repr(judge)


def test_structured_output_sends_the_window_schema(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()
    judge = judge_for(server, structured_output="json_schema")
    judge_windows_sync(windows[:2], judge=judge, store=tmp_path, documents=documents, queries=queries)
    formats = [r["response_format"] for r in server.requests]
    assert all(f["type"] == "json_schema" for f in formats)
    schemas = {f["json_schema"]["name"]: f["json_schema"]["schema"] for f in formats}
    assert schemas["tournament_answer"]["properties"]["scores"]["required"] == [f"doc_{i}" for i in range(1, 6)]
    assert schemas["rubric_answer"]["required"] == [f"doc_{i}" for i in range(1, 6)]
    # 'auto' asks litellm; a model it does not know gets no schema
    auto = judge_for(server)
    assert auto.structured_mode() == "off"
    assert judge.family("tournament") != auto.family("tournament")  # the mode is part of the family


def test_known_model_cost_comes_from_the_local_cost_map(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()
    judge = judge_for(server, model="gpt-4o-mini")
    out = judge_windows_sync(windows[:2], judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert all(j.usage.cost_usd and j.usage.cost_usd > 0 for j in out)
    assert judge.ledger.cost_usd > 0 and judge.ledger.unpriced_calls == 0


def test_estimate_uses_the_tokenizer_for_known_models_and_chars_for_unknown(dataset, windows):
    queries, documents, _ = dataset
    known = estimate_cost(windows, judge=LiteLLMJudge("gpt-4o-mini"), documents=documents, queries=queries)
    assert known.token_method == "litellm.token_counter" and known.cost_usd > 0
    unknown = estimate_cost(windows, judge=LiteLLMJudge("openai/no-such-model"), documents=documents, queries=queries)
    assert unknown.token_method.startswith("chars/4") and unknown.cost_usd is None
    assert any("characters / 4" in n for n in unknown.notes)
    priced = LiteLLMJudge("openai/no-such-model", input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    est = estimate_cost(windows, judge=priced, documents=documents, queries=queries)
    assert est.cost_usd == pytest.approx(est.input_tokens * 1e-6 + est.output_tokens * 2e-6)
    assert abs(known.input_tokens - unknown.input_tokens) < 0.5 * known.input_tokens

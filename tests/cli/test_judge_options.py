"""The judge options on the CLI (--timeout, --max-attempts, --structured-output, --extra-params, token prices,
--stop-after-invalid, --concurrency auto), the verdict and invalid-answer summaries a user reads, and fit's
refusal of a store whose answers are all invalid. In process, against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.fixtures.fake_server import Fault, FakeOpenAIServer, per_window  # noqa: E402
from rcp_jax.cli import build_parser, main  # noqa: E402
from rcp_jax.cli import _judge_options as J  # noqa: E402
from rcp_jax.errors import DataError  # noqa: E402
from rcp_jax.judging import LiteLLMJudge, SimulatedJudge, Window, judge_windows_sync  # noqa: E402

MODEL = "openai/fake-judge"


def judge_args(*extra: str):
    return build_parser().parse_args(["judge", "--rows", "rows.jsonl", *extra])


@pytest.fixture(scope="module")
def tiny_inputs(demo_tiny):
    """(queries, documents) of the demo_tiny rows, for the fake server."""
    rows = [json.loads(line) for line in demo_tiny["rows"].read_text().splitlines()]
    queries = {r["query_id"]: r["query"] for r in rows}
    documents = {r["query_id"]: dict(zip(r["doc_ids"], r["docs"])) for r in rows}
    return queries, documents


@pytest.fixture()
def fake(tiny_inputs):
    queries, documents = tiny_inputs
    latent = {q: {d: 0.3 * i for i, d in enumerate(docs)} for q, docs in documents.items()}
    started = []

    def make(**kw):
        server = FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents, **kw).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()


def test_options_reach_the_judge(monkeypatch):
    monkeypatch.setattr(J, "probe_server", lambda *a, **k: J.ServerInfo(), raising=False)
    args = judge_args("--model", MODEL, "--timeout", "30", "--max-attempts", "5", "--stop-after-invalid", "7",
                      "--structured-output", "none", "--extra-params", '{"top_k": 20}', "--max-transport-retries", "2",
                      "--input-cost-per-token", "1e-6", "--output-cost-per-token", "2e-6", "--concurrency", "3")
    judge = J.build_judge(args, None)
    assert isinstance(judge, LiteLLMJudge)
    assert (judge.timeout, judge.max_transport_retries, judge.structured_mode()) == (30.0, 2, "off")
    assert judge.extra_params == {"top_k": 20}
    assert (judge.input_cost_per_token, judge.output_cost_per_token) == (1e-6, 2e-6)
    assert (judge.max_attempts, judge.stop_after_invalid, args.concurrency) == (5, 7, 3)
    defaults = judge_args()
    assert (defaults.timeout, defaults.max_attempts, defaults.stop_after_invalid, defaults.concurrency) == (
        120.0, 3, 20, "auto")
    from rcp_jax.judging.run import DEFAULT_MAX_ATTEMPTS, DEFAULT_STOP_AFTER_INVALID

    assert (J.DEFAULT_MAX_ATTEMPTS, J.DEFAULT_STOP_AFTER_INVALID) == (DEFAULT_MAX_ATTEMPTS, DEFAULT_STOP_AFTER_INVALID)
    sim = J.build_judge(judge_args("--max-attempts", "2"), {"q": {"d": 0.0}})
    assert sim.max_attempts == 2 and defaults.concurrency == "auto"


@pytest.mark.parametrize("flags", [["--timeout", "0"], ["--timeout", "soon"], ["--max-attempts", "0"],
                                   ["--stop-after-invalid", "-1"], ["--concurrency", "0"],
                                   ["--structured-output", "grammar"], ["--input-cost-per-token", "-1"]])
def test_bad_option_values_are_usage_errors(flags, capsys):
    with pytest.raises(SystemExit) as info:
        judge_args(*flags)
    assert info.value.code == 2
    assert flags[0] in capsys.readouterr().err


@pytest.mark.parametrize("text, said", [("{top_k: 20}", "not valid JSON"), ("[1, 2]", "JSON object"),
                                        ('{"messages": []}', "may not set messages")])
def test_bad_extra_params_name_the_flag(text, said):
    with pytest.raises(DataError, match=said) as info:
        J.build_judge(judge_args("--model", MODEL, "--extra-params", text), None)
    assert "--extra-params" in str(info.value)


def test_one_price_without_the_other_is_refused():
    with pytest.raises(DataError, match="--output-cost-per-token"):
        J.build_judge(judge_args("--model", MODEL, "--input-cost-per-token", "1e-6"), None)


def test_concurrency_auto_follows_the_server(fake):
    one_slot = fake(props={"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1})
    args = judge_args("--model", MODEL, "--api-base", one_slot.url)
    J.build_judge(args, None)
    assert args.concurrency == 1 and args.server_info.context == 2048
    assert "1 (the server's parallel slots" in args.judge_notes[0]
    more = judge_args("--model", MODEL, "--api-base", one_slot.url, "--concurrency", "16")
    J.build_judge(more, None)
    assert more.concurrency == 16 and "more than the server's 1 parallel slot" in more.judge_notes[0]
    silent = fake()
    quiet = judge_args("--model", MODEL, "--api-base", silent.url)
    J.build_judge(quiet, None)
    assert quiet.concurrency == J.AUTO_CONCURRENCY_SELF_HOSTED
    hosted = judge_args("--model", MODEL)
    J.build_judge(hosted, None)
    assert hosted.concurrency == J.AUTO_CONCURRENCY_HOSTED
    simulated = judge_args()
    J.build_judge(simulated, {"q": {"d": 0.0}})
    assert simulated.concurrency == J.AUTO_CONCURRENCY_HOSTED


def test_a_judge_that_never_parses_gets_a_verdict_from_the_cli(fake, demo_tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test")
    server = fake(faults=lambda ctx: Fault(content="Document 3 looks the most relevant to me."))
    store = tmp_path / "store"
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", MODEL, "--api-base", server.url,
               "--store", str(store), "--stop-after-invalid", "6", "--concurrency", "2", "--quiet"])
    err = capsys.readouterr().err
    assert rc not in (0, 2)  # a judge failure, not bad input
    assert "stopped early: the first 6 answers" in err and "no_json 6" in err
    assert "Document 3 looks the most relevant" in err  # one raw answer, as received
    assert "--structured-output" in err and "Traceback" not in err
    assert len(server.requests) <= 6 + 1  # the second call in flight at most


def test_invalid_answers_are_summarised_after_a_run_and_context_is_warned(fake, demo_tiny, tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test")
    tiny_context = {"default_generation_settings": {"n_ctx": 3000}, "total_slots": 2}
    server = fake(faults=per_window(Fault(content="not json")), props=tiny_context)
    store = tmp_path / "store"
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", MODEL, "--api-base", server.url,
               "--store", str(store), "--max-queries", "1", "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "--max-tokens" in err and "3,000" in err  # the warning, and the run went ahead anyway
    assert "--concurrency auto: 2" in err
    assert "invalid answers in the store" in out and "no_json" in out
    assert max(r["seed"] or 0 for r in server.requests) >= 1  # the re-asks varied


def test_estimate_prices_with_the_cli_prices(demo_tiny, tmp_path, capsys):
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", "openai/no-such-model", "--estimate", "--json",
               "--store", str(tmp_path / "never"), "--input-cost-per-token", "1e-6", "--output-cost-per-token", "2e-6"])
    assert rc == 0
    est = json.loads(capsys.readouterr().out)
    assert est["cost_usd"] == pytest.approx(est["input_tokens"] * 1e-6 + est["output_tokens"] * 2e-6)
    assert not (tmp_path / "never").exists()
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", "openai/no-such-model", "--estimate",
               "--store", str(tmp_path / "never")])
    assert rc == 0 and "--input-cost-per-token" in capsys.readouterr().out


def test_fit_refusal_lists_the_invalid_answers(demo_tiny, tiny_inputs, tmp_path, capsys):
    queries, documents = tiny_inputs
    windows = [Window(q, stage, "round1" if stage == "tournament" else "balanced", 0, tuple(sorted(docs)[:4]))
               for q, docs in documents.items() for stage in ("tournament", "rubric")]
    bad = SimulatedJudge({q: {d: 0.0 for d in docs} for q, docs in documents.items()}, malformed_rate=1.0, seed=1)
    judge_windows_sync(windows, judge=bad, store=tmp_path / "store", documents=documents, queries=queries,
                       max_attempts=1, stop_after_invalid=0)
    rc = main(["fit", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "fit"), "--method", "map", "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{len(windows)} invalid answer(s) of {len(windows)}" in err
    assert "example (window" in err and "rcp-jax judge --store" in err


def test_windows_still_invalid_after_their_attempts_exit_as_a_judge_failure_with_the_breakdown(
        fake, demo_tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test")
    server = fake(faults=lambda ctx: Fault(body={"choices": []}))
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", MODEL, "--api-base", server.url,
               "--store", str(tmp_path / "store"), "--max-queries", "1", "--max-attempts", "1",
               "--stop-after-invalid", "0", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 3, err  # 'judge failed', not 'bad input' (2)
    assert "still have no valid answer" in err and "malformed_response" in err
    assert "example (window" in err and "Traceback" not in err and "IndexError" not in err


def test_a_context_overflow_advises_options_that_exist(fake, tiny_inputs, tmp_path, monkeypatch):
    """The context-overflow message names --max-window-chars (with the value in force) and --max-tokens; every
    option it names is one `rcp-jax judge` takes, and --max-window-chars reaches the judge and its family."""
    import re

    from rcp_jax.judging import JudgeRequestError
    from rcp_jax.judging.judge import DEFAULT_MAX_WINDOW_CHARS

    assert J.DEFAULT_MAX_WINDOW_CHARS == DEFAULT_MAX_WINDOW_CHARS == judge_args().max_window_chars
    queries, documents = tiny_inputs
    server = fake(faults=lambda ctx: Fault(status=400, message="This model's maximum context length is 2048 tokens. "
                                                               "However, you requested 3000 tokens"))
    args = judge_args("--model", MODEL, "--api-base", server.url, "--max-window-chars", "5000", "--max-tokens", "512")
    judge = J.build_judge(args, None)
    assert judge.max_window_chars == 5000 and judge.family("tournament").decoding["max_window_chars"] == 5000
    q = sorted(documents)[0]
    window = Window(q, "tournament", "round1", 0, tuple(sorted(documents[q]))[:3])
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    with pytest.raises(JudgeRequestError) as info:
        judge_windows_sync([window], judge=judge, store=tmp_path, documents=documents, queries=queries)
    message = str(info.value)
    assert "--max-window-chars" in message and "now 5000 characters" in message and "--max-tokens (now 512)" in message
    named = set(re.findall(r"(--[a-z][a-z-]+)", message))
    verbs = build_parser()._subparsers._group_actions[0].choices
    known = {o for a in verbs["judge"]._actions for o in a.option_strings}
    assert named and named <= known, named - known
    with pytest.raises(SystemExit):
        judge_args("--max-window-chars", "0")


def test_judge_json_prints_the_error_as_json_when_the_run_fails(demo_tiny, tmp_path, capsys, monkeypatch):
    """Under --json a failed run still answers on stdout: one JSON object with the error and the exit code (the
    message stays on stderr); a run that never starts (a missing file) likewise."""
    import socket

    monkeypatch.setenv("OPENAI_API_KEY", "none")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", MODEL, "--api-base", dead, "--json", "--quiet",
               "--max-transport-retries", "0", "--concurrency", "1", "--store", str(tmp_path / "store")])
    out, err = capsys.readouterr()
    assert rc == 3
    payload = json.loads(out)
    assert payload["exit_code"] == 3 and payload["verb"] == "judge" and payload["kind"] == "judge failed"
    assert "could not connect" in payload["error"] and payload["error"] in err
    rc = main(["judge", "--rows", str(tmp_path / "missing.jsonl"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and json.loads(out)["exit_code"] == 2 and "missing.jsonl" in json.loads(out)["error"]
    rc = main(["judge", "--rows", str(tmp_path / "missing.jsonl")])  # without --json: stdout stays empty
    assert rc == 2 and capsys.readouterr().out == ""

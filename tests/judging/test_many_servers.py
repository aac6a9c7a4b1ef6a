"""Several endpoints through litellm's Router, over real HTTP against two fake OpenAI-compatible servers, one
of which fails: calls reach both, failures are counted per endpoint, the run completes on the healthy one, and
the key never reaches the store or the logs."""

from __future__ import annotations

import logging
import socket
from collections import Counter

import pytest

from judging import JudgeTransportError, LiteLLMJudge, judge_windows_sync
from judging.testing_server import Fault

MODEL = "openai/fake-judge"
#: Must never appear in a stored record, a log line or the output.
FAKE_KEY = "sk-test-MANYSERVERS-do-not-leak-91c2"


def two_endpoint_judge(good, bad_url, **kw):
    return LiteLLMJudge(MODEL, endpoints=[good.url, {"api_base": bad_url, "api_key": FAKE_KEY}], api_key=FAKE_KEY,
                        backoff_base=0.001, backoff_max=0.01, **kw)


def test_a_failing_server_is_counted_and_the_run_completes_on_the_healthy_one(
        tmp_path, dataset, windows, served, caplog, capfd):
    queries, documents, _ = dataset
    good = served()
    bad = served(faults=lambda ctx: Fault(status=500, message=f"overloaded; you sent {FAKE_KEY}"))
    judge = two_endpoint_judge(good, bad.url)
    with caplog.at_level(logging.INFO):
        out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries,
                                 concurrency=4)
    assert len(out) == len(windows) and all(j.valid for j in out)
    # the Router's shuffle sends each first try to either endpoint (18 windows: all to one has odds 2**-17)
    assert bad.status_counts[500] > 0, "the Router never sent a call to the second endpoint"
    assert set(bad.status_counts) == {500} and good.status_counts == Counter({200: len(windows)})
    stats = {s["api_base"]: s for s in judge.endpoint_stats()}
    assert stats[good.url] == {"api_base": good.url, "answered": len(windows), "failed": 0, "timeouts": 0}
    assert stats[bad.url] == {"api_base": bad.url, "answered": 0, "failed": bad.status_counts[500], "timeouts": 0}
    # a failed try goes at once to the endpoint that has not failed: one failure per window at most
    assert bad.status_counts[500] <= len(windows)
    assert judge.ledger.transport_retries == bad.status_counts[500] and judge.ledger.failed_calls == 0
    # the failing endpoint rests after ENDPOINT_FAILS_TO_REST failures in a row
    assert bad.status_counts[500] < len(windows)
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert FAKE_KEY.encode() not in stored
    printed = capfd.readouterr()
    assert FAKE_KEY not in caplog.text + printed.out + printed.err
    assert bad.url in caplog.text  # the retry warnings name the endpoint that failed


def test_an_unreachable_endpoint_is_passed_over(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    good = served()
    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    judge = two_endpoint_judge(good, dead, timeout=5)
    out = judge_windows_sync(windows[:6], judge=judge, store=tmp_path, documents=documents, queries=queries,
                             concurrency=2)
    assert len(out) == 6
    stats = {s["api_base"]: s for s in judge.endpoint_stats()}
    assert stats[good.url]["answered"] == 6 and stats[dead]["answered"] == 0
    assert stats[dead]["failed"] == judge.ledger.transport_retries


def test_when_every_server_fails_the_error_counts_each_one(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    down = [served(faults=lambda ctx: Fault(status=503)) for _ in range(2)]
    judge = LiteLLMJudge(MODEL, endpoints=[s.url for s in down], api_key=FAKE_KEY, backoff_base=0.001,
                         backoff_max=0.002, max_transport_retries=3)
    with pytest.raises(JudgeTransportError) as info:
        judge_windows_sync(windows[:1], judge=judge, store=tmp_path, documents=documents, queries=queries)
    message = str(info.value)
    assert "Tries per endpoint so far:" in message and FAKE_KEY not in message
    tries = {s.url: s.status_counts[503] for s in down}
    assert sum(tries.values()) == 4 and min(tries.values()) >= 1  # the retry went to the other server
    for url, n in tries.items():
        assert f"{url} 0 answered, {n} failed" in message

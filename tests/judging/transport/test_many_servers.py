"""Several endpoints over real HTTP against fake OpenAI-compatible servers, some failing: calls reach each, failures
are counted per endpoint, a failing endpoint is benched, the run completes on the healthy one (or a flaky one beside
a dead one), and the key never reaches the store or the logs."""

from __future__ import annotations

import logging
import socket
from collections import Counter

import pytest

from benchmarks.fixtures.fake_server import Fault
from rcp_jax.judging import JudgeTransportError, LiteLLMJudge, judge_windows_sync

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
    # the first tries go to the endpoint with the fewest tries in flight: both get some
    assert bad.status_counts[500] > 0, "no call went to the second endpoint"
    assert set(bad.status_counts) == {500} and good.status_counts == Counter({200: len(windows)})
    stats = {s["api_base"]: s for s in judge.endpoint_stats()}
    assert stats[good.url] == {"api_base": good.url, "answered": len(windows), "failed": 0, "timeouts": 0}
    assert stats[bad.url] == {"api_base": bad.url, "answered": 0, "failed": bad.status_counts[500], "timeouts": 0}
    # a failed try goes at once to the endpoint that has not failed: one failure per window at most
    assert bad.status_counts[500] <= len(windows)
    assert judge.ledger.transport_retries == bad.status_counts[500] and judge.ledger.failed_calls == 0
    # the failing endpoint is benched after FAILS_TO_BENCH failures in a row
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
    assert "model group" not in message.lower() and "fallback" not in message.lower()  # litellm's routing notes
    tries = {s.url: s.status_counts[503] for s in down}
    assert sum(tries.values()) == 4 and min(tries.values()) >= 1  # the retry went to the other server
    for url, n in tries.items():
        assert f"{url} 0 answered, {n} failed" in message


def dead_url() -> str:
    """An endpoint URL on a port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_a_dead_endpoint_beside_a_flaky_one_is_benched_and_the_run_finishes(tmp_path, dataset, windows, served):
    """One server refuses connections, the other answers 503 to every second request: the dead one is benched
    (its bench doubling while it keeps failing), gets a small share of the tries, and its failures do not use up
    the windows' retries."""
    queries, documents, _ = dataset
    flaky = served(faults=lambda ctx: Fault(status=503) if ctx.index % 2 == 0 else None)
    dead = dead_url()
    judge = LiteLLMJudge(MODEL, endpoints=[dead, flaky.url], api_key=FAKE_KEY, backoff_base=0.001, backoff_max=0.01,
                         max_transport_retries=12, endpoint_bench_s=0.05, endpoint_bench_max_s=1.0)
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries,
                             concurrency=4)
    assert len(out) == len(windows) and all(j.valid for j in out)
    stats = {s["api_base"]: s for s in judge.endpoint_stats()}
    assert stats[dead]["answered"] == 0 and stats[dead]["failed"] >= 1  # it was tried, and probed again later
    assert stats[flaky.url] == {"api_base": flaky.url, "answered": len(windows),
                                "failed": flaky.status_counts[503], "timeouts": 0}
    tries = sum(s["answered"] + s["failed"] for s in stats.values())
    assert stats[dead]["failed"] / tries < 0.15, stats
    assert judge.ledger.failed_calls == 0 and judge.ledger.transport_retries == tries - len(windows)


def test_a_dead_endpoint_is_not_charged_to_the_retries_while_another_answers(tmp_path, dataset, windows, served):
    """With no retries allowed, a healthy server beside a dead one still completes every window: the dead
    endpoint's failed tries are free while the other answers, and the next try goes to the live one (before, the
    first refused try ended the run)."""
    queries, documents, _ = dataset
    good = served()
    dead = dead_url()
    judge = LiteLLMJudge(MODEL, endpoints=[good.url, dead], api_key=FAKE_KEY, max_transport_retries=0,
                         endpoint_bench_s=0.01, endpoint_bench_max_s=0.02)
    # one call at a time: the first goes to the live server (fewest tries), the second to the dead one
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries,
                             concurrency=1)
    assert len(out) == len(windows) and all(j.valid for j in out)
    stats = {s["api_base"]: s for s in judge.endpoint_stats()}
    assert stats[good.url]["answered"] == len(windows) and stats[dead]["failed"] >= 1
    assert judge.ledger.transport_retries == stats[dead]["failed"] and judge.ledger.failed_calls == 0

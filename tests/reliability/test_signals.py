"""SIGTERM stops ``rcp-jax judge`` like Ctrl-C, and neither leaves a coroutine behind.

Judging goes through litellm's real HTTP path to the fake OpenAI-compatible server, slowed down so the
signal lands while calls are in flight. ``litellm.acompletion`` runs ``litellm.completion`` in a worker
thread that returns the coroutine of the HTTP call; a cancellation landing in that step used to leave the
coroutine un-awaited ("RuntimeWarning: coroutine 'OpenAIChatCompletion.acompletion' was never awaited").
The driver runs with every RuntimeWarning turned into an error, and exits 70 if such an error could only be
reported as "Exception ignored" (the way a never-awaited coroutine is reported).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from rcp_jax.judging import read_judgements


def records(store: Path):
    return read_judgements(store, "tournament") + read_judgements(store, "rubric")


def stored_lines(store: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in store.glob("*.jsonl")) if store.exists() else 0


def judge_spec(collection, tag: str, *, latency: float, strict: bool) -> dict:
    rows = str(collection["rows"])
    argv = ["judge", "--rows", rows, "--name", "reliability", "--store", "store", "--quiet",
            "--model", "openai/fake-judge", "--api-base", "{FAKE_URL}", "--concurrency", "4"]
    return {"tag": tag, "commands": [argv], "fake_server": {"rows": rows, "api_key": None, "latency": latency},
            "strict_warnings": strict}


ENV = {"OPENAI_API_KEY": "sk-fake-key-for-the-local-server"}


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "resume"), [(signal.SIGINT, False), (signal.SIGTERM, True)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_judging_over_http_stores_answers_and_leaves_no_coroutine(driver, collection, tmp_path, signum,
                                                                               resume):
    """Ctrl-C's resume over the simulated judge is test_interrupt's; here the resume follows SIGTERM only."""
    store = tmp_path / "store"
    proc = driver.start(tmp_path, judge_spec(collection, "signalled", latency=0.1, strict=True), env=ENV)
    deadline = time.monotonic() + 300  # a guard against a hung process, not a timing assertion
    while stored_lines(store) < 12:
        assert proc.poll() is None, f"judge ended before the signal: {proc.communicate()}"
        assert time.monotonic() < deadline, "judge made no progress"
        time.sleep(0.02)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == 128 + signum, err[-3000:]  # 130 for Ctrl-C, 143 for SIGTERM
    assert "interrupted" in err and "run the same command again to resume" in err
    assert "Traceback" not in err
    assert "never awaited" not in err and "UNRAISABLE" not in err
    assert all(p.read_bytes().endswith(b"\n") for p in store.glob("*.jsonl"))  # whole lines only
    before = records(store)
    valid_before = {r.record_id for r in before if r.valid}
    assert valid_before, "answers received before the signal are stored"
    if not resume:
        return

    resumed = driver.run(tmp_path, judge_spec(collection, "resumed", latency=0.0, strict=False), env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-3000:]  # the lock was released
    after = records(store)
    assert after[: len(before)] == before  # nothing stored was lost or rewritten
    valid = Counter(r.record_id for r in after if r.valid)
    assert set(valid.values()) == {1}  # no window answered twice
    assert not {r.record_id for r in after[len(before):]} & valid_before  # windows answered before: not asked again

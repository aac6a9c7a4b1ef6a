"""Independent calls side by side (:func:`rcp_jax.encoding.threads.run_concurrently`): results in order, the
calls really run at the same time, every call has finished when it returns or raises, no thread is left."""

from __future__ import annotations

import threading

import pytest

from rcp_jax.encoding.threads import run_concurrently


def test_results_come_in_the_order_of_the_calls():
    assert run_concurrently() == []
    assert run_concurrently(lambda: 1) == [1]
    assert run_concurrently(lambda: "a", lambda: "b", lambda: "c") == ["a", "b", "c"]


def test_the_first_call_runs_here_and_the_others_at_the_same_time():
    here = threading.get_ident()
    met = threading.Barrier(3, timeout=10)  # each call waits for the other two: only concurrent calls pass

    def call():
        met.wait()
        return threading.get_ident()

    first, second, third = run_concurrently(call, call, call)
    assert first == here and len({first, second, third}) == 3


@pytest.mark.parametrize("failing", [0, 1])
def test_an_error_is_raised_after_every_call_has_finished(failing):
    finished = []
    release = threading.Event()

    def slow():
        assert release.wait(10)
        finished.append("slow")
        return "slow"

    def fail():
        release.set()
        raise ValueError("bad table")

    calls = [fail, slow] if failing == 0 else [slow, fail]
    before = threading.active_count()
    with pytest.raises(ValueError, match="bad table"):
        run_concurrently(*calls)
    assert finished == ["slow"]  # the other call ran to its end before the error came back
    assert threading.active_count() == before  # and its thread is gone

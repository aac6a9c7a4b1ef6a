"""Independent calls side by side (:func:`rcp_jax.encoding.threads.run_concurrently`): results in order, the
calls really run at the same time but never more than ``workers`` at once, an error comes back once the
running calls have finished, and no thread is left behind."""

from __future__ import annotations

import threading

import pytest

from rcp_jax.encoding.threads import run_concurrently


def test_results_come_in_the_order_of_the_calls():
    assert run_concurrently() == []
    assert run_concurrently(lambda: 1) == [1]
    assert run_concurrently(*(lambda i=i: i * i for i in range(7))) == [i * i for i in range(7)]
    assert run_concurrently(lambda: "a", lambda: "b", workers=1) == ["a", "b"]


def test_calls_run_at_the_same_time():
    met = threading.Barrier(3, timeout=10)  # each call waits for the other two: only concurrent calls pass

    def call():
        met.wait()
        return threading.get_ident()

    assert len(set(run_concurrently(call, call, call, workers=3))) == 3


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_no_more_than_workers_calls_run_at_once(workers):
    lock, running, most = threading.Lock(), [0], [0]
    gate = threading.Event()

    def call():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            if running[0] == workers:
                gate.set()
        assert gate.wait(10)  # the first calls wait until `workers` of them run
        with lock:
            running[0] -= 1

    run_concurrently(*(call for _ in range(8)), workers=workers)
    assert most[0] == workers


@pytest.mark.parametrize("failing", [0, 1])
def test_an_error_comes_back_after_the_running_calls_finished(failing):
    finished, started, release = [], threading.Event(), threading.Event()

    def slow():
        started.set()
        assert release.wait(10)
        finished.append("slow")

    def fail():
        assert started.wait(10)
        release.set()
        raise ValueError("bad table")

    calls = [fail, slow] if failing == 0 else [slow, fail]
    before = threading.active_count()
    with pytest.raises(ValueError, match="bad table"):
        run_concurrently(*calls)
    assert finished == ["slow"]  # the other call ran to its end before the error came back
    assert threading.active_count() == before  # and the pool's threads are gone
    started.set()
    with pytest.raises(ValueError, match="bad table"):  # one worker: the calls after the error never run
        run_concurrently(fail, slow, workers=1)
    assert finished == ["slow"]

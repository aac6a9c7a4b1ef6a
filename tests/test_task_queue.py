"""The work queue the table encodings share between the calling thread and pool workers
(:class:`rcp_jax.data.task_queue.TaskQueue`): every task runs once, results and errors reach whoever asks,
a task may wait for an earlier one, and a closed or failed queue lets its helpers go."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, ThreadPoolExecutor

import pytest

from rcp_jax.data.task_queue import TaskQueue


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(2, thread_name_prefix="test-queue") as executor:
        yield executor


def _counting(calls: list, value):
    def task():
        calls.append((value, threading.current_thread().name))
        return value * value

    return task


@pytest.mark.parametrize("helpers", [0, 1, 2])
def test_every_task_runs_once_and_gives_its_result(pool, helpers):
    calls = []
    with TaskQueue(pool, helpers) as queue:
        tasks = [queue.add(_counting(calls, v)) for v in range(50)]
        assert [queue.result(t) for t in tasks] == [v * v for v in range(50)]
        queue.finish()
    assert sorted(v for v, _ in calls) == list(range(50))
    if helpers == 0:  # nobody else: the caller ran them all
        assert {name for _, name in calls} == {threading.current_thread().name}


def test_asking_for_an_unclaimed_task_runs_it_here(pool):
    gate, started = threading.Event(), threading.Event()
    calls = []

    def blocking():
        started.set()
        gate.wait()

    with TaskQueue(pool, 1) as queue:
        queue.add(blocking)  # the helper claims this one and blocks
        later = queue.add(_counting(calls, 3))
        assert started.wait(10)
        assert queue.result(later) == 9  # not waiting for the blocked helper
        assert calls == [(3, threading.current_thread().name)]
        gate.set()
        queue.finish()


def test_a_task_may_wait_for_an_earlier_one(pool):
    for helpers in (0, 1, 2):
        with TaskQueue(pool, helpers) as queue:
            first = queue.add(lambda: 5)
            second = queue.add(lambda: queue.result(first) + 1)
            third = queue.add(lambda: queue.result(second) * 2)
            assert queue.result(third) == 12
            queue.finish()


def test_an_error_reaches_whoever_asks_and_the_other_tasks_still_run(pool):
    calls = []

    def broken():
        raise ValueError("bad chunk")

    with TaskQueue(pool, 1) as queue:
        bad = queue.add(broken)
        good = [queue.add(_counting(calls, v)) for v in range(5)]
        queue.finish()
        with pytest.raises(ValueError, match="bad chunk"):
            queue.result(bad)
        assert [queue.result(t) for t in good] == [0, 1, 4, 9, 16]


def test_leaving_on_an_error_drops_unclaimed_tasks_and_frees_the_helpers():
    with ThreadPoolExecutor(1) as executor:
        calls = []
        gate, started = threading.Event(), threading.Event()

        def blocking():
            started.set()
            gate.wait()

        with pytest.raises(RuntimeError, match="stop"):
            with TaskQueue(executor, 1) as queue:
                queue.add(blocking)
                assert started.wait(10)
                dropped = [queue.add(_counting(calls, v)) for v in range(20)]
                raise RuntimeError("stop")
        gate.set()
        with pytest.raises(CancelledError):
            queue.result(dropped[-1])
        # the single worker is free again: a new job runs (a helper still waiting would block it forever)
        assert executor.submit(lambda: "free").result(timeout=10) == "free"
        assert calls == []  # the helper was held by the first task: the others were dropped, none ran


def test_a_closed_queue_refuses_new_tasks_and_its_helpers_leave():
    with ThreadPoolExecutor(2) as executor:
        queue = TaskQueue(executor, 2)
        queue.add(lambda: 1)
        queue.close()
        with pytest.raises(RuntimeError, match="closed"):
            queue.add(lambda: 2)
        assert queue.result(0) == 1
        queue.finish()
        assert executor.submit(lambda: "free").result(timeout=10) == "free"


def test_one_thread_per_core_the_process_may_use(monkeypatch):
    import os

    from rcp_jax.data import table_checks

    for cores, helpers in ((1, 0), (2, 1), (3, 2), (16, 2)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert table_checks.id_helpers() == helpers
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # no affinity call: the machine's count
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert table_checks.id_helpers() == 2

"""Work shared by the calling thread and a few pool workers, in order, each claiming the next task.

The table encodings split their work into tasks (hash one chunk of ids, number one chunk of documents) that
release the GIL for most of their time. A :class:`TaskQueue` runs them on the calling thread and on
``helpers`` workers of a thread pool, so that on 2 cores exactly two threads work (a pool of two beside the
calling thread would run three and lose ~8% of the CPU to switching), and the caller never waits for work
nobody has started: asking for the result of an unclaimed task runs it on the spot.

Rules that keep it free of deadlocks:

* A task may ask for the result of an *earlier* task only (it is claimed, so running or done, or it is run
  right there).
* The owner closes the queue (``with TaskQueue(...) as queue``) on every path, errors included; the helpers
  then leave once no task is left (on an error the unclaimed tasks are dropped).
* While the queue is open its helpers may hold every worker of the pool: the owner does not wait there for
  other jobs of that pool until it has called :meth:`TaskQueue.finish` (or closed the queue and its helpers
  are done).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Executor


class TaskQueue:
    """Tasks run in the order they were added, each by whichever thread claims it first.

    Args:
        pool: the executor that lends the helpers.
        helpers: pool workers that claim tasks beside the calling thread (0: the caller runs every task).
    """

    def __init__(self, pool: Executor, helpers: int):
        self._cv = threading.Condition()
        self._tasks: list[Callable[[], object]] = []
        self._results: list[object] = []
        self._errors: list[BaseException | None] = []
        self._done: list[threading.Event] = []
        self._next = 0
        self._closed = False
        self._helpers = [pool.submit(self._help) for _ in range(helpers)]

    def __enter__(self) -> TaskQueue:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(cancel=exc_type is not None)

    def add(self, task: Callable[[], object]) -> int:
        """Queue ``task`` (no arguments) and return its number."""
        with self._cv:
            if self._closed:
                raise RuntimeError("the task queue is closed")
            self._tasks.append(task)
            self._results.append(None)
            self._errors.append(None)
            self._done.append(threading.Event())
            self._cv.notify()
            return len(self._tasks) - 1

    def _claim(self, wait: bool) -> int | None:
        """The number of the next unclaimed task, now claimed; None when none is left (``wait``: until one
        is added or the queue is closed)."""
        with self._cv:
            while self._next >= len(self._tasks):
                if self._closed or not wait:
                    return None
                self._cv.wait()
            k = self._next
            self._next += 1
            return k

    def _run(self, k: int) -> None:
        try:
            self._results[k] = self._tasks[k]()
        except BaseException as error:  # kept for whoever asks for the result
            self._errors[k] = error
        finally:
            self._tasks[k] = None  # let the task's closure go
            self._done[k].set()

    def _help(self) -> None:
        while (k := self._claim(wait=True)) is not None:
            self._run(k)

    def run_next(self) -> bool:
        """Run the next unclaimed task on this thread; False when none is left."""
        k = self._claim(wait=False)
        if k is None:
            return False
        self._run(k)
        return True

    def done(self, k: int) -> bool:
        """Whether task ``k`` has finished."""
        return self._done[k].is_set()

    def result(self, k: int) -> object:
        """The result of task ``k`` (its error is raised here): run on this thread if nobody has claimed it
        (with the tasks before it that are still unclaimed), else waited for."""
        while not self._done[k].is_set():
            with self._cv:
                mine = self._next <= k
            if mine:
                self.run_next()
            else:
                self._done[k].wait()
        if self._errors[k] is not None:
            raise self._errors[k]
        return self._results[k]

    def close(self, cancel: bool = False) -> None:
        """No more tasks: the helpers leave once the queued ones are claimed (they are still run; with
        ``cancel`` the unclaimed ones are dropped, and asking for their result raises ``CancelledError``)."""
        with self._cv:
            self._closed = True
            if cancel:
                for k in range(self._next, len(self._tasks)):
                    self._tasks[k] = None
                    self._errors[k] = CancelledError(f"task {k} was cancelled")
                    self._done[k].set()
                self._next = len(self._tasks)
            self._cv.notify_all()

    def finish(self) -> None:
        """Close, run what is left here too, and wait for the helpers."""
        self.close()
        while self.run_next():
            pass
        for helper in self._helpers:
            helper.result()

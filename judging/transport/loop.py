"""Run the judging layer's coroutines from synchronous code, stoppable by Ctrl-C and by SIGTERM.

:func:`run` is :func:`asyncio.run` with two differences:

1. **No coroutine is left un-awaited when a run is cancelled.** ``litellm.acompletion`` runs the
   synchronous ``litellm.completion`` in the loop's default executor; that call *returns the coroutine* of
   the real HTTP request, which ``acompletion`` then awaits. When Ctrl-C cancels the run while a worker
   thread is inside ``completion``, the await is cancelled, the thread still finishes and hands back its
   coroutine, and nobody ever awaits or closes it: Python then printed
   ``RuntimeWarning: coroutine 'OpenAIChatCompletion.acompletion' was never awaited`` on the way out. The
   loop :func:`run` uses closes a coroutine that an executor job returns after its caller was cancelled
   (:meth:`_Loop.run_in_executor`), whichever of the two finishes first.
2. **SIGTERM stops a run the way Ctrl-C does** when the process asked for it, by installing
   :func:`interrupt_handler` for SIGTERM (the ``rcp-jax`` command line does): the first SIGINT or SIGTERM
   cancels the run, so every answer received so far is written to the store and the caller gets
   :class:`Interrupted` (a ``KeyboardInterrupt``) carrying the signal's number; a second signal raises it at
   once. SIGINT is handled only while its handler is Python's default (a shell's background job ignores
   it, and keeps ignoring it); SIGTERM only while its handler is :func:`interrupt_handler`, so a library
   caller's SIGTERM keeps whatever meaning the caller gave it.

Example::

    import signal
    from rcp_jax.judging.transport.loop import interrupt_handler, run

    signal.signal(signal.SIGTERM, interrupt_handler)   # SIGTERM now stops runs like Ctrl-C
    try:
        judgements = run(judge_windows(windows, judge=judge, store="store/", documents=docs, queries=qs))
    except KeyboardInterrupt as err:                   # rcp_jax.judging.transport.loop.Interrupted: err.signum says which
        ...
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal (SIGINT: Ctrl-C, or SIGTERM); ``signum`` is the signal's number.

    It is a ``KeyboardInterrupt``, so code that handles Ctrl-C handles SIGTERM the same way.
    """

    def __init__(self, message: str = "interrupted", signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = int(signum)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.signum))


def interrupt_handler(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
    """A signal handler that stops the program like Ctrl-C: raises :class:`Interrupted` (install it for
    SIGTERM with ``signal.signal``; inside :func:`run` it cancels the run instead)."""
    raise Interrupted(f"interrupted ({signal.Signals(signum).name})", signum)


class _Loop(asyncio.SelectorEventLoop):
    """The event loop of :func:`run`: an executor job whose caller was cancelled has its coroutine closed.

    Every coroutine an executor job hands out is also remembered (``handed_out``): when the task awaiting
    the job is cancelled after the job's result was delivered but before the task resumed to await it,
    neither side of :class:`_OrphanGuard` can tell, so :func:`run` closes, once the loop is closed, each
    remembered coroutine that never started.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed_out: list[Coroutine[Any, Any, Any]] = []

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        if len(self.handed_out) >= 1024:  # keep the list short on long runs: finished ones need no sweep
            self.handed_out[:] = [c for c in self.handed_out if inspect.getcoroutinestate(c) != inspect.CORO_CLOSED]
        guard = _OrphanGuard(func, args, self.handed_out)
        future = super().run_in_executor(executor, guard)
        future.add_done_callback(guard.caller_done)
        return future


class _OrphanGuard:
    """Calls ``func(*args)`` in a worker thread; a coroutine it returns is closed if the awaiting future
    was cancelled, either after the job finished (:meth:`caller_done`) or before (:meth:`__call__`)."""

    def __init__(self, func: Callable[..., Any], args: tuple[Any, ...],
                 handed_out: list[Coroutine[Any, Any, Any]] | None = None) -> None:
        self._func, self._args = func, args
        self._handed_out = handed_out
        self._lock = threading.Lock()
        self._cancelled = False
        self._result: Coroutine[Any, Any, Any] | None = None

    def __call__(self) -> Any:
        result = self._func(*self._args)
        if asyncio.iscoroutine(result):
            with self._lock:
                if not self._cancelled:
                    self._result = result
                    if self._handed_out is not None:
                        self._handed_out.append(result)  # list.append is atomic across threads
                    return result
            result.close()  # the caller is gone: nobody will await it
            return None
        return result

    def caller_done(self, future: asyncio.Future[Any]) -> None:
        if not future.cancelled():
            with self._lock:
                self._result = None  # delivered to the caller, who awaits it
            return
        with self._lock:
            self._cancelled = True
            orphan, self._result = self._result, None
        if orphan is not None:
            orphan.close()


class _Signals:
    """While a run is on: the first SIGINT / SIGTERM cancels its task, a second raises :class:`Interrupted`."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        wanted = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: interrupt_handler}
        for signum, expected in wanted.items():
            current = signal.getsignal(signum)
            if current is expected:
                try:
                    signal.signal(signum, self._on_signal)
                except ValueError:  # pragma: no cover - an interpreter without signal support
                    continue
                self._previous[signum] = current

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, handler)
        self._previous = {}

    def _on_signal(self, signum: int, frame: object) -> None:  # noqa: ARG002
        first = self.signum is None
        if first:
            self.signum = signum
        task = self.task
        if not first or task is None or task.done():
            raise Interrupted(f"interrupted ({signal.Signals(signum).name})", signum)
        task.cancel()
        if self.loop is not None:
            self.loop.call_soon_threadsafe(lambda: None)  # wake a selector waiting with a long timeout


def run(coro: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``coro`` to completion on a fresh event loop and return its result (see the module docstring).

    Raises :class:`Interrupted` (a ``KeyboardInterrupt``) when SIGINT or SIGTERM stopped it; the coroutine
    has then been cancelled and has run its ``finally`` blocks (so a judgement store has written every
    answer received). Must be called from synchronous code (no running event loop).
    """
    signals = _Signals()

    async def main() -> T:
        signals.task = asyncio.current_task()
        return await coro

    signals.install()
    loop: _Loop | None = None
    try:
        with asyncio.Runner(debug=debug, loop_factory=_Loop) as runner:
            signals.loop = loop = runner.get_loop()
            task_coro = main()
            try:
                return runner.run(task_coro)
            except asyncio.CancelledError:
                if signals.signum is not None:
                    raise Interrupted(f"interrupted ({signal.Signals(signals.signum).name})", signals.signum) from None
                raise
    finally:
        signals.restore()
        if asyncio.iscoroutine(coro) and coro.cr_frame is not None and not coro.cr_running:
            coro.close()  # a signal before the run started: nothing awaited it
        if loop is not None:  # the runner has closed the loop and joined its executor's threads
            for orphan in loop.handed_out:
                if inspect.getcoroutinestate(orphan) == inspect.CORO_CREATED:
                    orphan.close()  # handed out, then its awaiting task was cancelled before it started
            loop.handed_out.clear()

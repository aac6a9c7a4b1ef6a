"""Spread a judge's calls over worker processes, for when one process's CPU binds the call rate.

litellm spends several milliseconds of CPU on every call (request building, cost and logging
bookkeeping, HTTP). At 64 calls in flight and a short per-call latency that is more than one core can
give one event loop. :class:`ProcessJudge` runs only :meth:`BaseJudge.complete` (the call itself, with
its retries and backoff) in ``processes`` worker processes; everything else stays in the calling
process: rendering, parsing, the family, and the store, whose single writer lock is never shared.
Each answer is written once, by the caller, exactly as without workers, so kill / resume behave the
same: answers not yet received when the caller dies are asked again by the next run.

Usage (the simplest: :func:`rcp_jax.judging.judge_windows` starts and stops the workers itself)::

    await judge_windows(windows, judge=LiteLLMJudge(...), store=..., documents=..., queries=...,
                        concurrency=64, processes=4)

or explicitly, to keep the workers across several runs::

    with ProcessJudge(LiteLLMJudge(...), processes=4) as judge:
        await judge_windows(windows, judge=judge, ...)

Notes
-----
- Workers are started with the ``forkserver`` method: a fresh single-threaded server process imports
  litellm once and forks each worker from itself (never a ``fork`` of the caller, which runs
  threads). The first start pays one litellm import (seconds) when the judge uses litellm; later starts
  are quick. As with any
  non-``fork`` start method, a script using this needs the usual ``if __name__ == "__main__":`` guard.
- The judge and the caller's environment (as :func:`os.environ` is when the workers start, so a
  provider key in e.g. ``OPENAI_API_KEY`` reaches them) are pickled to each worker through a pipe,
  keys included (in memory only; never written or logged). The judge's :attr:`ledger` gets the
  workers' calls added as their answers arrive.
- Worker processes ignore Ctrl-C (the caller handles it) and exit when the caller closes them or
  dies. Log lines of the workers (e.g. retry warnings) go to their stderr with Python's default
  logging setup, not through the caller's logging configuration.
- Errors the inner judge raises (:class:`JudgeAuthError`, :class:`JudgeTransportError`, ...) are
  raised again, same type and message, in the caller.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from rcp_jax.judging.errors import JudgeError, JudgeInputError
from rcp_jax.judging.judge import BaseJudge, Completion, JudgeRequest, Ledger
from rcp_jax.judging.prompts.render import RenderedWindow
from rcp_jax.judging.store.records import JudgeFamily, Window

log = logging.getLogger("rcp_jax.judging.transport.procs")

_STOP = None  # the message asking a worker to finish


# -- the worker process ---------------------------------------------------------------------------------


def _worker_main(judge: BaseJudge, environ: dict[str, str], requests: Any, replies: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    # the caller's environment now (e.g. a provider key set after the fork server started)
    os.environ.clear()
    os.environ.update(environ)
    try:
        judge.prepare()
    except BaseException as exc:  # noqa: BLE001 - reported to the caller, which raises it
        replies.send(("failed", _picklable(exc)))
        return
    replies.send(("ready", None))
    asyncio.run(_serve(judge, requests, replies))


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any pickling failure
        return JudgeError(f"judge worker: a {type(exc).__name__} was raised that cannot be passed back")
    return exc


async def _serve(judge: BaseJudge, requests: Any, replies: Any) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def read() -> None:  # a thread, so the caller's sends never wait on this event loop
        try:
            while True:
                msg = requests.recv()
                loop.call_soon_threadsafe(inbox.put_nowait, msg)
                if msg is _STOP:
                    return
        except (EOFError, OSError):  # the caller is gone
            loop.call_soon_threadsafe(inbox.put_nowait, _STOP)

    threading.Thread(target=read, name="judge-worker-reader", daemon=True).start()

    def reply(call_id: int, ok: bool, payload: Any) -> None:
        ledger = judge.ledger.as_dict()
        try:
            replies.send((call_id, ok, payload, ledger))
        except (BrokenPipeError, OSError):
            pass  # the caller is gone; nothing to tell
        except Exception as exc:  # noqa: BLE001 - an unpicklable answer becomes an error
            replies.send((call_id, False, JudgeError(f"judge worker: answer could not be passed back ({exc!r})"),
                          ledger))

    async def one(call_id: int, request: JudgeRequest) -> None:
        try:
            completion = await judge.complete(request)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            reply(call_id, False, _picklable(exc))
        else:
            reply(call_id, True, completion)

    tasks: set[asyncio.Task[None]] = set()
    while (msg := await inbox.get()) is not _STOP:
        task = asyncio.create_task(one(*msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    try:
        await judge.aclose()
    except Exception:  # noqa: BLE001, S110 - closing connections on the way out; nothing to report to
        pass


# -- the caller's side ----------------------------------------------------------------------------------


class _Worker:
    def __init__(self, index: int, process: Any, requests: Any, replies: Any) -> None:
        self.index = index
        self.process = process
        self.requests = requests
        self.replies = replies
        self.pending: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
        self.alive = True
        self.reader: threading.Thread | None = None
        self.send_lock = threading.Lock()

    @property
    def label(self) -> str:
        return f"judge worker process {self.index} (pid {self.process.pid})"


class ProcessJudge(BaseJudge):
    """``judge`` with its calls run in ``processes`` worker processes; see the module docstring.

    It has the inner judge's model, prompts, family and ledger, so records are identical (same
    record ids, same family hash) whether or not the calls ran in workers.

    Parameters
    ----------
    judge : the judge whose :meth:`complete` the workers run (picklable: :class:`LiteLLMJudge`,
        :class:`SimulatedJudge`, ...).
    processes : worker processes (>= 1).
    """

    def __init__(self, judge: BaseJudge, processes: int) -> None:
        if isinstance(judge, ProcessJudge):
            raise JudgeInputError("judge is already a ProcessJudge")
        if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
            raise JudgeInputError(f"processes must be an integer >= 1, got {processes!r}")
        # no BaseJudge.__init__: every shared attribute is the inner judge's own object
        self.inner = judge
        self.processes = processes
        self.model = judge.model
        self.prompts = judge.prompts
        self.max_window_chars = judge.max_window_chars
        self.ledger = judge.ledger  # the workers' calls are added to it as their replies arrive
        self._workers: list[_Worker] = []
        self._ids = itertools.count()
        self._worker_ids = itertools.count()
        self._ledgers: dict[int, dict[str, Any]] = {}  # latest ledger totals reported by each worker
        self._ledger_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ProcessJudge({self.inner!r}, processes={self.processes})"

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a ProcessJudge cannot be pickled; pickle its inner judge")

    # -- what stays in this process: the inner judge's own answers ---------------------------------------

    def decoding(self) -> dict[str, Any]:
        return self.inner.decoding()

    def family(self, stage: str) -> JudgeFamily:
        return self.inner.family(stage)

    def render(self, window: Window, query_text: str, doc_texts: Sequence[str]) -> RenderedWindow:
        return self.inner.render(window, query_text, doc_texts)

    def count_tokens(self, messages: Any) -> tuple[int, str]:
        return self.inner.count_tokens(messages)

    def price(self, prompt_tokens: int, completion_tokens: int, *args: Any, **kwargs: Any) -> float | None:
        return self.inner.price(prompt_tokens, completion_tokens, *args, **kwargs)

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return bool(self._workers)

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers (empty before :meth:`start` and after :meth:`close`)."""
        return [w.process.pid for w in self._workers]

    def start(self) -> ProcessJudge:
        """Start the workers and wait until each has loaded its judge (blocking; idempotent)."""
        if self._workers:
            return self
        ctx = multiprocessing.get_context("forkserver")
        self.inner.prepare()  # resolve lazily computed settings once, so every worker gets the same
        # The fork server imports litellm once for all workers, when the judge uses it (prepare() has imported
        # it here then): a judge without it (SimulatedJudge) spares each new server a ~3 s import. Takes effect
        # when the server first starts; workers of a later litellm judge import it themselves if it did not.
        ctx.set_forkserver_preload(["rcp_jax.judging", "litellm"] if "litellm" in sys.modules else ["rcp_jax.judging"])
        workers = []
        try:
            for i in range(self.processes):
                req_r, req_w = ctx.Pipe(duplex=False)
                rep_r, rep_w = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_worker_main, args=(self.inner, dict(os.environ), req_r, rep_w),
                                   daemon=True, name=f"judge-worker-{i}")
                proc.start()
                req_r.close()  # the worker holds these ends now; closing ours lets each side see EOF
                rep_w.close()
                workers.append(_Worker(next(self._worker_ids), proc, req_w, rep_r))
            for w in workers:
                try:
                    kind, exc = w.replies.recv()
                except EOFError:
                    raise JudgeError(f"{w.label} exited while starting (exit code {w.process.exitcode})") from None
                if kind != "ready":
                    raise exc
        except BaseException:
            self._stop(workers)
            raise
        for w in workers:
            w.reader = threading.Thread(target=self._read, args=(w,), name=f"judge-pool-reader-{w.index}",
                                        daemon=True)
            w.reader.start()
        self._workers = workers
        return self

    def close(self) -> None:
        """Ask the workers to finish (calls still open are dropped) and wait for them. Idempotent."""
        workers, self._workers = self._workers, []
        self._stop(workers)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> ProcessJudge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ProcessJudge:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _stop(self, workers: list[_Worker]) -> None:
        for w in workers:
            w.alive = False
            try:
                with w.send_lock:
                    w.requests.send(_STOP)
            except (OSError, ValueError):
                pass
        for w in workers:
            w.process.join(timeout=10)
            if w.process.is_alive():
                log.warning("%s did not stop; terminating it", w.label)
                w.process.terminate()
                w.process.join(timeout=5)
            w.requests.close()
            if w.reader is not None:
                w.reader.join(timeout=5)
            w.replies.close()
            self._fail_pending(w, f"{w.label} was closed while this call was open")

    # -- calls -------------------------------------------------------------------------------------------

    def _read(self, w: _Worker) -> None:
        """Reader thread of one worker: hands each reply to the event loop awaiting it."""
        while True:
            try:
                call_id, ok, payload, ledger = w.replies.recv()
            except (EOFError, OSError):
                break
            self._add_ledger(w, ledger)
            fut = w.pending.pop(call_id, None)
            if fut is not None:
                self._resolve(fut, (ok, payload))
        if w.alive:  # not closed by us: the worker died
            w.alive = False
            w.process.join(timeout=5)
            log.error("%s exited unexpectedly (exit code %s)", w.label, w.process.exitcode)
            self._fail_pending(w, f"{w.label} exited unexpectedly (exit code {w.process.exitcode}) while "
                                  "this call was open; re-run: stored answers are kept")

    def _add_ledger(self, w: _Worker, totals: dict[str, Any]) -> None:
        """Add to the inner judge's ledger what ``w``'s ledger gained since its previous reply."""
        with self._ledger_lock:
            last = self._ledgers.get(w.index, {})
            for f in fields(Ledger):
                gained = totals.get(f.name, 0) - last.get(f.name, 0)
                if gained:
                    setattr(self.ledger, f.name, getattr(self.ledger, f.name) + gained)
            self._ledgers[w.index] = totals

    @staticmethod
    def _resolve(fut: asyncio.Future[tuple[bool, Any]], value: tuple[bool, Any]) -> None:
        def settle() -> None:
            if not fut.done():
                fut.set_result(value)

        try:
            fut.get_loop().call_soon_threadsafe(settle)
        except RuntimeError:  # that event loop is closed: nobody awaits this call any more
            pass

    def _fail_pending(self, w: _Worker, message: str) -> None:
        while True:
            try:
                _, fut = w.pending.popitem()
            except KeyError:  # empty (the event loop may pop entries concurrently)
                return
            self._resolve(fut, (False, JudgeError(message)))

    async def complete(self, request: JudgeRequest) -> Completion:
        """Run ``request`` on the least busy worker. Workers not yet started are started first, which
        blocks the event loop while they load (call :meth:`start` beforehand to avoid that)."""
        if not self._workers:
            self.start()
        loop = asyncio.get_running_loop()
        while True:
            alive = [w for w in self._workers if w.alive]
            if not alive:
                raise JudgeError(f"every judge worker process of {self!r} has exited; see the log for why")
            w = min(alive, key=lambda x: len(x.pending))
            call_id = next(self._ids)
            fut: asyncio.Future[tuple[bool, Any]] = loop.create_future()
            w.pending[call_id] = fut
            try:
                with w.send_lock:
                    w.requests.send((call_id, request))
            except (OSError, ValueError):  # that worker is gone; its reader thread reports why
                w.pending.pop(call_id, None)
                w.alive = False
                continue
            try:
                ok, payload = await fut
            finally:
                w.pending.pop(call_id, None)
            if ok:
                return payload
            raise payload

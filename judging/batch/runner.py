"""Judge windows as batches: one request file per round, submitted once, polled, ingested, resumable at any moment.

:func:`judge_windows_batch` has :func:`rcp_jax.judging.judge_windows`'s semantics (windows already valid in the
store are not asked; an invalid answer is stored and its window asked again, with the online re-ask's seed,
temperature and repair note, up to ``max_attempts`` answers; the valid judgements come back), but asks each round
of windows as one batch through a :class:`rcp_jax.judging.batch.backends.BatchBackend`:

1. plan: the windows to ask, each with its attempt number; their request lines (``custom_id`` = record id, the
   body :meth:`rcp_jax.judging.LiteLLMJudge.request_body` gives, the same an online call sends) go to
   ``<store>/batch/<key>.requests.jsonl``;
2. journal ``intent`` (:mod:`rcp_jax.judging.batch.journal`), upload, journal ``uploaded``, create (metadata
   ``{"rcp_jax_key": key}``), journal ``created`` with the batch id, all before any waiting;
3. poll every ``poll_seconds`` until the batch is completed, failed, expired or cancelled (progress: status,
   counts, elapsed); ``wait_seconds`` caps the wait (:class:`rcp_jax.judging.batch.backends.BatchPending`);
4. download the output and error files next to the request file, journal ``ingesting``, store the answers
   (:func:`rcp_jax.judging.batch.ingest.ingest_results`), journal ``ingested``;
5. windows without a valid answer (invalid, or missing from a failed, expired, cancelled or partial batch) go into
   the next round's batch.

A run killed at any moment resumes from the journal before planning anything: a batch with an id is polled (never
submitted again) and ingested (what an interrupted ingest stored is not stored twice); an intent without an id is
looked up on the server by its key before anything is created.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rcp_jax.judging.batch.backends import (
    BatchBackend,
    BatchError,
    BatchPending,
    BatchStatus,
)
from rcp_jax.judging.batch.ingest import IngestReport, Planned, ingest_results
from rcp_jax.judging.batch.journal import BatchJournal, JournalBatch, batch_key
from rcp_jax.judging.batch.lines import request_line
from rcp_jax.judging.errors import JudgeInputError
from rcp_jax.judging.judge import BaseJudge, JudgeRequest
from rcp_jax.judging.lookup import PerQuery
from rcp_jax.judging.run import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_STOP_AFTER_INVALID,
    invalid_verdict,
    keyed_windows,
    last_invalid_answers,
    policy,
)
from rcp_jax.judging.store.jsonl import JudgementStore
from rcp_jax.judging.store.records import JudgeFamily, Judgement, Window
from rcp_jax.judging.transport.loop import run as run_interruptible

log = logging.getLogger("rcp_jax.judging.batch.runner")

#: Seconds between two polls of a batch in flight.
DEFAULT_POLL_SECONDS = 30.0
#: Batches in a row that answered nothing at all before the run stops (a provider failing every batch).
MAX_EMPTY_BATCHES = 3
#: The folder inside a store holding request and result files.
BATCH_FOLDER = "batch"


@dataclass(frozen=True)
class BatchProgress:
    """Where a :func:`judge_windows_batch` run stands (passed to ``progress`` after each poll and ingest).

    Attributes
    ----------
    phase : the phase name; ``round`` the batch's round within it (1, then re-asks).
    batch_id, status : the batch being waited for or ingested (``""`` between batches).
    total, completed, failed : the batch's request counts as reported.
    elapsed_s : seconds since the batch was created (as journaled).
    windows, cached : distinct windows of the call, and those valid in the store when it started.
    valid : windows with a valid answer now; ``calls`` answers stored by this call.
    """

    phase: str
    round: int
    batch_id: str
    status: str
    total: int
    completed: int
    failed: int
    elapsed_s: float
    windows: int
    cached: int
    valid: int
    calls: int


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _seconds_since(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    try:
        return max(0.0, (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds())
    except ValueError:
        return 0.0


def phase_name(windows: Iterable[Window]) -> str:
    """A file-name-safe phase name for ``windows``: their distinct phases, sorted and joined by ``+``."""
    return safe_name("+".join(sorted({w.phase for w in windows})) or "windows")


def safe_name(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_.+-]`` replaced by ``_`` (a file name part)."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text)


def batch_price(judge: BaseJudge) -> Callable[[int, int], float | None]:
    """USD of one batch answer: the judge's own per-token prices when set (a self-hosted model), else litellm's
    batch prices of the model (``input_cost_per_token_batches``), else the judge's online price (``None`` when
    unknown)."""
    if getattr(judge, "input_cost_per_token", None) is not None:
        return lambda pt, ct: judge.price(pt, ct)
    try:
        import litellm  # noqa: PLC0415 - lazy

        info = litellm.get_model_info(model=judge.model)
        inp, out = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
        if inp is not None and out is not None:
            return lambda pt, ct: pt * float(inp) + ct * float(out)
    except Exception:  # noqa: BLE001 - an unknown model: the judge's own price (or none)
        pass
    return lambda pt, ct: judge.price(pt, ct)


async def judge_windows_batch(
    windows: Iterable[Window],
    *,
    judge: BaseJudge,
    store: JudgementStore | str | Path,
    documents: Mapping[str, str] | Mapping[str, Mapping[str, str]],
    queries: Mapping[str, str],
    batches: BatchBackend,
    phase: str | None = None,
    max_attempts: int | None = None,
    stop_after_invalid: int | None = None,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    wait_seconds: float | None = None,
    progress: Callable[[BatchProgress], None] | None = None,
) -> list[Judgement]:
    """Judge ``windows`` with ``judge`` as batches through ``batches``; return the valid judgements (module docstring).

    Parameters
    ----------
    windows, judge, store, documents, queries : as for :func:`rcp_jax.judging.judge_windows`; ``judge`` must give
        request bodies (:meth:`rcp_jax.judging.LiteLLMJudge.request_body`).
    batches : the backend (:class:`rcp_jax.judging.batch.backends.ProviderBatches` or ``FileBatches``).
    phase : the name of this set of windows in the journal and in batch file names (``"round1"``); default: the
        windows' phases joined. Resuming needs the same name for the same windows.
    max_attempts : answers per window in this call (``None``: the judge's, else 3); a window whose request got no
        answer (a failed, expired or partial batch) is asked again without using up an attempt, but after
        :data:`MAX_EMPTY_BATCHES` batches in a row that answered nothing the run stops.
    stop_after_invalid : stop with :class:`rcp_jax.judging.JudgeVerdictError` when this call's first batch answers
        at least this many windows and all invalidly (0: never; ``None``: the judge's, else 20).
    poll_seconds : seconds between polls of a batch in flight.
    wait_seconds : longest wait for one batch in this call (``None``: no limit; 0: do not wait), after which
        :class:`rcp_jax.judging.batch.backends.BatchPending` says how to resume.
    progress : called with a :class:`BatchProgress` after each poll and each ingest.

    Returns
    -------
    One valid :class:`Judgement` per distinct window that has one, in the order the windows were given.

    Raises
    ------
    BatchPending : a batch is not finished within ``wait_seconds``; the same call again resumes it.
    BatchError : the backend failed (the message names the step); or batches keep answering nothing.
    JudgeVerdictError, JudgeInputError, StoreLockedError : as for :func:`rcp_jax.judging.judge_windows`.
    """
    if max_attempts is None:
        max_attempts = policy(judge, "max_attempts", DEFAULT_MAX_ATTEMPTS)
    if stop_after_invalid is None:
        stop_after_invalid = policy(judge, "stop_after_invalid", DEFAULT_STOP_AFTER_INVALID)
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise JudgeInputError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    if not (isinstance(poll_seconds, int | float) and poll_seconds >= 0):
        raise JudgeInputError(f"poll_seconds must be a number >= 0, got {poll_seconds!r}")
    if not callable(getattr(judge, "request_body", None)):
        raise JudgeInputError(f"judge {getattr(judge, 'model', judge)!r} cannot write batch requests: batch judging "
                              "needs a litellm judge (LiteLLMJudge), whose request bodies a batch carries")
    docs, families, keyed = keyed_windows(windows, judge=judge, documents=documents, queries=queries)
    phase = safe_name(phase) if phase else phase_name(list(keyed.values()))

    owned = not isinstance(store, JudgementStore)
    st = JudgementStore(store) if owned else store
    opened_here = not st.is_open
    st.open()
    journal = BatchJournal(st.folder).open()
    try:
        run = _BatchRun(judge=judge, store=st, journal=journal, backend=batches, keyed=keyed, families=families,
                        docs=docs, queries=queries, phase=phase, poll_seconds=float(poll_seconds),
                        wait_seconds=wait_seconds, progress=progress)
        await run.settle_journal()
        await run.rounds(max_attempts, stop_after_invalid)
        valid = {stage: st.valid(stage) for stage in families}
        return [valid[w.stage][rid] for rid, w in keyed.items() if rid in valid[w.stage]]
    finally:
        journal.close()
        if opened_here:
            st.close()


class _BatchRun:
    """One call's state: the windows, the journal, and what this call has asked and stored."""

    def __init__(self, *, judge: BaseJudge, store: JudgementStore, journal: BatchJournal, backend: BatchBackend,
                 keyed: dict[str, Window], families: dict[str, JudgeFamily], docs: PerQuery[Any],
                 queries: Mapping[str, str], phase: str, poll_seconds: float, wait_seconds: float | None,
                 progress: Callable[[BatchProgress], None] | None) -> None:
        self.judge, self.st, self.journal, self.backend = judge, store, journal, backend
        self.keyed, self.families, self.docs, self.queries = keyed, families, docs, queries
        self.phase, self.poll_seconds, self.wait_seconds, self.progress = phase, poll_seconds, wait_seconds, progress
        self.cached = sum(store.is_done(w.stage, rid) for rid, w in keyed.items())
        self.answers: dict[str, int] = {}  # record id -> answers stored by this call
        self.calls = 0
        self.empty_streak = 0
        self.first_report: IngestReport | None = None  # the first ingest of this call that stored answers
        self.verdict_checked = False
        self.created_at: dict[str, str] = {}  # key -> when its batch was created (journal)
        self.price = batch_price(judge)
        self.folder = store.folder / BATCH_FOLDER

    # -- progress -------------------------------------------------------------------------------------

    def report(self, batch: JournalBatch | None, status: BatchStatus | None, elapsed: float = 0.0) -> None:
        if self.progress is None:
            return
        valid = sum(self.st.is_done(w.stage, rid) for rid, w in self.keyed.items())
        self.progress(BatchProgress(
            phase=self.phase, round=batch.round if batch else 0, batch_id=status.batch_id if status else "",
            status=status.status if status else "", total=status.total if status else 0,
            completed=status.completed if status else 0, failed=status.failed if status else 0, elapsed_s=elapsed,
            windows=len(self.keyed), cached=self.cached, valid=valid, calls=self.calls,
        ))

    # -- resume ---------------------------------------------------------------------------------------

    def _phase_batches(self) -> list[JournalBatch]:
        return [b for b in self.journal.batches().values() if b.phase == self.phase]

    async def settle_journal(self) -> None:
        """Finish every batch of this phase the journal holds open (a killed run's), before planning anything."""
        for b in self._phase_batches():
            if not b.open:
                continue
            if b.batch_id is None:
                found = await asyncio.to_thread(self.backend.find, b.key)
                if found is None:
                    self.journal.write("abandoned", b.key, reason="no batch with this key on the server")
                    continue
                log.info("batch of %s (key %s): found on the server as %s; resuming it", self.phase, b.key, found)
                self.journal.write("created", b.key, batch_id=found, found=True)
                self.created_at[b.key] = _now()
                b.batch_id = found
            plan = self._plan_of(b.ids)
            await self._finish(b, plan, resumed=b.ingesting)

    def _plan_of(self, ids: Iterable[str]) -> dict[str, Planned]:
        """Plan items of the record ids a batch asked, as they were asked (attempt = stored answers + 1)."""
        wanted = [rid for rid in ids if rid in self.keyed]
        previous = self._previous(wanted)
        return {rid: self._planned(rid, previous.get(rid))[0] for rid in wanted}

    # -- planning -------------------------------------------------------------------------------------

    def _previous(self, rids: list[str]) -> dict[str, tuple[str, str]]:
        again = {rid for rid in rids if self.st.attempts(self.keyed[rid].stage, rid)}
        return last_invalid_answers(self.st, again, {self.keyed[rid].stage for rid in again})

    def _planned(self, rid: str, previous: tuple[str, str] | None) -> tuple[Planned, dict[str, Any]]:
        """(plan item, request body) of window ``rid`` at its next attempt."""
        window = self.keyed[rid]
        texts = tuple(self.docs.get(window.query_id, d) for d in window.doc_ids)
        rendered = self.judge.render(window, self.queries[window.query_id], texts)
        attempt = self.st.attempts(window.stage, rid) + 1
        request = JudgeRequest(window, rendered, attempt, previous)
        body = self.judge.request_body(request)  # type: ignore[attr-defined]
        reask_of = getattr(self.judge, "reask_settings", None)
        reask = reask_of(request) if callable(reask_of) else None
        item = Planned(record_id=rid, window=window, family=self.families[window.stage], attempt=attempt,
                       rendered=replace(rendered, messages=()), texts=texts, reask=reask or None)
        return item, body

    def _todo(self, max_attempts: int) -> list[str]:
        return [rid for rid, w in self.keyed.items()
                if not self.st.is_done(w.stage, rid) and self.answers.get(rid, 0) < max_attempts]

    async def rounds(self, max_attempts: int, stop_after_invalid: int) -> None:
        """Ask batch after batch until every window is valid or out of attempts."""
        while True:
            todo = self._todo(max_attempts)
            if not todo:
                break
            if self.empty_streak >= MAX_EMPTY_BATCHES:
                raise BatchError(
                    f"{self.backend.label}: the last {MAX_EMPTY_BATCHES} batches of {self.phase} answered nothing "
                    f"({len(todo)} window(s) still unanswered); see {self.journal.path} for their statuses. Check the "
                    "provider's batch dashboard, then run the same command again (stored answers are kept)"
                )
            round_ = 1 + max((b.round for b in self._phase_batches() if not b.abandoned), default=0)
            await self._ask(todo, round_)
            report = self.first_report
            if report is not None and not self.verdict_checked:
                self.verdict_checked = True
                if stop_after_invalid and report.invalid >= stop_after_invalid and report.valid == 0:
                    raise invalid_verdict(self.judge, report.invalid_examples, report.invalid, self.st.folder)
        left = [rid for rid, w in self.keyed.items() if not self.st.is_done(w.stage, rid)]
        if left:
            log.warning("%d of %d window(s) of %s have no valid answer after %d attempts each; re-run to ask them "
                        "again", len(left), len(self.keyed), self.phase, max_attempts)

    async def _ask(self, todo: list[str], round_: int) -> None:
        """Ask ``todo`` in round ``round_``: one batch, or several created together where the backend limits the
        requests or bytes of one (:func:`split_parts`); then wait for and ingest each."""
        previous = self._previous(todo)
        attempts = {rid: self.st.attempts(self.keyed[rid].stage, rid) + 1 for rid in todo}
        self.folder.mkdir(parents=True, exist_ok=True)
        whole = self.folder / f".{safe_name(self.phase)}.r{round_}.requests.tmp"
        plan, sizes = await asyncio.to_thread(self._write_requests, whole, todo, previous)
        parts = split_parts(sizes, max_requests=self.backend.max_requests, max_bytes=self.backend.max_bytes,
                            what=f"{self.phase}: {self.backend.label}")
        asked: list[tuple[JournalBatch, dict[str, Planned]]] = []
        offsets = [0]
        for n in sizes:
            offsets.append(offsets[-1] + n)
        try:
            for number, (lo, hi) in enumerate(parts, start=1):
                ids = todo[lo:hi]
                key = batch_key(self.st.folder, self.phase, round_, [(rid, attempts[rid]) for rid in ids])
                path = self.folder / f"{key}.requests.jsonl"
                if len(parts) == 1:
                    os.replace(whole, path)
                else:
                    await asyncio.to_thread(_copy_range, whole, path, offsets[lo], offsets[hi])
                part = {} if len(parts) == 1 else {"part": number, "parts": len(parts)}
                self.journal.write("intent", key, phase=self.phase, round=round_, n=len(ids), ids=ids, **part)
                batch = JournalBatch(key=key, phase=self.phase, round=round_, ids=tuple(ids))
                await self._create(batch, path, self._name(round_, number if len(parts) > 1 else None))
                asked.append((batch, {rid: plan[rid] for rid in ids}))
        finally:
            whole.unlink(missing_ok=True)
        for batch, part_plan in asked:
            await self._finish(batch, part_plan, resumed=False)

    async def _create(self, batch: JournalBatch, path: Path, name: str) -> None:
        """Upload ``path`` and create its batch, journaling the file id and the batch id (found by its key on the
        server when the creation's answer is lost)."""
        key = batch.key
        file_id = await asyncio.to_thread(self.backend.upload, path, name)
        self.journal.write("uploaded", key, file_id=file_id)
        batch.file_id = file_id
        try:
            batch_id = await asyncio.to_thread(self.backend.create, file_id, name, key)
        except BatchError:
            # the answer may be lost while the batch exists: look for it by its key before giving up
            found = await asyncio.to_thread(self.backend.find, key)
            if found is None:
                raise  # the intent stays open: the next run looks for it again before creating anything
            log.warning("%s: creating the batch reported a failure, but the server holds batch %s with its key; "
                        "using it", self.phase, found)
            batch_id = found
        self.journal.write("created", key, batch_id=batch_id)
        self.created_at[key] = _now()
        batch.batch_id = batch_id
        log.info("%s: batch %s of %d request(s) created (%s)", self.phase, batch_id, len(batch.ids), self.backend.label)

    def _write_requests(self, path: Path, todo: list[str], previous: Mapping[str, tuple[str, str]]
                        ) -> tuple[dict[str, Planned], list[int]]:
        """Write the request lines of ``todo`` to ``path`` (fsynced); return their plan items and line sizes
        (bytes, in ``todo`` order)."""
        plan: dict[str, Planned] = {}
        sizes: list[int] = []
        with open(path, "wb") as fh:
            for rid in todo:
                item, body = self._planned(rid, previous.get(rid))
                plan[rid] = item
                line = request_line(rid, body)
                sizes.append(len(line))
                fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        return plan, sizes

    def _name(self, round_: int, part: int | None = None) -> str:
        name = self.phase if round_ == 1 else f"{self.phase}.r{round_}"
        return name if part is None else f"{name}.p{part}"

    # -- waiting and ingesting ------------------------------------------------------------------------

    def _created_at(self, batch: JournalBatch) -> str | None:
        if batch.key not in self.created_at:
            for ev in batch.events:
                if ev["event"] == "created":
                    self.created_at[batch.key] = ev["at"]
        return self.created_at.get(batch.key)

    async def _wait(self, batch: JournalBatch) -> BatchStatus:
        assert batch.batch_id is not None
        created = self._created_at(batch)
        began = time.monotonic()
        while True:
            status = await asyncio.to_thread(self.backend.retrieve, batch.batch_id)
            self.report(batch, status, _seconds_since(created))
            if status.terminal:
                return status
            if self.wait_seconds is not None and time.monotonic() - began >= self.wait_seconds:
                hint = self.backend.wait_hint(self._name(batch.round))
                raise BatchPending(
                    f"batch {batch.batch_id} of {self.phase} ({status.total} requests) is {status.status} "
                    f"({status.completed} done, {status.failed} failed); "
                    + (f"run `{hint}`, then " if hint else "")
                    + "run the same command again to resume: the batch is polled, never submitted again",
                    command=hint,
                )
            await asyncio.sleep(self.poll_seconds)

    async def _finish(self, batch: JournalBatch, plan: dict[str, Planned], *, resumed: bool) -> None:
        status = await self._wait(batch)
        if batch.status is None:
            self.journal.write("terminal", batch.key, batch_id=status.batch_id, status=status.status,
                               counts={"total": status.total, "completed": status.completed, "failed": status.failed},
                               errors=status.errors or None)
        if status.status != "completed":
            log.warning("%s: batch %s ended %s (%d of %d requests completed%s); the windows without an answer go "
                        "into the next batch", self.phase, status.batch_id, status.status, status.completed,
                        status.total, f"; {status.errors}" if status.errors else "")
        results = self.folder / f"{batch.key}.results.jsonl"
        tmp = results.with_name(f".{results.name}.tmp")
        await asyncio.to_thread(self.backend.download, status, tmp)
        os.replace(tmp, results)
        self.journal.write("ingesting", batch.key, batch_id=status.batch_id)
        started = self._created_at(batch) or _now()
        report = await asyncio.to_thread(ingest_results, results, plan, store=self.st, batch_id=status.batch_id,
                                          started_at=started, resumed=resumed, price=self.price,
                                          ledger=getattr(self.judge, "ledger", None))
        planned_here = set(plan)
        unknown = [rid for rid in batch.ids if rid not in planned_here]
        missing = len(planned_here - report.answered)
        self.journal.write("ingested", batch.key, batch_id=status.batch_id, missing=missing,
                           not_in_this_run=unknown[:100], **report.summary())
        if unknown:
            log.warning("%s: batch %s asked %d window(s) this run does not ask (an earlier run's plan); their answers "
                        "were not stored", self.phase, status.batch_id, len(unknown))
        for rid in report.answered:
            self.answers[rid] = self.answers.get(rid, 0) + 1
        self.calls += report.stored
        self.empty_streak = 0 if report.answered else self.empty_streak + 1
        if self.first_report is None and (report.valid or report.invalid):
            self.first_report = report
        self.report(batch, status, _seconds_since(self._created_at(batch)))


def split_parts(sizes: list[int], *, max_requests: int | None, max_bytes: int | None, what: str = ""
                ) -> list[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` ranges of request lines whose sizes (bytes) are ``sizes``, each within
    ``max_requests`` lines and ``max_bytes`` bytes (``None``: no limit), as few as that allows; one range when
    nothing limits. A line larger than ``max_bytes`` on its own raises :class:`BatchError` naming ``what``."""
    parts: list[tuple[int, int]] = []
    lo, used = 0, 0
    for i, n in enumerate(sizes):
        if max_bytes is not None and n > max_bytes:
            raise BatchError(f"{what}: request {i + 1} is {n:,} bytes, more than the {max_bytes:,} one batch file may "
                             "hold; lower --max-window-chars so a window's request fits")
        full = (max_requests is not None and i - lo >= max_requests) or (max_bytes is not None and used + n > max_bytes)
        if full:
            parts.append((lo, i))
            lo, used = i, 0
        used += n
    parts.append((lo, len(sizes)))
    return parts


def _copy_range(source: Path, target: Path, start: int, stop: int, chunk: int = 1 << 20) -> None:
    """Bytes ``[start, stop)`` of ``source`` into ``target``, atomically and fsynced."""
    tmp = target.with_name(f".{target.name}.tmp")
    with open(source, "rb") as src, open(tmp, "wb") as dst:
        src.seek(start)
        left = stop - start
        while left > 0:
            block = src.read(min(chunk, left))
            if not block:
                break
            dst.write(block)
            left -= len(block)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, target)


def judge_windows_batch_sync(windows: Iterable[Window], **kwargs: Any) -> list[Judgement]:
    """:func:`judge_windows_batch` for synchronous code (same arguments); Ctrl-C leaves the batch to resume."""
    try:
        asyncio.get_running_loop()
        in_loop = True
    except RuntimeError:
        in_loop = False
    if in_loop:
        raise JudgeInputError("judge_windows_batch_sync was called inside a running event loop (e.g. Jupyter); use "
                              "'await judge_windows_batch(...)' there instead")
    return run_interruptible(judge_windows_batch(windows, **kwargs))  # type: ignore[arg-type]

"""The entry point the pipeline calls: judge a list of windows into a store, resuming where it stopped.

Example (runs offline, in a temporary folder)::

    import tempfile
    from rcp_jax.judging import SimulatedJudge, Window, judge_windows_sync

    queries = {"q1": "who designed the eiffel tower?"}
    documents = {"q1": {"a": "Gustave Eiffel's company built it.", "b": "A recipe for bread.",
                        "c": "The tower was designed by Koechlin and Nouguier."}}
    latent = {"q1": {"a": 1.0, "b": -3.0, "c": 2.5}}
    windows = [Window("q1", "tournament", "round1", 0, ("a", "b", "c")),
               Window("q1", "rubric", "balanced", 0, ("c", "a", "b"))]
    with tempfile.TemporaryDirectory() as folder:
        judgements = judge_windows_sync(windows, judge=SimulatedJudge(latent), store=folder,
                                        documents=documents, queries=queries, concurrency=4)
        print(judgements[0].scores)     # {'a': 1.0, 'b': -4.0, 'c': 2.0}: scores in [-5, 5]
        print(judgements[1].criteria)   # {'c': (1, 1, 1, 1, 0), 'a': ..., 'b': ...}: C1..C5 per document

Swap ``SimulatedJudge(latent)`` for ``LiteLLMJudge("openai/gpt-4o-mini")`` (or a vLLM / SGLang /
Ollama model string with ``api_base=...``) to judge for real; nothing else changes. Running the same
call again asks nothing: every window already has a valid record in the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rcp_jax.judging.answers.parse import ParseResult, echoed_documents, parse_answer
from rcp_jax.judging.answers.verdict import summarise
from rcp_jax.judging.errors import JudgeInputError, JudgeVerdictError
from rcp_jax.judging.judge import BaseJudge, Completion, JudgeRequest
from rcp_jax.judging.lookup import PerQuery, check_window_inputs
from rcp_jax.judging.prompts.pages import check_window_images, doc_text, stamp_images
from rcp_jax.judging.prompts.render import RenderedWindow
from rcp_jax.judging.store.jsonl import JudgementStore
from rcp_jax.judging.store.records import JudgeFamily, Judgement, Window, record_id
from rcp_jax.judging.transport.loop import run as run_interruptible
from rcp_jax.judging.transport.procs import ProcessJudge

log = logging.getLogger("rcp_jax.judging.run")

#: Answer attempts per window before it is left for a later run.
DEFAULT_MAX_ATTEMPTS = 3
#: A run stops with a verdict when its first this-many answers are all invalid (0: never).
DEFAULT_STOP_AFTER_INVALID = 20


@dataclass(frozen=True)
class JudgeProgress:
    """Where a :func:`judge_windows` run stands (passed to the ``progress`` callback).

    Attributes
    ----------
    total : distinct windows asked for.
    cached : windows already valid in the store when the run started (not asked again).
    done : windows finished in this run (valid, or out of attempts).
    valid : windows that got a valid answer in this run.
    failed : windows still invalid after ``max_attempts`` answers in this run (asked again next run).
    calls : answer attempts made in this run.
    invalid_answers : invalid answers received in this run (each is stored, and its window re-asked).
    """

    total: int
    cached: int
    done: int
    valid: int
    failed: int
    calls: int
    invalid_answers: int = 0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


async def judge_windows(
    windows: Iterable[Window],
    *,
    judge: BaseJudge,
    store: JudgementStore | str | Path,
    documents: Mapping[str, str] | Mapping[str, Mapping[str, str]],
    queries: Mapping[str, str],
    concurrency: int = 16,
    progress: Callable[[JudgeProgress], None] | None = None,
    max_attempts: int | None = None,
    processes: int | None = None,
    stop_after_invalid: int | None = None,
) -> list[Judgement]:
    """Judge ``windows`` with ``judge``, storing every answer in ``store``; return the valid judgements.

    Parameters
    ----------
    windows : the windows to judge (any stage mix). Repeats of the same window are asked once.
    judge : a :class:`judging.LiteLLMJudge`, :class:`judging.SimulatedJudge` or other ``BaseJudge``.
    store : an open or closed :class:`JudgementStore`, or a folder path. A store this call opens, it
        closes again.
    documents : document texts, ``{doc_id: text}`` shared by all queries or ``{query_id: {doc_id: text}}``.
    queries : ``{query_id: text}``.
    concurrency : windows in flight at once (each holds at most one call at a time).
    progress : called with a :class:`JudgeProgress` at the start and after each window.
    max_attempts : answer attempts per window in this run; an invalid answer is stored and the window
        re-asked. Attempts are numbered across runs (a window with 3 stored invalid attempts starts at 4).
        ``None``: the judge's ``max_attempts`` attribute if set, else :data:`DEFAULT_MAX_ATTEMPTS` (3).
        Windows never asked before are asked first; windows whose earlier answers were all invalid after them.
    stop_after_invalid : stop with :class:`JudgeVerdictError` as soon as this run's first
        ``stop_after_invalid`` answers are all invalid (a judge that does not answer usably, caught before
        it spends the whole run); 0: never. ``None``: the judge's ``stop_after_invalid`` attribute if set,
        else :data:`DEFAULT_STOP_AFTER_INVALID` (20).
    processes : run the judge's calls in this many worker processes (a :class:`judging.ProcessJudge`
        started and stopped by this call), for when one process's CPU binds the call rate (litellm
        spends milliseconds of CPU per call). Rendering, parsing and the store stay in this process,
        so records and resume behave exactly as without. ``None`` (default): calls run here.

    Returns
    -------
    One valid :class:`Judgement` per distinct window that has one (from this run or an earlier one), in
    the order the windows were given. Windows still invalid after ``max_attempts`` are logged and left
    out; the next run asks them again.

    Raises
    ------
    JudgeInputError : a window's query or document text is missing, a page image does not decode as PNG/JPEG, or a
        window holds more page-only documents than ``judge.image_limits.max_images`` (one would not be shown);
        all checked before any call (:func:`rcp_jax.judging.prompts.pages.check_window_images`).
    JudgeVerdictError : the first ``stop_after_invalid`` answers of this run were all invalid; the message
        gives them by category, one raw answer and what to try. They are stored.
    JudgeAuthError, JudgeNotFoundError, JudgeRequestError, JudgeTransportError : from the judge; the
        run stops, and every answer received so far is already stored.
    StoreLockedError : another process is writing the store.

    On cancellation (Ctrl-C in :func:`judge_windows_sync`), answers already received are stored; the
    rest are asked by the next run.
    """
    if concurrency < 1:
        raise JudgeInputError(f"concurrency must be >= 1, got {concurrency}")
    if max_attempts is None:
        max_attempts = policy(judge, "max_attempts", DEFAULT_MAX_ATTEMPTS)
    if stop_after_invalid is None:
        stop_after_invalid = policy(judge, "stop_after_invalid", DEFAULT_STOP_AFTER_INVALID)
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise JudgeInputError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    if not isinstance(stop_after_invalid, int) or stop_after_invalid < 0:
        raise JudgeInputError(f"stop_after_invalid must be an integer >= 0 (0: never stop), got {stop_after_invalid!r}")
    if processes is not None and (not isinstance(processes, int) or isinstance(processes, bool) or processes < 1):
        raise JudgeInputError(f"processes must be None or an integer >= 1, got {processes!r}")
    docs, families, keyed = keyed_windows(windows, judge=judge, documents=documents, queries=queries)

    owned = not isinstance(store, JudgementStore)
    st = JudgementStore(store) if owned else store
    opened_here = not st.is_open
    st.open()
    pool: ProcessJudge | None = None
    try:
        todo = [(rid, w) for rid, w in keyed.items() if not st.is_done(w.stage, rid)]
        # windows never asked first; windows whose earlier answers were all invalid after them
        earlier = {rid: st.attempts(w.stage, rid) for rid, w in todo}
        todo.sort(key=lambda item: earlier[item[0]] > 0)
        previous = last_invalid_answers(st, {rid for rid, n in earlier.items() if n}, {w.stage for _, w in todo})
        caller = judge
        if processes is not None and todo:
            pool = ProcessJudge(judge, processes)
            await asyncio.to_thread(pool.start)
            caller = pool
        counts = {"done": 0, "valid": 0, "failed": 0, "calls": 0, "invalid_answers": 0}
        invalid_here: list[Judgement] = []
        halted: list[JudgeVerdictError] = []  # set once the verdict is given: no worker starts another call
        cached = len(keyed) - len(todo)

        def report() -> None:
            if progress is not None:
                progress(JudgeProgress(total=len(keyed), cached=cached, **counts))

        report()

        async def one(rid: str, window: Window) -> None:
            texts = [docs.get(window.query_id, d) for d in window.doc_ids]
            rendered = judge.render(window, queries[window.query_id], texts)
            family = families[window.stage]
            first = st.attempts(window.stage, rid)  # attempts are numbered across runs
            last_invalid = previous.get(rid)
            for attempt in range(first + 1, first + max_attempts + 1):
                if halted:
                    return
                started = _now()
                completion = await caller.complete(JudgeRequest(window, rendered, attempt, last_invalid))
                counts["calls"] += 1
                judgement = judgement_from_completion(
                    completion, record_id=rid, family=family, window=window, rendered=rendered, texts=texts,
                    attempt=attempt, started_at=started,
                )
                await st.append_async(judgement)
                if judgement.valid:
                    counts["valid"] += 1
                    break
                counts["invalid_answers"] += 1
                invalid_here.append(judgement)
                last_invalid = (judgement.invalid_category or "unknown", judgement.invalid_detail)
                log.info("window %s attempt %d invalid (%s: %s)", window.label, attempt, judgement.invalid_category,
                         judgement.invalid_detail)
                if stop_after_invalid and counts["invalid_answers"] >= stop_after_invalid and counts["valid"] == 0:
                    halted.append(invalid_verdict(judge, invalid_here, stop_after_invalid, st.folder))
                    raise halted[0]
            else:
                counts["failed"] += 1
                log.warning(
                    "window %s still invalid after %d attempts (last: %s); it will be asked again next run",
                    window.label,
                    max_attempts,
                    judgement.invalid_category,
                )
            counts["done"] += 1
            report()

        queue: asyncio.Queue[tuple[str, Window]] = asyncio.Queue()
        for item in todo:
            queue.put_nowait(item)

        async def worker() -> None:
            while True:
                try:
                    rid, window = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                if halted:
                    return
                await one(rid, window)

        tasks = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(todo)))]
        try:
            if tasks:
                finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                for t in finished:
                    if not t.cancelled() and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await st.drain()
        if counts["failed"]:
            log.warning(
                "%d of %d window(s) have no valid answer after %d attempts each; re-run to ask them again",
                counts["failed"],
                len(keyed),
                max_attempts,
            )
        valid = {stage: st.valid(stage) for stage in families}
        return [valid[w.stage][rid] for rid, w in keyed.items() if rid in valid[w.stage]]
    finally:
        if pool is not None:
            pool.close()
        if opened_here:
            st.close()


def judgement_from_completion(
    completion: Completion,
    *,
    record_id: str,
    family: JudgeFamily,
    window: Window,
    rendered: RenderedWindow,
    texts: Sequence[Any],
    attempt: int,
    started_at: str,
    finished_at: str | None = None,
    batch: str | None = None,
) -> Judgement:
    """The stored record of one answer: ``completion`` through the parser (and the prompt-injection check) into a
    :class:`Judgement`; the one path online calls (:func:`judge_windows`) and batch results
    (:mod:`rcp_jax.judging.batch`) share.

    ``texts`` are the window's documents as given (text or :class:`rcp_jax.judging.prompts.pages.Document`), in
    ``window.doc_ids`` order; ``rendered`` is the window as the judge saw it; ``batch`` names the batch the answer
    came from (``None`` for an online call). An answer repeating an answer planted inside a document is logged and
    flagged ``echoes_document:<doc id>``.
    """
    if completion.malformed:
        parsed = ParseResult(valid=False, category="malformed_response", detail=completion.malformed)
        echoed: list[str] = []
    else:
        parsed = parse_answer(
            completion.text,
            stage=window.stage,
            doc_ids=window.doc_ids,
            n_criteria=rendered.n_criteria,
            finish_reason=completion.finish_reason,
        )
        echoed = echoed_documents(completion.text, window.doc_ids, [doc_text(t) for t in texts],
                                  stage=window.stage, finish_reason=completion.finish_reason)
    if echoed:
        log.warning(
            "window %s attempt %d: the answer repeats an answer written inside document(s) %s, a prompt "
            "injection; it is stored flagged 'echoes_document' (check or remove the document)",
            window.label, attempt, ", ".join(repr(d) for d in echoed),
        )
    return Judgement(
        record_id=record_id,
        family=family,
        window=window,
        valid=parsed.valid,
        invalid_category=parsed.category,
        invalid_detail=parsed.detail,
        scores=parsed.scores,
        criteria=parsed.criteria,
        raw_response=completion.text,
        finish_reason=completion.finish_reason,
        attempts=attempt,
        usage=completion.usage,
        truncated_docs=dict(rendered.truncated_docs),
        started_at=started_at,
        finished_at=finished_at if finished_at is not None else _now(),
        transport_retries=completion.transport_retries,
        better=parsed.better,
        flags=tuple(f"echoes_document:{d}" for d in echoed),
        reask=completion.reask or None,
        served_model=completion.served_model,
        system_fingerprint=completion.system_fingerprint,
        batch=batch,
    )


def keyed_windows(windows: Iterable[Window], *, judge: BaseJudge, documents, queries: Mapping[str, str]
                  ) -> tuple[PerQuery, dict[str, JudgeFamily], dict[str, Window]]:
    """Check ``windows`` before any call (Window objects; every query and document text present; every page image
    decodes and no window hides a page-only document past the judge's image limit) and key them by record id.

    Returns ``(documents as PerQuery, {stage: the judge's family}, {record id: window})``; repeats of a window are
    kept once, in the order given. Raises :class:`JudgeInputError`."""
    windows = list(windows)
    for w in windows:
        if not isinstance(w, Window):
            raise JudgeInputError(f"windows must be judging.Window objects, got {type(w).__name__}")
    docs: PerQuery = PerQuery(documents)
    check_window_inputs(windows, docs, queries)
    windows = stamp_images(windows, docs, getattr(judge, "image_limits", None))
    check_window_images(windows, docs, getattr(judge, "image_limits", None))
    families = {stage: judge.family(stage) for stage in {w.stage for w in windows}}
    keyed: dict[str, Window] = {}
    for w in windows:
        keyed.setdefault(record_id(families[w.stage], w), w)
    return docs, families, keyed


def policy(judge: BaseJudge, name: str, default: int) -> int:
    """The judge's run-policy attribute ``name`` (or its inner judge's), else ``default``."""
    for j in (judge, getattr(judge, "inner", None)):
        value = getattr(j, name, None) if j is not None else None
        if value is not None:
            return value
    return default


def last_invalid_answers(st: JudgementStore, ids: set[str], stages: set[str]) -> dict[str, tuple[str, str]]:
    """record id -> (category, detail) of its last stored invalid answer, for the windows in ``ids``."""
    out: dict[str, tuple[str, str]] = {}
    if not ids:
        return out
    for stage in stages:
        for j in st.records(stage):
            if j.record_id in ids and not j.valid:
                out[j.record_id] = (j.invalid_category or "unknown", j.invalid_detail)
    return out


def invalid_verdict(judge: BaseJudge, invalid: list[Judgement], n: int, store: Path) -> JudgeVerdictError:
    """The early-stop verdict: the first ``n`` answers of this run were all invalid."""
    summary = summarise(invalid)
    settings = []
    for name in ("structured_output", "max_tokens", "temperature"):
        try:
            value = judge.decoding().get(name)
        except Exception:  # noqa: BLE001 - a judge without these settings
            value = None
        if value is not None:
            settings.append(f"{name.replace('_', '-')} {value}")
    tries = [
        "a larger or instruction-tuned model (this one is not answering in the required form)",
        "--structured-output json_schema (hosted APIs, vLLM, SGLang, Ollama) or json_object_schema (llama.cpp), "
        "so the server constrains the shape",
        "--max-tokens larger if answers are cut off ('truncated'), within the model's context",
    ]
    lines = [
        f"stopped early: the first {n} answers of this run were all invalid, so judge {judge.model!r}"
        + (f" ({', '.join(settings)})" if settings else "") + " is not answering usably. They are stored in "
        f"{store} (re-asked by the next run).",
        summary.describe(),
        *[f"  {a}" for a in summary.advice()],
        "what to try: " + "; ".join(tries) + ". To keep going anyway: --stop-after-invalid 0.",
    ]
    return JudgeVerdictError("\n".join(lines), summary)


def judge_windows_sync(windows: Iterable[Window], **kwargs: object) -> list[Judgement]:
    """:func:`judge_windows` for synchronous code (same arguments). Ctrl-C stores what was received.

    Inside a running event loop (Jupyter), ``await judge_windows(...)`` instead.
    """
    try:
        asyncio.get_running_loop()
        in_loop = True
    except RuntimeError:
        in_loop = False
    if in_loop:
        raise JudgeInputError(
            "judge_windows_sync was called inside a running event loop (e.g. Jupyter); use "
            "'await judge_windows(...)' there instead"
        )
    # rcp_jax.judging.transport.loop.run: asyncio.run that leaves no coroutine un-awaited on Ctrl-C, and stops on SIGTERM like
    # Ctrl-C where the process asked for it (rcp-jax's command line does)
    return run_interruptible(judge_windows(windows, **kwargs))  # type: ignore[arg-type]

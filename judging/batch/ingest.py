"""Batch results into the store: each output line through the online judge's parser, appended in bulk.

:func:`ingest_results` streams a results file (output lines, then error lines) and, for each line:

- a line that cannot be read (not JSON, no ``custom_id``, a 200 without a body) is counted and named, nothing is
  stored, and its window (its ``custom_id`` when readable) is missing: the runner asks it in the next batch;
- a ``custom_id`` this batch never planned is refused: named in a warning and the report, nothing stored;
- a second line of the same ``custom_id`` is ignored (the first kept);
- a request that got no answer (an error line) is counted with its error; its window is missing;
- an answer becomes a :class:`rcp_jax.judging.store.records.Judgement` exactly as an online answer does
  (:func:`rcp_jax.judging.run.judgement_from_completion`), with ``batch`` naming the batch; an answer whose record is
  already stored from the same batch (an ingest killed half-way and resumed) or whose window is already valid is
  not stored again.

Records are appended ``chunk`` at a time (one write and one fsync per chunk): 100,000 results ingest in seconds
with memory bounded by the chunk, not the file (``benchmarks/batch_ingest.py``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rcp_jax.judging.batch.lines import read_result
from rcp_jax.judging.judge import Ledger
from rcp_jax.judging.prompts.render import RenderedWindow
from rcp_jax.judging.run import judgement_from_completion
from rcp_jax.judging.store.jsonl import JudgementStore
from rcp_jax.judging.store.records import JudgeFamily, Judgement, Window

log = logging.getLogger("rcp_jax.judging.batch.ingest")

#: Records appended per write + fsync.
DEFAULT_CHUNK = 2000
#: Invalid answers kept in a report (for the early-stop verdict's summary and example).
KEEP_INVALID = 200


@dataclass(frozen=True, slots=True)
class Planned:
    """One window as a batch asked it: what turns its answer into a record.

    ``rendered`` is the window as rendered for the request (its messages may be dropped: only ``n_criteria`` and
    ``truncated_docs`` are read); ``texts`` the window's documents as given; ``reask`` what the request varied
    (``None`` on a first attempt).
    """

    record_id: str
    window: Window
    family: JudgeFamily
    attempt: int
    rendered: RenderedWindow
    texts: tuple[Any, ...]
    reask: Mapping[str, Any] | None = None


@dataclass
class IngestReport:
    """What one ingest did.

    Attributes
    ----------
    stored, valid, invalid : answers stored (and of those, valid and invalid).
    skipped : answers not stored because the store already held them (from this batch, or a valid answer).
    answered : record ids that got an answer line (stored or skipped).
    refused : ``custom_id`` values the batch never planned (nothing stored).
    duplicates : extra lines of a ``custom_id`` already read (ignored).
    malformed : ``"line N: why"`` of each line that could not be read.
    errors : record id -> the error of a request that got no answer.
    invalid_examples : the first :data:`KEEP_INVALID` invalid records stored.
    """

    stored: int = 0
    valid: int = 0
    invalid: int = 0
    skipped: int = 0
    answered: set[str] = field(default_factory=set)
    refused: list[str] = field(default_factory=list)
    duplicates: int = 0
    malformed: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    invalid_examples: list[Judgement] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """JSON-able counts (the journal's ``ingested`` line)."""
        return {"stored": self.stored, "valid": self.valid, "invalid": self.invalid, "skipped": self.skipped,
                "refused": self.refused[:100], "n_refused": len(self.refused), "duplicates": self.duplicates,
                "malformed": self.malformed[:100], "n_malformed": len(self.malformed), "n_errors": len(self.errors),
                "errors": dict(list(self.errors.items())[:20])}


def stored_from_batch(store: JudgementStore, batch_id: str) -> set[str]:
    """Record ids the store already holds from ``batch_id`` (read from the stage files, no full parse)."""
    needle = b'"batch":' + json.dumps(batch_id).encode()
    out: set[str] = set()
    for path in sorted(Path(store.folder).glob("*.jsonl")):
        if path.name == "batches.jsonl":
            continue
        with open(path, "rb") as fh:
            for raw in fh:
                if needle in raw:
                    try:
                        out.add(json.loads(raw)["record_id"])
                    except (ValueError, KeyError):
                        continue  # a torn last line: its record was not stored
    return out


def ingest_results(
    path: str | Path,
    plan: Mapping[str, Planned],
    *,
    store: JudgementStore,
    batch_id: str,
    started_at: str,
    resumed: bool = False,
    price: Callable[[int, int], float | None] | None = None,
    chunk: int = DEFAULT_CHUNK,
    ledger: Ledger | None = None,
) -> IngestReport:
    """Store the answers in the results file ``path`` of batch ``batch_id`` (module docstring).

    Parameters
    ----------
    plan : record id -> :class:`Planned` for every request of the batch whose window this call knows.
    store : an open store (its write lock held).
    started_at : the records' ``started_at`` (when the batch was created).
    resumed : an earlier ingest of this batch may have stored part of it: skip what it stored.
    price : ``price(prompt_tokens, completion_tokens)`` in USD, or ``None`` (unknown).
    ledger : the judge's :class:`rcp_jax.judging.judge.Ledger`, given each stored answer's usage (as online calls do).
    """
    report = IngestReport()
    already = stored_from_batch(store, batch_id) if resumed else set()
    seen: set[str] = set()
    buffer: list[Judgement] = []
    finished = datetime.now(UTC).isoformat(timespec="milliseconds")  # the records' finished_at: when they arrived
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            result = read_result(raw, price)
            if result.malformed:
                report.malformed.append(f"line {lineno}"
                                        + (f" (custom_id {result.custom_id})" if result.custom_id else "")
                                        + f": {result.malformed}")
                continue
            cid = result.custom_id
            item = plan.get(cid)  # type: ignore[arg-type]
            if item is None:
                report.refused.append(str(cid))
                continue
            if cid in seen:
                report.duplicates += 1
                continue
            seen.add(cid)  # type: ignore[arg-type]
            if result.completion is None:
                report.errors[cid] = result.error  # type: ignore[index]
                continue
            report.answered.add(cid)  # type: ignore[arg-type]
            if cid in already or store.is_done(item.window.stage, cid):  # type: ignore[arg-type]
                report.skipped += 1
                continue
            completion = dataclasses.replace(result.completion, reask=item.reask)
            j = judgement_from_completion(
                completion, record_id=item.record_id, family=item.family, window=item.window, rendered=item.rendered,
                texts=item.texts, attempt=item.attempt, started_at=started_at, finished_at=finished, batch=batch_id,
            )
            buffer.append(j)
            if ledger is not None:
                ledger.add(j.usage)
            if j.valid:
                report.valid += 1
            else:
                report.invalid += 1
                if len(report.invalid_examples) < KEEP_INVALID:
                    report.invalid_examples.append(j)
            if len(buffer) >= chunk:
                report.stored += store.append_many(buffer)
                buffer = []
    report.stored += store.append_many(buffer)
    if report.refused:
        shown = ", ".join(report.refused[:5]) + (" ..." if len(report.refused) > 5 else "")
        log.warning("batch %s: %d result(s) for windows this batch never asked were refused (custom_id %s); nothing "
                    "of them was stored", batch_id, len(report.refused), shown)
    if report.malformed:
        log.warning("batch %s: %d result line(s) could not be read (%s); their windows go into the next batch",
                    batch_id, len(report.malformed), "; ".join(report.malformed[:3]))
    if report.duplicates:
        log.warning("batch %s: %d repeated custom_id line(s) ignored (the first line of each kept)", batch_id,
                    report.duplicates)
    return report

"""The batch journal: what batches a store asked for and how far each got (``<store>/batches.jsonl``).

One JSON object per line, appended with a single ``write`` and ``fsync``ed before the step it records is taken
further, written only while the store's write lock is held (the caller holds an open
:class:`rcp_jax.judging.store.jsonl.JudgementStore`). Each line has ``"event"`` and the batch's ``"key"``:

- ``intent``: ``phase``, ``round``, ``n`` (requests), ``ids`` (the planned record ids); written before anything is
  uploaded or created. A later ``intent`` of the same key starts that batch over (after an ``abandoned``).
- ``uploaded``: ``file_id`` of the request file.
- ``created``: ``batch_id``; written right after the server returned it, before any waiting.
- ``terminal``: ``batch_id``, ``status`` (completed, failed, expired, cancelled), ``counts``.
- ``ingesting``: results of ``batch_id`` are being stored (a resumed ingest checks each against the store).
- ``ingested``: ``stored``, ``refused`` (ids the batch never planned), ``malformed``, ``errors``, ``missing``.
- ``abandoned``: an intent that never became a batch (the server holds none with its key); asked afresh.

The key (:func:`batch_key`) is a content hash of (store folder, phase, round, the planned (record id, attempt) pairs), sent
as the batch's metadata ``{"rcp_jax_key": key}``: a run killed between ``intent`` and ``created`` finds its batch
on the server by that key instead of creating (and paying for) it twice. A torn last line (a crash mid-write) is
skipped by readers and cut off by :meth:`BatchJournal.open`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rcp_jax.judging.errors import StoreError
from rcp_jax.judging.store.records import content_hash

log = logging.getLogger("rcp_jax.judging.batch.journal")

#: Name of the journal inside a store folder.
JOURNAL_FILE = "batches.jsonl"
#: Events of the journal, in the order a batch goes through them.
EVENTS = ("intent", "uploaded", "created", "terminal", "ingesting", "ingested", "abandoned")


def batch_key(store: str | Path, phase: str, round_: int, planned: Iterable[tuple[str, int]]) -> str:
    """The metadata key of a batch: a 24-hex content hash of the store folder (resolved), the phase, the batch's
    round within the phase (1, 2, ... as the journal counts them) and the sorted (record id, attempt) pairs it
    asks; the same plan in the same store always gets the same key, and a batch asked again after one that
    answered nothing (same pairs) another."""
    payload = {"store": str(Path(store).resolve()), "phase": phase, "round": round_, "planned": sorted(planned)}
    return content_hash(payload, 24)


@dataclass
class JournalBatch:
    """One batch as the journal knows it (the events of its key folded in order)."""

    key: str
    phase: str = ""
    round: int = 1
    ids: tuple[str, ...] = ()
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    ingesting: bool = False
    ingested: bool = False
    abandoned: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def open(self) -> bool:
        """Not yet ingested nor abandoned: a resumed run settles it before planning anything new."""
        return not (self.ingested or self.abandoned)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class BatchJournal:
    """``<folder>/batches.jsonl``; see the module docstring. :meth:`open` before :meth:`write`."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / JOURNAL_FILE
        self._fd: int | None = None

    def open(self) -> BatchJournal:
        """Cut a torn last line (to ``batches.jsonl.torn``) and open for appending. Idempotent."""
        if self._fd is not None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                keep = data.rfind(b"\n") + 1
                with open(self.path.with_name(JOURNAL_FILE + ".torn"), "ab") as f:
                    f.write(data[keep:] + b"\n")
                    f.flush()
                    os.fsync(f.fileno())
                with open(self.path, "r+b") as f:
                    f.truncate(keep)
                    f.flush()
                    os.fsync(f.fileno())
                log.warning("%s: moved a torn last line (a crash mid-write) to %s.torn", self.path, JOURNAL_FILE)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:
            dfd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return self

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def write(self, event: str, key: str, **fields: Any) -> None:
        """Append one event line and fsync it."""
        if self._fd is None:
            raise StoreError(f"{self.path}: the batch journal is not open for writing")
        if event not in EVENTS:
            raise ValueError(f"unknown journal event {event!r}")
        line = {"event": event, "key": key, "at": _now(), **fields}
        data = memoryview((json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))
        while data:
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)

    def events(self) -> list[dict[str, Any]]:
        """Every event line in file order (a torn last line skipped)."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        out = []
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                if not isinstance(obj, Mapping) or "event" not in obj or "key" not in obj:
                    raise ValueError("not a journal event")
            except ValueError as exc:
                if i == len(lines) - 1:  # torn by a crash: cut by the next writer
                    break
                raise StoreError(f"{self.path}, line {i + 1}: not a batch journal event ({exc}); the journal is "
                                 "append-only, so it was edited or damaged: restore it") from None
            out.append(dict(obj))
        return out

    def batches(self) -> dict[str, JournalBatch]:
        """key -> :class:`JournalBatch`, in the order their first intent was written."""
        out: dict[str, JournalBatch] = {}
        for ev in self.events():
            key, kind = ev["key"], ev["event"]
            b = out.get(key)
            if kind == "intent":
                b = out[key] = JournalBatch(key=key, phase=str(ev.get("phase", "")), round=int(ev.get("round", 1)),
                                            ids=tuple(ev.get("ids") or ()))
            elif b is None:
                continue  # an event of an intent cut off by a crash: nothing was created for it
            elif kind == "uploaded":
                b.file_id = ev.get("file_id")
            elif kind == "created":
                b.batch_id = ev.get("batch_id")
            elif kind == "terminal":
                b.status = ev.get("status")
            elif kind == "ingesting":
                b.ingesting = True
            elif kind == "ingested":
                b.ingested = True
            elif kind == "abandoned":
                b.abandoned = True
            b.events.append(ev)
        return out

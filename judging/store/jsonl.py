"""The judgement store: append-only JSONL files, one per stage, in one folder.

Layout::

    <folder>/tournament.jsonl   one Judgement per line (valid and invalid attempts)
    <folder>/rubric.jsonl
    <folder>/lists.jsonl        (two-list comparisons)
    <folder>/identity.json      what schedule the windows came from (written by the caller that schedules
                                them, e.g. rcp_jax's pipeline; see :func:`read_identity`)
    <folder>/extensions.jsonl   what each extension of the judged pools added and when (written by
                                ``rcp_jax.extension`` under the write lock; the store never reads it)
    <folder>/.lock              fcntl lock of the (single) writer; holds its pid
    <folder>/<stage>.jsonl.torn fragments cut from the end of a file after a crash

Rules:

- A line is written with a single ``write`` and made durable (``fsync``) before the caller is told it
  is stored. Concurrent async appends are committed in groups (one ``fsync`` per group) by a worker
  thread, so a slow disk never stalls the event loop.
- A window is *done* for a family once one record with its :func:`rcp_jax.judging.store.records.record_id` is
  valid. Invalid attempts are kept (for audit and re-parsing) but do not count.
- A stage's file is created when its first record is written (so a store holds no empty files).
- Only one process may write a store at a time (``StoreLockedError`` otherwise). Reading never locks.
- A crash can leave a torn last line. Readers skip it with a warning; a writer opening the store moves
  it to ``<stage>.jsonl.torn`` first. A bad line anywhere else is corruption and raises ``StoreError``.

- The identity file is a small JSON object the store keeps for its caller: written atomically
  (temp file, fsync, rename) by :meth:`JudgementStore.write_identity` under the write lock, read by
  :func:`read_identity` without it. The store itself never interprets it.

Records never contain API keys: judges do not put credentials in families or completions.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import secrets
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rcp_jax.judging.errors import StoreError, StoreLockedError
from rcp_jax.judging.store.records import STAGES, Judgement

log = logging.getLogger("rcp_jax.judging.store.jsonl")

_torn_reported: set[tuple[str, int]] = set()  # (file, size) whose torn last line was reported

#: Name of the identity file inside a store folder.
IDENTITY_FILE = "identity.json"


def check_store_folder(folder: str | Path) -> None:
    """Raise :class:`StoreError` when ``folder`` (or a folder above it) exists as something other than a
    folder, so the store could never be created there; a missing folder is fine (it is created)."""
    folder = Path(folder)
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():
                what = "is an existing file" if p == folder else f"cannot be created: {p} is an existing file"
                raise StoreError(
                    f"judgement store {folder} {what}, not a folder. A store is a folder (created when missing): "
                    "pass another path to --store, or move that file away"
                )
            return


def read_identity(folder: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``<folder>/identity.json``, or ``None`` when the store has none (a store written
    before identity files existed, or one never judged). A damaged file raises :class:`StoreError`."""
    path = Path(folder) / IDENTITY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: cannot read the store's identity file ({exc})") from None
    try:
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise StoreError(
            f"{path}: the store's identity file is damaged ({exc}); it is written atomically, so it was edited: "
            "restore it, or delete it to let the next `rcp-jax judge` infer the identity from the stored answers"
        ) from None
    return obj


def _encode(judgement: Judgement) -> bytes:
    return (json.dumps(judgement.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _iter_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, record dict) for every good line; skips a torn last line with a warning."""
    if not path.exists():
        return
    data = path.read_bytes()
    if not data:
        return
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    if complete:
        lines = lines[:-1]
    for i, raw in enumerate(lines):
        last = i == len(lines) - 1
        try:
            if last and not complete:
                raise ValueError("no newline at end")
            obj = json.loads(raw)
            if not isinstance(obj, dict) or "record_id" not in obj:
                raise ValueError("not a judgement record")
        except ValueError as exc:
            if last:
                key = (str(path), len(data))
                if key in _torn_reported:  # one warning per torn tail, however often the file is read
                    return
                _torn_reported.add(key)
                log.warning(
                    "%s: skipping a torn last line %d (%d bytes; %s), probably left by a crash; the window "
                    "it belonged to will be asked again",
                    path,
                    i + 1,
                    len(raw),
                    exc,
                )
                return
            raise StoreError(
                f"{path}, line {i + 1}: not a judgement record ({exc}). Only the last line can be torn by a "
                "crash, so this file was edited or damaged: move that line out or restore the file"
            ) from None
        yield i + 1, obj


def read_judgements(folder: str | Path, stage: str, *, valid_only: bool = False) -> list[Judgement]:
    """Every record of ``stage`` in the store at ``folder``, in file order (no lock taken).

    ``valid_only`` keeps only valid records, one per record id (the first).
    """
    if stage not in STAGES:
        raise StoreError(f"unknown stage {stage!r}; stages are {STAGES}")
    out: list[Judgement] = []
    seen: set[str] = set()
    path = Path(folder) / f"{stage}.jsonl"
    for lineno, obj in _iter_lines(path):
        try:
            j = Judgement.from_dict(obj)
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"{path}, line {lineno}: malformed judgement record ({exc!r})") from None
        if valid_only:
            if not j.valid or j.record_id in seen:
                continue
            seen.add(j.record_id)
        out.append(j)
    return out


class JudgementStore:
    """A store folder; see the module docstring.

    Use as a context manager (or call :meth:`open` / :meth:`close`) to write::

        with JudgementStore("runs/judge-store") as store:
            store.append(judgement)

    Parameters
    ----------
    folder : the store folder (created when missing).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._lock_fd: int | None = None
        self._fds: dict[str, int] = {}
        self._valid: dict[str, dict[str, Judgement]] = {s: {} for s in STAGES}
        self._counts: dict[str, int] = {s: 0 for s in STAGES}
        self._attempts: dict[str, dict[str, int]] = {s: {} for s in STAGES}
        self._write_lock = threading.Lock()
        self._pending: list[tuple[str, bytes, Judgement, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"JudgementStore({str(self.folder)!r}, open={self.is_open})"

    # -- lifecycle ------------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._lock_fd is not None

    def path(self, stage: str) -> Path:
        return self.folder / f"{stage}.jsonl"

    def open(self) -> JudgementStore:
        """Take the write lock, cut torn tails, and index the valid records. Idempotent."""
        if self.is_open:
            return self
        check_store_folder(self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"judgement store {self.folder} is being written by another process (pid {holder}); wait for "
                "it to finish or judge into another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        try:
            for stage in STAGES:
                path = self.path(stage)
                self._cut_torn_tail(path)
                self._valid[stage] = {}
                self._counts[stage] = 0
                self._attempts[stage] = {}
                for j in read_judgements(self.folder, stage):
                    self._index(stage, j)
                if path.exists():
                    self._fds[stage] = os.open(path, os.O_WRONLY | os.O_APPEND, 0o644)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Write any records still queued, close the files and release the lock."""
        if self._pending:
            self._write_pending_now()
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> JudgementStore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fsync_dir(self) -> None:
        dfd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _cut_torn_tail(self, path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        data = path.read_bytes()
        keep = data.rfind(b"\n", 0, len(data) - 1 if data.endswith(b"\n") else len(data)) + 1
        tail = data[keep:]
        try:
            ok = tail.endswith(b"\n") and isinstance(json.loads(tail), dict)
        except ValueError:
            ok = False
        if ok:
            return
        torn = path.with_name(path.name + ".torn")
        with open(torn, "ab") as f:
            f.write(tail.rstrip(b"\n") + b"\n")
            f.flush()
            os.fsync(f.fileno())
        with open(path, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        log.warning(
            "%s: moved a torn last line (%d bytes, probably left by a crash) to %s; its window will be asked again",
            path,
            len(tail),
            torn,
        )

    # -- writing --------------------------------------------------------------------------------------

    def write_identity(self, identity: dict[str, Any]) -> Path:
        """Write ``identity`` (a JSON object) to ``identity.json`` atomically; requires the write lock.

        The file is made with the process's umask (like the JSONL files); a crash leaves either the old file
        or the new one, never a mix (an orphaned ``.identity.json.*.tmp`` is removed the next time).
        """
        self._require_open()
        path = self.folder / IDENTITY_FILE
        data = (json.dumps(identity, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        for stale in self.folder.glob(f".{IDENTITY_FILE}.*.tmp"):  # left by a crash; we hold the lock
            stale.unlink(missing_ok=True)
        tmp = self.folder / f".{IDENTITY_FILE}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._fsync_dir()
        return path

    def _require_open(self) -> None:
        if not self.is_open:
            raise StoreError(
                f"judgement store {self.folder} is not open for writing; use 'with JudgementStore(...) as store:' "
                "or call store.open() first"
            )

    def _write(self, items: Iterable[tuple[str, bytes, Judgement]]) -> None:
        """Append ``items`` (stage, line, judgement): one write and one fsync per stage touched."""
        by_stage: dict[str, list[tuple[bytes, Judgement]]] = {}
        for stage, line, j in items:
            by_stage.setdefault(stage, []).append((line, j))
        with self._write_lock:
            for stage, group in by_stage.items():
                fd = self._fds.get(stage)
                if fd is None:  # first record of this stage: create its file
                    fd = self._fds[stage] = os.open(self.path(stage), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    self._fsync_dir()
                buf = memoryview(b"".join(line for line, _ in group))
                while buf:
                    n = os.write(fd, buf)
                    buf = buf[n:]
                os.fsync(fd)
                for _, j in group:
                    self._index(stage, j)

    def _index(self, stage: str, j: Judgement) -> None:
        self._counts[stage] += 1
        self._attempts[stage][j.record_id] = self._attempts[stage].get(j.record_id, 0) + 1
        if j.valid:
            self._valid[stage].setdefault(j.record_id, j)

    def append(self, judgement: Judgement) -> None:
        """Append one record and fsync it before returning."""
        self._require_open()
        self._write([(judgement.window.stage, _encode(judgement), judgement)])

    def append_many(self, judgements: Iterable[Judgement]) -> int:
        """Append ``judgements`` with one write and one fsync per stage touched (bulk ingest); returns how many."""
        self._require_open()
        items = [(j.window.stage, _encode(j), j) for j in judgements]
        if items:
            self._write(items)
        return len(items)

    async def append_async(self, judgement: Judgement) -> None:
        """Append one record; returns once it is durable. Concurrent calls share one fsync per group.

        If the caller is cancelled after calling, the record is still written (now or at :meth:`close`).
        """
        self._require_open()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((judgement.window.stage, _encode(judgement), judgement, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush_loop())
        await asyncio.shield(fut)

    async def _flush_loop(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self._write, [(s, line, j) for s, line, j, _ in batch])
            except BaseException as exc:
                for *_, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc if isinstance(exc, Exception) else StoreError(repr(exc)))
                raise
            for *_, fut in batch:
                if not fut.done():
                    fut.set_result(None)

    async def drain(self) -> None:
        """Wait until every queued async append is durable."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    def _write_pending_now(self) -> None:
        batch, self._pending = self._pending, []
        self._write([(s, line, j) for s, line, j, _ in batch])
        for *_, fut in batch:
            if not fut.done() and not fut.get_loop().is_closed():
                fut.get_loop().call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))

    # -- reading --------------------------------------------------------------------------------------

    def is_done(self, stage: str, record_id: str) -> bool:
        """Whether a valid record with ``record_id`` is stored (requires the store to be open)."""
        self._require_open()
        return record_id in self._valid[stage]

    def attempts(self, stage: str, record_id: str) -> int:
        """How many records (answer attempts, valid or not) ``record_id`` has (requires an open store)."""
        self._require_open()
        return self._attempts[stage].get(record_id, 0)

    def valid(self, stage: str) -> dict[str, Judgement]:
        """record id -> first valid judgement of ``stage`` (open store: from memory; else read the file)."""
        if self.is_open:
            return dict(self._valid[stage])
        return {j.record_id: j for j in read_judgements(self.folder, stage, valid_only=True)}

    def records(self, stage: str) -> list[Judgement]:
        """Every record of ``stage``, valid or not, in file order (reads the file)."""
        return read_judgements(self.folder, stage)

    def count(self, stage: str) -> int:
        """Number of records (valid or not) of ``stage``."""
        if self.is_open:
            return self._counts[stage]
        return len(read_judgements(self.folder, stage))

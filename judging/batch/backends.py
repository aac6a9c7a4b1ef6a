"""Where a batch goes: a provider's batch API (through litellm) or request / output files for an offline engine.

Both behind one small interface, :class:`BatchBackend` (synchronous; the runner calls it from a worker thread):

- ``upload(path, name)`` -> a file id: hand over the request JSONL at ``path``;
- ``create(file_id, name, key)`` -> a batch id: start the batch, with metadata ``{"rcp_jax_key": key}``;
- ``find(key)`` -> the batch id created with that key, or ``None`` (a run killed between asking and hearing back);
- ``retrieve(batch_id)`` -> a :class:`BatchStatus`;
- ``download(status, path)``: write the batch's output (and error) lines to ``path``.

:class:`ProviderBatches` speaks the OpenAI Files + Batches API through litellm (``create_file``, ``create_batch``,
``retrieve_batch``, ``list_batches``, ``file_content``) with the judge's provider, ``api_base`` and key;
:class:`FileBatches` writes ``DIR/<name>.requests.jsonl`` and waits for ``DIR/<name>.output.jsonl`` (the format
``vllm run-batch`` writes), complete once every planned ``custom_id`` has a line or ``DIR/<name>.done`` exists.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcp_jax.judging.errors import JudgeError

log = logging.getLogger("rcp_jax.judging.batch.backends")

#: Batch statuses after which nothing changes any more.
TERMINAL = ("completed", "failed", "expired", "cancelled")
#: The metadata field carrying a batch's journal key.
KEY_FIELD = "rcp_jax_key"


class BatchError(JudgeError):
    """A batch could not be created, read or completed (the message names the batch and what to do)."""


class BatchPending(JudgeError):
    """A batch is not finished yet and the caller chose not to wait (``batch_wait``); running the same call again
    resumes it (it is polled, never submitted again). ``command`` is what to run meanwhile (offline files)."""

    def __init__(self, message: str, command: str = "") -> None:
        super().__init__(message)
        self.command = command


@dataclass(frozen=True)
class BatchStatus:
    """A batch as the server (or the files) report it.

    Attributes
    ----------
    batch_id, status : the batch and one of validating, in_progress, finalizing, completed, failed, expired,
        cancelling, cancelled.
    total, completed, failed : request counts (``0`` when not reported).
    output_file_id, error_file_id : where the results are (``None`` until there are any).
    errors : the batch-level errors the server gave (a failed batch's reason), as text.
    """

    batch_id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: str = ""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class BatchBackend:
    """The interface (module docstring). ``label`` names the backend in messages; ``wait_hint(name)`` says what
    a user runs while a batch waits (offline files: the engine's command; ``""`` for a provider)."""

    label = "batch backend"
    #: Most requests one batch may hold (``None``: no limit); a phase with more goes out as several batches at once.
    max_requests: int | None = None
    #: Largest request file one batch may have, in bytes (``None``: no limit).
    max_bytes: int | None = None

    def upload(self, path: Path, name: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def create(self, file_id: str, name: str, key: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def find(self, key: str) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def retrieve(self, batch_id: str) -> BatchStatus:  # pragma: no cover - interface
        raise NotImplementedError

    def download(self, status: BatchStatus, path: Path) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def wait_hint(self, name: str) -> str:
        return ""


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def status_of(batch: Any) -> BatchStatus:
    """A :class:`BatchStatus` from an OpenAI batch object (a mapping or litellm's ``LiteLLMBatch``)."""
    counts = _get(batch, "request_counts") or {}
    errors = _get(batch, "errors")
    data = _get(errors, "data") if errors is not None else None
    text = "; ".join(f"{_get(e, 'code') or ''} {_get(e, 'message') or ''}".strip() for e in (data or []))
    return BatchStatus(
        batch_id=str(_get(batch, "id")), status=str(_get(batch, "status")),
        total=int(_get(counts, "total", 0) or 0), completed=int(_get(counts, "completed", 0) or 0),
        failed=int(_get(counts, "failed", 0) or 0), output_file_id=_get(batch, "output_file_id"),
        error_file_id=_get(batch, "error_file_id"), errors=text,
    )


class ProviderBatches(BatchBackend):
    """A provider's batch API through litellm, for the judge's model (see the module docstring).

    Parameters
    ----------
    provider : litellm's ``custom_llm_provider`` (``"openai"``, ``"azure"``, ``"hosted_vllm"``, ...).
    api_base, api_key : the endpoint and key (``None``: the provider's default and environment variable).
    timeout : seconds per API request.
    retries, backoff_base, backoff_max : transient failures (429, 5xx, no connection) of every request but the one
        creating a batch are retried this often, waiting ``min(backoff_max, backoff_base * 2**n)`` seconds.
    max_requests, max_bytes : the most requests and the largest request file of one batch (OpenAI's limits: 50,000
        requests and 200 MB; the default byte limit leaves 5% to spare); a phase beyond them goes out as several
        batches, created together.
    """

    def __init__(self, provider: str = "openai", *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 600.0, retries: int = 5, backoff_base: float = 1.0, backoff_max: float = 60.0,
                 max_requests: int = 50_000, max_bytes: int = 190_000_000) -> None:
        self.retries, self.backoff_base, self.backoff_max = int(retries), float(backoff_base), float(backoff_max)
        if max_requests < 1 or max_bytes < 1:
            raise BatchError(f"max_requests and max_bytes must be >= 1, got {max_requests} and {max_bytes}")
        self.max_requests, self.max_bytes = int(max_requests), int(max_bytes)
        self.provider = provider
        self.label = f"{provider} batch API" + (f" at {api_base}" if api_base else "")
        self._conn = {k: v for k, v in (("api_base", api_base), ("api_key", api_key)) if v is not None}
        self.timeout = timeout

    @classmethod
    def for_judge(cls, judge: Any) -> ProviderBatches:
        """The batch API of ``judge``'s provider and endpoint (a :class:`rcp_jax.judging.LiteLLMJudge`)."""
        if not hasattr(judge, "provider_model") or not hasattr(judge, "connection"):
            raise BatchError(f"judge {getattr(judge, 'model', judge)!r} has no batch API: batches need a litellm "
                             "judge (a provider model string such as openai/gpt-4o-mini)")
        _, provider = judge.provider_model()
        return cls(provider, **judge.connection())

    def _litellm(self) -> Any:
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm  # noqa: PLC0415 - lazy, like the online judge

        litellm.suppress_debug_info = True
        return litellm

    def _call(self, what: str, fn: Any, *, retry: bool = True, **kw: Any) -> Any:
        """``fn(...)`` with the provider, endpoint and key; transient failures (429, 5xx, no connection) retried up
        to :attr:`retries` times with backoff when ``retry`` (never for creating a batch: the SDK's own retries are
        off, so a lost answer is found by its key instead of creating a second batch)."""
        tries = 0
        while True:
            try:
                return fn(custom_llm_provider=self.provider, timeout=self.timeout, max_retries=0, **self._conn, **kw)
            except Exception as exc:  # noqa: BLE001 - every provider error becomes one message naming the step
                status = getattr(exc, "status_code", None)
                transient = status in (408, 409, 425, 429) or (isinstance(status, int) and status >= 500) or (
                    status is None and "connect" in str(exc).lower())
                if retry and transient and tries < self.retries:
                    delay = min(self.backoff_max, self.backoff_base * 2.0**tries)
                    log.warning("%s: %s failed (%s, HTTP %s); retry %d/%d in %.1f s", self.label, what,
                                type(exc).__name__, status, tries + 1, self.retries, delay)
                    tries += 1
                    time.sleep(delay)
                    continue
                text = str(getattr(exc, "message", "") or exc)
                if self._conn.get("api_key"):
                    text = text.replace(self._conn["api_key"], "[redacted]")
                raise BatchError(f"{self.label}: {what} failed ({type(exc).__name__}, HTTP {status}: {text[:300]}). "
                                 "Nothing was lost: run the same command again to resume") from None

    def upload(self, path: Path, name: str) -> str:
        with open(path, "rb") as fh:
            obj = self._call(f"uploading {path.name}", self._litellm().create_file, file=(f"{name}.jsonl", fh),
                             purpose="batch")
        return str(_get(obj, "id"))

    def create(self, file_id: str, name: str, key: str) -> str:
        obj = self._call(f"creating the batch of {name}", self._litellm().create_batch, completion_window="24h",
                         endpoint="/v1/chat/completions", input_file_id=file_id,
                         metadata={KEY_FIELD: key, "rcp_jax_phase": name}, retry=False)
        return str(_get(obj, "id"))

    def find(self, key: str) -> str | None:
        after: str | None = None
        found: list[Any] = []
        for _ in range(1000):  # pages of 100: the newest 100,000 batches
            page = self._call("listing batches", self._litellm().list_batches, limit=100,
                              **({"after": after} if after else {}))
            data = list(_get(page, "data") or [])
            found += [b for b in data if (_get(b, "metadata") or {}).get(KEY_FIELD) == key]
            if found or not data or not _get(page, "has_more", False):
                break
            after = str(_get(data[-1], "id"))
        if len(found) > 1:
            log.warning("%d batches carry key %s; resuming the newest (%s)", len(found), key, _get(found[0], "id"))
        return str(_get(found[0], "id")) if found else None

    def retrieve(self, batch_id: str) -> BatchStatus:
        return status_of(self._call(f"reading batch {batch_id}", self._litellm().retrieve_batch, batch_id=batch_id))

    def download(self, status: BatchStatus, path: Path) -> None:
        with open(path, "wb") as out:
            for file_id in (status.output_file_id, status.error_file_id):
                if file_id:
                    self._download_one(file_id, out)
            out.flush()
            os.fsync(out.fileno())

    def _download_one(self, file_id: str, out: Any) -> None:
        """Append file ``file_id`` to ``out``: streamed chunk by chunk where litellm streams this provider's files
        (memory bounded by a chunk, not the file), else read whole."""
        litellm = self._litellm()
        last = b"\n"
        streamed = None
        try:
            streamed = self._call(f"downloading file {file_id}", litellm.file_content, file_id=file_id, stream=True)
        except BatchError:
            raise
        except Exception:  # noqa: BLE001 - a litellm without streaming: read the file whole below
            streamed = None
        chunks = getattr(streamed, "stream_iterator", None)
        if chunks is not None and not isinstance(chunks, bytes | bytearray | str):
            for chunk in chunks:
                if chunk:
                    out.write(chunk)
                    last = chunk[-1:]
        else:
            content = streamed if streamed is not None else self._call(
                f"downloading file {file_id}", litellm.file_content, file_id=file_id)
            data = getattr(content, "content", None)
            if data is None and hasattr(content, "read"):
                data = content.read()
            if isinstance(data, str):
                data = data.encode("utf-8")
            if not isinstance(data, bytes | bytearray):
                raise BatchError(f"{self.label}: file {file_id} came back as {type(content).__name__}, not bytes")
            out.write(data)
            last = bytes(data[-1:]) or b"\n"
        if last != b"\n":
            out.write(b"\n")


class FileBatches(BatchBackend):
    """Offline batch files in ``folder`` for an engine the user runs (``vllm run-batch``); module docstring.

    Parameters
    ----------
    folder : where ``<name>.requests.jsonl`` are written and ``<name>.output.jsonl`` are read.
    model : the model name the engine serves (shown in the ``vllm run-batch`` command).
    """

    def __init__(self, folder: str | Path, *, model: str = "MODEL") -> None:
        self.folder = Path(folder)
        self.model = model
        self.label = f"batch files in {self.folder}"

    def requests_path(self, name: str) -> Path:
        return self.folder / f"{name}.requests.jsonl"

    def output_path(self, name: str) -> Path:
        return self.folder / f"{name}.output.jsonl"

    def wait_hint(self, name: str) -> str:
        return (f"vllm run-batch -i {shlex.quote(str(self.requests_path(name)))} "
                f"-o {shlex.quote(str(self.output_path(name)))} --model {shlex.quote(self.model)}")

    def upload(self, path: Path, name: str) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.requests_path(name)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(path, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        return str(target)

    def create(self, file_id: str, name: str, key: str) -> str:
        return f"files:{name}"

    def find(self, key: str) -> str | None:
        return None  # creating is free and idempotent here: nothing can be paid for twice

    def _name(self, batch_id: str) -> str:
        return batch_id.removeprefix("files:")

    def retrieve(self, batch_id: str) -> BatchStatus:
        name = self._name(batch_id)
        requests, output = self.requests_path(name), self.output_path(name)
        if not requests.exists():
            raise BatchError(f"{requests} is gone: the batch's request file was moved or deleted; restore it, or "
                             f"remove the store's batches.jsonl lines of key for {name} to ask it afresh")
        planned = _custom_ids(requests)
        answered = _custom_ids(output) if output.exists() else set()
        done_marker = self.folder / f"{name}.done"
        complete = planned <= answered or done_marker.exists()
        return BatchStatus(batch_id=batch_id, status="completed" if complete else "in_progress", total=len(planned),
                           completed=len(planned & answered), output_file_id=str(output) if output.exists() else None)

    def download(self, status: BatchStatus, path: Path) -> None:
        if status.output_file_id:
            shutil.copyfile(status.output_file_id, path)
        else:
            path.write_bytes(b"")


def _custom_ids(path: Path) -> set[str]:
    """The ``custom_id`` of every readable line of a JSONL file (unreadable lines skipped)."""
    out: set[str] = set()
    with open(path, "rb") as fh:
        for raw in fh:
            at = raw.find(b'"custom_id"')
            if at < 0:
                continue
            try:
                cid = json.loads(raw).get("custom_id")
            except (ValueError, AttributeError):
                continue
            if isinstance(cid, str):
                out.add(cid)
    return out

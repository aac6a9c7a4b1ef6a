"""The extension log: an append-only record, beside the judgements, of what each extension added and when.

``<store>/extensions.jsonl``, one JSON object per line, written (one ``write`` + ``fsync``) while the
caller holds the store's write lock. Events of one extension share its ``extension`` id (the phase of its
windows):

- ``started``: before the first call: time, the runs and systems, depth, the judge family, the
  extension's constants, and per query the new documents and their anchors, with planned window counts;
- ``resumed``: a later run of an extension whose ``finished`` is missing (a kill or a judge failure);
- ``finished``: every window has a valid answer; with the calls this run made.

A crash can leave a torn last line: readers skip it with a warning, and the next append moves it to
``extensions.jsonl.torn`` first.
"""

from __future__ import annotations

import json
import os
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rcp_jax.errors import DataError

LOG_FILE = "extensions.jsonl"
FORMAT = 1


def log_path(store: str | Path) -> Path:
    """``<store>/extensions.jsonl``."""
    return Path(store) / LOG_FILE


def read_extension_log(store: str | Path) -> list[dict[str, Any]]:
    """Every event of the store's extension log in order (``[]`` when there is none).

    Raises:
        DataError: a line other than the last is not a JSON object (the file was edited or damaged).
    """
    path = log_path(store)
    if not path.is_file():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    if complete:
        lines = lines[:-1]
    out = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict) or "event" not in obj:
                raise ValueError("not an extension event")
        except ValueError as exc:
            if i == len(lines) - 1 and not complete:
                warnings.warn(f"{path}: skipping a torn last line {i + 1} (left by a crash)", stacklevel=2)
                break
            raise DataError(f"{path}, line {i + 1}: not an extension event ({exc}); the log is append-only, so "
                            "it was edited or damaged: move that line out or restore the file") from None
        out.append(obj)
    return out


def extension_status(store: str | Path, extension: str) -> str | None:
    """``"finished"``, ``"started"`` (begun, not finished) or None (never begun) for one extension id."""
    events = [e for e in read_extension_log(store) if e.get("extension") == extension]
    if not events:
        return None
    return "finished" if any(e["event"] == "finished" for e in events) else "started"


def append_event(store: str | Path, event: str, extension: str, **fields: Any) -> dict[str, Any]:
    """Append one event (the caller holds the store's write lock); returns the record written."""
    record = {"format": FORMAT, "event": event, "extension": extension,
              "time": datetime.now(UTC).isoformat(timespec="seconds"), **fields}
    path = log_path(store)
    line = (json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_plain) + "\n").encode("utf-8")
    _cut_torn_tail(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        buf = memoryview(line)
        while buf:
            buf = buf[os.write(fd, buf):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return record


def _cut_torn_tail(path: Path) -> None:
    """Move a torn last line (a crash mid-write) to ``extensions.jsonl.torn``, so the next event starts a line
    and the log never holds a bad line in its middle."""
    if not path.is_file() or not path.stat().st_size:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    with open(path.with_name(path.name + ".torn"), "ab") as fh:
        fh.write(data[keep:] + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    with open(path, "r+b") as fh:
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)

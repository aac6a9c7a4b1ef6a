"""Atomic file writes: every output file appears whole or not at all (temp file + fsync + rename).

A file is first written to a temporary file beside it, named ``.<name>.rcp-<pid>-<random>.tmp``, then
renamed over ``<name>``. Files are created with the user's umask (``0o666 & ~umask``: 0644 under the
usual umask 022), like any file a program writes, not 0600 as ``tempfile.mkstemp`` makes them.

A process killed between the two steps leaves its temporary file behind. The next atomic write into the
same folder removes such leftovers: only files of this exact pattern whose process (the pid in the
name) is gone, and temporary files of earlier rcp-jax versions (``.<name>.<8 random characters>.tmp``)
older than an hour whose ``<name>`` exists in the folder. Nothing else in the folder is touched.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

import pandas as pd

#: Our temporary files: ``.<target name>.rcp-<pid>-<8 hex>.tmp``.
TEMP_PATTERN = re.compile(r"^\.(?P<name>.+)\.rcp-(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")
#: Temporary files of earlier versions (``tempfile.mkstemp(prefix=".<name>.", suffix=".tmp")``).
OLD_TEMP_PATTERN = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")
OLD_TEMP_AGE_S = 3600.0

_cleaned: set[Path] = set()  # folders already swept by this process


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (same-folder temp file, fsync, ``os.replace``), with the umask's
    permissions; removes temporary files that killed earlier writes left in the folder (module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path.parent)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _create_temp(path: Path) -> tuple[int, str]:
    """Open a new temporary file beside ``path`` (O_EXCL; mode 0o666, so the kernel applies the umask)."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.rcp-{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")  # pragma: no cover


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_temp_files(folder: str | Path, *, force: bool = False) -> list[Path]:
    """Remove the temporary files killed atomic writes left in ``folder`` (see the module docstring).

    Once per folder and process unless ``force``. Returns the files removed. Files of live processes, and
    anything not matching our patterns, are left alone.
    """
    folder = Path(folder)
    key = folder.resolve()
    if key in _cleaned and not force:
        return []
    _cleaned.add(key)
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    now = time.time()
    for entry in entries:
        if not entry.name.endswith(".tmp") or not entry.is_file(follow_symlinks=False):
            continue
        m = TEMP_PATTERN.match(entry.name)
        if m is not None:
            stale = not _pid_alive(int(m["pid"]))
        else:
            m = OLD_TEMP_PATTERN.match(entry.name)
            try:
                stale = (m is not None and (folder / m["name"]).is_file()
                         and now - entry.stat(follow_symlinks=False).st_mtime > OLD_TEMP_AGE_S)
            except OSError:
                stale = False
        if stale:
            try:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
            except OSError:
                pass
    return removed


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON atomically (NaN written as null)."""
    return atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


def atomic_write_csv(path: str | Path, df: pd.DataFrame) -> Path:
    """Write a DataFrame as CSV atomically, with full float precision (round-trips bit for bit)."""
    return atomic_write_text(path, df.to_csv(index=False, float_format="%.17g"))


def _jsonable(obj: Any) -> Any:
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj

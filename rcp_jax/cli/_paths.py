"""Argument types for folder options (``--store``, ``--out``, ...): a plain mistake is a usage error.

``rcp-jax fit --out results.csv`` where ``results.csv`` is an existing file used to end in a
``FileExistsError`` traceback (exit 1) once the first output was written. ``type=folder`` makes argparse
refuse it up front (exit 2, before any judge call), naming the path and the fix. Light: no NumPy/pandas,
so ``rcp-jax --help`` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def file_in_the_way(path: Path) -> Path | None:
    """The existing non-folder at ``path`` or above it that would stop ``path`` being a folder, else None."""
    for p in (path, *path.parents):
        if p.exists():
            return None if p.is_dir() else p
    return None


def folder(text: str) -> Path:
    """argparse ``type`` of a folder option: refuses a path that is (or lies under) an existing file.

    A missing folder is fine (the verb creates it, or says it is missing when it must exist).
    """
    path = Path(text)
    blocker = file_in_the_way(path)
    if blocker is not None:
        if blocker == path:
            raise argparse.ArgumentTypeError(
                f"{text} is an existing file, not a folder: pass a folder path (it is created when missing), "
                "or move that file away"
            )
        raise argparse.ArgumentTypeError(
            f"{text} cannot be a folder: {blocker} is an existing file; pass a folder path (it is created when "
            "missing), or move that file away"
        )
    return path

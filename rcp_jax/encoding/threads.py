"""Independent calls run side by side, for encodings whose work releases the GIL (pyarrow's string kernels)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def run_concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """The results of ``calls`` (functions of no arguments), in order: the first runs on the calling thread,
    each other one on a thread of its own, started for this call and gone when it returns.

    Every call has finished when this returns or raises; an error of a call is raised here (the first
    call's first, then the others' in order).
    """
    if len(calls) < 2:
        return [call() for call in calls]
    with ThreadPoolExecutor(len(calls) - 1, thread_name_prefix="rcp-encoding") as pool:
        jobs = [pool.submit(call) for call in calls[1:]]
        first = calls[0]()
        return [first] + [job.result() for job in jobs]

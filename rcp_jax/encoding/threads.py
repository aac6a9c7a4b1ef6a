"""Independent calls run side by side, for encodings whose work releases the GIL (pyarrow, most numpy passes)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: Calls run at a time: the two cores the encodings are tuned for (a third thread only adds switching there).
WORKERS = 2


def run_concurrently(*calls: Callable[[], Any], workers: int = WORKERS) -> list[Any]:
    """The results of ``calls`` (functions of no arguments), in order, at most ``workers`` of them running at a
    time, on the threads of a pool started for this call and gone when it returns.

    An error of a call is raised here (the first in the order of the calls) once the calls already running
    have finished; calls not started by then are dropped.
    """
    if len(calls) < 2 or workers < 2:
        return [call() for call in calls]
    pool = ThreadPoolExecutor(min(workers, len(calls)), thread_name_prefix="rcp-encoding")
    try:
        jobs = [pool.submit(call) for call in calls]
        return [job.result() for job in jobs]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

"""Where the compiled blocks run: a thread pool of blocks on one device, or queries sharded over devices."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache, partial

import jax
import numpy as np

from rcp_jax.models.bradley_terry.kernel import _fit_block_jit, _fit_queries


def default_chunk(devices: Sequence[jax.Device]) -> int | None:
    """Queries per sequential batch: 1 on CPU (cache-resident, each query stops on its own), ``None``
    (all queries of a call at once) on accelerators."""
    return 1 if all(d.platform == "cpu" for d in devices) else None


def _default_threads() -> int:
    """Workers of :func:`_run_blocks` by default: the CPUs this process may run on (its affinity mask where the
    OS has one, e.g. ``taskset`` or a container's cpuset), rounded down to a power of two, at most 8."""
    import os

    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return 1 << (max(1, min(n, 8)).bit_length() - 1)


def _run_blocks(windows, m, ridge, tol, max_iter: int, block: int, chunk: int, threads: int | None):
    """:func:`~rcp_jax.models.bradley_terry.kernel._fit_queries` on one device, ``block`` queries per call (``Q`` a
    multiple of it), the calls run from a thread pool of ``threads`` workers (JAX's CPU client executes them
    in parallel); ``windows`` (:class:`~rcp_jax.models.bradley_terry.batching._PaddedWindows`) pads each block's windows.

    Every call is the same compiled program whatever ``Q``; each query's result is the same whatever the
    split (queries are fitted independently). Returns numpy arrays as :func:`~rcp_jax.models.bradley_terry.kernel._fit_block`.
    """
    q = m.shape[0]
    parts = _default_threads() if threads is None else max(1, int(threads))
    # jax.enable_x64 is thread-local: each worker thread sets it again, or a float64 fit would run
    # (and stop) in float32 there
    x64 = windows.np_dtype == np.float64

    def call(lo):
        di, sc = windows.block(lo, lo + block)
        with jax.enable_x64(x64):
            return jax.block_until_ready(_fit_block_jit(
                di, sc, m[lo : lo + block], ridge, tol, max_iter=max_iter, chunk=chunk))

    starts = range(0, q, block)
    if parts == 1:
        outs = [call(lo) for lo in starts]
    else:
        from concurrent.futures import ThreadPoolExecutor

        # JAX compiles a new program once even when several workers call it at the same time
        with ThreadPoolExecutor(min(parts, len(starts))) as pool:
            outs = list(pool.map(call, starts))
    if len(outs) == 1:
        return tuple(np.asarray(x) for x in outs[0])
    return tuple(np.concatenate([np.asarray(o[i]) for o in outs]) for i in range(5))


@lru_cache(maxsize=None)
def _sharded_fit_block(devices: tuple, max_iter: int, chunk: int):
    """``_fit_queries`` mapped over a 1-D mesh of ``devices``: each device fits its own queries."""
    from jax.sharding import Mesh, PartitionSpec as P

    mesh = Mesh(np.asarray(devices), ("query",))
    spec = P("query")
    fun = jax.shard_map(
        partial(_fit_queries, max_iter=max_iter, chunk=chunk), mesh=mesh,
        in_specs=(spec, spec, spec, P(), P()), out_specs=(spec,) * 5, check_vma=False,
    )
    return jax.jit(fun), mesh


def _run_sharded(devs, di, sc, m, ridge, tol, np_dtype, max_iter: int, size: int, chunk: int):
    """:func:`_fit_queries` sharded over ``devs``, ``size`` queries per call (dispatched together)."""
    fun, _ = _sharded_fit_block(devs, max_iter, chunk)
    r, t = np.asarray(ridge, np_dtype), np.asarray(tol, np_dtype)
    outs = [fun(di[lo : lo + size], sc[lo : lo + size], m[lo : lo + size], r, t) for lo in range(0, di.shape[0], size)]
    if len(outs) == 1:
        return tuple(np.asarray(x) for x in outs[0])
    return tuple(np.concatenate([np.asarray(o[i]) for o in outs]) for i in range(5))

"""Where ``rcp_jax.models.bradley_terry.fit_windows`` spends its time, optionally A/B against another copy.

For each size (the benchmark collection of :mod:`benchmarks._common`: 150 documents, 216 windows of 10 per
query) prints:

* ``fit_windows`` wall and process CPU (medians of ``--repeats`` warm calls, default threads and one
  thread), interleaved with ``--base`` (a path to a one-module ``bradley_terry.py`` of before the split
  into ``models/bradley_terry/``, e.g. ``git show 9c2673e:models/bradley_terry.py > /tmp/bt_base.py``) when given, with the largest |theta|
  difference and both iteration histograms;
* the host time outside the compiled calls (``fit_windows`` minus ``_run_blocks``);
* per query, CPU microseconds of the compiled stages on one 64-query block run on one thread: the pair
  statistics alone (:func:`_block_pairs` + :func:`_query_scatter`), the whole fit without Newton
  iterations (statistics, log-odds start, first trial point, components, SEs) and the whole fit.

Usage: ``.venv/bin/python -m benchmarks.bt_kernel_profile [--sizes 500 1000 10000] [--repeats 3]
[--base /tmp/bt_base.py]``. On a shared machine read the CPU columns; the load average is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import numpy as np

from benchmarks import _common as C


def _load(path: str):
    spec = importlib.util.spec_from_file_location("bt_under_test_base", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _median_timing(fun, repeats: int):
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fun()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return float(np.median(walls)), float(np.median(cpus))


def stage_costs(bt, data: dict, queries: int = 64, repeats: int = 7) -> dict:
    """CPU microseconds per query of the compiled stages (one block of ``queries``, one thread); ``bt`` is the
    module of the compiled kernel (``rcp_jax.models.bradley_terry.kernel``, or a one-module copy)."""
    import jax

    n, v, w = 160, 256, data["window_docs"].shape[1]
    wq = data["window_query"]
    keep = wq < queries
    di = np.full((queries, v, w), -1, np.int32)
    sc = np.zeros((queries, v, w), np.float32)
    counts = np.bincount(wq[keep], minlength=queries)
    slot = np.arange(keep.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    di[wq[keep], slot] = data["window_docs"][keep]
    sc[wq[keep], slot] = data["window_scores"][keep]
    m = np.arange(n)[None, :] < data["n_docs"][:queries, None]
    out = {}

    def per_query(fun):
        jax.block_until_ready(fun())
        times = []
        for _ in range(repeats):
            c = time.process_time()
            jax.block_until_ready(fun())
            times.append(time.process_time() - c)
        return round(float(np.median(times)) / queries * 1e6, 1)

    if hasattr(bt, "_block_pairs"):
        @jax.jit
        def statistics(di, sc):
            def one(x):
                both, anti = bt._query_scatter(x[0], x[1], x[2], x[4], n, w * (w - 1) // 2)
                return both.sum() + anti.sum()

            return jax.lax.map(one, bt._block_pairs(di, sc, n))

        out["statistics"] = per_query(lambda: statistics(di, sc))
    for name, iters in (("no Newton iteration", 0), ("whole fit", 50)):
        out[name] = per_query(lambda: bt._fit_block_jit(di, sc, m, 1e-4, 1e-5, max_iter=iters, chunk=1))
    out["Newton iterations"] = round(out["whole fit"] - out["no Newton iteration"], 1)
    return out


def host_time(bt, args, repeats: int) -> float:
    """Median wall seconds of ``fit_windows`` outside its compiled calls (``_run_blocks``); ``bt`` is the module
    of ``fit_windows`` (``rcp_jax.models.bradley_terry.batching``, or a one-module copy)."""
    inner = bt._run_blocks
    spent = []

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent.append(time.perf_counter() - t)

    bt._run_blocks = timed
    try:
        out = []
        for _ in range(repeats):
            spent.clear()
            t = time.perf_counter()
            bt.fit_windows(*args)
            out.append(time.perf_counter() - t - sum(spent))
    finally:
        bt._run_blocks = inner
    return float(np.median(out))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 10000], help="query counts (default: 500 1000 10000)")
    parser.add_argument("--repeats", type=int, default=3, help="warm repeats per measurement (default: 3)")
    parser.add_argument("--base", default=None, help="path of another bradley_terry.py to time beside this one (default: none)")
    args = parser.parse_args(argv)

    from rcp_jax.models.bradley_terry import batching, kernel

    mods = {"new": (kernel, batching)}  # (the kernel's module, fit_windows' module)
    if args.base:
        base = _load(args.base)
        mods["base"] = (base, base)
    print(f"load average before: {tuple(round(x, 2) for x in os.getloadavg())}")
    for size in args.sizes:
        data = C.collection(size)
        fit_args = (data["window_docs"].astype(np.int32), data["window_scores"], data["window_query"], data["n_docs"])
        fits = {name: mod.fit_windows(*fit_args) for name, (_, mod) in mods.items()}  # warm up (compiles)
        timings = {name: {"default": [], "1 thread": []} for name in mods}
        for _ in range(args.repeats):  # interleaved A/B
            for name, (_, mod) in mods.items():
                timings[name]["default"].append(_median_timing(lambda: mod.fit_windows(*fit_args), 1))
                timings[name]["1 thread"].append(_median_timing(lambda: mod.fit_windows(*fit_args, threads=1), 1))
        for name, (kernel_mod, mod) in mods.items():
            row = {k: tuple(round(float(x), 3) for x in np.median(np.array(v), axis=0)) for k, v in timings[name].items()}
            print(f"{size} queries [{name}] fit_windows wall/CPU s: {row['default']} (1 thread {row['1 thread']}); "
                  f"iterations {np.bincount(fits[name].iterations).tolist()}; host outside compiled calls "
                  f"{host_time(mod, fit_args, args.repeats):.3f} s")
            if size <= 1000:
                print(f"    per-query CPU us (64-query block, 1 thread): {stage_costs(kernel_mod, data)}")
        if "base" in fits:
            print(f"    max |theta new - base| {np.abs(fits['new'].theta - fits['base'].theta).max():.2e}")
    print(f"load average after: {tuple(round(x, 2) for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

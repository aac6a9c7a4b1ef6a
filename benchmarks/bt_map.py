"""Bradley-Terry MAP at scale: rcp-jax's batched fit vs a per-query scipy L-BFGS loop vs choix.

Every query has 150 documents and 216 windows of 10 (simulated judge, :mod:`benchmarks._common`).

* **ours**: ``rcp_jax.models.bradley_terry.fit_windows`` (all queries at once; float32 default, float64 option),
  from raw windows to centred scores, standard errors and connectivity.
* **scipy**: for each query, the same objective (METHOD section 1: soft labels, weight 2/w, mean
  scale, ridge 1e-4) aggregated to its unique pairs, float64, analytic gradient, ``L-BFGS-B``
  (gtol 1e-9). Timed from the query's windows (pair aggregation included), like ours.
* **choix**: ``choix.ilsr_pairwise`` on hard outcomes (higher judge score wins; tied scores dropped),
  alpha = 0.1. A different model (hard labels), so agreement is the Spearman correlation with ours.

Agreement: max |theta_ours - theta_scipy| over every document of every query timed (scipy scores
centred like ours). The scipy and choix loops at 10,000 queries are extrapolated from their per-query
time at 1,000 (the loop is linear in the number of queries); choix (about 1 s a query: it builds its
Markov chain in Python) runs in full up to 100 queries and is extrapolated beyond. The output says so.

Usage: ``python -m benchmarks.bt_map [--sizes 10 100 1000 10000] [--tiny] [--no-memory]``.
Writes ``benchmarks/out/bt_map.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

RIDGE = 1e-4
LABEL_CLIP = 0.01
CHOIX_ALPHA = 0.1  # choix's examples use 0.01-0.1; at 1e-4 ILSR needs >100 iterations on these data, at 0.01 ~5 s a query


# --------------------------------------------------------------------------------------------------
# the alternatives
# --------------------------------------------------------------------------------------------------
def _query_slices(window_query: np.ndarray, n_queries: int):
    """``(order, bounds)``: the windows of query q are ``order[bounds[q]:bounds[q + 1]]``."""
    order = np.argsort(window_query, kind="stable")
    bounds = np.searchsorted(window_query[order], np.arange(n_queries + 1))
    return order, bounds


def window_pairs(docs: np.ndarray, scores: np.ndarray):
    """The soft preferences of one query's windows (docs int[V, w], -1 = empty slot; scores float[V, w]):
    ``(a, b, weight, p)`` per real pair, p = clip(sigmoid(s_a - s_b)) the win of a over b, weight = 2 / size."""
    from scipy.special import expit

    w = docs.shape[1]
    ia, ib = np.triu_indices(w, 1)
    a, b = docs[:, ia], docs[:, ib]
    ok = (a >= 0) & (b >= 0)
    size = (docs >= 0).sum(axis=1, keepdims=True)
    weight = np.broadcast_to(np.where(size > 1, 2.0 / np.maximum(size, 1), 0.0), a.shape)[ok]
    p = np.clip(expit(scores[:, ia] - scores[:, ib]), LABEL_CLIP, 1 - LABEL_CLIP)[ok]
    return a[ok], b[ok], weight, p


def scipy_fit_query(docs: np.ndarray, scores: np.ndarray, n: int):
    """One query: unique-pair statistics, then L-BFGS in float64 with an analytic gradient."""
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    a, b, weight, p = window_pairs(docs, scores)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    p_lo = np.where(a < b, p, 1.0 - p)  # soft win of the lower index
    key = lo * n + hi
    uniq, inv = np.unique(key, return_inverse=True)
    w_lo = np.bincount(inv, weight * p_lo)  # summed weight x win of lo over hi
    w_hi = np.bincount(inv, weight * (1.0 - p_lo))
    i, j = uniq // n, uniq % n
    total = weight.sum()

    def f(theta):
        d = theta[i] - theta[j]
        value = -(w_lo * log_expit(d) + w_hi * log_expit(-d)).sum() / total + 0.5 * RIDGE * theta @ theta
        r = ((w_lo + w_hi) * expit(d) - w_lo) / total  # d value / d d
        grad = np.bincount(i, r, minlength=n) - np.bincount(j, r, minlength=n) + RIDGE * theta
        return value, grad

    res = minimize(f, np.zeros(n), jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-15, "maxiter": 5000})
    return res.x - res.x.mean(), res.nit


def scipy_loop(data: dict, n_queries: int):
    """Per-query scipy fits (imports and scipy's first-call setup are warmed up by :func:`main` first)."""
    order, bounds = _query_slices(data["window_query"], n_queries)
    theta = np.zeros((n_queries, C.N_DOCS))
    iters = []
    for q in range(n_queries):
        rows = order[bounds[q] : bounds[q + 1]]
        theta[q], nit = scipy_fit_query(data["window_docs"][rows], data["window_scores"][rows], C.N_DOCS)
        iters.append(nit)
    return theta, float(np.mean(iters))


def choix_loop(data: dict, n_queries: int):
    import choix

    order, bounds = _query_slices(data["window_query"], n_queries)
    theta = np.zeros((n_queries, C.N_DOCS))
    ia, ib = np.triu_indices(data["window_docs"].shape[1], 1)
    for q in range(n_queries):
        rows = order[bounds[q] : bounds[q + 1]]
        docs, scores = data["window_docs"][rows], data["window_scores"][rows]
        a, b = docs[:, ia].ravel(), docs[:, ib].ravel()
        sa, sb = scores[:, ia].ravel(), scores[:, ib].ravel()
        keep = (a >= 0) & (b >= 0) & (sa != sb)
        win = np.where(sa > sb, a, b)[keep]
        lose = np.where(sa > sb, b, a)[keep]
        est = choix.ilsr_pairwise(C.N_DOCS, list(zip(win.tolist(), lose.tolist())), alpha=CHOIX_ALPHA, max_iter=1000)
        theta[q] = est - est.mean()
    return theta


def ours(data: dict, n_queries: int, dtype: str = "float32"):
    import jax.numpy as jnp

    from rcp_jax.models.bradley_terry import fit_windows

    fit = fit_windows(
        data["window_docs"], data["window_scores"], data["window_query"], data["n_docs"],
        dtype=jnp.float64 if dtype == "float64" else jnp.float32,
    )
    return fit


def _spearman_mean(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(np.mean([spearmanr(a, b).statistic for a, b in zip(x, y)]))


# --------------------------------------------------------------------------------------------------
# child process: one method at one size, for peak memory
# --------------------------------------------------------------------------------------------------
def child(method: str, n_queries: int, limit: int) -> None:
    data = C.collection(n_queries)
    t = time.perf_counter()
    if method == "ours":
        ours(data, n_queries)
        fitted = n_queries
    elif method == "ours64":
        ours(data, n_queries, "float64")
        fitted = n_queries
    elif method in ("scipy", "choix"):
        fitted = min(limit, n_queries)
        sub = {k: v for k, v in data.items()}
        keep = data["window_query"] < fitted
        for k in ("window_docs", "window_scores", "window_query"):
            sub[k] = data[k][keep]
        (scipy_loop if method == "scipy" else choix_loop)(sub, fitted)
    else:
        raise SystemExit(f"unknown method {method}")
    print(json.dumps({"method": method, "queries_loaded": n_queries, "queries_fitted": fitted,
                      "run_s": time.perf_counter() - t, "self_peak_kib": C.self_peak_kib()}))


# --------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--tiny", action="store_true", help="sizes 10 and 30 only, 1 warm repeat, small memory run")
    ap.add_argument("--loop-limit", type=int, default=1000, help="largest size at which the scipy/choix loops run in full")
    ap.add_argument("--choix-limit", type=int, default=100, help="largest size at which choix runs in full")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("METHOD", "QUERIES", "LIMIT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return {}
    sizes = [10, 30] if args.tiny else sorted(args.sizes)
    repeats = 1 if args.tiny else 3
    print(C.header("BT MAP: 150 docs x 216 windows of 10 per query"))
    rows, results = [], {"machine": C.machine(), "sizes": {}}
    per_query = {}
    warm_up = C.collection(2)
    scipy_loop(warm_up, 2)  # imports and first-call setup of scipy, outside the timings
    choix_loop(warm_up, 1)
    import jax

    import rcp_jax.models.bradley_terry  # noqa: F401 - import and backend start-up are not compile time

    jax.devices()
    for q in sizes:
        data = C.collection(q)
        rep = repeats if q <= 1000 else 2
        fit, cold, warm = C.timed(ours, data, q, repeats=rep)
        res = {"queries": q, "ours_cold_s": cold, "ours_warm_s": warm, "ours_warm_cpu_s": C.LAST_CPU["warm_cpu_s"],
               "ours_compile_s": max(cold - warm, 0.0), "ours_newton_iters": int(fit.iterations.max())}
        if q <= 1000:
            fit64, cold64, warm64 = C.timed(ours, data, q, "float64", repeats=rep)
            res.update(ours64_cold_s=cold64, ours64_warm_s=warm64)
        if q <= args.loop_limit:
            (ref, nit), t_scipy = C.once(scipy_loop, data, q)
            per_query["scipy"] = t_scipy / q
            per_query["scipy_cpu"] = C.LAST_CPU["once_cpu_s"] / q
            res.update(scipy_s=t_scipy, scipy_cpu_s=C.LAST_CPU["once_cpu_s"], scipy_lbfgs_iters=nit, scipy_extrapolated=False,
                       max_abs_diff_f32=float(np.abs(fit.theta - ref).max()))
            if q <= 1000:
                res["max_abs_diff_f64"] = float(np.abs(fit64.theta - ref).max())
        else:
            res.update(scipy_s=per_query.get("scipy", np.nan) * q, scipy_cpu_s=per_query.get("scipy_cpu", np.nan) * q,
                       scipy_extrapolated=True)
        if q <= args.choix_limit:
            ch, t_choix = C.once(choix_loop, data, q)
            per_query["choix"] = t_choix / q
            res.update(choix_s=t_choix, choix_extrapolated=False, choix_spearman_vs_ours=_spearman_mean(ch, fit.theta))
        else:
            res.update(choix_s=per_query.get("choix", np.nan) * q, choix_extrapolated=True)
        res["speedup_vs_scipy"] = res["scipy_s"] / warm
        res["cpu_speedup_vs_scipy"] = res["scipy_cpu_s"] / res["ours_warm_cpu_s"]
        res["speedup_vs_choix"] = res["choix_s"] / warm
        res["spearman_ours_truth"] = _spearman_mean(fit.theta, data["relevance"])
        results["sizes"][q] = res
        rows.append({
            "q": q, "ours_w": warm, "ours_c": cold, "o64": res.get("ours64_warm_s"),
            "scipy": res["scipy_s"], "choix": res["choix_s"], "x_scipy": res["speedup_vs_scipy"],
            "x_choix": res["speedup_vs_choix"], "x_cpu": res["cpu_speedup_vs_scipy"],
            "diff": res.get("max_abs_diff_f32"), "diff64": res.get("max_abs_diff_f64"),
            "rho": res.get("choix_spearman_vs_ours"),
            "note": ", ".join(k for k in ("scipy", "choix") if res[f"{k}_extrapolated"]) + (" extrapolated" if res["choix_extrapolated"] else ""),
        })
        print(f"  done {q} queries: ours warm {warm:.3f}s", flush=True)
    print(C.table(rows, [
        ("q", "queries", "d"), ("ours_w", "ours warm s", ".3f"), ("ours_c", "ours cold s", ".2f"),
        ("o64", "ours f64 warm s", ".3f"), ("scipy", "scipy loop s", ".2f"), ("choix", "choix ilsr s", ".2f"),
        ("x_scipy", "x vs scipy", ".1f"), ("x_cpu", "x vs scipy (cpu s)", ".1f"), ("x_choix", "x vs choix", ".1f"),
        ("diff", "max|d theta| f32", ".1e"), ("diff64", "max|d theta| f64", ".1e"),
        ("rho", "choix rho vs ours", ".3f"), ("note", "", "s"),
    ]))
    if not args.no_memory:
        big = max(sizes)
        limit = 10 if args.tiny else 100
        mem = {}
        for method in ("ours", "scipy", "choix"):
            mem[method] = C.peak_rss_of(Path(__file__), "--child", method, str(big), str(limit if method != "choix" else 10))
        results["peak_rss"] = mem
        print(f"peak RSS at {big} queries (each in its own process; the scipy/choix loops load all {big} "
              f"queries and fit the first {limit} (choix: 10): their memory does not grow with the query count):")
        for method, m in mem.items():
            print(f"  {method:6s} " + (f"{m['peak_rss_gib']:.2f} GiB  (process wall {m['wall_s']:.1f}s)" if m["ok"] else f"failed: {m['error']}"))
    path = C.write_json("bt_map", results)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()

"""2PL calibration MAP at scale: rcp-jax vs scipy L-BFGS with an analytic numpy gradient.

Inputs: the benchmark collection (150 documents per query, ~6.7 rubric placements per document, 5
criteria), BT scores from ``rcp_jax.models.bradley_terry.fit_windows`` (not timed), collapsed to binomial
cells ``(passes, trials)`` per (query, document, criterion).

* **ours**: ``rcp_jax.models.irt.fit_2pl_calibration`` (Levenberg-Marquardt Newton, analytic Hessians, Schur
  complement over the per-query 2 x 2 blocks), float32 default and float64.
* **scipy**: the same MAP objective (METHOD section 3: ``gamma = C softmax(u)``, ``beta = v - mean v``,
  ``tau = softplus(t)``, mean BCE + tau/alpha priors / (N C) + ridge) over the same cells, float64,
  analytic gradient with ``np.bincount``, ``L-BFGS-B`` (gtol 1e-10, ftol 1e-15) on all 2C + 2Q
  parameters jointly.

Agreement: the largest absolute difference of the calibrated gains ``g(tau theta + alpha)`` over every
document, and of gamma and beta. Above ``--scipy-limit`` queries (default 1,000) the scipy time is
extrapolated linearly from the largest size it ran at (an optimistic figure for scipy: its iteration
count grows with the number of parameters); the output says so.

Usage: ``python -m benchmarks.calibration_map [--sizes ...] [--tiny] [--no-memory]``.
Writes ``benchmarks/out/calibration_map.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

RIDGE = 1e-4
C_CRIT = 5


def inputs(n_queries: int, data: dict | None = None) -> dict:
    """BT scores (cached per size) and binomial cells of the first ``n_queries`` queries."""
    from rcp_jax.models import irt

    data = C.collection(n_queries) if data is None else data
    path = C.CACHE / f"bt_theta_{n_queries}.npy"
    if path.exists():
        theta = np.load(path)
    else:
        from rcp_jax.models.bradley_terry import fit_windows

        theta = fit_windows(data["window_docs"], data["window_scores"], data["window_query"], data["n_docs"]).theta
        C.CACHE.mkdir(parents=True, exist_ok=True)
        np.save(path, theta)
    passes, trials = irt.collapse_placements(data["rubric_query"], data["rubric_doc"], data["rubric_answers"], n_queries, C.N_DOCS)
    return {"theta": theta, "passes": passes, "trials": trials, "cells": irt.calibration_cells(theta, passes, trials)}


def ours(inp: dict, dtype: str = "float32"):
    import jax.numpy as jnp

    from rcp_jax.models import irt

    return irt.fit_2pl_calibration(inp["cells"], dtype=jnp.float64 if dtype == "float64" else jnp.float32)


def scipy_fit(inp: dict, max_iter: int = 100000):
    """Joint L-BFGS over (u, v, t, alpha) with an analytic gradient on the nonzero binomial cells."""
    from scipy.optimize import minimize
    from scipy.special import expit

    theta, passes, trials = inp["theta"], inp["passes"], inp["trials"]
    n_q = theta.shape[0]
    qq, dd, cc = np.nonzero(trials)
    th = theta[qq, dd]
    ps, tr = passes[qq, dd, cc], trials[qq, dd, cc]
    total = tr.sum()
    has = np.bincount(qq, tr, minlength=n_q) > 0
    c = C_CRIT

    def f(x):
        u, v, t, a = x[:c], x[c : 2 * c], x[2 * c : 2 * c + n_q], x[2 * c + n_q :]
        e = np.exp(u - u.max())
        gamma = c * e / e.sum()
        beta = v - v.mean()
        tau = np.logaddexp(0.0, t)
        lin = tau[qq] * th + a[qq] - beta[cc]
        z = gamma[cc] * lin
        value = (tr * np.logaddexp(0.0, z) - ps * z).sum() / total
        value += (has * ((tau - 1.0) ** 2 / 2 + a**2 / 8)).sum() / total + 0.5 * RIDGE * (u @ u + v @ v)
        r = (tr * expit(z) - ps) / total
        d_gamma = np.bincount(cc, r * lin, minlength=c)
        d_beta = -np.bincount(cc, r * gamma[cc], minlength=c)
        d_tau = np.bincount(qq, r * gamma[cc] * th, minlength=n_q) + has * (tau - 1.0) / total
        d_a = np.bincount(qq, r * gamma[cc], minlength=n_q) + has * a / (4 * total)
        d_u = gamma * (d_gamma - (gamma * d_gamma).sum() / c) + RIDGE * u
        d_v = d_beta - d_beta.mean() + RIDGE * v
        d_t = d_tau * expit(t)
        return value, np.concatenate([d_u, d_v, d_t, d_a])

    x0 = np.concatenate([np.zeros(2 * c), np.full(n_q, np.log(np.e - 1.0)), np.zeros(n_q)])
    res = minimize(f, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "ftol": 1e-15, "gtol": 1e-10, "maxcor": 30})
    u, v, t, a = res.x[:c], res.x[c : 2 * c], res.x[2 * c : 2 * c + n_q], res.x[2 * c + n_q :]
    e = np.exp(u - u.max())
    return {"gamma": c * e / e.sum(), "beta": v - v.mean(), "tau": np.logaddexp(0.0, t), "alpha": a, "nit": res.nit,
            "objective": res.fun}


def gains(fit, theta: np.ndarray) -> np.ndarray:
    from rcp_jax.models.simulate import true_gain

    g = lambda k: fit[k] if isinstance(fit, dict) else getattr(fit, k)  # noqa: E731
    return true_gain(g("tau")[:, None] * theta + g("alpha")[:, None], g("gamma"), g("beta"))


def child(method: str, n_queries: int) -> None:
    inp = inputs(n_queries)
    t = time.perf_counter()
    if method == "ours":
        ours(inp)
    elif method == "ours64":
        ours(inp, "float64")
    elif method == "scipy":
        scipy_fit(inp, max_iter=30)  # memory does not depend on the iteration count
    else:
        raise SystemExit(f"unknown method {method}")
    print(json.dumps({"method": method, "queries": n_queries, "run_s": time.perf_counter() - t, "self_peak_kib": C.self_peak_kib()}))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--tiny", action="store_true", help="sizes 10 and 30 only, 1 warm repeat")
    ap.add_argument("--scipy-limit", type=int, default=1000)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "QUERIES"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return {}
    sizes = [10, 30] if args.tiny else sorted(args.sizes)
    repeats = 1 if args.tiny else 3
    print(C.header("2PL calibration MAP: 150 docs x ~6.7 rubric placements x 5 criteria per query"))
    import jax

    import rcp_jax.models.irt  # noqa: F401

    jax.devices()
    scipy_fit(inputs(2), max_iter=5)  # scipy imports and first-call setup outside the timings
    rows, results = [], {"machine": C.machine(), "sizes": {}}
    per_query = {}
    for q in sizes:
        inp = inputs(q)
        fit, cold, warm = C.timed(ours, inp, repeats=repeats)
        res = {"queries": q, "ours_cold_s": cold, "ours_warm_s": warm, "ours_warm_cpu_s": C.LAST_CPU["warm_cpu_s"],
               "ours_compile_s": max(cold - warm, 0.0), "ours_iterations": fit.iterations, "ours_converged": fit.converged}
        fit64, cold64, warm64 = C.timed(ours, inp, "float64", repeats=repeats)
        res.update(ours64_cold_s=cold64, ours64_warm_s=warm64, ours64_iterations=fit64.iterations)
        if q <= args.scipy_limit:
            ref, t_scipy = C.once(scipy_fit, inp)
            per_query["scipy"] = t_scipy / q
            per_query["scipy_cpu"] = C.LAST_CPU["once_cpu_s"] / q
            g_ref = gains(ref, inp["theta"])
            res.update(
                scipy_s=t_scipy, scipy_cpu_s=C.LAST_CPU["once_cpu_s"], scipy_iterations=ref["nit"], scipy_extrapolated=False,
                max_gain_diff_f32=float(np.abs(gains(fit, inp["theta"]) - g_ref).max()),
                max_gain_diff_f64=float(np.abs(gains(fit64, inp["theta"]) - g_ref).max()),
                max_item_diff_f32=float(max(np.abs(fit.gamma - ref["gamma"]).max(), np.abs(fit.beta - ref["beta"]).max())),
                max_item_diff_f64=float(max(np.abs(fit64.gamma - ref["gamma"]).max(), np.abs(fit64.beta - ref["beta"]).max())),
            )
        else:
            res.update(scipy_s=per_query["scipy"] * q, scipy_cpu_s=per_query["scipy_cpu"] * q, scipy_extrapolated=True)
        res["speedup_vs_scipy"] = res["scipy_s"] / warm
        res["cpu_speedup_vs_scipy"] = res["scipy_cpu_s"] / res["ours_warm_cpu_s"]
        results["sizes"][q] = res
        rows.append({
            "q": q, "w": warm, "c": cold, "w64": warm64, "it": f"{fit.iterations}/{fit64.iterations}",
            "scipy": res["scipy_s"], "sit": str(res.get("scipy_iterations", "-")), "x": res["speedup_vs_scipy"],
            "xc": res["cpu_speedup_vs_scipy"], "g32": res.get("max_gain_diff_f32"), "g64": res.get("max_gain_diff_f64"),
            "i32": res.get("max_item_diff_f32"), "note": "scipy extrapolated" if res["scipy_extrapolated"] else "",
        })
        print(f"  done {q} queries: ours warm {warm:.3f}s", flush=True)
    print(C.table(rows, [
        ("q", "queries", "d"), ("w", "ours warm s", ".3f"), ("c", "ours cold s", ".2f"), ("w64", "ours f64 warm s", ".3f"),
        ("it", "LM iters f32/f64", "s"), ("scipy", "scipy L-BFGS s", ".2f"), ("sit", "L-BFGS iters", "s"),
        ("x", "x vs scipy", ".1f"), ("xc", "x vs scipy (cpu s)", ".1f"), ("g32", "max|d gain| f32", ".1e"),
        ("g64", "max|d gain| f64", ".1e"), ("i32", "max|d gamma,beta| f32", ".1e"), ("note", "", "s"),
    ]))
    if not args.no_memory:
        big = max(sizes)
        mem = {m: C.peak_rss_of(Path(__file__), "--child", m, str(big)) for m in ("ours", "scipy")}
        results["peak_rss"] = mem
        print(f"peak RSS at {big} queries (each in its own process; inputs loaded from the cache; scipy runs 30 "
              "L-BFGS iterations: its memory does not depend on the iteration count):")
        for method, m in mem.items():
            print(f"  {method:6s} " + (f"{m['peak_rss_gib']:.2f} GiB" if m["ok"] else f"failed: {m['error']}"))
    path = C.write_json("calibration_map", results)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()

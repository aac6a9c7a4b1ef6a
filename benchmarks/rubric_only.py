"""Rubric-only 2PL (marginal ML) at scale: rcp-jax vs girth, theta-irt and scipy.

Items are the (query, document) pairs of the benchmark collection (150 per query), answering 5 yes/no
criteria. Two data sets per size:

* **binary**: each document's first rubric placement only (one 0/1 answer per criterion): the input
  every IRT package takes (an items x criteria 0/1 matrix).
* **counts**: all ~6.7 placements per document as binomial ``(passes, trials)`` counts (the RCP
  rubric-only mode); girth and theta-irt take single 0/1 responses, so only ours and scipy run here.

Methods (each on identical inputs):

* **ours**: ``rcp_jax.models.irt.fit_rubric_only`` (float64; 561-point grid on [-18, 10]; distinct answer rows
  weighted by their counts; Levenberg-Marquardt Newton with closed-form Hessians).
* **scipy**: the same objective on the same grid and distinct rows, ``L-BFGS-B`` with the analytic
  (Fisher-identity) gradient in numpy. (Giving scipy the distinct-row aggregation is generous.)
* **girth**: ``girth.twopl_mml`` (its defaults: 41 quadrature points on [-4.5, 4.5], 25 EM cycles).
* **theta-irt**: ``theta.fit(responses, "2PL")`` (its defaults: 61 Gauss-Hermite nodes, EM to tol 1e-4).
  It switches JAX to float64 globally when imported, so it runs in a child process (timed there).

Agreement: max |difference| of gamma and beta after putting every fit on RCP's convention
(sum gamma = C = 5, mean beta = 0, i.e. gamma = a C / sum a, beta = (b - mean b) sum a / C). The
packages' grids differ from ours, so ~1e-3 is the expected level.

Usage: ``python -m benchmarks.rubric_only [--sizes ...] [--tiny] [--no-memory]``.
Writes ``benchmarks/out/rubric_only.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

RIDGE = 1e-7  # rcp_jax.models.irt.RUBRIC_ONLY_RIDGE, the default of fit_rubric_only (scipy gets the same objective)


def datasets(n_queries: int) -> dict:
    from rcp_jax.models import irt

    d = C.collection(n_queries)
    passes, trials = irt.collapse_placements(d["rubric_query"], d["rubric_doc"], d["rubric_answers"], n_queries, C.N_DOCS)
    item = d["rubric_query"] * C.N_DOCS + d["rubric_doc"]
    first = np.unique(item, return_index=True)[1]
    binary = np.zeros((n_queries * C.N_DOCS, d["rubric_answers"].shape[1]))
    binary[item[first]] = d["rubric_answers"][first]
    return {"binary": binary, "counts": (passes.reshape(-1, 5), trials.reshape(-1, 5))}


def rcp_convention(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(discrimination, difficulty) on the N(0, 1) ability scale -> (gamma, beta) with sum C, mean 0."""
    s = len(a) / a.sum()
    return a * s, (b - b.mean()) / s


def ours(passes, trials):
    from rcp_jax.models import irt

    f = irt.fit_rubric_only(passes, trials)
    return f.gamma, f.beta


def scipy_fit(passes, trials):
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit, logsumexp, softmax

    from rcp_jax.models import irt
    from rcp_jax.models.irt.rubric_only import _distinct_rows

    up, ut, count, _ = _distinct_rows(passes, trials)
    keep = count > 0
    up, ut, count = up[keep], ut[keep], count[keep]
    nodes, logw = irt.quadrature_grid()
    c = up.shape[1]
    total = (count * ut.sum(1)).sum()

    def f(y):
        a, b = np.exp(y[:c]), y[c:]
        e = nodes[:, None] - b[None, :]
        z = a * e
        ll = up @ log_expit(z).T + (ut - up) @ log_expit(-z).T + logw[None, :]
        lse = logsumexp(ll, axis=1)
        w = count[:, None] * softmax(ll, axis=1)
        r = w.T @ up - expit(z) * (w.T @ ut)
        g = np.concatenate([a * (r * e).sum(0), -a * r.sum(0)])
        return -(count * lse).sum() / total + 0.5 * RIDGE * y @ y, -g / total + RIDGE * y

    res = minimize(f, np.zeros(2 * c), jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000})
    return rcp_convention(np.exp(res.x[:c]), res.x[c:]) + (res.nit,)


def girth_fit(binary):
    import girth

    r = girth.twopl_mml(binary.T.astype(int))
    return rcp_convention(np.asarray(r["Discrimination"], float), np.asarray(r["Difficulty"], float))


def theta_child(n_queries: int, repeats: int) -> None:
    """Child process: theta-irt on the binary data set; prints timings and estimates as JSON."""
    binary = datasets(n_queries)["binary"]
    import theta

    t = time.perf_counter()
    m = theta.fit(binary, "2PL")
    cold = time.perf_counter() - t
    warm = []
    for _ in range(repeats):
        t = time.perf_counter()
        m = theta.fit(binary, "2PL")
        warm.append(time.perf_counter() - t)
    gamma, beta = rcp_convention(np.asarray(m.a, float), np.asarray(m.b, float))
    print(json.dumps({"cold_s": cold, "warm_s": float(np.median(warm)) if warm else None, "gamma": gamma.tolist(),
                      "beta": beta.tolist(), "converged": bool(m.converged), "self_peak_kib": C.self_peak_kib()}))


def mem_child(method: str, n_queries: int) -> None:
    data = datasets(n_queries)
    t = time.perf_counter()
    if method == "ours":
        ours(*data["counts"])
    elif method == "scipy":
        scipy_fit(*data["counts"])
    elif method == "girth":
        girth_fit(data["binary"])
    else:
        raise SystemExit(f"unknown method {method}")
    print(json.dumps({"method": method, "run_s": time.perf_counter() - t, "self_peak_kib": C.self_peak_kib()}))


def _diff(x, y) -> float:
    return float(max(np.abs(np.asarray(x[0]) - y[0]).max(), np.abs(np.asarray(x[1]) - y[1]).max()))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--tiny", action="store_true", help="sizes 10 and 30 only, 1 warm repeat")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--theta-child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.theta_child:
        theta_child(int(args.theta_child[0]), int(args.theta_child[1]))
        return {}
    if args.child:
        mem_child(args.child[0], int(args.child[1]))
        return {}
    sizes = [10, 30] if args.tiny else sorted(args.sizes)
    repeats = 1 if args.tiny else 2
    print(C.header("Rubric-only 2PL (marginal ML): 150 items per query x 5 criteria"))
    try:
        import girth  # noqa: F401

        have_girth = True
    except ImportError:
        have_girth = False
    import importlib.util

    have_theta = importlib.util.find_spec("theta") is not None
    warm_up = datasets(2)
    ours(*warm_up["counts"])  # JAX start-up outside the timings (compiles for the tiny shape only)
    scipy_fit(*warm_up["counts"])
    rows, results = [], {"machine": C.machine(), "girth": have_girth, "theta_irt": have_theta, "sizes": {}}
    for q in sizes:
        data = datasets(q)
        res = {"queries": q, "items": q * C.N_DOCS}
        for kind in ("binary", "counts"):
            p, t = (data["binary"], np.ones_like(data["binary"])) if kind == "binary" else data["counts"]
            est, cold, warm = C.timed(ours, p, t, repeats=repeats)
            ref_s, t_s = C.once(scipy_fit, p, t)
            res[kind] = {"ours_cold_s": cold, "ours_warm_s": warm, "ours_warm_cpu_s": C.LAST_CPU["warm_cpu_s"],
                         "scipy_s": t_s, "scipy_iterations": ref_s[2], "diff_scipy": _diff(est, ref_s),
                         "gamma": est[0].tolist(), "beta": est[1].tolist()}
            row = {"q": q, "kind": kind, "ow": warm, "oc": cold, "sc": t_s, "ds": res[kind]["diff_scipy"]}
            if kind == "binary":
                if have_girth:
                    g, t_g = C.once(girth_fit, p)
                    res[kind].update(girth_s=t_g, diff_girth=_diff(est, g))
                    row.update(gi=t_g, dg=res[kind]["diff_girth"])
                if have_theta:
                    out = C.peak_rss_of(Path(__file__), "--theta-child", str(q), str(repeats))
                    if out["ok"]:
                        res[kind].update(theta_cold_s=out["cold_s"], theta_warm_s=out["warm_s"],
                                         diff_theta=_diff(est, (out["gamma"], out["beta"])), theta_converged=out["converged"])
                        row.update(th=out["warm_s"], thc=out["cold_s"], dt=res[kind]["diff_theta"])
                    else:
                        res[kind]["theta_error"] = out["error"]
            rows.append(row)
        results["sizes"][q] = res
        print(f"  done {q} queries", flush=True)
    if not have_girth:
        print("girth: not installed (pip install girth)")
    if not have_theta:
        print("theta-irt: not installed (pip install theta-irt)")
    print(C.table(rows, [
        ("q", "queries", "d"), ("kind", "data", "s"), ("ow", "ours warm s", ".3f"), ("oc", "ours cold s", ".2f"),
        ("sc", "scipy s", ".2f"), ("gi", "girth s", ".2f"), ("th", "theta-irt warm s", ".2f"), ("thc", "theta-irt cold s", ".2f"),
        ("ds", "max|d| scipy", ".1e"), ("dg", "max|d| girth", ".1e"), ("dt", "max|d| theta", ".1e"),
    ]))
    print("(max|d|: largest difference of gamma or beta from ours, on RCP's convention sum gamma = 5, mean beta = 0)")
    if not args.no_memory:
        big = max(sizes)
        mem = {m: C.peak_rss_of(Path(__file__), "--child", m, str(big)) for m in ("ours", "scipy") + (("girth",) if have_girth else ())}
        if have_theta:
            mem["theta-irt"] = C.peak_rss_of(Path(__file__), "--theta-child", str(big), "0")
        results["peak_rss"] = mem
        print(f"peak RSS at {big} queries (each in its own process; ours/scipy on counts, girth/theta-irt on binary):")
        for method, m in mem.items():
            print(f"  {method:9s} " + (f"{m['peak_rss_gib']:.2f} GiB" if m["ok"] else f"failed: {m['error']}"))
    path = C.write_json("rubric_only", results)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()

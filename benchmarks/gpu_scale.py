"""Device check: BT + 2PL refits at 1,000 and 10,000 queries, NUTS at 1,000 queries, and the default posterior.

Run through ``benchmarks/gpu_scale.sh`` on a machine with an accelerator (two processes: the refits and NUTS,
then ``--posterior``, each under its own time limit, the whole under 8 minutes on one GPU); ``--tiny`` is a dry
run on CPU at toy sizes.

``--posterior``: ``rcp_jax.fit_posterior(method="auto")`` (the block Laplace with its NUTS check, query blocks
split over every visible device) on 1,000 queries x 150 documents simulated as ``benchmarks/posterior_scale.py``
builds them (216 windows of 10 and 100 rubric windows per query, ``rcp_jax.models.simulate``): cold (compiling)
and warm wall seconds, peak device memory and host RSS, and the coverage of the 90% intervals of gains, gamma and
beta against the simulator's truth. Writes ``benchmarks/out/gpu_posterior.json`` after each fit (a run cut short
by the time limit keeps what it measured).

Inputs are generated here, vectorised (no per-query Python loop, unlike ``rcp_jax.models.simulate``), so the
check does not spend minutes simulating 10,000 queries: per query 150 documents with latent
relevance, 216 windows of 10 (15 shuffles of the pool cut into windows; no document twice in a window)
scored by a noisy, query-scaled judge rounded to integers in [-5, 5], and 100 rubric windows of 10
answering 5 criteria from the published NanoBEIR 2PL.

Prints one table and one JSON line; writes ``benchmarks/out/gpu_scale.json``.
The NUTS step calls ``rcp_jax.models.inference.run_nuts(rcp_jax.models.bayes.calibration_model, ...)`` (the 2PL
calibration posterior with frozen BT scores); if that entry point is missing it says so and skips.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

GAMMA = np.array([1.169, 1.047, 0.940, 1.157, 0.687])
BETA = np.array([-2.572, -2.002, -0.251, 0.709, 4.116])


def generate(n_queries: int, n_docs: int = 150, w: int = 10, n_windows: int = 216, n_rubric: int = 100, seed: int = 0):
    rng = np.random.default_rng(seed)
    rel = rng.normal(0, 1, (n_queries, 1)) + rng.uniform(1.5, 2.5, (n_queries, 1)) * rng.standard_normal((n_queries, n_docs))
    per_shuffle = n_docs // w

    def windows(count):
        shuffles = -(-count // per_shuffle)
        perm = np.argsort(rng.random((n_queries, shuffles, n_docs)), axis=2)[:, :, : per_shuffle * w]
        return perm.reshape(n_queries, shuffles * per_shuffle, w)[:, :count]  # [Q, count, w]

    docs = windows(n_windows)
    r = np.take_along_axis(rel[:, None, :].repeat(n_windows, 1), docs, axis=2)
    d = np.exp(rng.uniform(np.log(0.5), np.log(1.6), (n_queries, 1, 1)))
    raw = d * (r + 0.15 * (r - r.mean(axis=2, keepdims=True))) + rng.normal(0, 1, (n_queries, 1, 1)) + rng.normal(0, 1, r.shape)
    scores = np.clip(np.rint(raw), -5, 5)
    rdocs = windows(n_rubric).reshape(n_queries, -1)
    rr = np.take_along_axis(rel, rdocs, axis=1)
    p = 1.0 / (1.0 + np.exp(-GAMMA * (rr[..., None] - BETA)))
    answers = (rng.random(p.shape) < p).astype(np.int8)
    return {
        "window_docs": docs.reshape(-1, w), "window_scores": scores.reshape(-1, w),
        "window_query": np.repeat(np.arange(n_queries), n_windows), "n_docs": np.full(n_queries, n_docs),
        "rubric_query": np.repeat(np.arange(n_queries), rdocs.shape[1]), "rubric_doc": rdocs.reshape(-1),
        "rubric_answers": answers.reshape(-1, 5),
    }


def _sync(x):
    import jax

    return jax.block_until_ready(x)


def refit(data: dict):
    """One BT fit (windows -> scores) then one 2PL calibration (scores + answers -> gains)."""
    from rcp_jax.models import irt
    from rcp_jax.models.bradley_terry import fit_windows

    t = time.perf_counter()
    bt = fit_windows(data["window_docs"], data["window_scores"], data["window_query"], data["n_docs"])
    t_bt = time.perf_counter() - t
    q, n = len(data["n_docs"]), int(data["n_docs"].max())
    t = time.perf_counter()
    passes, trials = irt.collapse_placements(data["rubric_query"], data["rubric_doc"], data["rubric_answers"], q, n)
    cal = irt.fit_2pl_calibration(irt.calibration_cells(bt.theta, passes, trials))
    t_cal = time.perf_counter() - t
    return bt, cal, t_bt, t_cal, (passes, trials)


def nuts(theta, passes, trials, warmup: int, samples: int, chains: int, seed: int = 0):
    try:
        from rcp_jax.models.bayes import calibration_model
        from rcp_jax.models.inference import run_nuts
    except ImportError as exc:
        return {"skipped": f"NUTS entry point not available: {exc}"}
    t = time.perf_counter()
    draws = run_nuts(calibration_model, {"theta": theta, "passes": passes, "trials": trials}, seed=seed,
                     num_warmup=warmup, num_samples=samples, num_chains=chains)
    wall = time.perf_counter() - t
    out = {"wall_s": wall, "warmup": warmup, "samples": samples, "chains": chains}
    for key in ("diverging", "divergences"):
        if hasattr(draws, key):
            out["divergences"] = int(np.asarray(getattr(draws, key)).sum())
    return out


def _peak_device_bytes() -> int | None:
    import jax

    try:
        return (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use")
    except Exception:  # noqa: BLE001 - not every backend reports memory
        return None


def posterior(queries: int, docs: int, seed: int, budget_s: float, out_path: Path) -> dict:
    """The default posterior of a simulated collection, cold then warm (see the module docstring); the warm fit
    is skipped when the cold one leaves less than its own time of ``budget_s`` (seconds from the start)."""
    import jax

    import rcp_jax
    from benchmarks.fixtures.simulated_collections import collection_tables
    from benchmarks.posterior_scale import coverage, simulated

    start = time.perf_counter()
    res = {"queries": queries, "docs": docs, "devices": [str(d) for d in jax.devices()]}

    def save():
        res["peak_device_bytes"] = _peak_device_bytes()
        res["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        out_path.write_text(json.dumps(res, indent=2, default=str))

    t = time.perf_counter()
    sim = simulated(queries, docs, seed)
    windows, answers = collection_tables(sim)
    res["simulate_s"] = time.perf_counter() - t
    print(f"  posterior: simulated {queries} x {docs} in {res['simulate_s']:.1f}s", flush=True)
    for run in ("cold", "warm"):
        spent = time.perf_counter() - start
        if run == "warm" and spent + res["cold_s"] > budget_s:
            res["warm_skipped"] = f"{spent:.0f}s spent and the cold fit took {res['cold_s']:.0f}s: over {budget_s:.0f}s"
            print(f"  posterior: warm fit skipped ({res['warm_skipped']})", flush=True)
            break
        t = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post = rcp_jax.fit_posterior(windows, answers, method="auto", seed=seed)
        res[f"{run}_s"] = time.perf_counter() - t
        res["method"], res["auto"] = post.method, post.settings.get("auto")
        res["block_s"] = post.draws.info.get("wall_s")
        res["check_s"] = (post.draws.info.get("nuts_check") or {}).get("wall_s")
        res["diagnostics"] = {k: (float(v) if isinstance(v, (float, np.floating)) else v)
                              for k, v in post.diagnostics.items()}
        res["warnings"] = sorted({str(w.message)[:200] for w in caught})
        res["coverage"] = coverage(post, sim)
        save()
        print(f"  posterior {run}: {post.method} {res[f'{run}_s']:.1f}s (check {res['check_s'] or 0:.1f}s), "
              f"coverage {res['coverage']}", flush=True)
        del post
    save()
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="dry run: 10 and 20 queries, NUTS at 10 queries, few draws; "
                    "with --posterior 42 queries x 50 documents")
    ap.add_argument("--posterior", action="store_true", help="only the default posterior (its own process, so its "
                    "peak memory is its own)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out", help="folder of the JSON results")
    ap.add_argument("--posterior-queries", type=int, default=1000)
    ap.add_argument("--posterior-docs", type=int, default=150)
    ap.add_argument("--posterior-budget", type=float, default=250.0,
                    help="seconds: skip the warm fit when it would not finish within them")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--nuts-queries", type=int, default=1000)
    ap.add_argument("--nuts-warmup", type=int, default=300)
    ap.add_argument("--nuts-samples", type=int, default=300)
    ap.add_argument("--nuts-chains", type=int, default=4)
    args = ap.parse_args(argv)
    if args.tiny:
        args.sizes, args.nuts_queries, args.nuts_warmup, args.nuts_samples, args.nuts_chains = [10, 20], 10, 20, 20, 2
        # 42 x 50 = 2,100 documents: above AUTO_NUTS_MAX_DOCS, so "auto" is the block Laplace
        args.posterior_queries, args.posterior_docs = 42, 50
    import jax

    dev = jax.devices()
    print(f"devices: {[str(d) for d in dev]} backend {jax.default_backend()}", flush=True)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.posterior:
        res = posterior(args.posterior_queries, args.posterior_docs, 7, args.posterior_budget, out / "gpu_posterior.json")
        res["backend"] = jax.default_backend()
        print(f"{'queries':>8} {'docs':>5} {'method':>14} {'cold s':>8} {'warm s':>8} {'peak dev GiB':>13} "
              f"{'peak RSS GiB':>13} {'gain cov':>9} {'gamma':>6} {'beta':>6}")
        gib = (res.get("peak_device_bytes") or 0) / 2**30
        cov = res.get("coverage", {})
        print(f"{res['queries']:>8} {res['docs']:>5} {res.get('method', '-'):>14} {res.get('cold_s', float('nan')):>8.1f} "
              f"{res.get('warm_s', float('nan')):>8.1f} {gib:>13.2f} {res['peak_rss_gib']:>13.2f} "
              f"{cov.get('gain', float('nan')):>9.3f} {cov.get('gamma', float('nan')):>6.2f} {cov.get('beta', float('nan')):>6.2f}")
        (out / "gpu_posterior.json").write_text(json.dumps(res, indent=2, default=str))
        print(json.dumps(res, default=str))
        return res
    result = {"backend": jax.default_backend(), "devices": [str(d) for d in dev], "sizes": {}}
    rows = []
    for q in sorted(args.sizes):
        t = time.perf_counter()
        data = generate(q)
        gen = time.perf_counter() - t
        _, _, cold_bt, cold_cal, _ = refit(data)  # compile + run
        warm = [refit(data) for _ in range(2)]
        bt_w = float(np.median([w[2] for w in warm]))
        cal_w = float(np.median([w[3] for w in warm]))
        res = {"generate_s": gen, "bt_cold_s": cold_bt, "cal_cold_s": cold_cal, "bt_warm_s": bt_w, "cal_warm_s": cal_w,
               "refit_warm_s": bt_w + cal_w, "cal_iterations": warm[-1][1].iterations, "cal_converged": warm[-1][1].converged,
               "bt_newton_iterations": int(warm[-1][0].iterations.max())}
        result["sizes"][q] = res
        rows.append((q, cold_bt, bt_w, cold_cal, cal_w, bt_w + cal_w))
        print(f"  {q} queries: BT warm {bt_w:.3f}s, 2PL warm {cal_w:.3f}s", flush=True)
        if q == args.nuts_queries:
            nuts_in = (warm[-1][0].theta, *warm[-1][4])
    if args.nuts_queries not in args.sizes:
        data = generate(args.nuts_queries)
        bt, _, _, _, pt = refit(data)
        nuts_in = (bt.theta, *pt)
    result["nuts"] = nuts(*nuts_in, args.nuts_warmup, args.nuts_samples, args.nuts_chains)
    result["nuts"]["queries"] = args.nuts_queries
    result["peak_device_bytes"] = _peak_device_bytes()
    print(f"{'queries':>8} {'BT cold s':>10} {'BT warm s':>10} {'2PL cold s':>11} {'2PL warm s':>11} {'refit warm s':>13}")
    for q, a, b, c, d, e in rows:
        print(f"{q:>8} {a:>10.2f} {b:>10.3f} {c:>11.2f} {d:>11.3f} {e:>13.3f}")
    nres = result["nuts"]
    if "skipped" in nres:
        print(f"NUTS: {nres['skipped']}")
    else:
        print(f"NUTS (2PL calibration posterior, {args.nuts_queries} queries, {nres['chains']} chains x "
              f"{nres['warmup']} warmup + {nres['samples']} draws, compile included): {nres['wall_s']:.1f}s")
    if result.get("peak_device_bytes"):
        print(f"peak device memory: {result['peak_device_bytes'] / 2**30:.2f} GiB")
    (out / "gpu_scale.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, default=str))
    return result


if __name__ == "__main__":
    main()

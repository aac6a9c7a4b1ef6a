"""Device check: BT + 2PL refits at 1,000 and 10,000 queries and NUTS at 1,000 queries.

Run through ``benchmarks/gpu_scale.sh`` on a machine with an accelerator (the whole check is sized to
finish in under 5 minutes on one GPU); ``--tiny`` is a dry run on CPU at toy sizes.

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
import time
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


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="dry run: 10 and 20 queries, NUTS at 10 queries, few draws")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--nuts-queries", type=int, default=1000)
    ap.add_argument("--nuts-warmup", type=int, default=300)
    ap.add_argument("--nuts-samples", type=int, default=300)
    ap.add_argument("--nuts-chains", type=int, default=4)
    args = ap.parse_args(argv)
    if args.tiny:
        args.sizes, args.nuts_queries, args.nuts_warmup, args.nuts_samples, args.nuts_chains = [10, 20], 10, 20, 20, 2
    import jax

    dev = jax.devices()
    print(f"devices: {[str(d) for d in dev]} backend {jax.default_backend()}", flush=True)
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
    try:
        stats = dev[0].memory_stats() or {}
        result["peak_device_bytes"] = stats.get("peak_bytes_in_use")
    except Exception:  # noqa: BLE001 - not every backend reports memory
        pass
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
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_scale.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, default=str))
    return result


if __name__ == "__main__":
    main()

"""Benchmark: paired randomisation test for every pair of 14 systems over 50 queries (91 pairs).

Measures :func:`rcp_jax.stats.randomisation_test` (JAX, one sign matrix shared by all pairs) against
the same algorithm in NumPy and against ``scipy.stats.permutation_test`` called pair by pair (timed on a
few pairs and extrapolated), and reports how closely the p-values agree (with each other and with the
paired t-test). Prints a table and writes ``benchmarks/out/randomisation_test.json``.

    .venv/bin/python -m benchmarks.randomisation_test [--systems 14] [--queries 50] [--permutations 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
import numpy as np
from scipy import stats

from rcp_jax.stats import paired_t_test, randomisation_test


def simulate(n_systems: int, n_queries: int, seed: int) -> np.ndarray:
    """Per-query nDCG-like scores float[S, Q]: a query effect, a system effect, noise."""
    rng = np.random.default_rng(seed)
    query = rng.uniform(0.2, 0.8, n_queries)
    system = np.linspace(0.0, 0.08, n_systems)
    return np.clip(query[None, :] + system[:, None] + rng.normal(0, 0.1, (n_systems, n_queries)), 0, 1)


def numpy_sign_flip(d: np.ndarray, n_perm: int, seed: int, chunk: int = 8192) -> np.ndarray:
    """The same Monte Carlo test in NumPy (BLAS matmul), p = (1 + count) / (1 + B)."""
    rng = np.random.default_rng(seed)
    t_obs = np.abs(d.sum(1))
    thr = t_obs - 1e-11 * np.abs(d).sum(1)
    count = np.zeros(d.shape[0])
    done = 0
    while done < n_perm:
        b = min(chunk, n_perm - done)
        signs = rng.integers(0, 2, size=(b, d.shape[1])).astype(np.float64) * 2 - 1
        count += (np.abs(signs @ d.T) >= thr).sum(0)
        done += b
    return (1 + count) / (1 + n_perm)


def scipy_one_pair(d_row: np.ndarray, n_perm: int, seed: int) -> float:
    res = stats.permutation_test((d_row,), lambda x, axis: np.abs(np.sum(x, axis=axis)), permutation_type="samples",
                                 n_resamples=n_perm, alternative="greater", random_state=seed, vectorized=True)
    return float(res.pvalue)


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", type=int, default=14)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--permutations", type=int, default=100_000)
    ap.add_argument("--scipy-pairs", type=int, default=3, help="pairs timed with scipy (then extrapolated)")
    ap.add_argument("--scipy-permutations", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "randomisation_test.json"))
    args = ap.parse_args()

    x = simulate(args.systems, args.queries, args.seed)
    ia, ib = np.triu_indices(args.systems, 1)
    d = x[ia] - x[ib]
    n_pairs, b = d.shape[0], args.permutations

    t0 = time.perf_counter()
    p_jax = randomisation_test(d, n_permutations=b, seed=args.seed, exact=False)
    first = time.perf_counter() - t0
    warm, p_jax = timed(lambda: randomisation_test(d, n_permutations=b, seed=args.seed, exact=False))
    t_np, p_np = timed(lambda: numpy_sign_flip(d, b, args.seed + 1), repeat=1)
    k = min(args.scipy_pairs, n_pairs)
    t0 = time.perf_counter()
    p_sp = np.array([scipy_one_pair(d[i], args.scipy_permutations, args.seed + i) for i in range(k)])
    t_sp = (time.perf_counter() - t0) * (n_pairs / k) * (b / args.scipy_permutations)
    _, p_t = paired_t_test(d)

    se_diff = np.sqrt(2 * np.maximum(p_np * (1 - p_np), 1 / b) / b)  # two independent Monte Carlo estimates
    rows = [
        ("rcp_jax.randomisation_test (JAX, warm)", warm, "measured"),
        ("rcp_jax.randomisation_test (JAX, incl. compile)", first, "measured"),
        ("same algorithm, NumPy matmul", t_np, "measured"),
        (f"scipy.stats.permutation_test per pair", t_sp, f"extrapolated from {k} pairs x {args.scipy_permutations}"),
    ]
    agreement = {
        "max_abs_diff_jax_vs_numpy": float(np.max(np.abs(p_jax - p_np))),
        "max_abs_diff_jax_vs_numpy_in_mc_se": float(np.max(np.abs(p_jax - p_np) / se_diff)),
        "max_abs_diff_jax_vs_scipy_first_pairs": float(np.max(np.abs(p_jax[:k] - p_sp))),
        "max_abs_diff_jax_vs_t_test": float(np.max(np.abs(p_jax - p_t))),
        "pairs_separated_at_0.05": {"permutation": int((p_jax < 0.05).sum()), "t": int((p_t < 0.05).sum())},
    }
    print(f"{args.systems} systems x {args.queries} queries = {n_pairs} pairs, {b:,} sign vectors per pair "
          f"({os.cpu_count()} CPUs visible, JAX {jax.__version__} on {jax.default_backend()})")
    print(f"{'implementation':52s} {'seconds':>9s}  note")
    for name, sec, note in rows:
        print(f"{name:52s} {sec:9.3f}  {note}")
    print("agreement of p-values:")
    for key, val in agreement.items():
        print(f"  {key}: {val}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "randomisation_test", "systems": args.systems, "queries": args.queries, "pairs": n_pairs,
        "permutations": b, "cpus": os.cpu_count(), "jax": jax.__version__, "backend": jax.default_backend(),
        "machine": platform.machine(), "python": platform.python_version(),
        "seconds": {name: sec for name, sec, _ in rows}, "agreement": agreement,
    }, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

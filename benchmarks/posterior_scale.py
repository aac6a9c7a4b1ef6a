"""The default posterior at benchmark scale: wall time, peak memory and coverage of ``method="auto"``.

Each size runs in a fresh process (so its peak RSS is its own): a simulated collection of ``Q`` queries x 150
documents judged as the paper's protocol does (216 windows of 10 per query, so 14.4 tournament placements per
document; 100 rubric windows, 6.67 placements), ``rcp_jax.fit_posterior(method="auto")`` (the block Laplace
above 2,000 documents), the posterior saved and loaded back, and the posterior RCP-nDCG of six simulated
rerankers (``rcp-jax evaluate --posterior``'s computation). Recorded: the seconds of each step (warm: a first
small fit compiles the programs, as a second fit in a session would find them), the peak RSS, the Newton
steps, the check against NUTS, and the coverage of the 90% intervals of gains, gamma and beta against the
simulator's truth. ``--compare-nuts`` also fits full NUTS on a small collection and reports how far the block
Laplace's gain interval ends are from NUTS's, in units of NUTS's interval width.

    python -m benchmarks.posterior_scale --queries 100 300 1000
    python -m benchmarks.posterior_scale --compare-nuts 10 --docs 60
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.fixtures.simulated_collections import collection_tables

OUT = Path(__file__).resolve().parent / "out"
WINDOWS_PER_QUERY, RUBRIC_WINDOWS, WINDOW = 216, 100, 10


def simulated(queries: int, docs: int, seed: int):
    from rcp_jax.models import simulate

    return simulate.simulate_judgements(seed, np.full(queries, docs), w=WINDOW,
                                        tournament_placements=WINDOWS_PER_QUERY * WINDOW / docs,
                                        rubric_placements=RUBRIC_WINDOWS * WINDOW / docs)


def coverage(post, sim) -> dict:
    """Share of 90% intervals holding the truth: gains, gamma, beta."""
    d = post.documents
    true = np.array([sim.truth.gains(int(q[1:]))[int(x.split("-d")[1])] for q, x in zip(d["query_id"], d["doc_id"])])
    out = {"gain": float(((d["gain_lo"] <= true) & (true <= d["gain_hi"])).mean()),
           "gain_width": float((d["gain_hi"] - d["gain_lo"]).mean())}
    for name in ("gamma", "beta"):
        t = getattr(sim.truth, name)
        out[name] = float(((post.items[f"{name}_lo"] <= t) & (t <= post.items[f"{name}_hi"])).mean())
    return out


def systems(sim, seed: int) -> pd.DataFrame:
    """Six rerankers of every pool: true relevance plus Gaussian noise of SD 0.3, 1, 1, 2, 2 and 3."""
    rng = np.random.default_rng([seed, 0x5C])
    rows = []
    for q, rel in enumerate(sim.truth.relevance):
        ids = [f"q{q}-d{d}" for d in range(len(rel))]
        for name, sd in {"strong": 0.3, "mid_a": 1.0, "mid_b": 1.0, "weak_a": 2.0, "weak_b": 2.0, "poor": 3.0}.items():
            rows.append(pd.DataFrame({"system": name, "query_id": f"q{q}", "doc_id": ids,
                                      "score": rel + sd * rng.standard_normal(len(rel))}))
    return pd.concat(rows, ignore_index=True)


def one_size(queries: int, docs: int, seed: int) -> dict:
    import tempfile

    import rcp_jax

    warm = simulated(4, docs, seed + 1)  # compile the programs first: the figures are warm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rcp_jax.fit_posterior(*collection_tables(warm), method="block_laplace", num_samples=50, check_queries=1)
    rec = {"queries": queries, "docs": docs}
    t = time.perf_counter()
    sim = simulated(queries, docs, seed)
    windows, answers = collection_tables(sim)
    rec["simulate_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = rcp_jax.fit_posterior(windows, answers, method="auto", progress=True)
    rec["fit_s"] = time.perf_counter() - t
    rec["warnings"] = sorted({str(w.message)[:200] for w in caught})
    rec["method"] = post.method
    rec["auto"] = post.settings.get("auto")
    rec["diagnostics"] = {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in post.diagnostics.items()}
    rec["block_s"] = post.draws.info.get("wall_s")
    blocks = post.draws.info.get("exact_blocks")
    if blocks:
        rec["exact_blocks"] = {k: v for k, v in blocks.items() if k != "rhat_queries"}
        rec["exact_blocks"]["rhat_queries"] = len(blocks["rhat_queries"])
    rec["coverage"] = coverage(post, sim)
    with tempfile.TemporaryDirectory() as folder:
        t = time.perf_counter()
        rcp_jax.save_posterior(post, folder)
        back = rcp_jax.load_posterior(folder)
        rec["save_load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = rcp_jax.posterior_metrics(systems(sim, seed), back, k=10, n_bootstrap=200)
    rec["posterior_metrics_s"] = time.perf_counter() - t
    rec["pairs_called"] = {c: int((table.pairs["call"] == c).sum()) for c in ("A>B", "B>A", "equivalent", "undecided")}
    rec["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return rec


def compare_nuts(queries: int, docs: int, seed: int) -> dict:
    import rcp_jax

    sim = simulated(queries, docs, seed)
    windows, answers = collection_tables(sim)
    fits = {}
    for method, kw in (("block_laplace", {}), ("nuts", {"num_warmup": 1000, "num_samples": 500, "num_chains": 4})):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits[method] = (rcp_jax.fit_posterior(windows, answers, method=method, **kw), time.perf_counter() - t)
    a, b = fits["block_laplace"][0].documents, fits["nuts"][0].documents
    width = (b["gain_hi"] - b["gain_lo"]).to_numpy()
    gaps = np.concatenate([np.abs(a["gain_lo"] - b["gain_lo"]) / width, np.abs(a["gain_hi"] - b["gain_hi"]) / width])
    return {"queries": queries, "docs": docs, "block_laplace_s": fits["block_laplace"][1], "nuts_s": fits["nuts"][1],
            "median_gap": float(np.median(gaps)), "p90_gap": float(np.quantile(gaps, 0.9)),
            "coverage_block_laplace": coverage(fits["block_laplace"][0], sim), "coverage_nuts": coverage(fits["nuts"][0], sim),
            "check": fits["block_laplace"][0].draws.info.get("nuts_check")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, nargs="+", default=[100, 300, 1000])
    p.add_argument("--docs", type=int, default=150)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--compare-nuts", type=int, default=None, metavar="Q", help="compare with full NUTS on Q queries")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one size, JSON out
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.compare_nuts:
        rec = compare_nuts(args.compare_nuts, args.docs, args.seed)
        print(json.dumps(rec, indent=1))
        (OUT / f"posterior_nuts_{args.compare_nuts}x{args.docs}.json").write_text(json.dumps(rec, indent=1))
        return 0
    if args.one:
        print(json.dumps(one_size(args.queries[0], args.docs, args.seed)))
        return 0
    results = []
    for q in args.queries:
        out = subprocess.run([sys.executable, "-m", "benchmarks.posterior_scale", "--one", "--queries", str(q),
                              "--docs", str(args.docs), "--seed", str(args.seed)], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            return out.returncode
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(rec)
        print(f"{q} x {args.docs}: {rec['method']} fit {rec['fit_s']:.0f} s (block {rec['block_s']:.0f} s), "
              f"save+load {rec['save_load_s']:.0f} s, posterior nDCG {rec['posterior_metrics_s']:.0f} s, peak "
              f"{rec['peak_rss_gib']:.2f} GiB; coverage {rec['coverage']}; check {rec['diagnostics'].get('check_median_gap')}",
              flush=True)
    (OUT / "posterior_scale.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

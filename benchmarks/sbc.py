"""Calibration of the Bayesian RCP posteriors, measured two ways.

1. **Simulation-based calibration** (Talts et al. 2018) of the 2PL with frozen BT covariates
   (:func:`rcp_jax.models.bayes.calibration_model`) or of the rubric-only 2PL: parameters drawn from the prior,
   answers simulated from the model itself, NUTS on every dataset at once (vmapped over datasets). If
   model code and sampler are right, the rank of each true parameter among the thinned posterior draws
   is uniform, and central intervals cover the truth at their nominal rate. Uniformity is judged per
   component with a Bonferroni correction (:func:`rcp_jax.models.inference.rank_uniformity_p`): components of
   one dataset are correlated (``alpha`` of different queries share the item offsets), so a histogram
   pooled over them over-disperses and its chi-square rejects a correct sampler.
2. **Coverage of gains against the simulator's truth** (``--coverage``): collections drawn by
   :func:`rcp_jax.models.simulate.simulate_judgements` (a judge with Gaussian score noise, rounding, clipping
   and a context effect - not the model); reports how often the 90% interval of each document's gain
   holds its true gain, and the interval widths, for three fits of every collection:

   * ``frozen-exact`` - the frozen-BT model given the exact BT scores ``d_q (r - mean r)``: its own
     generative assumption (scores known up to an affine map per query), so it should cover at ~90%;
   * ``frozen`` - the frozen-BT model given the BT MAP of the noisy tournament: it treats those scores
     as exact, so its intervals miss the BT error and under-cover;
   * ``joint`` - the joint model on the noisy tournament (BT scores latent): ~90% with wider intervals.

``benchmarks/coverage.py`` extends the second study to every number a user reads (items, gains,
per-system RCP-nDCG, pair differences, decisions on null pairs) for each model and method.

Prints tables and writes JSON to ``benchmarks/out/``. Examples::

    python -m benchmarks.sbc                       # SBC, 200 datasets of 4 queries x 12 documents
    python -m benchmarks.sbc --prior ridge         # the default (weak, data-scaled) item prior
    python -m benchmarks.sbc --coverage --reps 3   # gain coverage: frozen on exact BT, frozen and joint on noisy BT
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]

from rcp_jax.models import bayes, inference, simulate  # noqa: E402

OUT = ROOT / "benchmarks" / "out"


def sbc(args) -> dict:
    rng = np.random.default_rng(args.seed)
    q, n, c = args.queries, args.docs, 5
    dtype = jnp.result_type(float)
    trials = jnp.full((q, n, c), float(args.trials), dtype)
    item_sd = None if args.prior == "ridge" else 1.0
    if args.model == "frozen":
        theta = jnp.asarray(rng.normal(0.0, 1.5, (q, n)), dtype)
        design = dict(theta=theta, trials=trials, passes=None, item_sd=item_sd)
        params = ("gamma", "beta", "tau", "alpha")
        model = bayes.calibration_model
    else:
        design = dict(trials=trials, passes=None, item_sd=item_sd)
        params = ("gamma", "beta", "eta")
        model = bayes.rubric_only_model
    start = time.perf_counter()
    res = inference.simulation_based_calibration(
        model, design, params=params, n_datasets=args.datasets, seed=args.seed, num_warmup=args.warmup,
        num_samples=args.samples, thinning=args.thinning, max_tree_depth=args.max_tree_depth,
    )
    wall = time.perf_counter() - start
    rows = []
    for p in params:
        r = res.ranks[p].reshape(-1)
        hist = np.bincount(r * args.bins // (res.n_draws + 1), minlength=args.bins)
        chi_p = float(stats.chisquare(hist).pvalue)
        ks_p = float(stats.kstest((r + rng.random(len(r))) / (res.n_draws + 1), "uniform").pvalue)
        per = [float(stats.chisquare(np.bincount(res.ranks[p].reshape(args.datasets, -1)[:, j] * args.bins
                                                 // (res.n_draws + 1), minlength=args.bins)).pvalue)
               for j in range(res.ranks[p].reshape(args.datasets, -1).shape[1])]
        rows.append({"param": p, "n_ranks": int(len(r)), "chi2_p": chi_p, "ks_p": ks_p, "min_component_chi2_p": min(per),
                     "bonferroni_p": inference.rank_uniformity_p(res.ranks[p], res.n_draws, bins=args.bins),
                     "coverage": float(res.covered[p].mean()), "histogram": hist.tolist()})
    print(f"SBC of the {args.model} 2PL: {args.datasets} datasets of {q} queries x {n} documents x {c} criteria, "
          f"{args.trials} answers per cell, item prior {'ridge (sd 1/sqrt(ridge NC))' if item_sd is None else 'sd 1'}; "
          f"NUTS {args.warmup} warmup, {args.samples} samples thinned by {args.thinning} -> L = {res.n_draws} draws")
    print("uniformity: 'Bonf. p' tests each component on its own (one rank per dataset; Bonferroni over components) "
          "and is the verdict; 'pooled' chi-square / KS p pool correlated components of a dataset and are anticonservative "
          "(see rcp_jax.models.inference.rank_uniformity_p)")
    print(f"{'param':<7}{'ranks':>7}{'Bonf. p':>9}{'pooled p':>10}{'KS p':>8}{'min comp p':>12}{'90% cover':>11}"
          f"  pooled histogram ({args.bins} bins)")
    for r in rows:
        print(f"{r['param']:<7}{r['n_ranks']:>7}{r['bonferroni_p']:>9.3f}{r['chi2_p']:>10.3f}{r['ks_p']:>8.3f}"
              f"{r['min_component_chi2_p']:>12.3f}{r['coverage']:>11.3f}  {r['histogram']}")
    div = int(res.divergences.sum())
    print(f"divergences: {div} in {args.datasets} datasets; wall {wall:.1f} s (NUTS {res.wall_s:.1f} s, compilation included)")
    return {"kind": "sbc", "model": args.model, "datasets": args.datasets, "queries": q, "docs": n, "trials": args.trials,
            "prior": args.prior, "warmup": args.warmup, "samples": args.samples, "thinning": args.thinning,
            "n_draws": res.n_draws, "rows": rows, "divergences": div, "wall_s": wall}


def coverage(args) -> dict:
    from benchmarks.fixtures.simulated_collections import collection_tables, exact_bt_scores, true_gains

    from rcp_jax.bayes import fit_posterior

    results = []
    for rep in range(args.reps):
        sim = simulate.simulate_judgements(
            args.seed + rep, [args.docs] * args.queries, noise=args.noise,
            tournament_placements=args.placements,
        )
        windows, answers = collection_tables(sim)
        truth = true_gains(sim)
        fits = {"frozen-exact": ("frozen", exact_bt_scores(sim)), "frozen": ("frozen", windows),
                "joint": ("joint", windows)}
        for name in args.fits:
            model, tournament = fits[name]
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post = fit_posterior(tournament, answers, model=model, num_warmup=args.warmup,
                                     num_samples=args.samples, seed=args.seed + rep, bt_weight=args.bt_weight,
                                     joint_param=args.joint_param)
            d = post.documents.merge(truth, on=["query_id", "doc_id"])
            inside = (d["gain"] >= d["gain_lo"]) & (d["gain"] <= d["gain_hi"])
            results.append({
                "rep": rep, "model": name, "coverage": float(inside.mean()),
                "width": float((d["gain_hi"] - d["gain_lo"]).mean()),
                "mae": float((d["gain_mean"] - d["gain"]).abs().mean()),
                "max_rhat": post.diagnostics["max_rhat"], "max_rhat_gain": post.diagnostics["max_rhat_gain"],
                "divergences": post.diagnostics["divergences"], "wall_s": time.perf_counter() - start,
                "min_ess_bulk": post.diagnostics["min_ess_bulk"],
            })
    print(f"Coverage of 90% gain intervals against the simulator's truth: {args.reps} collections of {args.queries} "
          f"queries x {args.docs} documents, judge noise {args.noise}, {args.placements} tournament placements per "
          f"document, bt_weight {args.bt_weight}, joint param {args.joint_param}; NUTS 4 chains x ({args.warmup} + {args.samples})")
    print(f"{'rep':>3} {'fit':<13}{'coverage':>9}{'width':>8}{'MAE':>8}{'R-hat':>8}{'R-hat g':>8}{'ESS':>7}{'ESS/s':>7}"
          f"{'div':>5}{'s':>7}")
    for r in results:
        print(f"{r['rep']:>3} {r['model']:<13}{r['coverage']:>9.3f}{r['width']:>8.3f}{r['mae']:>8.3f}"
              f"{r['max_rhat']:>8.3f}{r['max_rhat_gain']:>8.3f}{r['min_ess_bulk']:>7.0f}"
              f"{r['min_ess_bulk'] / r['wall_s']:>7.1f}{r['divergences']:>5}{r['wall_s']:>7.1f}")
    for name in args.fits:
        cov = [r["coverage"] for r in results if r["model"] == name]
        wid = [r["width"] for r in results if r["model"] == name]
        print(f"mean {name:<13} coverage {np.mean(cov):.3f}  width {np.mean(wid):.3f}")
    return {"kind": "coverage", "queries": args.queries, "docs": args.docs, "noise": args.noise, "fits": args.fits,
            "placements": args.placements, "bt_weight": args.bt_weight, "joint_param": args.joint_param, "results": results}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--coverage", action="store_true", help="gain coverage study instead of SBC")
    p.add_argument("--model", choices=("frozen", "rubric_only"), default="frozen", help="SBC target")
    p.add_argument("--datasets", type=int, default=200)
    p.add_argument("--queries", type=int, default=None, help="default 4 (SBC) / 20 (coverage)")
    p.add_argument("--docs", type=int, default=None, help="default 12 (SBC) / 30 (coverage)")
    p.add_argument("--trials", type=int, default=2, help="answers per (document, criterion) in SBC")
    p.add_argument("--prior", choices=("unit", "ridge"), default="unit",
                   help="item prior for SBC: sd 1, or the default ridge prior sd 1/sqrt(ridge NC)")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--samples", type=int, default=None)
    p.add_argument("--thinning", type=int, default=4)
    p.add_argument("--bins", type=int, default=10)
    p.add_argument("--max-tree-depth", type=int, default=8)
    p.add_argument("--tag", default="", help="suffix of the JSON file name")
    p.add_argument("--reps", type=int, default=3, help="collections in the coverage study")
    p.add_argument("--noise", type=float, default=1.5, help="judge score noise SD (coverage)")
    p.add_argument("--placements", type=float, default=8.0, help="tournament placements per document (coverage)")
    p.add_argument("--bt-weight", type=float, default=bayes.DEFAULT_BT_WEIGHT)
    p.add_argument("--fits", nargs="+", choices=("frozen-exact", "frozen", "joint"),
                   default=["frozen-exact", "frozen", "joint"], help="which fits the coverage study runs")
    p.add_argument("--joint-param", choices=("ability", "theta"), default="ability",
                   help="coordinates of the joint model's latent scores (rcp_jax.models.bayes.joint_model, param)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--x64", action="store_true", help="run the SBC in float64 (jax.enable_x64 context)")
    args = p.parse_args(argv)
    if args.coverage:
        args.queries, args.docs = args.queries or 20, args.docs or 30
        args.warmup, args.samples = args.warmup or 500, args.samples or 500
        out = coverage(args)
        name = f"coverage{args.tag}.json"
    else:
        args.queries, args.docs = args.queries or 4, args.docs or 12
        args.warmup, args.samples = args.warmup or 300, args.samples or 400
        if args.x64:
            import jax

            with jax.enable_x64(True):
                out = sbc(args)
        else:
            out = sbc(args)
        name = f"sbc_{args.model}_{args.prior}{args.tag}.json"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(out, indent=2))
    print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed of Bayesian RCP inference: wall time and ESS per second of NUTS, SVI and Laplace.

For 10, 100 and 1000 queries (``--docs`` documents each, simulated by
:func:`rcp_jax.models.simulate.simulate_judgements`), fits

* the frozen-BT 2PL calibration (:func:`rcp_jax.models.bayes.calibration_model`) by NUTS (4 chains, one after
  another on CPU and vectorised on a GPU: ``rcp_jax.models.inference.default_chain_method``; started at the MAP), SVI with an AutoNormal guide and a Laplace approximation;
* the joint model (:func:`rcp_jax.models.bayes.joint_model`) by NUTS (up to ``--joint-nuts-max`` queries) and SVI,
  in both coordinates of its latent scores (``joint``: BT contrasts; ``joint-ability``: contrasts of the
  calibrated ability ``tau theta``, ``param="ability"``).

Reported per run: ``cold`` wall seconds (first call: tracing and compilation included) and, when the
cold run took under ``--warm-below`` seconds, ``warm`` seconds (same shapes, new seed, compiled program
reused); min bulk ESS over gamma, beta, tau, alpha and ESS per warm (else cold) second (for SVI and
Laplace: of the 1,000 independent draws from the fitted guide, so ~1,000 / seconds); divergences and
max R-hat for NUTS. SVI / Laplace rows report the agreement with NUTS on the same data: the largest
|posterior mean difference| in NUTS posterior SDs and the range of SD ratios. The same script runs on a
GPU (JAX picks the default backend). Writes ``benchmarks/out/bayes_speed.json``.

    python -m benchmarks.bayes_speed                       # 10, 100, 1000 queries x 60 documents
    python -m benchmarks.bayes_speed --queries 10 100 --docs 150
    python -m benchmarks.bayes_speed --queries 10 --models joint --methods nuts   # joint coordinates only
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from rcp_jax.models import bayes, bradley_terry, inference, irt, simulate  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
PARAMS = ("gamma", "beta", "tau", "alpha")


def make_data(n_queries: int, n_docs: int, seed: int) -> dict:
    sim = simulate.simulate_judgements(seed, [n_docs] * n_queries)
    nd = sim.truth.n_docs
    fit = bradley_terry.fit_windows(sim.window_docs, sim.window_scores, sim.window_query, nd)
    passes, trials = irt.collapse_placements(sim.rubric_query, sim.rubric_doc, sim.rubric_answers, n_queries, n_docs)
    cal = irt.fit_2pl_calibration(irt.calibration_cells(fit.theta, passes, trials))
    wins = bradley_terry.pair_statistics(
        jnp.asarray(sim.window_docs), jnp.asarray(sim.window_scores, jnp.float32), jnp.asarray(sim.window_query),
        n_queries=n_queries, n_docs=n_docs,
    )
    u, v = bayes.item_contrasts(cal.u, cal.v)
    init = {"u": u, "v": v, "tau": cal.tau, "alpha": cal.alpha}
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    frozen = dict(theta=f32(fit.theta), passes=f32(passes), trials=f32(trials))
    joint = dict(wins=wins, n_docs=jnp.asarray(nd), passes=f32(passes), trials=f32(trials))
    z0 = bayes.contrasts_from_centred(f32(fit.theta), jnp.asarray(nd))
    start = {k: f32(x) for k, x in init.items()}
    return {"frozen": (frozen, start),
            "joint": ({**joint, "param": "theta"}, {**start, "z": z0}),
            "joint-ability": ({**joint, "param": "ability"}, {**start, "w": z0 * f32(cal.tau)[:, None]})}


def _min_ess(draws: inference.Draws) -> tuple[float, float]:
    rh, es = [], []
    for p in PARAMS:
        r, e = inference.split_rhat_ess(draws.samples[p])
        rh.append(np.max(r))
        es.append(np.min(e))
    return float(min(es)), float(max(rh))


def _agreement(draws: inference.Draws, ref: inference.Draws | None) -> dict:
    if ref is None:
        return {}
    gaps, ratios = [], []
    for p in PARAMS:
        a = draws.samples[p].reshape((-1,) + draws.samples[p].shape[2:])
        b = ref.samples[p].reshape((-1,) + ref.samples[p].shape[2:])
        sd = b.std(0)
        gaps.append(np.max(np.abs(a.mean(0) - b.mean(0)) / sd))
        ratios.append(a.std(0) / sd)
    ratios = np.concatenate([np.ravel(r) for r in ratios])
    return {"max_mean_gap_sd": float(max(gaps)), "sd_ratio_min": float(ratios.min()), "sd_ratio_max": float(ratios.max())}


def timed(fn, warm_below: float) -> tuple[inference.Draws, float, float | None]:
    start = time.perf_counter()
    draws = fn(0)
    cold = time.perf_counter() - start
    warm = None
    if cold < warm_below:
        start = time.perf_counter()
        draws = fn(1)
        warm = time.perf_counter() - start
    return draws, cold, warm


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--docs", type=int, default=60)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--samples", type=int, default=500)
    p.add_argument("--cap-1000", type=int, default=300,
                   help="warmup and samples at >= 1000 queries (CPU time; 0 = no cap)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--svi-steps", type=int, default=2000)
    p.add_argument("--joint-nuts-max", type=int, default=100, help="largest query count for joint-model NUTS")
    p.add_argument("--warm-below", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", nargs="+", choices=("frozen", "joint"), default=["frozen", "joint"])
    p.add_argument("--methods", nargs="+", choices=("nuts", "svi", "laplace"), default=["nuts", "svi", "laplace"])
    p.add_argument("--joint-param", nargs="+", choices=("theta", "ability"), default=["theta", "ability"],
                   help="coordinates of the joint model's latent scores (rcp_jax.models.bayes.joint_model, param)")
    p.add_argument("--tag", default="", help="suffix of the JSON file name")
    args = p.parse_args(argv)

    rows = []
    device = jax.devices()[0]
    print(f"backend {jax.default_backend()} ({device.device_kind}), {jax.device_count()} device(s), "
          f"{args.docs} documents per query, NUTS {args.chains} chains "
          f"{inference.default_chain_method(args.chains)}")
    header = (f"{'model':<14}{'method':<9}{'queries':>8}{'warmup':>7}{'draws':>7}{'cold s':>9}{'warm s':>9}"
              f"{'min ESS':>9}{'ESS/s':>8}{'R-hat':>7}{'div':>5}  agreement with NUTS")
    print(header)
    for q in args.queries:
        data = make_data(q, args.docs, args.seed)
        warmup = samples = None
        if q >= 1000 and args.cap_1000:
            warmup, samples = min(args.warmup, args.cap_1000), min(args.samples, args.cap_1000)
        warmup, samples = warmup or args.warmup, samples or args.samples
        fits = [("frozen", bayes.calibration_model)] * ("frozen" in args.models)
        fits += [("joint" if param == "theta" else f"joint-{param}", bayes.joint_model) for param in args.joint_param
                 if "joint" in args.models]
        for model_name, model in fits:
            kw, init = data[model_name]
            ref = None
            methods = ["nuts", "svi", "laplace"] if model_name == "frozen" else ["nuts", "svi"]
            methods = [m for m in methods if m in args.methods]
            if model_name != "frozen" and q > args.joint_nuts_max:
                methods = ["svi"]
            for method in methods:
                if method == "nuts":
                    fn = lambda s: inference.run_nuts(model, kw, seed=args.seed + s, num_warmup=warmup,  # noqa: E731
                                                      num_samples=samples, num_chains=args.chains, init_values=init)
                else:
                    fn = lambda s: inference.run_svi(model, kw, seed=args.seed + s,  # noqa: E731
                                                     guide="normal" if method == "svi" else "laplace",
                                                     num_steps=args.svi_steps, num_samples=1000, init_values=init)
                draws, cold, warm = timed(fn, args.warm_below)
                row = {"model": model_name, "method": method, "queries": q, "docs": args.docs, "cold_s": cold,
                       "warm_s": warm, "warmup": warmup if method == "nuts" else args.svi_steps,
                       "draws": draws.num_chains * draws.num_draws}
                if method == "nuts":
                    ess, rhat = _min_ess(draws)
                    row.update(min_ess=ess, ess_per_s=ess / (warm or cold), max_rhat=rhat,
                               divergences=int(draws.stats["diverging"].sum()),
                               mean_steps=float(draws.stats["num_steps"].mean()))
                    ref = draws
                else:
                    # independent draws from the fitted guide: their ESS is ~ the draw count, so ESS/s is the
                    # rate of usable draws of the *approximation* (its accuracy is the agreement column)
                    ess, _ = _min_ess(draws)
                    row.update(min_ess=ess, ess_per_s=ess / (warm or cold))
                    row.update(_agreement(draws, ref))
                rows.append(row)
                agree = (f"mean gap {row['max_mean_gap_sd']:.2f} sd, sd ratio {row['sd_ratio_min']:.2f}-"
                         f"{row['sd_ratio_max']:.2f}" if "max_mean_gap_sd" in row else "")
                print(f"{model_name:<14}{method:<9}{q:>8}{row['warmup']:>7}{row['draws']:>7}{cold:>9.1f}"
                      f"{(warm if warm is not None else float('nan')):>9.1f}{row.get('min_ess', float('nan')):>9.0f}"
                      f"{row.get('ess_per_s', float('nan')):>8.1f}{row.get('max_rhat', float('nan')):>7.3f}"
                      f"{row.get('divergences', 0):>5}  {agree}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"backend": jax.default_backend(), "device": device.device_kind, "devices": jax.device_count(),
            "machine": platform.machine(), "python": platform.python_version(), "jax": jax.__version__,
            "chains": args.chains, "docs": args.docs}
    path = OUT / f"bayes_speed{args.tag}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Human-anchored comparisons (issue 35): coverage, width and null rate over many replications.

The simulator (:mod:`rcp_jax.anchored.simulate`): 200 queries, 4 systems (6 pairs; A-B a null pair the judge
separates), human grades and judge gains from the same latent relevance, a judge bias that differs between
systems. Scenarios:

* ``correlated``: judge_noise 0.3 (per-query correlation of judge and human differences about 0.73);
* ``uncorrelated``: skill 0 (the judge is blind to relevance; correlation about 0);
* ``heteroscedastic``: skill 1.5, heterogeneity 1.5, assessor noise 0.2 (the judge's noise varies a lot between
  queries, but the human side's misses dominate the residual, so its sd predicts little);
* ``informative``: judge_noise 0.1, assessor noise 0.1, and on 10% of the queries the judge slips (sd 0.4 on its
  metric): the residual is dominated by the judge's noise where it slips, and the judge's reported sd tracks its
  true sd imperfectly (log-scale correlation 0.8, Pearson about 0.65: ``sd_corr`` in the output). This is the
  regime where active labelling is known to help.

For each scenario, fraction (10%, 25%, 50%) and scheme (``random``: a simple random sample of exactly the
budget; ``active``: one round, each query drawn with probability ``pi_i`` proportional to the predicted residual
size from the judge's own output (its reported sd and how far each pair's difference sits from the pair's median:
:func:`rcp_jax.anchored.active.judge_signal_scale`), mixed with 20% uniform, capped at 1, exactly the budget
drawn by randomised systematic sampling, the estimator weighting by ``1/pi``; ``active-sd-poisson``: the
previous design, the reported sd alone and independent Bernoulli draws) it records the coverage of the 90%
intervals (target: the benchmark's mean human difference), the anchored / human-only width ratio, the active /
random width ratio, the judge-only bias, and the null pair's call rate (superpopulation target, where equal
quality means a true difference of 0). Replications run in vectorised chunks of 500.

    python -m benchmarks.anchored_coverage --replications 2000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rcp_jax.anchored.simulate import replicate, simulate_benchmark

OUT = Path(__file__).resolve().parent / "out"
SCENARIOS = {
    "correlated": dict(judge_noise=0.3),
    "uncorrelated": dict(skill=0.0),
    "heteroscedastic": dict(skill=1.5, heterogeneity=1.5, assessor_noise=0.2),
    "informative": dict(judge_noise=0.1, slip_share=0.1, slip_sd=0.4, assessor_noise=0.1),
}

SCHEMES = {
    "random": dict(scheme="random"),
    "active": dict(scheme="active"),
    "active-sd-poisson": dict(scheme="active", signals="sd", draw="poisson"),
}


def run(replications: int, queries: int, chunk: int = 500, seed: int = 0) -> list[dict]:
    rows = []
    for s_i, (scenario, params) in enumerate(SCENARIOS.items()):
        for fraction in (0.10, 0.25, 0.50):
            for scheme, options in SCHEMES.items():
                acc: dict[str, list] = {}
                done = 0
                while done < replications:
                    r = min(chunk, replications - done)
                    key = [seed, s_i, done]
                    bench = simulate_benchmark(np.random.default_rng(key), replications=r, queries=queries, **params)
                    rc = replicate(bench, np.random.default_rng([*key, 1]), fraction, **options)
                    sp = replicate(bench, np.random.default_rng([*key, 1]), fraction, **options,
                                   target="superpopulation")
                    for name, value in (
                        ("covered", rc.anchored_covered), ("human_covered", rc.human_covered),
                        ("width", rc.anchored_width), ("human_width", rc.human_width),
                        ("ratio", rc.anchored_width / rc.human_width), ("corr", rc.correlation),
                        ("judge_bias", rc.judge_only - rc.truth), ("error", rc.anchored_estimate - rc.truth),
                        ("null_called", sp.anchored_called[:, :1]), ("null_called_human", sp.human_called[:, :1]),
                        ("labels", rc.labels[:, None]),
                        ("sd_corr", np.array([[np.corrcoef(bench.judge_sd[i, 0], bench.noise_sd[i, 0])[0, 1]]
                                              for i in range(r)])),
                    ):
                        acc.setdefault(name, []).append(value)
                    done += r
                a = {k: np.concatenate(v) for k, v in acc.items()}
                n = a["covered"].shape[0]
                rows.append({
                    "scenario": scenario, "fraction": fraction, "scheme": scheme, "replications": n,
                    "coverage": float(a["covered"].mean()), "coverage_min_pair": float(a["covered"].mean(0).min()),
                    "coverage_max_pair": float(a["covered"].mean(0).max()),
                    "human_coverage": float(a["human_covered"].mean()),
                    "width": float(np.nanmean(a["width"])), "human_width": float(np.nanmean(a["human_width"])),
                    "width_ratio": float(np.nanmean(a["ratio"])), "width_ratio_max": float(np.nanmax(a["ratio"])),
                    "rmse": float(np.sqrt(np.mean(a["error"] ** 2))),
                    "correlation": float(np.nanmean(a["corr"])),
                    "judge_bias_null_pair": float(a["judge_bias"][:, 0].mean()),
                    "null_rate": float(a["null_called"].mean()), "null_rate_human": float(a["null_called_human"].mean()),
                    "labels": float(a["labels"].mean()), "sd_corr": float(np.nanmean(a["sd_corr"])),
                })
                print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    by = {(r["scenario"], r["fraction"], r["scheme"]): r for r in rows}
    lines = ["| scenario | labelled | scheme | coverage (pairs min-max) | human-only cov. | width ratio (max) | "
             "corr | null rate (human-only) | judge bias A-B | width vs random | labels | sd corr |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rand = by[(r["scenario"], r["fraction"], "random")]
        lines.append(
            f"| {r['scenario']} | {r['fraction']:.0%} | {r['scheme']} | {r['coverage']:.3f} "
            f"({r['coverage_min_pair']:.3f}-{r['coverage_max_pair']:.3f}) | {r['human_coverage']:.3f} | "
            f"{r['width_ratio']:.3f} ({r['width_ratio_max']:.3f}) | {r['correlation']:.2f} | "
            f"{r['null_rate']:.3f} ({r['null_rate_human']:.3f}) | {r['judge_bias_null_pair']:+.3f} | "
            f"{r['width'] / rand['width']:.3f} (rmse {r['rmse'] / rand['rmse']:.3f}) | {r['labels']:.1f} | "
            f"{r['sd_corr']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    rows = run(args.replications, args.queries)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "anchored_coverage.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()

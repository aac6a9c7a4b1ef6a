"""Budgeted judging against the fixed protocol and random windows, on the simulator.

Per seed, one simulated benchmark (:func:`rcp_jax.budget.simulated.simulated_benchmark`: 14 systems, 7
pairs of twins identical in expectation, pools of 150) is judged, every answer through the judging layer
and a store:

* **full**: the fixed protocol (316 calls per query at n = 150); its decisions are the reference;
* **fixed at a fraction f**: the fixed schedule with every placement count times f (``--fixed-fractions``);
* **budgeted**: :func:`rcp_jax.budget.judge_budgeted` to ``--max-fraction`` of the full calls, run past its
  stopping point (``stop_when_decided=False``) so the whole curve is drawn; the stopping rule's own point is
  the first round it fires;
* **random**: the same loop choosing balanced random windows (strategy ``random``);
* **batched** (``--batch-round-fraction F``): the budgeted loop with rounds of F x the full calls, the fewer,
  larger rounds a batch API wants (each round one batch across all queries; the simulated judge answers a
  window the same online or in a batch, so only the round size differs).

Decisions of every variant use the same posterior (:mod:`rcp_jax.budget.gains`) and rule
(:func:`rcp_jax.bayes.posterior_ndcg.decide`). The budgeted and random stores start as copies of the full
run's store: the simulated judge's answer depends only on the window, so the seed's windows (the fixed
schedule's own) are not re-simulated; calls are counted as windows in the plan, found or asked.

Overhead: each round's refit + decisions + selection time against the judging time of its windows at 1 s
per call with 64 in flight (``windows / 64`` s). Rounds that compiled a new XLA shape are reported apart.

Small size (a few minutes on 2 busy cores)::

    .venv/bin/python -m benchmarks.budgeted --seeds 3 --queries 50

Full size (the issue's 14 systems x 200 queries x pools of 150; a few hours on 2 busy cores)::

    .venv/bin/python -m benchmarks.budgeted --seeds 5 --queries 200 --tag _full --plot

The loop's own cost per round (refit + decisions + selection, process CPU and wall, compiled programs and
stored answers reused) at 200 queries::

    .venv/bin/python -m benchmarks.budgeted --overhead-queries 200
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"


def scaled_config(f: float):
    from rcp_jax.schedule import DEFAULT_CONFIG

    c = DEFAULT_CONFIG
    fr = Fraction(f).limit_denominator(100)
    return replace(c, round1_placements=c.round1_placements * fr, round2_placements=c.round2_placements * fr,
                   round3_placements=c.round3_placements * fr, rubric_placements=c.rubric_placements * fr)


def decisions_of(window_scores, answers, pools, weights, seed):
    from rcp_jax import calibrate, fit_bradley_terry
    from rcp_jax.budget import decide_pairs, gain_posterior

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = fit_bradley_terry(window_scores)
        cal = calibrate(bt, answers)
    post = gain_posterior(bt, cal, answers, pools, weights.query_ids, seed=seed)
    return decide_pairs(weights, post, seed=seed), cal


def one_seed(seed: int, args, work: Path) -> dict:
    from rcp_jax.budget import BudgetSettings, full_protocol_calls, judge_budgeted, run_weights
    from rcp_jax.budget.compare import score_calls, true_pair_deltas
    from rcp_jax.budget.simulated import simulated_benchmark
    from rcp_jax.pipeline import judge_collection_sync

    sim = simulated_benchmark(seed, n_queries=args.queries, pool=args.pool)
    pools = sim.collection.pools
    qids = sorted(pools)
    weights = run_weights(sim.runs, pools, qids)
    full_calls = full_protocol_calls(pools)
    rec = {"seed": seed, "queries": args.queries, "full_calls": full_calls, "curves": []}

    t0 = time.perf_counter()
    ws, ans, _, _ = judge_collection_sync(sim.collection, judge=sim.judge, store=work / "full", seed=0,
                                          concurrency=64, progress=False)
    ref, cal = decisions_of(ws, ans, pools, weights, seed)
    rec["full_s"] = time.perf_counter() - t0
    truth = true_pair_deltas(weights, sim.latent, pools, np.asarray(sim.judge.gamma), np.asarray(sim.judge.beta))
    score = lambda pairs: score_calls(pairs, ref.pairs, sim.null_pairs, truth)  # noqa: E731
    rec["full"] = {**score(ref.pairs), "calls": full_calls}
    rec["curves"].append({"variant": "fixed", "calls": full_calls, "fraction": 1.0, **rec["full"]})

    for f in args.fixed_fractions:
        cfg = scaled_config(f)
        ws_f, ans_f, _, calls_f = judge_collection_sync(sim.collection, judge=sim.judge, store=work / f"fixed{f}",
                                                        seed=0, config=cfg, concurrency=64, progress=False)
        planned = full_protocol_calls(pools, cfg)
        dec_f, _ = decisions_of(ws_f, ans_f, pools, weights, seed)
        rec["curves"].append({"variant": "fixed", "calls": planned, "fraction": planned / full_calls, **score(dec_f.pairs)})

    variants = [("budgeted", "posterior", None), ("random", "random", None)]
    if args.batch_round_fraction:
        variants.append(("batched", "posterior", max(len(pools), int(np.ceil(args.batch_round_fraction * full_calls)))))
    for name, strategy, round_calls in variants:
        store = work / name
        shutil.copytree(work / "full", store)
        settings = BudgetSettings(strategy=strategy, stop_when_decided=False, round_calls=round_calls)
        t0 = time.perf_counter()
        res = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=store, budget=args.max_fraction,
                             settings=settings, concurrency=64)
        wall = time.perf_counter() - t0
        stop_round = None
        for rep in res.rounds:
            s = score(rep.decisions.pairs)
            rec["curves"].append({"variant": name, "round": rep.round, "calls": rep.calls,
                                  "fraction": rep.calls / full_calls, "open": rep.decisions.n_open,
                                  "overhead_s": rep.overhead_s, "overhead_cpu_s": rep.overhead_cpu_s,
                                  "next_windows": rep.windows, **s})
            if stop_round is None and (rep.decisions.n_decided == len(rep.decisions.pairs) or rep.decisions.n_open == 0):
                stop_round = rep.round
        rec[f"{name}_wall_s"] = wall
        rec[f"{name}_stop_round"] = stop_round
        shutil.rmtree(store)
    return rec


def summarise(records: list[dict], target: float) -> dict:
    curves = pd.DataFrame([{**c, "seed": r["seed"], "full_calls": r["full_calls"]} for r in records for c in r["curves"]])
    out = {"seeds": len(records), "queries": records[0]["queries"], "full": {}, "at_target": {}, "at_stop": {}}
    full = curves[(curves["variant"] == "fixed") & (curves["fraction"] == 1.0)]
    out["full"] = {"decided": float(full["decided"].mean()), "pairs": int(full["pairs"].iloc[0]),
                   "false_calls": int(full["false_calls"].sum()), "null_pairs": int(full["null_pairs"].sum()),
                   "wrong_sign": int(full["wrong_sign"].sum()), "wrong_equivalent": int(full["wrong_equivalent"].sum())}
    for name in [v for v in ("budgeted", "random", "batched") if (curves["variant"] == v).any()]:
        c = curves[curves["variant"] == name]
        at = c[c["fraction"] <= target + 1e-9].sort_values("calls").groupby("seed").tail(1)
        out["at_target"][name] = {"fraction": float(at["fraction"].mean()), "agree": float(at["agree"].mean()),
                                  "agree_min": float(at["agree"].min()), "decided": float(at["decided"].mean()),
                                  "false_calls": int(at["false_calls"].sum()), "null_pairs": int(at["null_pairs"].sum()),
                                  "wrong_sign": int(at["wrong_sign"].sum()),
                                  "wrong_equivalent": int(at["wrong_equivalent"].sum())}
        stops = []
        for r in records:
            sr = r.get(f"{name}_stop_round")
            row = c[(c["seed"] == r["seed"]) & (c["round"] == sr)] if sr is not None else c[(c["seed"] == r["seed"])].tail(1)
            stops.append(row.iloc[0])
        st = pd.DataFrame(stops)
        out["at_stop"][name] = {"fraction": float(st["fraction"].mean()), "agree": float(st["agree"].mean()),
                                "decided": float(st["decided"].mean()), "false_calls": int(st["false_calls"].sum()),
                                "null_pairs": int(st["null_pairs"].sum()), "wrong_sign": int(st["wrong_sign"].sum()),
                                "wrong_equivalent": int(st["wrong_equivalent"].sum()),
                                "stopped_by_rule": int(sum(r.get(f"{name}_stop_round") is not None for r in records)),
                                "rounds": float(st["round"].mean())}
        steady = c[(c["next_windows"] > 0) & (c["round"] > 0)]
        judge_s = steady["next_windows"] / 64.0
        out["at_target"][name]["overhead_median_s"] = float(steady["overhead_s"].median())
        out["at_target"][name]["overhead_share_median"] = float((steady["overhead_s"] / judge_s).median())
        out["at_target"][name]["overhead_share_total"] = float(steady["overhead_s"].sum() / judge_s.sum())
        if "overhead_cpu_s" in steady:
            out["at_target"][name]["overhead_cpu_median_s"] = float(steady["overhead_cpu_s"].median())
            out["at_target"][name]["overhead_cpu_share_median"] = float((steady["overhead_cpu_s"] / judge_s).median())
    fixed = curves[(curves["variant"] == "fixed") & (curves["fraction"] < 1.0)]
    out["fixed_fractions"] = {f"{f:.2f}": {"agree": float(g["agree"].mean()), "decided": float(g["decided"].mean()),
                                           "false_calls": int(g["false_calls"].sum()),
                                           "wrong_sign": int(g["wrong_sign"].sum()),
                                           "wrong_equivalent": int(g["wrong_equivalent"].sum())}
                              for f, g in fixed.groupby("fraction")}
    return out


def overhead(queries: int, pool: int, fraction: float = 0.25) -> dict:
    """The loop's own cost per round at ``queries`` queries: a budgeted run, then the same run again in the same
    process (every answer in the store, every program compiled), whose rounds are pure refit + decisions +
    selection. Judging time of a round: its windows / 64 s (1 s per call, 64 in flight)."""
    from rcp_jax.budget import BudgetSettings, judge_budgeted
    from rcp_jax.budget.simulated import simulated_benchmark

    sim = simulated_benchmark(7, n_queries=queries, pool=pool)
    settings = BudgetSettings(stop_when_decided=False)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        first = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=Path(tmp) / "s", budget=fraction,
                               settings=settings, concurrency=64)
        first_s = time.perf_counter() - t0
        again = judge_budgeted(sim.collection, sim.runs, judge=sim.judge, store=Path(tmp) / "s", budget=fraction,
                               settings=settings, concurrency=64)
    rows = [r for r in again.rounds if r.windows > 0]
    judge_s = np.array([r.windows / 64.0 for r in rows])
    cpu = np.array([r.overhead_cpu_s for r in rows])
    wall = np.array([r.overhead_s for r in rows])
    first_rows = [r for r in first.rounds if r.windows > 0]
    return {"queries": queries, "round_windows": int(rows[0].windows), "rounds": len(rows),
            "cpu_s_median": float(np.median(cpu)), "wall_s_median": float(np.median(wall)),
            "judge_s_per_round": float(np.median(judge_s)), "cpu_share": float(cpu.sum() / judge_s.sum()),
            "wall_share": float(wall.sum() / judge_s.sum()),
            "first_run_cpu_s": [round(r.overhead_cpu_s, 2) for r in first_rows],
            "first_run_wall_s": float(first_s), "paid_first": first.paid, "paid_again": again.paid}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3, help="simulated benchmarks (default 3)")
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--queries", type=int, default=50, help="queries per benchmark (default 50)")
    p.add_argument("--pool", type=int, default=150, help="documents per pool (default 150)")
    p.add_argument("--max-fraction", type=float, default=0.6, help="budget of the budgeted / random curves (default 0.6)")
    p.add_argument("--target", type=float, default=0.4, help="fraction the headline figures are read at (default 0.4)")
    p.add_argument("--fixed-fractions", type=float, nargs="*", default=[0.4, 0.7],
                   help="scaled fixed schedules to draw (default 0.4 0.7; each >= 0.3 so the rubric covers the pool)")
    p.add_argument("--batch-round-fraction", type=float, default=0.0, metavar="F",
                   help="also run the budgeted loop with rounds of F x the full protocol's calls (the fewer, larger "
                        "rounds of judging with batch APIs, e.g. 0.15; default 0: not run)")
    p.add_argument("--tag", default="")
    p.add_argument("--plot", action="store_true", help="also draw benchmarks/out/budgeted<tag>.png")
    p.add_argument("--overhead-queries", type=int, default=None, metavar="N",
                   help="only measure the loop's own cost per round at N queries (writes budgeted_overhead<tag>.json)")
    args = p.parse_args(argv)
    from rcp_jax.cli.app import _configure_compilation_cache

    _configure_compilation_cache()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.overhead_queries:
        result = overhead(args.overhead_queries, args.pool)
        print(json.dumps(result, indent=1))
        (OUT / f"budgeted_overhead{args.tag}.json").write_text(json.dumps(result, indent=1))
        return 0
    records = []
    start = time.perf_counter()
    for i in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            rec = one_seed(args.first_seed + i, args, Path(tmp))
        records.append(rec)
        print(f"[{time.perf_counter() - start:6.0f} s] seed {rec['seed']}: full {rec['full']}", flush=True)
        (OUT / f"budgeted{args.tag}.json").write_text(json.dumps({"settings": vars(args), "records": records}, indent=1))
    summary = summarise(records, args.target)
    print(json.dumps(summary, indent=1))
    (OUT / f"budgeted{args.tag}.json").write_text(json.dumps({"settings": vars(args), "summary": summary,
                                                               "records": records}, indent=1))
    if args.plot:
        from rcp_jax.plots.budget import plot_budget_curves

        curves = pd.DataFrame([{**c, "seed": r["seed"]} for r in records for c in r["curves"]])
        plot_budget_curves(curves, path=OUT / f"budgeted{args.tag}.png")
    print(f"wall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

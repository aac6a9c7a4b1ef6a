"""Several judges, one calibration: recovery of known judge offsets on the simulator.

Part A (model level, many replicates): a collection with known latent relevance is judged by K simulated
judges that share the criteria but differ in severity (an offset on every difficulty) and discrimination
scale (:func:`rcp_jax.models.simulate.simulate_judgements` with ``severity`` / ``discrimination``). Each judge has
its own tournament windows and rubric placements; the pooled BT scores and the pooled 2PL
(:func:`rcp_jax.judges.fit_judges`) estimate delta_k (sum 0) and lambda_k (geometric mean 1). The true
values obey the same conventions (and the true items have sum(gamma) = C, mean(beta) = 0), so they are
directly comparable. Reported: mean absolute error, the coverage of the 90% Laplace intervals over
replicates and judges, their mean width, and one replicate's NUTS intervals.

Part B (end to end): two :class:`judging.SimulatedJudge` judges (the second stricter by ``--severity``)
judge one synthetic collection through the whole pipeline into one store; ``rcp-jax fit --judges`` and
``rcp-jax compare --by-judge`` are then run in-process on it.

    .venv/bin/python -m benchmarks.judges                 # ~5-10 min of CPU on 2 shared cores
    .venv/bin/python -m benchmarks.judges --replicates 3  # quicker

Writes ``benchmarks/out/judges.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def simulated_tables(seed: int, n_queries: int, n_docs: int, severity, scale):
    """name -> (window_scores, answers) of len(severity) judges of one simulated collection."""
    from rcp_jax.models import simulate as sim

    truth = sim.simulate_truth(np.random.default_rng([seed, 7]), [n_docs] * n_queries)
    tables = {}
    for k, (sev, disc) in enumerate(zip(severity, scale)):
        s = sim.simulate_judgements(seed * 100 + k, [n_docs] * n_queries, truth=truth, severity=sev, discrimination=disc)
        ws = [(f"q{j}", f"round1#{w}", f"d{d}", x) for w, (docs, sc, j) in
              enumerate(zip(s.window_docs, s.window_scores, s.window_query)) for d, x in zip(docs, sc) if d >= 0]
        ans = pd.DataFrame(s.rubric_answers, columns=[f"C{c + 1}" for c in range(s.rubric_answers.shape[1])])
        ans.insert(0, "doc_id", [f"d{d}" for d in s.rubric_doc])
        ans.insert(0, "window_id", "balanced#0")  # one label: the judges' placements are not shared windows
        ans.insert(0, "query_id", [f"q{j}" for j in s.rubric_query])
        # windows differ between judges (their own random windows), so the round-1 schedule check is moot:
        # name each judge's windows apart
        ws = pd.DataFrame(ws, columns=["query_id", "window_id", "doc_id", "score"])
        ws["window_id"] = f"j{k}-" + ws["window_id"]
        tables[f"judge{k + 1}"] = (ws, ans)
    return tables


def part_a(settings, replicates: int, n_queries: int, n_docs: int, nuts: bool) -> list[dict]:
    from rcp_jax.judges import fit_judges

    out = []
    for severity, scale in settings:
        severity, scale = np.asarray(severity, float), np.asarray(scale, float)
        err_d, err_s, cov_d, cov_s, width_d, walls = [], [], [], [], [], []
        for r in range(replicates):
            tables = simulated_tables(r, n_queries, n_docs, severity, scale)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                fit = fit_judges(tables)
            walls.append(time.perf_counter() - t0)
            o = fit.offsets
            err_d += list(np.abs(o["delta"] - severity))
            err_s += list(np.abs(o["scale"] / scale - 1))
            cov_d += list((o["delta_lo"] <= severity) & (severity <= o["delta_hi"]))
            cov_s += list((o["scale_lo"] <= scale) & (scale <= o["scale_hi"]))
            width_d += list(o["delta_hi"] - o["delta_lo"])
        row = {"judges": len(severity), "severity": severity.tolist(), "scale": scale.tolist(),
               "queries": n_queries, "docs": n_docs, "replicates": replicates,
               "delta_mae": float(np.mean(err_d)), "delta_max_err": float(np.max(err_d)),
               "scale_mean_rel_err": float(np.mean(err_s)), "delta_cover90": float(np.mean(cov_d)),
               "scale_cover90": float(np.mean(cov_s)), "delta_width90": float(np.mean(width_d)),
               "fit_s_median": float(np.median(walls)), "fit_s_first": float(walls[0])}
        if nuts:
            tables = simulated_tables(0, n_queries, n_docs, severity, scale)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                fit = fit_judges(tables, method="nuts", num_warmup=300, num_samples=300, num_chains=2)
            o = fit.offsets
            row["nuts"] = {"delta": o["delta"].tolist(), "delta_lo": o["delta_lo"].tolist(),
                           "delta_hi": o["delta_hi"].tolist(), "scale": o["scale"].tolist(),
                           "scale_lo": o["scale_lo"].tolist(), "scale_hi": o["scale_hi"].tolist(),
                           "divergences": fit.info["divergences"], "max_rhat": fit.info["max_rhat"],
                           "wall_s": time.perf_counter() - t0}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def part_b(n_queries: int, n_docs: int, severity: float) -> dict:
    from rcp_jax.judging.offline import SimulatedJudge, synthetic_dataset
    from rcp_jax.cli import main
    from rcp_jax.pipeline import PipelineInput, judge_collection_sync

    queries, documents, latent = synthetic_dataset(n_queries, n_docs, seed=11, doc_chars=80)
    pools = {q: list(d) for q, d in documents.items()}
    coll = PipelineInput(queries=queries, documents=documents, pools=pools, dataset="judges-bench")
    work = Path(tempfile.mkdtemp(prefix="rcp-judges-"))
    calls = {}
    for name, sev, seed in (("sim-a", 0.0, 1), ("sim-b", severity, 2)):
        judge = SimulatedJudge(latent, model=name, severity=sev, seed=seed, decorate=False)
        *_, calls[name] = judge_collection_sync(coll, judge=judge, store=work / "store", progress=False)
    rng = np.random.default_rng(0)
    rows = [(sys_name, q, d, latent[q][d] + rng.normal(0, noise)) for q, docs in pools.items()
            for sys_name, noise in (("strong", 0.5), ("mid", 1.0), ("mid2", 1.05), ("weak", 3.0)) for d in docs]
    pd.DataFrame(rows, columns=["system", "query_id", "doc_id", "score"]).to_csv(work / "runs.csv", index=False)
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["fit", "--store", str(work / "store"), "--judges", "sim-a,sim-b", "--out", str(work / "fit"),
                     "--json"]) == 0
    fit = json.loads((work / "fit" / "fit.json").read_text())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["compare", "--by-judge", str(work / "fit"), "--runs", str(work / "runs.csv"), "--json"]) == 0
    cmp = json.loads(buf.getvalue())
    off = {r["judge"]: r for r in fit["offsets"]}
    kappa = {r["criterion"]: r["kappa"] for r in fit["agreement"]}
    out = {"queries": n_queries, "docs": n_docs, "true_gap": severity, "calls": calls,
           "gap": off["sim-b"]["delta"] - off["sim-a"]["delta"],
           "offsets": fit["offsets"], "kappa": kappa, "pairs": cmp["pairs"], "pairs_agree": cmp["agree"],
           "pairs_total": len(cmp["pairs"])}
    print(json.dumps({k: v for k, v in out.items() if k != "pairs"}), flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicates", type=int, default=8, help="collections per setting of part A (default 8)")
    p.add_argument("--queries", type=int, default=30, help="queries per collection of part A (default 30)")
    p.add_argument("--docs", type=int, default=30, help="documents per query of part A (default 30)")
    p.add_argument("--no-nuts", action="store_true", help="skip the NUTS replicate of each setting")
    p.add_argument("--e2e-queries", type=int, default=10, help="queries of part B (default 10)")
    p.add_argument("--e2e-docs", type=int, default=30, help="documents per query of part B (default 30)")
    p.add_argument("--severity", type=float, default=0.8, help="part B: the second judge's severity (default 0.8)")
    args = p.parse_args(argv)
    settings = [([-0.4, 0.4], [0.8, 1.25]), ([-0.6, 0.1, 0.5], [0.8, 1.0, 1.25])]
    result = {"part_a": part_a(settings, args.replicates, args.queries, args.docs, not args.no_nuts),
              "part_b": part_b(args.e2e_queries, args.e2e_docs, args.severity)}
    out = ROOT / "benchmarks" / "out" / "judges.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

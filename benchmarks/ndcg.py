"""nDCG@10 of many systems: rcp-jax vs ranx and pytrec_eval.

14 systems x 1,000 queries x 150 scored documents (2.1 M run rows; continuous scores, no ties), one
graded judgement per (query, document). Gains: the true RCP gain of each document's latent relevance
in the benchmark collection (float, in (0, 1)), and an integer version ``round(3 x gain)`` (0-3) for
the tools that only take integer relevance.

* **ours, kernel**: ``rcp_jax.metrics.ndcg_flat`` on pre-encoded integer arrays (like ranx's numba
  kernel on prebuilt ``Qrels``/``Run``).
* **ours, table**: ``rcp_jax.evaluation.ndcg_table`` from DataFrames (string ids: joins, factorisation).
* **ours, evaluate**: ``rcp_jax.evaluate`` (validation + ``ndcg_table``).
* **ranx**: ``ranx.evaluate(qrels, run, "ndcg@10")`` per system on prebuilt ``Qrels``/``Run`` (numba
  compiled by a first call outside the timing: "warm"), ``threads=0`` (all cores). The time to build the
  ``Run`` objects from DataFrames is reported separately.
* **pytrec_eval**: ``RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)`` per system on prebuilt
  dicts (dict building reported separately).

Ours runs with integer gains (identical inputs to ranx / pytrec_eval) and with float gains. Agreement:
max |nDCG_ours - nDCG_other| over every (system, query).

Usage: ``python -m benchmarks.ndcg [--queries 1000] [--systems 14] [--tiny] [--no-memory]``.
Writes ``benchmarks/out/ndcg.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

K = 10


def make_inputs(n_queries: int, n_systems: int, seed: int = 0) -> dict:
    """Run and gain tables (pandas, string ids) plus the encoded arrays of the same data."""
    import pandas as pd

    from rcp_jax.models.simulate import NANOBEIR_BETA, NANOBEIR_GAMMA, true_gain

    d = C.collection(n_queries)
    rel = d["relevance"]  # [Q, N]
    gain = true_gain(rel, NANOBEIR_GAMMA, NANOBEIR_BETA)
    grade = np.rint(3 * gain)
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.3, 1.5, n_systems)
    # system score = skill x relevance + noise: systems of different quality, no ties
    scores = skill[:, None, None] * rel[None] + rng.normal(0.0, 1.0, (n_systems, n_queries, C.N_DOCS))
    s_idx, q_idx, d_idx = np.meshgrid(np.arange(n_systems), np.arange(n_queries), np.arange(C.N_DOCS), indexing="ij")
    qid = np.char.add("q", np.arange(n_queries).astype(str))
    did = np.char.add("d", np.arange(C.N_DOCS).astype(str))
    run = pd.DataFrame({
        "system": np.char.add("s", s_idx.ravel().astype(str)), "query_id": qid[q_idx.ravel()],
        "doc_id": np.char.add(np.char.add(qid[q_idx.ravel()], "-"), did[d_idx.ravel()]), "score": scores.ravel(),
    })
    gq, gd = np.meshgrid(np.arange(n_queries), np.arange(C.N_DOCS), indexing="ij")
    gdoc = np.char.add(np.char.add(qid[gq.ravel()], "-"), did[gd.ravel()])
    float_gains = pd.DataFrame({"query_id": qid[gq.ravel()], "doc_id": gdoc, "gain": gain.ravel()})
    int_gains = float_gains.assign(gain=grade.ravel())
    return {"run": run, "float_gains": float_gains, "int_gains": int_gains, "gain": gain, "grade": grade,
            "scores": scores, "n_queries": n_queries, "n_systems": n_systems}


def kernel_arrays(inp: dict, gains: np.ndarray) -> tuple:
    """Encoded arrays for ``ndcg_flat``: one group per (system, query), ideal per query."""
    s, q, n = inp["scores"].shape
    group = (np.arange(s * q)[:, None] * np.ones(n, np.int64)).ravel()
    score = inp["scores"].reshape(-1)
    gain = np.broadcast_to(gains[None], (s, q, n)).reshape(-1)
    tie = np.zeros(len(score), np.int64)
    ideal_group = np.repeat(np.arange(q), n)
    ideal_of_group = np.tile(np.arange(q), s)
    return group, score, gain, tie, ideal_group, gains.reshape(-1), s * q, ideal_of_group


def ours_kernel(arrays) -> np.ndarray:
    from rcp_jax.metrics import ndcg_flat

    group, score, gain, tie, ig, igain, n_groups, iog = arrays
    return ndcg_flat(group, score, gain, tie, ig, igain, n_groups, k=K, ties="group_mean", ideal_of_group=iog)[0]


def ours_table(inp: dict, gains_df):
    from rcp_jax.evaluation import ndcg_table

    return ndcg_table(inp["run"], gains_df, k=K)


def ours_evaluate(inp: dict, gains_df):
    import rcp_jax

    return rcp_jax.evaluate(inp["run"], gains=gains_df, k=K)


def _by_system(run):
    """(name, rows) per system in numeric order s0, s1, ..., s13 (the order of ``kernel_arrays``)."""
    groups = dict(tuple(run.groupby("system", sort=False)))
    return [(name, groups[name]) for name in sorted(groups, key=lambda s: int(s[1:]))]


def ranx_objects(inp: dict):
    from ranx import Qrels, Run

    g = inp["int_gains"]
    g = g.loc[g["gain"] > 0].astype({"gain": int, "query_id": object, "doc_id": object})
    qrels = Qrels.from_df(g, q_id_col="query_id", doc_id_col="doc_id", score_col="gain")
    runs = [Run.from_df(df[["query_id", "doc_id", "score"]].astype({"query_id": object, "doc_id": object}), q_id_col="query_id", doc_id_col="doc_id", score_col="score", name=name)
            for name, df in _by_system(inp["run"])]
    return qrels, runs


def ranx_eval(qrels, runs) -> np.ndarray:
    from ranx import evaluate

    name = f"ndcg@{K}"
    out = []
    for r in runs:
        # (return_mean=False with a single metric raises KeyError in ranx 0.3.x; read the per-query
        # scores it saves in the Run instead)
        evaluate(qrels, r, name, threads=0, save_results_in_run=True)
        per_query = r.scores[name]
        out.append([per_query[q] for q in sorted(per_query, key=lambda s: int(s[1:]))])
    return np.asarray(out)


def trec_objects(inp: dict):
    g = inp["int_gains"]
    g = g.loc[g["gain"] > 0]
    qrels: dict = {}
    for qid, did, v in zip(g["query_id"], g["doc_id"], g["gain"].astype(int)):
        qrels.setdefault(qid, {})[did] = int(v)
    runs = []
    for _, df in _by_system(inp["run"]):
        r: dict = {}
        for qid, did, v in zip(df["query_id"], df["doc_id"], df["score"]):
            r.setdefault(qid, {})[did] = float(v)
        runs.append(r)
    return qrels, runs


def trec_eval(qrels, runs):
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{K}"})
    return [ev.evaluate(r) for r in runs]


def child(method: str, n_queries: int, n_systems: int) -> None:
    inp = make_inputs(n_queries, n_systems)
    t = time.perf_counter()
    if method == "ours_evaluate":
        ours_evaluate(inp, inp["float_gains"])
    elif method == "ours_kernel":
        ours_kernel(kernel_arrays(inp, inp["gain"]))
    elif method == "ranx":
        q, r = ranx_objects(inp)
        ranx_eval(q, r)
    elif method == "pytrec_eval":
        q, r = trec_objects(inp)
        trec_eval(q, r)
    else:
        raise SystemExit(f"unknown method {method}")
    print(json.dumps({"method": method, "run_s": time.perf_counter() - t, "self_peak_kib": C.self_peak_kib()}))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--systems", type=int, default=14)
    ap.add_argument("--tiny", action="store_true", help="50 queries x 3 systems, 1 warm repeat")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return {}
    nq, ns = (50, 3) if args.tiny else (args.queries, args.systems)
    repeats = 1 if args.tiny else 5
    print(C.header(f"nDCG@{K}: {ns} systems x {nq} queries x {C.N_DOCS} docs ({ns * nq * C.N_DOCS:,} run rows)"))
    inp = make_inputs(nq, ns)
    results: dict = {"machine": C.machine(), "queries": nq, "systems": ns, "rows": ns * nq * C.N_DOCS}
    rows = []

    int_arrays = kernel_arrays(inp, inp["grade"])
    float_arrays = kernel_arrays(inp, inp["gain"])
    ref_int, cold, warm = C.timed(ours_kernel, int_arrays, repeats=repeats)
    rows.append({"m": "ours ndcg_flat (kernel)", "g": "int", "w": warm, "c": cold})
    ref_float, cold_f, warm_f = C.timed(ours_kernel, float_arrays, repeats=repeats)
    rows.append({"m": "ours ndcg_flat (kernel)", "g": "float", "w": warm_f, "c": cold_f})
    results["ours_kernel"] = {"int_warm_s": warm, "float_warm_s": warm_f, "int_cold_s": cold, "float_cold_s": cold_f}
    tab, cold_t, warm_t = C.timed(ours_table, inp, inp["int_gains"], repeats=repeats)
    rows.append({"m": "ours ndcg_table (DataFrames)", "g": "int", "w": warm_t, "c": cold_t})
    tab_f, cold_tf, warm_tf = C.timed(ours_table, inp, inp["float_gains"], repeats=repeats)
    rows.append({"m": "ours ndcg_table (DataFrames)", "g": "float", "w": warm_tf, "c": cold_tf})
    ev, cold_e, warm_e = C.timed(ours_evaluate, inp, inp["float_gains"], repeats=repeats)
    rows.append({"m": "ours evaluate (validate + table)", "g": "float", "w": warm_e, "c": cold_e})
    results["ours_table"] = {"int_warm_s": warm_t, "float_warm_s": warm_tf}
    results["ours_evaluate"] = {"float_warm_s": warm_e, "float_cold_s": cold_e}
    # the kernel and the table agree (same inputs, different entry points)
    tab_arr = tab.unstack("query_id")
    tab_arr = tab_arr.loc[sorted(tab_arr.index, key=lambda s: int(s[1:])), sorted(tab_arr.columns, key=lambda s: int(s[1:]))].to_numpy()
    results["kernel_vs_table_max_diff"] = float(np.abs(tab_arr - ref_int.reshape(ns, nq)).max())

    try:
        (qrels, runs), t_build = C.once(ranx_objects, inp)
        first, t_first = C.once(ranx_eval, qrels, runs)  # numba compilation
        rx, _, warm_r = C.timed(ranx_eval, qrels, runs, repeats=repeats)
        diff = float(np.abs(rx - ref_int.reshape(ns, nq)).max())
        rows.append({"m": "ranx evaluate (prebuilt Run/Qrels)", "g": "int", "w": warm_r, "c": t_first, "d": diff})
        results["ranx"] = {"warm_s": warm_r, "first_call_s": t_first, "build_objects_s": t_build, "max_diff": diff}
        results["ours_kernel_vs_ranx"] = warm / warm_r
    except ImportError:
        rows.append({"m": "ranx: not installed", "g": "-"})
    try:
        (tq, truns), t_tbuild = C.once(trec_objects, inp)
        tr, cold_p, warm_p = C.timed(trec_eval, tq, truns, repeats=max(1, repeats // 2))
        qids = [f"q{i}" for i in range(nq)]
        tr_arr = np.array([[r[q][f"ndcg_cut_{K}"] for q in qids] for r in tr])
        diff_p = float(np.abs(tr_arr - ref_int.reshape(ns, nq)).max())
        rows.append({"m": "pytrec_eval (prebuilt dicts)", "g": "int", "w": warm_p, "c": cold_p, "d": diff_p})
        results["pytrec_eval"] = {"warm_s": warm_p, "build_dicts_s": t_tbuild, "max_diff": diff_p}
    except ImportError:
        rows.append({"m": "pytrec_eval: not installed (pip install pytrec-eval-terrier)", "g": "-"})
    print(C.table(rows, [("m", "method", "s"), ("g", "gains", "s"), ("w", "warm s", ".3f"), ("c", "cold / first s", ".3f"),
                         ("d", "max|d nDCG| vs ours", ".1e")]))
    if "ranx" in results:
        print(f"ranx Run/Qrels construction from DataFrames: {results['ranx']['build_objects_s']:.2f}s (not in its row)")
        print(f"ours kernel / ranx warm: {results['ours_kernel_vs_ranx']:.2f}x the time; float / int gains (kernel): {warm_f / warm:.2f}")
    if "pytrec_eval" in results:
        print(f"pytrec_eval dict construction: {results['pytrec_eval']['build_dicts_s']:.2f}s (not in its row)")
    print(f"kernel vs ndcg_table max |diff|: {results['kernel_vs_table_max_diff']:.1e}")
    if not args.no_memory:
        methods = ["ours_kernel", "ours_evaluate"] + (["ranx"] if "ranx" in results else []) + (["pytrec_eval"] if "pytrec_eval" in results else [])
        mem = {m: C.peak_rss_of(Path(__file__), "--child", m, str(nq), str(ns)) for m in methods}
        results["peak_rss"] = mem
        print(f"peak RSS ({ns} x {nq}; each in its own process, including building its inputs):")
        for method, m in mem.items():
            print(f"  {method:14s} " + (f"{m['peak_rss_gib']:.2f} GiB" if m["ok"] else f"failed: {m['error']}"))
    path = C.write_json("ndcg", results)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()

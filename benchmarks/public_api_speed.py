"""The public API against the strongest plain CPU baselines, on one machine, in one run.

For 500 and 1,000 queries (150 documents, 216 windows of 10, ~6.7 rubric placements per document x 5
criteria; :mod:`benchmarks._common`), as DataFrames with string ids like a judgement store's tables:

* **public BT**: ``rcp_jax.fit_bradley_terry(window_scores)`` (cold = first call, then the median of
  ``--repeats`` warm calls), its **encoding** alone (``rcp_jax.encoding.encode_window_scores``) and the
  **kernel** alone (``rcp_jax.models.bradley_terry.fit_windows`` on the arrays); the public BT and its encoding
  again with **categorical** id columns (checked to give the same frame);
* **numpy Newton loop** and **converged scipy L-BFGS loop** per query (:mod:`benchmarks.baselines`);
* **public 2PL**: ``rcp_jax.calibrate(bt, answers)`` against the per-query **alternating Newton** and the
  joint **scipy** fit (the joint fit only up to ``--scipy-2pl-limit`` queries: it takes ~20 s at 1,000);
* **10,000 queries**: BT + 2PL through the public API, warm, and the encoding of its window scores alone.

``--public-only`` times our calls alone (public BT, its encoding and kernel, public 2PL; no baselines, no
categorical ids): the quick A/B of two versions of the code, run alternately on one machine.

Agreement: the largest |theta| difference between the public fit and the numpy Newton optimum (float64,
steps < 1e-10), and between the scipy loop and that optimum; for the 2PL the largest |gain| difference of
any document. Wall times are medians; process CPU times are printed beside them (on a shared machine
wall time includes waiting for other processes). The load average (``uptime``) is printed before and
after.

Usage: ``.venv/bin/python -m benchmarks.public_api_speed [--sizes 500 1000] [--big 10000] [--repeats 3]
[--public-only]``.
The first run simulates and caches the inputs (``benchmarks/out/cache``, ~20 s per 1,000 queries);
the timed part takes about 3 minutes on 2 quiet cores. Writes ``benchmarks/out/public_api_speed.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

# One BLAS thread for the baselines' small (150 x 150) solves: the fastest setting for them on 2 cores, and
# the one a careful engineer would pick (threaded BLAS on small matrices loses most under load). Set
# before numpy loads; an explicit setting in the environment wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from benchmarks import _common as C  # noqa: E402
from benchmarks import baselines as B  # noqa: E402


def tables(n_queries: int, data: dict):
    """``(window_scores, answers)`` DataFrames with string ids (``q00012``, ``q00012-d5``, window ``1#k``)."""
    import pandas as pd

    wd, ws, wq = data["window_docs"], data["window_scores"], data["window_query"]
    keep = wd >= 0
    rows_w = np.repeat(np.arange(len(wq)), keep.sum(axis=1))
    counts = np.bincount(wq, minlength=n_queries)
    order = np.argsort(wq, kind="stable")
    seq = np.empty(len(wq), dtype=np.int64)
    seq[order] = np.arange(len(wq)) - np.repeat(np.cumsum(counts) - counts, counts)
    q_names = pd.array([f"q{i:05d}" for i in range(n_queries)], dtype="str")
    d_names = pd.array([f"q{i:05d}-d{d}" for i in range(n_queries) for d in range(C.N_DOCS)], dtype="str")
    w_names = pd.array([f"1#{k}" for k in range(int(counts.max()))], dtype="str")
    row_q = wq[rows_w]
    window_scores = pd.DataFrame({
        "query_id": q_names.take(row_q), "window_id": w_names.take(seq[rows_w]),
        "doc_id": d_names.take(row_q * C.N_DOCS + wd[keep]), "score": ws[keep],
    })
    rq, rd = data["rubric_query"], data["rubric_doc"]
    answers = pd.DataFrame({"query_id": q_names.take(rq), "doc_id": d_names.take(rq * C.N_DOCS + rd)})
    for c in range(data["rubric_answers"].shape[1]):
        answers[f"C{c + 1}"] = data["rubric_answers"][:, c].astype(np.int8)
    return window_scores, answers


def timed(fun, repeats: int):
    """``(result, cold_s, warm wall median, warm CPU median)``."""
    t = time.perf_counter()
    result = fun()
    cold = time.perf_counter() - t
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fun()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return result, cold, statistics.median(wall), statistics.median(cpu)


def once(fun, repeats: int = 1):
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fun()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return result, statistics.median(wall), statistics.median(cpu)


def theta_array(bt, n_queries: int) -> np.ndarray:
    """The public fit's theta as float[Q, N] (ids parsed back to indices)."""
    q = bt["query_id"].str.slice(1, 6).astype(int).to_numpy()
    d = bt["doc_id"].str.split("-d").str[1].astype(int).to_numpy()
    out = np.zeros((n_queries, C.N_DOCS))
    out[q, d] = bt["theta"].to_numpy()
    return out


def uptime() -> str:
    return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _baselines(n: int, data: dict, ws, bt, cal, args) -> dict:
    """One size's baselines and their agreement with our fits; our fits with categorical id columns."""
    import rcp_jax
    from rcp_jax.models import irt
    from rcp_jax.models.simulate import true_gain
    from rcp_jax.encoding import encode_window_scores

    res = {}
    # the same table with categorical id columns (as a reader could hand them over): same result
    ws_cat = ws.astype({c: "category" for c in ("query_id", "window_id", "doc_id")})
    bt_cat, res["bt_categorical_wall_s"], res["bt_categorical_cpu_s"] = once(lambda: rcp_jax.fit_bradley_terry(ws_cat),
                                                                            args.repeats)
    assert bt_cat.equals(bt), "categorical ids changed the fit"
    _, res["encode_categorical_wall_s"], _ = once(lambda: encode_window_scores(ws_cat), args.repeats)
    (ref, res["numpy_newton_iters"]), res["numpy_newton_wall_s"], res["numpy_newton_cpu_s"] = once(
        lambda: B.numpy_newton_bt(data, n, C.N_DOCS), args.repeats)
    (sp, res["scipy_iters"]), res["scipy_wall_s"], res["scipy_cpu_s"] = once(lambda: B.scipy_bt(data, n, C.N_DOCS))
    ours = theta_array(bt, n)
    res["max_dtheta_public_vs_newton"] = float(np.abs(ours - ref).max())
    res["max_dtheta_scipy_vs_newton"] = float(np.abs(sp - ref).max())
    theta64 = ref
    passes, trials = irt.collapse_placements(data["rubric_query"], data["rubric_doc"], data["rubric_answers"], n, C.N_DOCS)
    alt, res["alt2pl_wall_s"], res["alt2pl_cpu_s"] = once(lambda: B.alternating_2pl(theta64, passes, trials))
    res["alt2pl_sweeps"] = alt["sweeps"]
    per_q = cal.queries.set_index("query_id").reindex([f"q{i:05d}" for i in range(n)])
    gain_ours = cal.gain_of(per_q["tau"].to_numpy()[:, None] * ours + per_q["alpha"].to_numpy()[:, None])
    gain_alt = true_gain(alt["tau"][:, None] * theta64 + alt["alpha"][:, None], alt["gamma"], alt["beta"])
    res["max_dgain_public_vs_alt"] = float(np.abs(gain_ours - gain_alt).max())
    if n <= args.scipy_2pl_limit:
        joint, res["scipy2pl_wall_s"], res["scipy2pl_cpu_s"] = once(lambda: B.scipy_2pl(theta64, passes, trials))
        gain_joint = true_gain(joint["tau"][:, None] * theta64 + joint["alpha"][:, None], joint["gamma"], joint["beta"])
        res["max_dgain_alt_vs_scipy"] = float(np.abs(gain_alt - gain_joint).max())
    return res


def _print_rows(rows: list[dict], public_only: bool) -> None:
    """The markdown table of the sizes (ours only, or ours against the baselines) and the categorical ids."""
    if public_only:
        print("| queries | public BT warm s (CPU s) | encoding s (share) | kernel s | public 2PL warm s (CPU s) |")
        print("|---:|---|---|---:|---|")
        for r in rows:
            print(f"| {r['queries']:,} | {r['bt_wall_s']:.3f} ({r['bt_cpu_s']:.3f}) | {r['encode_wall_s']:.3f} "
                  f"({100 * r['encode_wall_s'] / r['bt_wall_s']:.0f}%) | {r['kernel_wall_s']:.3f} | "
                  f"{r['cal_wall_s']:.3f} ({r['cal_cpu_s']:.3f}) |")
        return
    print("| queries | public BT warm s (CPU s) | encoding s (share) | kernel s | numpy Newton s (iters) | scipy L-BFGS s | x numpy | x scipy | max\\|d theta\\| ours / scipy vs Newton | public 2PL warm s | alternating Newton 2PL s (sweeps) | x alt | joint scipy 2PL s | max\\|d gain\\| ours vs alt |")
    print("|---:|---|---|---:|---|---:|---:|---:|---|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['queries']:,} | {r['bt_wall_s']:.3f} ({r['bt_cpu_s']:.3f}) | {r['encode_wall_s']:.3f} "
              f"({100 * r['encode_wall_s'] / r['bt_wall_s']:.0f}%) | {r['kernel_wall_s']:.3f} | {r['numpy_newton_wall_s']:.2f} "
              f"({r['numpy_newton_iters']:.1f}) | {r['scipy_wall_s']:.2f} | {r['numpy_newton_wall_s'] / r['bt_wall_s']:.1f} | "
              f"{r['scipy_wall_s'] / r['bt_wall_s']:.1f} | {r['max_dtheta_public_vs_newton']:.1e} / "
              f"{r['max_dtheta_scipy_vs_newton']:.1e} | {r['cal_wall_s']:.3f} | {r['alt2pl_wall_s']:.2f} ({r['alt2pl_sweeps']}) | "
              f"{r['alt2pl_wall_s'] / r['cal_wall_s']:.1f} | "
              + (f"{r['scipy2pl_wall_s']:.2f}" if "scipy2pl_wall_s" in r else "-")
              + f" | {r['max_dgain_public_vs_alt']:.1e} |")
    for r in rows:
        print(f"\ncategorical id columns, {r['queries']:,} queries: public BT {r['bt_categorical_wall_s']:.3f} s "
              f"({r['bt_categorical_cpu_s']:.3f} s CPU), encoding {r['encode_categorical_wall_s']:.3f} s "
              f"({100 * r['encode_categorical_wall_s'] / r['bt_categorical_wall_s']:.0f}%)")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000])
    ap.add_argument("--big", type=int, default=10000, help="queries of the BT + 2PL public-API run (0: skip)")
    ap.add_argument("--repeats", type=int, default=3, help="warm repeats of our calls and of the numpy Newton loop")
    ap.add_argument("--scipy-2pl-limit", type=int, default=500, help="largest size of the joint scipy 2PL fit")
    ap.add_argument("--public-only", action="store_true", help="time our calls only (no baselines, no categorical ids)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import jax

    import rcp_jax
    from rcp_jax.models.bradley_terry import fit_windows
    from rcp_jax.encoding import encode_window_scores

    jax.devices()
    print(C.header("public API vs the strongest CPU baselines"))
    print("before:", uptime(), flush=True)
    results = {"machine": C.machine(), "load_before": os.getloadavg(), "sizes": {}}
    if not args.public_only:
        warm = C.collection(2)
        B.numpy_newton_bt(warm, 2, C.N_DOCS)
        B.scipy_bt(warm, 2, C.N_DOCS)
    rows = []
    for n in args.sizes:
        data = C.collection(n)
        ws, ans = tables(n, data)
        res = {"queries": n}
        bt, res["bt_cold_s"], res["bt_wall_s"], res["bt_cpu_s"] = timed(lambda: rcp_jax.fit_bradley_terry(ws), args.repeats)
        _, res["encode_wall_s"], res["encode_cpu_s"] = once(lambda: encode_window_scores(ws), args.repeats)
        _, _, res["kernel_wall_s"], res["kernel_cpu_s"] = timed(
            lambda: fit_windows(data["window_docs"], data["window_scores"], data["window_query"], data["n_docs"]),
            args.repeats)
        cal, res["cal_cold_s"], res["cal_wall_s"], res["cal_cpu_s"] = timed(lambda: rcp_jax.calibrate(bt, ans), args.repeats)
        if not args.public_only:
            res.update(_baselines(n, data, ws, bt, cal, args))
        results["sizes"][n] = res
        rows.append(res)
        print(f"  done {n} queries ({uptime()})", flush=True)
    big = {}
    if args.big:
        data = C.collection(args.big)
        ws, ans = tables(args.big, data)
        del data

        def both():
            bt = rcp_jax.fit_bradley_terry(ws)
            return bt, rcp_jax.calibrate(bt, ans)

        _, big_cold, big_wall, big_cpu = timed(both, max(1, args.repeats - 1))
        _, enc_wall, _ = once(lambda: encode_window_scores(ws))
        big = {"queries": args.big, "rows": len(ws), "cold_s": big_cold, "wall_s": big_wall, "cpu_s": big_cpu,
               "encode_wall_s": enc_wall}
        results["big"] = big
    results["load_after"] = os.getloadavg()
    print("after:", uptime())
    print()
    _print_rows(rows, args.public_only)
    if big:
        print(f"\n{big['queries']:,} queries ({big['rows']:,} window rows): BT + 2PL through the public API "
              f"{big['wall_s']:.2f} s warm ({big['cpu_s']:.2f} s CPU; cold {big['cold_s']:.2f} s); encoding of the "
              f"window scores {big['encode_wall_s']:.2f} s alone")
    path = C.write_json("public_api_speed", results)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()

"""Coverage of the Bayesian RCP numbers a user reads, against a simulator's truth.

Simulated **noisy** tournaments (:func:`rcp_jax.models.simulate.simulate_judgements`: a judge with Gaussian score
noise, score rounding, clipping and a context effect - not the model's own generative process), each fitted
by every model (``frozen``, ``joint``; the default of :func:`rcp_jax.fit_posterior` with window scores is
``joint``) and method (NUTS, SVI, Laplace). For each fit it records how often the 90% intervals hold the
truth:

* ``gamma``, ``beta`` - the simulator's item parameters on the model's convention (sum gamma = C, mean beta = 0:
  :func:`items_on_model_convention`; the published items the simulator draws from already are, so the map is the
  identity there);
* ``gain`` - every document's true gain (also split by true gain: ``gain_low`` < 0.2, ``gain_high`` > 0.6);
* ``system`` - each system's RCP-nDCG@10 on these queries, calibration-only interval (``cal_lo, cal_hi``)
  against the true value of the same quantity: the true gains scored against the Stage A ideal list
  (:mod:`rcp_jax.bayes.posterior_ndcg`); ``oracle_has_1`` - the interval of a ranker by true relevance holds 1;
  ``stage_a_is_1`` - a ranker in the Stage A order has the interval [1, 1];
* ``pair`` - every system pair's difference (calibration-only interval), non-null pairs apart;
* ``false_call`` - the decision rule of :func:`rcp_jax.bayes.posterior_ndcg.decide` calls a winner on a *null
  pair* (two rerankers identical in expectation: same quality, independent noise); ``false_call_sign``
  the old rule (P(A > B) >= 0.975, no ROPE) for comparison.

Systems per collection: ``oracle`` (true relevance order), ``stage_a`` (the BT MAP order), ``strong``
(relevance + N(0, 0.33^2)), two ``mid`` (relevance + N(0, 1)) and two ``weak`` (relevance + N(0, 2^2));
the ``mid`` and ``weak`` pairs are the null pairs. These rankers see the true relevance, i.e. they hold
information the judge's answers do not (as real rerankers do); two more, ``judge_mid`` and ``judge_weak``
(BT MAP score + N(0, (0.5 sd)^2) and N(0, sd^2), sd the query's spread of BT scores), rank from the
judge's own data only. A posterior computed from the judge's answers alone is calibrated for the second
kind; for the first it cannot credit the information the judge did not have (``system_info`` versus
``system_judge`` in the summary). ``system_comb`` is the coverage of the combined interval (calibration
and query sampling).

Results are appended to ``benchmarks/out/coverage<tag>.jsonl`` one fit per line as soon as the fit ends
(a long run can be read while it runs, and ``--resume`` skips fits already there); the summary is printed
at the end and written to ``coverage<tag>.json``. Example (about 40 min on 2 busy cores)::

    python -m benchmarks.coverage --datasets 20
    python -m benchmarks.coverage --summary          # summarise the JSONL written so far

``pair_judge`` is the coverage of the pairs of judge-only rankers (``stage_a``, ``judge_mid``, ``judge_weak``), and
each record keeps the items' errors and interval SDs (``gamma_interval_sd``: width / 3.29) to tell bias from width.
``--clip``, ``--kappa``, ``--resolution`` and ``--noise`` change the simulated judge (the end of its score scale, its
context effect, its rounding, its noise), ``--bt-ridge`` the posterior's prior on theta: RESULTS.md takes the
misses at 100 x 150 apart with them.

``--item-sd ridge`` fits with the MAP ridge's item prior (SD ``1 / sqrt(ridge NC)``) instead of
:func:`rcp_jax.fit_posterior`'s fixed one: the items' coverage before and after (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.fixtures.simulated_collections import collection_tables
from rcp_jax.models import bayes, bradley_terry, simulate

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "benchmarks" / "out"
NULL_PAIRS = ({"mid_a", "mid_b"}, {"weak_a", "weak_b"})
#: Rankers that order by the judge's own data (BT MAP scores, with or without noise of their own).
JUDGE_ONLY = frozenset({"stage_a", "judge_mid", "judge_weak"})


def systems_run(sim, bt: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The benchmark's rerankers over every pool document (module docstring)."""
    rng = np.random.default_rng([seed, 0xB0B])
    spec = {"oracle": 0.0, "strong": 0.33, "mid_a": 1.0, "mid_b": 1.0, "weak_a": 2.0, "weak_b": 2.0}
    theta = {(q, d): t for q, d, t in zip(bt["query_id"], bt["doc_id"], bt["theta"])}
    rows = []
    for q, rel in enumerate(sim.truth.relevance):
        ids = [f"q{q}-d{d}" for d in range(len(rel))]
        for name, sd in spec.items():
            rows.append(pd.DataFrame({"system": name, "query_id": f"q{q}", "doc_id": ids,
                                      "score": rel + sd * rng.standard_normal(len(rel))}))
        th = np.array([theta[(f"q{q}", d)] for d in ids])
        rows.append(pd.DataFrame({"system": "stage_a", "query_id": f"q{q}", "doc_id": ids, "score": th}))
        for name, f in (("judge_mid", 0.5), ("judge_weak", 1.0)):
            rows.append(pd.DataFrame({"system": name, "query_id": f"q{q}", "doc_id": ids,
                                      "score": th + f * th.std() * rng.standard_normal(len(th))}))
    return pd.concat(rows, ignore_index=True)


def items_on_model_convention(gamma: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """A 2PL's item parameters on the joint model's convention, and the map of the latent scale that takes them there.

    The 2PL with per-query calibration, ``P(yes) = sigmoid(gamma_c (t - beta_c))`` with ``t = tau theta + alpha``,
    is unchanged by any affine map ``t -> a t + b`` (``a > 0``) of the latent scale together with
    ``gamma -> gamma / a``, ``beta -> a beta + b``, ``tau -> a tau``, ``alpha -> a alpha + b``; the models pin it by
    ``sum gamma = C`` and ``mean beta = 0`` (:mod:`rcp_jax.models.bayes`). A simulator's truth on another convention
    is compared with a posterior only after this map: ``a = sum(gamma) / C``, ``b = -a mean(beta)``.

    Args:
        gamma, beta: float[C] item discriminations (> 0) and difficulties on any convention.

    Returns:
        ``(gamma / a, a beta + b, a, b)``: float64[C], float64[C], and the scale and shift of the latent axis
        (the truth's relevance ``r`` maps to ``a r + b``).
    """
    gamma, beta = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    if gamma.shape != beta.shape or gamma.ndim != 1 or not np.all(gamma > 0):
        raise ValueError(f"gamma must be positive and shaped like beta, got {gamma!r} and {beta!r}")
    a = float(gamma.sum() / len(gamma))
    b = float(-a * beta.mean())
    return gamma / a, a * beta + b, a, b


def true_gain_array(post, sim) -> np.ndarray:
    """True gains float32[Q, N] in the posterior's padded layout."""
    out = np.zeros(post.inputs.doc_ids.shape, dtype=np.float32)
    for qi, q in enumerate(post.inputs.query_ids):
        g = sim.truth.gains(int(q[1:]))
        for di in range(int(post.inputs.n_docs[qi])):
            out[qi, di] = g[int(post.inputs.doc_ids[qi, di].split("-d")[1])]
    return out


def evaluate_fit(post, sim, run: pd.DataFrame, *, n_bootstrap: int, seed: int) -> dict:
    """Coverage indicators of one fitted posterior (module docstring)."""
    from rcp_jax.bayes import posterior_metrics

    rec = {}
    items = post.items
    true_items = dict(zip(("gamma", "beta"), items_on_model_convention(sim.truth.gamma, sim.truth.beta)[:2]))
    for name, truth in true_items.items():
        rec[f"{name}_cover"] = float(((items[f"{name}_lo"] <= truth) & (truth <= items[f"{name}_hi"])).mean())
        rec[f"{name}_error"] = [float(e) for e in items[f"{name}_mean"].to_numpy() - truth]
        # the SD of a normal with this 90% interval (width / 3.29): the error's scale the interval claims
        rec[f"{name}_interval_sd"] = [float(h) for h in (items[f"{name}_hi"] - items[f"{name}_lo"]).to_numpy() / 3.29]
    d = post.documents.copy()
    d["true"] = [float(sim.truth.gains(int(q[1:]))[int(x.split("-d")[1])]) for q, x in zip(d["query_id"], d["doc_id"])]
    inside = (d["gain_lo"] <= d["true"]) & (d["true"] <= d["gain_hi"])
    rec["gain_cover"] = float(inside.mean())
    rec["gain_width"] = float((d["gain_hi"] - d["gain_lo"]).mean())
    rec["gain_cover_low"] = float(inside[d["true"] < 0.2].mean())
    rec["gain_cover_high"] = float(inside[d["true"] > 0.6].mean())
    rec["gain_mae"] = float((d["gain_mean"] - d["true"]).abs().mean())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        met = posterior_metrics(run, post, k=10, n_bootstrap=n_bootstrap, seed=seed)
        truth_post = dataclasses.replace(post, gain_draws=true_gain_array(post, sim)[None])
        tru = posterior_metrics(run, truth_post, k=10, n_bootstrap=10, seed=seed)
    s = met.systems.merge(tru.systems[["system", "mean"]].rename(columns={"mean": "true"}), on="system")
    s_in = (s["cal_lo"] <= s["true"]) & (s["true"] <= s["cal_hi"])
    rec["system_cover"] = {k: bool(v) for k, v in zip(s["system"], s_in)}
    s_comb = (s["lo"] <= s["true"]) & (s["true"] <= s["hi"])
    rec["system_cover_comb"] = {k: bool(v) for k, v in zip(s["system"], s_comb)}
    rec["system_bias"] = {k: float(v) for k, v in zip(s["system"], s["mean"] - s["true"])}
    rec["system_width"] = float((s["cal_hi"] - s["cal_lo"]).mean())
    rec["system_true"] = {k: float(v) for k, v in zip(s["system"], s["true"])}
    orc = s.set_index("system").loc["oracle"]
    rec["oracle_has_1"] = bool(orc["cal_lo"] <= 1.0 <= orc["cal_hi"])
    rec["oracle_comb_has_1"] = bool(orc["lo"] <= 1.0 <= orc["hi"])
    sa = s.set_index("system").loc["stage_a"]
    rec["stage_a_is_1"] = bool(sa["cal_lo"] == 1.0 == sa["cal_hi"])
    p = met.pairs.merge(tru.pairs[["system_a", "system_b", "delta"]].rename(columns={"delta": "true"}),
                        on=["system_a", "system_b"], how="left")
    # the truth table orders systems by their true means: align pairs written the other way round
    rev = tru.pairs.rename(columns={"system_a": "system_b", "system_b": "system_a"})[["system_a", "system_b", "delta"]]
    p = p.merge(rev.rename(columns={"delta": "true_rev"}), on=["system_a", "system_b"], how="left")
    p["true"] = p["true"].fillna(-p["true_rev"])
    is_null = np.array([{a, b} in NULL_PAIRS for a, b in zip(p["system_a"], p["system_b"])])
    p_in = (p["cal_lo"] <= p["true"]) & (p["true"] <= p["cal_hi"])
    rec["pair_cover"] = float(p_in.mean())
    rec["pair_cover_nonnull"] = float(p_in[~is_null].mean())
    comb_in = (p["lo"] <= p["true"]) & (p["true"] <= p["hi"])
    rec["pair_cover_comb"] = float(comb_in.mean())
    rec["pair_width"] = float((p["cal_hi"] - p["cal_lo"]).mean())
    # pairs of rankers built from the judge's data only (stage_a, judge_mid, judge_weak): the quantities a posterior
    # of the judge's answers is calibrated for (module docstring); the other pairs hold a ranker that saw the truth
    judge_only = np.array([a in JUDGE_ONLY and b in JUDGE_ONLY for a, b in zip(p["system_a"], p["system_b"])])
    rec["pair_cover_judge"] = float(p_in[judge_only].mean())
    rec["pair_cover_comb_judge"] = float(comb_in[judge_only].mean())
    rec["null_calls"] = [str(c) for c in p.loc[is_null, "call"]]
    rec["false_call"] = float(np.isin(p.loc[is_null, "call"], ["A>B", "B>A"]).mean())
    ps = p.loc[is_null, "p_a_better"].to_numpy()
    rec["false_call_sign"] = float(((ps >= 0.975) | (ps <= 0.025)).mean())
    rec["calls"] = {c: int((p["call"] == c).sum()) for c in ("A>B", "B>A", "equivalent", "undecided")}
    # a called non-null pair whose true difference has the other sign
    wrong = ((p["call"] == "A>B") & (p["true"] < 0)) | ((p["call"] == "B>A") & (p["true"] > 0))
    rec["wrong_sign_calls"] = int(wrong.sum())
    return rec


def fit_one(windows, answers, model: str, method: str, args, seed: int):
    from rcp_jax.bayes import fit_posterior

    kw = dict(model=model, method=method, seed=seed, num_samples=args.samples, warn=False,
              item_sd=None if args.item_sd == "ridge" else float(args.item_sd), bt_ridge=args.bt_ridge)
    if method == "nuts":
        kw.update(num_warmup=args.warmup, num_chains=args.chains)
    elif method != "block_laplace":
        kw.update(svi_steps=args.svi_steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_posterior(windows, answers, **kw)


def _largest_mean_error(g: pd.DataFrame, column: str) -> float:
    """Largest |mean over collections| of one criterion's posterior-mean error (NaN for records without it)."""
    if column not in g or g[column].isna().any():
        return float("nan")
    return float(np.abs(np.mean(np.stack(g[column].to_numpy()), axis=0)).max())


def summarise(records: list[dict]) -> pd.DataFrame:
    rows = []
    df = pd.DataFrame(records)
    for (model, method), g in df.groupby(["model", "method"], sort=False):
        sys_cov = pd.DataFrame(list(g["system_cover"]))
        judge = [c for c in sys_cov.columns if c.startswith("judge_")]
        info = [c for c in sys_cov.columns if c != "stage_a" and c not in judge]
        comb = (pd.DataFrame(list(g["system_cover_comb"])).drop(columns=["stage_a"]).to_numpy().mean()
                if "system_cover_comb" in g else np.nan)
        bias = pd.DataFrame(list(g["system_bias"]))
        rows.append({
            "model": model, "method": method, "datasets": len(g),
            "gamma": g["gamma_cover"].mean(), "beta": g["beta_cover"].mean(),
            # the largest |mean error over collections| of one criterion: a bias the intervals cannot hold
            "gamma_bias": _largest_mean_error(g, "gamma_error"), "beta_bias": _largest_mean_error(g, "beta_error"),
            "gain": g["gain_cover"].mean(),
            "gain_min": g["gain_cover"].min(), "gain_max": g["gain_cover"].max(), "gain_low": g["gain_cover_low"].mean(),
            "gain_width": g["gain_width"].mean(),
            "system": float(sys_cov.drop(columns=["stage_a"]).to_numpy().mean()),
            "system_info": float(sys_cov[info].to_numpy().mean()),
            "system_judge": float(sys_cov[judge].to_numpy().mean()) if judge else np.nan,
            "system_comb": float(comb),
            "system_bias": float(bias.drop(columns=["stage_a"]).to_numpy().mean()),
            "oracle_has_1": g["oracle_has_1"].mean(), "stage_a_is_1": g["stage_a_is_1"].mean(),
            "pair": g["pair_cover"].mean(), "pair_nonnull": g["pair_cover_nonnull"].mean(),
            "pair_comb": g["pair_cover_comb"].mean() if "pair_cover_comb" in g else np.nan,
            "pair_judge": g["pair_cover_judge"].mean() if "pair_cover_judge" in g else np.nan,
            "pair_comb_judge": g["pair_cover_comb_judge"].mean() if "pair_cover_comb_judge" in g else np.nan,
            "false_call": g["false_call"].mean(), "false_call_sign": g["false_call_sign"].mean(),
            "wrong_sign": int(g["wrong_sign_calls"].sum()),
            "max_rhat": g["max_rhat"].max(), "divergences": int(g["divergences"].sum()),
            "fit_s": g["fit_s"].median(),
            "check_gap": g["check_median_gap"].median() if "check_median_gap" in g else np.nan,
        })
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    """The summary as the markdown table of ``benchmarks/RESULTS.md``."""
    cols = [("model", "model"), ("method", "method"), ("datasets", "datasets"), ("gamma", "gamma"), ("beta", "beta"),
            ("gamma_bias", "gamma bias"), ("beta_bias", "beta bias"),
            ("gain", "gains"), ("gain_min", "gains min"), ("gain_max", "gains max"), ("gain_low", "gains < 0.2"),
            ("gain_width", "gain width"), ("system", "per-system"), ("system_info", "systems with own information"),
            ("system_judge", "judge-only systems"), ("system_comb", "per-system, combined"),
            ("system_bias", "per-system bias"), ("oracle_has_1", "oracle holds 1"), ("pair", "pairs"),
            ("pair_nonnull", "non-null pairs"), ("pair_comb", "pairs, combined"),
            ("pair_judge", "judge-only pairs"), ("pair_comb_judge", "judge-only pairs, combined"),
            ("false_call", "false calls"), ("false_call_sign", "false calls, old rule"), ("fit_s", "s / fit")]
    lines = ["| " + " | ".join(c[1] for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in table.to_dict(orient="records"):
        cells = []
        for key, _ in cols:
            v = row[key]
            cells.append(f"{v:.4f}" if key == "system_bias" else f"{v:.3f}" if isinstance(v, float) and key != "fit_s"
                         else f"{v:.0f}" if key == "fit_s" else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=int, default=20, help="simulated collections (default 20)")
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--docs", type=int, default=30)
    p.add_argument("--noise", type=float, default=1.5, help="judge score noise SD (default 1.5: noisy)")
    p.add_argument("--placements", type=float, default=8.0, help="tournament placements per document (default 8)")
    p.add_argument("--kappa", type=float, default=0.15,
                   help="the judge's context effect (scores pushed from the window's mean; default 0.15, 0: none)")
    p.add_argument("--resolution", type=float, default=1.0,
                   help="the judge's score rounding step (default 1: integers; 0: no rounding)")
    p.add_argument("--clip", type=float, default=5.0,
                   help="end of the simulated judge's score scale (default 5: METHOD's -5..+5; large = no clipping)")
    p.add_argument("--models", nargs="+", default=["joint", "frozen"], choices=("joint", "frozen"))
    p.add_argument("--methods", nargs="+", default=["nuts", "laplace", "svi"],
                   choices=("nuts", "laplace", "svi", "block_laplace"))
    p.add_argument("--rubric-placements", type=float, default=6.7, help="rubric placements per document (default 6.7)")
    p.add_argument("--item-sd", default=str(bayes.DEFAULT_ITEM_SD),
                   help="prior SD of the item contrasts u, v (default: rcp_jax.fit_posterior's), or 'ridge' for the "
                        "MAP ridge's 1 / sqrt(ridge NC), the prior before the sixteenth session")
    p.add_argument("--bt-ridge", type=float, default=bradley_terry.DEFAULT_RIDGE,
                   help="the BT ridge of fit_posterior (its prior on theta; default: METHOD's MAP ridge)")
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--samples", type=int, default=300, help="draws per chain (NUTS) or from the guide")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--svi-steps", type=int, default=3000)
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--tag", default="")
    p.add_argument("--resume", action="store_true", help="skip fits already in the JSONL")
    p.add_argument("--summary", action="store_true", help="only summarise the JSONL written so far")
    p.add_argument("--markdown", action="store_true", help="also print the summary as a markdown table")
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / f"coverage{args.tag}.jsonl"
    done = []
    if (args.resume or args.summary) and log.is_file():
        done = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    if not args.summary:
        import rcp_jax

        if not args.resume:
            log.write_text("")
        have = {(r["dataset"], r["model"], r["method"]) for r in done}
        start = time.perf_counter()
        for i in range(args.datasets):
            seed = args.seed + i
            sim = simulate.simulate_judgements(seed, [args.docs] * args.queries, noise=args.noise,
                                               tournament_placements=args.placements,
                                               rubric_placements=args.rubric_placements, kappa=args.kappa,
                                               resolution=args.resolution, clip=args.clip)
            windows, answers = collection_tables(sim)
            run = systems_run(sim, rcp_jax.fit_bradley_terry(windows, float64=True), seed)
            for model in args.models:
                for method in args.methods:
                    if (i, model, method) in have:
                        continue
                    t0 = time.perf_counter()
                    post = fit_one(windows, answers, model, method, args, seed)
                    fit_s = time.perf_counter() - t0
                    rec = {"dataset": i, "seed": seed, "model": model, "method": method, "fit_s": fit_s,
                           "max_rhat": post.diagnostics["max_rhat"], "divergences": post.diagnostics["divergences"],
                           "check_median_gap": post.diagnostics.get("check_median_gap"),
                           **evaluate_fit(post, sim, run, n_bootstrap=args.bootstrap, seed=seed)}
                    done.append(rec)
                    with log.open("a") as f:
                        f.write(json.dumps(rec) + "\n")
                    print(f"[{time.perf_counter() - start:7.0f} s] dataset {i} {model:<6} {method:<7} gain "
                          f"{rec['gain_cover']:.3f} system {np.mean(list(rec['system_cover'].values())):.2f} "
                          f"pair {rec['pair_cover']:.2f} false {rec['false_call']:.2f} ({fit_s:.1f} s)", flush=True)
        print(f"wall {time.perf_counter() - start:.0f} s")
    if not done:
        print(f"nothing in {log}")
        return 1
    table = summarise(done)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.round(3).to_string(index=False))
    if args.markdown:
        print(markdown(table))
    (OUT / f"coverage{args.tag}.json").write_text(json.dumps({
        "settings": {k: v for k, v in vars(args).items()}, "summary": table.to_dict(orient="records")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The several-judges parts of ``rcp-jax fit --judges`` and ``rcp-jax compare --by-judge``."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import emit
from rcp_jax.cli._paths import folder
from rcp_jax.errors import DataError


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    """``--judges`` and ``--same-scale`` of ``rcp-jax fit``."""
    p.add_argument("--judges", default=None, metavar="A,B",
                   help="pool these judges of the store into one calibration: comma-separated model strings, judge "
                        "names or family-id prefixes, each optionally renamed as NAME=MODEL; criteria shared, one "
                        "severity offset (and scale) per judge, each with an interval (--method map, and auto, the "
                        "default: from the Hessian; --method nuts: posterior). Writes judges/ for `rcp-jax compare "
                        "--by-judge` (default: none, one judge)")
    p.add_argument("--same-scale", action="store_true",
                   help="with --judges: fit severities only, every judge's discrimination scale fixed at 1 "
                        "(default: a scale per judge, geometric mean 1)")


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    """``--by-judge`` and its inputs, for ``rcp-jax compare``."""
    g = p.add_argument_group("second-judge check")
    g.add_argument("--by-judge", type=folder, default=None, metavar="FIT",
                   help="a folder written by `rcp-jax fit --judges A,B`: score --runs with each judge's own "
                        "calibration and report, per system pair, the call under each judge and whether they agree, "
                        "with the judges' agreement per criterion and their offsets (default: none; then give the "
                        "per-query table)")
    g.add_argument("--runs", nargs="+", type=Path, default=None, metavar="RUN",
                   help="with --by-judge: run files (TREC, CSV/TSV/JSONL/Parquet) to score (default: none)")
    g.add_argument("--pools", type=Path, default=None,
                   help="with --by-judge: the judged pools, as `rcp-jax evaluate --pools` (default: none)")
    g.add_argument("--k", type=int, default=10, help="with --by-judge: nDCG cut-off (default 10)")


def _interval(v, lo, hi, fmt="{:+.3f}") -> str:
    return f"{fmt.format(v)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def offsets_lines(offsets, ci_prob: float, how: str) -> list[str]:
    """Printable lines of the judges' offsets table (``judge, delta, delta_lo, delta_hi, scale, scale_lo,
    scale_hi, answers``; severity in ability units, scale a factor) with their ``ci_prob`` intervals."""
    width = max(5, *(len(str(j)) for j in offsets["judge"]))
    lines = [f"judge offsets ({round(100 * ci_prob)}% intervals, {how}; severity > 0 = stricter than the average "
             "judge, scale > 1 = more decisive):",
             f"  {'judge':<{width}}  {'severity delta':<26}  {'scale':<24}  answers"]
    for r in offsets.itertuples():
        lines.append(f"  {str(r.judge):<{width}}  {_interval(r.delta, r.delta_lo, r.delta_hi):<26}  "
                     f"{_interval(r.scale, r.scale_lo, r.scale_hi, '{:.3f}'):<24}  {int(r.answers)}")
    return lines


def agreement_lines(agreement) -> list[str]:
    """Printable lines of the judges' agreement table (``judge_a, judge_b, criterion, kappa, n``): one line
    per pair of judges with Cohen's kappa per criterion and the number of shared answers."""
    lines = []
    for (a, b), g in agreement.groupby(["judge_a", "judge_b"], sort=False):
        n = int(g.loc[g["criterion"] == "all", "n"].iloc[0]) if (g["criterion"] == "all").any() else 0
        kap = "  ".join(f"{r.criterion} {r.kappa:.2f}" if r.kappa == r.kappa else f"{r.criterion} n/a"
                        for r in g.itertuples())
        lines.append(f"agreement {a} vs {b} (Cohen's kappa on {n} shared answers): {kap}")
        if n == 0:
            lines.append("  (no shared windows: kappa needs documents both judges saw in the same rubric window)")
    return lines


#: What ``fit --judges`` with ``--method auto`` (fit's default) runs, and why: the pooled MAP already gives each
#: judge's offsets an interval, so the default stays the fit of seconds.
AUTO_JUDGES = ("map: several judges pooled, whose MAP gives each judge's offsets an interval from the Hessian in "
               "seconds (--method nuts for posterior intervals)")


def run_fit(args) -> int:
    """``rcp-jax fit --judges``: the pooled calibration of several judges."""
    import warnings

    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json
    from rcp_jax.judges import fit_judges, save_judges_fit, select_judges
    from rcp_jax.pipeline import FlaggedJudgementWarning, store_tables

    if args.family:
        raise DataError("give --judges (several judges pooled) or --family (one judge), not both")
    if args.calibration_model not in (None, "frozen"):
        raise DataError(f"--judges pools the frozen-BT 2PL; --calibration-model {args.calibration_model} has no pooled "
                        "version: leave --calibration-model out (or pass --calibration-model frozen)")
    if args.method not in ("auto", "map", "nuts"):
        raise DataError(f"--judges takes --method map (intervals from the Hessian; what the default, auto, runs) or "
                        f"nuts (posterior intervals), not {args.method}")
    method = "map" if args.method == "auto" else args.method
    for name in ("warmup", "draws", "chains"):
        value = getattr(args, name)
        if value < (0 if name == "warmup" else 1):
            raise DataError(f"--{name} must be {'>= 0' if name == 'warmup' else '>= 1'}, got {value}")
    judges = select_judges(args.store, args.judges)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FlaggedJudgementWarning)
        tables = {j.name: store_tables(args.store, family=dict(j.families), keep_flagged=args.keep_flagged,
                                       served_model=j.served)[:2]
                  for j in judges}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_judges(tables, fit_scale=not args.same_scale, method=method, num_warmup=args.warmup,
                         num_samples=args.draws, num_chains=args.chains, seed=args.seed, float64=args.float64)
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    paths = save_judges_fit(fit, args.out)
    atomic_write_csv(args.out / "bt.csv", fit.bt)
    cal = fit.calibration
    how = "from the Hessian at the MAP" if method == "map" else "NUTS posterior"
    payload = {"method": method, **({"auto": AUTO_JUDGES} if args.method == "auto" else {}), "judges": [{"name": j.name, "model": j.model, "families": dict(j.families),
                                                  **({"served_model": j.served} if j.served is not None else {})}
                                                 for j in judges],
               "queries": int(cal.queries["calibrated"].sum()), "documents": int(cal.documents["gain"].notna().sum()),
               "criteria": cal.criteria, "gamma": cal.gamma, "beta": cal.beta,
               "offsets": fit.offsets.to_dict(orient="records"), "agreement": fit.agreement.to_dict(orient="records"),
               "ci_prob": fit.ci_prob, "info": fit.info, "notes": notes,
               "calibration": str(paths["calibration"]), "judges_folder": str(args.out / "judges")}
    atomic_write_json(args.out / "fit.json", payload)
    lines = [f"pooled {len(judges)} judges: {payload['queries']} queries, {payload['documents']} documents "
             f"(pooled BT, shared criteria, {'severities only' if args.same_scale else 'severity and scale per judge'})",
             "gamma: " + " ".join(f"{c}={g:.3f}" for c, g in zip(cal.criteria, cal.gamma)),
             "beta:  " + " ".join(f"{c}={b:+.3f}" for c, b in zip(cal.criteria, cal.beta)),
             *offsets_lines(fit.offsets, fit.ci_prob, how), *agreement_lines(fit.agreement)]
    if "auto" in payload:
        lines.insert(1, f"method auto chose {AUTO_JUDGES}")
    if method == "nuts":
        i = fit.info
        lines.append(f"NUTS: {i['num_chains']} chains x {i['num_draws']} draws, {i['divergences']} divergences, "
                     f"max R-hat {i['max_rhat']:.3f}, min ESS {i['min_ess']:.0f}")
    lines += [*[f"note: {n}" for n in notes],
              f"pooled calibration (the average judge's gains) written to {paths['calibration']}",
              f"each judge's own calibration, offsets and agreement written to {args.out / 'judges'}; next: "
              f"`rcp-jax compare --by-judge {args.out} --runs RUNS`"]
    emit(args, payload, "\n".join(lines))
    return 0


def run_compare(args) -> int:
    """``rcp-jax compare --by-judge``: each system pair's call under each judge."""
    import json

    from rcp_jax import data
    from rcp_jax.judges import compare_by_judge, load_judges_fit, per_judge_metrics

    if not args.runs:
        raise DataError("--by-judge needs --runs RUN [RUN ...]: the runs to score with each judge's calibration")
    if args.per_query:
        raise DataError(f"give --by-judge FIT with --runs, or a per-query table ({args.per_query}), not both")
    if args.k < 1:
        raise DataError(f"--k must be >= 1, got {args.k}")
    cals, offsets, agreement, meta = load_judges_fit(args.by_judge)
    runs = data.concat_runs([data.read_run(p) for p in args.runs])
    pools = data.read_pools(args.pools) if args.pools else None
    per_query = per_judge_metrics(runs, cals, k=args.k, pools=pools)
    pairs = compare_by_judge(per_query, alpha=args.alpha, test=args.test, correction=args.correction,
                             n_permutations=min(args.permutations, 10_000), n_bootstrap=min(args.bootstrap, 200),
                             seed=args.seed)
    if args.out_pairs:
        out = Path(args.out_pairs)
        out.parent.mkdir(parents=True, exist_ok=True)
        pairs.to_csv(out, index=False)
    judges = list(cals)
    agree = int(pairs["agree"].sum())
    ci_prob = float(meta.get("ci_prob", 0.9))
    if args.json:
        jsonable = lambda df: json.loads(df.to_json(orient="records"))  # noqa: E731 - NaN -> null

        print(json.dumps({"judges": judges, "pairs": jsonable(pairs), "agree": agree, "pairs_total": len(pairs),
                          "offsets": jsonable(offsets), "agreement": jsonable(agreement), "ci_prob": ci_prob,
                          "settings": {"test": args.test, "alpha": args.alpha, "correction": args.correction,
                                       "k": args.k}}, indent=1))
        return 0
    width = max(len(f"{a} vs {b}") for a, b in zip(pairs["system_a"], pairs["system_b"]))
    head = "  ".join(f"{j[:14]:>14}" for j in judges)
    lines = [f"second-judge check: rcp_ndcg@{args.k}, {args.test}-test at alpha {args.alpha} "
             f"(A>B / B>A when separated, else tie)", f"{'pair':<{width}}  {head}  agree"]
    for r in pairs.to_dict(orient="records"):
        calls = "  ".join(f"{r[f'call_{j}'] + f' ({r[f'diff_{j}']:+.3f})':>14}" for j in judges)
        lines.append(f"{r['system_a'] + ' vs ' + r['system_b']:<{width}}  {calls}  {'yes' if r['agree'] else 'NO'}")
    lines.append(f"{agree} of {len(pairs)} pairs get the same call under every judge"
                 + ("" if agree == len(pairs) else f"; {len(pairs) - agree} change with the judge"))
    how = "NUTS posterior" if meta.get("method") == "nuts" else "from the Hessian at the MAP"
    lines += [*offsets_lines(offsets, ci_prob, how), *agreement_lines(agreement)]
    print("\n".join(lines))
    return 0

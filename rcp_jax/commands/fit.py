"""``rcp-jax fit``: BT + 2PL calibration from a judgement store (MAP, or a posterior by NUTS / SVI)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.commands._common import emit

NAME = "fit"
HELP = "fit Bradley-Terry and the 2PL calibration from a judgement store and write the calibration"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, required=True, help="judgement store folder (from `rcp-jax judge`)")
    p.add_argument("--out", type=Path, required=True, help="output folder (calibration/, bt.csv, ...)")
    p.add_argument("--family", default=None, help="judge model or family id to use when the store holds several")
    p.add_argument("--method", choices=["map", "nuts", "svi"], default="map",
                   help="map (default): jit-compiled MAP; nuts / svi: Bayesian posterior (see rcp_jax.posterior)")
    p.add_argument("--float64", action="store_true", help="fit in double precision")
    p.add_argument("--draws", type=int, default=500, help="posterior draws per chain (nuts/svi)")
    p.add_argument("--chains", type=int, default=2, help="NUTS chains (vectorised on one device)")
    p.add_argument("--seed", type=int, default=0, help="inference seed (nuts/svi)")


def run(args) -> int:
    import warnings

    from rcp_jax.calibration import calibrate, save_calibration
    from rcp_jax.io import atomic_write_csv, atomic_write_json
    from rcp_jax.pipeline import flag_notes, store_tables
    from rcp_jax.tournament import fit_bradley_terry

    window_scores, answers, families = store_tables(args.store, family=args.family)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bt = fit_bradley_terry(window_scores, float64=args.float64)
        cal = calibrate(bt, answers, float64=args.float64)
    notes = [str(w.message) for w in caught] + flag_notes(args.store)
    atomic_write_csv(args.out / "window_scores.csv", window_scores)
    atomic_write_csv(args.out / "answers.csv", answers)
    atomic_write_csv(args.out / "bt.csv", bt)
    save_calibration(cal, args.out / "calibration")
    payload = {"method": args.method, "queries": int(cal.queries["calibrated"].sum()),
               "documents": int(cal.documents["gain"].notna().sum()), "criteria": cal.criteria,
               "gamma": cal.gamma, "beta": cal.beta, "families": families, "notes": notes,
               "calibration": str(args.out / "calibration")}
    if args.method != "map":
        from rcp_jax import posterior

        post = posterior.fit_posterior(window_scores, answers, method=args.method, num_samples=args.draws,
                                       num_chains=args.chains, seed=args.seed)
        path = posterior.save_posterior(post, args.out / "posterior")
        payload["posterior"] = str(path)
        payload["diagnostics"] = posterior.diagnostics_summary(post)
    atomic_write_json(args.out / "fit.json", payload)
    lines = [
        f"fitted {payload['queries']} queries, {payload['documents']} documents ({args.method})",
        "gamma: " + " ".join(f"{c}={g:.3f}" for c, g in zip(cal.criteria, cal.gamma)),
        "beta:  " + " ".join(f"{c}={b:+.3f}" for c, b in zip(cal.criteria, cal.beta)),
        *[f"note: {n}" for n in notes],
        f"calibration written to {args.out / 'calibration'}",
    ]
    if "posterior" in payload:
        lines.append(f"posterior written to {payload['posterior']}")
    emit(args, payload, "\n".join(lines))
    return 0

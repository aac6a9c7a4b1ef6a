"""``rcp-jax plan-labels``: which queries to send to human assessors next, with their drawing probabilities."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.errors import DataError

NAME = "plan-labels"
HELP = ("choose the next queries to label (probabilities follow where the judge is likely to miss: its own "
        "per-query uncertainty, e.g. the posterior sd, and how far its differences sit in the tails) and write the plan, with each query's "
        "probability, that `rcp-jax anchor --plan` reads back")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("per_query", help="per-query table (per_query.csv of `rcp-jax evaluate --out`) with the labels so far")
    p.add_argument("--budget", type=int, required=True, help="number of queries to label in this round")
    p.add_argument("--out", type=Path, required=True, help="plan CSV to write; when it exists, its earlier rounds are "
                   "kept and this round is appended")
    p.add_argument("--human", default="qrel_ndcg", help="column of the human metric (default qrel_ndcg)")
    p.add_argument("--judge", default="rcp_ndcg", help="column of the judge metric (default rcp_ndcg)")
    p.add_argument("--uncertainty", "--judge-sd", dest="uncertainty", default="auto",
                   help="the judge's per-query uncertainty that predicts where it misses the human metric: a column "
                        "of the per-query table, or a file with system, query_id and an sd column (the "
                        "posterior_per_query.csv of `rcp-jax evaluate --posterior`); 'none' to ignore it "
                        "(default auto: the table's sd column when it has one)")
    p.add_argument("--no-spread", action="store_true",
                   help="do not use how far each query's judge difference sits from the pair's typical one; "
                        "without this flag it is used (with the uncertainty it predicts where the judge misses: a "
                        "slip or a far noisier judgement puts a query in the tails)")
    p.add_argument("--uniform-share", type=float, default=0.2, help="share of the budget spread uniformly, which keeps "
                   "every probability away from 0 (default 0.2)")
    p.add_argument("--level", type=float, default=0.9, help="interval level deciding which pairs are undecided "
                   "(default 0.9)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")


def uncertainty_column(table, choice: str):
    """``(table, column or None)``: the uncertainty column to use; a file is merged in by (system, query_id)."""
    from rcp_jax.cli.compare import read_table

    if choice == "none":
        return table, None
    if choice == "auto":
        return table, ("sd" if "sd" in table.columns else None)
    if choice in table.columns:
        return table, choice
    path = Path(choice)
    if not path.exists():
        raise DataError(f"--uncertainty {choice!r} is neither a column of the per-query table nor a file "
                        f"(columns: {', '.join(map(str, table.columns))})")
    extra = read_table(path, "uncertainty")
    missing = [c for c in ("system", "query_id", "sd") if c not in extra.columns]
    if missing:
        raise DataError(f"{path}: lacks the column(s) {', '.join(missing)} (expected posterior_per_query.csv)")
    extra = extra.assign(system=extra["system"].astype(str), query_id=extra["query_id"].astype(str))
    if "dataset" in extra.columns and "dataset" in table.columns:
        extra = extra.loc[extra["dataset"].isin(set(table["dataset"]))]
    merged = table.assign(system=table["system"].astype(str), query_id=table["query_id"].astype(str)).drop(
        columns=["judge_sd_"], errors="ignore").merge(
        extra[["system", "query_id", "sd"]].rename(columns={"sd": "judge_sd_"}), on=["system", "query_id"], how="left")
    if merged["judge_sd_"].isna().any():
        row = merged.loc[merged["judge_sd_"].isna()].iloc[0]
        raise DataError(f"{path}: no sd for system {row['system']!r}, query {row['query_id']!r}")
    return merged, "judge_sd_"


def uncertainty_note(uncertainty, rows, spread: bool = False) -> str:
    if spread:
        what = "how far each query's judge difference sits from the pair's typical one"
        if uncertainty is not None:
            what = f"the judge's uncertainty ({uncertainty}) and " + what
        return what + ", mixed with a uniform share"
    if uncertainty is not None:
        return f"the judge's uncertainty ({uncertainty}), mixed with a uniform share"
    if rows["pi"].nunique() > 1:
        return "the residual sizes predicted from the labels so far (no uncertainty column)"
    return "uniform (no uncertainty column and fewer than 4 labels)"


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from rcp_jax.anchored.comparison import plan_labels
    from rcp_jax.cli._common import emit
    from rcp_jax.cli.compare import read_table

    table = read_table(args.per_query, "per-query metrics")
    table, uncertainty = uncertainty_column(table, args.uncertainty)
    previous = read_table(args.out, "labelling plan") if args.out.exists() else None
    try:
        rows = plan_labels(table, args.budget, human=args.human, judge=args.judge, plan=previous,
                           uncertainty=uncertainty, uniform_share=args.uniform_share, level=args.level, seed=args.seed,
                           spread=not args.no_spread)
    except DataError as err:
        raise DataError(f"{args.per_query}: {err}") from None
    plan = rows if previous is None else pd.concat([previous, rows], ignore_index=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plan.to_csv(args.out, index=False)
    chosen = rows.loc[rows["selected"] == 1, "query_id"].tolist()
    rnd = int(rows["round"].iloc[0])
    text = "\n".join([
        f"probabilities from: {uncertainty_note(args.uncertainty if uncertainty == 'judge_sd_' else uncertainty, rows, not args.no_spread)}",
        f"round {rnd}: {len(chosen)} queries to label (of {len(rows)} unlabelled), "
        f"plan written to {args.out}",
        "label every selected query (a skipped one biases the estimate), then run: "
        f"rcp-jax anchor PER_QUERY --plan {args.out}",
        "selected: " + " ".join(chosen),
    ])
    emit(args, {"round": rnd, "plan": str(args.out), "uncertainty": uncertainty, "selected": chosen, "expected": float(rows["pi"].sum()),
                "unlabelled": len(rows)}, text)
    return 0

"""``rcp-jax plan-labels``: which queries to send to human assessors next, with their drawing probabilities."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.errors import DataError

NAME = "plan-labels"
HELP = ("choose the next queries to label (probabilities favour queries where the judge is predicted to miss the "
        "human metric on undecided pairs) and write the plan `rcp-jax anchor --plan` reads back")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("per_query", help="per-query table (per_query.csv of `rcp-jax evaluate --out`) with the labels so far")
    p.add_argument("--budget", type=int, required=True, help="expected number of queries to label in this round")
    p.add_argument("--out", type=Path, required=True, help="plan CSV to write; when it exists, its earlier rounds are "
                   "kept and this round is appended")
    p.add_argument("--human", default="qrel_ndcg", help="column of the human metric (default qrel_ndcg)")
    p.add_argument("--judge", default="rcp_ndcg", help="column of the judge metric (default rcp_ndcg)")
    p.add_argument("--judge-sd", default=None, help="optional column of the judge's per-query uncertainty (e.g. a "
                   "posterior sd) that predicts where it misses (default: none)")
    p.add_argument("--uniform-share", type=float, default=0.2, help="share of the budget spread uniformly, which keeps "
                   "every probability away from 0 (default 0.2)")
    p.add_argument("--level", type=float, default=0.9, help="interval level deciding which pairs are undecided "
                   "(default 0.9)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from rcp_jax.anchored.comparison import plan_labels
    from rcp_jax.cli._common import emit
    from rcp_jax.cli.compare import read_table

    table = read_table(args.per_query, "per-query metrics")
    previous = read_table(args.out, "labelling plan") if args.out.exists() else None
    try:
        rows = plan_labels(table, args.budget, human=args.human, judge=args.judge, plan=previous,
                           extra=args.judge_sd, uniform_share=args.uniform_share, level=args.level, seed=args.seed)
    except DataError as err:
        raise DataError(f"{args.per_query}: {err}") from None
    plan = rows if previous is None else pd.concat([previous, rows], ignore_index=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plan.to_csv(args.out, index=False)
    chosen = rows.loc[rows["selected"] == 1, "query_id"].tolist()
    rnd = int(rows["round"].iloc[0])
    text = "\n".join([
        f"round {rnd}: {len(chosen)} queries to label (expected {rows['pi'].sum():.1f} of {len(rows)} unlabelled), "
        f"plan written to {args.out}",
        "label every selected query (a skipped one biases the estimate), then run: "
        f"rcp-jax anchor PER_QUERY --plan {args.out}",
        "selected: " + " ".join(chosen),
    ])
    emit(args, {"round": rnd, "plan": str(args.out), "selected": chosen, "expected": float(rows["pi"].sum()),
                "unlabelled": len(rows)}, text)
    return 0

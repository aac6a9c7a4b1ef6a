"""``rcp-jax anchor``: human-anchored system comparison (prediction-powered inference) from a per-query table."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.errors import DataError

NAME = "anchor"
HELP = ("estimate each system's and pair's human metric (qrel-nDCG on the labelled queries) anchored by RCP-nDCG "
        "on every query (PPI++), beside the human-only and judge-only numbers")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("per_query", help="per-query table from `rcp-jax evaluate --out` (per_query.csv): system, "
                   "query_id, the judge metric on every query, the human metric on the labelled ones (NaN elsewhere)")
    p.add_argument("--human", default="qrel_ndcg",
                   help="column of the human metric, or a per-query file (system, query_id, that column named by "
                        "--human-column) merged in (default qrel_ndcg)")
    p.add_argument("--human-column", default="qrel_ndcg", help="the human metric's column in a --human file "
                   "(default qrel_ndcg)")
    p.add_argument("--judge", default="rcp_ndcg", help="column of the judge metric (default rcp_ndcg)")
    p.add_argument("--plan", type=Path, default=None, help="labelling plan from `rcp-jax plan-labels` that drew the "
                   "labels (default: none; the labelled queries are taken as a simple random sample)")
    p.add_argument("--level", type=float, default=0.9, help="interval coverage (default 0.9)")
    p.add_argument("--correction", choices=("holm", "bonferroni", "none"), default="holm",
                   help="multiplicity correction of the pair calls (default holm)")
    p.add_argument("--target", choices=("benchmark", "superpopulation"), default="benchmark",
                   help="the mean over these queries, or over the population they were drawn from (default benchmark)")
    p.add_argument("--figure", type=Path, default=None, help="write the pair-interval figure here (PNG/PDF/SVG; "
                   "default: none)")
    p.add_argument("--out-pairs", type=Path, default=None, help="write the per-pair table to this CSV (default: none)")


def load_table(args: argparse.Namespace):
    """The per-query table, with a --human file merged in when --human names a file."""
    from rcp_jax.cli.compare import read_table

    table = read_table(args.per_query, "per-query metrics")
    human = args.human
    path = Path(human)
    if human not in table.columns and (path.suffix or path.exists()):
        extra = read_table(path, "human metric")
        col = args.human_column
        missing = [c for c in ("system", "query_id", col) if c not in extra.columns]
        if missing:
            raise DataError(f"{path}: lacks the column(s) {', '.join(missing)} (set --human-column)")
        table = table.drop(columns=[col], errors="ignore").merge(
            extra[["system", "query_id", col]], on=["system", "query_id"], how="left")
        human = col
    return table, human


def run(args: argparse.Namespace) -> int:
    from rcp_jax.anchored.comparison import anchored_comparison
    from rcp_jax.cli._common import emit
    from rcp_jax.cli.compare import jsonable, read_table

    table, human = load_table(args)
    plan = read_table(args.plan, "labelling plan") if args.plan else None
    try:
        comp = anchored_comparison(table, human=human, judge=args.judge, plan=plan, level=args.level,
                                   correction=args.correction, target=args.target)
    except DataError as err:
        raise DataError(f"{args.per_query}: {err}") from None
    if args.out_pairs:
        args.out_pairs.parent.mkdir(parents=True, exist_ok=True)
        comp.pairs.to_csv(args.out_pairs, index=False)
    if args.figure:
        from rcp_jax.anchored.figure import plot_pair_intervals

        plot_pair_intervals(comp, args.figure)
    payload = {"settings": {"human": human, "judge": args.judge, "level": args.level, "correction": args.correction,
                            "target": args.target, "plan": str(args.plan) if args.plan else None},
               "target": comp.target, "n_queries": comp.n_queries, "n_labelled": comp.n_labelled,
               "systems": jsonable(comp.systems), "pairs": jsonable(comp.pairs),
               "assumptions": list(comp.assumptions)}
    text = comp.to_text() + (f"\nfigure: {args.figure}" if args.figure else "")
    emit(args, payload, text)
    return 0

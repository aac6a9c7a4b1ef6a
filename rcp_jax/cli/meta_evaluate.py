"""``rcp-jax meta-evaluate``: does RCP-nDCG (and Count-nDCG) rank systems as qrel-nDCG does?"""

from __future__ import annotations

import argparse
import json

from rcp_jax.cli._paths import folder
from rcp_jax.errors import DataError

NAME = "meta-evaluate"
HELP = ("compare the system rankings by RCP-nDCG and Count-nDCG with qrel-nDCG's: Kendall's tau, tau_AP and "
        "agreement on the pairs qrel-nDCG separates significantly")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-query", required=True, metavar="FILE",
                        help="per-query metrics table with a qrel_ndcg column: the per_query.csv that "
                             "`rcp-jax evaluate --qrels ... --out DIR` writes (CSV/TSV/JSONL/Parquet)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level of a separated pair (default 0.05)")
    parser.add_argument("--test", choices=("t", "wilcoxon", "permutation"), default="t",
                        help="paired test over queries that decides 'separated' (default t, the paper's)")
    parser.add_argument("--correction", choices=("none", "holm", "bonferroni"), default="none",
                        help="multiplicity correction within each metric's family of pairs (default none, as the paper)")
    parser.add_argument("--out", type=folder, default=None, metavar="DIR",
                        help="also write meta_evaluation.csv, system_means.csv and meta_evaluation.png (the system "
                             "means, RCP-nDCG against qrel-nDCG) to this folder (default: none)")


def run(args: argparse.Namespace) -> int:
    from rcp_jax.cli.compare import jsonable, read_table
    from rcp_jax.stats.meta_evaluation import meta_evaluate

    table = read_table(args.per_query, "per-query metrics")
    if "qrel_ndcg" not in table.columns:
        raise DataError(f"{args.per_query}: no qrel_ndcg column; the meta-evaluation compares with the human labels: "
                        f"evaluate with --qrels (rcp-jax evaluate ... --qrels QRELS --out DIR)")
    if not 0 < args.alpha < 1:
        raise DataError(f"--alpha must be in (0, 1), got {args.alpha}")
    try:
        result = meta_evaluate(table, alpha=args.alpha, test=args.test, correction=args.correction)
    except DataError as err:
        raise DataError(f"{args.per_query}: {err}") from None
    written = []
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result.summary.to_csv(args.out / "meta_evaluation.csv", index=False)
        result.means.to_csv(args.out / "system_means.csv", index=False)
        written += [args.out / "meta_evaluation.csv", args.out / "system_means.csv"]
        if "rcp_ndcg" in result.means.columns:
            from rcp_jax.plots.report import meta_evaluation_scatter

            written.append(meta_evaluation_scatter(result.means, result.summary, args.out / "meta_evaluation.png",
                                                   reference=result.reference))
    if args.json:
        print(json.dumps({
            "settings": {"reference": result.reference, "alpha": result.alpha, "test": result.test,
                         "correction": result.correction},
            "n_queries": result.n_queries, "n_queries_all": result.n_queries_all,
            "summary": jsonable(result.summary), "means": jsonable(result.means),
            "notes": list(result.notes), "written": [str(p) for p in written],
        }, indent=1))
        return 0
    print(result.format(), end="")
    for path in written:
        print(f"wrote {path}")
    return 0

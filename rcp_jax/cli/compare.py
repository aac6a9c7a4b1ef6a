"""``rcp-jax compare``: pairwise significance and sensitivity from a per-query metrics table."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rcp_jax.errors import DataError

if TYPE_CHECKING:  # imported inside the functions, so `rcp-jax --help` stays cheap
    import pandas as pd

NAME = "compare"
HELP = ("compare systems pair by pair (t-test, Wilcoxon, randomisation test, bootstrap CI) and report the "
        "share of pairs each metric separates")


def read_table(path: str | Path, what: str = "table") -> pd.DataFrame:
    """Read a CSV, TSV, JSONL/NDJSON, JSON (records) or Parquet table; ids are kept as strings."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} file {path} does not exist")
    suffix = path.suffix.lower()
    ids = {c: str for c in ("system", "query_id", "doc_id", "dataset", "contest_id", "grader")}
    try:
        if suffix in (".csv", ".tsv", ".txt"):
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=ids)
        if suffix in (".jsonl", ".ndjson"):
            return pd.read_json(path, lines=True, dtype=ids)
        if suffix == ".json":
            return pd.read_json(path, dtype=ids)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except (ValueError, pd.errors.ParserError) as err:
        raise DataError(f"{what} file {path} could not be parsed: {err}") from None
    raise DataError(f"{what} file {path}: unknown type {suffix!r}; use .csv, .tsv, .jsonl, .json or .parquet")


def jsonable(df: pd.DataFrame) -> list[dict]:
    """Records of a DataFrame with NaN -> null and NumPy scalars -> Python."""
    import numpy as np

    out = []
    for rec in df.to_dict(orient="records"):
        clean = {}
        for k, v in rec.items():
            if isinstance(v, (np.floating, float)):
                v = None if math.isnan(v) else float(v)
            elif isinstance(v, np.integer):
                v = int(v)
            elif isinstance(v, np.bool_):
                v = bool(v)
            clean[str(k)] = v
        out.append(clean)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("per_query", nargs="?", default=None,
                        help="per-query metrics table (CSV/TSV/JSONL/Parquet) with columns system, "
                        "query_id, [dataset] and metric columns such as qrel_ndcg, count_ndcg, rcp_ndcg (default: "
                        "none; required unless --by-judge)")
    parser.add_argument("--metrics", help="comma-separated metric columns (default: the nDCG columns present)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    parser.add_argument("--test", choices=("t", "wilcoxon", "permutation"), default="t",
                        help="test that decides 'separated' (default t, the paper's paired t-test)")
    parser.add_argument("--correction", choices=("none", "holm", "bonferroni"), default="none",
                        help="multiplicity correction within each metric x dataset (default none, as the paper)")
    parser.add_argument("--permutations", type=int, default=100_000, help="randomisation-test sign vectors (default 100,000)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of the intervals (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the randomisation test and bootstrap (default 0)")
    parser.add_argument("--format", choices=("markdown", "latex"), default="markdown",
                        help="report format (default markdown)")
    parser.add_argument("--pairs", action="store_true", help="include the per-pair table in the report (default: not included)")
    parser.add_argument("--out-pairs", help="also write the per-pair table to this CSV/Parquet file (default: none)")
    parser.add_argument("--reference", default="qrel_ndcg", help="baseline metric of the summary line (default qrel_ndcg)")
    parser.add_argument("--candidate", default="rcp_ndcg", help="metric compared with the baseline (default rcp_ndcg)")
    from rcp_jax.cli._judges import add_compare_arguments

    add_compare_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from rcp_jax.stats.comparison import sensitivity_report
    from rcp_jax.stats.system_pairs import compare_systems

    if args.by_judge is not None:  # the second-judge check: rcp_jax.cli._judges
        from rcp_jax.cli._judges import run_compare

        return run_compare(args)
    if args.per_query is None:
        raise DataError("give the per-query metrics table (from `rcp-jax evaluate`), or --by-judge FIT --runs RUN")
    table = read_table(args.per_query, "per-query metrics")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    empty = [] if metrics else [m for m in ("qrel_ndcg", "count_ndcg", "rcp_ndcg")
                                if m in table.columns and table[m].isna().all()]
    table = table.drop(columns=empty)  # a column with no value at all (qrel-nDCG of an unlabelled collection)
    import warnings

    from rcp_jax.per_query import PairingWarning

    try:
        with warnings.catch_warnings():  # the report and the JSON list the left-out queries (notes)
            warnings.simplefilter("ignore", PairingWarning)
            comparison = compare_systems(
                table, metrics, alpha=args.alpha, test=args.test, correction=args.correction,
                n_permutations=args.permutations, n_bootstrap=args.bootstrap, seed=args.seed,
            )
    except DataError as err:
        raise DataError(f"{args.per_query}: {err}") from None
    if args.out_pairs:
        out = Path(args.out_pairs)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix.lower() in (".parquet", ".pq"):
            comparison.pairs.to_parquet(out, index=False)
        else:
            comparison.pairs.to_csv(out, index=False)
    summary = None
    if args.reference in comparison.metrics and args.candidate in comparison.metrics:
        summary = sensitivity_report(comparison, args.reference, args.candidate)
    coverage = qrel_coverage_line(table, args.reference, empty)
    if args.json:
        print(json.dumps({
            "settings": {"metrics": list(comparison.metrics), "alpha": comparison.alpha, "test": comparison.test,
                         "correction": comparison.correction, "permutations": args.permutations,
                         "bootstrap": args.bootstrap, "seed": args.seed},
            "sensitivity": jsonable(comparison.sensitivity),
            "sensitivity_summary": jsonable(comparison.sensitivity_summary()),
            "systems": jsonable(comparison.systems),
            "agreement": jsonable(comparison.agreement),
            "kendall": jsonable(comparison.kendall),
            "overall": jsonable(comparison.overall),
            "pairs": jsonable(comparison.pairs),
            "summary": summary,
            "qrel_coverage": coverage,
            "notes": list(comparison.notes),
            "dropped": jsonable(comparison.dropped),
            "excluded": jsonable(comparison.excluded),
        }, indent=1))
        return 0
    report = comparison.to_latex(include_pairs=args.pairs) if args.format == "latex" else \
        comparison.to_markdown(include_pairs=args.pairs)
    print(report, end="")
    if summary:
        print()
        print(summary)
    if coverage:
        print()
        print(coverage)
    return 0


def qrel_coverage_line(table: pd.DataFrame, reference: str, empty: list[str]) -> str | None:
    """A line saying on how many queries qrel-nDCG stands when it is not all of them, or that the table has no
    qrel-nDCG (an unlabelled collection; ``empty``: the metric columns dropped for holding no value); None when
    every query has one."""
    left_out = f"{', '.join(empty)} held no value for any query and {'was' if len(empty) == 1 else 'were'} left out"
    if "qrel_ndcg" not in table.columns:
        if "qrel_ndcg" in empty:
            return f"{left_out} (no query has a positive qrel): RCP- and Count-nDCG are compared without a human-label reference"
        if reference == "qrel_ndcg":
            return ("no qrel_ndcg column (an unlabelled collection, or evaluate ran without --qrels): RCP- and "
                    "Count-nDCG are compared without a human-label reference" + (f"; {left_out}" if empty else ""))
        return left_out if empty else None
    keys = [c for c in ("dataset", "query_id") if c in table.columns]
    n = len(table[keys].drop_duplicates())
    labelled = len(table.loc[table["qrel_ndcg"].notna(), keys].drop_duplicates())
    if labelled == n:
        return None
    return (f"qrel-nDCG on {labelled} of {n} queries (the labelled ones, with a positive qrel); the other metrics on "
            f"the queries every system has; `rcp-jax anchor` estimates the qrel-nDCG differences of all {n} queries "
            f"from these labels and RCP-nDCG (prediction-powered inference)")

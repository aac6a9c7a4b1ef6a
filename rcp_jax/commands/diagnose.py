"""``rcp-jax diagnose``: undistinguishable queries of a per-query table; calibration of predicted answers."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rcp_jax.commands.compare import jsonable, read_table
from rcp_jax.errors import DataError

if TYPE_CHECKING:  # imported inside the functions, so `rcp-jax --help` stays cheap
    import pandas as pd

NAME = "diagnose"
HELP = ("diagnose a metric (saturated / floor / compressed queries) and a calibration (ECE and Brier of "
        "predicted rubric answers, reliability diagram, tau spread)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("per_query", nargs="?", help="per-query metrics table (system, query_id, [dataset], "
                        "metric columns); optional when --answers is given")
    parser.add_argument("--metrics", help="comma-separated metric columns (default: the nDCG columns present)")
    parser.add_argument("--systems", help="comma-separated systems to consider (default: all)")
    parser.add_argument("--atol", type=float, default=1e-9, help="tolerance of a tie (default 1e-9)")
    parser.add_argument("--answers", help="rubric answers table, one row per answer: criterion (C1.. or 0-based "
                        "index), answer (0/1) and predicted-probability columns")
    parser.add_argument("--pred-cols", help="comma-separated prediction columns of --answers (default: columns "
                        "starting with p_)")
    parser.add_argument("--bins", type=int, default=10, help="ECE bins (default 10)")
    parser.add_argument("--reliability-plot", help="write a reliability diagram (.png/.pdf/.svg)")
    parser.add_argument("--queries", help="per-query calibration table with a tau column (tau spread)")


def _answers(path: str, pred_cols: str | None) -> tuple[pd.DataFrame, list[str]]:
    import numpy as np
    import pandas as pd

    df = read_table(path, "answers")
    for col in ("criterion", "answer"):
        if col not in df.columns:
            raise DataError(f"answers file {path} has no column {col!r}; expected criterion, answer and "
                            f"prediction columns (e.g. p_raw, p_calibrated)")
    cols = [c.strip() for c in pred_cols.split(",")] if pred_cols else [c for c in df.columns if str(c).startswith("p_")]
    if not cols:
        raise DataError(f"answers file {path} has no prediction columns; name them p_<model> or pass --pred-cols")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"answers file {path} has no column(s) {missing} (have: {list(df.columns)})")
    crit = df["criterion"].astype(str)
    if crit.str.fullmatch(r"C\d+").all():
        df["_crit"] = crit.str[1:].astype(int) - 1
    elif crit.str.fullmatch(r"\d+").all():
        df["_crit"] = crit.astype(int)
    else:
        bad = crit[~(crit.str.fullmatch(r"C\d+") | crit.str.fullmatch(r"\d+"))].iloc[0]
        raise DataError(f"answers file {path}: criterion {bad!r} is neither C<k> nor an integer index")
    ans = pd.to_numeric(df["answer"], errors="coerce")
    if not ans.isin([0, 1]).all():
        i = int(np.flatnonzero(~ans.isin([0, 1]))[0])
        raise DataError(f"answers file {path} row {i}: answer {df['answer'].iloc[i]!r} is not 0 or 1")
    df["answer"] = ans.astype(int)
    return df, cols


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from rcp_jax.compare import format_table
    from rcp_jax.diagnostics import calibration_report, tau_spread, undistinguishable_queries, undistinguishable_summary

    if not (args.per_query or args.answers or args.queries):
        raise DataError("nothing to diagnose: give a per-query table and/or --answers / --queries")
    result: dict = {}
    text: list[str] = []
    if args.per_query:
        table = read_table(args.per_query, "per-query metrics")
        metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
        systems = [s.strip() for s in args.systems.split(",")] if args.systems else None
        try:
            flags = undistinguishable_queries(table, metrics, systems=systems, atol=args.atol)
        except DataError as err:
            raise DataError(f"{args.per_query}: {err}") from None
        summary = undistinguishable_summary(flags)
        result["undistinguishable"] = jsonable(summary)
        text += ["## Undistinguishable queries", format_table(summary)]
    if args.answers:
        df, cols = _answers(args.answers, args.pred_cols)
        k = int(df["_crit"].max()) + 1
        try:
            report = calibration_report(df["answer"].to_numpy(), {c: df[c].to_numpy(dtype=float) for c in cols},
                                        df["_crit"].to_numpy(), criteria=[f"C{i + 1}" for i in range(k)],
                                        n_bins=args.bins)
        except DataError as err:
            raise DataError(f"answers file {args.answers}: {err}") from None
        result["calibration"] = jsonable(report)
        text += ["## Calibration of predicted answers", format_table(report)]
        if args.reliability_plot:
            from rcp_jax.plots_diagnostics import plot_reliability

            path = plot_reliability({c: df[c].to_numpy(dtype=float) for c in cols}, df["answer"].to_numpy(),
                                    args.reliability_plot, n_bins=args.bins)
            result["reliability_plot"] = str(path)
            text.append(f"reliability diagram written to {path}")
    if args.queries:
        q = read_table(args.queries, "queries")
        if "tau" not in q.columns:
            raise DataError(f"queries file {args.queries} has no 'tau' column")
        spread = tau_spread(pd.to_numeric(q["tau"], errors="coerce"))
        result["tau_spread_5_95"] = spread
        text.append(f"tau spread (95th / 5th percentile): {spread:.2f}")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n\n".join(text))
    return 0

"""``rcp-jax demo``: the whole pipeline on the embedded demo dataset (offline by default)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rcp_jax.cli._common import add_judge_args, board_payload, emit, format_board, make_judge, metric_legend, stderr
from rcp_jax.cli._paths import folder

NAME = "demo"
HELP = "run the whole RCP pipeline on the embedded demo dataset and print a leaderboard"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=folder, default=Path("rcp_runs/demo"),
                   help="report folder; its store/ subfolder keeps every judgement (default rcp_runs/demo)")
    p.add_argument("--k", type=int, default=10, help="nDCG cut-off (default 10)")
    p.add_argument("--no-plots", action="store_true", help="skip the report figures")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_judge_args(p)


def run(args) -> int:
    from rcp_jax.demo.dataset import load_demo, write_demo_inputs
    from rcp_jax.pipeline import PipelineInput, run_pipeline, write_outputs

    started = time.perf_counter()
    demo = load_demo()
    latent = {}
    for q, d, v in demo.latent[["query_id", "doc_id", "latent"]].itertuples(index=False):
        latent.setdefault(str(q), {})[str(d)] = float(v)
    collection = PipelineInput.from_tables(demo.corpus, demo.queries, demo.pools, qrels=demo.qrels, dataset="rcp-jax-demo")
    judge = make_judge(args, latent)
    log = None if args.quiet or args.json else stderr
    result = run_pipeline(collection, judge=judge, store=args.out / "store", runs=demo.runs, seed=args.seed,
                          k=args.k, concurrency=args.concurrency, progress=not (args.quiet or args.json), log=log)
    paths = write_outputs(result, args.out)
    paths.update(write_demo_inputs(args.out))
    if not args.no_plots:
        from rcp_jax.plots.report import write_report_plots

        paths.update(write_report_plots(result, args.out, k=args.k))
    from rcp_jax.data.atomic import atomic_write_text
    from rcp_jax.stats.comparison import sensitivity_report
    from rcp_jax.stats.system_pairs import compare_systems

    comparison = compare_systems(result.per_query)
    sensitivity = sensitivity_report(comparison)
    atomic_write_text(args.out / "comparison.md", comparison.to_markdown() + "\n\n" + sensitivity + "\n")
    paths["comparison"] = args.out / "comparison.md"
    separated = {
        row.metric: {"separated": int(row.n_separated), "pairs": int(row.n_pairs)}
        for row in comparison.sensitivity_summary().itertuples()
    }
    elapsed = time.perf_counter() - started
    board = result.leaderboard
    text = (
        f"RCP demo: {len(collection.pools)} queries, {sum(map(len, collection.pools.values()))} pooled documents, "
        f"{board.shape[0]} systems, judge {judge.model!r}\n"
        f"judge calls this run: {result.calls} (answers are reused from {args.out / 'store'})\n\n"
        f"{format_board(board)}\n{metric_legend(board, args.k)}\n\n"
        f"system pairs separated (paired t-test, p < 0.05): "
        + ", ".join(f"{m.replace('_ndcg', '')} {v['separated']}/{v['pairs']}" for m, v in separated.items())
        + f"\nReport: {args.out}/ ({', '.join(sorted(p.name for p in map(Path, paths.values())))})\n"
        f"finished in {elapsed:.1f} s"
    )
    payload = {
        "systems": board_payload(board), "k": args.k, "judge": judge.model, "calls": result.calls,
        "queries": len(collection.pools), "report": str(args.out), "seconds": round(elapsed, 2),
        "pairs_separated": separated,
        "items": {"criteria": result.calibration.criteria, "gamma": result.calibration.gamma,
                  "beta": result.calibration.beta},
    }
    emit(args, payload, text)
    return 0

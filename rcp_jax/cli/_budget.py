"""``rcp-jax judge --runs ... --budget ...``: budgeted, posterior-guided judging (:mod:`rcp_jax.budget`).

Prints, per round, the calls spent (of the budget and of the full protocol), the system pairs decided, still
open and out of reach of judging, the loop's own seconds, and the current leaderboard with 90% intervals.
"""

from __future__ import annotations

import argparse

from rcp_jax.cli._common import emit, read_runs, stderr


def add_budget_options(p: argparse.ArgumentParser) -> None:
    """The budget group of ``rcp-jax judge`` (every option states its default)."""
    g = p.add_argument_group("budgeted judging", "judge only what moves the decisions between the systems of --runs "
                                                 "(README: Budgeted judging); without --budget the fixed protocol runs")
    g.add_argument("--runs", type=_path, nargs="+", default=None, metavar="RUN",
                   help="run files of the systems to compare (TREC or system, query_id, doc_id, score tables); "
                        "needed with --budget (default: none)")
    g.add_argument("--budget", default=None, metavar="CALLS|FRACTION",
                   help="judge calls allowed: a count (e.g. 5000) or a fraction of the full protocol's calls (0.4 or "
                        "40%%); turns on budgeted judging (default: none, the fixed protocol)")
    g.add_argument("--round-calls", type=_positive, default=None, metavar="N",
                   help="windows per budgeted round, one batched refit each (default: 5%% of the full protocol's "
                        "calls, 15%% with --batch / --batch-files, at least one per query)")


def _path(text: str):
    from pathlib import Path

    return Path(text)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text.strip()}")
    return value


def board_lines(systems, limit: int = 20) -> list[str]:
    """The leaderboard with intervals as aligned text lines (best first, at most ``limit`` systems)."""
    width = max([6] + [len(str(s)) for s in systems["system"]])
    lines = [f"  {'system':<{width}}  RCP-nDCG  90% interval"]
    for row in systems.head(limit).itertuples(index=False):
        lines.append(f"  {str(row.system):<{width}}  {row.mean:8.4f}  [{row.lo:.4f}, {row.hi:.4f}]")
    if len(systems) > limit:
        lines.append(f"  ... and {len(systems) - limit} more")
    return lines


def reach_lines(decisions, limit: int = 10) -> list[str]:
    """The undecided pairs no judging can decide (their difference is within what the queries alone leave
    uncertain), with their mean difference and interval; empty when there are none."""
    far = decisions.out_of_reach
    if far.empty:
        return []
    lines = [f"out of reach ({len(far)}: undecided even if every gain were known exactly; more queries, not more "
             "judging, would decide them):"]
    for row in far.head(limit).itertuples(index=False):
        lines.append(f"  {row.system_a} vs {row.system_b}: difference {row.delta:+.4f} [{row.lo:+.4f}, {row.hi:+.4f}]")
    if len(far) > limit:
        lines.append(f"  ... and {len(far) - limit} more (budget_pairs.csv with --out)")
    return lines


def run_budgeted(args, collection, judge, quiet: bool, batches=None) -> int:
    """Judge ``collection`` under ``--budget`` for the systems of ``--runs``; print each round; write tables."""
    from rcp_jax.budget import STOP_REASONS, BudgetSettings, judge_budgeted
    from rcp_jax.data.atomic import atomic_write_csv
    from rcp_jax.errors import DataError

    if not args.runs:
        raise DataError("--budget needs --runs: the run files of the systems whose pairs the budget should decide")
    if args.budget is None:
        raise DataError("--runs is used with --budget: give --budget CALLS or a fraction of the full protocol (e.g. "
                        "0.4), or drop --runs to judge the fixed protocol")
    runs = read_runs(args.runs)
    settings = BudgetSettings(round_calls=args.round_calls)

    def on_round(report, _result) -> None:
        if quiet:
            return
        dec = report.decisions
        head = (f"round {report.round}: {report.calls:,} of {report.budget:,} calls "
                f"({report.calls / max(report.full, 1):.0%} of the full protocol; {report.paid:,} paid by this run), "
                f"pairs decided {dec.n_decided}/{len(dec.pairs)}, open {dec.n_open}, out of reach "
                f"{dec.n_out_of_reach}; refit + selection "
                f"{report.overhead_s:.1f} s")
        stderr("\n".join([head, *board_lines(dec.systems)]))

    result = judge_budgeted(collection, runs, judge=judge, store=args.store, budget=args.budget, seed=args.seed,
                            settings=settings, concurrency=args.concurrency, on_round=on_round,
                            log=None if quiet else stderr, dataset_from_store=args.name is None, batches=batches,
                            batch_poll=getattr(args, "batch_poll", 30.0), batch_wait=getattr(args, "batch_wait", None))
    history = result.history()
    if args.out:
        atomic_write_csv(args.out / "window_scores.csv", result.window_scores)
        atomic_write_csv(args.out / "answers.csv", result.answers)
        atomic_write_csv(args.out / "bt.csv", result.bt)
        atomic_write_csv(args.out / "budget_rounds.csv", history)
        atomic_write_csv(args.out / "budget_pairs.csv", result.decisions.pairs)
        atomic_write_csv(args.out / "budget_systems.csv", result.decisions.systems)
    dec = result.decisions
    payload = {"calls": result.paid, "planned_calls": result.calls, "budget_calls": result.budget_calls,
               "full_protocol_calls": result.full_calls, "stop_reason": result.stop_reason,
               "stop": STOP_REASONS[result.stop_reason], "pairs": len(dec.pairs), "pairs_decided": dec.n_decided,
               "pairs_open": dec.n_open, "pairs_out_of_reach": dec.n_out_of_reach,
               "out_of_reach": [[str(a), str(b)] for a, b in zip(dec.out_of_reach["system_a"], dec.out_of_reach["system_b"])],
               "rounds": history.to_dict(orient="records"), "systems": dec.systems.to_dict(orient="records"),
               "pair_calls": dec.pairs.drop(columns=["var"]).to_dict(orient="records"), "store": str(args.store),
               "model": args.model, "notes": result.notes}
    share = result.calls / result.full_calls
    lines = [f"budgeted judging of {len(result.posterior.query_ids)} queries with {args.model}: {result.calls:,} calls "
             f"({share:.0%} of the full protocol's {result.full_calls:,}; {result.paid:,} paid by this run); "
             f"stopped: {STOP_REASONS[result.stop_reason]}",
             f"pairs decided {dec.n_decided} of {len(dec.pairs)} (A>B / B>A / equivalent under the posterior decision rule); "
             f"{dec.n_open} open (more judging can decide them), {dec.n_out_of_reach} out of reach",
             *reach_lines(dec),
             *board_lines(dec.systems),
             f"store {args.store}: run again with a larger --budget to continue, or without --budget for the full "
             f"protocol (windows already judged are not asked again)",
             *[f"note: {n}" for n in result.notes]]
    emit(args, payload, "\n".join(lines))
    return 0

"""``rcp-jax evaluate``: RCP-, Count- and qrel-nDCG of runs with a saved calibration."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import board_payload, emit, format_board
from rcp_jax.cli._paths import folder

NAME = "evaluate"
HELP = "score systems' runs with a calibration: per-query RCP-/Count-/qrel-nDCG and a leaderboard"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", type=Path, required=True,
                   help="the folder `rcp-jax fit --out` wrote (or its calibration/ subfolder); its posterior/, if "
                        "any, is read with --posterior (required)")
    p.add_argument("--runs", type=Path, nargs="+", required=True,
                   help="run files: TREC (qid Q0 docid rank score tag) or CSV/TSV/JSONL/Parquet (system, query_id, doc_id, score)")
    p.add_argument("--qrels", type=Path, default=None,
                   help="qrels for qrel-nDCG (TREC or BEIR TSV); qrels for some queries give qrel-nDCG on those only, "
                        "said so (default: none, an unlabelled collection: no qrel-nDCG column)")
    p.add_argument("--pools", type=Path, default=None, help="judged pools (pool restriction and input_order ties)")
    p.add_argument("--k", type=int, default=10, help="nDCG cut-off (default 10)")
    p.add_argument("--protocol", default="plain",
                   help="tie rule, pool restriction and rounding: plain, nanobeir, bright, trecdl, vidore or mteb "
                        "(default plain)")
    p.add_argument("--out", type=folder, default=None,
                   help="write per_query.csv and leaderboard.csv here (with --posterior also posterior_systems.csv, "
                        "posterior_pairs.csv, posterior_per_query.csv, the P(A > B) matrix posterior_p_better.csv and the "
                        "forest plot pairs_forest.png)")
    p.add_argument("--posterior", action="store_true",
                   help="also report posterior intervals and P(A > B) from the posterior draws beside the calibration "
                        "(`rcp-jax fit --method nuts|svi|laplace`, any --calibration-model)")
    p.add_argument("--no-plots", action="store_true",
                   help="skip the figures written with --out (default: drawn): leaderboard.png (each system's mean "
                        "with a 95%% bootstrap interval over queries, or the posterior interval of RCP-nDCG with "
                        "--posterior), per_query_rcp_ndcg.png, per_query_qrel_ndcg.png and, with --posterior, "
                        "pairs_forest.png")
    p.add_argument("--rope", type=float, default=0.02,
                   help="region of practical equivalence |delta| (default 0.02); with --posterior a pair is called "
                        "A>B when P(delta > rope) >= 0.95, B>A when P(delta < -rope) >= 0.95, equivalent when "
                        "P(|delta| < rope) >= 0.95, else undecided")
    p.add_argument("--holes", choices=["refuse", "zero", "ignore"], default="refuse",
                   help="a top-k document without a gain (in the pools but never judged, or let in by --unknown-docs): "
                        "refuse (the default) to rank when a system's hole rate, its unjudged share of its top-k "
                        "documents over all queries, passes --max-hole-rate, naming the worst systems and queries "
                        "(fill them with `rcp-jax extend`), else score it as gain 0; zero: gain 0 (counted as "
                        "judged non-relevant); ignore: drop it from the ranking (the documents below move up). "
                        "qrel-nDCG is unaffected. Holes per (system, query) go to holes.csv with --out")
    p.add_argument("--max-hole-rate", type=_rate, default=0.1, metavar="RATE",
                   help="largest hole rate --holes refuse accepts, a share in [0, 1] (default 0.1: one unjudged "
                        "document in ten of a system's top-k)")
    p.add_argument("--unknown-docs", choices=["error", "warn", "ignore"], default="error",
                   help="a run scoring a document outside its query's pool (--pools, else the calibration): refuse "
                        "(error, the default), warn, or ignore (protocols such as plain and bright rank them with gain 0)")


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a share in [0, 1], got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a share in [0, 1], got {text.strip()}")
    return value


def _hole_summary(per_query, args, payload: dict, text: list[str]) -> None:
    """The systems' hole rates into the payload and one line of text; holes.csv into --out."""
    from rcp_jax.data.atomic import atomic_write_csv
    from rcp_jax.evaluation import system_hole_rates

    table = per_query.attrs.get("holes")
    if table is None:
        return
    rates = system_hole_rates(table)
    payload["holes"] = {"policy": args.holes, "max_hole_rate": args.max_hole_rate,
                        "systems": {str(s): float(r) for s, r in rates.items()}}
    if args.out:
        atomic_write_csv(args.out / "holes.csv", table)
    if not (rates > 0).any():
        text.append(f"holes: every top-{args.k} document has a gain")
        return
    how = {"ignore": "dropped from the rankings", "zero": "scored as gain 0",
           "refuse": "scored as gain 0; every system is under --max-hole-rate"}[args.holes]
    shown = ", ".join(f"{s} {100 * r:.1f}%" for s, r in rates[rates > 0].head(5).items())
    text.append(f"holes (top-{args.k} documents without a gain, {how}): {shown}"
                + (f"; per (system, query) in {args.out / 'holes.csv'}" if args.out else ""))


def run(args) -> int:
    import warnings

    from rcp_jax import data
    from rcp_jax.calibration import load_calibration
    from rcp_jax.data.atomic import atomic_write_csv
    from rcp_jax.evaluation import HoleError, evaluate, leaderboard

    cal_dir = calibration_folder(args.calibration)
    cal = load_calibration(cal_dir)
    qrels = data.read_qrels(args.qrels) if args.qrels else None
    pools = data.read_pools(args.pools) if args.pools else None
    judged = pools if pools is not None else cal.documents[["query_id", "doc_id"]]
    against = str(args.pools) if pools is not None else f"the calibration ({args.calibration})"
    frames = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for path in args.runs:  # checked file by file, so a message names the file and line
            run_file = data.read_run(path)
            data.check_run_against_pools(run_file, judged, unknown_docs=args.unknown_docs, against=against)
            frames.append(run_file)
        runs = data.concat_runs(frames)
        try:
            per_query = evaluate(runs, cal, qrels=qrels, k=args.k, protocol=args.protocol, pools=pools,
                                 holes=args.holes, max_hole_rate=args.max_hole_rate)
        except HoleError as exc:
            if not args.out:
                raise
            atomic_write_csv(args.out / "holes.csv", exc.table)
            raise HoleError(f"{exc} (holes per system and query: {args.out / 'holes.csv'})", exc.table) from None
        per_query, coverage = qrel_coverage(per_query, qrels)
        board = leaderboard(per_query)
    notes = sorted({str(w.message) for w in caught})
    extensions = cal.info.get("extensions") or []
    if extensions:
        added = sum(int(e.get("documents", 0)) for e in extensions)
        notes.append(f"the calibration was extended ({len(extensions)} extension(s), {added} documents added by "
                     "`rcp-jax extend`): the ideal lists of the queries that gained documents grew, so every system's "
                     "RCP- and Count-nDCG there differ from scores under the calibration before the extension (the "
                     "baselines' too); compare systems under one calibration")
    n_systems = int(per_query["system"].nunique())
    payload = {"k": args.k, "protocol": args.protocol, "queries": coverage["queries"], "systems": board_payload(board),
               "notes": notes, "qrels": coverage}
    text = [f"nDCG@{args.k} ({args.protocol} protocol) of {n_systems} system{'s' if n_systems != 1 else ''} over "
            f"{coverage['queries']} quer{'y' if coverage['queries'] == 1 else 'ies'}",
            format_board(board), *coverage["lines"],
            *[f"note: {n}" for n in notes]]
    _hole_summary(per_query, args, payload, text)
    if args.out:
        atomic_write_csv(args.out / "per_query.csv", per_query)
        atomic_write_csv(args.out / "leaderboard.csv", board.reset_index())
        text.append(f"written to {args.out}")
    if args.posterior:
        from rcp_jax.bayes import posterior
        from rcp_jax.bayes.posterior_ndcg import posterior_metrics

        post = posterior.load_posterior(cal_dir.parent / "posterior")
        with warnings.catch_warnings(record=True) as caught_post:  # degenerate data, dropped queries: notes
            warnings.simplefilter("always")
            table = posterior_metrics(runs, post, k=args.k, protocol=args.protocol, pools=pools, rope=args.rope)
        extra = [m for m in dict.fromkeys(str(w.message) for w in caught_post) if m not in table.notes]
        payload["posterior"] = table.to_dict()
        payload["notes"] += table.notes + extra  # table.format() prints table.notes under the tables
        text.append(f"posterior: {post.model} model, {post.method}")
        text.append(table.format())
        text.extend(f"note: {n}" for n in extra)
        if post.model == "frozen":
            payload["notes"].append(posterior.FROZEN_NOTE)
            text.append(f"note: {posterior.FROZEN_NOTE}")
        if args.out:
            text.append(f"posterior tables written to {args.out}: "
                        + ", ".join(p.name for p in _write_posterior_outputs(table, args.out, plots=not args.no_plots)))
    _evaluation_figures(args, per_query, board, table if args.posterior else None, payload, text)
    emit(args, payload, "\n".join(text))
    return 0


def qrel_coverage(per_query, qrels) -> tuple:
    """(the per-query table, a dict saying on how many queries qrel-nDCG stands).

    qrel-nDCG exists only for a query with a positive qrel (NaN otherwise, left out of its means); this says
    so: ``queries`` (every query scored), ``qrel_queries`` (those with a qrel-nDCG value), ``lines`` (text).
    A ``qrel_ndcg`` column with no value at all is dropped (no column rather than a column of nothing).
    """
    keys = ["dataset", "query_id"] if "dataset" in per_query.columns else ["query_id"]
    n = int(len(per_query[keys].drop_duplicates()))
    out = {"queries": n, "qrel_queries": None, "lines": []}
    if qrels is None:
        out["lines"].append("no --qrels: RCP- and Count-nDCG only (no qrel-nDCG column)")
        return per_query, out
    if "qrel_ndcg" not in per_query.columns:
        return per_query, out
    labelled = int(len(per_query.loc[per_query["qrel_ndcg"].notna(), keys].drop_duplicates()))
    out["qrel_queries"] = labelled
    if labelled == 0:
        out["lines"].append(f"qrel-nDCG omitted: none of the {n} queries has a positive qrel in --qrels "
                            f"{qrels.attrs.get('source', '')}".rstrip())
        per_query = per_query.drop(columns="qrel_ndcg")
    elif "system" in per_query.columns and not _complete_queries(per_query, keys, "qrel_ndcg"):
        missing = sorted(set(per_query["system"]) - set(per_query.loc[per_query["qrel_ndcg"].notna(), "system"]))
        out["lines"].append(f"qrel-nDCG omitted: no labelled query ({labelled} of {n}) is ranked by every system "
                            f"({', '.join(missing) or 'some systems'} rank none of them; an empty run for a query, "
                            "e.g. a fusion run cut above its first document, ranks nothing there); "
                            "RCP- and Count-nDCG on all queries")
        per_query = per_query.drop(columns="qrel_ndcg")
    elif labelled < n:
        out["lines"].append(f"qrel-nDCG on {labelled} of {n} queries (the labelled ones, with a positive qrel); "
                            f"RCP- and Count-nDCG on all {n}")
    return per_query, out


def _complete_queries(per_query, keys: list[str], metric: str) -> int:
    """How many queries have a ``metric`` value for every system of the per-query table."""
    n_systems = per_query["system"].nunique()
    scored = per_query.loc[per_query[metric].notna()].groupby(keys)["system"].nunique()
    return int((scored == n_systems).sum())


def calibration_folder(path: Path) -> Path:
    """The calibration folder of ``--calibration``: the path itself when it holds ``items.json``, else its
    ``calibration/`` subfolder (the folder ``rcp-jax fit --out`` wrote); else a DataError naming both."""
    from rcp_jax.errors import DataError

    if (path / "items.json").is_file():
        return path
    if (path / "calibration" / "items.json").is_file():
        return path / "calibration"
    if not path.exists():
        raise DataError(f"--calibration {path}: no such folder; pass the folder `rcp-jax fit --out` wrote")
    raise DataError(f"--calibration {path}: neither {path / 'items.json'} nor {path / 'calibration' / 'items.json'} "
                    "exists; pass the folder `rcp-jax fit --out` wrote (it holds calibration/), or its calibration/ "
                    "subfolder")


def _evaluation_figures(args, per_query, board, table, payload: dict, text: list[str]) -> None:
    """The leaderboard with intervals (posterior ones for RCP-nDCG when ``table`` is given, else a 95% bootstrap
    over queries) and the per-query spread, into ``--out``; their paths are printed."""
    from rcp_jax.plots.report import bootstrap_leaderboard, write_evaluation_plots

    intervals = bootstrap_leaderboard(per_query)
    payload["intervals"] = {"method": "95% percentile bootstrap over queries (2000 resamples)",
                            **{m: {str(s): [float(r.lo), float(r.hi)] for s, r in iv.iterrows()}
                               for m, iv in intervals.items()}}
    note = "95% bootstrap interval over queries"
    if table is not None and "rcp_ndcg" in board.columns:
        sysdf = table.systems.set_index("system")
        board = board.copy()
        board["rcp_ndcg"] = sysdf["mean"].reindex(board.index)
        intervals["rcp_ndcg"] = sysdf[["lo", "hi"]].reindex(board.index)
        note += f"; RCP-nDCG: posterior mean and {round(100 * table.ci_prob)}% interval"
    if not args.out or args.no_plots:
        if not args.out and not args.no_plots:
            text.append("figures: give --out to write leaderboard.png and the per-query spread")
        return
    figures = write_evaluation_plots(per_query, board, args.out, intervals=intervals, interval_note=note, k=args.k)
    payload["figures"] = [str(f) for f in figures.values()]
    text.extend(f"figure: {f}" for f in payload["figures"])


def _write_posterior_outputs(table, folder: Path, *, plots: bool) -> list[Path]:
    """The posterior systems / pairs / per-query tables and the P(A > B) matrix as CSV, and (``plots``) the
    pairwise forest plot."""
    from rcp_jax.data.atomic import atomic_write_csv

    paths = [atomic_write_csv(folder / f"posterior_{name}.csv", getattr(table, name))
             for name in ("systems", "pairs", "per_query")]
    paths.append(atomic_write_csv(folder / "posterior_p_better.csv", table.p_better_matrix().reset_index()))
    if plots:
        from rcp_jax.plots.bayes import plot_pairwise_forest

        paths.append(folder / "pairs_forest.png")
        plot_pairwise_forest(table, path=paths[-1])
    return paths

"""``rcp-jax evaluate``: RCP-, Count- and qrel-nDCG of runs with a saved calibration."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rcp_jax.cli._common import board_payload, emit, format_board
from rcp_jax.cli._paths import folder
from rcp_jax.cli._standard_measures import DEFAULT_MEASURES

NAME = "evaluate"
HELP = "score systems' runs with a calibration: per-query RCP-/Count-/qrel-nDCG and a leaderboard"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", type=Path, required=True,
                   help="the folder `rcp-jax fit --out` wrote (or its calibration/ subfolder); its posterior/, if "
                        "any, is read with --posterior (required)")
    p.add_argument("--runs", type=run_spec, nargs="+", required=True, metavar="[NAME=]PATH",
                   help="run files: TREC (qid Q0 docid rank score tag) or CSV/TSV/JSONL/Parquet (system, query_id, "
                        "doc_id, score); the system is the TREC tag (or the table's system column), or NAME with "
                        "NAME=PATH (a file of one system), so two files with one tag can be told apart (a path "
                        "with '=' is split only when it is not an existing file and NAME is a plain name)")
    p.add_argument("--qrels", type=Path, default=None,
                   help="qrels for qrel-nDCG (TREC or BEIR TSV); qrels for some queries give qrel-nDCG on those only, "
                        "said so (default: none, an unlabelled collection: no qrel-nDCG column)")
    p.add_argument("--pools", type=Path, default=None, help="judged pools (pool restriction and input_order ties)")
    p.add_argument("--k", type=cutoffs, default="10",
                   help="nDCG cut-off(s), e.g. 10 or 5,10,20 (default 10); the first one's columns keep their names "
                        "(rcp_ndcg, count_ndcg, qrel_ndcg: what `rcp-jax compare` reads), each other cut-off K adds "
                        "rcp_ndcg@K, count_ndcg@K, qrel_ndcg@K to per_query.csv and the leaderboard")
    p.add_argument("--protocol", default="plain",
                   help="tie rule, pool restriction and rounding: plain, nanobeir, bright, trecdl, vidore, mteb or "
                        "trec_eval (ties by doc id descending as trec_eval, every ranked document counts, no "
                        "rounding: qrel-nDCG equals trec_eval's ndcg_cut, except that a query whose qrels hold no positive grade has "
                        "none where trec_eval says 0) (default plain)")
    p.add_argument("--measures", default=None,
                   help="standard qrel measures computed by ir_measures (trec_eval's conventions), comma-separated "
                        f"ir_measures names, e.g. {DEFAULT_MEASURES} (the default with --qrels when ir_measures is "
                        "installed; none: no measures); they rank every document of the run (no pool restriction, "
                        "ties by doc id descending, whatever --protocol); a query without qrels has none. "
                        'Needs pip install "rcp-jax[ir]"')
    p.add_argument("--trec-q", type=folder, default=None, metavar="DIR",
                   help="also write each system's per-query values in trec_eval -q layout to DIR/<system>.eval: "
                        "'measure<TAB>query_id<TAB>value' lines, then an 'all' line per measure (the mean over the "
                        "queries listed) and 'runid all <system>'; measures rcp_ndcg_cut_K, count_ndcg_cut_K, "
                        "ndcg_cut_K (qrel-nDCG under --protocol: trec_eval's own with --protocol trec_eval) and "
                        "the --measures under trec_eval's names (P_10, recip_rank, map, recall_100)")
    p.add_argument("--out", type=folder, default=None,
                   help="write per_query.csv and leaderboard.csv here (with --posterior also posterior_systems.csv, "
                        "posterior_pairs.csv, posterior_per_query.csv, the P(A > B) matrix posterior_p_better.csv and the "
                        "forest plot pairs_forest.png)")
    p.add_argument("--posterior", action="store_true",
                   help="also report posterior intervals and P(A > B) from the posterior draws beside the calibration "
                        "(what `rcp-jax fit` writes by default, or with --method nuts|svi|laplace|block-laplace; not --method map)")
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


def cutoffs(text: str) -> list[int]:
    """``--k``: one cut-off or several, comma-separated (``5,10,20``), each a whole number >= 1, none twice."""
    parts = [t.strip() for t in str(text).split(",") if t.strip()]
    try:
        ks = [int(t) for t in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be whole numbers >= 1, comma-separated (e.g. 5,10,20), got {text!r}") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"must be whole numbers >= 1, comma-separated (e.g. 5,10,20), got {text!r}")
    if len(set(ks)) != len(ks):
        raise argparse.ArgumentTypeError(f"a cut-off is given twice in {text!r}; give each once")
    return ks


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def run_spec(text: str) -> tuple[str | None, Path]:
    """``--runs`` item: ``NAME=PATH`` -> (NAME, PATH); a plain PATH (or an existing file whose name holds '=', or
    one whose left part is not a plain name such as ``a/b=c``) -> (None, PATH)."""
    name, sep, rest = text.partition("=")
    if sep and rest and _PLAIN_NAME.fullmatch(name) and not Path(text).exists():
        return name, Path(rest)
    return None, Path(text)


def _read_runs(specs, judged, *, unknown_docs: str, against: str):
    """Each run file read (checked against the pools file by file, so a message names the file and line), the
    NAME of ``NAME=PATH`` set as its system, and all of them concatenated."""
    from rcp_jax import data
    from rcp_jax.errors import DataError

    frames = []
    for spec in specs:
        name, path = spec if isinstance(spec, tuple) else (None, Path(spec))
        run_file = data.read_run(path)
        if name is not None:
            systems = sorted(run_file["system"].unique())
            if len(systems) > 1:
                raise DataError(f"--runs {name}={path}: the file holds {len(systems)} systems "
                                f"({', '.join(systems[:5])}{', ...' if len(systems) > 5 else ''}); NAME= names a file "
                                "of one system: give this file without NAME=, or split it by system")
            run_file["system"] = name
        data.check_run_against_pools(run_file, judged, unknown_docs=unknown_docs, against=against)
        frames.append(run_file)
    return data.concat_runs(frames)


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
    from rcp_jax.evaluation import HoleError, leaderboard

    from rcp_jax.errors import DataError

    ks = list(args.k) if isinstance(args.k, (list, tuple)) else [int(args.k)]
    args.k = ks[0]  # the first cut-off: the unsuffixed columns, the hole check's summary, the figures
    if args.posterior and len(ks) > 1:
        raise DataError(f"--posterior takes one cut-off, got --k {','.join(map(str, ks))}; run it once per cut-off "
                        "(e.g. --k 10 --posterior)")
    if args.measures is not None and args.measures.strip().lower() != "none" and args.qrels is None:
        raise DataError(f"--measures {args.measures} needs --qrels (they are measures of human labels)")
    cal_dir = calibration_folder(args.calibration)
    cal = load_calibration(cal_dir)
    qrels = data.read_qrels(args.qrels) if args.qrels else None
    pools = data.read_pools(args.pools) if args.pools else None
    judged = pools if pools is not None else cal.documents[["query_id", "doc_id"]]
    against = str(args.pools) if pools is not None else f"the calibration ({args.calibration})"
    measures, measure_note = _measures_asked(args.measures, qrels is not None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = _read_runs(args.runs, judged, unknown_docs=args.unknown_docs, against=against)
        try:
            per_query = _per_query_at_cutoffs(runs, cal, qrels, ks, args, pools)
        except HoleError as exc:
            if not args.out:
                raise
            atomic_write_csv(args.out / "holes.csv", exc.table)
            raise HoleError(f"{exc} (holes per system and query: {args.out / 'holes.csv'})", exc.table) from None
        per_query, coverage = qrel_coverage(per_query, qrels)
        if "qrel_ndcg" not in per_query.columns:  # left out at the first cut-off: at every cut-off
            per_query = per_query.drop(columns=[c for c in per_query.columns if c.startswith("qrel_ndcg@")])
        if measures:
            per_query = _with_measures(per_query, runs, qrels, measures, coverage["lines"])
        board = leaderboard(per_query, _metric_order(per_query))
    notes = sorted({str(w.message) for w in caught}) + ([measure_note] if measure_note else [])
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
    if len(ks) > 1:
        payload["cutoffs"] = ks
    if measures:  # those computed (a measure no query has for every system is left out, said in the lines)
        payload["measures"] = [str(m) for m in measures if str(m) in per_query.columns]
    titles = {"qrel_ndcg": "qrel-nDCG", "count_ndcg": "Count-nDCG", "rcp_ndcg": "RCP-nDCG"}
    labels = {f"{c}@{k}": f"{name}@{k}" for c, name in titles.items() for k in ks[1:]}
    if len(ks) > 1:
        labels.update({c: f"{name}@{args.k}" for c, name in titles.items()})
    at = "nDCG@" + ", @".join(map(str, ks))
    text = [f"{at} ({args.protocol} protocol) of {n_systems} system{'s' if n_systems != 1 else ''} over "
            f"{coverage['queries']} quer{'y' if coverage['queries'] == 1 else 'ies'}",
            format_board(board, labels), *coverage["lines"],
            *[f"note: {n}" for n in notes]]
    _hole_summary(per_query, args, payload, text)
    if args.out:
        atomic_write_csv(args.out / "per_query.csv", per_query)
        atomic_write_csv(args.out / "leaderboard.csv", board.reset_index())
        text.append(f"written to {args.out}")
    if args.trec_q:
        from rcp_jax.cli._trec_eval_layout import write_trec_q

        written = write_trec_q(per_query, _trec_names(per_query, args.k, measures), args.trec_q)
        payload["trec_q"] = [str(p) for p in written]
        text.append(f"trec_eval -q layout: {len(written)} file(s) in {args.trec_q}")
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


def _measures_asked(text: str | None, have_qrels: bool) -> tuple[list, str | None]:
    """(the ir_measures measures to compute, a note when the default set was skipped).

    Explicit ``--measures`` must parse (and ir_measures must be installed: a DataError names the extra);
    without it, the default set is computed when qrels are given and ir_measures imports, else skipped with a
    note."""
    from rcp_jax.cli._standard_measures import INSTALL_HINT, parse_measures

    if text is not None:
        return ([], None) if text.strip().lower() == "none" else (parse_measures(text), None)
    if not have_qrels:
        return [], None
    try:
        import ir_measures  # noqa: F401
    except ImportError:
        return [], (f"standard measures ({DEFAULT_MEASURES}) skipped: ir_measures is not installed "
                    f"({INSTALL_HINT})")
    return parse_measures(DEFAULT_MEASURES), None


def _per_query_at_cutoffs(runs, cal, qrels, ks: list[int], args, pools):
    """The per-query table at the first cut-off (columns rcp_ndcg, count_ndcg, qrel_ndcg, attrs as
    :func:`rcp_jax.evaluation.evaluate`) with, for each other cut-off K, the same columns suffixed ``@K``."""
    from rcp_jax.evaluation import evaluate

    def at(k):
        return evaluate(runs, cal, qrels=qrels, k=k, protocol=args.protocol, pools=pools, holes=args.holes,
                        max_hole_rate=args.max_hole_rate)

    first = at(ks[0])
    attrs = dict(first.attrs)
    metrics = [c for c in ("qrel_ndcg", "count_ndcg", "rcp_ndcg") if c in first.columns]  # the board's order
    for k in ks[1:]:
        other = at(k)
        if not other[["system", "query_id"]].equals(first[["system", "query_id"]]):  # one run: the same rows
            raise RuntimeError(f"evaluate gave other (system, query) rows at k={k} than at k={ks[0]}")
        first = first.assign(**{f"{m}@{k}": other[m].to_numpy() for m in metrics})
    first.attrs.update(attrs)
    return first


def _with_measures(per_query, runs, qrels, measures, lines: list[str]):
    """The per-query table with one column per ir_measures measure (NaN where the query has no qrels); a
    measure no query has for every system is left out, with a line in ``lines`` saying so."""
    from rcp_jax.cli._standard_measures import measure_table

    table = measure_table(runs, qrels, measures)
    attrs = dict(per_query.attrs)
    out = per_query.merge(table, on=["system", "query_id"], how="left", validate="one_to_one")
    keys = ["dataset", "query_id"] if "dataset" in out.columns else ["query_id"]
    dropped = [str(m) for m in measures if not _complete_queries(out, keys, str(m))]
    if dropped:
        lines.append(f"{', '.join(dropped)} omitted: no query with qrels is ranked by every system")
        out = out.drop(columns=dropped)
    out.attrs.update(attrs)
    return out


def _metric_order(per_query) -> list[str]:
    """Leaderboard columns: RCP-, Count-, qrel-nDCG at the first cut-off, at the others, then the measures."""
    cols = [c for c in per_query.columns if c not in ("system", "query_id", "dataset")]
    first = [c for c in ("rcp_ndcg", "count_ndcg", "qrel_ndcg") if c in cols]
    return first + [c for c in cols if c not in first]


def _trec_names(per_query, first_k: int, measures) -> dict[str, str]:
    """Per-query column -> trec_eval measure name, in the order the ``.eval`` files list them."""
    from rcp_jax.cli._standard_measures import trec_name
    from rcp_jax.cli._trec_eval_layout import ndcg_measure_name

    names = {c: ndcg_measure_name(c, first_k) for c in _metric_order(per_query)}
    for m in measures:
        if str(m) in per_query.columns:  # ir_measures' nDCG@10 would clash with qrel-nDCG's ndcg_cut_10
            names[str(m)] = trec_name(m) if trec_name(m) not in names.values() else str(m)
    return {c: n for c, n in names.items() if n is not None}


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

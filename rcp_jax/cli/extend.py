"""``rcp-jax extend``: judge a new reranker's unjudged documents and place them on an existing calibration."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import add_judge_args, add_source_args, emit, read_collection, stderr
from rcp_jax.cli._paths import folder

NAME = "extend"
HELP = ("judge only a new system's unjudged top documents (beside anchors already scored) and add them to a "
        "calibration without refitting it")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=Path, nargs="+", required=True,
                   help="the new system's run file(s): TREC or CSV/TSV/JSONL/Parquet (system, query_id, doc_id, score)")
    p.add_argument("--store", type=folder, required=True,
                   help="the judgement store the calibration was fitted from; the new answers and the extension "
                        "log (extensions.jsonl) are appended to it")
    p.add_argument("--calibration", type=Path, required=True,
                   help="the folder `rcp-jax fit --out` wrote (or its calibration/ subfolder): a frozen-BT calibration")
    p.add_argument("--out", type=folder, default=None,
                   help="write the extended calibration (calibration/), new_documents.csv and extension.json here, "
                        "ready for `rcp-jax evaluate --calibration OUT` (default: none; required unless --estimate)")
    p.add_argument("--depth", type=int, default=10,
                   help="each system's top DEPTH documents are read; the unjudged ones are judged (default 10)")
    p.add_argument("--systems", default=None, metavar="A,B",
                   help="only these systems of the run files, comma-separated (default: every system)")
    p.add_argument("--anchors", type=int, default=30,
                   help="scored documents per query the new ones are judged beside, spread over the score range "
                        "(default 30)")
    p.add_argument("--placements", type=float, default=12.0,
                   help="tournament windows per new document, each with 5 new documents and 5 anchors (default 12)")
    g = p.add_argument_group("collection", "the texts of the queries, the new documents and the anchors")
    add_source_args(g)
    g.add_argument("--pools", type=Path, default=None,
                   help="the pools file the store was judged with; needed by --model simulated (its latent relevance "
                        "comes from the qrels and the pools) (default: none)")
    g.add_argument("--qrels", type=Path, help="qrels file replacing the dataset's (TREC or BEIR TSV; default: the "
                   "dataset's qrels/<split>.tsv, if any: only --model simulated reads them here)")
    g.add_argument("--split", default="test", help="BEIR qrels split, the file qrels/<split>.tsv (default: test)")
    add_judge_args(p)
    p.add_argument("--estimate", action="store_true",
                   help="print the new documents and the planned calls (vs the full schedule); call nothing")
    p.add_argument("--keep-flagged", action="store_true",
                   help="also fit flagged answers (default: left out, as `rcp-jax fit` does)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _texts(args):
    """(queries {id: text}, documents {id: text}, collection) from --dataset / --rows / --corpus."""
    from rcp_jax import data

    col, _ = read_collection(args)
    if args.qrels:
        import dataclasses

        col = dataclasses.replace(col, qrels=data.read_qrels(args.qrels))
    corpus = col.corpus
    title = corpus["title"].fillna("").astype(str) if "title" in corpus.columns else None
    body = corpus["text"].fillna("").astype(str)
    texts = body if title is None else [f"{t}. {b}" if t and b else (t or b) for t, b in zip(title, body)]
    documents = dict(zip(corpus["doc_id"].astype(str), texts))
    queries = dict(zip(col.queries["query_id"].astype(str), col.queries["text"].astype(str)))
    return queries, documents, col


def _simulated_latent(args, col, plan) -> dict:
    """The simulated judge's latent relevance, as `rcp-jax judge` drew it for the judged pools, extended to the
    new documents (drawn after them, so the judged documents keep theirs)."""
    from rcp_jax import data
    from rcp_jax.cli._common import latent_from_qrels
    from rcp_jax.errors import DataError

    if args.pools is None:
        raise DataError("--model simulated needs --pools, the pools file the store was judged with: the simulated "
                        "judge derives each document's latent relevance from the qrels and the pools")
    pools = data.read_pools(args.pools)
    if "rank" in pools.columns:  # pool order, as `rcp-jax judge` reads it
        pools = pools.sort_values(["query_id", "rank"], kind="stable")
    grown: dict[str, list[str]] = {}
    for q, d in zip(pools["query_id"].astype(str), pools["doc_id"].astype(str)):
        grown.setdefault(q, []).append(d)
    for q, d in zip(plan.new_documents["query_id"], plan.new_documents["doc_id"]):
        if d not in grown.setdefault(q, []):
            grown[q].append(d)
    qrels = col.qrels if col.qrels is not None and len(col.qrels) else None
    return latent_from_qrels(grown, qrels, args.seed)


def run(args) -> int:
    import warnings

    from rcp_jax.calibration import load_calibration, save_calibration
    from rcp_jax.cli._common import make_judge, read_runs
    from rcp_jax.cli.evaluate import calibration_folder
    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json
    from rcp_jax.errors import DataError
    from rcp_jax.extension import ExtensionWarning, extend, plan_extension
    from rcp_jax.schedule.anchors import ExtensionConfig

    if args.out is None and not args.estimate:
        raise DataError("give --out, the folder for the extended calibration (or --estimate to plan only)")
    if args.depth < 1:
        raise DataError(f"--depth must be >= 1, got {args.depth}")
    try:
        config = ExtensionConfig(anchors=args.anchors, placements=args.placements)
    except ValueError as exc:
        raise DataError(str(exc).replace("ExtensionConfig.anchors", "--anchors")
                        .replace("ExtensionConfig.placements", "--placements")) from None
    systems = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None
    cal = load_calibration(calibration_folder(args.calibration))
    runs = read_runs(args.runs)
    runs.attrs["sources"] = [str(p) for p in args.runs]
    if len(args.runs) == 1:
        runs.attrs["source"] = str(args.runs[0])
    plan = plan_extension(runs, cal, store=args.store, depth=args.depth, systems=systems, config=config)
    queries, documents, col = _texts(args)
    latent = _simulated_latent(args, col, plan) if args.model == "simulated" else None
    judge = make_judge(args, latent)
    new = plan.new_documents
    counts = plan.counts()
    summary = {"extension": plan.extension, "new_documents": len(new), "queries": int(new["query_id"].nunique()),
               "planned_calls": plan.calls, "planned": counts, "full_rejudge_calls": plan.full_rejudge_calls}
    if args.estimate:
        from rcp_jax.extension import check_store

        check_store(args.store, cal, judge)
        lines = [f"{len(new)} new documents in {summary['queries']} queries (top {args.depth} of "
                 f"{new['systems'].str.split(',').explode().nunique()} system(s)); {plan.calls} calls planned "
                 f"({counts['tournament']} tournament + {counts['rubric']} rubric); judging the grown pools from "
                 f"scratch would take {plan.full_rejudge_calls}", "nothing was called (--estimate)"]
        emit(args, summary, "\n".join(lines))
        return 0
    quiet = args.quiet or args.json
    for note in getattr(args, "judge_notes", []):
        stderr(f"note: {note}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExtensionWarning)
        result = extend(runs, store=args.store, calibration=cal, judge=judge, queries=queries, documents=documents,
                        depth=args.depth, systems=systems, config=config, concurrency=args.concurrency,
                        keep_flagged=args.keep_flagged, log=None if quiet else stderr)
    for w in caught:
        if not issubclass(w.category, ExtensionWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    save_calibration(result.calibration, args.out / "calibration")
    atomic_write_csv(args.out / "new_documents.csv", result.new_documents)
    summary.update({"calls": result.calls, "checks": result.checks, "notes": result.notes,
                    "calibration": str(args.out / "calibration"), "store": str(args.store)})
    growth = ideal_growth(cal, result.calibration)
    summary["ideal_growth"] = growth
    atomic_write_json(args.out / "extension.json", summary)
    rub, anc = result.checks["rubric"], result.checks["anchors"]
    lines = [
        f"extension {plan.extension}: {len(new)} new documents in {summary['queries']} queries placed on the existing "
        f"scale; {result.calls} calls this run ({plan.calls} windows; the full schedule on the grown pools: "
        f"{plan.full_rejudge_calls})",
        f"checks: anchors ordered as before in {anc['agreement']:.1%} of {anc['pairs']} pairs; rubric answers vs the "
        f"placement: largest |z| {rub.get('max_abs_z', 0.0):.1f} over {len(rub.get('z', {}))} criteria"
        if anc["pairs"] else f"checks: rubric answers vs the placement: largest |z| {rub.get('max_abs_z', 0.0):.1f}",
        *[f"note: {n}" for n in result.notes],
        *([growth["note"]] if growth["queries"] else []),
        f"extended calibration written to {args.out / 'calibration'}; next: rcp-jax evaluate --calibration {args.out} "
        f"--runs {' '.join(map(str, args.runs))} ...",
    ]
    emit(args, summary, "\n".join(lines))
    return 0


def ideal_growth(before, after, k: int = 10) -> dict:
    """How the extension grew the RCP ideal lists: the queries whose ideal top-``k`` DCG rose, and by how much.

    Every system's RCP-nDCG on such a query is divided by a larger ideal after the extension, so scores of the
    systems already judged (the baselines) move even though their rankings did not: say so.
    Returns ``{"k", "queries", "of", "mean_rise", "note"}`` (``queries``: how many ideals rose).
    """
    import numpy as np

    from rcp_jax.metrics import discounts

    disc = discounts(k)

    def idcg(cal) -> dict:
        """query id -> ideal DCG@k of the calibration's gains (sorted best first)."""
        g = cal.gains().dropna(subset=["gain"])
        return {str(q): float(np.sort(part["gain"].to_numpy(dtype=np.float64))[::-1][:k] @ disc[:min(k, len(part))])
                for q, part in g.groupby("query_id")}

    old, new = idcg(before), idcg(after)
    rise = {q: new[q] / old[q] - 1.0 for q in new if q in old and old[q] > 0 and new[q] > old[q] * (1 + 1e-12)}
    out = {"k": k, "queries": len(rise), "of": len(new), "mean_rise": float(np.mean(list(rise.values()))) if rise else 0.0}
    out["note"] = (f"note: the new documents grew the ideal top-{k} of {len(rise)} of {len(new)} queries (ideal DCG "
                   f"+{100 * out['mean_rise']:.1f}% on average): every system's RCP-nDCG@{k} there is now divided by a "
                   "larger ideal, so the scores of the systems already judged (the baselines) move although their "
                   "rankings did not; compare systems under one calibration (evaluate them all with the extended "
                   "one)") if rise else ""
    return out

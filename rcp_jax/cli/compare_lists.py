"""``rcp-jax compare-lists``: blind comparison of the ideal RCP and Count top-k lists by LLM judges."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import add_collection_args, collection_name, emit, latent_from_qrels, load_collection, make_judge, pipeline_input
from rcp_jax.cli._paths import folder
from rcp_jax.errors import DataError

NAME = "compare-lists"
HELP = ("show judges the ideal top-k under RCP and under Count gains as two anonymous lists, in both orders, "
        "and report which list each judge (and the majority) prefers")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--report", type=folder, default=None,
                   help="report folder of `rcp-jax demo` (or any folder with calibration/ and store/); results "
                        "are written there")
    p.add_argument("--calibration", type=Path, default=None, help="calibration folder (default: REPORT/calibration)")
    p.add_argument("--store", type=folder, default=None, help="judgement store (default: REPORT/store)")
    p.add_argument("--out", type=folder, default=None, help="where to write list_comparison.csv and list_decisions.csv "
                   "(default: REPORT)")
    p.add_argument("--k", type=int, default=10, help="list length (default 10)")
    g = p.add_argument_group("judges")
    g.add_argument("--model", action="append", default=None,
                   help="litellm model string or 'simulated' (offline); repeat for several judges (default: "
                        "three simulated judges with seeds SEED, SEED+1, SEED+2)")
    g.add_argument("--api-base", default=None, help="endpoint URL of an OpenAI-compatible server")
    g.add_argument("--concurrency", type=int, default=16, help="judge calls in flight per judge (default 16)")
    g.add_argument("--seed", type=int, default=0, help="tie-break and simulated-judge seed (default 0)")
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of the judge (default 0.0)")
    g.add_argument("--max-tokens", type=int, default=4096, help="most tokens of one answer (default 4096)")
    add_collection_args(p)


def _texts(args):
    """(documents, queries, latent for simulated judges) of the collection the calibration was fitted on."""
    if args.dataset or args.rows or getattr(args, "corpus", None):
        col, pools = load_collection(args)
        name = collection_name(args)
        collection = pipeline_input(col, pools, name)
        latent = latent_from_qrels(collection.pools, collection.qrels, args.seed)
        return collection.documents, collection.queries, latent
    from rcp_jax.demo.dataset import load_demo

    demo = load_demo()
    return demo.document_texts(), dict(zip(demo.queries["query_id"], demo.queries["text"])), demo.latent_by_query()


def run(args) -> int:
    from rcp_jax.calibration import load_calibration
    from rcp_jax.data.atomic import atomic_write_csv
    from rcp_jax.list_compare import compare_ideal_lists_sync

    if args.report is None and (args.calibration is None or args.store is None):
        raise DataError("give --report DIR (a folder with calibration/ and store/), or both --calibration and --store")
    cal_dir = args.calibration or args.report / "calibration"
    store = args.store or args.report / "store"
    out = args.out or args.report
    cal = load_calibration(cal_dir)
    documents, queries, latent = _texts(args)
    models = args.model or ["simulated"] * 3
    judges = {}
    for i, model in enumerate(models):
        ns = argparse.Namespace(**{**vars(args), "model": model, "seed": args.seed + i})
        judge = make_judge(ns, latent if model == "simulated" else None)
        name = f"simulated-{args.seed + i}" if model == "simulated" else model
        while name in judges:
            name += "'"
        judges[name] = judge
    result = compare_ideal_lists_sync(cal, judges=judges, store=store, documents=documents, queries=queries, k=args.k,
                                      seed=args.seed, concurrency=args.concurrency)
    written = []
    if out is not None:
        written.append(atomic_write_csv(Path(out) / "list_comparison.csv", result.summary))
        written.append(atomic_write_csv(Path(out) / "list_decisions.csv", result.decisions))
    counts = result.pairs["status"].value_counts()
    payload = {
        "k": args.k, "judges": result.judges, "calls": result.calls,
        "queries": {s: int(counts.get(s, 0)) for s in ("compared", "identical", "missing")},
        "summary": result.summary.to_dict(orient="records"), "notes": result.notes,
        "written": [str(p) for p in written],
    }
    text = result.to_text() + f"\njudge calls this run: {result.calls} (answers are kept in {store})"
    if written:
        text += f"\nwritten: {', '.join(str(p) for p in written)}"
    emit(args, payload, text)
    return 0

"""Argument groups and helpers shared by the ``rcp-jax`` verbs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcp_jax.errors import DataError

if TYPE_CHECKING:  # imported inside the helpers that need them, so `rcp-jax --help` stays cheap
    import pandas as pd


def add_source_args(g) -> None:
    """The collection's source, exactly one of: ``--dataset`` (BEIR folder or ``irds:<id>``), ``--rows``,
    ``--corpus`` with ``--topics`` (and ``--topic-field``)."""
    g.add_argument("--dataset", type=Path,
                   help="BEIR folder (corpus.jsonl, queries.jsonl[, qrels/<split>.tsv]; without qrels/ it is an "
                        "unlabelled collection: no qrel figures), or irds:<id>, an ir_datasets dataset (e.g. "
                        "irds:vaswani, irds:beir/scifact/test; downloaded on first use into IR_DATASETS_HOME, default "
                        "~/.ir_datasets; needs pip install \"rcp-jax[ir]\"); give this, --rows or --corpus (default: "
                        "none)")
    g.add_argument("--rows", type=Path,
                   help="JSONL rows: one query per line with query_id, query, doc_ids, docs[, qrels]; give this, "
                        "--dataset or --corpus (default: none)")
    g.add_argument("--corpus", type=Path, metavar="FILE_OR_DIR",
                   help="documents: a TREC file of <DOC> blocks (<DOCNO>, <TEXT>, <HEADLINE>/<TITLE> as the title; "
                        ".gz read through), a folder of them, or a corpus table (doc_id, text[, title]); with "
                        "--topics, and --qrels for labels; give this, --dataset or --rows (default: none)")
    g.add_argument("--topics", type=Path, metavar="FILE",
                   help="the queries of --corpus: TREC topics (<top> blocks with <num>, <title>[, <desc>, <narr>]), "
                        "qid<TAB>text lines, or a queries table (query_id, text); --queries FILE is taken as this "
                        "when --corpus is given without --topics (default: none)")
    g.add_argument("--topic-field", choices=["title", "desc", "title+desc"], default="title",
                   help="which section of a TREC topic is the query text (default: title)")


def add_collection_args(p: argparse.ArgumentParser, *, pools_required: bool = False, pools: bool = True) -> None:
    """``--dataset`` / ``--rows``, ``--pools`` (unless ``pools=False``: ``rcp-jax pool`` builds them), qrels,
    split, name, the query subset and ``--missing-text``."""
    g = p.add_argument_group("collection")
    add_source_args(g)
    if pools:
        g.add_argument("--pools", type=Path, required=pools_required,
                       help="judged pools: query_id, doc_id[, rank] (CSV/TSV/JSONL/Parquet) or a TREC run, as "
                            "`rcp-jax pool` writes (default: the pools of --rows; none for --dataset)")
    g.add_argument("--qrels", type=Path, help="qrels file replacing the dataset's (TREC or BEIR TSV; it may label "
                   "only some queries; default: the dataset's qrels/<split>.tsv or the irds dataset's qrels, or the rows' "
                   "qrels; none, as for --corpus without --qrels: unlabelled)")
    g.add_argument("--split", default="test", help="BEIR qrels split, the file qrels/<split>.tsv (default: test)")
    g.add_argument("--name", default=None,
                   help="dataset name keying the schedule's random streams (default: the --dataset folder's name or "
                        "irds id, the --rows file's stem, or the --corpus file's stem)")
    g.add_argument("--queries", default=None, metavar="FILE|IDS",
                   help="only these queries: a file with one query id per line, or comma-separated ids (e.g. 1,2,4); "
                        "an unknown id is an error (default: every query, or every pooled query); with --corpus and "
                        "no --topics, a queries FILE with texts is read as the topics instead")
    g.add_argument("--max-queries", type=int, default=None, metavar="N",
                   help="only the first N queries in the queries file's order (among the pooled ones when --pools is "
                        "given; after --queries), a deterministic subset to try the flow on (default: all)")
    g.add_argument("--images", type=Path, default=None, metavar="DIR",
                   help="folder of page images named by document id (<doc_id>.png, .jpg or .jpeg): those documents "
                        "are judged as images (with their text, if any); see the README, Judging page images "
                        "(default: none; a corpus may also name each document's image in an 'image' field)")
    g.add_argument("--allow-outside-images", action="store_true",
                   help="let the corpus name page-image files outside the dataset's folder and the --images folder "
                        "(default: such a file is refused before anything is read or sent)")
    g.add_argument("--missing-text", choices=["error", "warn", "drop"], default="error",
                   help="a POOLED document without text or title: refuse (error, the default), judge it empty with a "
                        "warning (warn), or remove it from its pool (drop); empty documents never pooled do not matter")


def load_collection(args) -> tuple[Any, pd.DataFrame | None]:
    """(rcp_jax.data.Collection, pools table or None) from ``--dataset`` / ``--rows`` / ``--pools``, restricted
    to ``--queries`` / ``--max-queries``; ``--missing-text`` is applied to the pooled documents only (a
    caller that builds pools itself, ``rcp-jax pool``, applies it with :func:`pooled_texts`)."""
    import dataclasses

    from rcp_jax import data
    from rcp_jax.data.collection import select_queries

    col, subset = read_collection(args)
    if getattr(args, "images", None) is not None:
        from rcp_jax.data.collection import attach_images

        col = dataclasses.replace(col, corpus=attach_images(col.corpus, args.images))
    if not getattr(args, "allow_outside_images", False):  # before any image is read
        from rcp_jax.data.collection import check_image_paths

        roots = [args.dataset if args.dataset and not _irds(args) else None, getattr(args, "corpus", None),
                 getattr(args, "images", None)]
        check_image_paths(col.corpus, [p for p in roots if p is not None])
    if args.qrels:
        col = dataclasses.replace(col, qrels=data.read_qrels(args.qrels))
    pools = data.read_pools(args.pools) if getattr(args, "pools", None) else col.pools
    order = [str(q) for q in col.queries["query_id"]]
    pooled = set(pools["query_id"].astype(str)) if pools is not None else None
    chosen = select_queries(order, queries=subset, max_queries=getattr(args, "max_queries", None),
                            pooled=pooled)
    if chosen is not None:
        keep = set(chosen)

        def only(df):
            if df is None:
                return None
            out = df.loc[df["query_id"].astype(str).isin(keep)]
            out.attrs = dict(df.attrs)
            return out

        col = dataclasses.replace(col, queries=only(col.queries), qrels=only(col.qrels), pools=only(col.pools),
                                  excluded=only(col.excluded))
        pools = only(pools)
    if pools is not None:
        pools = pooled_texts(col.corpus, pools, args.missing_text)
    note = label_note(col, args)
    if note:
        stderr(f"note: {note}")
    return col, pools


def _irds(args) -> bool:
    from rcp_jax.data.irds import PREFIX

    return bool(getattr(args, "dataset", None)) and str(args.dataset).startswith(PREFIX)


def collection_name(args) -> str:
    """``--name``, else the source's: the --dataset folder's name or irds id, the --rows / --corpus file's stem."""
    if getattr(args, "name", None):
        return args.name
    if _irds(args):
        return str(args.dataset).removeprefix("irds:")
    if getattr(args, "dataset", None):
        return args.dataset.name
    if getattr(args, "rows", None):
        return args.rows.stem
    name = args.corpus.name.removesuffix(".gz")
    return name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name


def _topics_file(args) -> tuple[Path, str | None]:
    """The queries file of --corpus (--topics, or a --queries FILE with texts) and the --queries subset left."""
    from rcp_jax.data.trec_text import read_topics

    if args.topics:
        return args.topics, getattr(args, "queries", None)
    spec = getattr(args, "queries", None)
    if spec and Path(spec).is_file():
        try:
            read_topics(spec, field=args.topic_field)
        except DataError as e:
            raise DataError(f"--corpus needs its queries: --topics FILE; --queries {spec} is not a queries file with "
                            f"texts ({e}); with --corpus, --queries FILE is read as the topics only when it is one"
                            ) from None
        return Path(spec), None
    raise DataError("--corpus needs its queries: give --topics FILE (TREC topics, qid<TAB>text lines, or a queries "
                    "table with query_id, text)")


def read_collection(args):
    """(Collection, the --queries subset still to apply) from exactly one of --dataset / --rows / --corpus, with
    --qrels replacing the source's qrels; every document kept (``missing_text="keep"``)."""
    from rcp_jax import data

    corpus = getattr(args, "corpus", None)
    given = [f for f, v in (("--dataset", args.dataset), ("--rows", args.rows), ("--corpus", corpus)) if v]
    if len(given) != 1:
        raise DataError("give exactly one of --dataset (a BEIR folder or irds:<id>), --rows (a JSONL rows file) or "
                        "--corpus (a documents file or folder, with --topics)"
                        + (f"; got {' and '.join(given)}" if given else ""))
    subset = getattr(args, "queries", None)
    if getattr(args, "topics", None) and not corpus:
        raise DataError("--topics is the queries file of --corpus; a --dataset or --rows collection has its queries")
    if corpus:
        topics, subset = _topics_file(args)
        col = data.load_collection(corpus, topics=topics, topic_field=args.topic_field, missing_text="keep")
    elif _irds(args):
        col = data.read_irds(str(args.dataset), missing_text="keep")
    elif args.dataset:  # --qrels FILE replaces the dataset's qrels: their split is then not read at all
        col = data.read_beir(args.dataset, split=args.split, missing_text="keep", strict=False, labels=not args.qrels)
    else:
        col = data.read_rows(args.rows, missing_text="keep")
    return col, subset


def labelled_queries(queries: pd.DataFrame, qrels: pd.DataFrame | None) -> list[str]:
    """The ids of ``queries`` (in their order) that have at least one qrel row (any grade)."""
    if qrels is None or not len(qrels):
        return []
    have = set(qrels["query_id"].astype(str))
    return [q for q in queries["query_id"].astype(str) if q in have]


def label_note(col, args) -> str | None:
    """One line saying the collection is unlabelled, or which share of its queries has qrels (None: all)."""
    n = len(col.queries)
    labelled = labelled_queries(col.queries, col.qrels)
    if len(labelled) == n:
        return None
    if not labelled:
        if getattr(args, "qrels", None):
            where = f"--qrels {args.qrels} holds no qrel of the selected queries"
        elif _irds(args):
            where = f"{args.dataset} has no qrels"
        elif getattr(args, "dataset", None):
            where = f"{args.dataset} has no qrels/ folder"
        elif getattr(args, "corpus", None):
            where = "no --qrels given with --corpus"
        else:
            where = f"{args.rows} carries no qrels"
        return (f"unlabelled collection ({where}): no human labels, so qrel figures (qrel-nDCG, positive recall, "
                "swapped-in positives) are omitted; the LLM judge needs none (--qrels FILE adds labels)")
    return (f"qrels cover {len(labelled)} of {n} queries (the labelled ones): qrel figures are computed on those "
            f"{len(labelled)} only")


def pooled_texts(corpus, pools: pd.DataFrame, policy: str) -> pd.DataFrame:
    """``--missing-text`` applied to the pooled documents (messages name the CLI flags)."""
    from rcp_jax.data.collection import CLI_HINT, check_pooled_texts

    return check_pooled_texts(corpus, pools, policy, hint=CLI_HINT)


def pipeline_input(col, pools: pd.DataFrame, name: str):
    from rcp_jax.data.pool_checks import check_pools_against_collection
    from rcp_jax.pipeline import PipelineInput

    if pools is None:
        raise DataError("no pools: pass --pools (build them with `rcp-jax pool`)")
    # before any judge call, naming the pools file and line
    check_pools_against_collection(pools, corpus=col.corpus, queries=col.queries, min_size=2)
    return PipelineInput.from_tables(col.corpus, col.queries, pools, qrels=col.qrels if len(col.qrels) else None, dataset=name)


def add_judge_args(p: argparse.ArgumentParser) -> None:
    """The judge options (:func:`rcp_jax.cli._judge_options.add_judge_options`)."""
    from rcp_jax.cli._judge_options import add_judge_options

    add_judge_options(p)


def make_judge(args, latent: dict | None):
    """The judge named by ``--model``: the simulated judge (needs latent relevance) or a litellm judge, with
    the run policy of ``--max-attempts`` / ``--stop-after-invalid``; resolves ``--concurrency auto`` in ``args``
    (:func:`rcp_jax.cli._judge_options.build_judge`)."""
    from rcp_jax.cli._judge_options import build_judge

    return build_judge(args, latent)


def latent_from_qrels(pools: dict[str, list[str]], qrels: pd.DataFrame | None, seed: int = 0) -> dict:
    """Latent relevance for the simulated judge from graded qrels plus noise (unjudged = grade 0).

    ``latent = -2 + 1.6 * grade + N(0, 0.8^2)`` on the calibrated ability scale, seeded per document.
    A query without any qrel row has no latent relevance: when no pooled query has one (an unlabelled
    collection) the simulated judge is refused; when some lack one, they are named on stderr (their documents
    are all simulated as non-relevant, so their tournaments are noise).

    Raises:
        DataError: no pooled query has a qrel (the message gives the alternatives).
    """
    import numpy as np

    grades: dict[tuple[str, str], float] = {}
    if qrels is not None:
        grades = {(str(q), str(d)): float(g) for q, d, g in qrels[["query_id", "doc_id", "grade"]].itertuples(index=False)}
    labelled = {q for q, _ in grades}
    missing = [q for q in pools if q not in labelled]
    if pools and len(missing) == len(pools):
        from rcp_jax.cli._judge_options import SIMULATED_NEEDS_QRELS

        raise DataError(SIMULATED_NEEDS_QRELS)
    if missing:
        shown = ", ".join(missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
        stderr(f"note: the simulated judge draws latent relevance from the qrels: {len(missing)} of {len(pools)} "
               f"pooled queries have none ({shown}); their documents are all simulated as non-relevant (noise "
               "tournaments). Leave them out with --queries (the labelled ones), or judge them with a real --model")
    out: dict[str, dict[str, float]] = {}
    for q, docs in pools.items():
        rng = np.random.default_rng([seed, abs(hash_str(q)) % (2**32)])
        noise = rng.normal(0.0, 0.8, len(docs))
        out[q] = {d: -2.0 + 1.6 * grades.get((q, d), 0.0) + float(e) for d, e in zip(docs, noise)}
    return out


def hash_str(text: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def read_runs(paths: list[Path]) -> pd.DataFrame:
    """The run files as one table; two files ranking a query under one system name are refused, naming both."""
    from rcp_jax import data

    return data.concat_runs([data.read_run(p) for p in paths])


def emit(args, payload: dict, text: str) -> None:
    """Print ``payload`` as JSON with ``--json``, else the human-readable ``text``."""
    if getattr(args, "json", False):
        json.dump(_plain(payload), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(text)


def _plain(obj):
    from rcp_jax.data.atomic import _jsonable

    return _jsonable(obj)


def format_board(board: pd.DataFrame, labels: dict[str, str] | None = None) -> str:
    """Leaderboard as an aligned text table (metrics in columns, systems in rows): the nDCG columns first, then
    any other metric column under its own name; ``labels`` renames headers (e.g. ``rcp_ndcg`` -> ``RCP-nDCG@5``)."""
    names = {"qrel_ndcg": "qrel-nDCG", "count_ndcg": "Count-nDCG", "rcp_ndcg": "RCP-nDCG", **(labels or {})}
    known = ("qrel_ndcg", "count_ndcg", "rcp_ndcg")
    cols = [c for c in known if c in board.columns] + [c for c in board.columns if c not in known]
    heads = [names.get(c, str(c)) for c in cols]
    widths = [max(10, len(h)) for h in heads]
    width = max([len("system")] + [len(str(s)) for s in board.index])
    head = f"{'system':<{width}}  " + "  ".join(f"{h:>{w}}" for h, w in zip(heads, widths))
    lines = [head, "-" * len(head)]
    for s, row in board.iterrows():
        lines.append(f"{str(s):<{width}}  " + "  ".join(f"{row[c]:>{w}.4f}" for c, w in zip(cols, widths)))
    return "\n".join(lines)


#: One line per leaderboard metric: what its gain is (``metric_legend``).
METRIC_MEANINGS = {
    "qrel_ndcg": "qrel-nDCG: gain = the human qrel grade (a document without a qrel counts 0)",
    "count_ndcg": "Count-nDCG: gain = share of the rubric's criteria the judge said the document meets",
    "rcp_ndcg": "RCP-nDCG: gain = the calibrated RCP gain (tournament order, rubric-calibrated, comparable "
                "across queries)",
}


def metric_legend(board: pd.DataFrame, k: int) -> str:
    """What the leaderboard's columns are: the cut-off and one line per metric present."""
    cols = [c for c in ("qrel_ndcg", "count_ndcg", "rcp_ndcg") if c in board.columns]
    return "\n".join([f"nDCG@{k}, mean over queries; each metric's gain:", *[f"  {METRIC_MEANINGS[c]}" for c in cols]])


def board_payload(board: pd.DataFrame) -> dict:
    return {str(s): {c: float(v) for c, v in row.items()} for s, row in board.iterrows()}


def stderr(msg: str) -> None:
    print(msg, file=sys.stderr)

"""``rcp-jax export``: a fitted calibration as float gains, integer-scaled TREC qrels, MTEB qrels or posterior draws."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import emit

NAME = "export"
HELP = "write a fitted calibration's gains for other tools: float gains table, integer-scaled TREC qrels, MTEB qrels, posterior draws"

_FORMAT_HELP = (
    "gains: query_id, doc_id, gain, count_gain (+ gain_mean, gain_lo, gain_hi, interval with a posterior) as "
    ".csv/.tsv/.parquet by --out's extension; trec: `query_id 0 doc_id grade` with grade = round(gain * --scale) "
    "(at least 1) for trec_eval, pytrec_eval, ir_measures, ranx; mteb: the MTEB float-gain layout, a TSV with "
    "header query-id, corpus-id, gain (BEIR's qrels columns, float gains in the third); draws: the posterior draws of the gains, long "
    "(draw, query_id, doc_id, gain) as .csv/.tsv/.parquet (needs a posterior: what `rcp-jax fit` writes by "
    "default, not with --method map)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", type=Path, required=True,
                   help="the folder `rcp-jax fit --out` wrote (or its calibration/ subfolder); its posterior/, if any, "
                        "adds the gain intervals to --format gains and is what --format draws writes")
    p.add_argument("--format", required=True, choices=["gains", "trec", "mteb", "draws"], help=_FORMAT_HELP)
    p.add_argument("--out", type=Path, required=True,
                   help="the file to write (atomically; an existing file is replaced); gains and draws: .csv, .tsv or "
                        ".parquet (.csv.gz/.tsv.gz too)")
    p.add_argument("--draws", type=int, default=None, metavar="N",
                   help="--format draws: keep N posterior draws, evenly spaced (default: all)")
    p.add_argument("--scale", type=int, default=None, metavar="S",
                   help="--format trec: grade = round(gain * S) (default 1000000: six decimals; trec_eval's nDCG "
                        "allocates one entry per grade level, so 10^9 costs ~7 GB and ~5 s a query)")
    p.add_argument("--header", action="store_true",
                   help="--format trec: add a first line `# ... grade = round(gain * S) ...` naming the scale "
                        "(default: off, because pytrec_eval, ir_measures and ranx refuse a comment line and trec_eval "
                        "expects four fields a line)")


def run(args) -> int:
    from rcp_jax import exports
    from rcp_jax.calibration import load_calibration
    from rcp_jax.cli.evaluate import calibration_folder
    from rcp_jax.errors import DataError

    cal_dir = calibration_folder(args.calibration)
    cal = load_calibration(cal_dir)
    post_dir = cal_dir.parent / "posterior"
    has_posterior = (post_dir / "posterior.json").is_file()
    if args.draws is not None and args.format != "draws":
        raise DataError("--draws thins --format draws only; drop it or pass --format draws")
    if (args.header or args.scale is not None) and args.format != "trec":
        raise DataError("--header and --scale are for --format trec only; drop them")
    if args.format == "draws" and not has_posterior:
        raise DataError(f"--format draws needs a posterior and {post_dir} holds none; fit one with `rcp-jax fit "
                        "--store ... --out ...` (its default, --method auto, writes one; --method map does not), or "
                        "export --format gains")
    posterior = None
    if has_posterior and args.format in ("gains", "draws"):
        from rcp_jax.bayes.posterior import load_posterior

        posterior = load_posterior(post_dir)

    notes = []
    skipped = exports.uncalibrated_queries(cal)
    if skipped:
        shown = ", ".join(skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        notes.append(f"{len(skipped)} uncalibrated quer{'y' if len(skipped) == 1 else 'ies'} (no rubric answers, gains "
                     f"NaN) left out: {shown}")
    payload = {"format": args.format, "out": str(args.out), "calibration": str(cal_dir)}
    if args.format == "gains":
        table = exports.gains_table(cal, posterior)
        path = exports.write_table(table, args.out)
        payload["interval"] = float(posterior.ci_prob) if posterior is not None else None
        what = "float gains" + (f" with {round(100 * posterior.ci_prob)}% posterior intervals" if posterior else "")
    elif args.format == "trec":
        scale = exports.TREC_SCALE if args.scale is None else args.scale
        table = exports.trec_qrels_table(cal, scale=scale)
        path = exports.write_trec_qrels(table, args.out, header=args.header, scale=scale)
        payload["scale"] = scale
        raised = int((exports.gains_table(cal)["gain"] * scale < 0.5).sum())
        if raised:
            notes.append(f"{raised} gain(s) below 0.5 / {scale} written as grade 1 (not 0, which trec_eval reads as "
                         "non-relevant)")
        what = f"integer-scaled TREC qrels (grade = round(gain * {scale}); divide by {scale} for the gain)"
    elif args.format == "mteb":
        table = exports.mteb_qrels_table(cal)
        path = exports.write_mteb_qrels(table, args.out)
        what = "MTEB float-gain layout (query-id, corpus-id, gain)"
        notes.append("the third column holds float gains: BEIR's GenericDataLoader reads it with int() and refuses "
                     "them; load this file with pandas or datasets, or use --format trec for integer grades")
    else:
        table = exports.draws_table(posterior, draws=args.draws)
        path = exports.write_table(table, args.out)
        n_draws = int(table["draw"].nunique()) if len(table) else 0
        payload["draws"] = n_draws
        payload["draws_available"] = int(posterior.gain_draws.shape[0])
        what = f"{n_draws} posterior draws of the gains ({posterior.model} model, {posterior.method})"
    n_queries = int(table.iloc[:, 1 if args.format == "draws" else 0].nunique()) if len(table) else 0
    payload.update({"rows": int(len(table)), "queries": n_queries, "uncalibrated_queries": skipped, "notes": notes})
    text = [f"wrote {path}: {what}, {len(table)} rows over {n_queries} quer{'y' if n_queries == 1 else 'ies'}",
            *[f"note: {n}" for n in notes]]
    emit(args, payload, "\n".join(text))
    return 0

"""``rcp-jax diagnose``: undistinguishable queries of a per-query table; calibration of predicted answers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rcp_jax.cli._paths import folder
from rcp_jax.cli.compare import jsonable, read_table
from rcp_jax.errors import DataError

if TYPE_CHECKING:  # imported inside the functions, so `rcp-jax --help` stays cheap
    import pandas as pd

NAME = "diagnose"
HELP = ("diagnose a metric (saturated / floor / compressed queries) and a calibration: with --fit FOLDER (what "
        "`rcp-jax fit` wrote) ECE and Brier raw vs calibrated, the reliability diagram, local dependence, tau "
        "spread and item transfer, with nothing else to prepare")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("per_query", nargs="?", help="per-query metrics table (system, query_id, [dataset], "
                        "metric columns), e.g. evaluate's per_query.csv (default: none; optional with --fit, "
                        "--answers or --queries)")
    parser.add_argument("--fit", type=folder, action="append", default=None, metavar="FOLDER",
                        help="the folder `rcp-jax fit --out` wrote: ECE and Brier of the rubric answers predicted "
                             "from the raw BT scores vs the calibrated abilities, reliability diagram, local "
                             "dependence, tau spread and item transfer; repeat it with the fits of other datasets "
                             "for leave-one-dataset-out transfer (default: none)")
    parser.add_argument("--out", type=folder, default=None,
                        help="with --fit, where to write reliability.png, predictions.csv (one row per answer with "
                             "p_raw, p_calibrated), calibration_report.csv, transfer.csv and diagnose.json; with "
                             "several --fit, one subfolder per fit and transfer_across_datasets.csv (default: "
                             "<fit folder>/diagnostics, and the first fit's for the cross-dataset transfer)")
    parser.add_argument("--no-plots", action="store_true",
                        help="with --fit, skip reliability.png (default: drawn)")
    parser.add_argument("--metrics", help="comma-separated metric columns (default: the nDCG columns present)")
    parser.add_argument("--systems", help="comma-separated systems to consider (default: all)")
    parser.add_argument("--atol", type=float, default=1e-9, help="tolerance of a tie (default 1e-09)")
    parser.add_argument("--answers", help="rubric answers table, one row per answer: criterion (C1.. or 0-based "
                        "index), answer (0/1) and predicted-probability columns, e.g. the predictions.csv that "
                        "--fit writes (default: none)")
    parser.add_argument("--pred-cols", help="comma-separated prediction columns of --answers (default: columns "
                        "starting with p_)")
    parser.add_argument("--bins", type=int, default=10, help="ECE bins (default 10)")
    parser.add_argument("--reliability-plot", help="with --answers, write a reliability diagram (.png/.pdf/.svg; "
                        "default: none)")
    parser.add_argument("--queries", help="per-query calibration table with a tau column, for the tau spread "
                        "(default: none; --fit reads the fit's own)")


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
        from rcp_jax.data.table_checks import show

        i = int(np.flatnonzero(~ans.isin([0, 1]))[0])
        raise DataError(f"answers file {path} row {i}: answer {show(df['answer'].iloc[i])} is not 0 or 1")
    df["answer"] = ans.astype(int)
    return df, cols


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from rcp_jax.stats.diagnostics import calibration_report, tau_spread, undistinguishable_queries, undistinguishable_summary
    from rcp_jax.stats.tables import format_table

    if not (args.per_query or args.answers or args.queries or args.fit):
        raise DataError("nothing to diagnose: give --fit FOLDER (what `rcp-jax fit` wrote), a per-query table "
                        "and/or --answers / --queries")
    result: dict = {}
    text: list[str] = []
    if args.fit:
        _diagnose_fit(args, result, text)
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
            from rcp_jax.plots.diagnostics import plot_reliability

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


def _diagnose_fit(args, result: dict, text: list[str]) -> None:
    """``--fit``: every calibration diagnostic of the paper from the files ``rcp-jax fit`` wrote; with several
    fit folders (one dataset each) the item transfer is leave-one-dataset-out across them."""
    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json
    from rcp_jax.stats.diagnostics import transfer_across_fits
    from rcp_jax.stats.tables import format_table

    folders = list(args.fit)
    several = len(folders) > 1
    names = _fit_names(folders)
    payloads, inputs = [], {}
    for name, fit_folder in zip(names, folders):
        out = (args.out / name if several else args.out) if args.out else fit_folder / "diagnostics"
        payload, answers, bt = _diagnose_one_fit(args, fit_folder, out, text, transfer=not several,
                                                 heading=f" of {name}" if several else "")
        payloads.append(payload)
        inputs[name] = (answers, bt)
    result["fits"] = payloads
    if not several:
        result["fit"] = payloads[0]
        return
    missing = [n for n, (_, bt) in inputs.items() if bt is None]
    text.append(f"## Item transfer across {len(folders)} datasets (leave one dataset out)")
    if missing:
        note = f"not computed: no bt.csv in the fit folder of {', '.join(missing)}"
        text.append(note)
        result["transfer"] = {"note": note}
        return
    try:
        tr = transfer_across_fits(inputs).rename(columns={"dataset": "held_out"})
    except DataError as err:
        raise DataError(f"--fit {' '.join(map(str, folders))}: {err}") from None
    out = args.out or folders[0] / "diagnostics"
    path = atomic_write_csv(out / "transfer_across_datasets.csv", tr)
    text += [format_table(tr), f"written: {path}"]
    result["transfer"] = {"kind": "datasets", "table": json.loads(tr.to_json(orient="records")), "file": str(path)}
    atomic_write_json(out / "diagnose_transfer.json", result["transfer"])


def _fit_names(folders: list[Path]) -> list[str]:
    """A dataset name per fit folder: its name, or parent/name where two folders share a name."""
    names = [f.resolve().name for f in folders]
    if len(set(names)) < len(names):
        names = [f"{f.resolve().parent.name}/{f.resolve().name}" for f in folders]
    if len(set(names)) < len(names):
        raise DataError(f"--fit is given the same folder twice: {', '.join(map(str, folders))}")
    return names


def _diagnose_one_fit(args, folder: Path, out: Path, text: list[str], *, transfer: bool, heading: str):
    """The diagnostics of one fit folder into ``out``; returns (JSON payload, answers, BT scores or None)."""
    from rcp_jax.calibration import load_calibration
    from rcp_jax.cli.evaluate import calibration_folder
    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json
    from rcp_jax.stats.diagnostics import fit_report
    from rcp_jax.stats.tables import format_table

    cal = load_calibration(calibration_folder(folder))
    answers_path = folder / "answers.csv"
    if not answers_path.is_file():
        raise DataError(f"--fit {folder}: no answers.csv; pass the folder `rcp-jax fit --out` wrote (run fit again "
                        "if it was written by an older version)")
    answers = read_table(answers_path, "answers")
    bt = read_table(folder / "bt.csv", "BT scores") if (folder / "bt.csv").is_file() else None
    try:
        report = fit_report(answers, cal, bt, n_bins=args.bins, transfer=transfer)
    except DataError as err:
        raise DataError(f"--fit {folder}: {err}") from None
    ece = report["ece"]
    wide = ece.pivot(index="criterion", columns="model", values="ece").reindex([*cal.criteria, "all"])
    wide = wide[["raw", "calibrated"]].reset_index()
    brier = ece.pivot(index="criterion", columns="model", values="brier").reindex([*cal.criteria, "all"])
    wide["brier_raw"], wide["brier_calibrated"] = brier["raw"].to_numpy(), brier["calibrated"].to_numpy()
    wide["criterion"] = wide["criterion"].map({**dict(zip(cal.criteria, cal.labels)), "all": "all"})  # rubric names
    dep, spread = report["local_dependence"], report["tau_spread"]
    n_answers = len(report["predictions"])
    text += [f"## Calibration of the rubric answers{heading} ({n_answers} answers, {args.bins} bins; raw = sigmoid "
             "of the BT score on the item curves without the per-query tau and alpha, calibrated = the 2PL ability)",
             format_table(wide.rename(columns={"raw": "ece_raw", "calibrated": "ece_calibrated"})),
             f"local dependence, mean |corr| between criteria: raw {dep['raw']:.3f}, residual {dep['residual']:.3f} "
             "(paper: 0.60 and 0.123)",
             f"tau spread (95th / 5th percentile over {int(cal.queries['tau'].notna().sum())} queries): {spread:.2f} "
             "(paper: about 3)"]
    payload = {"fit": str(folder), "n_answers": n_answers, "ece": json.loads(ece.to_json(orient="records")),
               "local_dependence": dep, "tau_spread": spread, "transfer_kind": report["transfer_kind"],
               "transfer_note": report["transfer_note"]}
    payload["answer_quality"], quality_lines = _answer_quality(folder, heading)
    payload["warnings"] = [line.removeprefix("warning: ") for line in quality_lines if line.startswith("warning: ")]
    text.append("\n".join(quality_lines))
    files = [atomic_write_csv(out / "predictions.csv", report["predictions"]),
             atomic_write_csv(out / "calibration_report.csv", ece)]
    if transfer:
        text.append(f"## Item transfer\n{report['transfer_note']}")
    if report["transfer"] is not None:
        tr = report["transfer"].rename(columns={"dataset": "held_out"})
        text.append(format_table(tr))
        payload["transfer"] = json.loads(tr.to_json(orient="records"))
        files.append(atomic_write_csv(out / "transfer.csv", tr))
    if not args.no_plots:
        from rcp_jax.plots.diagnostics import plot_reliability

        pred = report["predictions"]
        files.append(plot_reliability(
            {"sigmoid(raw BT)": pred["p_raw"].to_numpy(), "2PL calibrated": pred["p_calibrated"].to_numpy()},
            pred["answer"].to_numpy(), out / "reliability.png", n_bins=args.bins,
            title=f"Rubric answers of {folder.resolve().name} ({n_answers} answers)"))
    files.append(atomic_write_json(out / "diagnose.json", payload))
    payload["files"] = [str(f) for f in files]
    text.append("written: " + ", ".join(str(f) for f in files))
    return payload, answers, bt


def _answer_quality(folder: Path, heading: str) -> tuple[list[dict], list[str]]:
    """(signals as dicts, report lines): whether the judge's answers follow the documents
    (:mod:`rcp_jax.answer_quality`), from the fit folder's window_scores.csv; the placeholder echo, which
    needs the answer texts, is taken from fit.json (what ``rcp-jax fit`` computed on the store)."""
    from rcp_jax.answer_quality import Signal, assess, warning_lines

    path = folder / "window_scores.csv"
    if not path.is_file():
        return [], [f"## Answer quality of the judge{heading}", f"not computed: no {path.name} in {folder} (run "
                    "`rcp-jax fit` again)"]
    signals = assess(read_table(path, "window scores"))
    fit_json = folder / "fit.json"
    try:
        stored = json.loads(fit_json.read_text(encoding="utf-8")).get("answer_quality") or []
    except (OSError, ValueError):
        stored = []
    echo = [d for d in stored if isinstance(d, dict) and d.get("name") == "echo"]
    try:
        signals = [s for s in signals if s.name != "echo"] + [Signal(**echo[0])] if echo else signals
    except TypeError:  # a fit.json of another version: the echo stays "not computed"
        pass
    lines = [f"## Answer quality of the judge{heading} (do the tournament answers follow the documents?)"]
    lines += [f"{'FAILED' if s.failed else ('ok' if s.decidable else 'n/a')} {s.name}: {s.message}" for s in signals]
    lines += [f"warning: {w}" for w in warning_lines(signals)]
    return [s.as_dict() for s in signals], lines

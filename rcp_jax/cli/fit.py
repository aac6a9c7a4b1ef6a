"""``rcp-jax fit``: BT + 2PL calibration from a judgement store (MAP, or a posterior by NUTS / SVI / Laplace)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.cli._common import emit
from rcp_jax.cli._paths import folder

NAME = "fit"
HELP = "fit Bradley-Terry and the 2PL calibration from a judgement store and write the calibration"
MODELS = ("frozen", "joint", "rubric-only")
METHODS = ("auto", "map", "nuts", "svi", "laplace", "block-laplace")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=folder, required=True, help="judgement store folder (from `rcp-jax judge`)")
    p.add_argument("--out", type=folder, required=True, help="output folder (calibration/, bt.csv, posterior/, ...)")
    p.add_argument("--family", default=None, help="judge model or family id to use when the store holds several")
    p.add_argument("--rubric", default=None, metavar="FILE",
                   help="the rubric file the store was judged with (as `rcp-jax judge --rubric`): checked against the "
                        "rubric the store records, and a store judged with another rubric is refused (default: the "
                        "store's own rubric names the criteria)")
    p.add_argument("--calibration-model", choices=MODELS, default=None, dest="calibration_model",
                   help="the statistical model of the calibration (not the LLM: that is judge's --model). "
                        "joint (the default with --method auto, nuts, svi, laplace or block-laplace): BT scores latent, "
                        "so tournament noise flows into the gains and their 90%% intervals cover the truth at about 90%% "
                        "on noisy tournaments; frozen (the default with --method map and with --judges): 2PL on the BT "
                        "scores taken as exact, whose intervals leave the tournament's noise out (too narrow on noisy "
                        "tournaments); rubric-only: 2PL on the rubric answers alone")
    p.add_argument("--model", choices=MODELS, default=None, dest="calibration_model", action=_DeprecatedModel,
                   help="deprecated spelling of --calibration-model (warned; to be removed: --model names the LLM "
                        "judge in `judge` and `doctor`)")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="how the calibration's uncertainty is fitted; every method also writes the MAP calibration "
                        "(calibration/). auto (default): a posterior, written to posterior/, by NUTS up to 2,000 "
                        "documents and above them block-laplace (svi for --calibration-model rubric-only), and says "
                        "which and why (with --judges: map, whose pooled fit has intervals from the Hessian); map: the point "
                        "fit only, no posterior, in seconds (frozen: the MAP; rubric-only: marginal ML); or a "
                        "posterior by nuts, svi (AutoNormal), laplace (AutoLaplaceApproximation, dense: small "
                        "collections) or block-laplace (joint model, any size: factored per query at the exact mode, "
                        "the items Gaussian, each query's block by HMC given them, checked against NUTS on 3 queries; "
                        "1,000 queries x 150 documents in under 10 minutes on 2 cores)")
    p.add_argument("--float64", action="store_true", help="fit the point calibration in double precision")
    p.add_argument("--warmup", type=int, default=1000,
                   help="NUTS warmup iterations per chain (default 1000: the per-query tau and alpha are correlated, and a diagonal mass matrix needs the longer adaptation for R-hat < 1.01)")
    p.add_argument("--draws", type=int, default=500,
                   help="posterior draws per chain (nuts) or from the fitted guide (svi/laplace); default 500")
    p.add_argument("--chains", type=int, default=4,
                   help="NUTS chains (default 4): one after another on CPU, vectorised on a GPU, in parallel "
                        "with --host-devices >= chains (before the command)")
    p.add_argument("--svi-steps", type=int, default=3000, help="optimisation steps of svi/laplace (default 3000)")
    p.add_argument("--seed", type=int, default=0, help="inference seed (nuts/svi/laplace; default 0)")
    p.add_argument("--keep-flagged", action="store_true",
                   help="also fit answers flagged in the store (e.g. a repeated answer planted in a document); "
                        "by default they are left out and listed as notes")
    from rcp_jax.cli._judges import add_fit_arguments

    add_fit_arguments(p)
    p.add_argument("--no-plots", action="store_true",
                   help="skip the figures (default: drawn): item_curves.png (item curves and the gain curve), "
                        "query_calibration.png (per-query tau and alpha) and, with a posterior, "
                        "item_curves_posterior.png (posterior bands)")


class _DeprecatedModel(argparse.Action):
    """``fit --model``: the old name of ``--calibration-model``, stored there and warned about."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)
        namespace.deprecated_model_option = True


DEPRECATED_MODEL_NOTE = ("fit's --model is deprecated and will be removed: write --calibration-model (--model names "
                         "the LLM judge in `rcp-jax judge`)")


def check_arguments(args) -> None:
    """Refuse combinations that have no meaning, before anything is read or fitted."""
    from rcp_jax.errors import DataError

    if args.calibration_model is None:
        args.calibration_model = "frozen" if args.method == "map" else "joint"
    if args.calibration_model == "joint" and args.method == "map":
        raise DataError(
            "--calibration-model joint has no point fit: the joint model exists to carry tournament noise into the "
            "gains, so leave --method out (auto: NUTS, or block-laplace on large collections) or pass --method nuts "
            "(or svi / laplace / block-laplace, its fast approximations); for a MAP use --calibration-model frozen"
        )
    for name in ("warmup", "draws", "chains", "svi_steps"):
        value = getattr(args, name)
        if value < (0 if name == "warmup" else 1):
            raise DataError(f"--{name.replace('_', '-')} must be {'>= 0' if name == 'warmup' else '>= 1'}, got {value}")


def run(args) -> int:
    import warnings

    from rcp_jax.calibration import calibrate, fit_rubric_only, save_calibration
    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json
    from rcp_jax.errors import DataError
    from rcp_jax.pipeline import FlaggedJudgementWarning, flag_notes, store_tables
    from rcp_jax.tournament import fit_bradley_terry

    if getattr(args, "deprecated_model_option", False):
        from rcp_jax.cli._common import stderr

        stderr(f"rcp-jax fit: warning: {DEPRECATED_MODEL_NOTE}")
    if args.judges:  # several judges pooled: rcp_jax.cli._judges
        from rcp_jax.cli._judges import run_fit

        return run_fit(args)
    check_arguments(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FlaggedJudgementWarning)  # listed below as notes, one per window
        try:
            window_scores, answers, families = store_tables(args.store, family=args.family,
                                                            keep_flagged=args.keep_flagged)
        except DataError as exc:
            raise _with_invalid_answers(exc, args.store) from None
    from rcp_jax.judges.roster import check_one_served_model

    # one judge's answers from two served models (an alias that moved) are two judges: refused, pool them instead
    served_notes = check_one_served_model(args.store, {s: f["family_id"] for s, f in families.items()},
                                          judge=args.family or "")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bt = fit_bradley_terry(window_scores, float64=args.float64)
        # The point calibration evaluate uses: the rubric-only fit for that model, else the frozen-BT MAP
        # (which also starts the joint model's chains).
        cal = fit_rubric_only(answers) if args.calibration_model == "rubric-only" else calibrate(bt, answers, float64=args.float64)
    cal.rubric = _store_rubric(args, families["rubric"], len(cal.criteria))
    notes = [str(w.message) for w in caught] + flag_notes(args.store, keep_flagged=args.keep_flagged)
    notes += _unanswered_notes(args.store) + served_notes
    notes += [DEPRECATED_MODEL_NOTE] if getattr(args, "deprecated_model_option", False) else []
    quality = _answer_quality(args.store, window_scores, families)
    atomic_write_csv(args.out / "window_scores.csv", window_scores)
    atomic_write_csv(args.out / "answers.csv", answers)
    atomic_write_csv(args.out / "bt.csv", bt)
    save_calibration(cal, args.out / "calibration")
    figures = {}
    if not args.no_plots:
        from rcp_jax.plots.report import write_calibration_plots

        figures = write_calibration_plots(cal, args.out)
    payload = {"calibration_model": args.calibration_model, "model": args.calibration_model, "method": args.method, "queries": int(cal.queries["calibrated"].sum()),
               "documents": int(cal.documents["gain"].notna().sum()), "criteria": cal.criteria,
               "criterion_names": cal.labels, "rubric": cal.rubric,
               "gamma": cal.gamma, "beta": cal.beta, "families": families, "notes": notes,
               "calibration": str(args.out / "calibration"), "figures": [str(f) for f in figures.values()],
               "answer_quality": [q.as_dict() for q in quality], "warnings": _quality_warnings(quality)}
    stale = args.out / "posterior"
    if args.method == "map" and (stale / "posterior.json").is_file():
        # an earlier fit's posterior would not match this calibration: evaluate --posterior and export would read it
        _remove_posterior(stale)
        notes.append(f"removed the posterior of an earlier fit ({stale}): it did not match this calibration; leave "
                     "--method out (auto) to fit a new one")
    if args.method != "map":
        from rcp_jax.bayes import posterior

        method = args.method.replace("-", "_")
        model = args.calibration_model.replace("-", "_")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post = posterior.fit_posterior(
                None if model == "rubric_only" else window_scores, answers, model=model, method=method,
                num_warmup=args.warmup, num_samples=args.draws, num_chains=args.chains, svi_steps=args.svi_steps,
                seed=args.seed, progress=not args.json,
            )
        notes += [str(w.message) for w in caught if str(w.message) not in notes]
        if model == "frozen":  # said on every frozen posterior, warned or not
            notes += [posterior.FROZEN_NOTE] if posterior.FROZEN_NOTE not in notes else []
        path = posterior.save_posterior(post, args.out / "posterior")
        payload["posterior"] = str(path)
        payload["diagnostics"] = posterior.diagnostics_summary(post)
        payload["items_posterior"] = post.items.to_dict(orient="records")
        payload["ci_prob"] = post.ci_prob
        payload["posterior_method"] = post.method
        if "auto" in post.settings:
            payload["auto"] = post.settings["auto"]
        if not args.no_plots:
            from rcp_jax.plots.bayes import plot_item_curves

            figure = args.out / "item_curves_posterior.png"
            plot_item_curves(post, path=figure, labels=cal.labels)
            payload["figure"] = str(figure)
    atomic_write_json(args.out / "fit.json", payload)
    lines = [
        f"fitted {payload['queries']} queries, {payload['documents']} documents ({args.calibration_model} model, {args.method})",
        _item_lines(cal),
        *[f"note: {n}" for n in notes],
        *[f"warning: {w}" for w in payload["warnings"]],
        f"calibration written to {args.out / 'calibration'}",
        *[f"figure: {f}" for f in payload["figures"]],
    ]
    if "posterior" in payload:
        lines[1:2] = _posterior_item_lines(payload["items_posterior"], payload["ci_prob"], dict(zip(cal.criteria, cal.labels)))
        d = payload["diagnostics"]
        if "auto" in payload:  # right under the first line: which method ran, why, and how to skip it
            lines.insert(1, auto_line(payload["auto"]))
        if payload["posterior_method"] == "block_laplace":
            lines.append(_block_laplace_line(d))
        if payload["posterior_method"] == "nuts":
            rhat = "n/a (R-hat needs two chains or more)" if d.get("max_rhat") is None else f"{d['max_rhat']:.3f}"
            ess = "n/a" if d.get("min_ess_bulk") is None else f"{d['min_ess_bulk']:.0f}"
            lines.append(f"NUTS: {d['num_chains']} chain{'s' if d['num_chains'] != 1 else ''} x {d['num_draws']} draws, "
                         f"{d['divergences']} divergences, max R-hat {rhat}, min bulk ESS {ess}")
        lines.append(f"posterior written to {payload['posterior']}")
        if "figure" in payload:
            lines.append(f"item curves with posterior bands: {payload['figure']}")
    emit(args, payload, "\n".join(lines))
    return 0


def _remove_posterior(folder: Path) -> None:
    """Delete a posterior folder written by ``save_posterior`` (its files only: anything else in it is kept)."""
    for name in ("posterior.json", "draws.npz"):
        (folder / name).unlink(missing_ok=True)
    for table in folder.glob("*.csv"):
        table.unlink()
    try:
        folder.rmdir()
    except OSError:
        pass  # a file of the user's own is left where it was


def auto_line(reason: str) -> str:
    """The one line that says what ``--method auto`` (the default) ran and why (``reason``: ``"<method>: why"``,
    from :func:`rcp_jax.bayes.large.choose_method`), and that ``--method map`` is the point fit alone."""
    return f"method auto chose {reason} (--method map: the point fit only, no posterior)"


def _block_laplace_line(d: dict) -> str:
    """One line on the block Laplace: its Newton solve, its exact block draws and its check against NUTS."""
    line = (f"block Laplace: {d['num_draws']} draws, Newton {'converged' if d.get('newton_converged') else 'NOT converged'} "
            f"in {d.get('newton_iterations')} steps")
    if d.get("exact_block_max_rhat") is not None:
        line += (f"; each query's block by HMC (largest R-hat {d['exact_block_max_rhat']:.3f}, lowest acceptance "
                 f"{d['exact_block_min_accept']:.2f})")
    if d.get("check_median_gap") is not None:
        line += (f"; against NUTS on {d['check_queries']} queries the gain intervals' ends differ by "
                 f"{100 * d['check_median_gap']:.0f}% of their width (median; 90th percentile "
                 f"{100 * d['check_p90_gap']:.0f}%)")
    return line


def _answer_quality(store: Path, window_scores, families: dict) -> list:
    """The answer-quality signals (:mod:`rcp_jax.answer_quality`) of the fitted answers: the window scores,
    and the raw texts of the valid answers of the fitted judge families (both stages) for the echo."""
    from rcp_jax.answer_quality import assess
    from rcp_jax.judging import read_judgements

    texts = [j.raw_response for stage in ("tournament", "rubric")
             for j in read_judgements(store, stage, valid_only=True)
             if j.family.family_id == families[stage]["family_id"]]
    return assess(window_scores, texts)


def _quality_warnings(quality: list) -> list[str]:
    """Warning lines for the failed answer-quality signals, with what they mean for the fit."""
    from rcp_jax.answer_quality import warning_lines

    lines = warning_lines(quality)
    if lines:
        lines.append("the calibration above rests on answers that do not follow the documents: check the judge "
                     "with `rcp-jax doctor` (same options) before trusting or evaluating with it")
    return lines


def _with_invalid_answers(exc: Exception, store: Path) -> Exception:
    """``exc`` with the store's invalid answers by category, an example and what to try, when it holds any."""
    from rcp_jax.judging.answers.verdict import summarise_store

    try:
        invalid = summarise_store(store, ("tournament", "rubric"))
    except Exception:  # noqa: BLE001 - a damaged store: its own message is the one to show
        return exc
    if not invalid.invalid:
        return exc
    lines = [str(exc), f"invalid answers in the store: {invalid.describe()}",
             *[f"  {a}" for a in invalid.advice()],
             f"re-run `rcp-jax judge --store {store}` (with the fixes above) to ask those windows again"]
    return type(exc)("\n".join(lines))


def _unanswered_notes(store: Path) -> list[str]:
    """A note when windows of the store still have no valid answer (they are left out of the fit)."""
    from rcp_jax.judging.answers.verdict import summarise_store

    try:
        invalid = summarise_store(store, ("tournament", "rubric"))
    except Exception:  # noqa: BLE001 - store_tables has read it already; nothing more to say
        return []
    if not invalid.windows_without_valid:
        return []
    return [f"{invalid.windows_without_valid} window(s) have no valid answer and are left out of this fit "
            f"({invalid.invalid} invalid answers: {invalid.categories_text()}); re-run `rcp-jax judge --store "
            f"{store}` to ask them again"]


def _store_rubric(args, family: dict, k: int) -> dict | None:
    """The rubric of the store's rubric answers (its summary), checked against ``--rubric`` when given.

    Raises :class:`rcp_jax.judging.prompts.rubric.RubricError` (exit 2) when ``--rubric`` names another rubric than the store's,
    or one with another number of criteria than the answers have."""
    from rcp_jax.judging.prompts.rubric import RubricError, check_rubric_matches, family_rubric, load_rubric

    recorded = family_rubric(family)
    if args.rubric is None:
        return recorded
    given = load_rubric(args.rubric)
    check_rubric_matches(recorded, given, what=f"judgement store {args.store}",
                         fix="Pass the rubric file the store was judged with, or leave --rubric out: fit reads the "
                             "rubric from the store.")
    if given.k != k:
        raise RubricError(f"{given.describe()} has {given.k} criteria but the answers in judgement store {args.store} "
                          f"have {k} (C1..C{k}): pass the rubric file the store was judged with, or leave --rubric out")
    return recorded or given.summary()


def _item_lines(cal) -> str:
    """One line per criterion: its name (``C<k> name`` when the rubric names it), gamma and beta."""
    named = cal.labels != list(cal.criteria)
    width = max(len(c) + (len(n) + 1 if named else 0) for c, n in zip(cal.criteria, cal.labels))
    rows = [f"  {(f'{c} {n}' if named else c):<{width}}  gamma {g:.3f}  beta {b:+.3f}"
            for c, n, g, b in zip(cal.criteria, cal.labels, cal.gamma, cal.beta)]
    return "\n".join(["criteria" + (f" (rubric {cal.rubric['name']!r})" if cal.rubric else "") + ":", *rows])


def _posterior_item_lines(items: list[dict], ci_prob: float, labels: dict | None = None) -> list[str]:
    """One line per criterion: posterior mean and interval of gamma and beta (``labels``: code -> name)."""
    lines = [f"posterior mean [{round(100 * ci_prob)}% interval] of each criterion:"]
    for r in items:
        name = (labels or {}).get(r["criterion"], r["criterion"])
        shown = r["criterion"] if name == r["criterion"] else f"{r['criterion']} {name}"
        lines.append(f"  {shown}: gamma {r['gamma_mean']:.3f} [{r['gamma_lo']:.3f}, {r['gamma_hi']:.3f}]"
                     f"  beta {r['beta_mean']:+.3f} [{r['beta_lo']:+.3f}, {r['beta_hi']:+.3f}]")
    return lines

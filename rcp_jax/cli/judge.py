"""``rcp-jax judge``: run Stage A (tournament) and Stage B (rubric) for a collection into a store."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rcp_jax.cli._common import (
    add_collection_args, add_judge_args, collection_name, emit, latent_from_qrels, load_collection, make_judge, pipeline_input, stderr,
)
from rcp_jax.cli._paths import folder

NAME = "judge"
HELP = "judge a collection's pools (tournament + rubric) into an append-only, resumable store"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_collection_args(p)
    add_judge_args(p)
    p.add_argument("--store", type=folder, default=Path("rcp_runs/store"), help="judgement store folder (resumable; default rcp_runs/store)")
    p.add_argument("--out", type=folder, default=None, help="also write window_scores.csv, answers.csv, bt.csv here")
    p.add_argument("--estimate", action="store_true", help="print planned calls, tokens and cost; call nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    from rcp_jax.cli._budget import add_budget_options

    add_budget_options(p)
    from rcp_jax.cli._batch import add_batch_options

    add_batch_options(p)


def _estimate(args, collection, judge) -> int:
    import warnings

    from rcp_jax import schedule as S
    from rcp_jax.cli._batch import batch_phases
    from rcp_jax.judging import estimate_cost

    planned = {"tournament": 0, "rubric": 0}
    sample = []
    all_counts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        for q, docs in sorted(collection.pools.items()):
            counts = S.schedule_counts(len(docs))
            all_counts.append(counts)
            planned["tournament"] += counts.tournament_calls
            planned["rubric"] += counts.rubric_windows
            sample += S.tournament_round1(q, docs, seed=args.seed, dataset=collection.dataset)
            sample += S.rubric_balanced(q, docs, seed=args.seed, dataset=collection.dataset)
    est = estimate_cost(sample, judge=judge, documents=collection.documents, queries=collection.queries)
    tokens_in = tokens_out = 0
    per_stage = {}
    for stage, calls in planned.items():
        s = est.per_stage.get(stage, {"calls": 1, "input_tokens": 0, "output_tokens": 0})
        per_call_in = s["input_tokens"] / max(s["calls"], 1)
        per_call_out = s["output_tokens"] / max(s["calls"], 1)
        per_stage[stage] = {"calls": calls, "input_tokens": round(per_call_in * calls), "output_tokens": round(per_call_out * calls)}
        tokens_in += per_stage[stage]["input_tokens"]
        tokens_out += per_stage[stage]["output_tokens"]
    cost = judge.price(tokens_in, tokens_out)
    rates = getattr(judge, "batch_rates", lambda: None)()
    batch_cost = None if rates is None else tokens_in * rates[0] + tokens_out * rates[1]
    calls = sum(planned.values())
    phases = batch_phases(all_counts)
    payload = {"calls": calls, "input_tokens": tokens_in, "output_tokens": tokens_out, "cost_usd": cost,
               "batch_cost_usd": batch_cost, "per_stage": per_stage, "token_method": est.token_method,
               "queries": len(collection.pools), "model": args.model,
               "sequential_batches": len(phases), "batch_phases": [{"phase": n, "calls": c} for n, c in phases],
               "notes": list(est.notes) + ["adaptive round-3 counts are upper bounds"]}
    cost_text = "unknown (no price for this model)" if cost is None else f"${cost:,.2f}"
    costs = f"cost {cost_text}" + ("" if batch_cost is None else f" online, ${batch_cost:,.2f} at batch prices")
    lines = [f"plan for {len(collection.pools)} queries with {args.model}: {calls:,} calls "
             f"({planned['tournament']:,} tournament + {planned['rubric']:,} rubric)",
             f"tokens: {tokens_in:,} input + {tokens_out:,} output ({est.token_method}); {costs}"]
    if getattr(args, "batch", False):
        if batch_cost is None:
            payload["notes"].append(
                f"no batch price for {args.model} in litellm's cost map (input_cost_per_token_batches, "
                "output_cost_per_token_batches)" + (": the cost above is at online prices; providers' batch APIs "
                                                    "typically charge half" if cost is not None else ""))
        lines.append(f"as batches: {len(phases)} sequential batches, each across all queries ("
                     + ", ".join(f"{n} {c:,}" for n, c in phases) + "), plus one more after each phase whose "
                     "answers come back invalid (its re-asks; at most --max-attempts - 1 per phase); each waits for "
                     "the batch before it (OpenAI and Anthropic promise each batch within 24 h, most finish sooner)")
    lines += [*[f"note: {n}" for n in payload["notes"]], "nothing was called (--estimate)"]
    emit(args, payload, "\n".join(lines))
    return 0


def run(args) -> int:
    from rcp_jax.data.atomic import atomic_write_csv
    from rcp_jax.judging.answers.verdict import summarise_store
    from rcp_jax.pipeline import flag_notes, judge_collection_sync

    col, pools = load_collection(args)
    name = collection_name(args)
    collection = pipeline_input(col, pools, name)
    latent = latent_from_qrels(collection.pools, collection.qrels, args.seed) if args.model == "simulated" else None
    judge = make_judge(args, latent)
    _check_images(args, col, collection, judge)
    if args.estimate:
        return _estimate(args, collection, judge)
    quiet = args.quiet or args.json
    from rcp_jax.cli._batch import batch_backend, sequential_batches

    batches = batch_backend(args, judge)
    n_batches, batch_line = sequential_batches(collection.pools) if batches is not None else (0, "")
    if batches is not None and args.budget is not None:
        n_batches, batch_line = 0, ("batch mode, budgeted: the seed and then each round (--round-calls; default 15% of "
                                    "the full protocol's calls) are each one batch across all queries; the rounds stop "
                                    "when the pairs are decided or the budget is spent")
    for note in getattr(args, "judge_notes", []) + _context_notes(args, collection, judge) + ([batch_line] if batch_line else []):
        stderr(f"note: {note}")
    if args.budget is not None or args.runs:
        from rcp_jax.cli._budget import run_budgeted

        try:
            return run_budgeted(args, collection, judge, quiet, batches=batches)
        except Exception as exc:
            return _pending(args, exc, n_batches)
    started = time.perf_counter()
    try:
        window_scores, answers, bt, calls = judge_collection_sync(
            collection, judge=judge, store=args.store, seed=args.seed, concurrency=args.concurrency,
            progress=not quiet, log=None if quiet else stderr, dataset_from_store=args.name is None,
            batches=batches, batch_poll=args.batch_poll, batch_wait=args.batch_wait,
        )
    except Exception as exc:
        return _pending(args, exc, n_batches)
    if args.out:
        atomic_write_csv(args.out / "window_scores.csv", window_scores)
        atomic_write_csv(args.out / "answers.csv", answers)
        atomic_write_csv(args.out / "bt.csv", bt)
    notes = flag_notes(args.store)
    invalid = summarise_store(args.store, ("tournament", "rubric"))
    usage, usage_line = run_usage(judge, time.perf_counter() - started)
    judge_name = str(getattr(judge, "model", None) or args.model)  # --simulated-name for a named simulated judge
    payload = {"calls": calls, "tournament_windows": window_count(window_scores),
               "rubric_windows": window_count(answers), "rubric_placements": len(answers), **usage,
               "store": str(args.store), "model": judge_name, "notes": notes, "invalid_answers": invalid.to_dict()}
    if batches is not None:
        payload["sequential_batches"] = n_batches
    lines = [f"judged {len(collection.pools)} queries with {judge_name}: {calls} calls this run; "
             f"store {args.store} (run the same command again to resume; next: rcp-jax fit --store {args.store})",
             usage_line]
    from rcp_jax.cli._endpoints import endpoint_summary

    payload["endpoints"], endpoint_lines = endpoint_summary(judge)
    lines += endpoint_lines
    payload["served_models"], served_lines = served_summary(args.store)
    lines += served_lines
    if invalid.invalid:
        lines += [f"invalid answers in the store (kept for audit; their windows were re-asked): {invalid.describe()}",
                  *[f"  {a}" for a in invalid.advice()]]
    emit(args, payload, "\n".join([*lines, *[f"note: {n}" for n in notes]]))
    return 0


def _pending(args, exc: BaseException, n_batches: int) -> int:
    """Exit 0 with what to run when ``--batch-wait`` stopped while a batch waits (the same command resumes); any other
    exception re-raised, with the store's invalid answers summarised where windows have none valid."""
    from rcp_jax.judging import BatchPending

    if isinstance(exc, BatchPending):
        payload = {"pending": True, "message": str(exc), "command": exc.command or None, "store": str(args.store),
                   "sequential_batches": n_batches}
        emit(args, payload, str(exc) + (f"\n{exc.command}" if exc.command else ""))
        return 0
    raise _with_invalid_summary(exc, args.store) from None


def window_count(table) -> int:
    """Distinct windows of a ``query_id, window_id, ...`` table: a window id (``round1#0``) names a window
    within its query, so every query has one of that name."""
    if table is None or len(table) == 0:
        return 0
    return int(table[["query_id", "window_id"]].drop_duplicates().shape[0])


def run_usage(judge, seconds: float) -> tuple[dict, str]:
    """This run's tokens (the judge's ledger: what the endpoint reported for each answered call), the prompt tokens
    read from the provider's prompt cache, the cost (cached tokens at the cached-input rate; ``None`` when no call
    was priced) and wall time, as payload fields and one summary line."""
    ledger = getattr(judge, "ledger", None)
    prompt = int(getattr(ledger, "prompt_tokens", 0) or 0)
    completion = int(getattr(ledger, "completion_tokens", 0) or 0)
    cached = int(getattr(ledger, "cached_tokens", 0) or 0)
    calls = int(getattr(ledger, "calls", 0) or 0)
    unpriced = int(getattr(ledger, "unpriced_calls", 0) or 0)
    cost = float(getattr(ledger, "cost_usd", 0.0) or 0.0) if calls > unpriced else None
    payload = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached, "cost_usd": cost,
               "wall_seconds": round(float(seconds), 2)}
    minutes, secs = divmod(float(seconds), 60.0)
    wall = f"{int(minutes)} min {secs:.0f} s" if minutes >= 1 else f"{secs:.1f} s"
    cache = f" ({cached:,} of them from the provider's prompt cache)" if cached else ""
    line = f"tokens this run: {prompt:,} prompt{cache} + {completion:,} completion; wall time {wall}"
    if ledger is not None and calls and not (prompt or completion):
        line += " (the endpoint reported no token usage)"
    if cost:  # a second line, only for priced calls (self-hosted and simulated judges cost nothing)
        line += (f"\ncost this run: ${cost:,.4f}" + (" (cached prompt tokens at the model's cached-input rate)"
                                                     if cached else "")
                 + (f"; {unpriced} call(s) of unknown price not included" if unpriced else ""))
    return payload, line


def served_summary(store) -> tuple[list[dict], list[str]]:
    """Per judge family of the store whose answers came from more than one served model or system fingerprint:
    its counts (payload rows) and the lines saying so (``rcp-jax fit`` refuses several served models)."""
    from rcp_jax.judging import read_judgements
    from rcp_jax.judging.store.provenance import serving

    rows, lines = [], []
    for f in serving(j for stage in ("tournament", "rubric") for j in read_judgements(store, stage, valid_only=True)):
        if not f.changed:
            continue
        rows.append({"stage": f.stage, "family_id": f.family_id, "model": f.model,
                     "served": [{"model": k, "answers": n, "first_seen": f.first_seen.get(k, "")}
                                for k, n in f.served.items()],
                     "fingerprints": [{"system_fingerprint": k, "answers": n} for k, n in f.fingerprints.items()]})
        lines.append(f"warning: {f.describe()}")
        if len(f.served_models) > 1:
            lines.append("  the model behind this model string changed inside the store: `rcp-jax fit` refuses to fit "
                         "it as one judge; re-judge with a pinned (dated) model into a fresh store, or pool the served "
                         "models as several judges (`rcp-jax fit --judges`, names model~served)")
    return rows, lines


def _check_images(args, col, collection, judge) -> None:
    """Every pooled page image decodes, and no window would hide a page-only document (before any call)."""
    from rcp_jax import schedule as S
    from rcp_jax.cli._image_options import check_page_images
    from rcp_jax.judging.prompts.pages import ImageLimits

    if "image" in col.corpus.columns:
        check_page_images(col.corpus, collection.documents, collection.pools,
                          getattr(judge, "image_limits", None) or ImageLimits(), S.DEFAULT_CONFIG.w)


def _context_notes(args, collection, judge) -> list[str]:
    """A warning when a round-1 or rubric window cannot fit the context the server reports (never raises)."""
    import warnings

    from rcp_jax import schedule as S
    from rcp_jax.cli._judge_options import context_notes

    info = getattr(args, "server_info", None)
    if info is None or info.context is None:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            windows = [w for q, docs in sorted(collection.pools.items())
                       for w in (S.tournament_round1(q, docs, seed=args.seed, dataset=collection.dataset)
                                 + S.rubric_balanced(q, docs, seed=args.seed, dataset=collection.dataset))]
    except Exception:  # noqa: BLE001 - the warning must never block the run
        return []
    return context_notes(judge, windows, collection.documents, collection.queries, info, args.max_tokens)


def _with_invalid_summary(exc: BaseException, store) -> BaseException:
    """``exc``, or for windows left without a valid answer an :class:`judging.InvalidAnswersError` whose message
    adds the store's invalid answers by category, one example and what to try."""
    from rcp_jax.errors import DataError
    from rcp_jax.judging import InvalidAnswersError
    from rcp_jax.judging.answers.verdict import summarise_store

    if isinstance(exc, InvalidAnswersError) and exc.summary is not None:
        return exc  # the early-stop verdict says it all already
    if not (isinstance(exc, InvalidAnswersError) or (isinstance(exc, DataError) and "no valid answer" in str(exc))):
        return exc
    try:
        invalid = summarise_store(store, ("tournament", "rubric"))
    except Exception:  # noqa: BLE001 - a damaged store: the original message is the one to show
        return exc
    if not invalid.invalid:
        return exc
    lines = [str(exc), invalid.describe(), *[f"  {a}" for a in invalid.advice()]]
    return InvalidAnswersError("\n".join(lines), invalid)

"""The batch options of ``rcp-jax judge`` (``--batch``, ``--batch-files``, ``--batch-poll``, ``--batch-wait``), the
backend they build, and the plain statement of how many sequential batches the protocol needs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rcp_jax.errors import DataError


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def add_batch_options(p: argparse.ArgumentParser) -> None:
    """The batch argument group (every option states its default)."""
    g = p.add_argument_group("batch judging", "each protocol phase as one batch across all queries, at batch prices "
                                              "or on your own cluster (README: Batch judging)")
    how = g.add_mutually_exclusive_group()
    how.add_argument("--batch", action="store_true",
                     help="judge through the provider's batch API (OpenAI-compatible Files + Batches, via litellm) of "
                          "--model / --api-base, about half the online price; each phase waits for its batch (up to "
                          "24 h); a killed run resumes the same batches, never submitting twice (default: online calls)")
    how.add_argument("--batch-files", type=Path, default=None, metavar="DIR",
                     help="offline batches: write each phase's requests to DIR/<phase>.requests.jsonl and wait for "
                          "DIR/<phase>.output.jsonl, as `vllm run-batch` writes it (complete when every request has a "
                          "line, or DIR/<phase>.done exists) (default: none)")
    g.add_argument("--batch-poll", type=_seconds, default=30.0, metavar="SECONDS",
                   help="seconds between two looks at a batch in flight (default 30)")
    g.add_argument("--batch-wait", type=_seconds, default=None, metavar="SECONDS",
                   help="longest wait for one batch; then the command stops, and running it again resumes. 0: write "
                        "the batch, print what to run (the vllm run-batch command) and stop (default: no limit)")


def batch_backend(args, judge):
    """The :class:`rcp_jax.judging.BatchBackend` of ``--batch`` / ``--batch-files`` (``None`` for online calls)."""
    if not (getattr(args, "batch", False) or getattr(args, "batch_files", None)):
        return None
    from rcp_jax.judging import FileBatches, ProviderBatches

    if not callable(getattr(judge, "request_body", None)):
        raise DataError(f"--batch / --batch-files need a litellm judge (--model openai/<name>, hosted_vllm/<name>, "
                        f"...); --model {args.model} has no request bodies to batch")
    if args.batch_files is not None:
        if args.batch_files.exists() and not args.batch_files.is_dir():
            raise DataError(f"--batch-files {args.batch_files}: an existing file, not a folder; give a folder")
        return FileBatches(args.batch_files, model=judge.provider_model()[0])
    try:
        return ProviderBatches.for_judge(judge)
    except Exception as exc:  # noqa: BLE001 - several endpoints: one message for the command line
        raise DataError(f"--batch: {exc}") from None


def batch_phases(counts) -> list[tuple[str, int]]:
    """The protocol's sequential phases when each is one batch across all queries, with its calls: round 1 and
    round 2 (mirrored copies included), each adaptive round-3 step (an upper bound: a step stops early when no
    boundary has value), the balanced and the stratified rubric halves. ``counts``: one
    :class:`rcp_jax.schedule.ScheduleCounts` per query. Phases no query needs are left out."""
    counts = list(counts)
    mirror = [2 if c.mirror else 1 for c in counts]
    steps = max((len(c.round3_batches) for c in counts), default=0)
    phases = [("round1", sum(m * c.round1 for m, c in zip(mirror, counts))),
              ("round2", sum(m * c.round2 for m, c in zip(mirror, counts)))]
    phases += [(f"round3_b{k + 1}", sum(c.round3_batches[k] for c in counts if k < len(c.round3_batches)))
               for k in range(steps)]
    phases += [("rubric_balanced", sum(c.rubric_balanced for c in counts)),
               ("rubric_stratified", sum(c.rubric_stratified for c in counts))]
    return [(name, n) for name, n in phases if n > 0]


def sequential_batches(pools) -> tuple[int, str]:
    """How many batches the fixed protocol asks one after another for ``pools`` ({query: docs}), and a line
    saying so (:func:`batch_phases`); re-asks of invalid or missing answers add one batch each round they are
    needed."""
    import warnings

    from rcp_jax import schedule as S

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        phases = batch_phases(S.schedule_counts(len(d)) for d in pools.values())
    steps = sum(name.startswith("round3") for name, _ in phases)
    n = len(phases)
    line = (f"batch mode: the protocol asks {n} batches one after another (round 1, round 2, {steps} adaptive round-3 "
            f"step{'s' if steps != 1 else ''}, the 2 rubric halves), each across all queries, plus one more in a phase "
            "for each round of re-asks; each waits for its batch (providers promise 24 h, most finish far sooner)")
    return n, line

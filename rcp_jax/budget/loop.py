"""The budgeted judging loop: a seed, then rounds of (batched refit -> decisions -> windows by value -> judge).

Every answer goes through :func:`rcp_jax.judging.judge_windows` into the append-only store, so the loop is
resumable exactly like the fixed protocol: its choices are a pure function of (seed, dataset, pools,
runs, settings, earlier answers), so a second run of the same command replays the rounds from the store
(no call) and continues where the first stopped; a run with a larger budget continues after the last
round (see :mod:`rcp_jax.budget.select` for why a cut round is a prefix of the full one); and the fixed
protocol run later into the same store reuses the seed's round-1 and balanced-rubric windows, which are
the fixed schedule's own.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rcp_jax import schedule as S
from rcp_jax.budget.decisions import PairDecisions, decide_pairs, pair_gradients, run_weights
from rcp_jax.budget.gains import GainPosterior, gain_posterior
from rcp_jax.budget.select import document_values, pair_weights, plan_round
from rcp_jax.calibration import Calibration, calibrate
from rcp_jax.errors import DataError
from rcp_jax.evaluation import validate_run
from rcp_jax.judging import judge_windows
from rcp_jax.judging.errors import InvalidAnswersError
from rcp_jax.judging.store.jsonl import JudgementStore
from rcp_jax.judging.store.records import Judgement, Window
from rcp_jax.tournament import fit_bradley_terry

if TYPE_CHECKING:  # the pipeline is a leaf (ARCHITECTURE.md): only its input's shape is used here
    from rcp_jax.pipeline import PipelineInput

#: Round size of online budgeted judging, as a share of the full protocol's calls.
ROUND_SHARE = 0.05
#: Round size when each round is a batch (``batches=``): fewer, larger rounds, since each waits for its batch. On the
#: simulator rounds of 15% made the same decisions as rounds of 5% at equal calls in a third of the sequential rounds
#: (benchmarks/budgeted.py --batch-round-fraction; figures in benchmarks/RESULTS.md).
BATCH_ROUND_SHARE = 0.15

#: Why a budgeted run stopped.
STOP_REASONS = {
    "decided": "every system pair is decided",
    "out_of_reach": "every undecided pair is out of reach of more judging (query sampling alone leaves it undecided)",
    "budget": "the budget is spent",
    "nothing_left": "no window has value left",
    "max_rounds": "the round limit is reached",
}


@dataclass(frozen=True)
class BudgetSettings:
    """How a budgeted run chooses, refits and stops (defaults in parentheses).

    Attributes:
        round_calls: windows per round (None: :data:`ROUND_SHARE`, 5%, of the full protocol's calls, or
            :data:`BATCH_ROUND_SHARE`, 15%, when judging with batches; at least one per query). It
            never depends on the budget, so a run continued with more budget replays the same rounds.
        seed_placements: tournament placements per document in the seed, from the fixed round 1's
            un-mirrored windows (2.0).
        seed_rubric: balanced rubric windows per query in the seed (5).
        explore: least-shown documents in every adaptive window (2).
        k, protocol: the metric (RCP-nDCG@10, ``plain``).
        rope, decision_prob: the decision rule (:func:`rcp_jax.bayes.posterior_ndcg.decide`; 0.02, 0.95).
        n_draws, n_bootstrap: gain draws and query resamples per round (128, 1000).
        strategy: ``posterior`` (the criterion of :mod:`rcp_jax.budget.select`) or ``random`` (the baseline).
        stop_when_decided: stop once no pair is open (True); False runs to the budget (benchmarks).
        max_rounds: a safety limit on rounds (200).
    """

    round_calls: int | None = None
    seed_placements: float = 2.0
    seed_rubric: int = 5
    explore: int = 2
    k: int = 10
    protocol: str = "plain"
    rope: float = 0.02
    decision_prob: float = 0.95
    n_draws: int = 128
    n_bootstrap: int = 1000
    strategy: str = "posterior"
    stop_when_decided: bool = True
    max_rounds: int = 200

    def __post_init__(self) -> None:
        if self.strategy not in ("posterior", "random"):
            raise DataError(f"strategy must be 'posterior' or 'random', got {self.strategy!r}")
        if self.round_calls is not None and self.round_calls < 1:
            raise DataError(f"round calls must be >= 1, got {self.round_calls}")
        if self.seed_placements <= 0 or self.seed_rubric < 1 or self.explore < 0:
            raise DataError("seed placements must be > 0, seed rubric windows >= 1 and explore slots >= 0")


@dataclass
class RoundReport:
    """One round: ``calls`` windows in the plan so far (asked now or found in the store; of ``budget``, and of
    the full protocol's ``full``), ``paid`` calls made by this run so far, the decisions after the round's refit, and the loop's own seconds
    (``overhead_s`` wall and ``overhead_cpu_s`` process CPU: refits, decisions and selection) against the
    judge's (``judge_s``, the wall time of the round's judging)."""

    round: int
    calls: int
    paid: int
    decisions: PairDecisions
    overhead_s: float
    judge_s: float
    windows: int = 0
    overhead_cpu_s: float = 0.0
    budget: int = 0
    full: int = 0

    def row(self) -> dict:
        p = self.decisions.pairs
        return {"round": self.round, "calls": self.calls, "paid": self.paid, "windows": self.windows,
                "pairs": len(p), "decided": self.decisions.n_decided, "open": self.decisions.n_open,
                "out_of_reach": self.decisions.n_out_of_reach,
                **{c: int((p["call"] == c).sum()) for c in ("A>B", "B>A", "equivalent", "undecided")},
                "overhead_s": self.overhead_s, "overhead_cpu_s": self.overhead_cpu_s, "judge_s": self.judge_s}


@dataclass
class BudgetResult:
    """What a budgeted run produced.

    Attributes:
        window_scores, answers, bt, calibration: the tables and fits of every valid answer the run used.
        posterior: the last round's :class:`rcp_jax.budget.gains.GainPosterior`.
        decisions: the last round's :class:`rcp_jax.budget.decisions.PairDecisions` (``systems``: the
            leaderboard with 90% intervals; ``pairs``: every pair's call).
        rounds: one :class:`RoundReport` per round (round 0 is the seed).
        stop_reason: a key of :data:`STOP_REASONS`. budget_calls, full_calls: the budget and the full
            protocol's calls for the same queries. calls: windows in the plan. paid: calls made by this run.
        notes: what the caller should know (queries left out, ...).
    """

    window_scores: pd.DataFrame
    answers: pd.DataFrame
    bt: pd.DataFrame
    calibration: Calibration
    posterior: GainPosterior
    decisions: PairDecisions
    rounds: list[RoundReport]
    stop_reason: str
    budget_calls: int
    full_calls: int
    calls: int
    paid: int
    notes: list[str] = field(default_factory=list)

    def history(self) -> pd.DataFrame:
        """One row per round: calls, paid, pairs decided / open / by call, overhead_s, judge_s."""
        return pd.DataFrame([r.row() for r in self.rounds])


def full_protocol_calls(pools: Mapping[str, list], config: S.ScheduleConfig = S.DEFAULT_CONFIG) -> int:
    """Judge calls of the fixed protocol (tournament + rubric) for ``pools``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        return sum(c.tournament_calls + c.rubric_windows for c in (S.schedule_counts(len(d), config) for d in pools.values()))


def resolve_budget(budget: int | float | str, full_calls: int) -> int:
    """Calls allowed: an integer count, or a fraction in (0, 1] (``0.4``, ``"40%"``) of ``full_calls``."""
    text = str(budget).strip()
    try:
        if text.endswith("%"):
            frac = float(text[:-1]) / 100.0
        elif isinstance(budget, float) or "." in text:
            frac = float(text)
        else:
            calls = int(text)
            if calls < 1:
                raise ValueError
            return calls
    except ValueError:
        raise DataError(f"--budget must be a number of calls (e.g. 5000) or a fraction of the full protocol's "
                        f"{full_calls} calls (e.g. 0.4 or 40%), got {text!r}") from None
    if not 0 < frac <= 1:
        raise DataError(f"--budget fraction must lie in (0, 1] (of the full protocol's {full_calls} calls), got {text}")
    return max(1, int(math.floor(frac * full_calls)))


def seed_windows(pools: Mapping[str, list], *, seed: int, dataset: str, config: S.ScheduleConfig,
                 placements: float, rubric: int) -> tuple[list[Window], dict[str, list[Window]]]:
    """(seed windows, query -> its balanced rubric windows not in the seed).

    The seed is, per query, the first ``ceil(placements * n / k)`` un-mirrored round-1 windows (the fixed
    schedule's own, so every document is shown about ``placements`` times) and its first ``rubric``
    balanced rubric windows.
    """
    out: list[Window] = []
    rest: dict[str, list[Window]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        for q, docs in pools.items():
            counts = S.schedule_counts(len(docs), config)
            r1 = [w for w in S.tournament_round1(q, docs, seed=seed, dataset=dataset, config=config) if not S.is_reversed(w)]
            m = min(len(r1), math.ceil(placements * len(docs) / max(counts.window_size, 1)))
            rb = S.rubric_balanced(q, docs, seed=seed, dataset=dataset, config=config)
            out += r1[:m] + rb[:rubric]
            rest[q] = rb[rubric:]
    return out, rest


def _tables(judgements: list[Judgement], keep_flagged: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(window scores ``query_id, window_id, doc_id, score``, answers ``query_id, window_id, doc_id, C1..CK``) of
    the valid, unflagged (unless ``keep_flagged``) judgements, window ids ``phase#sequence`` as the fixed
    pipeline's tables (one schedule per store: the store identity is checked before the first call)."""
    scores, answers = [], []
    for j in judgements:
        if not j.valid or (j.flags and not keep_flagged):
            continue
        wid = f"{j.window.phase}#{j.window.sequence}"
        if j.scores is not None:
            scores += [(j.window.query_id, wid, d, float(j.scores[d])) for d in j.window.doc_ids]
        elif j.criteria is not None:
            answers += [(j.window.query_id, wid, d, *j.criteria[d]) for d in j.window.doc_ids]
    k = len(answers[0]) - 3 if answers else 5
    return (pd.DataFrame(scores, columns=["query_id", "window_id", "doc_id", "score"]),
            pd.DataFrame(answers, columns=["query_id", "window_id", "doc_id", *[f"C{i}" for i in range(1, k + 1)]]))


async def _ask(windows: list[Window], common: dict, store: JudgementStore, *, phase: str,
               batching: dict | None = None) -> tuple[list[Judgement], int]:
    """Judge one round's ``windows`` online, or as one batch named ``phase`` when ``batching`` holds a backend."""
    calls = {"n": 0}

    def progress(p) -> None:
        calls["n"] = p.calls

    if batching is not None and batching.get("batches") is not None:
        from rcp_jax.judging.batch.runner import judge_windows_batch

        online_only = {k: v for k, v in common.items() if k != "concurrency"}
        got = await judge_windows_batch(windows, progress=progress, batches=batching["batches"], phase=phase,
                                        poll_seconds=batching.get("batch_poll", 30.0),
                                        wait_seconds=batching.get("batch_wait"), **online_only)
    else:
        got = await judge_windows(windows, progress=progress, **common)
    have = {j.window for j in got}
    missing = [w for w in windows if w not in have]
    if missing:
        shown = ", ".join(w.label for w in missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise InvalidAnswersError(
            f"{len(missing)} window(s) still have no valid answer after their attempts ({shown}); their invalid "
            f"answers are stored in {store.folder}. Run the same command again to ask only those windows"
        )
    return got, calls["n"]


def _add_placements(placed: np.ndarray, judgements: list[Judgement], position: dict) -> None:
    """Add the tournament placements of ``judgements`` to ``placed`` float[Q, N] (``position``: (query,
    doc) -> (row, column))."""
    for j in judgements:
        if j.window.stage == "tournament":
            for d in j.window.doc_ids:
                placed[position[(j.window.query_id, d)]] += 1.0


async def judge_budgeted_async(
    collection: "PipelineInput",
    runs: pd.DataFrame,
    *,
    judge,
    store: str | Path | JudgementStore,
    budget: int | float | str,
    seed: int = 0,
    config: S.ScheduleConfig = S.DEFAULT_CONFIG,
    settings: BudgetSettings | None = None,
    concurrency: int = 16,
    on_round: Callable[[RoundReport, BudgetResult | None], None] | None = None,
    log: Callable[[str], None] | None = None,
    keep_flagged: bool = False,
    dataset_from_store: bool = False,
    batches=None,
    batch_poll: float = 30.0,
    batch_wait: float | None = None,
) -> BudgetResult:
    """Judge ``collection`` under a budget, steered by the system-pair decisions of ``runs`` (async).

    Args:
        collection: queries, documents, pools. runs: ``system, query_id, doc_id, score`` of the systems to
            compare (their top-k decides which gains matter).
        judge, store, seed, config, concurrency, keep_flagged, dataset_from_store: as
            :func:`rcp_jax.pipeline.judge_collection` (same store identity: the fixed protocol can continue).
        budget: calls (int), or a fraction of the full protocol's calls (``0.4`` or ``"40%"``).
        settings: :class:`BudgetSettings`.
        on_round: called after each round's refit with its :class:`RoundReport` (the CLI prints it).
        batches, batch_poll, batch_wait: a :class:`rcp_jax.judging.BatchBackend`: the seed and every round are
            each asked as one batch across all queries (as :func:`rcp_jax.pipeline.judge_collection`), and rounds
            default to :data:`BATCH_ROUND_SHARE` of the full protocol's calls (fewer, larger rounds: each one waits
            for its batch). ``None``: online calls.

    Returns:
        :class:`BudgetResult`.

    Raises:
        DataError: no pooled query is ranked by every system, or the budget is below the seed's calls.
        StoreIdentityError, InvalidAnswersError: as the fixed protocol.
    """
    from rcp_jax.store_identity import check_store_identity

    cfg = settings or BudgetSettings()
    say = log or (lambda _msg: None)
    run = validate_run(runs, "runs")
    systems = sorted(run["system"].unique())
    if len(systems) < 2:
        raise DataError(f"runs hold {len(systems)} system(s); budgeted judging compares system pairs: give two or more")
    ranked = run.groupby("query_id")["system"].nunique()
    every = set(ranked.index[ranked == len(systems)])
    all_pools = {q: collection.pools[q] for q in sorted(collection.pools)}
    pools = {q: d for q, d in all_pools.items() if q in every}
    notes = []
    left = sorted(set(all_pools) - set(pools))
    if left:
        notes.append(f"{len(left)} pooled quer{'y is' if len(left) == 1 else 'ies are'} not ranked by every system "
                     f"and not judged: {left[:5]}")
    if not pools:
        raise DataError("no pooled query is ranked by every system of the runs; check that the runs and the pools "
                        "use the same query ids")
    for q, docs in pools.items():
        S.check_rubric_coverage(q, len(docs), config)
    full = full_protocol_calls(pools, config)
    budget_calls = resolve_budget(budget, full)
    share = ROUND_SHARE if batches is None else BATCH_ROUND_SHARE
    round_calls = cfg.round_calls or max(len(pools), math.ceil(share * full))
    batching = None if batches is None else {"batches": batches, "batch_poll": batch_poll, "batch_wait": batch_wait}
    st = store if isinstance(store, JudgementStore) else JudgementStore(store)
    opened_here = not st.is_open
    st.open()
    try:
        ds = check_store_identity(st, dataset=collection.dataset, seed=seed, config=config, pools=pools,
                                  dataset_from_store=dataset_from_store, say=log)
        common = dict(judge=judge, store=st, documents=collection.documents, queries=collection.queries,
                      concurrency=concurrency)
        first, rubric_rest = seed_windows(pools, seed=seed, dataset=ds, config=config,
                                          placements=cfg.seed_placements, rubric=cfg.seed_rubric)
        if len(first) > budget_calls:
            raise DataError(f"the budget of {budget_calls} calls is below the seed's {len(first)} calls "
                            f"({cfg.seed_placements:g} tournament placements per document and {cfg.seed_rubric} rubric "
                            f"windows per query); raise --budget to at least {len(first)}")
        query_ids = list(pools)
        weights = run_weights(run, pools, query_ids, k=cfg.k, protocol=cfg.protocol)
        position = {(q, d): (i, n) for i, q in enumerate(query_ids) for n, d in enumerate(pools[q])}
        placed = np.zeros((len(query_ids), max(len(d) for d in pools.values())))
        t0 = time.perf_counter()
        judged, paid = await _ask(first, common, st, phase=f"{'budget' if cfg.strategy == 'posterior' else 'random'}_seed",
                                  batching=batching)
        judge_s = time.perf_counter() - t0
        calls = len(first)
        tables = {"tournament": [], "rubric": []}
        new = judged
        rounds: list[RoundReport] = []
        rubric_done = {q: cfg.seed_rubric for q in pools}
        prefix = "budget" if cfg.strategy == "posterior" else "random"
        stop = "max_rounds"
        for r in range(cfg.max_rounds + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            # tables grow by the new answers only (window ids phase#sequence never repeat across rounds)
            usable = [j for j in new if keep_flagged or not j.flags]
            new_ws, new_ans = _tables(new, keep_flagged)
            tables["tournament"].append(new_ws)
            tables["rubric"].append(new_ans)
            _add_placements(placed, usable, position)
            ws = pd.concat([t for t in tables["tournament"] if len(t)] or tables["tournament"][:1], ignore_index=True)
            ans = pd.concat([t for t in tables["rubric"] if len(t)] or tables["rubric"][:1], ignore_index=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # early rounds: sparse graphs, degenerate queries
                bt = fit_bradley_terry(ws)
                cal = calibrate(bt, ans)
            post = gain_posterior(bt, cal, ans, pools, query_ids, n_draws=cfg.n_draws, seed=seed + r)
            dec = decide_pairs(weights, post, k=cfg.k, rope=cfg.rope, decision_prob=cfg.decision_prob,
                               n_bootstrap=cfg.n_bootstrap, seed=seed + r)
            report = RoundReport(round=r, calls=calls, paid=paid, decisions=dec, overhead_s=0.0, judge_s=judge_s,
                                 budget=budget_calls, full=full)
            rounds.append(report)
            if dec.n_decided == len(dec.pairs):
                stop = "decided"
            elif dec.n_open == 0:
                stop = "out_of_reach"
            elif calls >= budget_calls:
                stop = "budget"
            elif r == cfg.max_rounds:
                stop = "max_rounds"
            else:
                stop = ""
            if stop in ("decided", "out_of_reach") and not cfg.stop_when_decided and calls < budget_calls:
                stop = ""
            windows: list[Window] = []
            if not stop:
                w_p = pair_weights(dec)
                live = w_p > 0
                grads = pair_gradients(weights, post, dec.pair_index[live], k=cfg.k)
                sens, rub_val = document_values(post, grads, w_p[live])
                windows = plan_round(post, sens, rub_val, placed, rubric_done, rubric_rest,
                                     max_windows=min(round_calls, budget_calls - calls),
                                     window_size=min(config.w, post.doc_ids.shape[1]), explore=cfg.explore,
                                     phase=f"{prefix}_r{r + 1:03d}", seed=seed, dataset=ds, strategy=cfg.strategy)
                if not windows:
                    stop = "nothing_left"
            report.overhead_s = time.perf_counter() - t0
            report.overhead_cpu_s = time.process_time() - c0
            report.windows = len(windows)
            if on_round is not None:
                on_round(report, None)
            if stop:
                break
            for w in windows:
                if w.stage == "rubric":
                    rubric_done[w.query_id] += 1
                    rubric_rest[w.query_id].remove(w)
            t0 = time.perf_counter()
            new, c = await _ask(windows, common, st, phase=f"{prefix}_r{r + 1:03d}", batching=batching)
            judge_s = time.perf_counter() - t0
            judged += new
            paid += c
            calls += len(windows)
        flagged = sum(1 for j in judged if j.valid and j.flags)
        if flagged and not keep_flagged:
            notes.append(f"{flagged} flagged answer(s) (e.g. an answer repeating one planted in a document) left out "
                         "of the fits; they stay in the store (keep_flagged=True uses them)")
        say(f"budgeted judging stopped after round {rounds[-1].round}: {STOP_REASONS[stop]}")
        return BudgetResult(window_scores=ws, answers=ans, bt=bt, calibration=cal, posterior=post, decisions=dec,
                            rounds=rounds, stop_reason=stop, budget_calls=budget_calls, full_calls=full, calls=calls,
                            paid=paid, notes=notes)
    finally:
        if opened_here:
            st.close()


def judge_budgeted(collection: "PipelineInput", runs: pd.DataFrame, **kwargs) -> BudgetResult:
    """:func:`judge_budgeted_async` for synchronous callers (Ctrl-C / SIGTERM: answers so far are stored and
    :class:`rcp_jax.judging.transport.loop.Interrupted` says how to resume, as :func:`rcp_jax.pipeline.judge_collection_sync`)."""
    import signal

    from rcp_jax.judging.transport.loop import Interrupted
    from rcp_jax.judging.transport.loop import run as run_interruptible

    try:
        return run_interruptible(judge_budgeted_async(collection, runs, **kwargs))
    except KeyboardInterrupt as err:
        store = kwargs.get("store")
        store = store.folder if isinstance(store, JudgementStore) else store
        raise Interrupted(f"interrupted: answers received so far are in {store}; run the same command again to "
                          "resume", getattr(err, "signum", signal.SIGINT)) from None

"""The RCP pipeline end to end: schedule -> judge -> BT -> rubric -> 2PL calibration -> metrics.

All queries move through the schedule together: every query's round-1 windows are judged concurrently,
then one batched BT refit serves every query, then round 2, then seven adaptive batches (a batched refit
before each), then the two rubric halves (a batched Rasch fit in between). Every answer goes to the
append-only judgement store first, so a killed run resumes where it stopped and a finished run asked
again spends nothing: the schedule is a pure function of (seed, dataset, query, earlier answers), so the
same windows come out and are found in the store.

Example (offline, simulated judge)::

    from rcp_jax.pipeline import PipelineInput, run_pipeline
    from rcp_jax.judging import SimulatedJudge
    result = run_pipeline(collection, judge=SimulatedJudge(latent), store="store/", runs=runs)
    result.leaderboard
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax import schedule as S
from rcp_jax.calibration import Calibration, calibrate
from rcp_jax.errors import DataError
from rcp_jax.evaluation import evaluate, leaderboard
from rcp_jax.judging import judge_windows
from rcp_jax.judging.errors import InvalidAnswersError
from rcp_jax.judging.prompts.rubric import judge_rubric
from rcp_jax.judging.store.jsonl import JudgementStore
from rcp_jax.judging.store.records import Judgement, Window, content_hash
from rcp_jax.judging.transport.loop import Interrupted
from rcp_jax.judging.transport.loop import run as run_interruptible
from rcp_jax.tournament import fit_bradley_terry


@dataclass
class PipelineInput:
    """What the pipeline judges.

    Attributes:
        queries: query_id -> query text.
        documents: doc_id -> text (shared by all queries) or query_id -> {doc_id -> text}.
        pools: query_id -> judged candidates in pool order.
        dataset: name keying the random streams (with the seed and query id).
        qrels: optional ``query_id, doc_id, grade`` table (for qrel-nDCG).
    """

    queries: Mapping[str, str]
    documents: Mapping[str, str] | Mapping[str, Mapping[str, str]]
    pools: Mapping[str, Sequence[str]]
    dataset: str = "default"
    qrels: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        self.pools = {str(q): [str(d) for d in docs] for q, docs in self.pools.items()}
        missing = [q for q in self.pools if q not in self.queries]
        if missing:
            raise DataError(f"pools name queries without text: {missing[:5]}; add them to the queries file")
        for q, docs in self.pools.items():
            if not docs:
                raise DataError(f"pool of query {q!r} is empty; give it candidates or drop the query")
            if len(docs) == 1:
                raise DataError(
                    f"pool of query {q!r} has a single document ({docs[0]!r}): the tournament needs two to "
                    "compare, and a query is calibrated through its tournament; add candidates or drop the query"
                )
            if len(set(docs)) != len(docs):
                dup = next(d for d in docs if docs.count(d) > 1)
                raise DataError(f"document {dup!r} appears twice in the pool of query {q!r}; list it once")

    @classmethod
    def from_tables(
        cls,
        corpus: pd.DataFrame,
        queries: pd.DataFrame,
        pools: pd.DataFrame,
        *,
        qrels: pd.DataFrame | None = None,
        dataset: str = "default",
    ) -> PipelineInput:
        """Build from tables: ``corpus`` (doc_id, [title,] text[, image]), ``queries`` (query_id, text), ``pools``
        (query_id, doc_id[, rank]; pool order = rank, else row order). Title and text are joined; a document
        with an ``image`` (a file path or URL) becomes a :class:`rcp_jax.judging.prompts.pages.Document` (text and page image)."""
        if "rank" in pools.columns:
            pools = pools.sort_values(["query_id", "rank"], kind="stable")
        pool_map: dict[str, list[str]] = {}
        for q, d in zip(pools["query_id"].astype(str), pools["doc_id"].astype(str)):
            pool_map.setdefault(q, []).append(d)
        title = corpus["title"].fillna("").astype(str) if "title" in corpus.columns else pd.Series("", index=corpus.index)
        body = corpus["text"].fillna("").astype(str)
        texts = [f"{t}. {b}" if t and b else (t or b) for t, b in zip(title, body)]
        documents: dict = dict(zip(corpus["doc_id"].astype(str), texts))
        if "image" in corpus.columns:
            from rcp_jax.judging.prompts.pages import Document, PageImage

            for d, image in zip(corpus["doc_id"].astype(str), corpus["image"].fillna("").astype(str)):
                if image:
                    documents[d] = Document(documents[d], PageImage(image))
        needed = {d for docs in pool_map.values() for d in docs}
        missing = sorted(needed - documents.keys())
        if missing:
            raise DataError(f"pooled documents have no text in the corpus: {missing[:5]} ({len(missing)} in all)")
        return cls(
            queries=dict(zip(queries["query_id"].astype(str), queries["text"].astype(str))),
            documents={d: documents[d] for d in needed}, pools=pool_map, dataset=dataset, qrels=qrels,
        )


@dataclass
class PipelineResult:
    """Everything a run produced.

    Attributes:
        window_scores: ``query_id, window_id, doc_id, score`` of every valid tournament window.
        answers: ``query_id, window_id, doc_id, C1..CK`` of every valid rubric placement.
        bt: final BT fit (:func:`rcp_jax.fit_bradley_terry`).
        calibration: the 2PL :class:`Calibration`.
        per_query: per (system, query) metrics (when runs were given), else None.
        leaderboard: per-system means (when runs were given), else None.
        calls: judge calls made by this run (0 when everything came from the store).
    """

    window_scores: pd.DataFrame
    answers: pd.DataFrame
    bt: pd.DataFrame
    calibration: Calibration
    per_query: pd.DataFrame | None = None
    leaderboard: pd.DataFrame | None = None
    calls: int = 0
    notes: list[str] = field(default_factory=list)


class FlaggedJudgementWarning(UserWarning):
    """Valid judgements carrying a flag (e.g. an answer repeating one planted in a document) were left out."""


def _usable(j: Judgement, keep_flagged: bool) -> bool:
    return j.valid and (keep_flagged or not j.flags)


def warn_flagged(judgements: Sequence[Judgement], *, keep_flagged: bool = False, stacklevel: int = 2) -> int:
    """Warn once about the valid but flagged judgements a table leaves out; returns how many there are.

    A flag such as ``echoes_document:<doc id>`` means the judge's answer equals an answer object written
    inside one of the window's documents: a prompt injection that worked. Such an answer is kept in the
    store (it was paid for, and it is evidence) but is not fed to the fits unless ``keep_flagged``.
    """
    flagged = [j for j in judgements if j.valid and j.flags]
    if flagged and not keep_flagged:
        shown = ", ".join(f"{j.window.label} ({'; '.join(j.flags)})" for j in flagged[:5])
        more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
        warnings.warn(
            f"{len(flagged)} flagged judgement(s) left out of the fit: {shown}{more}. Inspect those windows' "
            "documents; to use the answers anyway pass keep_flagged=True (CLI: --keep-flagged)",
            FlaggedJudgementWarning, stacklevel=stacklevel,
        )
    return len(flagged)


def schedule_collisions(judgements: Sequence[Judgement]) -> dict[tuple[str, str, str, int], set[tuple[str, ...]]]:
    """Window keys ``(query, stage, phase, sequence)`` that hold more than one document set among ``judgements``.

    One schedule names each window once, so such a key means the store holds windows of two schedules
    (judged under another dataset name, seed or pool before stores recorded their identity).
    """
    seen: dict[tuple[str, str, str, int], set[tuple[str, ...]]] = {}
    for j in judgements:
        w = j.window
        seen.setdefault((w.query_id, w.stage, w.phase, w.sequence), set()).add(w.doc_ids)
    return {k: v for k, v in seen.items() if len(v) > 1}


def _window_ids(judgements: Sequence[Judgement]) -> list[str]:
    """``phase#sequence`` per judgement; a key asked with several document sets (two schedules in one store)
    gets ``phase#sequence@<hash of its documents>`` so its windows stay apart instead of merging."""
    collided = schedule_collisions(judgements)
    out = []
    for j in judgements:
        w = j.window
        wid = f"{w.phase}#{w.sequence}"
        if (w.query_id, w.stage, w.phase, w.sequence) in collided:
            wid += "@" + content_hash(list(w.doc_ids), 8)
        out.append(wid)
    return out


def tournament_table(judgements: Sequence[Judgement], *, keep_flagged: bool = False) -> pd.DataFrame:
    """Long table ``query_id, window_id, doc_id, score`` of valid tournament judgements.

    Flagged judgements (:func:`warn_flagged`) are left out unless ``keep_flagged``. ``window_id`` is
    ``phase#sequence``; windows of two schedules sharing one (:func:`schedule_collisions`) stay apart.
    """
    rows = []
    usable = [j for j in judgements if _usable(j, keep_flagged) and j.scores is not None]
    for j, wid in zip(usable, _window_ids(usable)):
        rows.extend((j.window.query_id, wid, d, float(j.scores[d])) for d in j.window.doc_ids)
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])


def rubric_table(judgements: Sequence[Judgement], *, keep_flagged: bool = False) -> pd.DataFrame:
    """Long table ``query_id, window_id, doc_id, C1..CK`` (one row per placement) of valid rubric judgements.

    Flagged judgements (:func:`warn_flagged`) are left out unless ``keep_flagged``.
    """
    rows, k = [], None
    usable = [j for j in judgements if _usable(j, keep_flagged) and j.criteria is not None]
    for j, wid in zip(usable, _window_ids(usable)):
        for d in j.window.doc_ids:
            ans = j.criteria[d]
            if k is None:
                k = len(ans)
            elif len(ans) != k:
                raise DataError(
                    f"window {j.window.label} has {len(ans)} criteria but earlier windows have {k}; one "
                    "calibration needs one rubric (judge family)"
                )
            rows.append((j.window.query_id, wid, d, *ans))
    crit = [f"C{i}" for i in range(1, (k or 5) + 1)]
    return pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", *crit])


def _bt_scores(bt: pd.DataFrame, pools: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
    """BT scores in pool order; documents never shown (no valid window yet) sit at 0."""
    by_q = {q: dict(zip(g["doc_id"], g["theta"])) for q, g in bt.groupby("query_id", sort=False)}
    return {q: np.array([by_q.get(q, {}).get(d, 0.0) for d in docs]) for q, docs in pools.items()}


class _Progress:
    """tqdm bar over one phase's windows (silent when disabled or not installed)."""

    def __init__(self, enabled: bool, desc: str):
        self.bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=0, desc=desc, unit="win", leave=False, disable=None, mininterval=0.5)
            except ImportError:  # pragma: no cover
                self.bar = None
        self.calls = 0

    def __call__(self, p) -> None:
        self.calls = p.calls
        if self.bar is not None:
            self.bar.total = p.total
            self.bar.n = p.cached + p.done
            self.bar.set_postfix(calls=p.calls, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _BatchProgress:
    """tqdm bar over the batch in flight of one phase: requests done of the batch, its status and age. Where
    stderr is not a terminal (a job writing a log), ``log`` gets a line when the batch's status changes and at
    most every :data:`BATCH_LOG_SECONDS` while it waits, so a log shows a wait of hours as it goes."""

    def __init__(self, enabled: bool, desc: str, log: Callable[[str], None] | None = None):
        self.bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=0, desc=f"{desc} (batch)", unit="req", leave=False, disable=None, mininterval=0.5)
            except ImportError:  # pragma: no cover
                self.bar = None
        self.desc, self.log = desc, log if enabled else None
        self.last: tuple[str, str, float] | None = None  # (batch id, status, when logged)
        self.calls = 0

    def _log_line(self, p) -> None:
        if self.log is None or (self.bar is not None and not self.bar.disable) or not p.batch_id:
            return
        now = time.monotonic()
        if self.last is not None and self.last[:2] == (p.batch_id, p.status) and now - self.last[2] < BATCH_LOG_SECONDS:
            return
        self.last = (p.batch_id, p.status, now)
        minutes, secs = divmod(int(p.elapsed_s), 60)
        self.log(f"{self.desc}: batch {p.batch_id} {p.status}, {p.completed:,} of {p.total:,} requests done, "
                 f"{p.failed:,} failed, {minutes // 60}:{minutes % 60:02d}:{secs:02d} since it was created")

    def __call__(self, p) -> None:
        self.calls = p.calls
        self._log_line(p)
        if self.bar is not None:
            self.bar.total = p.total
            self.bar.n = p.completed
            minutes, secs = divmod(int(p.elapsed_s), 60)
            self.bar.set_postfix(status=p.status or "-", failed=p.failed, round=p.round,
                                 elapsed=f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}", refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


#: Seconds between two log lines of a batch that keeps its status (when stderr is not a terminal).
BATCH_LOG_SECONDS = 300.0


async def _judge(windows, *, desc, progress, phase=None, batches=None, batch_poll=30.0, batch_wait=None, log=None,
                 **kw) -> tuple[list[Judgement], int]:
    if batches is not None:  # the phase as one batch across all queries (rcp_jax.judging.batch)
        from rcp_jax.judging.batch.runner import judge_windows_batch

        bar = _BatchProgress(progress, desc, log)
        kw.pop("concurrency", None)
        try:
            out = await judge_windows_batch(windows, progress=bar, batches=batches, phase=phase,
                                            poll_seconds=batch_poll, wait_seconds=batch_wait, **kw)
        finally:
            bar.close()
    else:
        bar = _Progress(progress, desc)
        try:
            out = await judge_windows(windows, progress=bar, **kw)
        finally:
            bar.close()
    got = {j.window for j in out}
    missing = sorted({w for w in windows if w not in got}, key=S.schedule_order)
    if missing:
        store = kw.get("store")
        where = store.folder if isinstance(store, JudgementStore) else store
        shown = ", ".join(w.label for w in missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise InvalidAnswersError(
            f"{len(missing)} window(s) of phase {desc!r} still have no valid answer after their attempts ({shown}); "
            f"their invalid answers are stored in {where}. Run the same command again to ask only those windows"
        )
    return out, bar.calls


async def judge_collection(
    collection: PipelineInput,
    *,
    judge,
    store: str | Path | JudgementStore,
    seed: int = 0,
    config: S.ScheduleConfig = S.DEFAULT_CONFIG,
    concurrency: int = 16,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    keep_flagged: bool = False,
    dataset_from_store: bool = False,
    batches=None,
    batch_poll: float = 30.0,
    batch_wait: float | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]:
    """Run Stage A and Stage B for every query of ``collection`` (async).

    The store is held (locked) for the whole run. Its schedule identity (dataset name, seed, ``config``,
    pools; :mod:`rcp_jax.store_identity`) is recorded on the first run and checked, before any judge call,
    on every later one: a run that would judge a second schedule into the store is refused.

    Flagged answers (:func:`warn_flagged`) stay in the store but feed neither the schedule's refits nor
    the returned tables unless ``keep_flagged``; one :class:`FlaggedJudgementWarning` names them.

    Args:
        dataset_from_store: ``collection.dataset`` is only a default name (the CLI without ``--name``): a
            store recorded under another name with the same seed, schedule and pools resumes under its
            recorded name (with a :class:`rcp_jax.store_identity.StoreIdentityNote`) instead of being refused.
        batches: a :class:`rcp_jax.judging.BatchBackend` (``ProviderBatches.for_judge(judge)``, ``FileBatches(dir)``):
            each phase (round 1, round 2, each round-3 step, the two rubric halves) is asked as one batch across all
            queries (:func:`rcp_jax.judging.judge_windows_batch`), journaled in the store; ``None``: online calls.
        batch_poll, batch_wait: seconds between polls of a batch, and the longest wait for one (``None``: no limit;
            0: write and return, :class:`rcp_jax.judging.BatchPending` saying how to resume).

    Returns:
        (window_scores, answers, final BT table, judge calls made).

    Raises:
        StoreIdentityError: the store was judged under another identity (nothing is asked).
        InvalidAnswersError: windows still have no valid answer after their attempts (they are stored).
    """
    pools = {q: collection.pools[q] for q in sorted(collection.pools)}
    for q, docs in pools.items():  # refuse before any call
        S.check_rubric_coverage(q, len(docs), config)
    st = store if isinstance(store, JudgementStore) else JudgementStore(store)
    opened_here = not st.is_open
    st.open()
    try:
        return await _judge_all(collection, pools, judge=judge, store=st, seed=seed, config=config,
                                concurrency=concurrency, progress=progress, log=log, keep_flagged=keep_flagged,
                                dataset_from_store=dataset_from_store,
                                batching=dict(batches=batches, batch_poll=batch_poll, batch_wait=batch_wait))
    finally:
        if opened_here:
            st.close()


async def _judge_all(collection, pools, *, judge, store: JudgementStore, seed, config, concurrency, progress, log,
                     keep_flagged, dataset_from_store, batching=None):
    from rcp_jax.store_identity import check_store_identity

    say = log or (lambda _msg: None)
    ds = check_store_identity(store, dataset=collection.dataset, seed=seed, config=config, pools=pools,
                              dataset_from_store=dataset_from_store, say=log, rubric=judge_rubric(judge))
    common = dict(judge=judge, store=store, documents=collection.documents, queries=collection.queries,
                  concurrency=concurrency, log=log, **(batching or {}))
    calls = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        r1 = [w for q, d in pools.items() for w in S.tournament_round1(q, d, seed=seed, dataset=ds, config=config)]
    tour, c = await _judge(r1, desc="round 1", phase="round1", progress=progress, **common)
    calls += c
    bt = fit_bradley_terry(tournament_table(tour, keep_flagged=keep_flagged))
    say(f"round 1: {len(r1)} windows, BT refit of {bt['query_id'].nunique()} queries")
    r2 = [w for q, d in pools.items() for w in S.tournament_round2(q, d, _bt_scores(bt, pools)[q], seed=seed, dataset=ds, config=config)]
    more, c = await _judge(r2, desc="round 2", phase="round2", progress=progress, **common)
    tour, calls = tour + more, calls + c
    shown: dict[str, list[Window]] = {q: [] for q in pools}
    for w in r1 + r2:
        shown[w.query_id].append(w)
    n_batches = max(len(S.schedule_counts(len(d), config).round3_batches) for d in pools.values())
    for b in range(n_batches):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # mid-tournament disconnection is expected
            bt = fit_bradley_terry(tournament_table(tour, keep_flagged=keep_flagged))
        scores = _bt_scores(bt, pools)
        batch = []
        for q, docs in pools.items():
            if b < len(S.schedule_counts(len(docs), config).round3_batches):
                batch.extend(S.adaptive_batch(q, docs, scores[q], S.co_occurrence(shown[q], docs), b,
                                              asked=shown[q], config=config))
        more, c = await _judge(batch, desc=f"round 3 batch {b + 1}", phase=f"round3_b{b + 1}", progress=progress,
                                 **common)
        tour, calls = tour + more, calls + c
        for w in batch:
            shown[w.query_id].append(w)
    window_scores = tournament_table(tour, keep_flagged=keep_flagged)
    bt = fit_bradley_terry(window_scores)
    say(f"tournament done: {len(tour)} windows")

    rb = [w for q, d in pools.items() for w in S.rubric_balanced(q, d, seed=seed, dataset=ds, config=config)]
    rub, c = await _judge(rb, desc="rubric balanced", phase="rubric_balanced", progress=progress, **common)
    calls += c
    abilities = S.rasch_abilities(pools, rubric_table(rub, keep_flagged=keep_flagged))
    rs = [w for q, d in pools.items() for w in S.rubric_stratified(q, d, abilities[q], seed=seed, dataset=ds, config=config)]
    more, c = await _judge(rs, desc="rubric stratified", phase="rubric_stratified", progress=progress, **common)
    rub, calls = rub + more, calls + c
    say(f"rubric done: {len(rub)} windows")
    warn_flagged(tour + rub, keep_flagged=keep_flagged, stacklevel=3)
    return window_scores, rubric_table(rub, keep_flagged=keep_flagged), bt, calls


def run_pipeline(
    collection: PipelineInput,
    *,
    judge,
    store: str | Path,
    runs: pd.DataFrame | None = None,
    seed: int = 0,
    k: int = 10,
    protocol: str = "plain",
    config: S.ScheduleConfig = S.DEFAULT_CONFIG,
    concurrency: int = 16,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    keep_flagged: bool = False,
) -> PipelineResult:
    """Judge, fit and evaluate a collection (synchronous wrapper around :func:`judge_collection`).

    Args:
        collection: queries, documents, pools (and optional qrels).
        judge: a :mod:`judging` judge (``SimulatedJudge`` offline, ``LiteLLMJudge`` for a real model).
        store: folder of the append-only judgement store (created if missing; reused to resume).
        runs: optional ``system, query_id, doc_id, score`` table to evaluate with the new gains.
        seed: schedule seed. k, protocol: metric settings.
        config: schedule constants. concurrency: judge calls in flight.
        progress: show progress bars.
        keep_flagged: fit flagged answers too (default: left out, with a warning; :func:`warn_flagged`).

    Returns:
        :class:`PipelineResult`.
    """
    window_scores, answers, bt, calls = judge_collection_sync(
        collection, judge=judge, store=store, seed=seed, config=config, concurrency=concurrency,
        progress=progress, log=log, keep_flagged=keep_flagged,
    )
    calibration = calibrate(bt, answers)
    calibration.rubric = judge_rubric(judge)  # names the criteria in reports
    result = PipelineResult(window_scores=window_scores, answers=answers, bt=bt, calibration=calibration, calls=calls)
    if runs is not None:
        pools = pd.DataFrame([(q, d) for q, docs in collection.pools.items() for d in docs], columns=["query_id", "doc_id"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result.per_query = evaluate(runs, calibration, qrels=collection.qrels, k=k, protocol=protocol, pools=pools)
            result.leaderboard = leaderboard(result.per_query)
    return result


def write_outputs(result: PipelineResult, folder: str | Path) -> dict[str, Path]:
    """Write every table of ``result`` to ``folder`` atomically; returns the paths written."""
    from rcp_jax.calibration import save_calibration
    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_text

    folder = Path(folder)
    paths = {
        "window_scores": atomic_write_csv(folder / "window_scores.csv", result.window_scores),
        "answers": atomic_write_csv(folder / "answers.csv", result.answers),
        "bt": atomic_write_csv(folder / "bt.csv", result.bt),
    }
    save_calibration(result.calibration, folder / "calibration")
    paths["calibration"] = folder / "calibration"
    if result.per_query is not None:
        paths["per_query"] = atomic_write_csv(folder / "per_query.csv", result.per_query)
        board = result.leaderboard.reset_index()
        paths["leaderboard"] = atomic_write_csv(folder / "leaderboard.csv", board)
        with contextlib.suppress(ImportError):
            paths["leaderboard_md"] = atomic_write_text(folder / "leaderboard.md", board.to_markdown(index=False, floatfmt=".4f") + "\n")
    return paths


def store_tables(
    store: str | Path, *, family: str | Mapping[str, str] | None = None, keep_flagged: bool = False,
    served_model: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Tournament and rubric tables of a judgement store, refusing to mix judge families.

    Args:
        store: store folder (``tournament.jsonl``, ``rubric.jsonl``).
        family: keep only records whose model is ``family`` (or whose family id starts with it); required
            when a stage holds several families. A mapping ``{stage: family id}`` picks one family per stage
            (one judge of several: :mod:`rcp_jax.judges`).
        keep_flagged: use flagged answers too (default: left out with a :class:`FlaggedJudgementWarning`).
        served_model: keep only answers whose reply named this served model (``""``: answers that name none);
            ``None`` (default): every answer. One judge of a family answered by several models
            (:func:`rcp_jax.judges.list_judges` splits such a family).

    Returns:
        (window_scores, answers, {"tournament": family dict, "rubric": family dict}).

    Raises:
        DataError: the store is empty, or a stage mixes judge families (models, prompts, parsers or
            decoding settings) and ``family`` does not pick one.
    """
    from rcp_jax.judging import read_judgements

    store = Path(store)
    tables, families = {}, {}
    if not store.is_dir():
        raise DataError(f"{store}: no such judgement store folder; run `rcp-jax judge --store {store}` first")
    for stage in ("tournament", "rubric"):
        records = read_judgements(store, stage, valid_only=True)
        if family is not None:
            everyone = {j.family.family_id: j.family.model for j in records}
            want = family.get(stage, "") if isinstance(family, Mapping) else family  # stage -> family id
            records = [j for j in records if want and (j.family.model == want or j.family.family_id.startswith(want))]
            if everyone and not records:
                listed = ", ".join(f"{fid} (model {m!r})" for fid, m in everyone.items())
                raise DataError(f"{store / (stage + '.jsonl')} has no {stage} judgements of family {family!r}; "
                                f"it holds {listed}: pass one of these models or family ids to --family")
        if served_model is not None:
            records = [j for j in records if (j.served_model or "") == served_model]
        records.sort(key=lambda j: S.schedule_order(j.window))  # as the pipeline asked them, not as they arrived
        found = {}
        for j in records:
            found.setdefault(j.family.family_id, j.family)
        if len(found) > 1:
            listed = "; ".join(f"{fid} (model {f.model!r}, prompt {f.prompt_hash[:8]}, parser {f.parser_version})" for fid, f in found.items())
            raise DataError(
                f"{store / (stage + '.jsonl')} mixes {len(found)} judge families: {listed}. One fit needs one "
                f"judge family; pick one with --family MODEL_OR_FAMILY_ID, or pool several judges into one "
                f"calibration with --judges A,B (rcp_jax.judges)"
            )
        if not records:
            raise DataError(f"{store / (stage + '.jsonl')} has no valid {stage} judgements; run `rcp-jax judge` first")
        families[stage] = next(iter(found.values())).to_dict()
        warn_flagged(records, keep_flagged=keep_flagged, stacklevel=2)
        _warn_two_schedules(store, stage, records)
        table = tournament_table if stage == "tournament" else rubric_table
        tables[stage] = table(records, keep_flagged=keep_flagged)
        if tables[stage].empty:  # every valid answer is flagged
            raise DataError(
                f"{store / (stage + '.jsonl')}: every valid {stage} answer ({len(records)}) is flagged (e.g. window "
                f"{records[0].window.label}: {'; '.join(records[0].flags)}), and fits leave flagged answers out. Inspect "
                "those windows' documents; to fit the answers anyway pass --keep-flagged"
            )
    tables["rubric"] = _drop_unscored(store, tables["tournament"], tables["rubric"])
    t, r = families["tournament"], families["rubric"]
    if (t["model"], t["decoding"]) != (r["model"], r["decoding"]):
        raise DataError(
            f"{store}: the tournament was judged by family {t['family_id']} (model {t['model']!r}) but the rubric by "
            f"family {r['family_id']} (model {r['model']!r}, or other decoding settings); one calibration needs one "
            "judge: judge both stages with the same model and settings, or pick one with --family"
        )
    return tables["tournament"], tables["rubric"], families


class UnscoredDocumentsWarning(UserWarning):
    """Documents with rubric answers but no usable tournament answer were left out of a fit."""


def _drop_unscored(store: Path, window_scores: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """``answers`` without the documents no usable tournament window showed (they have no BT score, so the
    calibration cannot place them); one :class:`UnscoredDocumentsWarning` says which and why."""
    shown = pd.MultiIndex.from_frame(window_scores[["query_id", "doc_id"]].drop_duplicates())
    keys = pd.MultiIndex.from_frame(answers[["query_id", "doc_id"]])
    orphan = ~keys.isin(shown)
    if not orphan.any():
        return answers
    lost = answers.loc[orphan, ["query_id", "doc_id"]].drop_duplicates()
    whole = sorted(set(lost["query_id"]) - set(window_scores["query_id"]))
    q, d = lost.iloc[0]
    named = ", ".join(map(repr, whole[:5])) + (" ..." if len(whole) > 5 else "")
    queries = (f"; query {named} has none at all" if len(whole) == 1 else f"; queries {named} have none at all") if whole else ""
    fix = (f"invalid ones are asked again by `rcp-jax judge --store {store}`; flagged ones are listed in the notes "
           "(--keep-flagged fits them)")
    kept = answers.loc[~orphan].reset_index(drop=True)
    if kept.empty:
        raise DataError(
            f"{store}: no document with rubric answers has a usable tournament answer (e.g. query {q!r} document "
            f"{d!r}): their tournament windows hold only invalid or flagged answers; {fix}"
        )
    warnings.warn(
        f"{store}: {len(lost)} document(s) of {lost['query_id'].nunique()} queries have rubric answers but no usable "
        f"tournament answer (e.g. query {q!r} document {d!r}{queries}): their tournament windows hold only invalid "
        f"or flagged answers, so they have no BT score and are left out of this fit; {fix}",
        UnscoredDocumentsWarning, stacklevel=3,
    )
    return kept


class StoreScheduleWarning(UserWarning):
    """A store holds windows of two schedules (judged under two dataset names, seeds or pools); fits keep
    every answer, each window on its own."""


def _warn_two_schedules(store: Path, stage: str, records: Sequence[Judgement]) -> None:
    collided = schedule_collisions(records)
    if not collided:
        return
    q, _, phase, seq = sorted(collided)[0]
    queries = sorted({k[0] for k in collided})
    warnings.warn(
        f"{store / (stage + '.jsonl')} holds windows of two schedules: {len(collided)} {stage} window name(s) of "
        f"{len(queries)} queries were each asked with two or more document sets (e.g. query {q!r} {phase}#{seq}), "
        "because an earlier `rcp-jax judge` into this store used another --name, --seed or pools file (before stores "
        "recorded their identity). The fit keeps every answer, each window on its own (ids 'phase#n@<hash>'), so it "
        "is valid but its design is no longer balanced; for one schedule, judge again into a new --store",
        StoreScheduleWarning, stacklevel=3,
    )


def flag_notes(store: str | Path, *, keep_flagged: bool = False) -> list[str]:
    """One line per flagged valid judgement of ``store`` (e.g. an answer repeating text planted in a document),
    saying whether fits leave it out (the default) or, with ``keep_flagged``, use it."""
    from rcp_jax.judging import read_judgements

    fate = "kept in fits by request" if keep_flagged else "left out of fits"
    notes = []
    for stage in ("tournament", "rubric"):
        for j in read_judgements(store, stage, valid_only=True):
            notes.extend(f"window {j.window.label}: {flag} ({fate}; see the judgement store)" for flag in j.flags)
    return notes


def judge_collection_sync(collection: PipelineInput, **kwargs) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]:
    """:func:`judge_collection` for synchronous callers.

    Ctrl-C (and SIGTERM, where the process installed :func:`rcp_jax.judging.transport.loop.interrupt_handler` for it, as the
    ``rcp-jax`` command does) stops the run with every received answer stored and raises
    :class:`rcp_jax.judging.transport.loop.Interrupted` (a ``KeyboardInterrupt``) whose message says how to resume.
    """
    import signal

    try:
        return run_interruptible(judge_collection(collection, **kwargs))
    except KeyboardInterrupt as err:
        store = kwargs.get("store")
        store = store.folder if isinstance(store, JudgementStore) else store
        raise Interrupted(f"interrupted: answers received so far are in {store}; run the same command again to "
                          "resume", getattr(err, "signum", signal.SIGINT)) from None

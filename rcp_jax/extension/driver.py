"""Extend a judged pool with a new reranker's documents: plan, check, judge, place, record.

:func:`extend` is the whole flow. A new system's top-``depth`` documents that the calibration has no
gain for (:func:`rcp_jax.extension.find_new_documents`) are judged in windows beside anchors already on
the scale (:mod:`rcp_jax.schedule.anchors`), placed without refitting anything shared
(:mod:`rcp_jax.extension.placement`), and the extension is recorded in the store's extension log
(:mod:`rcp_jax.extension.log`). Every answer goes to the append-only store first; the windows are a pure
function of the new documents, their anchors and the store's recorded seed and dataset name, so a
killed extension, run again, asks only what is missing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rcp_jax import schedule as S
from rcp_jax.calibration import Calibration, load_calibration
from rcp_jax.errors import DataError
from rcp_jax.extension.log import append_event, extension_status
from rcp_jax.extension.new_documents import find_new_documents
from rcp_jax.extension.placement import anchor_agreement, anchored_scores, place_documents, rubric_check
from rcp_jax.judging import judge_windows, read_judgements
from rcp_jax.judging.errors import InvalidAnswersError
from rcp_jax.judging.lookup import PerQuery
from rcp_jax.judging.store.jsonl import JudgementStore, read_identity
from rcp_jax.judging.store.records import Judgement, Window, content_hash
from rcp_jax.schedule.anchors import DEFAULT_EXTENSION, ExtensionConfig

#: a rubric check above this |z| is reported as a warning (the judge may answer differently now)
RUBRIC_Z_WARN = 4.0


class ExtensionWarning(UserWarning):
    """The extension finished, but a check says its placement may be off (the message says why)."""


@dataclass
class ExtensionPlan:
    """What an extension will ask, before any call.

    Attributes:
        extension: the extension's id (its windows' phase, ``extend_<hash>``).
        new_documents: ``query_id, doc_id, best_rank, systems`` (:func:`find_new_documents`).
        anchors: query -> anchor documents (highest BT score first).
        windows: every window to judge (tournament, then rubric).
        seed, dataset: the random streams' key (the store's recorded identity).
        full_rejudge_calls: calls of the full schedule on the grown pools of the same queries.
    """

    extension: str
    new_documents: pd.DataFrame
    anchors: dict[str, tuple[str, ...]]
    windows: list[Window]
    seed: int
    dataset: str
    full_rejudge_calls: int

    @property
    def calls(self) -> int:
        """Planned calls (one per window, first attempts)."""
        return len(self.windows)

    def counts(self) -> dict[str, int]:
        """Planned windows per stage."""
        return {s: sum(w.stage == s for w in self.windows) for s in ("tournament", "rubric")}


@dataclass
class ExtensionResult:
    """What :func:`extend` produced.

    Attributes:
        calibration: the extended :class:`Calibration` (the old one plus the new documents).
        new_documents: ``query_id, doc_id, best_rank, systems, theta_bt, se, ability, gain, placements,
            count_gain, windows`` of every new document.
        plan: the :class:`ExtensionPlan` that was judged.
        calls: judge calls made by this run (0 when every answer was in the store).
        window_scores, answers: the extension's tournament and rubric tables.
        checks: ``{"rubric": rubric_check(...), "anchors": anchor_agreement(...)}``.
        notes: lines worth showing (warnings of the checks).
    """

    calibration: Calibration
    new_documents: pd.DataFrame
    plan: ExtensionPlan
    calls: int
    window_scores: pd.DataFrame
    answers: pd.DataFrame
    checks: dict
    notes: list[str] = field(default_factory=list)


def _scored(calibration: Calibration) -> dict[str, dict[str, float]]:
    docs = calibration.documents
    docs = docs.loc[docs["gain"].notna() & docs["theta_bt"].notna()]
    out: dict[str, dict[str, float]] = {}
    for q, d, t in zip(docs["query_id"].astype(str), docs["doc_id"].astype(str), docs["theta_bt"].astype(float)):
        out.setdefault(q, {})[d] = t
    return out


def _family_records(store: Path, stage: str, family) -> tuple[list[Judgement], dict[str, str]]:
    """Valid records of ``stage`` by ``family``, and every family id -> model the stage holds."""
    records = read_judgements(store, stage, valid_only=True)
    everyone = {j.family.family_id: j.family.model for j in records}
    return [j for j in records if j.family.family_id == family.family_id], everyone


def _refuse_family(store: Path, stage: str, family, everyone: dict[str, str]) -> DataError:
    held = "; ".join(f"family {fid} (model {m!r})" for fid, m in everyone.items())
    return DataError(
        f"{store / (stage + '.jsonl')} holds no {stage} answers of this run's judge (family {family.family_id}, model "
        f"{family.model!r}); it holds {held}. New documents must be judged by the judge that scored the anchors, or "
        "they land on another judge's scale: give the same --model and judge settings (--temperature, "
        "--max-tokens, --structured-output, --extra-params, and --seed for the simulated judge) as `rcp-jax judge`"
    )


def check_store(store: str | Path, calibration: Calibration, judge) -> dict[str, float]:
    """Refuse a store and calibration that do not belong together, before any call; returns the pair
    weight of each query's stored tournament windows of the judge's family (for the anchored fit).

    Raises:
        DataError: no such store; the store holds no answers of ``judge``'s families (another judge or
            judge settings); or calibrated documents this store's judge never judged (a calibration of
            another store or schedule).
    """
    store = Path(store)
    if not (store / "tournament.jsonl").is_file():
        raise DataError(f"{store}: no tournament answers; pass the --store that `rcp-jax judge` filled and "
                        "`rcp-jax fit` read for this calibration")
    fam = judge.family("tournament")
    records, everyone = _family_records(store, "tournament", fam)
    if not records:
        raise _refuse_family(store, "tournament", fam, everyone)
    rubric_used = getattr((getattr(judge, "prompts", None) or {}).get("rubric"), "rubric", None)
    if rubric_used is not None and calibration.rubric:  # the calibration names the rubric its store was judged with
        from rcp_jax.judging.prompts.rubric import check_rubric_matches

        check_rubric_matches(calibration.rubric, rubric_used, what=f"the calibration (store {store})",
                             fix="Give `rcp-jax extend` the --rubric that `rcp-jax judge` used (none for the built-in one).")
    rfam = judge.family("rubric")
    rubric, r_everyone = _family_records(store, "rubric", rfam)
    if r_everyone and not rubric:
        raise _refuse_family(store, "rubric", rfam, r_everyone)
    shown: dict[str, set[str]] = {}
    totals: dict[str, float] = {}
    for j in records:
        q = j.window.query_id
        shown.setdefault(q, set()).update(j.window.doc_ids)
        totals[q] = totals.get(q, 0.0) + len(j.window.doc_ids) - 1
    missing = [(q, d) for q, docs in _scored(calibration).items() for d in sorted(docs) if d not in shown.get(q, ())]
    if missing:
        q, d = missing[0]
        whole = sorted({m[0] for m in missing} - set(shown))
        raise DataError(
            f"the calibration holds {len(missing)} document(s) this store's judge never judged (e.g. query {q!r} "
            f"document {d!r}{'; queries ' + ', '.join(map(repr, whole[:5])) + ' not at all' if whole else ''}): it was "
            f"fitted from another store or schedule than {store}. Pass the --store and --calibration of one "
            "`rcp-jax judge` / `rcp-jax fit`"
        )
    return totals


def plan_extension(
    runs: pd.DataFrame, calibration: Calibration, *, store: str | Path | None = None, depth: int = 10,
    systems: Sequence[str] | None = None, config: ExtensionConfig = DEFAULT_EXTENSION,
    schedule: S.ScheduleConfig = S.DEFAULT_CONFIG,
) -> ExtensionPlan:
    """The new documents, their anchors and windows (pure: nothing is judged or written).

    The random streams are keyed by the store's recorded seed and dataset name (``identity.json``; seed 0
    and the name ``extension`` when the store has none).
    """
    new = find_new_documents(runs, calibration, depth=depth, systems=systems)
    identity = read_identity(store) if store is not None and Path(store).is_dir() else None
    seed = int(identity["seed"]) if identity else 0
    dataset = str(identity["dataset"]) if identity else "extension"
    scored = _scored(calibration)
    by_q = {q: list(g["doc_id"]) for q, g in new.groupby("query_id", sort=True)}
    anchors = {q: S.select_anchors(q, scored[q], config.anchors) for q in by_q}
    ext = "extend_" + content_hash({"new": by_q, "anchors": {q: list(a) for q, a in anchors.items()},
                                    "config": config.to_dict()}, 12)
    tour, rub = [], []
    full = 0
    for q, docs in by_q.items():
        tour += S.extension_tournament(q, docs, anchors[q], phase=ext, seed=seed, dataset=dataset, config=config)
        rub += S.extension_rubric(q, docs, phase=ext, seed=seed, dataset=dataset, config=config)
        counts = S.schedule_counts(len(scored[q]) + len(docs), schedule)
        full += counts.tournament_calls + counts.rubric_windows
    return ExtensionPlan(extension=ext, new_documents=new, anchors=anchors, windows=tour + rub, seed=seed,
                         dataset=dataset, full_rejudge_calls=full)


def _check_texts(plan: ExtensionPlan, documents, queries: Mapping[str, str]) -> None:
    docs = PerQuery(documents)
    lost_q = sorted(set(plan.new_documents["query_id"]) - set(map(str, queries)))
    if lost_q:
        raise DataError(f"no text for queries {lost_q[:5]} of the run; give the collection (--dataset or --rows) "
                        "that holds them")
    lost = []
    for w in plan.windows:
        for d in w.doc_ids:
            try:
                docs.get(w.query_id, d)
            except KeyError:
                lost.append((w.query_id, d))
    if lost:
        q, d = lost[0]
        n = len(set(lost))
        raise DataError(f"document {d!r} of query {q!r} has no text ({n} document(s) without text): the new system's "
                        "documents and the anchors must be in the corpus given (--dataset or --rows)")


def _usable(judgements: Sequence[Judgement], keep_flagged: bool) -> list[Judgement]:
    return [j for j in judgements if j.valid and (keep_flagged or not j.flags)]


def _tables(judgements: Sequence[Judgement], keep_flagged: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    tour, rub = [], []
    k = 0
    for j in _usable(judgements, keep_flagged):
        w = j.window
        wid = f"{w.phase}#{w.sequence}"
        if w.stage == "tournament" and j.scores is not None:
            tour.extend((w.query_id, wid, d, float(j.scores[d])) for d in w.doc_ids)
        elif w.stage == "rubric" and j.criteria is not None:
            for d in w.doc_ids:
                k = len(j.criteria[d])
                rub.append((w.query_id, wid, d, *j.criteria[d]))
    ws = pd.DataFrame(tour, columns=["query_id", "window_id", "doc_id", "score"])
    ans = pd.DataFrame(rub, columns=["query_id", "window_id", "doc_id", *[f"C{i}" for i in range(1, k + 1)]])
    return ws, ans


async def extend_async(
    runs: pd.DataFrame,
    *,
    store: str | Path,
    calibration: Calibration | str | Path,
    judge,
    queries: Mapping[str, str],
    documents: Mapping[str, str] | Mapping[str, Mapping[str, str]],
    depth: int = 10,
    systems: Sequence[str] | None = None,
    config: ExtensionConfig = DEFAULT_EXTENSION,
    concurrency: int = 16,
    keep_flagged: bool = False,
    log: Callable[[str], None] | None = None,
    progress: Callable | None = None,
) -> ExtensionResult:
    """:func:`extend` for async callers (same arguments)."""
    say = log or (lambda _msg: None)
    cal = calibration if isinstance(calibration, Calibration) else load_calibration(calibration)
    store = Path(store)
    plan = plan_extension(runs, cal, store=store, depth=depth, systems=systems, config=config)
    check_store(store, cal, judge)
    _check_texts(plan, documents, queries)
    new = plan.new_documents
    say(f"extension {plan.extension}: {len(new)} new documents in {new['query_id'].nunique()} queries, "
        f"{plan.calls} windows planned ({plan.counts()['tournament']} tournament + {plan.counts()['rubric']} rubric; "
        f"the full schedule on the grown pools: {plan.full_rejudge_calls})")
    st = JudgementStore(store)
    calls = 0
    with st:
        status = extension_status(store, plan.extension)
        if status != "finished":
            append_event(
                store, "resumed" if status == "started" else "started", plan.extension,
                runs=sorted({str(s) for s in runs.attrs.get("sources", [])} or
                            ([str(runs.attrs["source"])] if runs.attrs.get("source") else [])),
                systems=sorted(set(new["systems"].str.split(",").sum())), depth=int(depth),
                family={s: judge.family(s).to_dict() for s in ("tournament", "rubric")}, config=config.to_dict(),
                seed=plan.seed, dataset=plan.dataset, windows=plan.counts(),
                queries={q: {"new": list(g["doc_id"]), "anchors": list(plan.anchors[q])}
                         for q, g in new.groupby("query_id", sort=True)},
            )

        def counting(p) -> None:
            nonlocal calls
            calls = p.calls
            if progress is not None:
                progress(p)

        got = await judge_windows(plan.windows, judge=judge, store=st, documents=documents, queries=queries,
                                  concurrency=concurrency, progress=counting)
        answered = {j.window for j in got}
        missing = [w for w in plan.windows if w not in answered]
        if missing:
            shown = ", ".join(w.label for w in missing[:3]) + (" ..." if len(missing) > 3 else "")
            raise InvalidAnswersError(
                f"{len(missing)} window(s) of extension {plan.extension} still have no valid answer after their attempts "
                f"({shown}); their invalid answers are stored in {store}. Run the same command again to ask only those")
        if status != "finished":
            append_event(store, "finished", plan.extension, calls=calls, windows=plan.counts(),
                         documents=len(new), queries=int(new["query_id"].nunique()))
    # the full fit's pair weight: every stored window of the judge's family, this extension's included
    fam = judge.family("tournament").family_id
    totals = {}
    for j in read_judgements(store, "tournament", valid_only=True):
        if j.family.family_id == fam:
            totals[j.window.query_id] = totals.get(j.window.query_id, 0.0) + len(j.window.doc_ids) - 1
    ws, ans = _tables(got, keep_flagged)
    scored = _scored(cal)
    by_q = {q: list(g["doc_id"]) for q, g in new.groupby("query_id", sort=True)}
    placed_scores = anchored_scores(ws, scored, by_q, totals)
    extended, placed = place_documents(cal, placed_scores, ans)
    table = new.merge(placed, on=["query_id", "doc_id"], how="left")
    checks = {"rubric": rubric_check(cal, placed, ans), "anchors": anchor_agreement(ws, scored)}
    notes = []
    rub = checks["rubric"]
    z = rub.get("max_abs_z", 0.0)
    if z > RUBRIC_Z_WARN:
        c = max(rub["z"], key=lambda k: abs(rub["z"][k]))
        notes.append(
            f"the new documents' rubric answers do not fit where the tournament placed them: {c} is passed in "
            f"{rub['observed'][c]:.0%} of their answers where the calibration predicts {rub['predicted'][c]:.0%} "
            f"(|z| {abs(rub['z'][c]):.1f}). The new documents may lie outside the range the calibration was fitted on "
            "(its tau and alpha are then extrapolated), or the judge answers differently now; refit everything with "
            f"`rcp-jax fit --store {store}` (it fits the extension's answers too) and compare")
    for n in notes:
        warnings.warn(n, ExtensionWarning, stacklevel=3)
    extended.info = {**extended.info, "extensions": [*cal.info.get("extensions", []), {
        "extension": plan.extension, "store": str(store), "documents": len(new),
        "queries": int(new["query_id"].nunique()), "depth": int(depth)}]}
    say(f"extension {plan.extension}: {calls} calls this run; {len(new)} documents placed")
    return ExtensionResult(calibration=extended, new_documents=table, plan=plan, calls=calls, window_scores=ws,
                           answers=ans, checks=checks, notes=notes)


def extend(runs: pd.DataFrame, **kwargs) -> ExtensionResult:
    """Judge a new system's unjudged documents and place them on an existing calibration.

    Args:
        runs: ``system, query_id, doc_id, score`` of the new system(s) (``rcp_jax.read_run``).
        store: the judgement store the calibration was fitted from (its judge's answers anchor the new ones).
        calibration: the :class:`Calibration` to extend, or its folder (``rcp-jax fit --out``).
        judge: the judge that filled the store, with the same settings (its family must match the store's).
        queries: query id -> text. documents: doc id -> text, or query id -> {doc id -> text}.
        depth: each system's top ``depth`` documents are read (default 10).
        systems: only these systems of ``runs``. config: the extension's window constants.
        concurrency: calls in flight. keep_flagged: fit flagged answers too (default: left out).
        log: progress-line callback. progress: :class:`judging.JudgeProgress` callback.

    Returns:
        :class:`ExtensionResult`; ``result.calibration`` scores the new system with ``rcp_jax.evaluate``.

    Raises:
        DataError: the calibration is not a frozen-BT MAP, a query of the runs is not calibrated, no document
            is new, or store, calibration and judge do not belong together (nothing is asked).
        InvalidAnswersError: windows still without a valid answer after their attempts (stored; run again).
        rcp_jax.judging.transport.loop.Interrupted: Ctrl-C / SIGTERM; every answer received is stored (run again to resume).
    """
    import signal

    from rcp_jax.judging.transport.loop import Interrupted
    from rcp_jax.judging.transport.loop import run as run_interruptible

    try:
        return run_interruptible(extend_async(runs, **kwargs))
    except KeyboardInterrupt as err:
        raise Interrupted(f"interrupted: answers received so far are in {kwargs.get('store')}; run the same command "
                          "again to resume", getattr(err, "signum", signal.SIGINT)) from None

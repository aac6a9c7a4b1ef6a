"""Stage B, the rubric windows: a balanced half that shows every document, then a half stratified by Rasch ability.

The preliminary abilities that order the second half come from :func:`rasch_abilities`, one batched fit
over the balanced half's answers of every query.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from rcp_jax.errors import DataError
from rcp_jax.judging.store.records import Window
from rcp_jax.schedule.config import DEFAULT_CONFIG, ScheduleConfig, ScheduleWarning, schedule_counts
from rcp_jax.schedule.windows import _degenerate, _least_shown, _pool, _stratified_phase, _windows, query_rng


def check_rubric_coverage(query_id: str, n: int, config: ScheduleConfig = DEFAULT_CONFIG) -> None:
    """Refuse (``DataError``) a rubric schedule whose balanced half cannot show every document.

    Call it for every query before the first judge call: a half-covered pool cannot be calibrated.
    """
    counts = schedule_counts(n, config)
    if counts.rubric_balanced * counts.window_size < n:
        raise DataError(
            f"query {query_id!r}: the rubric's balanced half has {counts.rubric_balanced} window(s) of "
            f"{counts.window_size} = {counts.rubric_balanced * counts.window_size} placements for {n} "
            f"documents, so some would never be judged; raise ScheduleConfig.rubric_placements (now "
            f"{float(config.rubric_placements):.2f}) to about 2 or more per document"
        )


def rubric_balanced(
    query_id: str, doc_ids: Sequence[str], *, seed: int, dataset: str = "", config: ScheduleConfig = DEFAULT_CONFIG
) -> list[Window]:
    """First rubric half: each window the ``k`` least-shown documents (every document shown), shuffled.

    Raises:
        DataError: the half cannot show every document (:func:`check_rubric_coverage`), before any window.

    Returns:
        ``rubric_balanced`` windows of stage ``rubric``, phase ``balanced``, no two in the same order (a
        pool of 2 or 3 documents, with fewer orders than windows, gets fewer).
    """
    docs = _pool(query_id, doc_ids)
    if not docs:
        _degenerate(query_id, docs, "rubric")
        return []
    check_rubric_coverage(query_id, len(docs), config)
    counts = schedule_counts(len(docs), config)
    rng = query_rng(seed, dataset, query_id, "rubric_balanced")
    picks = _least_shown(rng, len(docs), counts.window_size, counts.rubric_balanced, used=set())
    return _windows(query_id, "rubric", "balanced", docs, picks)


def rubric_stratified(
    query_id: str,
    doc_ids: Sequence[str],
    abilities: Mapping[str, float] | Sequence[float] | np.ndarray,
    *,
    seed: int,
    dataset: str = "",
    config: ScheduleConfig = DEFAULT_CONFIG,
) -> list[Window]:
    """Second rubric half: contiguous blocks of documents of similar preliminary Rasch ability.

    Args:
        abilities: preliminary ability of every pool document (mapping or float[n] in pool order),
            e.g. from :func:`rasch_abilities` on the balanced half's answers.

    Returns:
        ``rubric_stratified`` windows of stage ``rubric``, phase ``stratified``, shuffled within a window
        in orders the balanced half (recomputed from the same arguments) did not ask.
    """
    docs = _pool(query_id, doc_ids)
    counts = schedule_counts(len(docs), config)
    earlier = rubric_balanced(query_id, docs, seed=seed, dataset=dataset, config=config) if counts.rubric_stratified else []
    return _stratified_phase(query_id, docs, abilities, "Rasch ability", stage="rubric", phase="stratified",
                             stream="rubric_stratified", count=counts.rubric_stratified,
                             window_size=counts.window_size, tie_replace=config.tie_replace, seed=seed,
                             dataset=dataset, earlier=earlier)


def _criteria_columns(columns) -> list[str]:
    crit = sorted((c for c in columns if isinstance(c, str) and c[:1] == "C" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    if not crit or crit != [f"C{i}" for i in range(1, len(crit) + 1)]:
        raise DataError(
            f"rubric answers need criterion columns C1..CK (a contiguous ladder); got {list(columns)}"
        )
    return crit


def rasch_abilities(pools: Mapping[str, Sequence[str]], answers) -> dict[str, np.ndarray]:
    """Preliminary Rasch abilities of every pool document, all queries in one batched fit.

    Args:
        pools: query_id -> pool (doc ids in pool order).
        answers: pandas DataFrame with columns ``query_id, doc_id, C1..CK`` (one row per placement,
            answers 0/1), e.g. the balanced half's answers.

    Returns:
        query_id -> float64[n] abilities in pool order (``rcp_jax.models.irt.fit_rasch``, ridge 1e-4, beta
        centred). A document without any answer sits at the prior (0) and a :class:`ScheduleWarning`
        names it.
    """
    from rcp_jax.models.irt import fit_rasch  # JAX is imported only when abilities are actually fitted

    for col in ("query_id", "doc_id"):
        if col not in answers.columns:
            raise DataError(f"rubric answers are missing column {col!r}; expected query_id, doc_id, C1..CK")
    crit = _criteria_columns(answers.columns)
    qids = [str(q) for q in pools]
    pools_t = {q: _pool(q, pools[q]) for q in qids}
    if not qids:
        return {}
    n_max = max(1, max(len(p) for p in pools_t.values()))
    passes = np.zeros((len(qids), n_max, len(crit)))
    trials = np.zeros_like(passes)
    qpos = {q: i for i, q in enumerate(qids)}
    dpos = {q: {d: i for i, d in enumerate(p)} for q, p in pools_t.items()}
    values = answers[crit].to_numpy(dtype=np.float64)
    if not np.isin(values, (0.0, 1.0)).all():
        raise DataError("rubric answers must be 0 or 1 in every criterion column")
    for (q, d), row in zip(zip(answers["query_id"].astype(str), answers["doc_id"].astype(str)), values):
        if q not in qpos:
            continue
        i = dpos[q].get(d)
        if i is None:
            raise DataError(f"rubric answer for document {d!r} of query {q!r}, which is not in that query's pool")
        passes[qpos[q], i] += row
        trials[qpos[q], i] += 1.0
    theta, _ = fit_rasch(passes, trials)
    out = {}
    for q in qids:
        n = len(pools_t[q])
        unanswered = [pools_t[q][i] for i in np.flatnonzero(trials[qpos[q], :n, 0] == 0)]
        if unanswered and n:
            warnings.warn(
                f"query {q!r}: no rubric answers for {len(unanswered)} document(s) {unanswered[:5]}; their "
                "preliminary ability is the prior 0", ScheduleWarning, stacklevel=2,
            )
        th = np.asarray(theta[qpos[q], :n], dtype=np.float64)
        th[trials[qpos[q], :n, 0] == 0] = 0.0
        out[q] = th
    return out

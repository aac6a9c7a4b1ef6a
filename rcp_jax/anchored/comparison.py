"""Human-anchored comparison of systems from a per-query table (what ``rcp-jax evaluate --out`` writes).

The table has one row per (system, query) with the judge metric on every query (``rcp_ndcg``) and the human
metric on the labelled ones (``qrel_ndcg``, NaN elsewhere). Each system's human-metric mean and each pair's
difference are estimated with :func:`rcp_jax.anchored.ppi.anchored_mean` (a pair works on per-query
differences, with its own lambda), beside the human-only and the judge-only numbers. Decisions: a pair is
called when its Holm-adjusted (``correction``) p-value is at most ``1 - level``; the per-pair intervals
are not adjusted. A labelling plan (:func:`plan_labels`) records the rounds and probabilities with which
queries were drawn; passed back as ``design``, it weights the estimate so the intervals stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rcp_jax.anchored.active import (draw_fixed_size, inclusion_probabilities, judge_signal_scale, pooled_scale,
                                     predicted_residual_scale, uncertainty_scale)
from rcp_jax.anchored.ppi import anchored_mean, correlation_on_labelled, human_only_mean
from rcp_jax.errors import DataError

PLAN_COLUMNS = ("round", "query_id", "pi", "selected", "predicted_residual")


@dataclass(frozen=True)
class QueryArrays:
    """The per-query table as arrays: ``human``/``judge`` float[S, N] (human NaN = unlabelled),
    ``extra`` float[S, N] or None, ``systems`` and ``queries`` their ids."""

    human: np.ndarray
    judge: np.ndarray
    extra: np.ndarray | None
    systems: list[str]
    queries: list[str]

    @property
    def labelled(self) -> np.ndarray:
        return np.isfinite(self.human[0])


def query_arrays(table: pd.DataFrame, human: str = "qrel_ndcg", judge: str = "rcp_ndcg",
                 extra: str | None = None) -> QueryArrays:
    """Pivot the per-query table to arrays; a clear DataError for a missing column, a judge value missing for a
    (system, query), or a query labelled for some systems only."""
    for col in ("system", "query_id", human, judge, *([extra] if extra else [])):
        if col not in table.columns:
            raise DataError(f"the per-query table has no column {col!r} (columns: {', '.join(map(str, table.columns))})")
    if "dataset" in table.columns and table["dataset"].nunique() > 1:
        raise DataError("the per-query table holds several datasets; compare one at a time (filter the dataset column)")
    dup = table.duplicated(["system", "query_id"])
    if dup.any():
        row = table.loc[dup].iloc[0]
        raise DataError(f"system {row['system']!r}, query {row['query_id']!r} appears twice in the per-query table")
    cols = [human, judge, *([extra] if extra else [])]
    wide = table.assign(system=table["system"].astype(str), query_id=table["query_id"].astype(str)).pivot(
        index="system", columns="query_id", values=cols)
    systems = [str(s) for s in wide.index]
    queries = [str(q) for q in wide[judge].columns]
    judge_v = wide[judge].to_numpy(dtype=np.float64)
    if not np.isfinite(judge_v).all():
        s, q = np.argwhere(~np.isfinite(judge_v))[0]
        raise DataError(f"{judge} is missing for system {systems[s]!r} on query {queries[q]!r}: the judge metric must "
                        "cover every query of every system")
    human_v = wide[human].to_numpy(dtype=np.float64)
    some = np.isfinite(human_v).any(0) & ~np.isfinite(human_v).all(0)
    if some.any():
        q = int(np.argmax(some))
        raise DataError(f"query {queries[q]!r} has {human} for some systems only; a labelled query needs it for every "
                        "system")
    extra_v = None
    if extra:
        extra_v = wide[extra].to_numpy(dtype=np.float64)
        if not np.isfinite(extra_v).all():
            raise DataError(f"{extra} must be finite for every system and query")
    if len(systems) < 2:
        raise DataError("the per-query table needs at least two systems to compare")
    return QueryArrays(human_v, judge_v, extra_v, systems, queries)


def design_arrays(plan: pd.DataFrame | None, queries: list[str], labelled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(batch int[N], pi float[N])`` from a labelling plan: round 0 = labelled outside any plan (a simple random
    sample), round b = drawn in the plan's round b with probability pi; -1 = unlabelled."""
    batch = np.where(labelled, 0, -1)
    pi = np.ones(len(queries))
    if plan is None:
        return batch, pi
    missing = [c for c in ("round", "query_id", "pi", "selected") if c not in plan.columns]
    if missing:
        raise DataError(f"the labelling plan lacks the column(s) {', '.join(missing)}; write it with `rcp-jax plan-labels`")
    index = {q: i for i, q in enumerate(queries)}
    unknown = sorted(set(plan["query_id"].astype(str)) - set(index))
    if unknown:
        raise DataError(f"the labelling plan names queries the per-query table lacks: {', '.join(unknown[:5])}")
    eligible_once = np.zeros(len(queries), bool)
    for row in plan.itertuples(index=False):
        i = index[str(row.query_id)]
        eligible_once[i] = True
        if int(row.selected):
            if batch[i] > 0:
                raise DataError(f"query {row.query_id!r} is selected in two rounds of the labelling plan")
            if not labelled[i]:
                raise DataError(f"query {row.query_id!r} was selected in round {row.round} of the labelling plan but has "
                                "no human label: label every selected query (a skipped one would bias the estimate)")
            batch[i] = int(row.round)
            pi[i] = float(row.pi)
    outside = labelled & eligible_once & (batch == 0)
    if outside.any():
        q = queries[int(np.argmax(outside))]
        raise DataError(f"query {q!r} has a human label but the labelling plan did not select it: labels gathered "
                        "outside the plan break its probabilities (drop that label, or start a new plan)")
    return batch, pi


@dataclass(frozen=True)
class AnchoredComparison:
    """``systems`` (one row per system) and ``pairs`` (one row per pair) tables, the settings, the assumptions."""

    systems: pd.DataFrame
    pairs: pd.DataFrame
    n_queries: int
    n_labelled: int
    level: float
    correction: str
    target: str
    human: str
    judge: str
    assumptions: tuple[str, ...]

    def to_text(self) -> str:
        """An aligned text report: who wins, by how much, how sure, beside human-only and judge-only."""
        lines = [f"{self.human} anchored by {self.judge}: {self.n_labelled} of {self.n_queries} queries labelled; "
                 f"{self.level:.0%} intervals; target: {self.target}",
                 "", "systems (mean human metric):",
                 f"{'system':<14}{'judge-only':>11}{'human-only':>29}{'anchored':>29}{'lambda':>8}"]
        for r in self.systems.itertuples(index=False):
            lines.append(f"{r.system:<14}{r.judge_mean:>11.4f}{_iv(r.human_only, r.human_only_low, r.human_only_high):>29}"
                         f"{_iv(r.anchored, r.anchored_low, r.anchored_high):>29}{r.lam:>8.2f}")
        lines += ["", f"pairs (difference A - B; called at Holm-adjusted p <= {1 - self.level:.2f}):",
                  f"{'A':<10}{'B':<10}{'judge-only':>11}{'human-only':>29}{'anchored':>29}{'width':>7}{'p adj':>8}  verdict"]
        for r in self.pairs.itertuples(index=False):
            lines.append(f"{r.system_a:<10}{r.system_b:<10}{r.judge_diff:>11.4f}"
                         f"{_iv(r.human_only, r.human_only_low, r.human_only_high):>29}"
                         f"{_iv(r.anchored, r.anchored_low, r.anchored_high):>29}{r.width_ratio:>7.2f}"
                         f"{r.p_adjusted:>8.3f}  {r.verdict}")
        lines += ["", "width: anchored / human-only interval width", "assumptions:",
                  *[f"  - {a}" for a in self.assumptions]]
        return "\n".join(lines)


def _quiet(fn, *args):
    """``fn(*args)`` with NumPy's 0 / 0 warnings silenced (a pair equal on every labelled query gives NaN)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return fn(*args)


def _iv(est: float, low: float, high: float) -> str:
    if not np.isfinite(low):
        return f"{est:+.4f} [n/a]"
    return f"{est:+.4f} [{low:+.4f}, {high:+.4f}]"


def anchored_comparison(table: pd.DataFrame, *, human: str = "qrel_ndcg", judge: str = "rcp_ndcg",
                        plan: pd.DataFrame | None = None, level: float = 0.9, correction: str = "holm",
                        target: str = "benchmark") -> AnchoredComparison:
    """Each system's and each pair's human-metric estimate, anchored by the judge metric on every query.

    Args:
        table: per-query table (``system``, ``query_id``, ``human``, ``judge`` columns; ``human`` NaN = unlabelled).
        human, judge: the column names.
        plan: the labelling plan(s) that drew the labels (``rcp-jax plan-labels``), or None (the labelled
            queries are a simple random sample of the table's queries).
        level: interval coverage (default 0.9); pairs are called at ``1 - level`` after ``correction``.
        correction: ``holm`` (default), ``bonferroni`` or ``none``, over the pairs' p-values.
        target: ``benchmark`` (the mean over the table's queries) or ``superpopulation``.
    """
    from rcp_jax.stats.paired import adjust_pvalues

    arr = query_arrays(table, human, judge)
    labelled = arr.labelled
    if labelled.sum() < 4:
        raise DataError(f"{human} is present on {int(labelled.sum())} queries; the anchored estimate needs at least 4 "
                        "labelled queries")
    batch, pi = design_arrays(plan, arr.queries, labelled)
    every_query = target == "benchmark" and bool(labelled.all())
    if every_query:  # the benchmark mean is known exactly: zero-width intervals would call any difference
        target = "superpopulation"
    kwargs = dict(level=level, target=target)
    if plan is not None:
        kwargs.update(pi=pi, batch=batch)
    sys_anch = anchored_mean(arr.human, arr.judge, **kwargs)
    sys_hum = human_only_mean(arr.human, **kwargs)
    systems = pd.DataFrame({
        "system": arr.systems, "judge_mean": arr.judge.mean(-1),
        "human_only": sys_hum.estimate, "human_only_low": sys_hum.low, "human_only_high": sys_hum.high,
        "anchored": sys_anch.estimate, "anchored_low": sys_anch.low, "anchored_high": sys_anch.high,
        "lam": sys_anch.lam, "n_labelled": sys_anch.n_labelled,
    })
    s = len(arr.systems)
    ia, ib = np.triu_indices(s, 1)
    y = arr.human[ia] - arr.human[ib]
    f = arr.judge[ia] - arr.judge[ib]
    with np.errstate(invalid="ignore", divide="ignore"):  # a pair equal on every labelled query: width 0 / 0
        anch = anchored_mean(y, f, **kwargs)
        hum = human_only_mean(y, **kwargs)
    p_adj = adjust_pvalues(anch.p_value, correction)
    alpha = 1.0 - level
    names = np.array(arr.systems, dtype=object)
    verdict = np.where(p_adj <= alpha, np.where(anch.estimate > 0, names[ia], names[ib]) + " better", "undecided")
    pairs = pd.DataFrame({
        "system_a": [arr.systems[i] for i in ia], "system_b": [arr.systems[i] for i in ib],
        "judge_diff": f.mean(-1),
        "human_only": hum.estimate, "human_only_low": hum.low, "human_only_high": hum.high, "human_only_p": hum.p_value,
        "anchored": anch.estimate, "anchored_low": anch.low, "anchored_high": anch.high, "anchored_se": anch.se,
        "p_value": anch.p_value, "p_adjusted": p_adj, "lam": anch.lam,
        "correlation": _quiet(correlation_on_labelled, y, f), "width_ratio": _quiet(np.divide, anch.width, hum.width),
        "verdict": verdict,
    })
    n, n_lab = len(arr.queries), int(labelled.sum())
    how = ("drawn in the rounds of the labelling plan with its recorded probabilities (labels outside the plan: a "
           "simple random sample)" if plan is not None else "a simple random sample of the table's queries")
    assumptions = (
        f"the {n_lab} labelled queries are {how}; labels chosen by looking at the scores would bias the estimate",
        (f"inference target: the mean {human} over these {n} queries (the benchmark)" if target == "benchmark" else
         f"inference target: the mean {human} of the population these {n} queries were drawn from"
         + (f" (every one of the {n} queries is labelled, so their own mean is known exactly and the judge adds nothing "
            "to it: the intervals and calls are for queries like these, as --target superpopulation)"
            if every_query else "")),
        f"{judge} is known on every query of every system; it may be biased (lambda rescales it; its bias cancels)",
        "t intervals (a normal approximation) whose variance counts the fitted lambda's own error (leave-one-out "
        "residuals): with very few labels or very skewed differences they are rough",
    )
    return AnchoredComparison(systems=systems, pairs=pairs, n_queries=n, n_labelled=n_lab, level=level,
                              correction=correction, target=target, human=human, judge=judge, assumptions=assumptions)


def plan_labels(table: pd.DataFrame, budget: int, *, human: str = "qrel_ndcg", judge: str = "rcp_ndcg",
                plan: pd.DataFrame | None = None, uncertainty: str | None = None, uniform_share: float = 0.2,
                level: float = 0.9, seed: int = 0, spread: bool = True) -> pd.DataFrame:
    """The next round of queries to send to human assessors: one row per unlabelled query.

    Columns: ``round`` (one more than ``plan``'s last), ``query_id``, ``pi`` (its probability of being drawn),
    ``selected`` (1 = label it), ``predicted_residual`` (its score). Exactly ``budget`` queries are selected
    (fewer when fewer are unlabelled), each with probability exactly ``pi`` (randomised systematic sampling,
    :func:`rcp_jax.anchored.active.draw_fixed_size`, with ``seed``). The score is, in order of preference:

    * with ``uncertainty`` (a per-(system, query) column of the judge's own uncertainty, e.g. the posterior ``sd``
      of RCP-nDCG) or ``spread``: :func:`rcp_jax.anchored.active.judge_signal_scale` of each pair's judge
      difference (its outlyingness, unless ``spread`` is False) and sd ``sqrt(sd_a^2 + sd_b^2)``, over the pairs
      still undecided when 4 or more queries are labelled (all pairs otherwise); no labels needed;
    * with neither and 4 or more labels: the residual-size model of :mod:`rcp_jax.anchored.active`;
    * otherwise: uniform.

    Append the rows to the previous plan and pass the whole plan to :func:`anchored_comparison` (a plan's first
    round with no labels before it is one design with known ``pi``: the Horvitz-Thompson form of the estimator).
    """
    arr = query_arrays(table, human, judge, uncertainty)
    labelled = arr.labelled
    design_arrays(plan, arr.queries, labelled)  # the same checks as the estimator
    eligible = ~labelled
    if not eligible.any():
        raise DataError("every query is labelled already: nothing to plan")
    if budget < 1:
        raise DataError(f"--budget must be at least 1; got {budget}")
    s = len(arr.systems)
    ia, ib = np.triu_indices(s, 1)
    comp = anchored_comparison(table, human=human, judge=judge, plan=plan, level=level) if labelled.sum() >= 4 else None
    undecided = None if comp is None else (comp.pairs["verdict"] == "undecided").to_numpy()
    f = arr.judge[ia] - arr.judge[ib]
    if arr.extra is not None and (arr.extra < 0).any():
        raise DataError(f"{uncertainty} must be non-negative (an sd)")
    if spread:
        pair_sd = None if arr.extra is None else np.sqrt(arr.extra[ia] ** 2 + arr.extra[ib] ** 2)
        score = judge_signal_scale(f, pair_sd, undecided)
    elif arr.extra is not None:
        score = uncertainty_scale(np.sqrt(arr.extra[ia] ** 2 + arr.extra[ib] ** 2), undecided)
    elif comp is not None:
        y = arr.human[ia] - arr.human[ib]
        scale = predicted_residual_scale(y, f)
        score = pooled_scale(scale, comp.pairs["anchored_se"].to_numpy() ** 2, undecided)
    else:
        score = np.ones(len(arr.queries))
    pi = inclusion_probabilities(score, float(budget), eligible, uniform_share=uniform_share)
    draw = draw_fixed_size(np.random.default_rng(seed), pi)
    next_round = 1 if plan is None or plan.empty else int(plan["round"].max()) + 1
    out = pd.DataFrame({"round": next_round, "query_id": arr.queries, "pi": pi, "selected": draw.astype(int),
                        "predicted_residual": score})
    return out.loc[eligible].reset_index(drop=True)

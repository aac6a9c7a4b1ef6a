"""Comparing systems: pairwise significance, sensitivity, agreement between metrics (METHOD section 5).

Input is a tidy **per-query table**, one row per (system, query): columns ``system``, ``query_id``,
optionally ``dataset`` (default: one dataset named ``all``) and one column per metric (e.g.
``qrel_ndcg``, ``count_ndcg``, ``rcp_ndcg``; NaN = not scored, e.g. qrel-nDCG of a query without a
positive qrel). Query ids are only unique within a dataset.

For each metric, dataset and pair of systems :func:`compare_systems` reports the mean difference over
the queries both systems have, a paired t-test (scipy ``ttest_rel``), a Wilcoxon signed-rank test, a
randomisation test (JAX, all pairs at once), a percentile bootstrap interval, Holm and Bonferroni
adjusted p-values, and whether the pair is *separated*. Sensitivity is the share of pairs separated in
each dataset, then the unweighted mean over datasets (the paper's "pairs distinguished"). The array-level
tests live in :mod:`rcp_jax.paired`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rcp_jax.errors import DataError
from rcp_jax.paired import (
    CORRECTIONS,
    adjust_pvalues,
    bootstrap_mean_ci,
    kendall_tau_b,
    paired_t_test,
    randomisation_test,
    spearman_rho,
    wilcoxon_signed_rank,
)

DEFAULT_METRICS = ("qrel_ndcg", "count_ndcg", "rcp_ndcg")
ID_COLUMNS = ("system", "query_id", "dataset")
SINGLE_DATASET = "all"
TESTS = ("t", "wilcoxon", "permutation")
_P_COLUMN = {"t": "p_t", "wilcoxon": "p_wilcoxon", "permutation": "p_permutation"}


# ----------------------------------------------------------------------------------------------- input
def metric_columns(per_query: pd.DataFrame) -> list[str]:
    """The metric columns of a per-query table: the known ones (qrel/count/rcp nDCG) if present, else
    every numeric column that is not an id column."""
    known = [m for m in DEFAULT_METRICS if m in per_query.columns]
    if known:
        return known
    return [
        c for c in per_query.columns
        if c not in ID_COLUMNS and pd.api.types.is_numeric_dtype(per_query[c])
    ]


def prepare_per_query(per_query: pd.DataFrame, metrics: Sequence[str] | None = None,
                      *, source: str = "per-query table") -> tuple[pd.DataFrame, list[str]]:
    """Validate a per-query table and return ``(clean copy, metric names)``.

    The copy has string ``system``, ``query_id``, ``dataset`` columns (``dataset`` added as ``all`` when
    missing) and float64 metric columns. Raises :class:`DataError` naming ``source``, the column and the
    offending row for missing columns, non-numeric or infinite values and duplicate rows.
    """
    if not isinstance(per_query, pd.DataFrame):
        raise DataError(f"{source}: expected a pandas DataFrame, got {type(per_query).__name__}")
    missing = [c for c in ("system", "query_id") if c not in per_query.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {', '.join(missing)}; a per-query table needs system, query_id, "
            f"[dataset] and metric columns (have: {', '.join(map(str, per_query.columns))})"
        )
    metrics = list(metrics) if metrics is not None else metric_columns(per_query)
    if not metrics:
        raise DataError(f"{source}: no metric column found; add numeric columns such as rcp_ndcg, qrel_ndcg")
    absent = [m for m in metrics if m not in per_query.columns]
    if absent:
        raise DataError(
            f"{source}: metric column(s) {', '.join(absent)} not found "
            f"(have: {', '.join(map(str, per_query.columns))})"
        )
    out = pd.DataFrame({
        "system": per_query["system"].astype(str).to_numpy(),
        "query_id": per_query["query_id"].astype(str).to_numpy(),
        "dataset": (per_query["dataset"].astype(str).to_numpy() if "dataset" in per_query.columns
                    else np.full(len(per_query), SINGLE_DATASET, dtype=object)),
    })
    for m in metrics:
        values = pd.to_numeric(per_query[m], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.isnan(values) & per_query[m].notna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{source}: column {m!r} row {i} (system {out.system[i]!r}, query {out.query_id[i]!r}) is not "
                f"a number: {per_query[m].iloc[i]!r}; fix the value or leave it empty (NaN = not scored)"
            )
        if np.isinf(values).any():
            i = int(np.flatnonzero(np.isinf(values))[0])
            raise DataError(
                f"{source}: column {m!r} row {i} (system {out.system[i]!r}, query {out.query_id[i]!r}) is "
                f"infinite; per-query metric values must be finite or NaN"
            )
        out[m] = values
    dup = out.duplicated(["dataset", "query_id", "system"], keep=False)
    if dup.any():
        row = out[dup].iloc[0]
        raise DataError(
            f"{source}: system {row.system!r} has more than one row for query {row.query_id!r} of dataset "
            f"{row.dataset!r}; keep one row per (dataset, query_id, system)"
        )
    return out, metrics


def score_matrix(
    per_query: pd.DataFrame,
    metric: str,
    *,
    dataset: str | None = None,
    systems: Sequence[str] | None = None,
) -> tuple[list[str], list[str], np.ndarray]:
    """Pivot one metric of one dataset into a system x query matrix.

    Args:
        per_query: validated per-query table (see :func:`prepare_per_query`).
        metric: metric column.
        dataset: dataset to take (default: the only one; an error if there are several).
        systems: row order (default: sorted names).

    Returns:
        ``(systems, query_ids, X)`` with ``X: float64[S, Q]``, NaN where a system has no finite value.
        Queries where no system has a value are dropped.

    Example:
        >>> df = pd.DataFrame({"system": ["a", "b", "a", "b"], "query_id": ["q1", "q1", "q2", "q2"],
        ...                    "rcp_ndcg": [0.5, 0.4, 0.9, 0.7]})
        >>> score_matrix(prepare_per_query(df)[0], "rcp_ndcg")[2].tolist()
        [[0.5, 0.9], [0.4, 0.7]]
    """
    if dataset is None:
        names = per_query["dataset"].unique()
        if len(names) > 1:
            raise DataError(f"the table holds {len(names)} datasets; pass dataset= one of {sorted(names)}")
        dataset = names[0] if len(names) else SINGLE_DATASET
    part = per_query[(per_query["dataset"] == dataset) & per_query[metric].notna()]
    wide = part.pivot(index="system", columns="query_id", values=metric)
    systems = sorted(per_query["system"].unique()) if systems is None else list(systems)
    wide = wide.reindex(index=systems)
    wide = wide.loc[:, sorted(wide.columns)]
    return systems, [str(q) for q in wide.columns], wide.to_numpy(dtype=np.float64)


def system_scores(per_query: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Aggregate scores: mean over queries per dataset, then unweighted mean over datasets.

    Returns:
        Tidy DataFrame with columns ``metric, system, score, n_datasets, n_queries`` (NaN values dropped
        before averaging), sorted by metric then score descending.
    """
    df, metrics = prepare_per_query(per_query, metrics)
    rows = []
    for m in metrics:
        per_ds = df.dropna(subset=[m]).groupby(["system", "dataset"])[m].agg(["mean", "size"]).reset_index()
        agg = per_ds.groupby("system").agg(score=("mean", "mean"), n_datasets=("mean", "size"),
                                           n_queries=("size", "sum")).reset_index()
        agg.insert(0, "metric", m)
        rows.append(agg.sort_values(["score", "system"], ascending=[False, True]))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["metric", "system", "score", "n_datasets", "n_queries"])


# ------------------------------------------------------------------------------------------ comparison
@dataclass(frozen=True)
class Comparison:
    """Everything :func:`compare_systems` computed; every table is tidy.

    Attributes:
        pairs: one row per (metric, dataset, system_a, system_b): ``n_queries, mean_a, mean_b, diff``
            (mean of a - b over common queries), ``ci_low, ci_high`` (bootstrap), ``t, p_t, p_wilcoxon,
            p_permutation`` (those computed), ``p`` (of the chosen test), ``p_holm, p_bonferroni`` (within
            the metric x dataset family), ``separated`` (bool).
        overall: one row per (metric, system_a, system_b): ``n_datasets, diff`` (mean over datasets of
            the per-dataset mean difference), ``ci_low, ci_high`` (queries resampled within dataset).
        sensitivity: one row per (metric, dataset): ``n_pairs, n_separated, share``.
        systems: aggregate score per (metric, system), see :func:`system_scores`.
        kendall: Kendall tau-b between the system orderings of every two metrics.
        agreement: sign agreement on separated pairs for every (reference, other) metric pair, see
            :func:`sign_agreement`.
        metrics, alpha, test, correction: the settings used.
    """

    pairs: pd.DataFrame
    overall: pd.DataFrame
    sensitivity: pd.DataFrame
    systems: pd.DataFrame
    kendall: pd.DataFrame
    agreement: pd.DataFrame
    metrics: tuple[str, ...]
    alpha: float
    test: str
    correction: str

    def sensitivity_summary(self) -> pd.DataFrame:
        """Per metric: mean share of separated pairs over datasets, and the totals."""
        g = self.sensitivity.groupby("metric", sort=False)
        out = g.agg(mean_share=("share", "mean"), n_separated=("n_separated", "sum"),
                    n_pairs=("n_pairs", "sum"), n_datasets=("dataset", "size")).reset_index()
        return out

    def sensitivity_table(self) -> pd.DataFrame:
        """Metrics side by side: rows = datasets + ``mean``, cells ``"k/n (xx.x%)"``."""
        cells = {}
        for m in self.metrics:
            s = self.sensitivity[self.sensitivity.metric == m].set_index("dataset")
            col = {ds: f"{int(r.n_separated)}/{int(r.n_pairs)} ({100 * r.share:.1f}%)" for ds, r in s.iterrows()}
            col["mean"] = f"{100 * s.share.mean():.1f}%" if len(s) else ""
            cells[m] = col
        datasets = sorted(self.sensitivity.dataset.unique())
        table = pd.DataFrame(cells).reindex(datasets + ["mean"]).fillna("")
        table.index.name = "dataset"
        return table.reset_index()

    def to_markdown(self, *, include_pairs: bool = False) -> str:
        """Markdown report: sensitivity side by side, system scores, sign agreement, Kendall tau."""
        return _report(self, "markdown", include_pairs)

    def to_latex(self, *, include_pairs: bool = False) -> str:
        """The same report as LaTeX ``tabular`` environments."""
        return _report(self, "latex", include_pairs)


def compare_systems(
    per_query: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    alpha: float = 0.05,
    test: str = "t",
    correction: str = "none",
    tests: Sequence[str] | None = None,
    n_permutations: int = 100_000,
    n_bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    systems: Sequence[str] | None = None,
) -> Comparison:
    """Compare every pair of systems on every metric and dataset.

    Args:
        per_query: tidy table ``system, query_id, [dataset], <metric columns>`` (see module doc).
        metrics: metric columns to use (default: :func:`metric_columns`).
        alpha: significance level of "separated".
        test: the test that decides separation: ``t`` (paired t-test, the paper's), ``wilcoxon`` or
            ``permutation``.
        correction: ``none`` (the paper), ``holm`` or ``bonferroni``, applied within each metric x
            dataset family of pairs.
        tests: which tests to compute (default all three; must include ``test``).
        n_permutations: sign vectors of the randomisation test (exact enumeration when ``2**Q`` is not
            larger).
        n_bootstrap: bootstrap resamples of the intervals.
        level: interval coverage.
        seed: seed of the randomisation test and the bootstrap.
        systems: system order (pairs are (earlier, later)); default: by the first metric's aggregate
            score, best first, so differences are mostly positive.

    Returns:
        :class:`Comparison`.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> rows = [{"system": s, "query_id": f"q{q}", "rcp_ndcg": 0.5 + 0.1 * i + 0.05 * rng.normal()}
        ...         for i, s in enumerate(["a", "b", "c"]) for q in range(20)]
        >>> c = compare_systems(pd.DataFrame(rows), n_permutations=2000, n_bootstrap=200)
        >>> c.sensitivity[["metric", "n_pairs", "n_separated"]].values.tolist()
        [['rcp_ndcg', 3, 3]]
    """
    df, metrics = prepare_per_query(per_query, metrics)
    if test not in TESTS:
        raise DataError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise DataError(f"unknown correction {correction!r}; choose one of {', '.join(CORRECTIONS)}")
    tests = list(TESTS if tests is None else tests)
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        raise DataError(f"unknown test(s) {unknown}; choose from {', '.join(TESTS)}")
    if test not in tests:
        tests.append(test)
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be in (0, 1), got {alpha}")

    scores = system_scores(df, metrics)
    if systems is None:
        first = scores[scores.metric == metrics[0]].set_index("system")["score"]

        def order(name: str) -> tuple[float, str]:
            value = first.get(name, np.nan)
            return (-value if np.isfinite(value) else np.inf, name)

        systems = sorted(df["system"].unique(), key=order)
    else:
        systems = list(systems)
        unknown_sys = sorted(set(systems) - set(df["system"]))
        if unknown_sys:
            raise DataError(f"systems {unknown_sys} are not in the per-query table")
    if len(systems) < 2:
        raise DataError(f"need at least two systems to compare, got {systems}")
    ia, ib = np.triu_indices(len(systems), 1)
    datasets = sorted(df["dataset"].unique())

    blocks = []  # (metric, dataset, D)
    pair_frames = []
    for mi, m in enumerate(metrics):
        for di, ds in enumerate(datasets):
            _, _, x = score_matrix(df, m, dataset=ds, systems=systems)
            if x.shape[1] == 0:
                continue
            d = x[ia] - x[ib]
            valid = np.isfinite(d)
            n = valid.sum(1)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean_a = np.where(valid, x[ia], 0.0).sum(1) / n
                mean_b = np.where(valid, x[ib], 0.0).sum(1) / n
                diff = np.where(valid, d, 0.0).sum(1) / n
            t, p_t = paired_t_test(d)
            frame = pd.DataFrame({
                "metric": m, "dataset": ds,
                "system_a": [systems[i] for i in ia], "system_b": [systems[j] for j in ib],
                "n_queries": n, "mean_a": mean_a, "mean_b": mean_b, "diff": diff,
            })
            lo, hi = bootstrap_mean_ci(d, n_bootstrap=n_bootstrap, level=level, seed=seed + 7919 * mi + di)
            frame["ci_low"], frame["ci_high"] = lo, hi
            if "t" in tests:
                frame["t"], frame["p_t"] = t, p_t
            if "wilcoxon" in tests:
                frame["p_wilcoxon"] = wilcoxon_signed_rank(d)[1]
            blocks.append(d)
            pair_frames.append(frame)
    if not pair_frames:
        raise DataError("no finite metric values to compare")
    pairs = pd.concat(pair_frames, ignore_index=True)
    if "permutation" in tests:
        q_max = max(b.shape[1] for b in blocks)
        stacked = np.concatenate([np.pad(b, ((0, 0), (0, q_max - b.shape[1])), constant_values=np.nan)
                                  for b in blocks])
        pairs["p_permutation"] = randomisation_test(stacked, n_permutations=n_permutations, seed=seed)
    pairs["p"] = pairs[_P_COLUMN[test]]
    untestable = pairs["n_queries"] < 2
    for col in ("p_t", "p_wilcoxon", "p_permutation", "p"):
        if col in pairs.columns:
            pairs.loc[untestable, col] = np.nan
    holm = np.full(len(pairs), np.nan)
    bonf = np.full(len(pairs), np.nan)
    for _, idx in pairs.groupby(["metric", "dataset"], sort=False).indices.items():
        holm[idx] = adjust_pvalues(pairs["p"].to_numpy()[idx], "holm")
        bonf[idx] = adjust_pvalues(pairs["p"].to_numpy()[idx], "bonferroni")
    pairs["p_holm"], pairs["p_bonferroni"] = holm, bonf
    decide = {"none": pairs["p"], "holm": pairs["p_holm"], "bonferroni": pairs["p_bonferroni"]}[correction]
    pairs["separated"] = (decide < alpha).fillna(False).astype(bool)

    overall = _overall(df, metrics, systems, ia, ib, n_bootstrap=n_bootstrap, level=level, seed=seed)
    sens = (pairs[pairs["p"].notna()].groupby(["metric", "dataset"], sort=False)
            .agg(n_pairs=("p", "size"), n_separated=("separated", "sum")).reset_index())
    sens["n_separated"] = sens["n_separated"].astype(int)
    sens["share"] = sens["n_separated"] / sens["n_pairs"]
    kendall = _kendall_table(scores, metrics)
    agreement = pd.concat(
        [sign_agreement(pairs, r, o).assign(reference=r, other=o) for r in metrics for o in metrics if r != o]
        or [pd.DataFrame()], ignore_index=True)
    if len(agreement):
        agreement = agreement[agreement.dataset == "all datasets"].drop(columns="dataset")
        agreement = agreement[["reference", "other"] + [c for c in agreement.columns
                                                         if c not in ("reference", "other")]]
        agreement = agreement.reset_index(drop=True)
    return Comparison(pairs=pairs, overall=overall, sensitivity=sens, systems=scores, kendall=kendall,
                      agreement=agreement, metrics=tuple(metrics), alpha=alpha, test=test,
                      correction=correction)


def _overall(df, metrics, systems, ia, ib, *, n_bootstrap, level, seed) -> pd.DataFrame:
    frames = []
    for mi, m in enumerate(metrics):
        cols, labels = [], []
        for ds in sorted(df["dataset"].unique()):
            _, _, x = score_matrix(df, m, dataset=ds, systems=systems)
            cols.append(x[ia] - x[ib])
            labels += [ds] * x.shape[1]
        d = np.concatenate(cols, axis=1)
        if d.shape[1] == 0:
            continue
        lab = np.asarray(labels)
        per_ds = []
        for ds in np.unique(lab):
            block = d[:, lab == ds]
            with np.errstate(invalid="ignore"):
                n = np.isfinite(block).sum(1)
                per_ds.append(np.where(n > 0, np.nansum(block, 1) / np.maximum(n, 1), np.nan))
        per_ds = np.stack(per_ds)
        lo, hi = bootstrap_mean_ci(d, groups=lab, n_bootstrap=n_bootstrap, level=level, seed=seed + 104729 + mi)
        present = np.isfinite(per_ds)
        with np.errstate(invalid="ignore", divide="ignore"):
            diff = np.where(present, per_ds, 0.0).sum(0) / present.sum(0)
        frames.append(pd.DataFrame({
            "metric": m, "system_a": [systems[i] for i in ia], "system_b": [systems[j] for j in ib],
            "n_datasets": present.sum(0), "diff": diff, "ci_low": lo, "ci_high": hi,
        }))
    return pd.concat(frames, ignore_index=True)


def _kendall_table(scores: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    wide = scores.pivot(index="system", columns="metric", values="score")
    rows = []
    for i, a in enumerate(metrics):
        for b in metrics[i + 1:]:
            ok = wide[[a, b]].dropna()
            rows.append({"metric_a": a, "metric_b": b, "n_systems": len(ok),
                         "kendall_tau": kendall_tau_b(ok[a], ok[b]), "spearman_rho": spearman_rho(ok[a], ok[b])})
    return pd.DataFrame(rows, columns=["metric_a", "metric_b", "n_systems", "kendall_tau", "spearman_rho"])


def sign_agreement(pairs: pd.DataFrame, reference: str, other: str) -> pd.DataFrame:
    """How often ``other`` agrees in sign with the pairs ``reference`` separates.

    Args:
        pairs: :attr:`Comparison.pairs` holding both metrics.
        reference: metric whose separated pairs are checked (e.g. ``qrel_ndcg``, the NIST judgements).
        other: metric whose mean difference is compared (e.g. ``rcp_ndcg``).

    Returns:
        One row per dataset plus ``all datasets``: ``n_reference_separated``, ``n_same_sign`` (other's
        mean difference has the same, non-zero sign), ``share_same_sign``, ``n_other_separated_same_sign``,
        ``n_other_separated_opposite`` (both separate the pair, in opposite directions).
    """
    key = ["dataset", "system_a", "system_b"]
    ref = pairs[pairs.metric == reference].set_index(key)
    oth = pairs[pairs.metric == other].set_index(key)
    if ref.empty or oth.empty:
        raise DataError(f"pairs table lacks metric {reference if ref.empty else other!r}")
    joined = pd.merge(ref[["diff", "separated"]], oth[["diff", "separated"]], left_index=True,
                      right_index=True, how="inner", suffixes=("_ref", "_oth"))
    sep = joined[joined.separated_ref]
    same = np.sign(sep.diff_ref) * np.sign(sep.diff_oth) > 0
    frame = pd.DataFrame({
        "dataset": sep.index.get_level_values("dataset"),
        "same": same.to_numpy(),
        "sep_same": (same & sep.separated_oth).to_numpy(),
        "sep_opp": ((np.sign(sep.diff_ref) * np.sign(sep.diff_oth) < 0) & sep.separated_oth).to_numpy(),
    })
    datasets = sorted(set(joined.index.get_level_values("dataset")))
    rows = []
    for ds in datasets + ["all datasets"]:
        f = frame if ds == "all datasets" else frame[frame.dataset == ds]
        n = len(f)
        rows.append({"dataset": ds, "n_reference_separated": n, "n_same_sign": int(f.same.sum()),
                     "share_same_sign": f.same.mean() if n else math.nan,
                     "n_other_separated_same_sign": int(f.sep_same.sum()),
                     "n_other_separated_opposite": int(f.sep_opp.sum())})
    return pd.DataFrame(rows)


def sensitivity_report(comparison: Comparison, reference: str = "qrel_ndcg", candidate: str = "rcp_ndcg") -> str:
    """One line per dataset and the mean: pairs separated by ``candidate`` versus ``reference``.

    This is the check "RCP separates more pairs than qrels" in words, e.g.
    ``dl19: rcp_ndcg 60/91 (65.9%) vs qrel_ndcg 14/91 (15.4%), +46 pairs``.
    """
    for m in (reference, candidate):
        if m not in comparison.metrics:
            raise DataError(f"metric {m!r} was not compared (have: {', '.join(comparison.metrics)})")
    s = comparison.sensitivity.set_index(["metric", "dataset"])
    lines = []
    for ds in sorted(comparison.sensitivity.dataset.unique()):
        if (reference, ds) not in s.index or (candidate, ds) not in s.index:
            continue
        r, c = s.loc[(reference, ds)], s.loc[(candidate, ds)]
        lines.append(f"{ds}: {candidate} {int(c.n_separated)}/{int(c.n_pairs)} ({100 * c.share:.1f}%) vs "
                     f"{reference} {int(r.n_separated)}/{int(r.n_pairs)} ({100 * r.share:.1f}%), "
                     f"{int(c.n_separated) - int(r.n_separated):+d} pairs")
    summ = comparison.sensitivity_summary().set_index("metric")
    rs, cs = summ.loc[reference, "mean_share"], summ.loc[candidate, "mean_share"]
    lines.append(f"mean over datasets: {candidate} {100 * cs:.1f}% vs {reference} {100 * rs:.1f}% "
                 f"({'more' if cs > rs else 'not more'} pairs separated; alpha={comparison.alpha}, "
                 f"test={comparison.test}, correction={comparison.correction})")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- robustness
def robustness(
    per_query_by_variant: Mapping[str, pd.DataFrame],
    metric: str = "rcp_ndcg",
    *,
    reference: str | None = None,
    alpha: float = 0.05,
    test: str = "t",
    correction: str = "none",
    n_permutations: int = 20_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Robustness of conclusions to the rubric or the judge: significant pairs that flip, rank agreement.

    Args:
        per_query_by_variant: variant name (rubric variant, judge) -> per-query table scored with that
            variant's calibration (same systems and queries).
        metric: metric column to compare (e.g. ``rcp_ndcg``).
        reference: the variant the others are checked against (default: the first).
        alpha, test, correction: decide "significant", as in :func:`compare_systems`.
        n_permutations: for ``test="permutation"``.
        seed: seed of the randomisation test.

    Returns:
        One row per other variant: ``n_pairs``, ``n_significant_reference``, ``n_significant_variant``,
        ``n_flipped`` (significant under the reference, mean difference of opposite sign under the
        variant), ``n_flipped_significant`` (significant under both, opposite signs), ``n_lost``
        (significant under the reference only), ``n_gained`` (under the variant only), and ``kendall_tau``,
        ``spearman_rho`` of the aggregate system orderings.
    """
    names = list(per_query_by_variant)
    if len(names) < 2:
        raise DataError("robustness needs at least two variants (a reference and one other)")
    reference = names[0] if reference is None else reference
    if reference not in per_query_by_variant:
        raise DataError(f"reference variant {reference!r} not among {names}")
    tests = [test]

    def run(name):
        return compare_systems(per_query_by_variant[name], [metric], alpha=alpha, test=test,
                               correction=correction, tests=tests, n_permutations=n_permutations,
                               n_bootstrap=1, seed=seed, systems=systems)

    ref_df, _ = prepare_per_query(per_query_by_variant[reference], [metric], source=f"variant {reference!r}")
    systems = sorted(ref_df.system.unique())
    ref = run(reference)
    key = ["dataset", "system_a", "system_b"]
    ref_pairs = ref.pairs.set_index(key)[["diff", "separated"]]
    ref_scores = ref.systems.set_index("system")["score"]
    rows = []
    for name in names:
        if name == reference:
            continue
        var = run(name)
        j = pd.merge(ref_pairs, var.pairs.set_index(key)[["diff", "separated"]], left_index=True,
                     right_index=True, how="inner", suffixes=("", "_v"))
        opposite = np.sign(j["diff"]) * np.sign(j["diff_v"]) < 0
        v_scores = var.systems.set_index("system")["score"].reindex(ref_scores.index)
        rows.append({
            "reference": reference, "variant": name, "n_pairs": len(j),
            "n_significant_reference": int(j.separated.sum()), "n_significant_variant": int(j.separated_v.sum()),
            "n_flipped": int((j.separated & opposite).sum()),
            "n_flipped_significant": int((j.separated & j.separated_v & opposite).sum()),
            "n_lost": int((j.separated & ~j.separated_v).sum()),
            "n_gained": int((~j.separated & j.separated_v).sum()),
            "kendall_tau": kendall_tau_b(ref_scores.to_numpy(), v_scores.to_numpy()),
            "spearman_rho": spearman_rho(ref_scores.to_numpy(), v_scores.to_numpy()),
        })
    return pd.DataFrame(rows)


def gain_rank_correlation(
    gains_by_variant: Mapping[str, pd.DataFrame],
    *,
    reference: str | None = None,
    gain_col: str = "gain",
) -> pd.DataFrame:
    """Rank agreement of document gains between calibrations (rubric variants, judges).

    Args:
        gains_by_variant: variant -> gains table with columns ``query_id, doc_id, <gain_col>``
            (optionally ``dataset``).
        reference: variant compared against (default: the first).
        gain_col: gain column name.

    Returns:
        One row per other variant: ``n_docs`` (documents in both), ``spearman_rho`` and ``kendall_tau``
        over all documents pooled, ``mean_query_spearman`` (mean of within-query Spearman rho: how much
        the within-query order moves).
    """
    names = list(gains_by_variant)
    if len(names) < 2:
        raise DataError("gain_rank_correlation needs at least two variants")
    reference = names[0] if reference is None else reference
    if reference not in gains_by_variant:
        raise DataError(f"reference variant {reference!r} not among {names}")

    def clean(name):
        g = gains_by_variant[name]
        need = [c for c in ("query_id", "doc_id", gain_col) if c not in g.columns]
        if need:
            raise DataError(f"gains of variant {name!r}: missing column(s) {', '.join(need)}")
        keys = ["dataset", "query_id", "doc_id"] if "dataset" in g.columns else ["query_id", "doc_id"]
        out = g[keys + [gain_col]].copy()
        for k in keys:
            out[k] = out[k].astype(str)
        return out.set_index(keys)[gain_col].astype(np.float64)

    ref = clean(reference)
    rows = []
    for name in names:
        if name == reference:
            continue
        j = pd.concat([ref.rename("r"), clean(name).rename("v")], axis=1, join="inner").dropna()
        qkey = [lvl for lvl in j.index.names if lvl != "doc_id"]
        per_q = [spearman_rho(g.r, g.v) for _, g in j.groupby(level=qkey) if len(g) > 1]
        rows.append({
            "reference": reference, "variant": name, "n_docs": len(j),
            "spearman_rho": spearman_rho(j.r, j.v),
            "kendall_tau": float(stats.kendalltau(j.r, j.v).statistic) if len(j) > 1 else math.nan,
            "mean_query_spearman": float(np.nanmean(per_q)) if np.isfinite(per_q).any() else math.nan,
        })
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ formatting
def format_table(df: pd.DataFrame, fmt: str = "markdown", *, floatfmt: str = ".3f") -> str:
    """Render a DataFrame as a Markdown pipe table or a LaTeX ``tabular`` (no extra dependencies).

    Example:
        >>> print(format_table(pd.DataFrame({"metric": ["rcp"], "share": [0.635]})))
        | metric | share |
        |---|---|
        | rcp | 0.635 |
    """
    if fmt not in ("markdown", "latex"):
        raise DataError(f"unknown table format {fmt!r}; choose markdown or latex")

    def cell(v) -> str:
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else format(float(v), floatfmt)
        return str(v)

    header = [str(c) for c in df.columns]
    body = [[cell(v) for v in row] for row in df.itertuples(index=False)]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)

    def esc(s: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
            s = s.replace(a, b)
        return s

    lines = [r"\begin{tabular}{" + "l" * len(header) + "}", r"\hline",
             " & ".join(esc(h) for h in header) + r" \\", r"\hline"]
    lines += [" & ".join(esc(c) for c in r) + r" \\" for r in body]
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines)


def _report(c: Comparison, fmt: str, include_pairs: bool) -> str:
    head = (lambda s: f"## {s}") if fmt == "markdown" else (lambda s: f"% {s}")
    corr = "" if c.correction == "none" else f", {c.correction}-corrected"
    parts = [head(f"Pairs separated (test={c.test}, alpha={c.alpha}{corr})"), format_table(c.sensitivity_table(), fmt)]
    wide = c.systems.pivot(index="system", columns="metric", values="score")[list(c.metrics)]
    wide = wide.sort_values(c.metrics[0], ascending=False).reset_index()
    parts += [head("System scores (mean over datasets of per-dataset means)"), format_table(wide, fmt)]
    if len(c.agreement):
        parts += [head("Sign agreement on separated pairs"), format_table(c.agreement, fmt)]
    if len(c.kendall):
        parts += [head("Rank correlation of system orderings"), format_table(c.kendall, fmt)]
    if include_pairs:
        cols = [col for col in ("metric", "dataset", "system_a", "system_b", "n_queries", "diff", "ci_low",
                                "ci_high", "p_t", "p_wilcoxon", "p_permutation", "p_holm", "separated")
                if col in c.pairs.columns]
        parts += [head("Pairs"), format_table(c.pairs[cols], fmt, floatfmt=".4g")]
    return "\n\n".join(parts) + "\n"

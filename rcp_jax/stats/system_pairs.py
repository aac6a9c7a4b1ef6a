"""Every pair of systems on every metric and dataset: paired tests, intervals, corrections, sensitivity.

:func:`compare_systems` runs the tests of :mod:`rcp_jax.stats.paired` on a per-query table
(:mod:`rcp_jax.per_query`) and returns a :class:`Comparison`; the result object and its reports are
in :mod:`rcp_jax.stats.comparison`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.stats.paired import (
    CORRECTIONS,
    adjust_pvalues,
    bootstrap_mean_ci,
    excludes_zero,
    kendall_tau_b,
    paired_t_test,
    randomisation_test,
    snap_to_zero,
    spearman_rho,
    wilcoxon_signed_rank,
)
from rcp_jax.per_query import pair_queries, prepare_per_query, score_matrix, system_scores, warn_dropped
from rcp_jax.stats.comparison import Comparison

TESTS = ("t", "wilcoxon", "permutation")
_P_COLUMN = {"t": "p_t", "wilcoxon": "p_wilcoxon", "permutation": "p_permutation"}


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

    Every system is scored, ranked and tested on the same queries: per metric and dataset, the queries
    every system has a value on (:func:`rcp_jax.per_query.pair_queries`). Queries no system has a value on
    are excluded; queries only some systems lack are dropped for all, listed in ``dropped`` and ``notes``
    and announced by a :class:`~rcp_jax.per_query.PairingWarning`.

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

    if systems is not None:  # pair on the systems compared, not on others in the table
        unknown_sys = sorted(set(systems) - set(df["system"]))
        if unknown_sys:
            raise DataError(f"systems {unknown_sys} are not in the per-query table")
        df = df.loc[df["system"].isin(list(systems))].reset_index(drop=True)
    pairing = pair_queries(df, metrics)
    warn_dropped(pairing)
    df = pairing.table
    scores = system_scores(df, metrics)
    if systems is None:
        first = scores[scores.metric == metrics[0]].set_index("system")["score"]

        def order(name: str) -> tuple[float, str]:
            value = first.get(name, np.nan)
            return (-value if np.isfinite(value) else np.inf, name)

        systems = sorted(df["system"].unique(), key=order)
    else:
        systems = list(systems)
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
            frame["diff"] = snap_to_zero(diff, _largest(d))  # a sign of rounding noise is no sign (sign_agreement)
            frame["ci_low"], frame["ci_high"] = lo, hi
            frame["ci_excludes_0"] = excludes_zero(lo, hi)
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
                      correction=correction, dropped=pairing.dropped, excluded=pairing.excluded,
                      notes=tuple(pairing.notes()))


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
            "n_datasets": present.sum(0), "diff": snap_to_zero(diff, _largest(d)), "ci_low": lo, "ci_high": hi,
            "ci_excludes_0": excludes_zero(lo, hi),
        }))
    return pd.concat(frames, ignore_index=True)


def _largest(d: np.ndarray) -> np.ndarray:
    """float64[P]: the largest finite ``|difference|`` of each row (0 for a row without one)."""
    a = np.where(np.isfinite(d), np.abs(d), 0.0)
    return a.max(axis=1) if a.shape[1] else np.zeros(a.shape[0])


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

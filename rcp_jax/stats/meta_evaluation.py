"""Meta-evaluation: does a metric rank systems as the human-label metric (qrel-nDCG) does?

For each candidate metric (``rcp_ndcg``, ``count_ndcg``) against the reference (``qrel_ndcg``), on the
queries both have (qrel-nDCG exists only for labelled queries; every system scored on the same queries):

- **Kendall's tau-b** of the system means (:func:`rcp_jax.stats.paired.kendall_tau_b`, as
  ``scipy.stats.kendalltau``);
- **tau_AP** (Yilmaz, Aslam & Robertson, SIGIR 2008), the top-weighted AP-based rank correlation
  (:func:`tau_ap`): asymmetric, the reference ranking is qrel-nDCG's; its symmetric average too;
- **agreement on significant pairs**: among the system pairs the reference separates (paired test over
  queries, :func:`rcp_jax.stats.system_pairs.compare_systems`, with its multiple-comparison correction),
  the share the candidate orders the same way, the share it also separates the same way, and the
  *swaps* (separated in the opposite direction); and the reverse, the pairs the candidate separates that
  the reference does not.

:func:`meta_evaluate` returns a :class:`MetaEvaluation`; ``rcp-jax meta-evaluate`` is its CLI.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.per_query import PairingWarning, prepare_per_query, system_scores
from rcp_jax.stats.paired import kendall_tau_b
from rcp_jax.stats.system_pairs import compare_systems, sign_agreement

REFERENCE = "qrel_ndcg"
CANDIDATES = ("rcp_ndcg", "count_ndcg")


def tau_ap(scores, reference) -> float:
    """tau_AP of the ranking by ``scores`` against the ranking by ``reference`` (Yilmaz et al. 2008).

    With the systems ordered by ``scores`` (best first), ``C(i)`` is the number of systems above rank
    ``i`` that the reference also ranks above the system at rank ``i``;
    ``tau_AP = 2 / (N - 1) * sum_{i=2..N} C(i) / (i - 1) - 1``. A disagreement near the top of the
    ``scores`` ranking costs more than one near the bottom; ``tau_AP(x, y) != tau_AP(y, x)`` in general.

    Args:
        scores: float[N], higher = better (the ranking evaluated, e.g. RCP-nDCG means).
        reference: float[N], higher = better (the reference ranking, e.g. qrel-nDCG means).

    Returns:
        tau_AP in [-1, 1]: 1 for the same order, -1 for the reversed one; NaN with fewer than 2 systems, a
        NaN score, or a tie in either vector (the definition assumes strict rankings).

    Example:
        >>> tau_ap([5, 4, 3, 2, 1], [4, 5, 3, 2, 1])  # swap at the top
        0.5
        >>> tau_ap([5, 4, 3, 2, 1], [5, 4, 3, 1, 2])  # swap at the bottom
        0.875
    """
    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(reference, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise DataError(f"tau_ap needs two vectors of one length, got shapes {x.shape} and {y.shape}")
    n = len(x)
    if n < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()) or has_ties(x) or has_ties(y):
        return math.nan
    r = y[np.argsort(-x, kind="stable")]  # reference scores in the evaluated ranking's order
    above = np.tril(r[None, :] > r[:, None], k=-1)  # [i, j]: j ranked above i by scores and by the reference
    c = above.sum(axis=1)[1:]
    return float(2.0 / (n - 1) * (c / np.arange(1, n)).sum() - 1.0)


def has_ties(x) -> bool:
    """Whether a float vector holds two equal values."""
    x = np.asarray(x, dtype=np.float64)
    return len(np.unique(x)) < len(x)


@dataclass(frozen=True)
class MetaEvaluation:
    """How each candidate metric's system ranking agrees with the reference's.

    Attributes:
        summary: one row per candidate: ``metric, reference, n_systems, n_queries, kendall_tau,
            tau_ap`` (reference = qrel ranking), ``tau_ap_reversed`` (the candidate as reference),
            ``tau_ap_symmetric`` (their mean), ``n_reference_separated``, ``n_same_order``,
            ``share_same_order``, ``n_also_separated``, ``share_also_separated``, ``n_swaps``,
            ``share_swaps``, ``n_candidate_separated``, ``n_candidate_only`` (candidate separates, the
            reference does not), ``n_pairs``.
        means: one row per system: the mean of every metric on the common queries, plus
            ``<candidate>_all_queries`` (the candidate's mean over every query the systems all have).
        pairs: :attr:`rcp_jax.stats.Comparison.pairs` of the common queries.
        n_queries: the common queries (per dataset, summed); ``n_queries_all`` those of the candidates.
        notes: ties and other remarks, in words.
    """

    summary: pd.DataFrame
    means: pd.DataFrame
    pairs: pd.DataFrame
    reference: str
    alpha: float
    test: str
    correction: str
    n_queries: int
    n_queries_all: int
    notes: tuple[str, ...]

    def table(self) -> pd.DataFrame:
        """The paper-style view: one row per metric vs the reference (tau, tau_AP, significant pairs)."""
        s = self.summary
        return pd.DataFrame({
            "metric": s["metric"],
            "vs": s["reference"],
            "systems": s["n_systems"],
            "queries": s["n_queries"],
            "tau": s["kendall_tau"],
            "tau_AP": s["tau_ap"],
            "tau_AP_sym": s["tau_ap_symmetric"],
            "ref_separated": s["n_reference_separated"],
            "same_order": s["share_same_order"],
            "also_separated": s["share_also_separated"],
            "swaps": s["n_swaps"],
            "only_metric_separates": s["n_candidate_only"],
        })

    def format(self) -> str:
        """Text report: the table, the system means side by side, the counts in words and the notes."""
        lines = [f"meta-evaluation against {self.reference} on {self.n_queries} common queries "
                 f"({self.n_queries_all} with the other metrics); {self.test} test, alpha {self.alpha:g}, "
                 f"correction {self.correction}", ""]
        lines.append(self.table().to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="n/a"))
        lines += ["", "system means (common queries; *_all_queries: every query the systems all have):"]
        lines.append(self.means.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="n/a"))
        for row in self.summary.itertuples():
            n = row.n_reference_separated
            if n:
                lines.append(
                    f"{row.metric}: of the {n} pairs {self.reference} separates, {row.n_same_order} "
                    f"({row.share_same_order:.0%}) ordered the same way, {row.n_also_separated} also separated, "
                    f"{row.n_swaps} swapped (separated the other way); {row.n_candidate_only} pairs separated "
                    f"by {row.metric} only")
            else:
                lines.append(f"{row.metric}: {self.reference} separates no pair at alpha {self.alpha:g}; "
                             f"{row.n_candidate_only} pairs separated by {row.metric} only")
        if self.notes:
            lines += [""] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def meta_evaluate(
    per_query: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    reference: str = REFERENCE,
    alpha: float = 0.05,
    test: str = "t",
    correction: str = "none",
    n_permutations: int = 20_000,
    n_bootstrap: int = 200,
    seed: int = 0,
) -> MetaEvaluation:
    """Compare each metric's system ranking with the reference's (see module doc).

    Args:
        per_query: ``system, query_id[, dataset], <metric columns>`` as :func:`rcp_jax.evaluate` returns.
        metrics: candidate columns (default: those of ``rcp_ndcg``, ``count_ndcg`` present).
        reference: the human-label metric (default ``qrel_ndcg``).
        alpha, test, correction, n_permutations, n_bootstrap, seed: as :func:`compare_systems`.

    Returns:
        :class:`MetaEvaluation`.

    Raises:
        DataError: no reference column or no value in it, no candidate, fewer than 3 systems, no query
            every system has on every metric.
    """
    if reference not in per_query.columns or per_query[reference].isna().all():
        raise DataError(f"the per-query table has no {reference} values: the meta-evaluation needs the human "
                        f"labels' metric; evaluate with --qrels (rcp_jax.evaluate(..., qrels=...))")
    if metrics is None:
        metrics = [m for m in CANDIDATES if m in per_query.columns and per_query[m].notna().any()]
    metrics = [m for m in metrics if m != reference]
    if not metrics:
        raise DataError(f"no metric to compare with {reference}: the table needs a column such as "
                        f"{', '.join(CANDIDATES)}")
    columns = [reference, *metrics]
    df, _ = prepare_per_query(per_query, columns)
    systems = sorted(df["system"].unique())
    if len(systems) < 3:
        raise DataError(f"the meta-evaluation needs at least 3 systems (got {len(systems)}: "
                        f"{', '.join(systems)}): a rank correlation of fewer is undefined")
    all_queries = _common_queries(df, metrics)
    common = _common_queries(df, columns)
    if common.empty:
        raise DataError(f"no query has {', '.join(columns)} values for every system: score every system on "
                        f"the same queries, with qrels for some of them")
    n_common = len(common[["dataset", "query_id"]].drop_duplicates())
    n_all = len(all_queries[["dataset", "query_id"]].drop_duplicates())

    with warnings.catch_warnings():  # the common queries are complete: nothing is dropped
        warnings.simplefilter("ignore", PairingWarning)
        comparison = compare_systems(common, columns, alpha=alpha, test=test, correction=correction,
                                     tests=[test], n_permutations=n_permutations, n_bootstrap=n_bootstrap,
                                     seed=seed, systems=systems)
    wide = system_scores(common, columns).pivot(index="system", columns="metric", values="score")
    wide_all = system_scores(all_queries, metrics).pivot(index="system", columns="metric", values="score")
    means = wide.reindex(index=systems, columns=columns).reset_index()
    for m in metrics:
        means[f"{m}_all_queries"] = wide_all.reindex(systems)[m].to_numpy()
    means = means.sort_values([reference, "system"], ascending=[False, True]).reset_index(drop=True)
    means.columns.name = None

    notes = []
    ref_means = means[reference].to_numpy()
    if has_ties(ref_means):
        notes.append(f"tied {reference} means ({_tied(means, reference)}): tau-b counts the tie, tau_AP is "
                     f"undefined (n/a)")
    pairs = comparison.pairs
    rows = []
    for m in metrics:
        x = means[m].to_numpy()
        if has_ties(x):
            notes.append(f"tied {m} means ({_tied(means, m)}): tau-b counts the tie, tau_AP is undefined (n/a)")
        forward, backward = tau_ap(x, ref_means), tau_ap(ref_means, x)
        agree = sign_agreement(pairs, reference, m)
        agree = agree[agree.dataset == "all datasets"].iloc[0]
        joined = _joined(pairs, reference, m)
        n_ref = int(agree.n_reference_separated)
        n_cand = int(joined.separated_oth.sum())
        rows.append({
            "metric": m, "reference": reference, "n_systems": len(systems), "n_queries": n_common,
            "kendall_tau": kendall_tau_b(x, ref_means), "tau_ap": forward, "tau_ap_reversed": backward,
            "tau_ap_symmetric": (forward + backward) / 2,
            "n_reference_separated": n_ref, "n_same_order": int(agree.n_same_sign),
            "share_same_order": _share(agree.n_same_sign, n_ref),
            "n_also_separated": int(agree.n_other_separated_same_sign),
            "share_also_separated": _share(agree.n_other_separated_same_sign, n_ref),
            "n_swaps": int(agree.n_other_separated_opposite),
            "share_swaps": _share(agree.n_other_separated_opposite, n_ref),
            "n_candidate_separated": n_cand,
            "n_candidate_only": int((joined.separated_oth & ~joined.separated_ref).sum()),
            "n_pairs": len(joined),
        })
    return MetaEvaluation(summary=pd.DataFrame(rows), means=means, pairs=pairs, reference=reference,
                          alpha=alpha, test=test, correction=correction, n_queries=n_common,
                          n_queries_all=n_all, notes=tuple(notes) + tuple(comparison.notes))


def _common_queries(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The rows of the (dataset, query) pairs where every system has a finite value of every column."""
    systems = df["system"].nunique()
    complete = df.loc[df[list(columns)].notna().all(axis=1)]
    count = complete.groupby(["dataset", "query_id"])["system"].nunique()
    keep = count.index[count == systems]
    keys = pd.MultiIndex.from_frame(complete[["dataset", "query_id"]])
    return complete.loc[keys.isin(keep)].reset_index(drop=True)


def _joined(pairs: pd.DataFrame, reference: str, other: str) -> pd.DataFrame:
    key = ["dataset", "system_a", "system_b"]
    ref = pairs[pairs.metric == reference].set_index(key)[["separated"]]
    oth = pairs[pairs.metric == other].set_index(key)[["separated"]]
    return pd.merge(ref, oth, left_index=True, right_index=True, how="inner", suffixes=("_ref", "_oth"))


def _share(k, n) -> float:
    return float(k) / n if n else math.nan


def _tied(means: pd.DataFrame, metric: str) -> str:
    groups = means.groupby(metric)["system"].apply(list)
    return "; ".join(" = ".join(g) for g in groups if len(g) > 1)

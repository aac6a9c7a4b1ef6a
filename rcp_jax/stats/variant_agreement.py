"""Do conclusions survive a change of rubric or judge? Flipped significant pairs and rank agreement of gains.

Each variant (a rubric variant, a judge) gives its own per-query table or gains table; the first (or the
named ``reference``) is the one the others are checked against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from rcp_jax.errors import DataError
from rcp_jax.per_query import prepare_per_query
from rcp_jax.stats.paired import kendall_tau_b, spearman_rho
from rcp_jax.stats.system_pairs import compare_systems


def _variants(by_variant: Mapping, reference: str | None, too_few: str) -> tuple[list[str], str]:
    """The variant names in order and the reference (default: the first); ``too_few`` is the message
    when there are fewer than two variants."""
    names = list(by_variant)
    if len(names) < 2:
        raise DataError(too_few)
    reference = names[0] if reference is None else reference
    if reference not in by_variant:
        raise DataError(f"reference variant {reference!r} not among {names}")
    return names, reference


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
    names, reference = _variants(per_query_by_variant, reference,
                                 "robustness needs at least two variants (a reference and one other)")
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
    names, reference = _variants(gains_by_variant, reference, "gain_rank_correlation needs at least two variants")

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

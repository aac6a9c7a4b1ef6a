"""The second-judge check: does a system-pair conclusion change with the judge?

Each judge's own calibration (its own tournament and rubric, :class:`rcp_jax.judges.pooled.JudgesFit`
``per_judge``) scores the same runs; every pair of systems is then tested under each judge with the same
test as ``rcp-jax compare`` (paired t-test by default), in one system order. The call of a pair under a
judge is ``A>B`` or ``B>A`` when the test separates them (p < alpha), else ``tie``; the pair *agrees*
when every judge makes the same call.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from rcp_jax.calibration import Calibration
from rcp_jax.errors import DataError
from rcp_jax.evaluation import evaluate
from rcp_jax.stats.system_pairs import compare_systems


def per_judge_metrics(runs: pd.DataFrame, calibrations: Mapping[str, Calibration], *, k: int = 10,
                      pools: pd.DataFrame | None = None, metric: str = "rcp_ndcg") -> pd.DataFrame:
    """Per-query table ``judge, system, query_id, <metric>`` of ``runs`` scored with each judge's gains."""
    tables = []
    for name, cal in calibrations.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the same run and pools for every judge: said once elsewhere
            pq = evaluate(runs, cal, k=k, pools=pools)
        if metric not in pq.columns:
            raise DataError(f"the per-query table of judge {name!r} has no column {metric!r}")
        table = pq[["system", "query_id", metric]].assign(judge=name)
        table.attrs = {}  # evaluate's notes (tables) would make concat compare them
        tables.append(table)
    return pd.concat(tables, ignore_index=True)[["judge", "system", "query_id", metric]]


def _call(separated: bool, diff: float) -> str:
    if not separated or not np.isfinite(diff) or diff == 0:
        return "tie"
    return "A>B" if diff > 0 else "B>A"


def compare_by_judge(per_query: pd.DataFrame, *, metric: str = "rcp_ndcg", alpha: float = 0.05, test: str = "t",
                     correction: str = "none", n_permutations: int = 10_000, n_bootstrap: int = 200,
                     seed: int = 0) -> pd.DataFrame:
    """Each pair's call under each judge.

    Args:
        per_query: ``judge, system, query_id, <metric>`` (:func:`per_judge_metrics`), two judges or more.
        metric, alpha, test, correction, n_permutations, n_bootstrap, seed: as :func:`rcp_jax.compare_systems`.

    Returns:
        DataFrame ``system_a, system_b, diff_<judge>, p_<judge>, call_<judge>`` per judge, ``agree`` (bool):
        one row per pair, systems in the first judge's order (best first).

    Raises:
        DataError: fewer than two judges, or fewer than two systems.
    """
    judges = list(dict.fromkeys(per_query["judge"]))
    if len(judges) < 2:
        raise DataError(f"the by-judge comparison needs at least two judges, got {len(judges)} "
                        f"({', '.join(map(str, judges)) or 'none'}); fit several with `rcp-jax fit --judges A,B`")
    order = None
    out = None
    for name in judges:
        table = per_query.loc[per_query["judge"] == name].drop(columns="judge")
        if table["system"].nunique() < 2:
            raise DataError(f"the by-judge comparison needs at least two systems; the runs hold {table['system'].nunique()}")
        comp = compare_systems(table, [metric], alpha=alpha, test=test, correction=correction,
                               n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed, systems=order)
        if order is None:
            order = list(dict.fromkeys(comp.systems["system"]))  # best first under the first judge
        pairs = comp.pairs[["system_a", "system_b", "diff", "p", "separated"]].copy()
        pairs[f"call_{name}"] = [_call(s, d) for s, d in zip(pairs["separated"], pairs["diff"])]
        pairs = pairs.rename(columns={"diff": f"diff_{name}", "p": f"p_{name}"}).drop(columns="separated")
        out = pairs if out is None else out.merge(pairs, on=["system_a", "system_b"], how="outer")
    calls = out[[f"call_{n}" for n in judges]]
    out["agree"] = calls.nunique(axis=1).eq(1) & calls.notna().all(axis=1)
    return out.reset_index(drop=True)

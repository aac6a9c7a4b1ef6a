"""Runs as arrays: (query, document) keys shared by a run, its pool and its gains, and the (system, query)
list of each run row, for the vectorised nDCG of :mod:`rcp_jax.evaluation`."""

from __future__ import annotations

import numpy as np
import pandas as pd


def pair_keys(frames: list[pd.DataFrame]) -> list[np.ndarray]:
    """One int64 key per (query_id, doc_id) row, consistent across ``frames`` (joint factorisation)."""
    sizes = [len(f) for f in frames]
    q_codes, q_uniq = pd.factorize(pd.concat([f["query_id"] for f in frames], ignore_index=True))
    d_codes, d_uniq = pd.factorize(pd.concat([f["doc_id"] for f in frames], ignore_index=True))
    keys = q_codes.astype(np.int64) * max(len(d_uniq), 1) + d_codes
    return np.split(keys, np.cumsum(sizes)[:-1])


def attach_pool_and_gains(r: pd.DataFrame, pool: pd.DataFrame, g: pd.DataFrame, pool_only: bool) -> pd.DataFrame:
    """Left-join the pool position ``_pos`` (NaN outside the pool) and the gain (0 if missing) to the run.

    Equivalent to two ``DataFrame.merge(how="left")`` on (query_id, doc_id), but on int64 keys from one
    joint factorisation, which is several times faster on millions of string-keyed rows. Falls back to
    the merges when the pool or gain table repeats a (query, document) key (a merge would then
    duplicate run rows).
    """
    r_key, p_key, g_key = pair_keys([r, pool, g])
    p_index, g_index = pd.Index(p_key), pd.Index(g_key)
    if not (p_index.is_unique and g_index.is_unique):
        r = r.merge(pool, on=["query_id", "doc_id"], how="left")
        if pool_only:
            r = r.loc[r["_pos"].notna()]
        r = r.merge(g, on=["query_id", "doc_id"], how="left")
        r["gain"] = r["gain"].fillna(0.0)
        return r
    at = p_index.get_indexer(r_key)
    pos = np.where(at >= 0, pool["_pos"].to_numpy(dtype=np.float64)[np.maximum(at, 0)], np.nan)
    r = r.assign(_pos=pos)
    if pool_only:
        keep = at >= 0
        r, r_key = r.loc[keep], r_key[keep]
    at = g_index.get_indexer(r_key)
    gain = np.where(at >= 0, g["gain"].to_numpy(dtype=np.float64)[np.maximum(at, 0)], np.nan)
    return r.assign(gain=np.where(np.isnan(gain), 0.0, gain)).reset_index(drop=True)


def system_query_groups(r: pd.DataFrame) -> tuple[np.ndarray, pd.MultiIndex]:
    """Code of each row's (system, query_id) list, lists numbered in sorted (system, query_id) order."""
    if not len(r):
        return np.zeros(0, np.int64), pd.MultiIndex.from_tuples([], names=["system", "query_id"])
    s_codes, s_uniq = pd.factorize(r["system"], sort=True)
    q_codes, q_uniq = pd.factorize(r["query_id"], sort=True)
    combined = s_codes.astype(np.int64) * len(q_uniq) + q_codes
    present, codes = np.unique(combined, return_inverse=True)
    index = pd.MultiIndex.from_arrays(
        [pd.Index(s_uniq).take(present // len(q_uniq)), pd.Index(q_uniq).take(present % len(q_uniq))],
        names=["system", "query_id"],
    )
    return codes.reshape(-1), index

"""Simulated tournaments for the schedule tests: document pools and the BT refit between rounds."""

from __future__ import annotations

import numpy as np

from rcp_jax.models.bradley_terry import fit_windows


def doc_pool(n: int, prefix: str = "d") -> list[str]:
    """``n`` document ids ``prefix0 .. prefix{n-1}``."""
    return [f"{prefix}{i}" for i in range(n)]


def fit_rounds(windows_by_query: dict, scores_by_query: dict, pools: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """BT refit of a simulated tournament between rounds: per query (keys of ``pools``) its windows
    (``Window`` objects) and their scores, padded to 200 windows of 10 slots so every refit reuses one
    compiled shape; returns per query the fitted scores ``theta`` in pool order (shape ``(len(pool),)``)."""
    qids = list(pools)
    di, sc, wq = [], [], []
    for j, q in enumerate(qids):
        pos = {d: i for i, d in enumerate(pools[q])}
        for win, s in zip(windows_by_query[q], scores_by_query[q]):
            row = np.full(10, -1)
            row[: len(win.doc_ids)] = [pos[d] for d in win.doc_ids]
            srow = np.zeros(10)
            srow[: len(s)] = s
            di.append(row), sc.append(srow), wq.append(j)
        # pad every query to a fixed number of (empty) windows so each refit reuses one compiled shape
        pad = 200 - len(windows_by_query[q])
        di += [np.full(10, -1)] * pad
        sc += [np.zeros(10)] * pad
        wq += [j] * pad
    fit = fit_windows(np.array(di), np.array(sc), np.array(wq), np.array([len(pools[q]) for q in qids]))
    assert (fit.n_components == 1).all()
    return {q: fit.theta[j, : len(pools[q])] for j, q in enumerate(qids)}

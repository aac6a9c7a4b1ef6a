"""Place new documents on an existing calibration: anchored BT scores, then the calibration's own gains.

Nothing shared is refitted: the criteria (gamma, beta), each query's tau and alpha, and every scored
document's BT score stay as they are. Only the new documents' BT scores are fitted
(:func:`rcp_jax.models.anchored.fit_anchored`), and each gets ``gain(tau_q * theta + alpha_q; gamma, beta)``,
the formula of every other document of the calibration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rcp_jax.models.anchored import fit_anchored
from rcp_jax.calibration import Calibration, criterion_columns
from rcp_jax.errors import CalibrationError, DataError
from rcp_jax.tournament import validate_window_scores


def anchored_scores(
    window_scores: pd.DataFrame, fixed: Mapping[str, Mapping[str, float]], new_docs: Mapping[str, Sequence[str]],
    totals: Mapping[str, float],
) -> pd.DataFrame:
    """BT scores of the new documents with every other document of their windows fixed.

    Args:
        window_scores: ``query_id, window_id, doc_id, score`` of the extension's tournament windows.
        fixed: query -> {doc id -> BT score} of the scored documents (the calibration's ``theta_bt``).
        new_docs: query -> the new documents to fit.
        totals: query -> pair weight of the full fit (every window of the query adds ``size - 1``).

    Returns:
        DataFrame ``query_id, doc_id, theta_bt, se, windows`` (one row per new document).

    Raises:
        DataError: a window shows a document that is neither new nor scored, or a new document has no window.
    """
    ws = validate_window_scores(window_scores)
    queries = sorted(new_docs)
    rows_di, rows_sc, rows_wq = [], [], []
    index: list[dict[str, int]] = []
    width = int(ws.groupby(["query_id", "window_id"]).size().max()) if len(ws) else 2
    for qi, q in enumerate(queries):
        new = [str(d) for d in new_docs[q]]
        sub = ws[ws["query_id"] == q]
        local = {d: i for i, d in enumerate(new)}
        for d in dict.fromkeys(sub["doc_id"]):
            if d not in local:
                if d not in fixed.get(q, {}):
                    raise DataError(f"query {q!r}: window document {d!r} is neither new nor scored by the calibration")
                local[d] = len(local)
        shown = set(sub["doc_id"])
        unseen = [d for d in new if d not in shown]
        if unseen:
            raise DataError(f"query {q!r}: new document {unseen[0]!r} has no usable tournament answer ({len(unseen)} "
                            "such): its windows' answers are invalid (run the extension again to ask them) or flagged "
                            "(inspect them; --keep-flagged fits them)")
        index.append(local)
        for _, g in sub.groupby("window_id", sort=True):
            di = np.full(width, -1)
            sc = np.zeros(width)
            di[: len(g)] = [local[d] for d in g["doc_id"]]
            sc[: len(g)] = g["score"].to_numpy(dtype=np.float64)
            rows_di.append(di)
            rows_sc.append(sc)
            rows_wq.append(qi)
    n = max((len(ix) for ix in index), default=1)
    fx = np.zeros((len(queries), n))
    fr = np.zeros((len(queries), n), dtype=bool)
    for qi, (q, local) in enumerate(zip(queries, index)):
        new = set(map(str, new_docs[q]))
        for d, i in local.items():
            if d in new:
                fr[qi, i] = True
            else:
                fx[qi, i] = float(fixed[q][d])
    total = np.array([float(totals[q]) for q in queries])
    fit = fit_anchored(np.array(rows_di), np.array(rows_sc), np.array(rows_wq), fx, fr, total)
    counts = ws.groupby(["query_id", "doc_id"]).size()
    out = []
    for qi, (q, local) in enumerate(zip(queries, index)):
        for d in map(str, new_docs[q]):
            i = local[d]
            out.append((q, d, float(fit.theta[qi, i]), float(fit.se[qi, i]), int(counts.get((q, d), 0))))
    if not np.all(fit.converged):
        bad = [q for q, ok in zip(queries, fit.converged) if not ok]
        raise CalibrationError(f"the anchored BT fit did not converge for queries {bad[:5]}; report this")
    return pd.DataFrame(out, columns=["query_id", "doc_id", "theta_bt", "se", "windows"])


def place_documents(
    calibration: Calibration, new_scores: pd.DataFrame, answers: pd.DataFrame | None = None,
) -> tuple[Calibration, pd.DataFrame]:
    """The calibration with the new documents added, and their table.

    Args:
        calibration: the calibration to extend (unchanged: a new object is returned).
        new_scores: ``query_id, doc_id, theta_bt[, se, windows]`` (:func:`anchored_scores`).
        answers: the new documents' rubric placements ``query_id, doc_id, C1..CK`` (for their Count gains
            and placements; their gains do not depend on them).

    Returns:
        (extended :class:`Calibration`, DataFrame ``query_id, doc_id, theta_bt, se, ability, gain,
        placements, count_gain``).
    """
    q = calibration.queries.set_index(calibration.queries["query_id"].astype(str))
    new = new_scores.copy()
    new["query_id"] = new["query_id"].astype(str)
    new["doc_id"] = new["doc_id"].astype(str)
    tau = new["query_id"].map(q["tau"]).to_numpy(dtype=np.float64)
    alpha = new["query_id"].map(q["alpha"]).to_numpy(dtype=np.float64)
    if not np.isfinite(tau).all():
        raise DataError(f"query {new.loc[~np.isfinite(tau), 'query_id'].iloc[0]!r} has no tau in the calibration")
    new["ability"] = tau * new["theta_bt"].to_numpy(dtype=np.float64) + alpha
    new["gain"] = calibration.gain_of(new["ability"].to_numpy())
    k = len(calibration.criteria)
    if answers is not None and len(answers):
        crit = criterion_columns(answers)
        if len(crit) != k:
            raise DataError(f"the new rubric answers have {len(crit)} criteria but the calibration {k}; one "
                            "calibration needs one rubric")
        a = answers.assign(query_id=answers["query_id"].astype(str), doc_id=answers["doc_id"].astype(str))
        agg = a.groupby(["query_id", "doc_id"])[crit].agg(["sum", "count"])
        passed = sum(agg[(c, "sum")] for c in crit)
        placements = agg[(crit[0], "count")]
        key = pd.MultiIndex.from_frame(new[["query_id", "doc_id"]])
        new["placements"] = placements.reindex(key).fillna(0).astype(np.int64).to_numpy()
        per = (passed / (k * placements)).reindex(key).to_numpy(dtype=np.float64)
        new["count_gain"] = np.where(new["placements"] > 0, per, np.nan)
    else:
        new["placements"] = 0
        new["count_gain"] = np.nan
    docs = calibration.documents
    clash = pd.MultiIndex.from_frame(new[["query_id", "doc_id"]]).isin(
        pd.MultiIndex.from_frame(docs[["query_id", "doc_id"]].astype(str)))
    if clash.any():
        row = new.loc[clash].iloc[0]
        raise DataError(f"document {row.doc_id!r} of query {row.query_id!r} is already in the calibration")
    cols = list(docs.columns)
    added = new.reindex(columns=cols)
    documents = pd.concat([docs, added], ignore_index=True) if len(docs) else added
    queries = calibration.queries.copy()
    per_q = new.groupby("query_id").agg(n=("doc_id", "size"), p=("placements", "sum"))
    qid = queries["query_id"].astype(str)
    queries["n_docs"] = queries["n_docs"] + qid.map(per_q["n"]).fillna(0).astype(int).to_numpy()
    if "n_answers" in queries.columns:
        queries["n_answers"] = queries["n_answers"] + (qid.map(per_q["p"]).fillna(0) * k).astype(int).to_numpy()
    extended = dataclasses.replace(calibration, documents=documents, queries=queries, info=dict(calibration.info))
    table = new[["query_id", "doc_id", "theta_bt", *(["se"] if "se" in new else []), "ability", "gain",
                 "placements", "count_gain", *(["windows"] if "windows" in new else [])]]
    return extended, table.reset_index(drop=True)


def rubric_check(calibration: Calibration, placed: pd.DataFrame, answers: pd.DataFrame) -> dict:
    """Do the new documents' rubric answers agree with where they were placed? (the fixed calibration's 2PL)

    Per criterion, the observed share of "yes" against the share the 2PL predicts at each new document's
    ability, with a binomial z-score; a large ``max_abs_z`` (> 4) says the judge answers differently now
    (another model or prompt, drift) or the anchors did not carry the scale.

    Returns:
        ``{"answers": int, "observed": {C: share}, "predicted": {C: share}, "z": {C: z}, "max_abs_z": float}``.
    """
    if answers is None or not len(answers):
        return {"answers": 0}
    crit = criterion_columns(answers)
    a = answers.assign(query_id=answers["query_id"].astype(str), doc_id=answers["doc_id"].astype(str))
    ab = a.merge(placed[["query_id", "doc_id", "ability"]], on=["query_id", "doc_id"], how="inner")
    x = ab["ability"].to_numpy(dtype=np.float64)[:, None]
    p = 1.0 / (1.0 + np.exp(-calibration.gamma[None, :] * (x - calibration.beta[None, :])))
    y = ab[crit].to_numpy(dtype=np.float64)
    obs, pred = y.mean(axis=0), p.mean(axis=0)
    z = (y.sum(axis=0) - p.sum(axis=0)) / np.sqrt(np.maximum((p * (1 - p)).sum(axis=0), 1e-12))
    return {"answers": int(y.size), "observed": dict(zip(crit, map(float, obs))),
            "predicted": dict(zip(crit, map(float, pred))), "z": dict(zip(crit, map(float, z))),
            "max_abs_z": float(np.abs(z).max())}


def anchor_agreement(window_scores: pd.DataFrame, fixed: Mapping[str, Mapping[str, float]]) -> dict:
    """How often the new windows order two anchors as the calibration does (pairs the judge did not tie).

    A check that the judge still judges as it did: the stored tournament fixed those anchors' order.

    Returns:
        ``{"pairs": int, "agreement": share or None}``.
    """
    agree = pairs = 0
    for (q, _), g in window_scores.groupby(["query_id", "window_id"], sort=False):
        known = fixed.get(str(q), {})
        rows = [(known[d], s) for d, s in zip(g["doc_id"].astype(str), g["score"]) if d in known]
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                (ti, si), (tj, sj) = rows[i], rows[j]
                if si == sj or ti == tj:
                    continue
                pairs += 1
                agree += (si > sj) == (ti > tj)
    return {"pairs": pairs, "agreement": agree / pairs if pairs else None}

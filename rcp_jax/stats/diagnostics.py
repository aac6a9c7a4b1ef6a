"""Diagnostics of a metric and of a calibration (METHOD section 5).

* **Undistinguishable queries** of a per-query table: queries on which a metric cannot tell the systems
  apart (saturated, floor, compressed).
* **Calibration of predicted rubric answers**: ECE and Brier score per criterion, reliability tables,
  local (in)dependence of the criteria, leave-one-dataset-out transfer of the item parameters and the
  spread of the per-query scales tau.

Every function takes plain arrays or tidy tables, so it works with any calibration (MAP, posterior
means, another judge's). Probabilities are P(answer = 1); answers are 0/1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError
from rcp_jax.per_query import prepare_per_query

_CRITERION = re.compile(r"^C(\d+)$")


# ------------------------------------------------------------------------------ undistinguishable
def undistinguishable_queries(
    per_query: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    systems: Sequence[str] | None = None,
    atol: float = 1e-9,
) -> pd.DataFrame:
    """Flag the queries on which a metric cannot separate the systems.

    Over the given systems (default: all), per metric and (dataset, query):

    * ``saturated``: every system scores 1 (within ``atol``);
    * ``floor``: every system scores 0;
    * ``compressed``: neither, but more than half of the system pairs tie (``|a - b| <= atol``);
    * ``undistinguishable``: any of the three (the categories are exclusive).

    Args:
        per_query: tidy table ``system, query_id, [dataset], <metrics>`` (see :mod:`rcp_jax.stats`).
        metrics: metric columns (default: the known nDCG columns present).
        systems: restrict to these systems.
        atol: tolerance of "equal" (qrel-nDCG under the nanobeir protocol is rounded to 5 decimals, so
            exact ties are common; float RCP gains rarely tie).

    Returns:
        One row per (metric, dataset, query_id) with at least two scored systems: ``n_systems``,
        ``tie_share`` (share of system pairs tied), ``saturated, floor, compressed, undistinguishable``.
        Queries where the metric is NaN for all but one system (e.g. no positive qrel) are left out.

    Example:
        >>> df = pd.DataFrame({"system": list("abab"), "query_id": ["q1", "q1", "q2", "q2"],
        ...                    "qrel_ndcg": [1.0, 1.0, 0.3, 0.6]})
        >>> undistinguishable_queries(df)[["query_id", "saturated", "undistinguishable"]].values.tolist()
        [['q1', True, True], ['q2', False, False]]
    """
    df, metrics = prepare_per_query(per_query, metrics)
    if systems is not None:
        unknown = sorted(set(systems) - set(df.system))
        if unknown:
            raise DataError(f"systems {unknown} are not in the per-query table")
        df = df[df.system.isin(list(systems))]
    frames = []
    for m in metrics:
        part = df.dropna(subset=[m])
        wide = part.pivot(index=["dataset", "query_id"], columns="system", values=m)
        x = wide.to_numpy(dtype=np.float64)  # [Q, S], NaN where a system lacks the query
        ok = np.isfinite(x)
        n = ok.sum(1)
        ia, ib = np.triu_indices(x.shape[1], 1)
        both = ok[:, ia] & ok[:, ib]
        tie = both & (np.abs(x[:, ia] - x[:, ib]) <= atol)
        n_pairs = both.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            tie_share = tie.sum(1) / n_pairs
        sat = np.all(~ok | (np.abs(x - 1.0) <= atol), axis=1)
        flo = np.all(~ok | (np.abs(x) <= atol), axis=1)
        comp = ~sat & ~flo & (tie_share > 0.5)
        frame = wide.index.to_frame(index=False)
        frame.insert(0, "metric", m)
        frame["n_systems"] = n
        frame["tie_share"] = tie_share
        frame["saturated"], frame["floor"], frame["compressed"] = sat, flo, comp
        frame["undistinguishable"] = sat | flo | comp
        frames.append(frame[n >= 2])
    return pd.concat(frames, ignore_index=True)


def undistinguishable_summary(flags: pd.DataFrame) -> pd.DataFrame:
    """Counts and shares of :func:`undistinguishable_queries` per metric and dataset, plus ``all``.

    Returns:
        Columns ``metric, dataset, n_queries, saturated, floor, compressed, undistinguishable, share``
        (share = undistinguishable / n_queries; ``all`` pools the queries of every dataset).
    """
    cols = ["saturated", "floor", "compressed", "undistinguishable"]
    per_ds = flags.groupby(["metric", "dataset"], sort=False)[cols].sum().reset_index()
    per_ds.insert(2, "n_queries", flags.groupby(["metric", "dataset"], sort=False).size().to_numpy())
    pooled = flags.groupby("metric", sort=False)[cols].sum().reset_index()
    pooled.insert(1, "dataset", "all")
    pooled.insert(2, "n_queries", flags.groupby("metric", sort=False).size().to_numpy())
    out = pd.concat([per_ds, pooled], ignore_index=True) if flags["dataset"].nunique() > 1 else per_ds
    out["share"] = out["undistinguishable"] / out["n_queries"]
    return out.reset_index(drop=True)


# ------------------------------------------------------------------------------------- calibration
def _probs_and_outcomes(pred, obs) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pred, dtype=np.float64).ravel()
    y = np.asarray(obs, dtype=np.float64).ravel()
    if p.shape != y.shape:
        raise DataError(f"predictions ({p.size}) and outcomes ({y.size}) differ in length")
    if not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
        raise DataError("predicted probabilities must be finite and in [0, 1]")
    if not np.isin(y, (0.0, 1.0)).all():
        raise DataError("observed outcomes must be 0 or 1")
    return p, y


def reliability_table(pred, obs, *, n_bins: int = 10) -> pd.DataFrame:
    """Equal-width bins of predicted probability: ``bin, lo, hi, count, mean_pred, obs_rate``.

    Bin b holds predictions in ``[b/n_bins, (b+1)/n_bins)``; the last bin includes 1. Empty bins are
    kept with count 0 and NaN means.
    """
    p, y = _probs_and_outcomes(pred, obs)
    idx = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred = np.bincount(idx, weights=p, minlength=n_bins) / count
        obs_rate = np.bincount(idx, weights=y, minlength=n_bins) / count
    edges = np.arange(n_bins + 1) / n_bins
    return pd.DataFrame({"bin": np.arange(n_bins), "lo": edges[:-1], "hi": edges[1:], "count": count,
                         "mean_pred": mean_pred, "obs_rate": obs_rate})


def expected_calibration_error(pred, obs, *, n_bins: int = 10) -> float:
    """ECE: count-weighted mean over equal-width bins of ``|mean predicted - observed rate|``.

    Args:
        pred: float[N] predicted P(answer = 1).
        obs: {0,1}[N] observed answers.
        n_bins: number of equal-width bins on [0, 1].

    Example:
        >>> round(expected_calibration_error([0.05, 0.05, 0.95, 0.95], [0, 0, 1, 1]), 6)
        0.05
    """
    t = reliability_table(pred, obs, n_bins=n_bins)
    t = t[t["count"] > 0]
    if t.empty:
        return math.nan
    return float((t["count"] * (t["mean_pred"] - t["obs_rate"]).abs()).sum() / t["count"].sum())


def brier_score(pred, obs) -> float:
    """Mean squared error of predicted probabilities against 0/1 outcomes.

    Example:
        >>> round(brier_score([0.8, 0.3], [1, 0]), 6)
        0.065
    """
    p, y = _probs_and_outcomes(pred, obs)
    return float(np.mean((p - y) ** 2)) if p.size else math.nan


def predict_answers(ability, criterion, gamma, beta) -> np.ndarray:
    """2PL probability of a yes: ``sigmoid(gamma_c * (ability - beta_c))``.

    Args:
        ability: float[N] abilities (calibrated ``tau * theta_bt + alpha``; or raw BT scores for the
            uncalibrated baseline "sigmoid of raw BT, no query scaling").
        criterion: int[N] criterion index in ``[0, C)``.
        gamma, beta: float[C] item parameters.

    Returns:
        float64[N] probabilities.
    """
    a = np.asarray(ability, dtype=np.float64)
    c = np.asarray(criterion, dtype=np.int64)
    g = np.asarray(gamma, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    if c.size and (c.min() < 0 or c.max() >= len(g)):
        raise DataError(f"criterion index out of range [0, {len(g)})")
    return 1.0 / (1.0 + np.exp(-g[c] * (a - b[c])))


def calibration_report(
    obs,
    predictions: Mapping[str, np.ndarray],
    criterion=None,
    *,
    criteria: Sequence[str] | None = None,
    n_bins: int = 10,
) -> pd.DataFrame:
    """ECE and Brier of one or more predictors of the same answers, per criterion and overall.

    Args:
        obs: {0,1}[N] observed answers (one per placement x criterion).
        predictions: name -> float[N] predicted P(yes), e.g. ``{"raw": ..., "calibrated": ...}``.
        criterion: int[N] criterion index of each answer (default: all one criterion).
        criteria: names of the criterion indices (default ``C1..CK``).
        n_bins: ECE bins.

    Returns:
        Columns ``model, criterion, n, mean_pred, obs_rate, ece, brier``; criterion ``all`` pools every
        answer.
    """
    y = np.asarray(obs, dtype=np.float64).ravel()
    crit = np.zeros(y.size, np.int64) if criterion is None else np.asarray(criterion, dtype=np.int64).ravel()
    if crit.shape != y.shape:
        raise DataError(f"criterion ({crit.size}) and outcomes ({y.size}) differ in length")
    k = int(crit.max()) + 1 if crit.size else 0
    names = list(criteria) if criteria is not None else [f"C{i + 1}" for i in range(k)]
    rows = []
    for model, pred in predictions.items():
        p, _ = _probs_and_outcomes(pred, y)
        groups = [(names[c], crit == c) for c in range(k)] + [("all", np.ones(y.size, bool))]
        for name, sel in groups:
            if not sel.any():
                continue
            rows.append({"model": model, "criterion": name, "n": int(sel.sum()),
                         "mean_pred": float(p[sel].mean()), "obs_rate": float(y[sel].mean()),
                         "ece": expected_calibration_error(p[sel], y[sel], n_bins=n_bins),
                         "brier": brier_score(p[sel], y[sel])})
    return pd.DataFrame(rows)


def mean_abs_correlation(x) -> float:
    """Mean |Pearson correlation| over the off-diagonal pairs of the columns of ``x: float[N, C]``.

    Pairs involving a constant column (undefined correlation) are skipped.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 2:
        raise DataError(f"need a [N, C>=2] matrix of answers, got shape {x.shape}")
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.corrcoef(x, rowvar=False)
    iu = np.triu_indices(x.shape[1], 1)
    vals = np.abs(r[iu])
    vals = vals[np.isfinite(vals)]
    return float(vals.mean()) if vals.size else math.nan


def local_dependence(answers, expected=None) -> dict[str, float]:
    """Local independence check of the rubric (Yen's Q3 idea).

    Args:
        answers: {0,1}[N, C], one row per placement (all criteria of one document in one window).
        expected: float[N, C] model probabilities of each answer given the document's calibrated ability
            (e.g. ``predict_answers`` per criterion). Without it only the raw value is returned.

    Returns:
        ``{"raw": mean |corr| between criteria answers, "residual": mean |corr| between residuals
        answers - expected}``. Criteria measuring one latent ability correlate strongly raw (paper 0.60)
        and weakly once the ability is conditioned on (paper 0.123).
    """
    y = np.asarray(answers, dtype=np.float64)
    out = {"raw": mean_abs_correlation(y)}
    if expected is not None:
        e = np.asarray(expected, dtype=np.float64)
        if e.shape != y.shape:
            raise DataError(f"expected probabilities {e.shape} and answers {y.shape} differ in shape")
        out["residual"] = mean_abs_correlation(y - e)
    return out


def tau_spread(tau, lo: float = 5.0, hi: float = 95.0) -> float:
    """Ratio of the ``hi``-th to the ``lo``-th percentile of the per-query scales tau (NaN dropped).

    The paper reports tau varying about 3x between its 5th and 95th percentile.

    Example:
        >>> tau_spread(np.linspace(1.0, 3.0, 101), 0, 100)
        3.0
    """
    t = np.asarray(tau, dtype=np.float64)
    t = t[np.isfinite(t)]
    if t.size == 0:
        return math.nan
    if (t <= 0).any():
        raise DataError("tau must be positive")
    return float(np.percentile(t, hi) / np.percentile(t, lo))


# ---------------------------------------------------------------------------------------- transfer
def criterion_columns_of(answers: pd.DataFrame) -> list[str]:
    """Criterion columns ``C1..CK`` of a wide answers table, in order (must be contiguous)."""
    found = sorted((int(m.group(1)), c) for c in answers.columns if (m := _CRITERION.match(str(c))))
    if not found or [n for n, _ in found] != list(range(1, len(found) + 1)):
        raise DataError(f"answers need criterion columns C1..CK without gaps, got {list(answers.columns)}")
    return [c for _, c in found]


def answers_long(answers: pd.DataFrame) -> pd.DataFrame:
    """Wide placements (``..., C1..CK``) to one row per answer: the id columns, ``criterion`` (int index,
    0 = C1) and ``answer``."""
    crit = criterion_columns_of(answers)
    ids = [c for c in answers.columns if c not in crit]
    long = answers.reset_index(drop=True).reset_index(names="placement").melt(
        id_vars=["placement", *ids], value_vars=crit, var_name="criterion_name", value_name="answer")
    long["criterion"] = long["criterion_name"].str[1:].astype(int) - 1
    return long.sort_values(["placement", "criterion"]).drop(columns="placement").reset_index(drop=True)


def fit_query_scales(query, theta, criterion, answer, gamma, beta, *, max_iter: int = 100,
                     tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """MAP per-query scale and offset with frozen items (the query half of the 2PL calibration).

    Minimises, for every query j independently,
    ``sum_answers BCE(sigmoid(gamma_c (tau_j theta_i + alpha_j - beta_c)), y) + (tau_j - 1)^2 / 2 +
    alpha_j^2 / 8`` (the calibration's priors tau ~ N(1, 1), alpha ~ N(0, 2^2)) by damped Newton on all
    queries at once (the problem is convex in (tau, alpha); tau is kept positive by step halving).

    Args:
        query: int[N] query index in ``[0, Q)`` of each answer.
        theta: float[N] frozen BT score of the answer's document.
        criterion: int[N] criterion index.
        answer: {0,1}[N] answers.
        gamma, beta: float[C] frozen item parameters.

    Returns:
        ``(tau, alpha)``, float64[Q] each.
    """
    q = np.asarray(query, dtype=np.int64)
    th = np.asarray(theta, dtype=np.float64)
    y = np.asarray(answer, dtype=np.float64)
    c = np.asarray(criterion, dtype=np.int64)
    g, b = np.asarray(gamma, dtype=np.float64)[c], np.asarray(beta, dtype=np.float64)[c]
    n_q = int(q.max()) + 1 if q.size else 0
    tau, alpha = np.ones(n_q), np.zeros(n_q)

    def objective(tau, alpha):
        z = g * (tau[q] * th + alpha[q] - b)
        return np.bincount(q, np.logaddexp(0.0, z) - y * z, n_q) + 0.5 * (tau - 1) ** 2 + alpha**2 / 8.0

    f = objective(tau, alpha)
    for _ in range(max_iter):
        z = g * (tau[q] * th + alpha[q] - b)
        p = 0.5 * (1.0 + np.tanh(0.5 * z))
        r = g * (p - y)
        w = g * g * p * (1.0 - p)
        g_t = np.bincount(q, r * th, n_q) + (tau - 1.0)
        g_a = np.bincount(q, r, n_q) + alpha / 4.0
        h_tt = np.bincount(q, w * th * th, n_q) + 1.0
        h_ta = np.bincount(q, w * th, n_q)
        h_aa = np.bincount(q, w, n_q) + 0.25
        det = h_tt * h_aa - h_ta**2
        d_t = -(h_aa * g_t - h_ta * g_a) / det
        d_a = -(h_tt * g_a - h_ta * g_t) / det
        step = np.ones(n_q)
        for _ in range(60):
            t_new, a_new = tau + step * d_t, alpha + step * d_a
            bad = (t_new <= 1e-6) | (objective(np.maximum(t_new, 1e-6), a_new) > f + 1e-12 * (1 + np.abs(f)))
            if not bad.any():
                break
            step = np.where(bad, step / 2, step)
        tau, alpha = np.maximum(t_new, 1e-6), a_new
        f = objective(tau, alpha)
        if np.max(np.abs(step * d_t), initial=0) < tol and np.max(np.abs(step * d_a), initial=0) < tol:
            break
    return tau, alpha


def _bce(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def item_transfer(
    answers: pd.DataFrame,
    bt: pd.DataFrame | None = None,
    fit_items: Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray]] | None = None,
) -> pd.DataFrame:
    """Leave-one-dataset-out transfer of the rubric item parameters.

    For each dataset D: fit (gamma, beta) on the answers of every other dataset; on D, fit only each
    query's (tau, alpha) with those items frozen (MAP with the calibration's priors, from the BT scores)
    and predict D's answers; compare the cross-entropy with per-criterion base rates of the training
    datasets. The query parameters use D's answers (they are the per-query part the items do not
    carry); the items never see D.

    Args:
        answers: one row per rubric placement: ``dataset, query_id, doc_id, C1..CK`` (0/1). Query ids must
            be unique across datasets. Without ``bt`` it also needs an ``ability`` column (calibrated
            abilities from elsewhere), used as is.
        bt: ``query_id, doc_id, theta`` frozen BT scores (as :func:`rcp_jax.calibrate` takes).
        fit_items: ``fit_items(train_answers) -> (gamma, beta)`` fitted on a subset of ``answers`` (same
            columns). Default: :func:`rcp_jax.calibrate` on the subset and its BT scores (needs ``bt``).

    Returns:
        One row per held-out dataset plus ``all`` (answer-weighted): ``n_answers, ce_model, ce_base,
        reduction = 1 - ce_model / ce_base`` (paper: 60.6% lower cross-entropy).
    """
    for col in ("dataset", "query_id", "doc_id"):
        if col not in answers.columns:
            raise DataError(f"answers are missing column {col!r}; expected dataset, query_id, doc_id, C1..CK")
    crit = criterion_columns_of(answers)
    ans = answers.copy()
    ans["query_id"] = ans["query_id"].astype(str)
    ans["doc_id"] = ans["doc_id"].astype(str)
    per_q = ans.groupby("query_id")["dataset"].nunique()
    if (per_q > 1).any():
        raise DataError(f"query id {per_q[per_q > 1].index[0]!r} appears in several datasets; prefix query ids "
                        f"with the dataset name to make them unique")
    datasets = sorted(ans["dataset"].astype(str).unique())
    if len(datasets) < 2:
        raise DataError("leave-one-dataset-out transfer needs answers from at least two datasets")
    if bt is None and "ability" not in ans.columns:
        raise DataError("give BT scores (bt=) or an 'ability' column in the answers")
    if bt is not None:
        for col in ("query_id", "doc_id", "theta"):
            if col not in bt.columns:
                raise DataError(f"BT scores are missing column {col!r}; expected query_id, doc_id, theta")
        bt = bt.assign(query_id=bt["query_id"].astype(str), doc_id=bt["doc_id"].astype(str))
        theta_of = bt.set_index(["query_id", "doc_id"])["theta"]
        key = pd.MultiIndex.from_frame(ans[["query_id", "doc_id"]])
        missing = ~key.isin(theta_of.index)
        if missing.any():
            row = ans[missing].iloc[0]
            raise DataError(f"answers for document {row.doc_id!r} of query {row.query_id!r} have no BT score")
        ans["_theta"] = theta_of.reindex(key).to_numpy(dtype=np.float64)
    if fit_items is None:
        if bt is None:
            raise DataError("the default item fit (rcp_jax.calibrate) needs BT scores: pass bt=")
        fit_items = _calibrate_items(bt)

    rows = []
    for ds in datasets:
        test_mask = ans["dataset"].astype(str) == ds
        train, test = ans[~test_mask], ans[test_mask]
        gamma, beta = (np.asarray(v, dtype=np.float64) for v in fit_items(
            train.drop(columns=[c for c in ("_theta",) if c in train.columns])))
        if gamma.shape != (len(crit),) or beta.shape != (len(crit),):
            raise DataError(f"fit_items returned gamma {gamma.shape}, beta {beta.shape}; expected ({len(crit)},)")
        base = np.clip(train[crit].to_numpy(dtype=np.float64).mean(0), 1e-6, 1 - 1e-6)
        y2 = test[crit].to_numpy(dtype=np.float64)  # [n, C]
        c_idx = np.broadcast_to(np.arange(len(crit)), y2.shape).ravel()
        y = y2.ravel()
        if bt is not None:
            q_idx = np.repeat(pd.factorize(test["query_id"])[0], len(crit))
            th = np.repeat(test["_theta"].to_numpy(dtype=np.float64), len(crit))
            tau, alpha = fit_query_scales(q_idx, th, c_idx, y, gamma, beta)
            ability = tau[q_idx] * th + alpha[q_idx]
        else:
            ability = np.repeat(test["ability"].to_numpy(dtype=np.float64), len(crit))
        p, b = predict_answers(ability, c_idx, gamma, beta), base[c_idx]
        rows.append({"dataset": ds, "n_answers": y.size, "ce_model": _bce(p, y), "ce_base": _bce(b, y)})
    out = pd.DataFrame(rows)
    w = out["n_answers"].to_numpy(dtype=np.float64)
    total = {"dataset": "all", "n_answers": int(w.sum()),
             "ce_model": float((out.ce_model * w).sum() / w.sum()), "ce_base": float((out.ce_base * w).sum() / w.sum())}
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out["reduction"] = 1.0 - out["ce_model"] / out["ce_base"]
    return out


def _calibrate_items(bt: pd.DataFrame) -> Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray]]:
    def fit(train: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        import warnings

        from rcp_jax.calibration import calibrate

        queries = set(train["query_id"].astype(str))
        sub = bt[bt["query_id"].isin(queries)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            cal = calibrate(sub, train)
        return cal.gamma, cal.beta

    return fit


# ------------------------------------------------------------------------------------ a fit's report
def answer_predictions(answers: pd.DataFrame, calibration) -> pd.DataFrame:
    """One row per rubric answer with the 2PL's predicted P(yes), raw and calibrated.

    Args:
        answers: one row per placement ``query_id, doc_id[, window_id][, dataset], C1..CK`` (0/1), as
            ``rcp-jax fit`` writes to ``answers.csv``.
        calibration: a :class:`rcp_jax.Calibration` (``documents`` with ``theta_bt`` and ``ability``).

    Returns:
        ``query_id, doc_id[, window_id][, dataset], criterion`` (``C1``..), ``answer`` (0/1), ``p_raw``
        (``sigmoid(gamma_c (theta_BT - beta_c))``: the BT score read on the calibrated scale without the
        per-query scale and offset) and ``p_calibrated`` (``sigmoid(gamma_c (tau theta_BT + alpha -
        beta_c))``), for every answer whose document has a calibrated ability (answers of queries that
        could not be calibrated are left out). The table ``rcp-jax diagnose --answers`` reads.
    """
    crit = criterion_columns_of(answers)
    docs = calibration.documents[["query_id", "doc_id", "theta_bt", "ability"]].copy()
    docs["query_id"] = docs["query_id"].astype(str)
    docs["doc_id"] = docs["doc_id"].astype(str)
    ans = answers.assign(query_id=answers["query_id"].astype(str), doc_id=answers["doc_id"].astype(str))
    placed = ans.merge(docs, on=["query_id", "doc_id"], how="inner").dropna(subset=["theta_bt", "ability"])
    ids = [c for c in ("query_id", "doc_id", "window_id", "dataset") if c in placed.columns]
    long = answers_long(placed[[*ids, "theta_bt", "ability", *crit]])
    gamma, beta = np.asarray(calibration.gamma, np.float64), np.asarray(calibration.beta, np.float64)
    long["p_raw"] = predict_answers(long["theta_bt"], long["criterion"], gamma, beta)
    long["p_calibrated"] = predict_answers(long["ability"], long["criterion"], gamma, beta)
    long["criterion"] = [crit[c] for c in long["criterion"]]
    long["answer"] = long["answer"].astype(np.int64)
    return long[[*ids, "criterion", "answer", "theta_bt", "ability", "p_raw", "p_calibrated"]]


def fit_report(answers: pd.DataFrame, calibration, bt: pd.DataFrame | None = None, *, n_bins: int = 10,
               min_transfer_queries: int = 4, transfer: bool = True) -> dict:
    """Every calibration diagnostic of the paper on one fit (what ``rcp-jax diagnose --fit`` prints).

    Args:
        answers: placements ``query_id, doc_id[, dataset], C1..CK`` (``answers.csv`` of ``rcp-jax fit``).
        calibration: the fit's :class:`rcp_jax.Calibration`.
        bt: ``query_id, doc_id, theta`` (``bt.csv``); needed for the item transfer.
        n_bins: ECE bins.
        min_transfer_queries: the fewest queries for the query-halves transfer.
        transfer: False to skip the transfer (e.g. when it is computed across several fits instead).

    Returns:
        dict with ``predictions`` (:func:`answer_predictions`), ``ece`` (:func:`calibration_report` of
        ``p_raw`` and ``p_calibrated``), ``local_dependence`` (raw and residual mean |corr|), ``tau_spread``
        (95th / 5th percentile), ``transfer`` (:func:`item_transfer` table or None), ``transfer_kind``
        (``"datasets"``: leave-one-dataset-out, when ``answers`` has a ``dataset`` column with two or more
        values; ``"query halves"``: the queries split alternately in id order into two halves, when there
        is one dataset) and ``transfer_note`` (what was computed, or why nothing was).
    """
    crit = criterion_columns_of(answers)
    pred = answer_predictions(answers, calibration)
    if pred.empty:
        raise DataError("no rubric answer belongs to a calibrated document: nothing to diagnose")
    index = {c: i for i, c in enumerate(crit)}
    crit_idx = pred["criterion"].map(index).to_numpy()
    ece = calibration_report(pred["answer"].to_numpy(), {"raw": pred["p_raw"].to_numpy(),
                                                         "calibrated": pred["p_calibrated"].to_numpy()},
                             crit_idx, criteria=crit, n_bins=n_bins)
    docs = calibration.documents[["query_id", "doc_id", "ability"]].astype({"query_id": str, "doc_id": str})
    placed = answers.assign(query_id=answers["query_id"].astype(str), doc_id=answers["doc_id"].astype(str)).merge(
        docs, on=["query_id", "doc_id"], how="inner").dropna(subset=["ability"])
    expected = np.column_stack([predict_answers(placed["ability"], np.full(len(placed), c), calibration.gamma,
                                                calibration.beta) for c in range(len(crit))])
    dependence = local_dependence(placed[crit].to_numpy(np.float64), expected)
    spread = tau_spread(calibration.queries["tau"]) if "tau" in calibration.queries.columns else math.nan
    wanted, transfer, kind, note = transfer, None, None, None
    datasets = answers["dataset"].astype(str).nunique() if "dataset" in answers.columns else 1
    if not wanted:
        note = "item transfer computed across the fits (see below)"
    elif bt is None:
        note = "item transfer not computed: it needs the BT scores (bt.csv of the fit folder)"
    elif datasets >= 2:
        transfer, kind = item_transfer(answers, bt), "datasets"
        note = f"leave-one-dataset-out transfer over {datasets} datasets"
    else:
        queries = sorted(answers["query_id"].astype(str).unique(), key=_natural_key)
        if len(queries) < min_transfer_queries:
            note = (f"item transfer not computed: one dataset and only {len(queries)} queries (cross-dataset transfer "
                    f"needs answers of two or more datasets; the query-halves stand-in needs {min_transfer_queries})")
        else:
            halves = {q: ("first half" if i % 2 == 0 else "second half") for i, q in enumerate(queries)}
            transfer = item_transfer(answers.assign(dataset=answers["query_id"].astype(str).map(halves)), bt)
            kind = "query halves"
            note = ("cross-dataset transfer not computed: the fit holds one dataset (a store holds one; give the fit "
                    "folders of two or more datasets, `--fit A/ --fit B/`, for leave-one-dataset-out transfer); shown "
                    "instead: the items fitted on one half of the queries (alternate queries in id order) predict the "
                    "other half's answers")
    return {"predictions": pred, "ece": ece, "local_dependence": dependence, "tau_spread": spread,
            "transfer": transfer, "transfer_kind": kind, "transfer_note": note}


def transfer_across_fits(fits: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """Leave-one-dataset-out item transfer across separately judged datasets (one fit each).

    Args:
        fits: dataset name -> ``(answers, bt)`` of its fit (``answers.csv`` and ``bt.csv`` of ``rcp-jax
            fit``). Query ids are prefixed with the dataset name, so they need not be unique across fits.

    Returns:
        :func:`item_transfer`'s table, one row per held-out dataset plus ``all``.
    """
    if len(fits) < 2:
        raise DataError("cross-dataset transfer needs the fits of two or more datasets")
    answers, bts = [], []
    for name, (ans, bt) in fits.items():
        prefix = f"{name}::"
        answers.append(ans.assign(dataset=name, query_id=prefix + ans["query_id"].astype(str)))
        bts.append(bt.assign(query_id=prefix + bt["query_id"].astype(str)))
    crit = criterion_columns_of(answers[0])
    for name, ans in zip(fits, answers):
        if criterion_columns_of(ans) != crit:
            raise DataError(f"the fit of {name!r} has criteria {criterion_columns_of(ans)}, the first has {crit}; "
                            "transfer needs one rubric")
    cols = ["dataset", "query_id", "doc_id", *crit]
    return item_transfer(pd.concat([a[cols] for a in answers], ignore_index=True), pd.concat(bts, ignore_index=True))


def _natural_key(s: str):
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|\D+", s))

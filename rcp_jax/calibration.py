"""Stage B from tidy tables: the 2PL calibration (and the rubric-only 2PL), as Calibration objects."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np
import pandas as pd

from rcp_jax.encoding.answers import answer_counts
from rcp_jax.encoding.ids import codes_at, id_codes, order_by_code_and_id, run_starts
from rcp_jax.errors import CalibrationError, DataError
from rcp_jax.metrics import gain
from rcp_jax.models import irt

_CRITERION = re.compile(r"^C(\d+)$")
#: the dtype of a column of Python strings (``astype(str)`` gives it)
_STR_DTYPE = pd.Series(np.array(["a"], dtype=object)).dtype


def criterion_columns(answers: pd.DataFrame) -> list[str]:
    """The criterion columns ``C1..CK`` of an answers table, checked to form a contiguous ladder."""
    found = sorted((int(m.group(1)), c) for c in answers.columns if (m := _CRITERION.match(str(c))))
    if not found:
        raise DataError(
            f"answers have no criterion columns; expected C1..CK (one 0/1 column per criterion), got "
            f"{list(answers.columns)}"
        )
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(numbers) + 1)):
        expected = [f"C{i}" for i in range(1, len(numbers) + 1)]
        raise DataError(
            f"unknown criteria {[c for _, c in found]}: criteria must be named C1..CK without gaps "
            f"(expected {expected}); rename or drop the extra columns"
        )
    return [c for _, c in found]


def validate_answers(answers: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Check a rubric answers table (one row per placement) and return it with int8 criteria."""
    for col in ("query_id", "doc_id"):
        if col not in answers.columns:
            raise DataError(f"answers are missing column {col!r}; expected query_id, doc_id, C1..CK")
    crit = criterion_columns(answers)
    # a new frame (copy on write: the columns replaced below never touch the caller's)
    df = answers.loc[:, ["query_id", "doc_id", *crit]]
    df["query_id"] = df["query_id"].astype(str)
    df["doc_id"] = df["doc_id"].astype(str)
    for c in crit:
        raw = df[c]
        if raw.dtype == bool:
            raise DataError(f"criterion {c} holds booleans; give 0/1 integers")
        if raw.dtype.kind in "iu":  # integers: checked by numpy (two reductions), not by a hash table
            values = raw.to_numpy()
            if not len(values) or (values.min() >= 0 and values.max() <= 1):
                if raw.dtype != np.int8:
                    df[c] = values.astype(np.int8)
                continue
        values = pd.to_numeric(raw, errors="coerce")
        bad = ~values.isin([0, 1])
        if bad.any():
            row = df.loc[bad].iloc[0]
            value = raw[bad].iloc[0]
            value = value.item() if hasattr(value, "item") else value
            raise DataError(
                f"criterion {c} of document {row.doc_id!r} in query {row.query_id!r} is {value!r}; "
                f"answers must be 0 or 1 (drop invalid placements instead of guessing)"
            )
        df[c] = values.astype(np.int8)
    return df, crit


@dataclass
class Calibration:
    """Calibrated RCP gains of a collection.

    Attributes:
        criteria: criterion names C1..CK.
        gamma, beta: float64[K] item discriminations (sum K) and difficulties (mean 0).
        queries: DataFrame ``query_id, tau, alpha, n_docs, n_answers, calibrated`` (tau, alpha NaN for
            queries without rubric answers, which stay uncalibrated).
        documents: DataFrame ``query_id, doc_id, theta_bt, ability, gain, placements, count_gain``
            (ability = tau * theta_bt + alpha; count_gain = passed criteria / (K * placements), NaN
            without placements).
        method: ``map`` (frozen-BT 2PL) or ``rubric_only``.
        info: fit diagnostics (objective, iterations, converged, ...).
        rubric: the rubric the answers were given to, ``{"name", "hash", "criteria": [K names], "source"}``
            (:meth:`rcp_jax.judging.prompts.rubric.Rubric.summary`; set by ``rcp-jax fit`` from the store), or ``None`` when
            unknown. Its names label reports and plots (:attr:`labels`); ``criteria`` stays ``C1..CK``.
    """

    criteria: list[str]
    gamma: np.ndarray
    beta: np.ndarray
    queries: pd.DataFrame
    documents: pd.DataFrame
    method: str = "map"
    info: dict = field(default_factory=dict)
    rubric: dict | None = None

    @property
    def labels(self) -> list[str]:
        """Criterion names for reports: the rubric's names, or ``C1..CK`` when the rubric is unknown."""
        names = list((self.rubric or {}).get("criteria") or [])
        return names if len(names) == len(self.criteria) else list(self.criteria)

    def gains(self) -> pd.DataFrame:
        """``query_id, doc_id, gain`` of every calibrated document."""
        d = self.documents
        return d.loc[d["gain"].notna(), ["query_id", "doc_id", "gain"]].reset_index(drop=True)

    def count_gains(self) -> pd.DataFrame:
        """``query_id, doc_id, gain`` with the Count gain (share of passed criteria)."""
        d = self.documents
        out = d.loc[d["count_gain"].notna(), ["query_id", "doc_id", "count_gain"]]
        return out.rename(columns={"count_gain": "gain"}).reset_index(drop=True)

    def gain_of(self, theta) -> np.ndarray:
        """Gain of calibrated abilities with this calibration's items (vectorised)."""
        return gain(theta, self.gamma, self.beta)


def _placement_counts(answers: pd.DataFrame, crit: list[str]) -> pd.DataFrame:
    """``query_id, doc_id, C1_pass..CK_pass, placements`` per placed document (in order of first appearance)."""
    agg = answers.groupby(["query_id", "doc_id"], sort=False)[crit].agg(["sum", "count"])
    out = pd.DataFrame(index=agg.index)
    for c in crit:
        out[f"{c}_pass"] = agg[(c, "sum")].astype(np.float64)
    out["placements"] = agg[(crit[0], "count")].astype(np.float64)
    return out.reset_index()


def calibrate(
    bt: pd.DataFrame,
    answers: pd.DataFrame,
    *,
    ridge: float = irt.DEFAULT_RIDGE,
    float64: bool = False,
    max_iter: int = 200,
) -> Calibration:
    """Calibrate BT scores across queries with the 2PL of METHOD section 3 (MAP).

    Args:
        bt: ``query_id, doc_id, theta`` (e.g. from :func:`rcp_jax.fit_bradley_terry`); frozen.
        answers: one row per rubric placement: ``query_id, doc_id, C1..CK`` with 0/1 answers. Repeated
            placements of a document are collapsed to (passes, trials) per criterion.
        ridge: L2 penalty on the raw item parameters.
        float64: fit in double precision (default float32).
        max_iter: Newton iteration cap.

    Returns:
        :class:`Calibration`. Within-query order is never changed (tau > 0).

    Raises:
        CalibrationError: answers for a document that has no BT score (names query and document).
    """
    for col in ("query_id", "doc_id", "theta"):
        if col not in bt.columns:
            raise DataError(f"BT scores are missing column {col!r}; expected query_id, doc_id, theta")
    ans, crit = validate_answers(answers)
    n_components = bt.attrs.get("n_components") if isinstance(bt.attrs.get("n_components"), dict) else None
    # a new frame without attrs (the constructor does not carry them; n_components was read above): pandas
    # deep-copies attrs into every derived frame, costly for the n_components of thousands of queries.
    # Copy on write: the caller's frame is untouched.
    bt = pd.DataFrame(bt, copy=False).loc[:, ["query_id", "doc_id", "theta"]]
    for col in ("query_id", "doc_id"):
        if bt[col].dtype != _STR_DTYPE:
            bt[col] = bt[col].astype(str)
    bt_theta = bt["theta"].to_numpy()
    if not np.isfinite(bt["theta"].to_numpy(dtype=np.float64)).all():
        row = bt.loc[~np.isfinite(bt["theta"].to_numpy(dtype=np.float64))].iloc[0]
        raise DataError(f"BT score of document {row.doc_id!r} in query {row.query_id!r} is not finite")
    # ids as integer codes: queries in order of first appearance (bt_q); answers matched to BT rows by codes
    n_bt, k = len(bt), len(crit)
    bt_starts = run_starts(bt["query_id"])
    head_q, q_names = codes_at(bt["query_id"], bt_starts)
    bt_q = np.repeat(head_q, np.diff(np.append(bt_starts, n_bt)))
    placements, pass_counts = answer_counts(bt, bt_starts, bt_q, q_names, ans, crit)
    q_all = [str(q) for q in q_names.tolist()]
    answered = np.bincount(bt_q[placements > 0], minlength=len(q_all)) > 0
    uncal = [q for q, a in zip(q_all, answered) if not a]
    if uncal:
        warnings.warn(
            f"{len(uncal)} quer{'y has' if len(uncal) == 1 else 'ies have'} a tournament but no rubric answers "
            f"and stay uncalibrated (no tau, alpha or gains): {uncal[:5]}",
            stacklevel=2,
        )
    # queries and documents enter the fit sorted by id, so the shared sums (and every bit of the result)
    # do not depend on the order of the input rows
    cal_q = sorted(q for q, a in zip(q_all, answered) if a)
    if not cal_q:
        raise CalibrationError("no query has both BT scores and rubric answers; nothing to calibrate")
    q_cal = pd.Index(cal_q).get_indexer(q_names)  # calibrated index of each query, -1: uncalibrated
    row_q = q_cal[bt_q]
    rows = np.flatnonzero(row_q >= 0)
    rows = rows[order_by_code_and_id(row_q[rows], bt["doc_id"] if len(rows) == n_bt else bt["doc_id"].take(rows))]
    n_q = len(cal_q)
    sizes = np.bincount(row_q[rows], minlength=n_q)
    qi = row_q[rows]
    di = np.arange(len(rows)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    dtype = jnp.float64 if float64 else jnp.float32
    # the compiled solve's criterion-major cells, written straight from the rows (no dense float64 copies)
    cells = irt.criterion_major_cells(qi, di, bt_theta[rows], np.take(pass_counts, rows, axis=0), placements[rows],
                                      n_q, dtype=dtype)
    fit = irt.fit_2pl_calibration(cells, ridge=ridge, dtype=dtype, max_iter=max_iter)
    fit, restarts = _restart_collapsed(fit, cells, ridge=ridge, dtype=dtype, max_iter=max_iter)
    if not fit.converged:
        warnings.warn(f"2PL calibration did not converge in {fit.iterations} iterations", stacklevel=2)

    tau = pd.Series(fit.tau, index=cal_q)
    alpha = pd.Series(fit.alpha, index=cal_q)
    calibrated_row = row_q >= 0
    ability = np.where(calibrated_row, fit.tau[row_q] * bt_theta + fit.alpha[row_q], np.nan)
    _refuse_non_finite(fit, tau, alpha, ability, calibrated_row, bt["doc_id"], float64)
    gains = gain(ability, fit.gamma, fit.beta)  # NaN (uncalibrated) abilities give NaN gains
    q_sorted = np.empty(len(q_all), dtype=np.int64)
    q_sorted[np.argsort(np.array(q_all, dtype=object), kind="stable")] = np.arange(len(q_all))
    flags = _flags_by_code(q_sorted[bt_q], sorted(q_all), bt_theta, placements, pass_counts, crit, tau, n_components)
    for flag in flags:
        warnings.warn(flag["message"], CalibrationWarning, stacklevel=2)
    passed = np.einsum("ij->i", pass_counts)  # whole numbers: the same sum in any order (no BLAS threads)
    count_gain = np.where(placements > 0, passed / (k * np.where(placements > 0, placements, 1)), np.nan)
    # the frame takes the fresh arrays as they are (no consolidating copy); theta is copied from the caller's
    docs = pd.DataFrame({
        "query_id": bt["query_id"].array, "doc_id": bt["doc_id"].array, "theta_bt": bt["theta"].array.copy(),
        "ability": ability, "gain": gains, "placements": placements.astype(np.int64), "count_gain": count_gain,
    }, copy=False)
    queries = pd.DataFrame({"query_id": q_all})
    queries["tau"] = queries["query_id"].map(tau)
    queries["alpha"] = queries["query_id"].map(alpha)
    queries["n_docs"] = np.bincount(bt_q, minlength=len(q_all)).astype(int)
    queries["n_answers"] = (np.bincount(bt_q, weights=placements, minlength=len(q_all)).astype(np.int64) * k).astype(int)
    queries["calibrated"] = queries["tau"].notna()
    return Calibration(
        criteria=crit, gamma=fit.gamma, beta=fit.beta, queries=queries, documents=docs,
        method="map",
        info={"objective": fit.objective, "iterations": fit.iterations, "converged": fit.converged,
              "ridge": ridge, "float64": float64, "restarts": restarts, "flags": flags},
    )


def _restart_collapsed(fit, cells, *, ridge, dtype, max_iter, attempts: int = 2):
    """Warm restarts of the 2PL fit while some query's tau has collapsed to ~0.

    The Newton iteration works on ``t`` with ``tau = softplus(t)``: an early step can throw ``t`` far
    negative, where its gradient vanishes and the query stays at tau ~ 0 although a much better optimum
    exists (seen when other queries are degenerate). Since the solver bounds the step in ``t``
    (``rcp_jax.models.irt.MAX_T_STEP``) this no longer happens on the data that showed it; the restart stays as a
    safety net. Restarting from the fitted items, with those queries' (tau, alpha) reset to (1, 0), finds
    the better optimum; a restart is kept only if it lowers the objective.
    """
    import dataclasses

    restarts = 0
    for _ in range(attempts):
        collapsed = fit.tau < TAU_COLLAPSED
        if not collapsed.any():
            break
        t = np.where(collapsed, np.log(np.expm1(1.0)), fit.t)
        start = dataclasses.replace(fit, t=t, alpha=np.where(collapsed, 0.0, fit.alpha))
        again = irt.fit_2pl_calibration(cells, ridge=ridge, dtype=dtype, max_iter=max_iter, init=start)
        if not again.objective <= fit.objective:
            break
        fit, restarts = again, restarts + 1
    return fit, restarts


class CalibrationWarning(UserWarning):
    """The calibration finished, but some of its data is degenerate (the message names the ids)."""


#: below this, a query's scale tau has collapsed: its documents all get (almost) the same gain
TAU_COLLAPSED = 1e-3


def _refuse_non_finite(
    fit, tau: pd.Series, alpha: pd.Series, ability: np.ndarray, calibrated: np.ndarray, doc_ids: pd.Series,
    float64: bool,
) -> None:
    """A fit that produced NaN or infinities is an error, never NaN gains handed on silently. ``ability``
    float[n], ``calibrated`` bool[n] and ``doc_ids`` are per document."""
    bad = [name for name, v in (("gamma", fit.gamma), ("beta", fit.beta), ("tau", tau.to_numpy()),
                                ("alpha", alpha.to_numpy())) if not np.isfinite(np.asarray(v, dtype=np.float64)).all()]
    ability = np.asarray(ability, dtype=np.float64)
    if not np.isfinite(ability[calibrated]).all():
        bad.append("ability of documents " + str(doc_ids[calibrated & ~np.isfinite(ability)].tolist()[:5]))
    if bad:
        raise CalibrationError(
            f"the 2PL calibration produced non-finite values ({'; '.join(bad)}); "
            + ("retry with float64=True (rcp-jax fit --float64), " if not float64 else "")
            + "and check the answers for degenerate queries or criteria"
        )


def degenerate_data_flags(
    documents: pd.DataFrame, criteria: list[str], tau: pd.Series, n_components: dict[str, int] | None = None
) -> list[dict]:
    """What a finished calibration could not learn from its data, one flag per kind (ids listed).

    Kinds: ``query_all_fail`` / ``query_all_pass`` (every rubric answer of a query is 0 / 1: its tau and
    alpha rest on the prior, its gains sit at the floor / ceiling), ``criterion_never_passed`` /
    ``criterion_always_passed`` (the criterion's difficulty rests on the prior), ``bt_no_spread`` (every
    document of a query has the same BT score: the judge stated no preference), ``bt_disconnected``
    (scores of different components are not comparable), ``tau_collapsed`` (tau < 1e-3: the query's
    documents all get the same gain).

    Args:
        documents: ``query_id, doc_id, theta, placements, C1_pass..CK_pass`` (placement counts).
        criteria: C1..CK. tau: per calibrated query. n_components: BT components per query.

    Returns:
        list of ``{"kind", "ids", "message"}``.
    """
    codes, names = id_codes(documents["query_id"], sort=True)
    pass_cols = [f"{c}_pass" for c in criteria]
    return _flags_by_code(
        codes, [str(q) for q in names.tolist()], documents["theta"].to_numpy(dtype=np.float64),
        documents["placements"].to_numpy(dtype=np.float64), documents[pass_cols].to_numpy(dtype=np.float64),
        list(criteria), tau, n_components,
    )


def _flags_by_code(
    q_code: np.ndarray, q_names: list[str], theta: np.ndarray, placements: np.ndarray, passes: np.ndarray,
    criteria: list[str], tau: pd.Series, n_components: dict[str, int] | None,
) -> list[dict]:
    """:func:`degenerate_data_flags` from arrays: ``q_code`` int[n] indexes ``q_names`` (sorted ids), and
    ``theta``, ``placements`` float[n] and ``passes`` float[n, K] are per document."""
    flags = []

    def flag(kind: str, noun: tuple[str, str], ids: list, text: str) -> None:
        if ids:
            shown = ", ".join(repr(str(i)) for i in ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            what = f"{noun[0] if len(ids) == 1 else noun[1]} {shown}"
            flags.append({"kind": kind, "ids": [str(i) for i in ids], "message": text.format(what=what)})

    query = ("query", "queries")
    k, n_q = len(criteria), len(q_names)
    names = np.array(q_names, dtype=object)
    # counts are whole numbers: their sums are exact in any order; unjudged rows (placements 0, passes 0 or
    # NaN) are left out by masks, not by copies of the rows
    judged = placements > 0
    every = bool(judged.all())
    row_pass, row_trials = np.einsum("ij->i", passes), placements  # einsum: no BLAS threads left spinning
    if not every:
        row_pass, row_trials = np.where(judged, row_pass, 0.0), np.where(judged, placements, 0.0)
    heads = np.flatnonzero(np.diff(q_code, prepend=-1) != 0) if len(q_code) else q_code
    runs = len(heads) > 0 and len(np.unique(q_code[heads])) == len(heads)  # each query one run of rows
    if runs:  # a reduction per run instead of a scatter
        has, passes_q, trials_q = np.zeros(n_q, dtype=bool), np.zeros(n_q), np.zeros(n_q)
        has[q_code[heads]] = np.logical_or.reduceat(judged, heads)
        passes_q[q_code[heads]] = np.add.reduceat(row_pass, heads)
        trials_q[q_code[heads]] = np.add.reduceat(row_trials, heads)
        trials_q *= k
    else:
        has = np.bincount(q_code, weights=judged.astype(np.float64), minlength=n_q) > 0
        passes_q = np.bincount(q_code, weights=row_pass, minlength=n_q)
        trials_q = np.bincount(q_code, weights=row_trials, minlength=n_q) * k
    flag("query_all_fail", query, list(names[has & (passes_q == 0)]),
         "every rubric answer of {what} is 0: tau and alpha rest on the prior and the gains sit at the floor; "
         "check the pool and the rubric answers")
    flag("query_all_pass", query, list(names[has & (passes_q == trials_q)]),
         "every rubric answer of {what} is 1: tau and alpha rest on the prior and the gains sit at the ceiling; "
         "check the pool and the rubric answers")
    c_pass = (np.einsum("ij->j", passes) if every
              else np.add.reduce(passes, axis=0, where=judged[:, None])).astype(np.float64)
    c_trials = np.full(k, float(row_trials.sum()))
    flags += degenerate_criteria(list(criteria), c_pass, c_trials)
    high, low = np.full(n_q, np.nan), np.full(n_q, np.nan)
    if runs:
        high[q_code[heads]] = np.fmax.reduceat(theta, heads)
        low[q_code[heads]] = np.fmin.reduceat(theta, heads)
    elif len(q_code):
        np.fmax.at(high, q_code, theta)  # fmax / fmin skip NaN, as pandas' max / min do
        np.fmin.at(low, q_code, theta)
    spread = high - low
    if runs:
        docs_q = np.zeros(n_q, dtype=np.int64)
        docs_q[q_code[heads]] = np.diff(np.append(heads, len(q_code)))
    else:
        docs_q = np.bincount(q_code, minlength=n_q)
    flag("bt_no_spread", query, list(names[(spread <= 1e-9) & (docs_q > 1)]),
         "every document of {what} has the same Bradley-Terry score (the judge gave every document of every window "
         "the same score): the documents get one gain; check the judge's tournament answers")
    flag("bt_disconnected", query, sorted(q for q, n in (n_components or {}).items() if n > 1),
         "the tournament of {what} is disconnected: gains of different components are not comparable; judge "
         "windows that mix them")
    flag("tau_collapsed", query, list(tau.index[tau.to_numpy() < TAU_COLLAPSED]),
         "the scale tau of {what} collapsed to ~0: its documents all get the same gain, as its BT scores do not "
         "explain its rubric answers")
    return flags


def degenerate_criteria(criteria: list[str], passes: np.ndarray, trials: np.ndarray) -> list[dict]:
    """Criteria every answer of which is "no" (never passed) or "yes" (always passed), with counts.

    Args:
        criteria: C1..CK. passes, trials: float[C] answer counts per criterion over all documents.

    Returns:
        list of ``{"kind", "ids", "message"}`` flags (kinds ``criterion_never_passed`` and
        ``criterion_always_passed``, as :func:`degenerate_data_flags`); each message names the criteria and
        their counts in plain numbers.
    """
    flags = []
    for kind, hit, text in (
        ("criterion_never_passed", passes == 0,
         "no document passes {what}: its difficulty rests on the prior (the criterion is very hard, or the "
         "judge never says yes); check the rubric answers"),
        ("criterion_always_passed", (passes == trials) & (trials > 0),
         "every document passes {what}: its difficulty rests on the prior; check the rubric answers"),
    ):
        ids = [c for c, h in zip(criteria, hit) if h]
        if not ids:
            continue
        shown = ", ".join(f"{c!r} (yes in {int(passes[criteria.index(c)])} of {int(trials[criteria.index(c)])} "
                          "answers)" for c in ids)
        what = f"{'criterion' if len(ids) == 1 else 'criteria'} {shown}"
        flags.append({"kind": kind, "ids": ids, "message": text.format(what=what)})
    return flags


def informative_mask(criteria: list[str], flags: list[dict]) -> np.ndarray:
    """bool[K]: the criteria not named by :func:`degenerate_criteria`'s ``flags`` (neither never nor always passed).

    Raises:
        CalibrationError: every criterion is degenerate (the rubric answers carry no information).
    """
    degenerate = {c for f in flags for c in f["ids"]}
    informative = np.array([c not in degenerate for c in criteria], dtype=bool)
    if not informative.any():
        raise CalibrationError(
            f"every criterion is never or always passed ({'; '.join(f['message'].split(':')[0] for f in flags)}); "
            "the rubric answers carry no information about relevance: check the judge's rubric answers"
        )
    return informative


def _resting_difficulty(ability: np.ndarray, weight: np.ndarray, target: float) -> float:
    """Difficulty ``b`` at which a criterion of discrimination 1 is passed with mean probability ``target``
    by abilities float[I] weighted by ``weight`` float[I] (answers per item): a monotone 1-D root."""
    from scipy.optimize import brentq
    from scipy.special import expit

    w = weight / weight.sum()

    def excess(b: float) -> float:
        return float((w * expit(ability - b)).sum()) - target

    lo, hi = float(ability.min()) - 60.0, float(ability.max()) + 60.0
    return float(brentq(excess, lo, hi, xtol=1e-12))


def fit_rubric_only(answers: pd.DataFrame, *, n_points: int = 561, grid: tuple[float, float] = (-18.0, 10.0)) -> Calibration:
    """Rubric-only calibration (no tournament): marginal-ML 2PL, EAP abilities.

    A criterion that no answer passes (or every answer passes) says nothing about the abilities: its
    marginal-ML difficulty is infinite, and under the tiny rubric-only ridge it used to take most of the
    discrimination (gamma 2.9 of 5), weighting every gain towards 0. It is handled as :func:`calibrate`
    handles it: a :class:`CalibrationWarning` names it with its counts (``info["flags"]``, the same kinds),
    and its parameters rest on the prior: it is left out of the marginal-ML fit of the other criteria,
    gets discrimination 1 (the equal share that calibrate's prior on the discriminations favours) and the
    difficulty at which the fitted abilities would pass (fail) it half an answer in ``answers + 1``
    (a Jeffreys-style half count), so it adds almost nothing (almost the full weight) to every gain.

    Args:
        answers: one row per placement, ``query_id, doc_id, C1..CK`` (0/1).
        n_points, grid: quadrature grid for ability ~ N(0, 1).

    Returns:
        :class:`Calibration` with ``method="rubric_only"``; ``gamma`` sums to K and ``beta`` has mean 0;
        ``documents.ability`` is the EAP ability and ``documents.ability_sd`` its posterior SD.

    Raises:
        CalibrationError: every criterion is never or always passed (nothing to calibrate).
    Warns:
        CalibrationWarning: a criterion is never or always passed (named, with its counts).
    """
    ans, crit = validate_answers(answers)
    counts = _placement_counts(ans, crit)
    passes = counts[[f"{c}_pass" for c in crit]].to_numpy()
    trials = np.repeat(counts["placements"].to_numpy()[:, None], len(crit), axis=1)
    flags = degenerate_criteria(crit, passes.sum(axis=0), trials.sum(axis=0))
    for flag in flags:
        warnings.warn(flag["message"], CalibrationWarning, stacklevel=2)
    informative = informative_mask(crit, flags)
    fit = irt.fit_rubric_only(passes[:, informative], trials[:, informative], n_points=n_points, grid=grid)
    gamma, beta, ability = _with_resting_criteria(fit, crit, informative, passes, trials)
    k = len(crit)
    docs = counts[["query_id", "doc_id", "placements"]].copy()
    docs["theta_bt"] = np.nan
    docs["ability"] = ability
    docs["ability_sd"] = fit.ability_sd
    docs["gain"] = gain(ability, gamma, beta)
    docs["count_gain"] = passes.sum(axis=1) / (k * counts["placements"].to_numpy())
    docs["placements"] = docs["placements"].astype(np.int64)
    docs = docs[["query_id", "doc_id", "theta_bt", "ability", "ability_sd", "gain", "placements", "count_gain"]]
    per_q = docs.groupby("query_id", sort=False).agg(n_docs=("doc_id", "size"), placements=("placements", "sum"))
    queries = pd.DataFrame({"query_id": per_q.index, "tau": np.nan, "alpha": np.nan,
                            "n_docs": per_q["n_docs"].to_numpy(), "n_answers": (per_q["placements"] * k).astype(int).to_numpy(),
                            "calibrated": True})
    return Calibration(
        criteria=crit, gamma=gamma, beta=beta, queries=queries, documents=docs, method="rubric_only",
        info={"log_likelihood": fit.log_likelihood, "converged": fit.converged, "grid": (n_points, *grid),
              "flags": flags},
    )


def _with_resting_criteria(fit, crit: list[str], informative: np.ndarray, passes: np.ndarray, trials: np.ndarray):
    """Item parameters float64[K] for every criterion and abilities float64[I], on an axis where gamma
    sums to K and beta has mean 0: the fitted criteria keep their values, the degenerate ones get
    discrimination 1 and their resting difficulty (see :func:`fit_rubric_only`)."""
    k = len(crit)
    gamma = np.ones(k)
    beta = np.zeros(k)
    gamma[informative] = fit.gamma  # sums to the number of fitted criteria; the others add 1 each
    beta[informative] = fit.beta
    ability = np.asarray(fit.ability, dtype=np.float64)
    weight = trials[:, 0]
    for j in np.flatnonzero(~informative):
        total = float(trials[:, j].sum())
        never = passes[:, j].sum() == 0
        target = 0.5 / (total + 1.0) if never else 1.0 - 0.5 / (total + 1.0)
        beta[j] = _resting_difficulty(ability, weight, target)
    shift = beta.mean()  # gains depend on ability - beta only: re-centre both
    return gamma, beta - shift, ability - shift


def save_calibration(calibration: Calibration, folder) -> None:
    """Write a calibration to ``folder``: ``items.json`` (criteria, gamma, beta, method, info[, rubric]),
    ``queries.csv`` and ``documents.csv``; each file atomically, floats at full precision.

    ``items.json`` is written last and records the SHA-256 of the two tables, so a folder left half
    rewritten by an interrupted save (new tables, old items) is refused by :func:`load_calibration`.
    """
    import hashlib
    from pathlib import Path

    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json

    folder = Path(folder)
    digests = {}
    for name, table in (("queries.csv", calibration.queries), ("documents.csv", calibration.documents)):
        digests[name] = hashlib.sha256(atomic_write_csv(folder / name, table).read_bytes()).hexdigest()
    atomic_write_json(
        folder / "items.json",
        {"criteria": calibration.criteria, "gamma": calibration.gamma, "beta": calibration.beta,
         "method": calibration.method, "info": calibration.info, "files": digests,
         **({"rubric": calibration.rubric} if calibration.rubric else {})},
    )


def load_calibration(folder) -> Calibration:
    """Read a calibration written by :func:`save_calibration` (ids read back as strings).

    ``folder`` is the calibration folder itself (it holds ``items.json``) or the folder ``rcp-jax fit
    --out`` wrote, whose ``calibration/`` subfolder it then reads, as ``rcp-jax evaluate --calibration`` does.

    Raises:
        DataError: a file is missing or unreadable, or the tables do not match ``items.json`` (a save
            that was interrupted, or files copied from different fits).
    """
    import hashlib
    import json
    from pathlib import Path

    folder = Path(folder)
    if not (folder / "items.json").is_file() and (folder / "calibration" / "items.json").is_file():
        folder = folder / "calibration"  # the folder `rcp-jax fit --out` wrote
    items_path = folder / "items.json"
    if not items_path.is_file():
        raise DataError(f"{items_path} not found (nor {folder / 'calibration' / 'items.json'}): point to the folder "
                        "`rcp-jax fit --out` wrote, or its calibration/ subfolder (save_calibration)")
    try:
        items = json.loads(items_path.read_text(encoding="utf-8"))
        for key in ("criteria", "gamma", "beta"):
            items[key]  # noqa: B018 - presence check
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{items_path} is not a calibration's items file ({err!r}); run `rcp-jax fit` again") from None
    for name, digest in (items.get("files") or {}).items():
        path = folder / name
        if not path.is_file():
            raise DataError(f"{path} not found; the calibration folder is incomplete: run `rcp-jax fit` again")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise DataError(
                f"{path} does not match {items_path} (a save was interrupted, or the files come from different "
                "fits); run `rcp-jax fit` again to rewrite the calibration"
            )
    ids = {"query_id": str, "doc_id": str}
    try:
        queries = pd.read_csv(folder / "queries.csv", dtype={"query_id": str})
        documents = pd.read_csv(folder / "documents.csv", dtype=ids)
    except (OSError, ValueError) as err:
        raise DataError(f"{folder}: cannot read the calibration tables ({err}); run `rcp-jax fit` again") from None
    return Calibration(
        criteria=list(items["criteria"]), gamma=np.asarray(items["gamma"], dtype=np.float64),
        beta=np.asarray(items["beta"], dtype=np.float64), queries=queries, documents=documents,
        method=items.get("method", "map"), info=items.get("info", {}), rubric=items.get("rubric"),
    )

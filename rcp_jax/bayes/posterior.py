"""Bayesian RCP from tidy tables: posterior draws of items, query calibrations and every gain.

:func:`fit_posterior` is the Bayesian counterpart of :func:`rcp_jax.calibrate`. It builds the padded
arrays of :mod:`rcp_jax.models.bayes`, initialises at the MAP of the foundation fits (fast Newton solves), runs
NUTS, SVI or a Laplace approximation (:mod:`rcp_jax.models.inference`) and returns a :class:`Posterior`:

* ``idata`` - an arviz ``DataTree`` with named dimensions ``criterion``, ``query``, ``doc`` (groups
  ``posterior``, ``sample_stats`` for NUTS, ``observed_data``, ``constant_data``); the document
  coordinate is the position in the query's pool and ``doc_id`` is a (query, doc) coordinate.
* tables with posterior means, SDs and equal-tailed intervals of ``gamma, beta`` (``items``),
  ``tau, alpha`` (``queries``) and every document's ability and gain (``documents``);
* R-hat, bulk/tail ESS and divergences in ``diagnostics`` (warned about when they look bad);
* ``flags``: the MAP path's degeneracy checks on the same data (:mod:`rcp_jax.bayes.degenerate`: all-tied
  tournaments, queries all failed / passed, criteria never / always passed, collapsed tau), warned as
  :class:`rcp_jax.calibration.CalibrationWarning` with the MAP's messages. In the rubric-only model a
  criterion never or always passed rests on the prior as in :func:`rcp_jax.fit_rubric_only`;
* ``gain_draws: float32[S, Q, N]`` for posterior metrics (:func:`rcp_jax.bayes.posterior_ndcg.posterior_metrics`).

Models (see :mod:`rcp_jax.models.bayes` for the maths): ``joint`` (BT scores latent: tournament noise flows into
the gains; **the default** whenever the tournament's window scores are given), ``frozen`` (2PL with BT
scores as exact covariates, METHOD section 3) and ``rubric_only``.
Why the joint model is the default: the frozen model treats the BT scores as exact, so its gain
intervals hold only rubric and item uncertainty ("calibration given the tournament"). They cover the true
gains at the nominal rate only when the scores are (nearly) exact - a dense, low-noise tournament - and
under-cover on noisy tournaments (about a third of 90% intervals hold the truth in the simulations of
``benchmarks/coverage.py``, and its system differences are as overconfident). The joint model covers at
the nominal rate there, with gain intervals about 3x wider. Its cost: NUTS samples one latent score per
document (on the demo's 20 queries x 30 documents about as long as the frozen model, compile-bound);
``method="laplace"`` (a dense Gaussian at the mode) suits up to a few thousand documents and
``method="svi"`` (mean-field, linear in the documents) very large collections. The frozen model stays
available (``model="frozen"``, and the default when only BT scores are given, since the joint model
needs the windows) with that caveat; ``method="map"`` defaults to it (a point fit has no intervals).

Example:
    >>> post = fit_posterior(bt, answers, method="nuts", seed=0)        # doctest: +SKIP
    >>> post.documents[["query_id", "doc_id", "gain_mean", "gain_lo", "gain_hi"]]   # doctest: +SKIP
    >>> metrics = posterior_metrics(run, post, k=10)                     # doctest: +SKIP
    >>> print(format_posterior_table(metrics))                           # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rcp_jax.models import bayes, bradley_terry, inference, irt
from rcp_jax.bayes import large
from rcp_jax.bayes.degenerate import informative_criteria, posterior_flags, rest_degenerate_criteria
from rcp_jax.bayes.diagnostics import ess_bulk, ess_tail, rank_rhat
from rcp_jax.calibration import Calibration, CalibrationWarning, validate_answers
from rcp_jax.errors import CalibrationError, DataError
from rcp_jax.tournament import validate_window_scores

METHODS = ("auto", "map", "nuts", "svi", "laplace", "block_laplace")

#: What the frozen model's intervals mean (warned when it is fitted for intervals, printed by the CLI).
FROZEN_NOTE = (
    "the frozen model treats the Bradley-Terry scores as exact, so its intervals hold the rubric and item "
    "uncertainty only: on noisy tournaments its 90% gain intervals cover the truth far less than 90% of the time "
    "(about a third in benchmarks/coverage.py); the joint model (the default with window scores) covers at the "
    "nominal rate"
)
#: Largest joint model the dense Laplace approximation takes (latent dimensions; the Hessian is its square).
LAPLACE_MAX_DIM = 10_000


#: One compiled program for the joint model's starting contrasts (op by op it would compile a dozen).
_contrasts_from_centred = jax.jit(bayes.contrasts_from_centred)


class FrozenModelWarning(UserWarning):
    """The frozen model was fitted for intervals: they leave out the tournament's noise."""


def _check_guide_spread(draws: "inference.Draws", method: str) -> None:
    """Warn when an SVI / Laplace posterior collapsed: non-finite draws, or item parameters that do not vary
    (a Laplace approximation whose Hessian is not positive definite at the optimum gives zero-width intervals)."""
    spread = np.std(np.asarray(draws.samples["gamma"], dtype=np.float64).reshape(-1, np.shape(draws.samples["gamma"])[-1]),
                    axis=0)
    if not np.all(np.isfinite(spread)) or np.any(spread == 0.0):
        warnings.warn(
            f"the {method} posterior collapsed (item parameters without spread or not finite: the approximation failed "
            f"at its optimum), so its intervals are meaningless; refit with method 'nuts' (`--method nuts`)"
            + (" or 'svi'" if method == "laplace" else ""),
            stacklevel=3,
        )


def _check_dense_laplace(inputs: "PosteriorInputs") -> None:
    q, n = inputs.doc_ids.shape  # padded: every query carries N - 1 latent contrasts
    dim = int(q * (n - 1) + 2 * q + 2 * (len(inputs.criteria) - 1))
    if dim > LAPLACE_MAX_DIM:
        raise DataError(
            f"the Laplace approximation of the joint model needs a dense {dim} x {dim} Hessian "
            f"({dim * dim * 4 / 2**30:.1f} GiB) for {int(inputs.n_docs.sum())} documents; use method 'svi' "
            f"(`--method svi`: mean-field, linear in the documents) or 'nuts' for a collection this large"
        )
MODELS = ("frozen", "joint", "rubric_only")
#: End of the judge's score scale (METHOD's -5..+5; the judging layer validates the same range, which this layer may
#: not import: ARCHITECTURE.md): the joint model leaves out pairs tied there (:func:`fit_posterior`).
SCALE_END = 5.0
#: Diagnostics thresholds (warned about): the largest R-hat of gamma, beta, tau, alpha above ``RHAT_MAX``; R-hat
#: of any gain above ``RHAT_MAX_GAIN``; bulk ESS of a parameter below ``ESS_PER_CHAIN_MIN`` per chain; any
#: divergence. Both R-hat limits bound a maximum over many parameters, which exceeds the per-parameter rule of 1.01
#: by chance alone for well-mixed chains: over the ~2Q + 10 item and query parameters of 50 queries, 4 x 500 draws
#: with ESS near the draws gave maxima of 1.008-1.011 (tests/bayes/test_inference.py), over thousands of gains more.
RHAT_MAX = 1.015
RHAT_MAX_GAIN = 1.05
ESS_PER_CHAIN_MIN = 100


# --------------------------------------------------------------------------------------------------
# inputs: tables -> padded arrays
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PosteriorInputs:
    """Padded arrays of a collection, in the layout of :mod:`rcp_jax.models.bayes`.

    Attributes:
        query_ids: list of Q calibrated query ids (queries with rubric answers).
        doc_ids: object[Q, N] document ids in pool order ("" on padding).
        n_docs: int[Q] pool sizes (real documents first).
        criteria: criterion names C1..CK.
        theta: float64[Q, N] BT scores (given, or the BT MAP of the windows; 0 on padding).
        wins: float32[Q, N, N] soft win statistics (None without windows).
        passes, trials: float64[Q, N, C] rubric counts.
        uncalibrated: ids of queries with a tournament but no rubric answers (left out, never invented).
        n_components: int[Q] connected components of each query's comparison graph (1 without windows).
        scale_end: the end of the score scale whose ties ``wins`` leaves out (None: every pair is in).
    """

    query_ids: list
    doc_ids: np.ndarray
    n_docs: np.ndarray
    criteria: list
    theta: np.ndarray
    wins: np.ndarray | None
    passes: np.ndarray
    trials: np.ndarray
    uncalibrated: list = field(default_factory=list)
    n_components: np.ndarray | None = None
    scale_end: float | None = None

    @property
    def mask(self) -> np.ndarray:
        """bool[Q, N] real documents."""
        return np.arange(self.doc_ids.shape[1])[None, :] < self.n_docs[:, None]


def _doc_layout(pairs: pd.DataFrame, query_ids: list) -> tuple[np.ndarray, np.ndarray, dict]:
    """(doc_ids object[Q, N], n_docs int[Q], index {(query_id, doc_id): (q, d)}) in order of appearance."""
    per_q = {q: [] for q in query_ids}
    seen = set()
    for q, d in zip(pairs["query_id"], pairs["doc_id"]):
        if q in per_q and (q, d) not in seen:
            seen.add((q, d))
            per_q[q].append(d)
    n_docs = np.array([len(per_q[q]) for q in query_ids], dtype=np.int64)
    n_max = int(n_docs.max()) if len(n_docs) else 0
    doc_ids = np.full((len(query_ids), n_max), "", dtype=object)
    index = {}
    for qi, q in enumerate(query_ids):
        for di, d in enumerate(per_q[q]):
            doc_ids[qi, di] = d
            index[(q, d)] = (qi, di)
    return doc_ids, n_docs, index


def _rubric_counts(ans: pd.DataFrame, crit: list, index: dict, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    keys = list(zip(ans["query_id"], ans["doc_id"]))
    missing = [k for k in keys if k not in index]
    if missing:
        q, d = missing[0]
        raise CalibrationError(
            f"rubric answers for document {d!r} of query {q!r} have no BT score / tournament window "
            f"({len(set(missing))} such documents); the answers and the tournament must cover the same query and "
            f"document ids"
        )
    qi = np.array([index[k][0] for k in keys], dtype=np.int64)
    di = np.array([index[k][1] for k in keys], dtype=np.int64)
    return irt.collapse_placements(qi, di, ans[crit].to_numpy(), shape[0], shape[1])


def prepare_inputs(bt_or_windows: pd.DataFrame | None, answers: pd.DataFrame, *, joint: bool = False,
                   bt_ridge: float = bradley_terry.DEFAULT_RIDGE,
                   scale_end: float | None = SCALE_END) -> PosteriorInputs:
    """Validate the tables and build :class:`PosteriorInputs`.

    Args:
        bt_or_windows: BT scores ``query_id, doc_id, theta`` (frozen covariates), or window scores
            ``query_id, window_id, doc_id, score`` (BT is fitted here; required for ``joint``), or None
            (rubric-only).
        answers: one row per rubric placement: ``query_id, doc_id, C1..CK`` (0/1).
        joint: build the soft win statistics for the joint model.
        bt_ridge: ridge of the BT MAP fitted from windows.
        scale_end: the joint model's win statistics leave out pairs tied at ``+-scale_end``
            (:func:`rcp_jax.models.bradley_terry.pair_statistics`) when every score lies in
            ``[-scale_end, scale_end]`` (a judge on a wider scale has no end there); None keeps every pair. The BT
            MAP (Stage A's scores and order) keeps every pair, as METHOD does.

    Raises:
        DataError: malformed tables; CalibrationError: answers for unknown documents, nothing to fit.
    """
    ans, crit = validate_answers(answers)
    if bt_or_windows is None:
        query_ids = list(dict.fromkeys(ans["query_id"]))
        doc_ids, n_docs, index = _doc_layout(ans, query_ids)
        passes, trials = _rubric_counts(ans, crit, index, doc_ids.shape)
        return PosteriorInputs(query_ids, doc_ids, n_docs, crit, np.zeros(doc_ids.shape), None, passes, trials)

    cols = set(bt_or_windows.columns)
    with_answers = set(ans["query_id"])
    if {"window_id", "score"} <= cols:
        ws = validate_window_scores(bt_or_windows)
        all_q = list(dict.fromkeys(ws["query_id"]))
        query_ids = [q for q in all_q if q in with_answers]
        uncal = [q for q in all_q if q not in with_answers]
        if not query_ids:
            raise CalibrationError("no query has both tournament windows and rubric answers; nothing to calibrate")
        ws = ws[ws["query_id"].isin(set(query_ids))]
        doc_ids, n_docs, index = _doc_layout(ws, query_ids)
        q_of = {q: i for i, q in enumerate(query_ids)}
        ws = ws.assign(_q=ws["query_id"].map(q_of).to_numpy(),
                       _d=[index[k][1] for k in zip(ws["query_id"], ws["doc_id"])])
        w_codes, _ = pd.factorize(pd.MultiIndex.from_frame(ws[["_q", "window_id"]]), sort=False)
        pos = ws.groupby(w_codes, sort=False).cumcount().to_numpy()
        width = int(pos.max()) + 1
        n_w = int(w_codes.max()) + 1
        doc_index = np.full((n_w, width), -1, dtype=np.int64)
        scores = np.zeros((n_w, width))
        doc_index[w_codes, pos] = ws["_d"].to_numpy()
        scores[w_codes, pos] = ws["score"].to_numpy()
        window_query = np.zeros(n_w, dtype=np.int64)
        window_query[w_codes] = ws["_q"].to_numpy()
        fit = bradley_terry.fit_windows(doc_index, scores, window_query, n_docs, ridge=bt_ridge, dtype=jnp.float64)
        wins = None
        if scale_end is not None and np.abs(scores).max() > scale_end:
            scale_end = None  # scores beyond the end: the judge's scale is not METHOD's, so nothing is censored
        if joint:
            with jax.enable_x64(True):
                wins = np.asarray(bradley_terry.pair_statistics(
                    jax.device_put(doc_index), jax.device_put(scores), jax.device_put(window_query),
                    n_queries=len(query_ids), n_docs=doc_ids.shape[1], scale_end=scale_end,
                ), dtype=np.float32)
        theta, n_comp = fit.theta, fit.n_components
    elif {"theta"} <= cols:
        if joint:
            raise DataError(
                "the joint model needs the tournament itself: pass window scores (query_id, window_id, doc_id, "
                "score) instead of BT scores, or use the frozen model"
            )
        for col in ("query_id", "doc_id"):
            if col not in cols:
                raise DataError(f"BT scores are missing column {col!r}; expected query_id, doc_id, theta")
        bt = bt_or_windows.loc[:, ["query_id", "doc_id", "theta"]].astype({"query_id": str, "doc_id": str})
        th = pd.to_numeric(bt["theta"], errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(th).all():
            row = bt.loc[~np.isfinite(th)].iloc[0]
            raise DataError(f"BT score of document {row.doc_id!r} in query {row.query_id!r} is not finite")
        if bt.duplicated(["query_id", "doc_id"]).any():
            row = bt.loc[bt.duplicated(["query_id", "doc_id"])].iloc[0]
            raise DataError(f"document {row.doc_id!r} of query {row.query_id!r} has two BT scores; keep one")
        all_q = list(dict.fromkeys(bt["query_id"]))
        query_ids = [q for q in all_q if q in with_answers]
        uncal = [q for q in all_q if q not in with_answers]
        if not query_ids:
            raise CalibrationError("no query has both BT scores and rubric answers; nothing to calibrate")
        doc_ids, n_docs, index = _doc_layout(bt, query_ids)
        theta = np.zeros(doc_ids.shape)
        for (q, d), t in zip(zip(bt["query_id"], bt["doc_id"]), th):
            if (q, d) in index:
                theta[index[(q, d)]] = t
        wins, n_comp = None, np.ones(len(query_ids), dtype=np.int64)
    else:
        raise DataError(
            f"expected BT scores (query_id, doc_id, theta) or window scores (query_id, window_id, doc_id, score); "
            f"got columns {sorted(cols)}"
        )
    passes, trials = _rubric_counts(ans, crit, index, doc_ids.shape)
    if uncal:
        warnings.warn(
            f"{len(uncal)} quer{'y has' if len(uncal) == 1 else 'ies have'} a tournament but no rubric answers "
            f"and stay uncalibrated (no tau, alpha or gains): {uncal[:5]}",
            stacklevel=3,
        )
    broken = [q for q, k in zip(query_ids, n_comp) if k > 1]
    if broken:
        warnings.warn(
            f"comparison graph is disconnected for {len(broken)} quer{'y' if len(broken) == 1 else 'ies'} "
            f"({broken[:5]}); the relative level of its components is set by the prior alone",
            stacklevel=3,
        )
    return PosteriorInputs(query_ids, doc_ids, n_docs, crit, theta, wins, passes, trials, uncal, n_comp,
                           scale_end if wins is not None else None)


# --------------------------------------------------------------------------------------------------
# the posterior object
# --------------------------------------------------------------------------------------------------
@dataclass
class Posterior:
    """Posterior of an RCP calibration.

    Attributes:
        idata: arviz DataTree (dims ``chain, draw, criterion, query, doc``).
        inputs: the :class:`PosteriorInputs` fitted.
        items: ``criterion, gamma_mean, gamma_sd, gamma_lo, gamma_hi, beta_mean, ...``.
        queries: ``query_id, tau_mean, tau_sd, tau_lo, tau_hi, alpha_mean, ..., n_docs, n_answers,
            calibrated`` (uncalibrated queries: NaN).
        documents: ``query_id, doc_id, theta_bt, theta_mean, theta_sd, ability_mean, ability_lo,
            ability_hi, gain_mean, gain_sd, gain_lo, gain_hi, placements, count_gain``.
        summary: arviz summary (mean, sd, eti interval, ESS, R-hat, MCSE) of gamma, beta, tau, alpha.
        diagnostics: ``max_rhat, min_ess_bulk, min_ess_tail`` (over gamma, beta, tau, alpha),
            ``max_rhat_gain, min_ess_bulk_gain`` (over every gain), ``divergences, num_chains, num_draws,
            wall_s``; NaN where not applicable (SVI, MAP).
        gain_draws: float32[S, Q, N] gain of every draw (chains flattened; 0 on padding).
        method: ``map``, ``nuts``, ``svi`` or ``laplace``; model: ``frozen``, ``joint``, ``rubric_only``.
        ci_prob: probability of the equal-tailed intervals (``*_lo``, ``*_hi``).
        settings: the inference settings used (seed, draws, ...).
        draws: the raw :class:`rcp_jax.models.inference.Draws` (what :func:`save_posterior` stores).
        flags: what the data could not tell, as the MAP's ``Calibration.info["flags"]``
            (:func:`rcp_jax.bayes.degenerate.posterior_flags`): ``{"kind", "ids", "message"}`` each, warned by
            :func:`fit_posterior` and :func:`rcp_jax.posterior_metrics`.
    """

    idata: object
    inputs: PosteriorInputs
    items: pd.DataFrame
    queries: pd.DataFrame
    documents: pd.DataFrame
    summary: pd.DataFrame
    diagnostics: dict
    gain_draws: np.ndarray
    method: str
    model: str
    ci_prob: float
    settings: dict = field(default_factory=dict)
    draws: inference.Draws | None = None
    flags: list = field(default_factory=list)

    @property
    def criteria(self) -> list:
        return list(self.inputs.criteria)

    def gains(self) -> pd.DataFrame:
        """``query_id, doc_id, gain`` with the posterior mean gain of every calibrated document."""
        d = self.documents
        out = d.loc[d["gain_mean"].notna(), ["query_id", "doc_id", "gain_mean"]]
        return out.rename(columns={"gain_mean": "gain"}).reset_index(drop=True)

    def with_gains(self, gains: pd.DataFrame) -> "Posterior":
        """A one-draw copy of this posterior whose gains are ``gains`` (``query_id, doc_id, gain``).

        Same layout and the same ideal order (Stage A), so :func:`posterior_metrics` on it scores known
        gains - e.g. a simulator's true gains - with exactly the quantity this posterior estimates.
        Documents of the posterior missing from ``gains`` get gain 0; rows for other documents are ignored.
        """
        arr = np.zeros((1,) + self.inputs.doc_ids.shape, dtype=np.float32)
        pos = {(q, d): (qi, di) for qi, q in enumerate(self.inputs.query_ids)
               for di, d in enumerate(self.inputs.doc_ids[qi, : self.inputs.n_docs[qi]])}
        for q, d, g in zip(gains["query_id"].astype(str), gains["doc_id"].astype(str), gains["gain"]):
            if (q, d) in pos:
                arr[(0,) + pos[(q, d)]] = g
        import dataclasses

        return dataclasses.replace(self, gain_draws=arr)

    def calibration(self) -> Calibration:
        """A :class:`rcp_jax.Calibration` with posterior means, usable by :func:`rcp_jax.evaluate`.

        ``gain`` is the posterior mean of each gain (not the gain of posterior means); ``gamma``,
        ``beta``, ``tau``, ``alpha`` and ``ability`` are posterior means; interval columns ride along.
        """
        docs = self.documents.rename(columns={"ability_mean": "ability", "gain_mean": "gain"})
        qs = self.queries.rename(columns={"tau_mean": "tau", "alpha_mean": "alpha"})
        return Calibration(
            criteria=self.criteria, gamma=self.items["gamma_mean"].to_numpy(), beta=self.items["beta_mean"].to_numpy(),
            queries=qs, documents=docs, method=f"{self.model}-{self.method}",
            info={"diagnostics": self.diagnostics, "settings": self.settings, "ci_prob": self.ci_prob,
                  "flags": self.flags},
        )


def _interval(x: np.ndarray, ci_prob: float, axis=0) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = (1 - ci_prob) / 2, 1 - (1 - ci_prob) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q = np.nanquantile(x, [lo, hi], axis=axis)
    return q[0], q[1]


@functools.partial(jax.jit, static_argnames="model")
def _ability_gain(part: dict, theta: jax.Array, n_docs: jax.Array, model: str) -> tuple:
    """(ability, gain, theta or None) float32[S, Q, N] of a chunk of S draws (one compiled program per shape)."""
    if model == "frozen":
        ab = bayes.calibrated_ability(part, theta=theta)
    else:
        ab = bayes.calibrated_ability(part, n_docs=n_docs)
    th = bayes.centred_from_contrasts(part["z"], n_docs) if model == "joint" else None
    return ab, bayes.rcp_gain(ab, part["gamma"], part["beta"]), th


def _gain_draws(samples: dict, inputs: PosteriorInputs, model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(ability, gain, theta) float32[chains, draws, Q, N] (theta only for the joint model)."""
    n_docs = jax.device_put(inputs.n_docs)
    theta_bt = jax.device_put(np.asarray(inputs.theta, np.float32))
    c, s = samples["gamma"].shape[:2]
    q, n, k = inputs.trials.shape
    chunk = max(1, int(4e7 // max(q * n * k, 1)))
    flat = {name: np.asarray(v).reshape((c * s,) + np.shape(v)[2:]) for name, v in samples.items()}
    ability, gain, theta = [], [], []
    for lo in range(0, c * s, chunk):
        part = {name: v[lo : lo + chunk] for name, v in flat.items()}
        ab, g, th = _ability_gain(part, theta_bt, n_docs, model)
        if th is not None:
            theta.append(np.asarray(th, np.float32))
        ability.append(np.asarray(ab, np.float32))
        gain.append(np.asarray(g, np.float32))
    shape = (c, s, q, n)
    out = [np.concatenate(a).reshape(shape) for a in (ability, gain)]
    return out[0], out[1], (np.concatenate(theta).reshape(shape) if theta else None)


def _to_datatree(draws: inference.Draws, inputs: PosteriorInputs, model: str, ability, gain, theta):
    import arviz as az

    mask = inputs.mask
    nan_pad = lambda x: np.where(mask, x, np.nan)  # noqa: E731
    post = {"gamma": draws.samples["gamma"], "beta": draws.samples["beta"], "ability": nan_pad(ability),
            "gain": nan_pad(gain)}
    dims = {"gamma": ["criterion"], "beta": ["criterion"], "ability": ["query", "doc"], "gain": ["query", "doc"]}
    if model != "rubric_only":
        post.update(tau=draws.samples["tau"], alpha=draws.samples["alpha"])
        dims.update(tau=["query"], alpha=["query"])
    if theta is not None:
        post["theta"] = nan_pad(theta)
        dims["theta"] = ["query", "doc"]
    groups = {"posterior": post,
              "observed_data": {"passes": inputs.passes},
              "constant_data": {"trials": inputs.trials}}
    dims.update(passes=["query", "doc", "criterion"], trials=["query", "doc", "criterion"])
    if model == "frozen":
        groups["constant_data"]["theta_bt"] = inputs.theta
        dims["theta_bt"] = ["query", "doc"]
    if draws.stats:
        st = draws.stats
        groups["sample_stats"] = {
            "diverging": st["diverging"], "acceptance_rate": st["accept_prob"], "n_steps": st["num_steps"],
            "energy": st["energy"], "step_size": st["step_size"],
        }
    coords = {"criterion": list(inputs.criteria), "query": list(inputs.query_ids), "doc": np.arange(mask.shape[1])}
    attrs = {"/": {"rcp_model": model, "inference": draws.method,
                   **{k: v for k, v in draws.info.items() if isinstance(v, (int, float, str))}}}
    dt = az.from_dict(groups, coords=coords, dims=dims, attrs=attrs)
    ids = np.where(mask, inputs.doc_ids, "").astype(str)
    dt["posterior"] = dt["posterior"].to_dataset().assign_coords(doc_id=(("query", "doc"), ids))
    return dt


def _diagnose(dt, draws: inference.Draws, model: str) -> dict:
    """R-hat (rank-normalised split), bulk/tail ESS and divergences, for parameters and gains apart."""
    params = ["gamma", "beta"] + ([] if model == "rubric_only" else ["tau", "alpha"])
    out = {"num_chains": draws.num_chains, "num_draws": draws.num_draws, "wall_s": float(draws.info.get("wall_s", np.nan)),
           "divergences": int(draws.stats["diverging"].sum()) if draws.stats else 0}
    for key in ("max_rhat", "min_ess_bulk", "min_ess_tail", "max_rhat_gain", "min_ess_bulk_gain"):
        out[key] = np.nan
    if draws.method == "block_laplace":  # no chains to compare: the Newton solve and the check against NUTS
        out.update(large.block_diagnostics(draws.info))
    if draws.method != "nuts" or draws.num_draws < 4:
        return out
    posterior = dt["posterior"]

    def draws_of(which):  # float[chain, draw, K]: the elements of ``which`` side by side
        arrays = [np.asarray(posterior[v].values, dtype=np.float64) for v in which]
        return np.concatenate([a.reshape(a.shape[0], a.shape[1], -1) for a in arrays], axis=2)

    # ArviZ's rank-normalised R-hat and bulk / tail ESS (``az.rhat`` / ``az.ess`` on the posterior), vectorised
    # over elements (rcp_jax.bayes.diagnostics: the same values; ArviZ loops over the elements in Python). The tail
    # ESS is at ArviZ's default quantiles: its ``stats.ci_prob`` (0.89) and 1 - that.
    import arviz as az

    tail_prob = float(az.rcParams["stats.ci_prob"])
    theta, gain = draws_of(params), draws_of(["gain"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN elements (padded documents)
        out.update(
            max_rhat=float(np.nanmax(rank_rhat(theta))), min_ess_bulk=float(np.nanmin(ess_bulk(theta))),
            min_ess_tail=float(np.nanmin(ess_tail(theta, tail_prob))), max_rhat_gain=float(np.nanmax(rank_rhat(gain))),
            min_ess_bulk_gain=float(np.nanmin(ess_bulk(gain))),
        )
    return out


def _warn_diagnostics(diag: dict) -> None:
    problems = []
    problems.extend(large.block_problems(diag))
    if diag["divergences"]:
        problems.append(f"{diag['divergences']} divergent transitions (raise target_accept, e.g. 0.95)")
    if np.isfinite(diag["max_rhat"]) and diag["max_rhat"] > RHAT_MAX:
        problems.append(f"max R-hat of gamma/beta/tau/alpha {diag['max_rhat']:.3f} > {RHAT_MAX} (run longer chains)")
    if np.isfinite(diag["max_rhat_gain"]) and diag["max_rhat_gain"] > RHAT_MAX_GAIN:
        problems.append(f"max R-hat of the gains {diag['max_rhat_gain']:.3f} > {RHAT_MAX_GAIN} (run longer chains)")
    ess_min = ESS_PER_CHAIN_MIN * diag["num_chains"]
    if np.isfinite(diag["min_ess_bulk"]) and diag["min_ess_bulk"] < ess_min:
        problems.append(f"min bulk ESS {diag['min_ess_bulk']:.0f} < {ess_min} (draw more samples)")
    if problems:
        warnings.warn("posterior diagnostics: " + "; ".join(problems), stacklevel=3)


def _tables(inputs, model, draws, ability, gain, theta, ci_prob):
    c, s = draws.num_chains, draws.num_draws
    flat = lambda x: np.asarray(x).reshape((c * s,) + np.shape(x)[2:])  # noqa: E731
    items = pd.DataFrame({"criterion": inputs.criteria})
    for name in ("gamma", "beta"):
        x = flat(draws.samples[name])
        lo, hi = _interval(x, ci_prob)
        items[f"{name}_mean"], items[f"{name}_sd"], items[f"{name}_lo"], items[f"{name}_hi"] = x.mean(0), x.std(0), lo, hi
    k = len(inputs.criteria)
    mask = inputs.mask
    placements = inputs.trials[..., 0]
    queries = pd.DataFrame({"query_id": inputs.query_ids})
    for name in ("tau", "alpha"):
        if model == "rubric_only":
            queries[[f"{name}_mean", f"{name}_sd", f"{name}_lo", f"{name}_hi"]] = np.nan
            continue
        x = flat(draws.samples[name])
        lo, hi = _interval(x, ci_prob)
        queries[f"{name}_mean"], queries[f"{name}_sd"], queries[f"{name}_lo"], queries[f"{name}_hi"] = x.mean(0), x.std(0), lo, hi
    queries["n_docs"] = inputs.n_docs
    queries["n_answers"] = (inputs.trials.sum(axis=(1, 2))).astype(np.int64)
    queries["calibrated"] = True
    if inputs.uncalibrated:
        extra = pd.DataFrame({"query_id": inputs.uncalibrated, "calibrated": False, "n_answers": 0})
        queries = pd.concat([queries, extra], ignore_index=True)
    qi, di = np.nonzero(mask)
    docs = pd.DataFrame({"query_id": np.asarray(inputs.query_ids, dtype=object)[qi], "doc_id": inputs.doc_ids[qi, di]})
    docs["theta_bt"] = inputs.theta[qi, di] if model != "rubric_only" else np.nan
    if theta is not None:
        th = flat(theta)[:, qi, di]
        docs["theta_mean"], docs["theta_sd"] = th.mean(0), th.std(0)
    for name, arr in (("ability", ability), ("gain", gain)):
        x = flat(arr)[:, qi, di]
        lo, hi = _interval(x, ci_prob)
        docs[f"{name}_mean"], docs[f"{name}_sd"], docs[f"{name}_lo"], docs[f"{name}_hi"] = x.mean(0), x.std(0), lo, hi
    docs["placements"] = placements[qi, di]
    passed = inputs.passes.sum(axis=2)[qi, di]
    with np.errstate(invalid="ignore", divide="ignore"):
        docs["count_gain"] = np.where(docs["placements"] > 0, passed / (k * docs["placements"]), np.nan)
    return items, queries, docs


@contextlib.contextmanager
def _progress_bar(enabled: bool, desc: str, num_warmup: int | None = None, per_chain: int | None = None):
    """A tqdm bar fed by the ``progress`` reports of :mod:`rcp_jax.models.inference` (None when disabled).

    ``num_warmup``: NUTS iterations up to it are labelled warmup, later ones sampling. ``per_chain``: the
    iterations of one chain; a report whose total is larger counts chains run one after another, and the
    bar names the chain.
    """
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=desc, unit="it", leave=False, disable=None, mininterval=0.5)
    bar.set_postfix_str("compiling")  # the first report comes once the program is compiled and running

    def report(done: int, total: int) -> None:
        bar.total = total
        if num_warmup is not None:
            within, label = done, ""
            if per_chain and total > per_chain:
                within = (done - 1) % per_chain + 1
                label = f"chain {min((done - 1) // per_chain + 1, total // per_chain)}/{total // per_chain}, "
            bar.set_postfix_str(label + ("warmup" if within <= num_warmup else "sampling"), refresh=False)
        else:
            bar.set_postfix_str("", refresh=False)
        bar.update(max(0, done - bar.n))  # parallel chains report once per device: keep the largest

    try:
        yield report
    finally:
        bar.close()


def fit_posterior(
    bt_or_windows: pd.DataFrame | None,
    answers: pd.DataFrame,
    *,
    method: str = "auto",
    model: str | None = None,
    ridge: float = irt.DEFAULT_RIDGE,
    bt_ridge: float = bradley_terry.DEFAULT_RIDGE,
    bt_weight: float = bayes.DEFAULT_BT_WEIGHT,
    scale_end: float | None = SCALE_END,
    item_sd: float | None = bayes.DEFAULT_ITEM_SD,
    num_warmup: int = 1000,
    num_samples: int = 500,
    num_chains: int = 4,
    thinning: int = 1,
    target_accept: float = 0.8,
    svi_steps: int = 3000,
    learning_rate: float = 0.01,
    seed: int = 0,
    ci_prob: float = 0.9,
    warn: bool = True,
    joint_param: str = "ability",
    progress: bool = False,
    check_queries: int = large.CHECK_QUERIES,
) -> Posterior:
    """Bayesian RCP calibration: posterior of items, query calibrations and every gain.

    Args:
        bt_or_windows: BT scores ``query_id, doc_id, theta`` (frozen model), window scores
            ``query_id, window_id, doc_id, score`` (frozen: BT fitted here; or joint), or None
            (rubric-only).
        answers: one row per rubric placement: ``query_id, doc_id, C1..CK`` with 0/1 answers.
        method: ``auto`` (default: ``nuts`` up to :data:`rcp_jax.bayes.large.AUTO_NUTS_MAX_DOCS` documents, above
            that ``block_laplace`` for the joint model and ``svi`` for the rubric-only one; the choice and its reason
            in ``settings["auto"]``), ``nuts``, ``block_laplace`` (the joint model factored per query at its mode:
            the items Gaussian, each query's block by HMC given them, :mod:`rcp_jax.bayes.large`; any size), ``svi``
            (AutoNormal; very large query sets), ``laplace`` (AutoLaplaceApproximation) or ``map`` (one "draw" at the
            posterior mode, no uncertainty).
        model: ``joint`` (default with window scores, except for ``method="map"``: its gain intervals
            cover at their nominal rate on noisy tournaments), ``frozen`` (default with BT scores, which
            the joint model cannot use, and for ``method="map"``: the point calibration of
            :func:`rcp_jax.calibrate`; its intervals treat the BT scores as exact and are too narrow on
            noisy tournaments, so a warning says so when it is used for intervals) or ``rubric_only``
            (default without a tournament).
        ridge: MAP ridge of the item parameters: the MAP calibration that starts every method, ``method="map"``,
            and the items' prior when ``item_sd`` is None (SD ``1 / sqrt(ridge NC)``, NC the number of answers).
        item_sd: prior SD of the item contrasts ``u, v`` of the frozen and joint models' posteriors (default
            :data:`rcp_jax.models.bayes.DEFAULT_ITEM_SD`, fixed whatever NC). ``None``: the ridge's prior, which
            tightens with NC and shrinks beta towards 0 and gamma towards equal by ~2.5% at any size (the items'
            90% intervals then cover the truth at 0.53 / 0.27 on 20 simulated 20 x 150 collections;
            ``benchmarks/RESULTS.md``); the posterior's mode is then the reference MAP.
        bt_ridge, bt_weight: BT prior ridge and pseudo-likelihood weight (joint model; see
            :mod:`rcp_jax.models.bayes`).
        scale_end: end of the judge's score scale (default :data:`SCALE_END`, METHOD's -5..+5). The joint model
            leaves out a window's pairs whose two scores are equal at that end: both documents are at least that
            good (or bad), which a soft label of 0.5 would read as "equal". None keeps every pair (a judge on
            another scale, or METHOD's statistic exactly; the posterior's mode is then the BT MAP). Stage A's
            scores and order are METHOD's either way.
        num_warmup, num_samples, num_chains, thinning, target_accept: NUTS settings (chains run
            one after another on a CPU, vectorised on an accelerator, in parallel when ``rcp-jax
            --host-devices`` gives enough devices: :func:`rcp_jax.models.inference.default_chain_method`).
            1,000 warmup iterations by default (Stan's default too): each query's tau and alpha are
            correlated, which a diagonal mass matrix adapts to slowly; on a simulated 50 x 60 collection
            500 left the largest of ~110 R-hats at 1.0075-1.012 over seeds 0-3, 1,000 at 1.0078-1.0093.
        svi_steps, learning_rate: SVI settings; ``num_samples`` draws are taken from the guide.
        seed: PRNG seed (explicit).
        ci_prob: probability of the equal-tailed intervals in the tables and the arviz summary.
        warn: warn about divergences, the largest item or query R-hat > RHAT_MAX (1.015) and low ESS. Degenerate data (``Posterior.flags``) is
            warned whatever ``warn`` says, as :func:`rcp_jax.calibrate` warns it.
        joint_param: coordinates in which NUTS / SVI / Laplace explore the joint model's latent scores
            (:func:`rcp_jax.models.bayes.joint_model`, ``param``): ``ability`` (default; the calibrated ability
            ``tau theta``, which the rubric pins) or ``theta`` (the BT scores). Same posterior; on noisy
            tournaments ``ability`` removes the tau / spread-of-theta ridge (min bulk ESS ~3x higher,
            R-hat < 1.01 at 4 x 500 draws after 1,000 warmup). MAP always uses the model's own ``theta`` coordinates.
        check_queries: ``block_laplace`` only: queries whose exact conditional posterior NUTS samples to check the
            approximation (``diagnostics["check_median_gap"]``); 0 skips the check.
        progress: a tqdm bar on stderr when it is a terminal: NUTS iterations per chain (warmup, then
            sampling), or SVI / Laplace optimisation steps.

    Returns:
        :class:`Posterior`.

    Raises:
        CalibrationError: the rubric-only model with every criterion never or always passed.
    Warns:
        CalibrationWarning: the MAP's degeneracy flags (``Posterior.flags``), one per kind.
    """
    if method not in METHODS:
        raise DataError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    requested = method
    if model is None:
        if bt_or_windows is None:
            model = "rubric_only"
        elif method != "map" and {"window_id", "score"} <= set(bt_or_windows.columns):
            model = "joint"
        else:
            model = "frozen"
    if model not in MODELS:
        raise DataError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if (model == "rubric_only") != (bt_or_windows is None):
        raise DataError("the rubric-only model takes no tournament (pass None); the frozen and joint models need one")
    if not 0 < ci_prob < 1:
        raise DataError(f"ci_prob must be in (0, 1), got {ci_prob}")
    if item_sd is not None and not (np.isfinite(item_sd) and item_sd > 0):
        raise DataError(f"item_sd must be a positive prior SD (or None for the MAP ridge's prior), got {item_sd}")
    if warn and model == "frozen" and method != "map":
        warnings.warn(FROZEN_NOTE, FrozenModelWarning, stacklevel=2)
    inputs = prepare_inputs(bt_or_windows, answers, joint=model == "joint", bt_ridge=bt_ridge, scale_end=scale_end)
    method, choice = large.choose_method(method, model, int(inputs.n_docs.sum()))
    if method == "block_laplace" and model != "joint":
        raise DataError(f"method 'block_laplace' approximates the joint model; the {model} model takes nuts, svi or "
                        "laplace (or method 'auto')")
    if model == "joint" and method == "laplace":
        _check_dense_laplace(inputs)
    f32 = lambda x: jax.device_put(np.asarray(x, np.float32))  # noqa: E731 - host cast and copy: nothing compiles
    passes, trials = f32(inputs.passes), f32(inputs.trials)

    informative = np.ones(len(inputs.criteria), dtype=bool)
    if model == "rubric_only":
        # a criterion never / always passed rests on the prior, as in the MAP (rcp_jax.bayes.degenerate)
        informative = informative_criteria(inputs)
        mfn = bayes.rubric_only_model
        kwargs = dict(passes=passes[..., informative], trials=trials[..., informative], ridge=ridge)
        init = _rubric_only_init(inputs, informative)
    else:
        cal = irt.fit_2pl_calibration(irt.calibration_cells(inputs.theta, inputs.passes, inputs.trials), ridge=ridge)
        u, v = bayes.item_contrasts(cal.u, cal.v)
        init = {"u": u, "v": v, "tau": cal.tau, "alpha": cal.alpha}
        if model == "frozen":
            mfn = bayes.calibration_model
            kwargs = dict(theta=f32(inputs.theta), passes=passes, trials=trials, ridge=ridge, item_sd=item_sd)
        else:
            mfn = bayes.joint_model
            # MAP in the model's own coordinates; samplers in ``joint_param`` coordinates (same posterior).
            param = "theta" if method == "map" else joint_param
            # the MAP keeps the reference's ridge prior on the items, so its mode is the foundation's MAP
            kwargs = dict(wins=f32(inputs.wins), n_docs=jax.device_put(inputs.n_docs), passes=passes, trials=trials,
                          ridge=ridge, bt_ridge=bt_ridge, bt_weight=bt_weight, param=param,
                          item_sd=None if method == "map" else item_sd)
            z0 = np.asarray(_contrasts_from_centred(f32(inputs.theta), jax.device_put(inputs.n_docs)))
            if param == "theta":
                init["z"] = z0
            else:
                init["w"] = z0 * np.asarray(cal.tau)[:, None]
    init = {k: f32(v) for k, v in init.items()}

    if method == "block_laplace":
        with large.fit_progress(progress, check_queries=check_queries) as report:
            draws = large.block_laplace_draws(inputs, init, ridge=ridge, bt_ridge=bt_ridge, bt_weight=bt_weight,
                                              num_samples=num_samples, seed=seed, report=report,
                                              check_queries=check_queries, item_sd=item_sd)
    elif method == "nuts":
        with _progress_bar(progress, f"NUTS, {num_chains} chains", num_warmup, num_warmup + num_samples) as report:
            draws = inference.run_nuts(
                mfn, kwargs, seed=seed, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                thinning=thinning, init_values=init, target_accept=target_accept, progress=report,
            )
    elif method in ("svi", "laplace"):
        guide = "normal" if method == "svi" else "laplace"
        with _progress_bar(progress, f"SVI ({guide} guide)") as report:
            draws = inference.run_svi(
                mfn, kwargs, seed=seed, guide=guide, num_steps=svi_steps, learning_rate=learning_rate,
                num_samples=num_samples, init_values=init, progress=report,
            )
        _check_guide_spread(draws, method)
    else:
        if model == "frozen":
            values = {**init, "gamma": cal.gamma, "beta": cal.beta}
        else:
            values, _ = inference.find_map(mfn, kwargs, init_values=init, seed=seed)
        draws = inference.Draws(samples={k: np.asarray(v)[None, None] for k, v in values.items()}, method="map",
                                info={"wall_s": 0.0, "num_chains": 1, "seed": seed})
    if not informative.all():
        draws = dataclasses.replace(draws, samples=rest_degenerate_criteria(draws.samples, inputs, informative))

    settings = {"seed": seed, "num_warmup": num_warmup, "num_samples": num_samples, "num_chains": num_chains,
                "thinning": thinning, "target_accept": target_accept, "svi_steps": svi_steps,
                "learning_rate": learning_rate, "ridge": ridge, "bt_ridge": bt_ridge, "bt_weight": bt_weight,
                "item_sd": None if method == "map" or model == "rubric_only" else item_sd}
    if model == "joint":
        settings["joint_param"] = kwargs["param"]
        settings["scale_end"] = inputs.scale_end
    if requested == "auto":
        settings["auto"] = choice
    post = _assemble(inputs, draws, model=model, method=method, ci_prob=ci_prob, settings=settings,
                     warn=warn and method in ("nuts", "block_laplace"))
    for flag in post.flags:  # the MAP's degeneracy warnings (prepare_inputs has warned a disconnected tournament)
        if flag["kind"] != "bt_disconnected":
            warnings.warn(flag["message"], CalibrationWarning, stacklevel=2)
    return post


def _assemble(inputs: PosteriorInputs, draws: inference.Draws, *, model: str, method: str, ci_prob: float,
              settings: dict, warn: bool) -> Posterior:
    """Posterior object (DataTree, tables, diagnostics, gain draws) from raw draws."""
    ability, gain, theta = _gain_draws(draws.samples, inputs, model)
    dt = _to_datatree(draws, inputs, model, ability, gain, theta)
    diag = _diagnose(dt, draws, model)
    if warn:
        _warn_diagnostics(diag)
    items, queries, docs = _tables(inputs, model, draws, ability, gain, theta, ci_prob)
    summary = _summary(dt, model, ci_prob) if draws.num_draws > 1 else pd.DataFrame()
    mask = inputs.mask
    gain_draws = np.where(mask, gain, 0.0).reshape((-1,) + mask.shape).astype(np.float32)
    tau = None if model == "rubric_only" else queries["tau_mean"].to_numpy()[: len(inputs.query_ids)]
    return Posterior(idata=dt, inputs=inputs, items=items, queries=queries, documents=docs, summary=summary,
                     diagnostics=diag, gain_draws=gain_draws, method=method, model=model, ci_prob=ci_prob,
                     settings=dict(settings), draws=draws, flags=posterior_flags(inputs, model, tau))


def _summary(dt, model: str, ci_prob: float) -> pd.DataFrame:
    import arviz as az

    names = ["gamma", "beta"] + ([] if model == "rubric_only" else ["tau", "alpha"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return az.summary(dt, var_names=names, ci_prob=ci_prob, ci_kind="eti", round_to="none")


def _rubric_only_init(inputs: PosteriorInputs, informative: np.ndarray) -> dict:
    """Starting values of the rubric-only model (``informative`` bool[K]: the criteria it samples) from the
    marginal-ML fit (EAP abilities)."""
    mask = inputs.mask
    qi, di = np.nonzero(mask & (inputs.trials[..., 0] > 0))
    fit = irt.fit_rubric_only(inputs.passes[qi, di][:, informative], inputs.trials[qi, di][:, informative])
    eta = np.zeros(mask.shape)
    eta[qi, di] = fit.ability
    return {"log_gamma_raw": np.log(fit.gamma), "beta_raw": fit.beta, "eta": eta}


# --------------------------------------------------------------------------------------------------
# saving and loading
# --------------------------------------------------------------------------------------------------
_FORMAT = 1


def diagnostics_summary(post: Posterior) -> dict:
    """JSON-ready diagnostics: method, model, draws, divergences, R-hat and ESS (None where undefined)."""
    out = {"method": post.method, "model": post.model}
    for k, v in post.diagnostics.items():
        v = float(v) if isinstance(v, (float, np.floating)) else v
        out[k] = None if isinstance(v, float) and not np.isfinite(v) else v
    return out


def save_posterior(post: Posterior, folder) -> Path:
    """Write a posterior to ``folder``: ``draws.npz`` (raw draws, sampler statistics, the padded inputs
    except the win matrices) and ``posterior.json`` (ids, settings, diagnostics), then the readable
    tables ``items.csv``, ``queries.csv``, ``documents.csv``. Files are written atomically;
    ``posterior.json`` last. :func:`load_posterior` rebuilds the same :class:`Posterior`.

    Returns:
        The folder.
    """
    import io

    from rcp_jax.data.atomic import atomic_write_bytes, atomic_write_csv, atomic_write_json

    folder = Path(folder)
    if post.draws is None:
        raise DataError("this posterior has no raw draws to save (build it with fit_posterior)")
    arrays = {f"sample__{k}": v for k, v in post.draws.samples.items()}
    arrays.update({f"stat__{k}": v for k, v in post.draws.stats.items()})
    inp = post.inputs
    arrays.update(doc_ids=np.asarray(inp.doc_ids, dtype=str), n_docs=inp.n_docs, theta=inp.theta, passes=inp.passes,
                  trials=inp.trials, n_components=inp.n_components if inp.n_components is not None else np.ones(0))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(folder / "draws.npz", buf.getvalue())
    for name, table in (("items", post.items), ("queries", post.queries), ("documents", post.documents)):
        atomic_write_csv(folder / f"{name}.csv", table)
    info = {k: v for k, v in post.draws.info.items()
            if isinstance(v, (int, float, str, bool)) or k in large.SAVED_INFO}  # the block Laplace's records
    atomic_write_json(folder / "posterior.json", {
        "format": _FORMAT, "method": post.method, "model": post.model, "ci_prob": post.ci_prob,
        "draws_method": post.draws.method, "draws_info": info, "settings": post.settings,
        "criteria": list(inp.criteria), "query_ids": list(inp.query_ids), "uncalibrated": list(inp.uncalibrated),
        "diagnostics": diagnostics_summary(post),
    })
    return folder


def load_posterior(folder) -> Posterior:
    """Read a posterior written by :func:`save_posterior`.

    Raises:
        DataError: the folder lacks ``posterior.json`` / ``draws.npz`` or was written by another format.
    """
    import json

    folder = Path(folder)
    meta_path, npz_path = folder / "posterior.json", folder / "draws.npz"
    if not meta_path.is_file() or not npz_path.is_file():
        raise DataError(f"{folder} holds no posterior (expected posterior.json and draws.npz from `rcp-jax fit "
                        f"--method nuts|svi|laplace`)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != _FORMAT:
        raise DataError(f"{meta_path}: unknown posterior format {meta.get('format')!r}; refit with this version")
    with np.load(npz_path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    samples = {k.split("__", 1)[1]: v for k, v in arrays.items() if k.startswith("sample__")}
    stats = {k.split("__", 1)[1]: v for k, v in arrays.items() if k.startswith("stat__")}
    n_comp = arrays["n_components"] if arrays["n_components"].size else None
    inputs = PosteriorInputs(
        query_ids=meta["query_ids"], doc_ids=arrays["doc_ids"].astype(object), n_docs=arrays["n_docs"],
        criteria=meta["criteria"], theta=arrays["theta"], wins=None, passes=arrays["passes"], trials=arrays["trials"],
        uncalibrated=meta["uncalibrated"], n_components=n_comp,
    )
    draws = inference.Draws(samples=samples, stats=stats, method=meta["draws_method"], info=meta["draws_info"])
    return _assemble(inputs, draws, model=meta["model"], method=meta["method"], ci_prob=meta["ci_prob"],
                     settings=meta["settings"], warn=False)


__all__ = [
    "Posterior",
    "diagnostics_summary",
    "load_posterior",
    "save_posterior",
    "PosteriorInputs",
    "fit_posterior",
    "prepare_inputs",
]

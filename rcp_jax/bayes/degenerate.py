"""The MAP path's degeneracy checks on a posterior's data, and its handling of a rubric-only criterion
that nobody (or everybody) passes.

* :func:`posterior_flags` runs :func:`rcp_jax.calibration.degenerate_data_flags` - the checks behind the
  :class:`rcp_jax.calibration.CalibrationWarning` of :func:`rcp_jax.calibrate` - on the arrays a posterior
  was fitted on: queries whose rubric answers are all 0 or all 1, criteria never or always passed, queries
  whose Bradley-Terry scores have no spread (an all-tied tournament), disconnected tournaments, and
  (posterior mean) tau collapsed to ~0. The rubric-only model gets the criterion checks only, as
  :func:`rcp_jax.fit_rubric_only` does. Same kinds, ids and messages as the MAP's ``info["flags"]``; the
  joint model's no-spread message says what that model does instead of giving one gain per query.
* :func:`informative_criteria` and :func:`rest_degenerate_criteria`: the rubric-only posterior treats a
  never- or always-passed criterion as :func:`rcp_jax.fit_rubric_only` does. Left in the model, such a
  criterion has an unbounded difficulty that the likelihood pushes into the prior's tail, and it takes
  most of the discrimination (gamma 2.9 of 5 on a simulated collection, mean gain 0.20 against the MAP's
  0.38). So it is left out of the sampled model; in every draw it gets discrimination 1 and the difficulty
  at which that draw's abilities would pass (fail) it half an answer in ``answers + 1`` - the MAP's rule,
  applied draw by draw - and the axis is re-centred (mean beta 0).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rcp_jax.calibration import _resting_difficulty, degenerate_criteria, degenerate_data_flags, informative_mask

#: What the joint model does with a query whose tournament is all tied (replaces the MAP's "one gain").
JOINT_NO_SPREAD = (
    "the joint model's latent scores of those documents are held together by the tied tournament, so their "
    "order comes from the rubric answers alone, and posterior RCP-nDCG ranks their ideal list by posterior-mean "
    "gain (a Stage A order with every document tied has no order of its own)"
)
_MAP_NO_SPREAD = "the documents get one gain"


def posterior_flags(inputs, model: str, tau: np.ndarray | None = None) -> list[dict]:
    """The MAP's degeneracy flags of a posterior's data (module docstring).

    Args:
        inputs: the :class:`rcp_jax.bayes.posterior.PosteriorInputs` fitted.
        model: ``frozen``, ``joint`` or ``rubric_only``.
        tau: float[Q] posterior-mean tau of each calibrated query (None: no ``tau_collapsed`` check).

    Returns:
        list of ``{"kind", "ids", "message"}`` as :func:`rcp_jax.calibration.degenerate_data_flags`.
    """
    criteria = list(inputs.criteria)
    if model == "rubric_only":
        return degenerate_criteria(criteria, *_criterion_counts(inputs))
    mask = inputs.mask
    qi, di = np.nonzero(mask)
    docs = pd.DataFrame({"query_id": np.asarray(inputs.query_ids, dtype=object)[qi], "doc_id": inputs.doc_ids[qi, di],
                         "theta": np.asarray(inputs.theta, dtype=np.float64)[qi, di],
                         "placements": np.asarray(inputs.trials, dtype=np.float64)[qi, di, 0]})
    passes = np.asarray(inputs.passes, dtype=np.float64)[qi, di]
    for j, c in enumerate(criteria):
        docs[f"{c}_pass"] = passes[:, j]
    tau_s = pd.Series(np.asarray(tau, dtype=np.float64) if tau is not None else np.full(len(inputs.query_ids), np.inf),
                      index=[str(q) for q in inputs.query_ids])
    n_comp = inputs.n_components
    components = None if n_comp is None else {str(q): int(k) for q, k in zip(inputs.query_ids, n_comp)}
    flags = degenerate_data_flags(docs, criteria, tau_s, components)
    if model == "joint":
        for f in flags:
            if f["kind"] == "bt_no_spread":
                head, found, tail = f["message"].partition(_MAP_NO_SPREAD)
                f["message"] = head + JOINT_NO_SPREAD + tail if found else f"{f['message']}; {JOINT_NO_SPREAD}"
    return flags


def _criterion_counts(inputs) -> tuple[np.ndarray, np.ndarray]:
    """(passes, trials) float64[K]: answers per criterion over every document."""
    passes = np.asarray(inputs.passes, dtype=np.float64).sum(axis=(0, 1))
    trials = np.asarray(inputs.trials, dtype=np.float64).sum(axis=(0, 1))
    return passes, trials


def informative_criteria(inputs) -> np.ndarray:
    """bool[K]: the criteria the rubric-only posterior samples (neither never nor always passed).

    Raises:
        CalibrationError: every criterion is never or always passed (as :func:`rcp_jax.fit_rubric_only`).
    """
    criteria = list(inputs.criteria)
    return informative_mask(criteria, degenerate_criteria(criteria, *_criterion_counts(inputs)))


def rest_degenerate_criteria(samples: dict, inputs, informative: np.ndarray) -> dict:
    """Rubric-only draws of the informative criteria -> draws of every criterion (module docstring).

    Args:
        samples: draws with leading axes ``[chains, draws]``: ``gamma, beta: [..., K_inf]`` (sum gamma =
            K_inf, mean beta 0), ``eta: [..., Q, N]``, ``scale, shift: [...]``.
        inputs: the posterior's inputs (all K criteria). informative: bool[K].

    Returns:
        A copy of ``samples`` with ``gamma, beta: [..., K]`` (degenerate criteria: gamma 1 and their
        resting difficulty; sum gamma = K, mean beta 0) and ``shift`` moved with the re-centred axis, so
        ``eta * scale + shift`` stays each document's ability on that axis.
    """
    if informative.all():
        return samples
    out = dict(samples)
    gamma_inf = np.asarray(samples["gamma"], dtype=np.float64)
    lead = gamma_inf.shape[:-1]
    k = len(informative)
    gamma, beta = np.ones(lead + (k,)), np.zeros(lead + (k,))
    gamma[..., informative] = gamma_inf
    beta[..., informative] = np.asarray(samples["beta"], dtype=np.float64)
    trials = np.asarray(inputs.trials, dtype=np.float64)
    judged = trials[..., 0] > 0
    weight = trials[..., 0][judged]
    eta = np.asarray(samples["eta"], dtype=np.float64)[..., judged]  # [..., I]
    ability = eta * np.asarray(samples["scale"], dtype=np.float64)[..., None] + np.asarray(
        samples["shift"], dtype=np.float64)[..., None]
    passes, totals = _criterion_counts(inputs)
    flat_ability = ability.reshape(-1, ability.shape[-1])
    for j in np.flatnonzero(~informative):
        target = 0.5 / (totals[j] + 1.0) if passes[j] == 0 else 1.0 - 0.5 / (totals[j] + 1.0)
        beta[..., j] = np.array([_resting_difficulty(a, weight, target) for a in flat_ability]).reshape(lead)
    shift = beta.mean(axis=-1)
    out["gamma"] = gamma.astype(np.float32)
    out["beta"] = (beta - shift[..., None]).astype(np.float32)
    out["shift"] = (np.asarray(samples["shift"], dtype=np.float64) - shift).astype(np.float32)
    return out


__all__ = ["JOINT_NO_SPREAD", "informative_criteria", "posterior_flags", "rest_degenerate_criteria"]

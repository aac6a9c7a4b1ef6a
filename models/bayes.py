"""Bayesian versions of RCP's models as NumPyro programs (METHOD sections 1, 3 and 6).

Four models, each a plain function of arrays with named sample sites and plates ``criterion``,
``query`` and ``doc``, shared by MAP, NUTS and SVI alike (see :mod:`rcp_jax.models.inference`):

* :func:`bradley_terry_model` - Stage A. The soft-label BT log-likelihood of METHOD section 1 enters as
  one ``numpyro.factor`` on the sufficient statistic ``wins[Q, N, N]``
  (:func:`rcp_jax.models.bradley_terry.pair_statistics`)::

      log L(theta) = bt_weight * sum_{q, a, b} wins[q, a, b] * log sigmoid(theta_qa - theta_qb)

  ``wins`` already carries METHOD's pair weight ``2 / w``: a window of ``w`` documents counts as
  ``w - 1`` Bernoulli comparisons with soft outcomes (``w`` scores minus one free constant). This is a
  *pseudo*-likelihood (soft labels are not Bernoulli outcomes), so its weight is a modelling choice,
  exposed as ``bt_weight`` (a likelihood temperature): 1.0 is METHOD's own weighting and the default;
  larger values trust the tournament more (narrower BT posteriors), smaller values less.
  The BT likelihood is translation invariant, so theta is parameterised on the sum-zero subspace of
  each query by an orthonormal Helmert basis (:func:`centred_from_contrasts`): ``theta = H z`` with
  ``z ~ N(0, sd_q^2)`` is exactly the law of a centred ``N(0, sd_q^2 I)`` vector, and
  ``sd_q = 1 / sqrt(bt_ridge * total_q)`` (``total_q`` = the query's summed pair weight) is the MAP
  ridge of :func:`rcp_jax.models.bradley_terry.fit_map` on the sum scale. With ``bt_weight = 1`` the posterior
  mode is therefore exactly the BT MAP of the same ``wins``. (:func:`rcp_jax.fit_posterior` builds ``wins``
  without the pairs tied at the end of the judge's scale, ``pair_statistics(..., scale_end=5)``: those say
  "both at least this good", not "equal"; its mode then differs from METHOD's BT MAP where such ties exist.)
* :func:`calibration_model` - the 2PL of METHOD section 3 with frozen BT covariates (exact by assumption)::

      Y_qdc ~ Binomial(trials_qdc, sigmoid(gamma_c (tau_q theta_qd + alpha_q - beta_c)))

  with the reference parameterisation ``gamma = C softmax(u)``, ``beta = v - mean(v)`` and priors equal
  to the MAP penalties of :func:`rcp_jax.models.irt.fit_2pl_calibration`: that objective is mean-scaled
  (divided by the number of answers ``NC``); multiplied by ``NC`` it is the negative log posterior
  (up to a constant) of ``tau ~ N(1, 1)`` truncated to ``tau > 0``, ``alpha ~ N(0, 2^2)`` and
  ``u, v ~ N(0, 1 / (ridge NC))``. The foundation's MAP is hence the posterior mode in the model's
  own coordinates (``tau``, not ``log tau``). NUTS samples ``log tau`` with the Jacobian, as usual.
  The means of u and v never reach the likelihood; they are integrated out exactly by sampling u, v as
  sum-zero Helmert contrasts (sites ``u, v: float[C - 1]``, see :func:`item_contrasts`).
* :func:`rubric_only_model` - the rubric-only 2PL (no tournament): ability ``eta ~ N(0, 1)`` per
  document, ``log gamma_raw, beta_raw ~ N(0, 1 / (ridge NC))``, reported (``gamma``, ``beta``) rescaled
  to ``sum gamma = C`` and ``mean beta = 0`` as :func:`rcp_jax.models.irt.fit_rubric_only` does.
* :func:`joint_model` - Stage A and Stage B together: theta is latent (BT likelihood and prior of
  :func:`bradley_terry_model`) and the 2PL acts on ``tau_q theta_qd + alpha_q``, so judge noise in the
  tournament flows into the gains.

Identifiability of the joint model: (i) location - theta is centred by construction (Helmert basis);
the query offset ``alpha`` carries all location. (ii) scale - the BT likelihood is not scale invariant
(``sigmoid(theta_a - theta_b)`` are absolute win probabilities), so theta lives on the judge's logit
scale and ``tau`` is identified by the product ``tau * theta`` only through that; with few windows the
trade-off between ``tau`` and the spread of theta is resolved by the priors ``tau ~ N+(1, 1)`` and
``theta ~ N(0, sd_q^2)``. That trade-off is a curved ridge in the BT coordinates (``param="theta"``);
samplers therefore use ``param="ability"``, which samples the calibrated ability ``tau theta`` (the
quantity the rubric pins) and recovers ``theta = ability / tau``: the same model, an axis-aligned ridge.
(iii) items - ``sum gamma = C`` and ``mean beta = 0`` as in the MAP. These two hard constraints pin the one
invariance of the 2PL with per-query calibration (the affine map ``t -> a t + b`` of the latent scale with
``gamma -> gamma / a``, ``beta -> a beta + b``, ``tau -> a tau``, ``alpha -> a alpha + b`` leaves every likelihood
term and every gain unchanged; ``sum gamma = C`` fixes ``a = 1``, ``mean beta = 0`` fixes ``b = 0``), so gamma and
beta are identified by the data, not by the priors on tau and alpha. A simulator's true items are comparable
with the posterior's once they are on the same convention
(``benchmarks.coverage.items_on_model_convention``).

Item prior. Every model's default prior on the contrasts ``u, v`` is the MAP's ridge, ``N(0, 1 / (ridge NC))``
with NC the number of answers, so the mode is the reference MAP. That prior *tightens as the data grow* (SD 0.32
at NC = 100,000, 20 queries x 150 documents): it shrinks beta towards 0 and gamma towards equal by a fixed
fraction (~2.5% of beta at the published items: beta_5 = 4.1 comes out ~0.10 low) that never vanishes while the
posterior SDs shrink like ``1 / sqrt(NC)``, so the items' intervals miss the truth more often the larger the
collection. :func:`rcp_jax.fit_posterior` therefore passes a fixed, weakly informative ``item_sd``
(:data:`DEFAULT_ITEM_SD`) to the posterior methods; ``item_sd=None`` there restores the MAP's ridge prior.

Frozen versus joint: :func:`calibration_model` conditions on the BT scores as if they were exact. Its
gain intervals are calibrated when that holds (exact or very dense, low-noise tournaments) and too
narrow when the tournament is noisy; :func:`joint_model` treats the scores as noisy measurements and is
calibrated there (see ``benchmarks/coverage.py``, ``benchmarks/sbc.py --coverage`` and
``tests/bayes/test_joint.py``), which is why ``rcp_jax.fit_posterior`` uses it by default.

Layout: queries are padded to ``N`` documents; real documents of query ``q`` are the first
``n_docs[q]`` (a prefix), padded documents have zero ``wins`` rows/columns and zero ``trials``. Rubric
counts are ``passes, trials: float[Q, N, C]`` (:func:`rcp_jax.models.irt.collapse_placements`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from rcp_jax.models.irt import ALPHA_PRIOR_SD, DEFAULT_RIDGE, TAU_PRIOR_SD

#: Names of the plates (and of the arviz dimensions built from them).
CRITERION, QUERY, DOC = "criterion", "query", "doc"
#: Default weight (likelihood temperature) of the soft-label BT pseudo-likelihood: METHOD's own weights.
DEFAULT_BT_WEIGHT = 1.0
#: Prior SD of the item contrasts ``u, v`` in :func:`rcp_jax.fit_posterior`'s posteriors: fixed, whatever the
#: number of answers (the MAP's ridge prior, ``1 / sqrt(ridge NC)``, tightens with NC and biases the items; see the
#: module docstring). 3 is weak on the published items' scale (``|H^T beta| = 5.3``, log-gamma contrasts ~0.5).
DEFAULT_ITEM_SD = 3.0


# --------------------------------------------------------------------------------------------------
# helpers shared by the models
# --------------------------------------------------------------------------------------------------
def centred_from_contrasts(z: jax.Array, n_docs: jax.Array) -> jax.Array:
    """Map Helmert contrasts to centred scores, in O(N).

    Column ``k`` (1-based, ``1 <= k < N``) of the Helmert basis has ``1 / sqrt(k (k + 1))`` in rows
    ``0..k-1`` and ``-k / sqrt(k (k + 1))`` in row ``k``; the columns are orthonormal and sum to zero,
    and the first ``n - 1`` columns restricted to the first ``n`` rows are the basis for a pool of
    ``n`` documents. So one basis serves every pool size of a padded batch.

    Args:
        z: float[..., Q, N - 1] contrasts; entries ``k >= n_docs[q]`` (1-based) are ignored.
        n_docs: int[Q] pool sizes.

    Returns:
        float[..., Q, N] theta with ``sum_d theta[q, d] = 0`` over real documents and 0 on padding.
    """
    n = z.shape[-1] + 1
    k = jnp.arange(1, n, dtype=z.dtype)
    coef = 1.0 / jnp.sqrt(k * (k + 1.0))
    active = jnp.arange(1, n)[None, :] < jnp.asarray(n_docs)[:, None]
    zm = jnp.where(active, z * coef, 0.0)
    tail = jnp.cumsum(zm[..., ::-1], axis=-1)[..., ::-1]  # tail[m] = sum_{k >= m + 1} zm_k
    zeros = jnp.zeros(zm.shape[:-1] + (1,), z.dtype)
    return jnp.concatenate([tail, zeros], axis=-1) - jnp.concatenate([zeros, k * zm], axis=-1)


def contrasts_from_centred(theta: jax.Array, n_docs: jax.Array) -> jax.Array:
    """Inverse of :func:`centred_from_contrasts` for centred theta (0 on padding): float[..., Q, N - 1]."""
    n = theta.shape[-1]
    k = jnp.arange(1, n, dtype=theta.dtype)
    coef = 1.0 / jnp.sqrt(k * (k + 1.0))
    before = jnp.cumsum(theta, axis=-1)[..., :-1]  # sum_{i < k} theta_i for k = 1..N-1
    z = coef * (before - k * theta[..., 1:])
    active = jnp.arange(1, n)[None, :] < jnp.asarray(n_docs)[:, None]
    return jnp.where(active, z, 0.0)


def item_prior_sd(trials: jax.Array, ridge: float) -> jax.Array:
    """Prior SD ``1 / sqrt(ridge * NC)`` of the raw item parameters, NC = number of answers."""
    return 1.0 / jnp.sqrt(ridge * jnp.maximum(jnp.sum(trials), 1.0))


def bt_prior_sd(wins: jax.Array, bt_ridge: float) -> jax.Array:
    """Per-query prior SD float[Q] of theta: ``1 / sqrt(bt_ridge * total_q)`` (the BT MAP ridge)."""
    total = jnp.maximum(wins.sum(axis=(-2, -1)), 1.0)
    return 1.0 / jnp.sqrt(bt_ridge * total)


def bt_log_likelihood(theta: jax.Array, wins: jax.Array) -> jax.Array:
    """Soft-label BT log-likelihood ``sum wins[a, b] log sigmoid(theta_a - theta_b)``, summed: float[]."""
    diff = theta[..., :, None] - theta[..., None, :]
    return jnp.sum(wins * jax.nn.log_sigmoid(diff))


def rcp_gain(ability: jax.Array, gamma: jax.Array, beta: jax.Array) -> jax.Array:
    """RCP gain ``sum_c gamma_c sigmoid(gamma_c (t - beta_c)) / sum_c gamma_c`` (JAX, batched).

    Args:
        ability: float[..., *S] calibrated abilities.
        gamma, beta: float[..., C] item parameters with the same leading (draw) axes as ``ability``.

    Returns:
        float[..., *S] gains in (0, 1).
    """
    extra = ability.ndim - gamma.ndim + 1
    g = gamma.reshape(gamma.shape[:-1] + (1,) * extra + gamma.shape[-1:])
    b = beta.reshape(beta.shape[:-1] + (1,) * extra + beta.shape[-1:])
    return jnp.sum(g * jax.nn.sigmoid(g * (ability[..., None] - b)), axis=-1) / jnp.sum(g, axis=-1)


def _items(n_criteria: int, sd) -> tuple[jax.Array, jax.Array]:
    """Item parameters from sum-zero Helmert contrasts ``u, v: float[C - 1]``.

    ``gamma = C softmax(u)`` and ``beta = v - mean(v)`` ignore the mean of u and v, so under the
    MAP's ridge prior ``N(0, sd^2 I_C)`` that mean is a direction the data never see. It is integrated
    out exactly by sampling only the contrasts (``u_C = H u``, H the orthonormal Helmert basis): the
    posterior of gamma and beta is unchanged, the mode is the foundation's (whose u, v have mean 0),
    and NUTS is spared a prior-only direction that a diagonal mass matrix cannot align with.
    """
    h = jnp.asarray(helmert_matrix(n_criteria), jnp.result_type(float))
    u = numpyro.sample("u", dist.Normal(0.0, sd).expand([n_criteria - 1]).to_event(1))
    v = numpyro.sample("v", dist.Normal(0.0, sd).expand([n_criteria - 1]).to_event(1))
    gamma = numpyro.deterministic("gamma", n_criteria * jax.nn.softmax(h @ u))
    beta = numpyro.deterministic("beta", h @ v)
    return gamma, beta


def item_contrasts(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Helmert contrasts (the sites ``u, v`` of the 2PL models) of the foundation's raw ``u, v: float[C]``."""
    h = helmert_matrix(np.shape(u)[-1])
    return np.asarray(u) @ h, np.asarray(v) @ h


def _query_calibration(n_queries: int, tau_sd: float, alpha_sd: float) -> tuple[jax.Array, jax.Array]:
    with numpyro.plate(QUERY, n_queries):
        tau = numpyro.sample("tau", dist.TruncatedNormal(1.0, tau_sd, low=0.0))
        alpha = numpyro.sample("alpha", dist.Normal(0.0, alpha_sd))
    return tau, alpha


def _rubric_likelihood(ability, gamma, beta, passes, trials) -> None:
    """Binomial rubric answers; ``ability: float[Q, N]``, ``passes, trials: float[Q, N, C]``."""
    q, n, c = trials.shape
    logits = gamma * (ability[..., None] - beta)
    # Observed counts may be float; simulating (passes None) needs integer trials.
    total = trials if passes is not None else jnp.round(trials).astype(jnp.result_type(int))
    with numpyro.plate(QUERY, q, dim=-3), numpyro.plate(DOC, n, dim=-2), numpyro.plate(CRITERION, c, dim=-1):
        numpyro.sample("y", dist.Binomial(total_count=total, logits=logits), obs=passes)


def _latent_theta(wins, n_docs, bt_ridge, bt_weight) -> jax.Array:
    q, n = wins.shape[0], wins.shape[1]
    sd = bt_prior_sd(wins, bt_ridge)
    with numpyro.plate(QUERY, q):
        z = numpyro.sample("z", dist.Normal(0.0, sd[:, None]).expand([q, n - 1]).to_event(1))
    theta = centred_from_contrasts(z, n_docs)
    numpyro.factor("bt", bt_weight * bt_log_likelihood(theta, wins))
    return theta


def _latent_ability_contrasts(wins, n_docs, tau, bt_ridge, bt_weight) -> jax.Array:
    """Centred calibrated ability ``tau theta`` sampled directly (see :func:`joint_model`, ``param``)."""
    q, n = wins.shape[0], wins.shape[1]
    sd = bt_prior_sd(wins, bt_ridge)
    # z ~ N(0, sd^2)  <=>  w = tau z ~ N(0, (tau sd)^2) given tau: the same joint law of (tau, z). Padding
    # contrasts (k >= n_docs) never reach a likelihood; they stay unscaled (w = z there) so that they do
    # not form a prior-only funnel with tau.
    active = jnp.arange(1, n)[None, :] < jnp.asarray(n_docs)[:, None]
    scale = jnp.where(active, tau[:, None], 1.0)
    with numpyro.plate(QUERY, q):
        w = numpyro.sample("w", dist.Normal(0.0, scale * sd[:, None]).to_event(1))
    z = numpyro.deterministic("z", w / scale)
    numpyro.factor("bt", bt_weight * bt_log_likelihood(centred_from_contrasts(z, n_docs), wins))
    return centred_from_contrasts(w, n_docs)


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
def bradley_terry_model(
    wins: jax.Array,
    n_docs: jax.Array,
    *,
    bt_ridge: float = DEFAULT_RIDGE,
    bt_weight: float = DEFAULT_BT_WEIGHT,
) -> None:
    """Bayesian soft-label Bradley-Terry of a padded batch of queries (Stage A alone).

    Args:
        wins: float[Q, N, N] soft win statistics (:func:`rcp_jax.models.bradley_terry.pair_statistics`).
        n_docs: int[Q] pool sizes (real documents are the first ``n_docs[q]``), each >= 2.
        bt_ridge: ridge of the BT MAP; sets the prior ``theta ~ N(0, 1 / (bt_ridge total_q))`` on the
            sum-zero subspace (the MAP's penalty on the sum scale).
        bt_weight: weight (temperature) of the soft-label pseudo-likelihood; 1 = METHOD's weights.

    Sites:
        ``z: float[Q, N-1]`` Helmert contrasts (latent); theta = :func:`centred_from_contrasts` (z).
        Factor ``bt``. With ``bt_weight = 1`` the posterior mode equals
        :func:`rcp_jax.models.bradley_terry.fit_map`.
    """
    _latent_theta(wins, n_docs, bt_ridge, bt_weight)


def calibration_model(
    theta: jax.Array,
    passes: jax.Array | None,
    trials: jax.Array,
    *,
    ridge: float = DEFAULT_RIDGE,
    item_sd: float | None = None,
    tau_sd: float = TAU_PRIOR_SD,
    alpha_sd: float = ALPHA_PRIOR_SD,
) -> None:
    """The 2PL calibration of METHOD section 3 with frozen BT scores.

    The scores are covariates, known exactly up to the per-query affine map ``tau, alpha``: the
    posterior holds rubric and item uncertainty only. Gain intervals cover the truth at their nominal
    rate when the scores are exact; with a noisy tournament use :func:`joint_model`.

    Args:
        theta: float[Q, N] frozen BT scores (any value on padding).
        passes: float[Q, N, C] "yes" answers per (document, criterion); None to sample them (prior
            predictive, e.g. for simulation-based calibration).
        trials: float[Q, N, C] answers per (document, criterion); 0 on padding.
        ridge: the MAP ridge; prior ``u, v ~ N(0, 1 / (ridge NC))`` with NC = ``trials.sum()``.
        item_sd: a fixed prior SD of ``u`` and ``v`` instead of the ridge's (which tightens with NC and biases the
            items; :func:`rcp_jax.fit_posterior` passes :data:`DEFAULT_ITEM_SD`).
        tau_sd, alpha_sd: prior SDs: ``tau ~ N(1, tau_sd^2)`` truncated at 0, ``alpha ~ N(0, alpha_sd^2)``.

    Sites:
        ``u, v: float[C - 1]`` Helmert contrasts of the raw item parameters, deterministic
        ``gamma = C softmax(H u): float[C]``, ``beta = H v``; ``tau, alpha: float[Q]`` (plate query); observed ``y: float[Q, N, C]``.
    """
    q, _, c = trials.shape
    gamma, beta = _items(c, item_prior_sd(trials, ridge) if item_sd is None else item_sd)
    tau, alpha = _query_calibration(q, tau_sd, alpha_sd)
    _rubric_likelihood(tau[:, None] * theta + alpha[:, None], gamma, beta, passes, trials)


def rubric_only_model(
    passes: jax.Array | None,
    trials: jax.Array,
    *,
    ridge: float = DEFAULT_RIDGE,
    item_sd: float | None = None,
) -> None:
    """Rubric-only 2PL: latent ability ``eta ~ N(0, 1)`` for every document, no tournament.

    Args:
        passes, trials: float[Q, N, C] as in :func:`calibration_model` (padding: trials 0).
        ridge: prior ``log gamma_raw, beta_raw ~ N(0, 1 / (ridge NC))``, a ridge penalty on the sum
            scale. The default 1e-4 keeps the prior proper and weakly informative (SD ~ 1-10);
            :func:`rcp_jax.models.irt.fit_rubric_only` uses the far smaller ``irt.RUBRIC_ONLY_RIDGE`` (plain
            marginal ML), whose prior SD (~300 at NC = 100) would let ``exp(log gamma_raw)`` overflow.
        item_sd: override that prior SD.

    Sites:
        ``log_gamma_raw, beta_raw: float[C]``; ``eta: float[Q, N]`` (plates query, doc); observed ``y``;
        deterministic ``gamma`` (sum C), ``beta`` (mean 0) and ``scale, shift`` such that the
        calibrated ability on the reported axis is ``eta * scale + shift`` (:func:`rubric_only_ability`).
    """
    q, n, c = trials.shape
    sd = item_prior_sd(trials, ridge) if item_sd is None else item_sd
    with numpyro.plate(CRITERION, c):
        log_a = numpyro.sample("log_gamma_raw", dist.Normal(0.0, sd))
        b = numpyro.sample("beta_raw", dist.Normal(0.0, sd))
    with numpyro.plate(QUERY, q, dim=-2), numpyro.plate(DOC, n, dim=-1):
        eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
    a = jnp.exp(log_a)
    s = c / a.sum()
    numpyro.deterministic("gamma", a * s)
    numpyro.deterministic("beta", (b - b.mean()) / s)
    numpyro.deterministic("scale", 1.0 / s)
    numpyro.deterministic("shift", -b.mean() / s)
    _rubric_likelihood(eta, a, b, passes, trials)


def joint_model(
    wins: jax.Array,
    n_docs: jax.Array,
    passes: jax.Array | None,
    trials: jax.Array,
    *,
    ridge: float = DEFAULT_RIDGE,
    bt_ridge: float = DEFAULT_RIDGE,
    bt_weight: float = DEFAULT_BT_WEIGHT,
    item_sd: float | None = None,
    tau_sd: float = TAU_PRIOR_SD,
    alpha_sd: float = ALPHA_PRIOR_SD,
    param: str = "theta",
) -> None:
    """Joint Stage A + Stage B model: latent BT scores feed the 2PL calibration.

    Args:
        wins: float[Q, N, N] soft win statistics; n_docs: int[Q] pool sizes (prefix layout).
        passes, trials: float[Q, N, C] rubric counts (trials 0 for documents without answers).
        ridge, item_sd, tau_sd, alpha_sd: as :func:`calibration_model`.
        bt_ridge, bt_weight: as :func:`bradley_terry_model`.
        param: coordinates of the latent scores, the same model either way. ``theta`` samples the BT
            contrasts ``z`` (theta = H z); ``ability`` samples the contrasts of the calibrated ability
            ``w = tau z ~ N(0, (tau sd_q)^2)`` given tau, with ``z = w / tau`` deterministic. The rubric
            answers pin ``tau theta`` much more tightly than a sparse tournament pins the scale of theta,
            so in ``theta`` coordinates the posterior is a curved ridge (tau up, spread of theta down);
            in ``ability`` coordinates that ridge is axis-aligned. The posterior is identical; the
            *mode* is a property of the coordinates (a Jacobian ``tau^(n_q - 1)`` apart), so MAP fits use
            ``theta``, the model's own coordinates.

    Sites:
        ``z: float[Q, N-1]`` (theta = :func:`centred_from_contrasts` (z, n_docs); deterministic when
        ``param="ability"``, which samples ``w: float[Q, N-1]``), factor ``bt``, ``u, v, gamma, beta``,
        ``tau, alpha``, observed ``y``.
    """
    q, _, c = trials.shape
    if param == "theta":
        theta = _latent_theta(wins, n_docs, bt_ridge, bt_weight)
    elif param != "ability":
        raise ValueError(f"param must be 'theta' or 'ability', got {param!r}")
    gamma, beta = _items(c, item_prior_sd(trials, ridge) if item_sd is None else item_sd)
    tau, alpha = _query_calibration(q, tau_sd, alpha_sd)
    if param == "theta":
        ability = tau[:, None] * theta
    else:
        ability = _latent_ability_contrasts(wins, n_docs, tau, bt_ridge, bt_weight)
    _rubric_likelihood(ability + alpha[:, None], gamma, beta, passes, trials)


# --------------------------------------------------------------------------------------------------
# derived quantities of posterior draws
# --------------------------------------------------------------------------------------------------
def calibrated_ability(samples: dict, *, theta=None, n_docs=None) -> jax.Array:
    """Calibrated ability ``tau theta + alpha`` of every draw: float[..., Q, N].

    Args:
        samples: draws with leading sample axes ``...``: ``tau, alpha: [..., Q]`` and either ``z``
            (joint model; needs ``n_docs``) or a frozen ``theta: float[Q, N]``; or, for the rubric-only
            model, ``eta: [..., Q, N]`` with ``scale, shift: [...]``.
    """
    if "eta" in samples:
        return rubric_only_ability(samples)
    if "z" in samples:
        theta = centred_from_contrasts(jnp.asarray(samples["z"]), n_docs)
    tau = jnp.asarray(samples["tau"])[..., None]
    alpha = jnp.asarray(samples["alpha"])[..., None]
    return tau * jnp.asarray(theta) + alpha


def rubric_only_ability(samples: dict) -> jax.Array:
    """Ability on the reported (sum gamma = C, mean beta = 0) axis: ``eta * scale + shift``, float[..., Q, N]."""
    eta = jnp.asarray(samples["eta"])
    return eta * jnp.asarray(samples["scale"])[..., None, None] + jnp.asarray(samples["shift"])[..., None, None]


def helmert_matrix(n: int) -> np.ndarray:
    """The N x (N-1) Helmert basis used by :func:`centred_from_contrasts` (for tests and docs), float64."""
    h = np.zeros((n, n - 1))
    for k in range(1, n):
        h[:k, k - 1] = 1.0 / np.sqrt(k * (k + 1.0))
        h[k, k - 1] = -k / np.sqrt(k * (k + 1.0))
    return h

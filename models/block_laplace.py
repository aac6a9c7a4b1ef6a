"""A structured Laplace approximation of the joint model for large benchmarks (thousands of queries).

The joint model (:func:`rcp_jax.models.bayes.joint_model`, ``param="ability"``) couples queries only through
the ~2(C - 1) item contrasts ``g = (u, v)``: given them, each query's latent block ``x_q = (w_q, log tau_q,
alpha_q)`` (N - 1 ability contrasts, the log scale, the offset) is independent of every other query's. So the
negative log posterior is

    F(x, g) = sum_q f_q(x_q, g) + prior(g)

and its Hessian is block-arrow shaped: a dense ``[M, M]`` block per query (M = N + 1), a ``[M, G]`` coupling
per query and one small ``[G, G]`` item block. Everything here exploits that:

* **mode** - Levenberg-Marquardt Newton steps on the whole posterior, solved by the Schur complement of the
  item block: one batched Cholesky per query block plus a ``G x G`` solve (``O(Q M^3)``, no ``(QM)^2`` matrix);
* **Hessian blocks** - per query, the Bradley-Terry part through its closed-form Hessian in theta
  (``diag(S 1) - S`` with ``S = (W + W^T) p (1 - p)``) mapped by the Jacobian of ``theta(x)``, the rest by
  forward-over-reverse autodiff of an ``O(N C)`` function (no ``[M, N, N]`` temporaries);
* **draws** - exact draws of the Gaussian at the mode: ``g`` from its marginal (precision = the Schur
  complement), then each ``x_q | g`` from its conditional (precision = the query's block), batched; or, as
  :func:`rcp_jax.fit_posterior` does, each ``x_q`` from its exact conditional posterior at the items' mode
  (:mod:`rcp_jax.models.block_hmc`), moved with ``g``'s draw through the coupling (:func:`sample_block_laplace`'s
  ``conditional``);
* **items' mean** - the items' marginal is not Gaussian at the joint mode: quasi-Newton steps move them to the mode
  of their Laplace-approximate marginal (:func:`marginal_item_mode`, each step re-solving the blocks' conditional
  modes), where the Gaussian is factored again;
* **check** - per query block, the log importance ratio ``log p - log q`` of every draw, for Pareto-k.

Coordinates: ``w_q`` are the Helmert contrasts of the calibrated ability ``tau theta`` (the rubric pins them),
``log tau`` makes the scale unconstrained, as NUTS and SVI sample it. Padding contrasts (``k >= n_q - 1``)
carry a unit Gaussian so every block stays invertible; they never reach a likelihood and are zeroed in draws.

Priors: the joint model's; the items' SD is :class:`Data`'s ``item_sd`` (:func:`rcp_jax.fit_posterior` passes the
fixed :data:`rcp_jax.models.bayes.DEFAULT_ITEM_SD`: the MAP ridge's prior tightens with the number of answers and
biases the items, see :mod:`rcp_jax.models.bayes`, "Item prior").

Shapes: Q queries padded to N documents, C criteria, G = 2 (C - 1), M = N + 1; float32 like the other fits.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models import query_shards
from rcp_jax.models.bayes import bt_prior_sd, centred_from_contrasts, helmert_matrix, item_prior_sd
from rcp_jax.models.irt import ALPHA_PRIOR_SD, DEFAULT_RIDGE, TAU_PRIOR_SD


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["wins", "n_docs", "passes", "trials", "bt_sd"],
                   meta_fields=["item_sd", "bt_weight", "tau_sd", "alpha_sd"])
@dataclass(frozen=True)
class Data:
    """The collection in the joint model's padded layout (see :mod:`rcp_jax.models.bayes`).

    Attributes:
        wins: float32[Q, N, N] soft win statistics; n_docs: int32[Q] pool sizes.
        passes, trials: float32[Q, N, C] rubric counts.
        bt_sd: float32[Q] prior SD of the BT contrasts (``bt_prior_sd``); item_sd: prior SD of u, v.
        bt_weight, tau_sd, alpha_sd: as :func:`rcp_jax.models.bayes.joint_model`.
    """

    wins: jax.Array
    n_docs: jax.Array
    passes: jax.Array
    trials: jax.Array
    bt_sd: jax.Array
    item_sd: float
    bt_weight: float = 1.0
    tau_sd: float = TAU_PRIOR_SD
    alpha_sd: float = ALPHA_PRIOR_SD


def make_data(wins, n_docs, passes, trials, *, ridge: float = DEFAULT_RIDGE, bt_ridge: float = DEFAULT_RIDGE,
              bt_weight: float = 1.0, item_sd: float | None = None, tau_sd: float = TAU_PRIOR_SD,
              alpha_sd: float = ALPHA_PRIOR_SD) -> Data:
    """:class:`Data` with the joint model's priors (``ridge``, ``bt_ridge``, ``item_sd`` as
    :func:`~rcp_jax.models.bayes.joint_model`: ``item_sd=None`` takes the ridge's ``1 / sqrt(ridge NC)``)."""
    wins = jnp.asarray(wins, jnp.float32)
    trials = jnp.asarray(trials, jnp.float32)
    sd = float(item_prior_sd(trials, ridge)) if item_sd is None else float(item_sd)
    return Data(wins=wins, n_docs=jnp.asarray(n_docs, jnp.int32), passes=jnp.asarray(passes, jnp.float32),
                trials=trials, bt_sd=bt_prior_sd(wins, bt_ridge), item_sd=sd,
                bt_weight=float(bt_weight), tau_sd=float(tau_sd), alpha_sd=float(alpha_sd))


# --------------------------------------------------------------------------------------------------
# the posterior, one query block at a time
# --------------------------------------------------------------------------------------------------
def _split(y: jax.Array, n: int, c: int):
    """``y = (w[N-1], log tau, alpha, u[C-1], v[C-1])`` of one query -> its parts."""
    return y[: n - 1], y[n - 1], y[n], y[n + 1 : n + c], y[n + c :]


def item_parameters(u: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """gamma = C softmax(H u), beta = H v (the joint model's item parameters), float[C] each."""
    h = jnp.asarray(helmert_matrix(u.shape[-1] + 1), u.dtype)
    return (u.shape[-1] + 1) * jax.nn.softmax(h @ u), h @ v


def _theta(y: jax.Array, n_q, n: int, c: int) -> jax.Array:
    """Centred BT scores float[N] of one query's ``y``: ``theta = H (w / tau)`` over its real documents."""
    w, log_tau, _, _, _ = _split(y, n, c)
    active = jnp.arange(1, n) < n_q
    z = jnp.where(active, w * jnp.exp(-log_tau), 0.0)
    return centred_from_contrasts(z[None], n_q[None])[0]


def _bt_nll(theta: jax.Array, wins: jax.Array) -> jax.Array:
    """Negative soft-label BT log-likelihood ``-sum W_ab log sigmoid(theta_a - theta_b)`` of one query."""
    return -jnp.sum(wins * jax.nn.log_sigmoid(theta[:, None] - theta[None, :]))


def _bt_hessian(theta: jax.Array, wins: jax.Array) -> jax.Array:
    """Hessian float[N, N] of :func:`_bt_nll` in theta: ``diag(S 1) - S``, ``S = (W + W^T) p (1 - p)``."""
    p = jax.nn.sigmoid(theta[:, None] - theta[None, :])
    s = (wins + wins.T) * p * (1.0 - p)
    return jnp.diag(s.sum(1)) - s


def _rest_nll(y: jax.Array, q: dict, data: Data, n: int, c: int) -> jax.Array:
    """Everything of ``f_q`` except the BT likelihood: priors of w, tau, alpha (with log tau's Jacobian), the
    unit Gaussian of padding contrasts, and the binomial rubric likelihood."""
    w, log_tau, alpha, u, v = _split(y, n, c)
    active = jnp.arange(1, n) < q["n"]
    scale = jnp.exp(log_tau) * q["bt_sd"]
    prior_w = jnp.sum(jnp.where(active, 0.5 * (w / scale) ** 2 + jnp.log(scale), 0.5 * w**2))
    tau = jnp.exp(log_tau)
    prior_tau = 0.5 * ((tau - 1.0) / data.tau_sd) ** 2 - log_tau  # truncated normal in log coordinates
    prior_alpha = 0.5 * (alpha / data.alpha_sd) ** 2
    gamma, beta = item_parameters(u, v)
    ability = centred_from_contrasts(jnp.where(active, w, 0.0)[None], q["n"][None])[0] + alpha
    logits = gamma * (ability[:, None] - beta)
    passes, trials = q["passes"], q["trials"]
    rubric = -jnp.sum(passes * jax.nn.log_sigmoid(logits) + (trials - passes) * jax.nn.log_sigmoid(-logits))
    return prior_w + prior_tau + prior_alpha + rubric


def _local_nll(y: jax.Array, q: dict, data: Data, n: int, c: int) -> jax.Array:
    """``f_q(x_q, g)``: the query's negative log posterior term (up to a constant), float[]."""
    return data.bt_weight * _bt_nll(_theta(y, q["n"], n, c), q["wins"]) + _rest_nll(y, q, data, n, c)


def _local_blocks(y: jax.Array, q: dict, data: Data, n: int, c: int):
    """(value, gradient float[M + G], Hessian float[M + G, M + G]) of ``f_q`` at ``y``."""
    theta_of = lambda yy: _theta(yy, q["n"], n, c)  # noqa: E731
    theta, jac = theta_of(y), jax.jacfwd(theta_of)(y)  # [N], [N, M + G]
    g_theta = jax.grad(_bt_nll)(theta, q["wins"])
    curvature = jax.hessian(lambda yy: jnp.dot(jax.lax.stop_gradient(g_theta), theta_of(yy)))(y)
    h_bt = jac.T @ _bt_hessian(theta, q["wins"]) @ jac + curvature
    rest = lambda yy: _rest_nll(yy, q, data, n, c)  # noqa: E731
    value = data.bt_weight * _bt_nll(theta, q["wins"]) + rest(y)
    grad = data.bt_weight * (jac.T @ g_theta) + jax.grad(rest)(y)
    return value, grad, data.bt_weight * h_bt + jax.hessian(rest)(y)


def _per_query(data: Data) -> dict:
    return {"wins": data.wins, "n": data.n_docs, "passes": data.passes, "trials": data.trials, "bt_sd": data.bt_sd}


def _joined(x: jax.Array, g: jax.Array) -> jax.Array:
    return jnp.concatenate([x, jnp.broadcast_to(g, (x.shape[0], g.shape[0]))], axis=1)


@functools.partial(jax.jit, static_argnames=("batch_size", "mesh"))
def _all_blocks(x: jax.Array, g: jax.Array, data: Data, batch_size: int, mesh=None):
    """Value float[Q], gradient float[Q, M + G] and Hessian float[Q, M + G, M + G] of every ``f_q`` (each
    device of ``mesh`` its own queries; see :mod:`rcp_jax.models.query_shards`)."""

    def local(x, g, data):
        n, c = data.wins.shape[1], data.trials.shape[2]
        one = lambda args: _local_blocks(args[0], args[1], data, n, c)  # noqa: E731
        return jax.lax.map(one, (_joined(x, g), _per_query(data)), batch_size=batch_size)

    return query_shards.over_queries(local, mesh, (True, False, True))(x, g, data)


@functools.partial(jax.jit, static_argnames=("batch_size", "mesh"))
def _all_values(x: jax.Array, g: jax.Array, data: Data, batch_size: int, mesh=None) -> jax.Array:
    """``f_q`` of every query, float[Q]."""

    def local(x, g, data):
        n, c = data.wins.shape[1], data.trials.shape[2]
        one = lambda args: _local_nll(args[0], args[1], data, n, c)  # noqa: E731
        return jax.lax.map(one, (_joined(x, g), _per_query(data)), batch_size=batch_size)

    return query_shards.over_queries(local, mesh, (True, False, True))(x, g, data)


def _spread(data: Data, mesh) -> Data:
    """``data`` with the query axis split over ``mesh``'s devices, padded with dummy queries to a multiple of them
    (``data`` itself without a mesh; pad blocks ``x`` to match with :func:`rcp_jax.models.query_shards.pad_rows`).

    A dummy query has no documents and no judgements: its block holds only the priors of its contrasts, scale
    and offset (positive definite), its gradient and Hessian in the items are exactly zero, so it adds nothing to
    the items' Schur complement; its value is left out of the objective and its step out of the convergence test.
    """
    if mesh is None:
        return data
    total = query_shards.padded_count(data.wins.shape[0], mesh)
    pad = query_shards.pad_rows
    data = dataclasses.replace(data, wins=pad(data.wins, total), n_docs=pad(data.n_docs, total),
                               passes=pad(data.passes, total), trials=pad(data.trials, total),
                               bt_sd=pad(data.bt_sd, total, fill=1.0))
    return query_shards.put_rows(data, mesh)


def _prior_g(g: np.ndarray, item_sd: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(value, gradient, Hessian) of the item prior ``|g|^2 / (2 item_sd^2)``, float64."""
    prec = 1.0 / item_sd**2
    return 0.5 * prec * float(g @ g), prec * g, prec * np.eye(len(g))


# --------------------------------------------------------------------------------------------------
# the mode: Newton steps through the Schur complement of the item block
# --------------------------------------------------------------------------------------------------
#: Largest change of a query's log tau in one Newton step; a block whose step is longer is shortened as a whole. In
#: the contrasts ``w = tau * theta`` the density is unbounded as tau -> 0 (a funnel: the prior of ``w`` gains
#: ``(N - 1) log(1 / tau)`` while the rubric loses a bounded amount), so every query's mode is a local one, and one
#: long step in log tau can leave it for the funnel: at 1,000 x 150 one query's log tau stepped 3.5 and ran to -12.
MAX_LOG_TAU_STEP = 0.5
#: Lowest log tau a Newton step may reach (tau ~ 1e-3, where the calibration calls a query's scale collapsed): a
#: query with no local mode (its rubric answers barely follow its tournament order) slides down the funnel, and
#: stops here instead of running to -inf; :func:`rcp_jax.bayes.large.block_laplace_draws` names such queries.
LOG_TAU_FLOOR = -6.9


def _bounded_steps(dx: jax.Array, log_tau: jax.Array) -> jax.Array:
    """Each block's step float[Q, M] shortened (direction kept) so that its log tau (column ``M - 2``, now
    ``log_tau`` float[Q]) moves by at most :data:`MAX_LOG_TAU_STEP` and does not go below :data:`LOG_TAU_FLOOR`
    (a block already there and stepping down does not move)."""
    step = dx[:, -2]
    scale = jnp.minimum(1.0, MAX_LOG_TAU_STEP / jnp.maximum(jnp.abs(step), 1e-30))
    step = step * scale
    below = (step < 0) & (log_tau + step < LOG_TAU_FLOOR)
    room = jnp.clip((log_tau - LOG_TAU_FLOOR) / jnp.maximum(-step, 1e-30), 0.0, 1.0)
    return dx * (scale * jnp.where(below, room, 1.0))[:, None]


@jax.jit
def _schur_step(hess: jax.Array, grad: jax.Array, prior_grad: jax.Array, prior_hess: jax.Array, damping,
                log_tau: jax.Array):
    """The damped Newton step ``(dx float[Q, M], dg float[G])`` of the block-arrow system (each block's ``dx`` bounded
    by :func:`_bounded_steps`; ``log_tau`` float[Q] the blocks' current log tau), and whether every block's Cholesky
    succeeded."""
    m = hess.shape[1] - prior_grad.shape[0]
    a = hess[:, :m, :m] + damping * jnp.eye(m)
    b = hess[:, :m, m:]
    d = hess[:, m:, m:].sum(0) + prior_hess + damping * jnp.eye(prior_hess.shape[0])
    gx, gg = grad[:, :m], grad[:, m:].sum(0) + prior_grad
    chol = jnp.linalg.cholesky(a)
    solve = jax.vmap(lambda l, r: jax.scipy.linalg.cho_solve((l, True), r))
    a_inv_b = solve(chol, b)
    a_inv_gx = solve(chol, gx[..., None])[..., 0]
    schur = d - jnp.einsum("qmg,qmh->gh", b, a_inv_b)
    rhs = -gg + jnp.einsum("qmg,qm->g", b, a_inv_gx)
    dg = jnp.linalg.solve(schur, rhs)
    dx = _bounded_steps(-(a_inv_gx + jnp.einsum("qmg,g->qm", a_inv_b, dg)), log_tau)
    ok = jnp.all(jnp.isfinite(chol)) & jnp.all(jnp.isfinite(dg))
    return dx, dg, ok


@dataclass(frozen=True)
class BlockLaplace:
    """The Gaussian at the joint posterior's mode, kept in its block-arrow factorised form.

    Attributes:
        x: float32[Q, M] mode of each query block ``(w[N-1], log tau, alpha)``; g: float64[G] mode of ``(u, v)``.
        chol_local: float32[Q, M, M] lower Cholesky factor of each block's precision ``A_q``.
        coupling: float32[Q, M, G] ``A_q^-1 B_q`` (how a block's mean moves with the items).
        chol_items: float64[G, G] lower Cholesky factor of the items' marginal precision (Schur complement).
        g_shift: float64[G] the items' mean minus ``g`` (:func:`marginal_item_shift`, or the exact-gradient step of
            :mod:`rcp_jax.models.item_score`; None: none).
        info: ``iterations``, ``converged``, ``objective`` (F at the mode), ``max_step``, ``damping``,
            ``ridged_blocks``, ``devices``.
        queries: how many of the rows of ``x``, ``chol_local`` and ``coupling`` are real queries; the rest are
            dummy queries padding the query axis to a multiple of the devices (:func:`_spread`). None: all rows.
        mesh: the devices the query axis is split over (:func:`rcp_jax.models.query_shards.query_mesh`), or None.
        item_curvature: float64[G, G] the curvature of the items' Laplace-approximate marginal at ``g`` (the
            Schur complement BFGS-updated by :func:`marginal_item_mode`), or None (not estimated).
    """

    x: jax.Array
    g: np.ndarray
    chol_local: jax.Array
    coupling: jax.Array
    chol_items: np.ndarray
    info: dict = field(default_factory=dict)
    g_shift: np.ndarray | None = None
    queries: int | None = None
    mesh: jax.sharding.Mesh | None = None
    item_curvature: np.ndarray | None = None

    @property
    def n_queries(self) -> int:
        """The real queries (rows of ``x`` before any padding)."""
        return self.x.shape[0] if self.queries is None else self.queries


def fit_block_laplace(data: Data, x0, g0, *, max_iter: int = 60, tol: float = 1e-4, batch_size: int = 32,
                      progress=None, devices=None) -> BlockLaplace:
    """Find the joint posterior's mode and factor its Hessian there.

    Args:
        data: :func:`make_data`.
        x0: float[Q, M] starting blocks ``(w, log tau, alpha)`` (e.g. the MAP calibration of the BT MAP scores).
        g0: float[G] starting item contrasts ``(u, v)``.
        max_iter: most Newton steps; tol: stop when the largest coordinate step is below it.
        batch_size: query blocks differentiated together (memory ``~batch_size * (M + G)^2`` floats).
        progress: called as ``progress(iteration, largest_step, tol)`` after every step (a progress bar can
            estimate the steps left from how fast the largest coordinate step falls towards ``tol``).
        devices: the devices the query blocks are split over (default ``jax.devices()``; one device: no split).
            The result is the single-device one up to float32 rounding of the sums over queries.

    Returns:
        :class:`BlockLaplace`; ``info["converged"]`` False when ``max_iter`` steps did not reach ``tol``.
    """
    mesh = query_shards.query_mesh(devices)
    q = int(np.shape(x0)[0])
    data = _spread(data, mesh)
    x = query_shards.put_rows(query_shards.pad_rows(jnp.asarray(x0, jnp.float32), data.wins.shape[0]), mesh)
    g = np.asarray(g0, np.float64)
    damping, converged, step = 1e-3, False, np.inf

    def objective(xx, gg):
        values = np.asarray(_all_values(xx, jnp.asarray(gg, jnp.float32), data, batch_size, mesh), np.float64)
        return float(values[:q].sum()) + _prior_g(gg, data.item_sd)[0]

    current = objective(x, g)
    it = 0
    for it in range(1, max_iter + 1):
        _, grad, hess = _all_blocks(x, jnp.asarray(g, jnp.float32), data, batch_size, mesh)
        _, pg, ph = _prior_g(g, data.item_sd)
        for _ in range(12):  # raise the damping until the step is defined and lowers F
            dx, dg, ok = _schur_step(hess, grad, jnp.asarray(pg, jnp.float32), jnp.asarray(ph, jnp.float32),
                                     jnp.float32(damping), x[:, -2])
            if bool(ok):
                trial_x, trial_g = x + dx, g + np.asarray(dg, np.float64)
                trial = objective(trial_x, trial_g)
                if np.isfinite(trial) and trial <= current + 1e-6 * abs(current):
                    break
            damping *= 10.0
        else:
            break
        step = max(float(jnp.max(jnp.abs(dx[:q]))), float(np.max(np.abs(np.asarray(dg)))))
        x, g, current = trial_x, trial_g, trial
        damping = max(damping / 10.0, 1e-6)
        if progress is not None:
            progress(it, step, tol)
        if step < tol:
            converged = True
            break
    _, grad, hess = _all_blocks(x, jnp.asarray(g, jnp.float32), data, batch_size, mesh)
    chol_local, coupling, chol_items, ridged = _factor(hess, g, data)
    info = {"iterations": it, "converged": converged, "objective": current, "max_step": step, "damping": damping,
            "ridged_blocks": ridged, "devices": 1 if mesh is None else int(mesh.devices.size)}
    return BlockLaplace(x=x, g=g, chol_local=chol_local, coupling=coupling, chol_items=chol_items, info=info,
                        queries=q, mesh=mesh)


def _factor(hess: jax.Array, g: np.ndarray, data: Data):
    """The precision's factors at the mode: per-block Cholesky, couplings, the items' Schur complement, and how
    many blocks needed a ridge."""
    m = hess.shape[1] - len(g)
    a, b = hess[:, :m, :m], hess[:, :m, m:]
    chol, ridged = _block_cholesky(a)
    coupling = jax.vmap(lambda l, r: jax.scipy.linalg.cho_solve((l, True), r))(chol, b)
    schur = (np.asarray(hess[:, m:, m:].sum(0), np.float64) + _prior_g(g, data.item_sd)[2]
             - np.einsum("qmg,qmh->gh", np.asarray(b, np.float64), np.asarray(coupling, np.float64)))
    schur = 0.5 * (schur + schur.T)
    try:
        chol_items = np.linalg.cholesky(schur)
    except np.linalg.LinAlgError:
        chol_items = np.full_like(schur, np.nan)
    if not np.all(np.isfinite(chol_items)):
        raise FloatingPointError("block Laplace: the items' marginal precision (Schur complement) is not positive "
                                 "definite at the mode; the posterior is not locally Gaussian in the items")
    return chol, coupling, chol_items, ridged


def _block_cholesky(a: jax.Array, attempts: int = 8) -> tuple[jax.Array, int]:
    """Lower Cholesky factors of the blocks ``a`` float[Q, M, M]; a block that is not positive definite in float32
    (rare, at a flat mode) gets the smallest ridge ``10^k * 1e-7 * mean diagonal`` that makes it so. Returns the
    factors and how many blocks took a ridge."""
    m = a.shape[-1]
    chol = jnp.linalg.cholesky(a)
    bad = ~jnp.all(jnp.isfinite(chol), axis=(1, 2))
    ridged = int(bad.sum())
    scale = jnp.trace(a, axis1=1, axis2=2) / m
    for k in range(attempts):
        if not bool(bad.any()):
            break
        ridge = (10.0**k) * 1e-7 * scale[:, None, None] * jnp.eye(m)
        chol = jnp.where(bad[:, None, None], jnp.linalg.cholesky(a + ridge), chol)
        bad = ~jnp.all(jnp.isfinite(chol), axis=(1, 2))
    if bool(bad.any()):
        raise FloatingPointError(f"block Laplace: {int(bad.sum())} query blocks are not positive definite at the mode")
    return chol, ridged


# --------------------------------------------------------------------------------------------------
# draws and their check
# --------------------------------------------------------------------------------------------------
@jax.jit
def _block_noise(chol_local, eps):
    """``L_q^-T eps``: draws of N(0, A_q^-1) for a chunk, float[D, Q, M] from ``eps`` float[D, Q, M]."""
    return jax.vmap(lambda e: jax.vmap(lambda l, r: jax.scipy.linalg.solve_triangular(l, r, trans="T", lower=True))(
        chol_local, e))(eps)


def sample_block_laplace(fit: BlockLaplace, seed: int, num_samples: int, *, chunk: int = 50,
                         n_docs=None, items_fixed: bool = False, conditional=None, progress=None) -> dict:
    """Exact draws of the Gaussian at the mode.

    Args:
        fit: :func:`fit_block_laplace`; seed, num_samples: the draws.
        chunk: draws made together (memory ``~chunk * Q * M`` floats).
        n_docs: int[Q] pool sizes: padding contrasts of the draws are set to 0 (default: left as drawn).
        items_fixed: keep the items at their mode and draw each block from its conditional ``x_q | g``
            (what :func:`conditional_model` samples exactly, for checks).
        conditional: float[D >= num_samples, Q, M] draws of every block from its exact conditional posterior given
            the items at ``fit.g`` (:func:`rcp_jax.models.block_hmc.sample_blocks`), used in place of the
            Gaussian's conditional draws: draw d is ``conditional[d]`` moved by the coupling to its items'
            draw. None: the Gaussian's.
        progress: called as ``progress(draws_done, num_samples)`` after every chunk, or None.

    Returns:
        dict: ``x`` float32[D, Q, M] and ``g`` float64[D, G].
    """
    rng = np.random.default_rng(seed)
    q, (rows, m) = fit.n_queries, fit.x.shape
    z = rng.standard_normal((num_samples, len(fit.g)))
    centre = fit.g if fit.g_shift is None else fit.g + fit.g_shift
    g = np.repeat(fit.g[None], num_samples, 0) if items_fixed else centre[None] + np.linalg.solve(fit.chol_items.T, z.T).T
    keep = None if n_docs is None else (jnp.arange(m) >= m - 2) | (jnp.arange(m)[None, :] + 1 < jnp.asarray(n_docs)[:, None])
    xs = []
    for lo in range(0, num_samples, chunk):
        d = min(chunk, num_samples - lo)
        dg = jnp.asarray(g[lo : lo + d] - fit.g[None], jnp.float32)
        if conditional is None:
            eps = rng.standard_normal((d, q, m)).astype(np.float32)  # the real queries' noise, whatever the padding
            eps = jnp.asarray(np.pad(eps, ((0, 0), (0, rows - q), (0, 0))) if rows > q else eps)
            x = (fit.x[None] - jnp.einsum("qmg,dg->dqm", fit.coupling, dg) + _block_noise(fit.chol_local, eps))[:, :q]
        else:
            x = jnp.asarray(conditional[lo : lo + d]) - jnp.einsum("qmg,dg->dqm", fit.coupling[:q], dg)
        xs.append(np.asarray(x if keep is None else jnp.where(keep[None], x, 0.0), np.float32))
        if progress is not None:
            progress(lo + d, num_samples)
    return {"x": np.concatenate(xs), "g": g}


def conditional_model(wins, n_docs, passes, trials, u, v, **kwargs) -> None:
    """:func:`rcp_jax.models.bayes.joint_model` with the item contrasts fixed at ``u, v: float[C - 1]`` (data): the
    exact conditional posterior of the query blocks, which :func:`sample_block_laplace` (``items_fixed=True``)
    approximates. NUTS on a few queries of it checks the approximation where it is made."""
    import numpyro

    from rcp_jax.models.bayes import joint_model

    with numpyro.handlers.condition(data={"u": u, "v": v}):
        joint_model(wins, n_docs, passes, trials, **kwargs)


def samples_as_sites(draws: dict, n: int, c: int) -> dict:
    """Draws in the joint model's site names (``param="ability"``), float32[1, D, ...] each: ``w``, ``z`` =
    ``w / tau``, ``tau``, ``alpha``, ``u``, ``v``, ``gamma``, ``beta``."""
    x, g = draws["x"], draws["g"]
    w, tau, alpha = x[..., : n - 1], np.exp(x[..., n - 1]), x[..., n]
    u, v = g[:, : c - 1], g[:, c - 1 :]
    gamma, beta = jax.vmap(item_parameters)(jnp.asarray(u, jnp.float32), jnp.asarray(v, jnp.float32))
    sites = {"w": w, "z": w / tau[..., None], "tau": tau, "alpha": alpha, "u": u, "v": v,
             "gamma": np.asarray(gamma), "beta": np.asarray(beta)}
    return {k: np.asarray(val, np.float32)[None] for k, val in sites.items()}


# --------------------------------------------------------------------------------------------------
# the items' Laplace-marginal correction
# --------------------------------------------------------------------------------------------------
def _logdet_gradient_one(y, chol, eps, q: dict, data: Data, n: int, c: int, m: int):
    """``d/dy tr(A^-1 H_xx(y))`` at the mode of one query (A^-1 fixed): the gradient of its block's log-determinant
    in every coordinate, ``sum_k D^3 f[v_k, v_k, .] / K`` with ``v_k = L^-T eps_k`` (``E[v v^T] = A^-1``; exact when
    ``eps`` is ``sqrt(K) I``, K = M)."""
    f = lambda yy: _local_nll(yy, q, data, n, c)  # noqa: E731
    probes = jax.scipy.linalg.solve_triangular(chol, eps.T, trans="T", lower=True)  # [m, K]
    probes = jnp.concatenate([probes, jnp.zeros((y.shape[0] - m, eps.shape[0]), y.dtype)], axis=0).T  # [K, M + G]

    def third(v):
        second = lambda yy: jax.jvp(lambda y2: jax.jvp(f, (y2,), (v,))[1], (yy,), (v,))[1]  # noqa: E731
        return jax.grad(second)(y)

    return jax.lax.map(third, probes).mean(0)


@functools.partial(jax.jit, static_argnames=("batch_size", "mesh"))
def _logdet_gradients(x, g, chol_local, eps, data: Data, batch_size: int, mesh=None):
    """float[Q, M + G]: each query block's gradient of ``log det A_q`` at fixed coordinates (see above)."""

    def local(x, g, chol_local, eps, data):
        n, c = data.wins.shape[1], data.trials.shape[2]
        m = x.shape[1]
        one = lambda args: _logdet_gradient_one(args[0], args[1], args[2], args[3], data, n, c, m)  # noqa: E731
        return jax.lax.map(one, (_joined(x, g), chol_local, eps, _per_query(data)), batch_size=batch_size)

    return query_shards.over_queries(local, mesh, (True, False, True, True, True))(x, g, chol_local, eps, data)


def marginal_item_shift(fit: "BlockLaplace", data: Data, *, probes: int | None = None, seed: int = 0,
                        batch_size: int = 8) -> np.ndarray:
    """One Newton step of the items towards the mode of their Laplace-approximate marginal posterior, float64[G].

    The joint mode's items are not the mode of the items' marginal: integrating out each query's ~150 latent
    dimensions adds ``-1/2 log det A_q(g)`` per query (A_q at the query's conditional mode given the items). Its
    gradient, through the conditional modes' own response ``dx_q/dg = -A_q^-1 B_q``, divided by the items' marginal
    precision (the Schur complement), moves the items' mean; the draws of every query follow through the coupling.

    ``probes``: per query, random probes of the trace (Hutchinson; their noise averages over the queries), or None:
    the exact trace (M probes) up to 20,000 query-probes in all, else 8 random ones per query.
    """
    q, m = fit.n_queries, fit.x.shape[1]
    if probes is None:
        probes = m if q * m <= 20_000 else 8
    if probes >= m:
        eps = np.broadcast_to(np.sqrt(m) * np.eye(m, dtype=np.float32), (q, m, m))
    else:
        eps = np.random.default_rng([seed, 0x7ACE]).standard_normal((q, probes, m)).astype(np.float32)
    # the fit's layout: dummy queries (zero probes, no items in their blocks) fill the query axis of its devices
    data = _spread(data, fit.mesh)
    eps = query_shards.put_rows(query_shards.pad_rows(jnp.asarray(eps), fit.x.shape[0]), fit.mesh)
    grads = np.asarray(_logdet_gradients(fit.x, jnp.asarray(fit.g, jnp.float32), fit.chol_local, eps, data,
                                         batch_size, fit.mesh), np.float64)[:q]
    coupling = np.asarray(fit.coupling, np.float64)[:q]  # A^-1 B, [Q, M, G]
    total = grads[:, m:].sum(0) - np.einsum("qmg,qm->g", coupling, grads[:, :m])  # d/dg sum_q log det A_q
    schur = fit.chol_items @ fit.chol_items.T
    return np.linalg.solve(schur, -0.5 * total)


@functools.partial(jax.jit, static_argnames=("m",))
def _conditional_newton_step(hess: jax.Array, grad: jax.Array, log_tau: jax.Array, m: int) -> jax.Array:
    """Each query block's Newton step ``-A_q^-1 grad_x f_q`` with the items fixed, float[Q, M] (zero for a block
    whose Cholesky fails)."""
    chol = jnp.linalg.cholesky(hess[:, :m, :m])
    dx = _bounded_steps(-jax.vmap(lambda l, r: jax.scipy.linalg.cho_solve((l, True), r))(chol, grad[:, :m]), log_tau)
    return jnp.where(jnp.all(jnp.isfinite(dx), axis=1, keepdims=True), dx, 0.0)


def conditional_modes(x, g, data: Data, *, mesh=None, max_iter: int = 20, tol: float = 1e-4,
                      batch_size: int = 32):
    """Each query block's mode ``x_q*(g)`` with the items fixed at ``g``, and the blocks' derivatives there.

    With the items fixed the blocks are independent: Newton steps on every block at once, each block halving its own
    step (up to 6 times) until its ``f_q`` does not rise; stops when the next step would be below ``tol`` in every
    coordinate (that step is not taken: the blocks returned are the ones their derivatives were taken at).

    Args:
        x: float[Q, M] starting blocks (rows as :func:`_spread` lays them out when ``mesh`` is given).
        g: float[G] the items; data: :func:`make_data` (already spread over ``mesh``).

    Returns:
        (x float32[Q, M], gradient float32[Q, M + G], Hessian float32[Q, M + G, M + G]) of every ``f_q`` at ``x``.
    """
    gg = jnp.asarray(g, jnp.float32)
    x = jnp.asarray(x, jnp.float32)
    m = x.shape[1]
    current = _all_values(x, gg, data, batch_size, mesh)
    for _ in range(max_iter):
        _, grad, hess = _all_blocks(x, gg, data, batch_size, mesh)
        dx = _conditional_newton_step(hess, grad, x[:, -2], m)
        if float(jnp.max(jnp.abs(dx))) < tol:
            return x, grad, hess
        new, done = x, jnp.zeros(x.shape[0], bool)
        for t in (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125):
            trial = x + t * dx
            values = _all_values(trial, gg, data, batch_size, mesh)
            accept = (~done) & jnp.isfinite(values) & (values <= current + 1e-6 * jnp.abs(current))
            new = jnp.where(accept[:, None], trial, new)
            current = jnp.where(accept, values, current)
            done = done | accept
            if bool(done.all()):
                break
        x = new
    _, grad, hess = _all_blocks(x, gg, data, batch_size, mesh)
    return x, grad, hess


def marginal_item_mode(fit: "BlockLaplace", data: Data, *, iterations: int = 6, tol: float = 1e-3,
                       probes: int | None = None, seed: int = 0, batch_size: int = 8) -> "BlockLaplace":
    """The block Laplace re-centred at the mode of the items' Laplace-approximate marginal posterior.

    The items' marginal ``log p(g) ~ -F(x*(g), g) - 1/2 sum_q log det A_q(x*(g), g)`` (``x*(g)``: the blocks'
    conditional modes, :func:`conditional_modes`). Each iteration takes a Newton step on it: the gradient is the joint
    density's in ``g`` at ``(x*(g), g)`` (envelope theorem; Schur-reduced, so a block not exactly at its mode still
    gives the step Newton would) plus the log-determinants' (:func:`marginal_item_shift`'s third derivatives), the
    curvature the joint mode's Schur complement, BFGS-updated from the gradients' changes (the Schur complement alone
    misses the log-determinants' curvature: plain steps shrank only ~0.6x each). The first iteration from the joint mode is
    :func:`marginal_item_shift`'s one step. After at most ``iterations`` steps (or one smaller than ``tol`` in every
    item contrast) the blocks go to ``x*(g)`` and everything is factored there: the draws' items are centred at the
    final ``g`` (``g_shift`` None), each block's conditional mean at ``x*(g)``.

    Returns:
        :class:`BlockLaplace` at ``(x*(g), g)``; ``info`` adds ``item_iterations`` (steps taken) and ``item_steps``
        (the largest |step| of each) and ``item_shift`` (final ``g`` minus the joint mode's, a list of floats).
    """
    q, m = fit.n_queries, fit.x.shape[1]
    if probes is None:
        probes = m if q * m <= 20_000 else 8
    if probes >= m:
        eps = np.broadcast_to(np.sqrt(m) * np.eye(m, dtype=np.float32), (q, m, m))
    else:  # the same probes at every step: one smooth objective, so the secant pairs below are not probe noise
        eps = np.random.default_rng([seed, 0x7ACE]).standard_normal((q, probes, m)).astype(np.float32)
    spread = _spread(data, fit.mesh)
    x, g = fit.x, np.asarray(fit.g, np.float64)
    eps = query_shards.put_rows(query_shards.pad_rows(jnp.asarray(eps), x.shape[0]), fit.mesh)
    chol_local, coupling, chol_items = fit.chol_local, fit.coupling, fit.chol_items
    grad_f = np.zeros_like(g)  # the joint density's items gradient: zero at the joint mode
    curvature = chol_items @ chol_items.T  # the Schur complement, then BFGS-updated with the log dets' curvature
    steps: list[float] = []
    previous = None
    ridged = fit.info.get("ridged_blocks", 0)
    for _ in range(iterations):
        ld = np.asarray(_logdet_gradients(x, jnp.asarray(g, jnp.float32), chol_local, eps, spread, batch_size,
                                          fit.mesh), np.float64)[:q]
        cpl = np.asarray(coupling, np.float64)[:q]
        gradient = grad_f + 0.5 * (ld[:, m:].sum(0) - np.einsum("qmg,qm->g", cpl, ld[:, :m]))
        if previous is not None:  # BFGS: the Schur complement lacks the log dets' own curvature (steps shrank ~0.6x)
            s, y = g - previous[0], gradient - previous[1]
            bs = curvature @ s
            if s @ y > 1e-8 * np.linalg.norm(s) * np.linalg.norm(y):
                curvature = curvature - np.outer(bs, bs) / (s @ bs) + np.outer(y, y) / (s @ y)
        previous = (g, gradient)
        dg = np.linalg.solve(curvature, -gradient)
        steps.append(float(np.max(np.abs(dg))))
        g = g + dg
        x = x - jnp.einsum("qmg,g->qm", coupling, jnp.asarray(dg, jnp.float32))  # warm start: the linear response
        x, grad, hess = conditional_modes(x, g, spread, mesh=fit.mesh)
        chol_local, coupling, chol_items, ridged = _factor(hess, g, spread)
        grad64 = np.asarray(grad, np.float64)[:q]
        grad_f = (grad64[:, m:].sum(0) + _prior_g(g, data.item_sd)[1]
                  - np.einsum("qmg,qm->g", np.asarray(coupling, np.float64)[:q], grad64[:, :m]))
        if steps[-1] < tol:
            break
    info = {**fit.info, "ridged_blocks": ridged, "item_iterations": len(steps), "item_steps": steps,
            "item_shift": [float(v) for v in g - fit.g]}
    return dataclasses.replace(fit, x=x, g=g, chol_local=chol_local, coupling=coupling, chol_items=chol_items,
                               g_shift=None, info=info, item_curvature=curvature)

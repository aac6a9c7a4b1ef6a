"""The joint posterior of large benchmarks: which method ``auto`` picks, the block Laplace draws, and their check.

NUTS on the joint model costs minutes per thousand documents on a CPU; a benchmark of 1,000 queries x 150
documents has 150,000. Above :data:`AUTO_NUTS_MAX_DOCS` documents ``method="auto"`` therefore takes the block
Laplace approximation (:mod:`rcp_jax.models.block_laplace`), whose cost and memory grow linearly with the queries:
the joint posterior's mode, factored per query; the items (~10 numbers shared by all queries) Gaussian around the
exact marginal's mode; each query's block (its ~150 contrasts, scale and offset) drawn from its exact conditional
posterior given the items by batched HMC (:func:`exact_block_draws`) and moved with the items' draws through the
blocks' coupling. The same model, so tournament noise still flows into the gains and into RCP-nDCG differences.

It is checked where it is made: with the items at their mode the query blocks are independent, so NUTS on the
exact conditional posterior of a few queries (:func:`rcp_jax.models.block_laplace.conditional_model`) shows how far
the fit's gain intervals are from NUTS's, in units of NUTS's interval width.
(Pareto k of importance ratios is no help here: in a block of ~150 dimensions the ratios of even a good
Gaussian are heavy-tailed; on 10 x 40 simulated documents every block had k > 1 while the gain intervals
matched NUTS's to 8% of their width.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings

import jax.numpy as jnp
import numpy as np

#: ``method="auto"`` runs NUTS on at most this many documents and ``block_laplace`` (joint model) or ``svi``
#: (rubric-only model) above; see benchmarks/RESULTS.md for the times behind it.
AUTO_NUTS_MAX_DOCS = 2_000
#: Queries whose exact conditional posterior NUTS samples to check the block Laplace (0: no check).
CHECK_QUERIES = 3
#: The block Laplace's records in ``Draws.info`` (dicts of plain values) that ``save_posterior`` keeps.
SAVED_INFO = ("newton", "nuts_check", "item_shift", "exact_items", "exact_blocks")
#: Most quasi-Newton steps of the items towards the mode of their Laplace-approximate marginal (each re-solves the
#: query blocks' conditional modes; :func:`rcp_jax.models.block_laplace.marginal_item_mode`; it stops earlier when a
#: step is below 1e-3); 1: one linearised step from the joint mode
#: (:func:`rcp_jax.models.block_laplace.marginal_item_shift`), the fifteenth session's items, which covered less.
ITEM_ITERATIONS = 6
#: Queries whose exact conditional posterior HMC samples for the items' exact marginal gradient (Fisher's identity,
#: :mod:`rcp_jax.models.item_score`): every query up to this many, a random sample above; 0: the items stay at their
#: Laplace-marginal mode.
EXACT_ITEM_QUERIES = 64
#: Largest R-hat of the exact gradient's HMC chains (the sampled queries' summed gradient) without a warning.
EXACT_RHAT_MAX = 1.05
#: Largest R-hat of a query's block coordinates in the exact block draws without naming the query. A block has
#: ~150 coordinates and 2 chains of 250 draws: the largest of 150 R-hats of well-mixed chains is ~1.03, and of the
#: 15,000 of 100 queries ~1.08, so the threshold is the older 1.1, not 1.01 per quantity.
BLOCK_RHAT_MAX = 1.1
#: Draw every query's block from its exact conditional posterior given the items (batched HMC) rather than from
#: its Gaussian; see :func:`exact_block_draws`.
EXACT_BLOCKS = True
#: Largest median gap (|endpoint difference| / exact interval width) the check accepts without a warning.
CHECK_GAP_MAX = 0.1


def choose_method(method: str, model: str, n_docs: int) -> tuple[str, str | None]:
    """(the method ``method="auto"`` stands for, and why) for a ``model`` of ``n_docs`` documents; any other
    method comes back as it is, with no reason."""
    if method != "auto":
        return method, None
    if model == "joint" and n_docs > AUTO_NUTS_MAX_DOCS:
        return "block_laplace", (f"block_laplace: {n_docs:,} documents, more than the {AUTO_NUTS_MAX_DOCS:,} that NUTS "
                                 "samples in minutes on a CPU; the joint posterior factored per query (the items "
                                 "Gaussian, each query's block by HMC given them), checked against NUTS on "
                                 f"{CHECK_QUERIES} queries")
    if model == "rubric_only" and n_docs > AUTO_NUTS_MAX_DOCS:
        return "svi", f"svi: {n_docs:,} documents of the rubric-only model, more than NUTS samples in minutes on a CPU"
    return "nuts", f"nuts: {n_docs:,} documents, within the {AUTO_NUTS_MAX_DOCS:,} that NUTS samples in minutes"


class NewtonSteps:
    """The Newton steps a block-Laplace fit is expected to take, re-estimated after every step.

    The largest coordinate step falls by a roughly constant factor per step until it is below the tolerance; the
    factor seen on the last two steps (clipped to [0.05, 0.9]; 0.5 before there are two) gives the steps left. Near
    the mode Newton converges faster than that, so the estimate errs long, never short by much.
    """

    def __init__(self) -> None:
        self.previous: float | None = None

    def total(self, done: int, step: float, tol: float) -> int:
        """Steps in all: ``done`` plus the estimate of those left from ``step`` (the last step's size) and ``tol``."""
        if not step > tol:
            return done
        rate = 0.5 if self.previous is None or not step < self.previous else min(max(step / self.previous, 0.05), 0.9)
        self.previous = step
        return done + max(1, math.ceil(math.log(tol / step) / math.log(rate)))


class FitProgress:
    """One tqdm bar through the stages of a block-Laplace fit (Newton steps, item correction, the blocks' exact
    draws, the items' exact gradient, draws, NUTS check).

    The bar's description names the stage (``2/4: draws``); each stage restarts its count, total and time
    estimate, so the remaining time shown is the current stage's.
    """

    def __init__(self, bar, desc: str, stages: int) -> None:
        self.bar, self.desc, self.stages, self.index = bar, desc, stages, 0

    def stage(self, name: str, steps: NewtonSteps | None = None):
        """Start stage ``name``; returns its ``report(done, total)`` callback (``report(done, step, tol)`` with a
        :class:`NewtonSteps`, whose estimate sets the total)."""
        self.index += 1
        self.bar.reset(total=None)
        self.bar.set_description(f"{self.desc} {self.index}/{self.stages}: {name}", refresh=True)

        def report(done: int, total_or_step, tol: float | None = None) -> None:
            total = steps.total(done, float(total_or_step), float(tol)) if steps is not None else int(total_or_step)
            self.bar.total = max(total, done)
            self.bar.update(max(0, done - self.bar.n))

        return report


@contextlib.contextmanager
def fit_progress(enabled: bool, *, check_queries: int = CHECK_QUERIES, exact_item_queries: int = EXACT_ITEM_QUERIES,
                 exact_blocks: bool | None = None, desc: str = "block Laplace"):
    """A :class:`FitProgress` on stderr (where it is a terminal; tqdm's own rule), or None when not ``enabled``."""
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=desc, unit="step", leave=False, disable=None, mininterval=0.5)
    exact_blocks = EXACT_BLOCKS if exact_blocks is None else exact_blocks
    try:
        yield FitProgress(bar, desc, 3 + (check_queries > 0) + (exact_item_queries > 0) + bool(exact_blocks))
    finally:
        bar.close()


def block_laplace_draws(inputs, init: dict, *, ridge: float, bt_ridge: float, bt_weight: float, num_samples: int,
                        seed: int, report=None, check_queries: int = CHECK_QUERIES, devices=None,
                        item_sd: float | None = None, item_iterations: int = ITEM_ITERATIONS,
                        exact_item_queries: int = EXACT_ITEM_QUERIES, exact_blocks: bool | None = None):
    """Draws (:class:`rcp_jax.models.inference.Draws`, one "chain") of the joint model's block Laplace
    approximation, with the Newton solve's record and the NUTS check in ``info``.

    Args:
        inputs: :class:`rcp_jax.bayes.posterior.PosteriorInputs` of the joint model (``wins`` given).
        init: starting values ``w, tau, alpha, u, v`` (the MAP calibration of the BT MAP scores).
        ridge, bt_ridge, bt_weight, item_sd: the joint model's priors and BT weight (``item_sd=None``: the ridge's).
        num_samples, seed: the draws.
        report: a :class:`FitProgress` (a staged progress bar: Newton steps, item correction, draws, NUTS check),
            or None.
        check_queries: queries NUTS samples for the check (0: none).
        devices: the devices the query blocks are split over (default: all of ``jax.devices()``; one: no split).
        item_iterations: most steps of the items towards their Laplace-marginal mode (:data:`ITEM_ITERATIONS`; 1:
            the single linearised step).
        exact_item_queries: the step from there to the exact marginal's mode: with the exact block draws it comes
            from them on every query; without, HMC samples this many queries for it (:data:`EXACT_ITEM_QUERIES`).
            0: no step; needs ``item_iterations > 1``.
        exact_blocks: draw every query's block from its exact conditional posterior given the items (HMC,
            :func:`exact_block_draws`), moved with the items' Gaussian draws through the coupling; False: the
            per-query Gaussian (None: :data:`EXACT_BLOCKS`).
    """
    from rcp_jax.models import block_laplace, inference, item_score

    start = time.perf_counter()
    data = block_laplace.make_data(inputs.wins, inputs.n_docs, inputs.passes, inputs.trials, ridge=ridge,
                                   bt_ridge=bt_ridge, bt_weight=bt_weight, item_sd=item_sd)
    x0 = np.concatenate([np.asarray(init["w"]), np.log(np.asarray(init["tau"]))[:, None],
                         np.asarray(init["alpha"])[:, None]], axis=1)
    g0 = np.concatenate([np.asarray(init["u"]), np.asarray(init["v"])])
    try:
        newton = None if report is None else report.stage("Newton steps", NewtonSteps())
        fit = block_laplace.fit_block_laplace(data, x0, g0, progress=newton, devices=devices)
    except FloatingPointError as exc:
        from rcp_jax.errors import CalibrationError

        raise CalibrationError(f"{exc}; fit this collection with method 'svi' (mean-field) or 'nuts'") from None
    # the items' mean: quasi-Newton steps from the joint mode to their Laplace-marginal mode, the blocks re-solved at
    # each (item_iterations; 1: the single linearised step of the fifteenth session); the Gaussian is factored there
    if report is not None:
        report.stage("item correction", None)
    item_start = time.perf_counter()
    if item_iterations <= 1:
        shift = block_laplace.marginal_item_shift(fit, data, seed=seed)
        fit = dataclasses.replace(fit, g_shift=shift)
    else:
        g_mode = fit.g
        try:
            fit = block_laplace.marginal_item_mode(fit, data, iterations=item_iterations, seed=seed)
        except (FloatingPointError, np.linalg.LinAlgError) as exc:
            from rcp_jax.errors import CalibrationError

            raise CalibrationError(f"block Laplace, the items' marginal mode: {exc}; fit this collection with method "
                                   "'svi' (mean-field) or 'nuts'") from None
        shift = fit.g - g_mode
    item_s = time.perf_counter() - item_start
    # every query's block from its exact conditional posterior at these items (HMC); the items' exact gradient then
    # comes from the same draws, on every query
    blocks = None
    if EXACT_BLOCKS if exact_blocks is None else exact_blocks:
        blocks = exact_block_draws(fit, data, num_samples=num_samples, seed=seed, devices=devices,
                                   progress=None if report is None else
                                   report.stage(f"exact draws of {fit.n_queries} queries (HMC)", None))
    exact = None
    if exact_item_queries > 0 and item_iterations > 1:
        item_start = time.perf_counter()
        if report is not None:
            report.stage("items' exact gradient, " + (f"HMC on {min(exact_item_queries, fit.n_queries)} queries"
                                                       if blocks is None else "from every query's draws"), None)
        exact = exact_items(fit, data, queries=exact_item_queries, seed=seed,
                            blocks=None if blocks is None else blocks["chains_x"])
        fit = item_score.with_item_shift(fit, exact.pop("shift"), exact.pop("shift_cov"))
        shift = fit.g + fit.g_shift - g_mode
        item_s += time.perf_counter() - item_start
    raw = block_laplace.sample_block_laplace(fit, seed, num_samples, n_docs=inputs.n_docs,
                                             conditional=None if blocks is None else blocks["x"],
                                             progress=None if report is None else report.stage("draws", None))
    n, c = inputs.wins.shape[1], inputs.trials.shape[2]
    if not np.all(np.isfinite(raw["x"])):
        from rcp_jax.errors import CalibrationError

        raise CalibrationError("block Laplace: non-finite draws (a query block's precision is near singular); fit "
                               "this collection with method 'svi' (mean-field) or 'nuts'")
    info = {"num_chains": 1, "num_samples": num_samples, "seed": seed, "newton": fit.info,
            "item_shift": [float(v) for v in shift], "item_s": item_s, **({"exact_items": exact} if exact else {}),
            "fit_s": time.perf_counter() - start}
    if blocks is not None:
        conditional = blocks.pop("x")
        blocks.pop("chains_x")
        rows = blocks.pop("rhat_rows")
        info["exact_blocks"] = {**blocks, "rhat_queries": [str(inputs.query_ids[i]) for i in rows]}
    floored = np.flatnonzero(np.asarray(fit.x)[: fit.n_queries, n - 1] <= block_laplace.LOG_TAU_FLOOR + 1e-3)
    info["newton"] = {**fit.info, "tau_floor_queries": [str(inputs.query_ids[i]) for i in floored]}
    if len(floored):
        names = ", ".join(info["newton"]["tau_floor_queries"][:10]) + (" ..." if len(floored) > 10 else "")
        one = len(floored) == 1
        warnings.warn(f"block Laplace: the scale tau of {len(floored)} quer{'y' if one else 'ies'} ({names}) has no "
                      f"mode and stopped at the floor {np.exp(block_laplace.LOG_TAU_FLOOR):.0e}: "
                      f"{'its' if one else 'their'} rubric answers barely follow {'its' if one else 'their'} tournament "
                      f"order, so {'its' if one else 'their'} gains come out all alike; check the answers, or fit "
                      f"{'that query' if one else 'those queries'} with method 'nuts'", stacklevel=3)
    if not fit.info["converged"]:
        warnings.warn(f"block Laplace: Newton did not converge in {fit.info['iterations']} steps (largest step "
                      f"{fit.info['max_step']:.2g}); the Gaussian sits at a point short of the mode", stacklevel=3)
    if check_queries > 0:
        info["nuts_check"] = nuts_check(inputs, fit, data, n_queries=check_queries, seed=seed, bt_ridge=bt_ridge,
                                        bt_weight=bt_weight, conditional=None if blocks is None else conditional,
                                        progress=None if report is None else report.stage(
                                            f"NUTS check on {min(check_queries, inputs.wins.shape[0])} queries", None))
    conditional = None  # the exact block draws live on in raw["x"]; their unmoved copy is no longer needed
    info["wall_s"] = time.perf_counter() - start
    return inference.Draws(samples=block_laplace.samples_as_sites(raw, n, c), method="block_laplace", info=info)


def exact_block_draws(fit, data, *, num_samples: int, seed: int, devices=None, progress=None) -> dict:
    """Every query's block drawn from its exact conditional posterior given the items at ``fit.g``
    (:func:`rcp_jax.models.block_hmc.sample_blocks`, :data:`rcp_jax.models.block_hmc.BLOCK_CHAINS` chains of
    ``ceil(num_samples / chains)`` draws per query; its calls spread over ``devices``, default all), with the
    chains' record.

    Returns:
        ``x`` float32[num_samples, Q, M] (the chains' draws one chain after the other; popped by the caller),
        ``chains_x`` (the same draws as float32[chains, S, Q, M], for the items' exact gradient), ``max_rhat``
        (the largest per-query rank R-hat of a block coordinate over the queries), ``rhat_rows`` (the queries
        whose R-hat exceeds :data:`BLOCK_RHAT_MAX`, int list), ``min_accept`` (the lowest mean acceptance rate
        of a query), ``chains``, ``draws_per_chain`` and ``wall_s``.
    """
    from rcp_jax.bayes.diagnostics import rank_rhat
    from rcp_jax.models import block_hmc

    start = time.perf_counter()
    q = fit.n_queries
    chains = block_hmc.BLOCK_CHAINS
    per_chain = -(-num_samples // chains)
    out = block_hmc.sample_blocks(np.asarray(fit.x)[:q], np.asarray(fit.chol_local)[:q], fit.g, data,
                                  num_samples=per_chain, seed=seed + 7, devices=devices, progress=progress)
    xs = out["x"]  # [chains, S, Q, M]
    m = xs.shape[-1]
    rhat = np.full(q, np.nan)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        for lo in range(0, q, 100):  # a hundred queries' coordinates at a time: memory ~ draws x 15,000
            part = xs[:, :, lo : lo + 100].reshape(chains, per_chain, -1)
            rhat[lo : lo + 100] = np.nanmax(rank_rhat(part).reshape(-1, m), axis=1)
    x = xs.reshape(chains * per_chain, q, m)[:num_samples]  # a view: draw d is chain d // per_chain's
    max_rhat = float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan")
    return {"x": x, "chains_x": xs, "max_rhat": max_rhat,
            "rhat_rows": [int(i) for i in np.flatnonzero(rhat > BLOCK_RHAT_MAX)],
            "min_accept": float(out["accept"].min()), "chains": chains, "draws_per_chain": per_chain,
            "wall_s": time.perf_counter() - start}


def exact_items(fit, data, *, queries: int, seed: int, blocks=None) -> dict:
    """The items' step from their Laplace-marginal mode to the exact marginal's mode and its record: ``shift`` and
    ``shift_cov`` (popped by the caller), ``queries`` (how many were sampled), ``shift_sd`` (the step's SDs, float
    list), ``min_accept`` (the lowest HMC acceptance rate of a query; None from ``blocks``), ``max_rhat`` (rank
    R-hat of the sampled queries' summed item gradient, the quantity the step rests on, worst item) and ``wall_s``.

    With ``blocks`` (float[chains, S, Q, M], every query's exact block draws at ``fit.g``) the gradient is summed
    over every query from those draws (:func:`rcp_jax.models.item_score.correction_from_draws`); without, HMC
    samples up to ``queries`` of them (:func:`rcp_jax.models.item_score.item_correction`)."""
    from rcp_jax.bayes.diagnostics import rank_rhat
    from rcp_jax.models import item_score

    start = time.perf_counter()
    if blocks is None:
        out = item_score.item_correction(fit, data, queries=queries, seed=seed, curvature=fit.item_curvature)
        accept = float(np.min(out["exact"]["accept"]))
    else:
        out = item_score.correction_from_draws(fit, data, blocks, curvature=fit.item_curvature)
        accept = None
    summed = out["exact"]["chains"].sum(axis=2)  # [chains, S, G]: each draw's gradient summed over the queries
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = float(np.nanmax(rank_rhat(summed)))
    return {"shift": out["shift"], "shift_cov": out["shift_cov"], "queries": len(out["queries"]),
            "step": [float(v) for v in out["shift"]],
            "shift_sd": [float(v) for v in np.sqrt(np.diag(out["shift_cov"]))],
            "min_accept": accept, "max_rhat": rhat, "wall_s": time.perf_counter() - start}


def nuts_check(inputs, fit, data, *, n_queries: int, seed: int, bt_ridge: float, bt_weight: float,
               num_warmup: int = 400, num_samples: int = 400, ci_prob: float = 0.9, conditional=None,
               progress=None) -> dict:
    """Gain intervals of the block Laplace against NUTS on the exact conditional posterior of a few queries.

    With the items at their mode, each query's block is independent of the others; NUTS (2 chains) samples the
    exact conditional posterior of ``n_queries`` queries drawn with ``seed``, and the fit's conditional draws
    (``conditional`` float[D, Q, M], the batched HMC's, an independent sampler of the same posterior; None: the
    Gaussian's, an approximation of it) give the same intervals.

    Returns:
        ``queries`` (their ids), ``documents``, ``median_gap`` and ``p90_gap`` (|Laplace - NUTS| interval
        endpoints over the NUTS interval's width, over both ends of every document's ``ci_prob`` gain interval),
        ``max_rhat`` (of the NUTS gains) and ``wall_s``.
    """
    from rcp_jax.bayes.diagnostics import rank_rhat
    from rcp_jax.models import bayes, block_laplace, inference

    start = time.perf_counter()
    rng = np.random.default_rng([seed, 0xC4EC])
    q_all, n = inputs.wins.shape[0], inputs.wins.shape[1]
    pick = np.sort(rng.choice(q_all, size=min(n_queries, q_all), replace=False))
    c = inputs.trials.shape[2]
    u, v = fit.g[: c - 1], fit.g[c - 1 :]
    f32 = lambda a: jnp.asarray(np.asarray(a)[pick], jnp.float32)  # noqa: E731
    n_docs = jnp.asarray(inputs.n_docs[pick])
    kwargs = dict(wins=f32(inputs.wins), n_docs=n_docs, passes=f32(inputs.passes), trials=f32(inputs.trials),
                  u=jnp.asarray(u, jnp.float32), v=jnp.asarray(v, jnp.float32), bt_ridge=bt_ridge,
                  bt_weight=bt_weight, param="ability")
    x = np.asarray(fit.x)[pick]
    init = {"w": x[:, : n - 1], "tau": np.exp(x[:, n - 1]), "alpha": x[:, n]}
    draws = inference.run_nuts(block_laplace.conditional_model, kwargs, seed=seed, num_warmup=num_warmup,
                               num_samples=num_samples, num_chains=2, init_values=init, progress=progress)
    gamma, beta = (np.asarray(a) for a in block_laplace.item_parameters(jnp.asarray(u, jnp.float32), jnp.asarray(v, jnp.float32)))

    def gains(w, alpha):  # float[..., Qs, N] gains of contrasts w [..., Qs, N-1] and offsets alpha [..., Qs]
        ability = bayes.centred_from_contrasts(jnp.asarray(w), n_docs) + jnp.asarray(alpha)[..., None]
        return np.asarray(bayes.rcp_gain(ability, jnp.asarray(gamma), jnp.asarray(beta)))

    exact = gains(draws.samples["w"], draws.samples["alpha"])  # [chains, draws, Qs, N]
    sub = block_laplace.BlockLaplace(x=fit.x[pick], g=fit.g, chol_local=fit.chol_local[pick],
                                     coupling=fit.coupling[pick], chol_items=fit.chol_items)
    if conditional is None:
        approx_x = block_laplace.sample_block_laplace(sub, seed + 1, 2 * num_samples, items_fixed=True)["x"]
    else:
        approx_x = np.asarray(conditional)[:, pick]
    approx = gains(approx_x[..., : n - 1], approx_x[..., n])  # [draws, Qs, N]
    mask = np.arange(n)[None, :] < np.asarray(n_docs)[:, None]
    tail = (1 - ci_prob) / 2
    lo_e, hi_e = np.quantile(exact.reshape((-1,) + exact.shape[2:]), [tail, 1 - tail], axis=0)
    lo_a, hi_a = np.quantile(approx, [tail, 1 - tail], axis=0)
    width = np.maximum(hi_e - lo_e, 1e-12)
    gaps = np.concatenate([(np.abs(lo_a - lo_e) / width)[mask], (np.abs(hi_a - hi_e) / width)[mask]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = float(np.nanmax(rank_rhat(exact.reshape(exact.shape[:2] + (-1,))[..., mask.ravel()])))
    return {"queries": [str(inputs.query_ids[i]) for i in pick], "documents": int(mask.sum()),
            "median_gap": float(np.median(gaps)), "p90_gap": float(np.quantile(gaps, 0.9)), "max_rhat": rhat,
            "ci_prob": ci_prob, "wall_s": time.perf_counter() - start}


def block_diagnostics(info: dict) -> dict:
    """The block Laplace's entries of :attr:`rcp_jax.Posterior.diagnostics`: the Newton solve and the NUTS check."""
    out = {"newton_iterations": int(info["newton"]["iterations"]), "newton_converged": bool(info["newton"]["converged"])}
    if "tau_floor_queries" in info["newton"]:
        out["tau_floor_queries"] = len(info["newton"]["tau_floor_queries"])
    exact = info.get("exact_items")
    if exact:
        out.update(exact_item_queries=exact["queries"], exact_item_max_rhat=exact["max_rhat"])
        if exact.get("min_accept") is not None:
            out["exact_item_min_accept"] = exact["min_accept"]
    blocks = info.get("exact_blocks")
    if blocks:
        out.update(exact_block_max_rhat=blocks["max_rhat"], exact_block_rhat_queries=len(blocks["rhat_queries"]),
                   exact_block_min_accept=blocks["min_accept"])
    check = info.get("nuts_check")
    if check:
        out.update(check_median_gap=check["median_gap"], check_p90_gap=check["p90_gap"],
                   check_queries=len(check["queries"]), check_max_rhat=check["max_rhat"])
    return out


def block_problems(diag: dict) -> list[str]:
    """What the block Laplace's diagnostics warn about (empty when nothing)."""
    problems = []
    if diag.get("newton_converged") is False:
        problems.append(f"block Laplace: Newton stopped after {diag['newton_iterations']} steps short of the mode")
    rhat = diag.get("exact_item_max_rhat")
    if rhat is not None and np.isfinite(rhat) and rhat > EXACT_RHAT_MAX:
        problems.append(f"block Laplace: the HMC chains behind the items' exact gradient disagree (R-hat {rhat:.3f} > "
                        f"{EXACT_RHAT_MAX}); the items' mean may be off: compare with method 'nuts' on a subset")
    bad = diag.get("exact_block_rhat_queries")
    if bad:
        problems.append(f"block Laplace: the HMC chains of {bad} quer{'y' if bad == 1 else 'ies'} disagree (R-hat up "
                        f"to {diag['exact_block_max_rhat']:.3f} > {BLOCK_RHAT_MAX}; named in "
                        "draws.info['exact_blocks']['rhat_queries']): fit those queries with method 'nuts' to compare")
    gap = diag.get("check_median_gap")
    if gap is not None and np.isfinite(gap) and gap > CHECK_GAP_MAX:
        problems.append(f"block Laplace: its gain intervals differ from NUTS's on {diag['check_queries']} checked "
                        f"queries by {100 * gap:.0f}% of their width (median; more than {100 * CHECK_GAP_MAX:.0f}%): "
                        "fit those queries with method 'nuts' to compare")
    return problems

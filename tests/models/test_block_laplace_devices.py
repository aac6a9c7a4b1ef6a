"""The block Laplace with its query blocks split over several devices equals the single-device fit.

Two CPU devices (``--xla_force_host_platform_device_count=2``) in a fresh interpreter, as the flag must be set
before JAX starts; an odd number of queries, so the split needs a dummy query."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_TWO_DEVICES = textwrap.dedent(
    """
    import json, warnings
    import jax, jax.numpy as jnp, numpy as np
    from benchmarks.fixtures.simulated_collections import collection_tables
    from rcp_jax.bayes import large
    from rcp_jax.bayes.posterior import prepare_inputs
    from rcp_jax.models import bayes, block_laplace, irt, simulate

    assert len(jax.devices()) == 2, jax.devices()
    sim = simulate.simulate_judgements(3, np.full(3, 12))  # 3 queries: one dummy pads them to 2 x 2
    inputs = prepare_inputs(*collection_tables(sim), joint=True)
    cal = irt.fit_2pl_calibration(irt.calibration_cells(inputs.theta, inputs.passes, inputs.trials))
    u, v = bayes.item_contrasts(cal.u, cal.v)
    z0 = np.asarray(bayes.contrasts_from_centred(jnp.asarray(inputs.theta, jnp.float32), jnp.asarray(inputs.n_docs)))
    init = {"w": z0 * np.asarray(cal.tau)[:, None], "tau": np.asarray(cal.tau), "alpha": np.asarray(cal.alpha),
            "u": u, "v": v}
    # the items' exact-gradient step is Monte Carlo (HMC), so float32 rounding of the blocks changes its draws: left
    # out here, where the deterministic stages must agree (it runs on the gathered sampled queries, one device); so
    # are the blocks' exact draws (HMC), compared below on their own
    kw = dict(ridge=irt.DEFAULT_RIDGE, bt_ridge=irt.DEFAULT_RIDGE, bt_weight=1.0, num_samples=60, seed=5,
              exact_item_queries=0, exact_blocks=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        split = large.block_laplace_draws(inputs, init, check_queries=1, **kw)  # the NUTS check on 2 devices too
        single = large.block_laplace_draws(inputs, init, check_queries=0, devices=jax.devices()[:1], **kw)

    def gains(s):
        n = jnp.asarray(inputs.n_docs)
        ability = bayes.centred_from_contrasts(jnp.asarray(s["w"][0]), n) + jnp.asarray(s["alpha"][0])[..., None]
        g = jax.vmap(bayes.rcp_gain)(ability, jnp.asarray(s["gamma"][0]), jnp.asarray(s["beta"][0]))
        return np.asarray(g)

    data = block_laplace.make_data(inputs.wins, inputs.n_docs, inputs.passes, inputs.trials)
    x0 = np.concatenate([init["w"], np.log(init["tau"])[:, None], init["alpha"][:, None]], axis=1)
    fit = block_laplace.fit_block_laplace(data, x0, np.concatenate([u, v]))
    diff = {k: float(np.max(np.abs(split.samples[k] - single.samples[k]))) for k in split.samples}
    # the blocks' exact draws, one call per device at a time (one query per call): the same draws as on one device
    from rcp_jax.models import block_hmc
    sub = block_laplace.make_data(inputs.wins, inputs.n_docs, inputs.passes, inputs.trials)
    hmc = [block_hmc.sample_blocks(fit.x[:3], fit.chol_local[:3], fit.g, sub, num_samples=50, seed=2, chains=1,
                                   rows_together=1, devices=d) for d in (jax.devices(), jax.devices()[:1])]
    print(json.dumps({
        "draws": diff, "gains": float(np.max(np.abs(gains(split.samples) - gains(single.samples)))),
        "gain_sd": float(gains(single.samples).std(0).mean()),
        "shift": float(np.max(np.abs(np.subtract(split.info["item_shift"], single.info["item_shift"])))),
        "objective": [split.info["newton"]["objective"], single.info["newton"]["objective"]],
        "devices": [split.info["newton"]["devices"], single.info["newton"]["devices"]],
        "check": split.info["nuts_check"],
        "rows": fit.x.shape[0], "queries": fit.n_queries,
        "hmc": float(np.max(np.abs(hmc[0]["x"] - hmc[1]["x"]))), "hmc_sd": float(hmc[1]["x"].std(1).mean()),
        "shardings": [(list(a.sharding.spec), len(a.sharding.device_set))
                      for a in (fit.x, fit.chol_local, fit.coupling)],
    }))
    """
)


@pytest.mark.slow  # two fits compiled for two layouts and a NUTS check: ~40 s on 2 shared cores
def test_query_blocks_split_over_two_devices_equal_the_single_device_fit():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _TWO_DEVICES], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == [2, 1]
    # the per-query arrays really are split: 3 queries and a dummy, two per device
    assert out["rows"] == 4 and out["queries"] == 3
    assert all(spec == ["queries"] and n == 2 for spec, n in out["shardings"]), out["shardings"]
    # same mode, same draws from the same seed, same gains, same items' correction: float32 rounding apart
    a, b = out["objective"]
    assert abs(a - b) < 1e-5 * abs(b)
    assert max(out["draws"].values()) < 1e-4, out["draws"]
    assert out["gains"] < 1e-5 and out["gain_sd"] > 1e-2
    assert out["shift"] < 1e-5
    assert out["hmc"] < 1e-5 and out["hmc_sd"] > 0.05, (out["hmc"], out["hmc_sd"])
    # the NUTS check ran with the blocks split
    check = out["check"]
    assert len(check["queries"]) == 1 and 0 <= check["median_gap"] < 0.5 and check["max_rhat"] < 1.2

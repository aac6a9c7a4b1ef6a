"""Small simulated collections in the block Laplace's layout (tests of the joint model's large-scale posterior)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from rcp_jax.models import bayes, block_laplace, irt, simulate

from benchmarks.fixtures.simulated_collections import collection_tables
from rcp_jax.bayes.posterior import prepare_inputs


def collection(queries: int, docs: int, seed: int = 1):
    """(padded inputs, Data, starting blocks x0 float[Q, N + 1], starting items g0 float[2 (C - 1)])."""
    sim = simulate.simulate_judgements(seed, np.full(queries, docs))
    inputs = prepare_inputs(*collection_tables(sim), joint=True)
    data = block_laplace.make_data(inputs.wins, inputs.n_docs, inputs.passes, inputs.trials)
    cal = irt.fit_2pl_calibration(irt.calibration_cells(inputs.theta, inputs.passes, inputs.trials))
    u, v = bayes.item_contrasts(cal.u, cal.v)
    z0 = np.asarray(bayes.contrasts_from_centred(jnp.asarray(inputs.theta, jnp.float32), jnp.asarray(inputs.n_docs)))
    x0 = np.concatenate([z0 * np.asarray(cal.tau)[:, None], np.log(np.asarray(cal.tau))[:, None],
                         np.asarray(cal.alpha)[:, None]], axis=1).astype(np.float32)
    return inputs, data, x0, np.concatenate([u, v])

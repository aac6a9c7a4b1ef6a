"""Shared simulated collections and posteriors of the Bayesian tests.

NUTS programs are compiled once per model, settings and array shapes (``rcp_jax.models.inference`` caches
them for the process), so the fixtures below fix a few shapes that several tests share:

* ``collection`` - 50 queries x 60 documents (the size the issue asks NUTS to handle without
  divergences and with R-hat < 1.01), fitted once with the frozen-BT model;
* ``noisy`` - 20 queries x 30 documents with a noisy, sparse tournament, fitted with the frozen and
  the joint model (the default of ``fit_posterior``, so fitted without naming a model; the notebook's
  small mode uses the same sizes and settings), and with the frozen model given the exact BT scores (``frozen_exact``: its own generative assumption; same shapes, so
  the compiled frozen program is reused).
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from benchmarks.fixtures.simulated_collections import collection_tables, exact_bt_scores, simulated_run, true_gains
from rcp_jax.models import simulate

#: NUTS settings of the shared fits (chains vectorised): the 50 x 60 collection uses the library defaults
#: (4 chains, 1,000 warmup + 500 draws); the noisy collection (and the notebook's small mode) 2 chains of
#: 200 + 200. Two chains instead of four cut those three fits by ~30% of CPU; seeds 1-3 gave the same
#: coverage (joint 0.903-0.908, frozen on exact scores 0.880-0.905, frozen on noisy scores 0.30-0.33) and
#: a max R-hat of 1.020-1.029 (with 4 chains, seed 1: 0.903, 0.905, 0.303, 1.022).
WARMUP, SAMPLES, CHAINS = 200, 200, 2
#: The noisy collection (also the notebook's small mode): judge noise and tournament placements.
NOISY = dict(queries=20, docs=30, noise=1.5, placements=8.0, seed=3)


@pytest.fixture(scope="session")
def collection():
    sim = simulate.simulate_judgements(7, [60] * 50)
    windows, answers = collection_tables(sim)
    return sim, windows, answers


@pytest.fixture(scope="session")
def frozen_posterior(collection):
    from rcp_jax.bayes import fit_posterior

    _, windows, answers = collection
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit_posterior(windows, answers, model="frozen", method="nuts", seed=0)
    post.settings["warnings"] = [str(w.message) for w in caught]
    return post


@pytest.fixture(scope="session")
def noisy():
    sim = simulate.simulate_judgements(
        NOISY["seed"], [NOISY["docs"]] * NOISY["queries"], noise=NOISY["noise"],
        tournament_placements=NOISY["placements"],
    )
    windows, answers = collection_tables(sim)
    return sim, windows, answers, true_gains(sim)


@pytest.fixture(scope="session")
def noisy_posteriors(noisy):
    from rcp_jax.bayes import fit_posterior

    sim, windows, answers, _ = noisy
    out = {}
    # "joint" is fitted as the default (no model named): the default must be the joint model
    for name, model, tournament in (("frozen", "frozen", windows), ("joint", None, windows),
                                    ("frozen_exact", "frozen", exact_bt_scores(sim))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out[name] = fit_posterior(tournament, answers, model=model, num_warmup=WARMUP, num_samples=SAMPLES,
                                      num_chains=CHAINS, seed=1)
        # what each fit warned, as "Category: message" (the frozen model's note is checked by a test)
        out[name].settings["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    return out


@pytest.fixture(scope="session")
def run_table(collection) -> pd.DataFrame:
    sim, _, _ = collection
    return simulated_run(sim, [0.4, 0.8, 1.0, 1.1, 3.0], seed=11, depth=30)


#: The session fixtures that cost NUTS fits (the 50 x 60 collection; three fits of the noisy one).
COSTLY_FIXTURES = ("frozen_posterior", "noisy_posteriors")


def pytest_collection_modifyitems(config, items) -> None:
    """Every test that takes a NUTS-fitted fixture is ``slow``: ``-m "not slow"`` then skips the fits themselves,
    not only the tests that wait longest for them."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in COSTLY_FIXTURES):
            item.add_marker(pytest.mark.slow)

"""Fixtures of the judging tests: a small synthetic dataset, windows over it, a fake key."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.fixtures.fake_server import FakeOpenAIServer  # noqa: E402
from rcp_jax.judging import SimulatedJudge, synthetic_dataset  # noqa: E402
from tests.helpers.judging_windows import make_windows  # noqa: E402


@pytest.fixture(scope="session")
def dataset():
    """(queries, documents, latent) of 3 queries x 12 documents."""
    return synthetic_dataset(3, 12, seed=7, doc_chars=300)


@pytest.fixture()
def windows(dataset):
    return make_windows(dataset[1])


@pytest.fixture()
def sim(dataset):
    return SimulatedJudge(dataset[2], seed=11)


@pytest.fixture()
def served(dataset, sim):
    """A factory of started fake OpenAI-compatible servers (stopped at teardown); ``judge=`` overrides
    the simulated judge, other keywords go to :class:`benchmarks.fixtures.fake_server.FakeOpenAIServer`."""
    queries, documents, _ = dataset
    started = []

    def make(**kw):
        server = FakeOpenAIServer(kw.pop("judge", sim), queries=queries, documents=documents, **kw).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()

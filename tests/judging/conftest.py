"""Fixtures of the judging tests: a small synthetic dataset, windows over it, a fake key."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.fixtures.fake_server import FakeOpenAIServer  # noqa: E402
from rcp_jax.judging import SimulatedJudge, Window, synthetic_dataset  # noqa: E402

def make_windows(documents: dict[str, dict[str, str]], *, per_query: int = 3, size: int = 5) -> list[Window]:
    """``per_query`` tournament and ``per_query`` rubric windows of ``size`` documents for each query."""
    out = []
    for qid, docs in documents.items():
        ids = sorted(docs)
        for s in range(per_query):
            chunk = tuple(ids[(s * size + k) % len(ids)] for k in range(size))
            out.append(Window(qid, "tournament", "round1", s, chunk))
            out.append(Window(qid, "rubric", "balanced", s, chunk[::-1]))
    return out


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

"""Budgeted judging with each round as one batch: the same store, rounds and decisions as online judging with the
same round size, against the same deterministic fake judge (the fake server's chat endpoint online, the in-process
batch backend answering with the same simulated judge)."""

from __future__ import annotations

from benchmarks.fixtures.fake_server import FakeOpenAIServer
from rcp_jax.budget import BudgetSettings, judge_budgeted
from rcp_jax.budget.loop import BATCH_ROUND_SHARE, ROUND_SHARE
from rcp_jax.budget.simulated import simulated_benchmark
from rcp_jax.judging import LiteLLMJudge
from tests.helpers.memory_batches import MemoryBatches
from tests.helpers.store_records import comparable_records

MODEL = "openai/fake-judge"


def _comparable(folder) -> list[dict]:
    return comparable_records(folder, without_cost=True)


def _judge(url: str) -> LiteLLMJudge:
    return LiteLLMJudge(MODEL, api_base=url, api_key="sk-test", structured_output="off", backoff_base=0.01)


def test_budgeted_rounds_as_batches_equal_the_online_rounds(tmp_path):
    sim = simulated_benchmark(3, n_queries=3, pool=8, levels=(0.4, 2.5))
    col = sim.collection
    settings = BudgetSettings(round_calls=4, n_draws=64, n_bootstrap=300, stop_when_decided=False)

    def server() -> FakeOpenAIServer:
        return FakeOpenAIServer(sim.judge, queries=col.queries, documents=col.documents)

    with server() as online_server:
        online = judge_budgeted(col, sim.runs, judge=_judge(online_server.url), store=tmp_path / "online", budget=22,
                                settings=settings, concurrency=1)
    backend = MemoryBatches(server())
    batched = judge_budgeted(col, sim.runs, judge=_judge("http://127.0.0.1:9/v1"), store=tmp_path / "batch",
                             budget=22, settings=settings, batches=backend, batch_poll=0)
    assert _comparable(tmp_path / "online") == _comparable(tmp_path / "batch")
    assert [r.calls for r in online.rounds] == [r.calls for r in batched.rounds]
    assert online.decisions.pairs.equals(batched.decisions.pairs)
    # one batch for the seed and one per round that asked something (no answer here needed a re-ask)
    asked = sum(1 for r in batched.rounds if r.windows > 0)
    assert backend.created == 1 + asked
    names = sorted({b.name for b in backend.batches.values()})
    assert names[0] == "budget_r001" and "budget_seed" in names

    # resuming asks nothing and submits no batch
    again = judge_budgeted(col, sim.runs, judge=_judge("http://127.0.0.1:9/v1"), store=tmp_path / "batch",
                           budget=22, settings=settings, batches=backend, batch_poll=0)
    assert again.paid == 0 and backend.created == 1 + asked


def test_batch_rounds_default_to_the_larger_share(tmp_path):
    import math

    from rcp_jax.budget import full_protocol_calls

    sim = simulated_benchmark(3, n_queries=3, pool=8, levels=(0.4, 2.5))
    col = sim.collection
    full = full_protocol_calls(col.pools)
    settings = BudgetSettings(n_draws=64, n_bootstrap=300, stop_when_decided=False)
    sizes = {}
    for name, share, backend in (("online", ROUND_SHARE, None),
                                 ("batch", BATCH_ROUND_SHARE,
                                  MemoryBatches(FakeOpenAIServer(sim.judge, queries=col.queries,
                                                                 documents=col.documents)))):
        with FakeOpenAIServer(sim.judge, queries=col.queries, documents=col.documents) as server:
            res = judge_budgeted(col, sim.runs, judge=_judge(server.url), store=tmp_path / name, budget=0.6,
                                 settings=settings, batches=backend, batch_poll=0)
        sizes[name] = res.rounds[1].calls - res.rounds[0].calls
        assert sizes[name] == max(len(col.pools), math.ceil(share * full))
    assert sizes["batch"] > sizes["online"]

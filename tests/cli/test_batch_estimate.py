"""`rcp-jax judge --estimate --batch`: the cost at litellm's batch prices (checked against litellm.model_cost by hand),
both costs shown, the number of sequential batches the protocol needs, and the fallback for a model without batch
prices. In process; nothing is called."""

from __future__ import annotations

import json
import os
import warnings

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from rcp_jax.judging import LiteLLMJudge, Window, estimate_cost

from rcp_jax import schedule as S
from rcp_jax.cli import main
from rcp_jax.cli._batch import batch_phases

HOSTED = "openai/gpt-4o-mini-2024-07-18"


def _estimate(capsys, demo_tiny, tmp_path, *extra):
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(tmp_path / "never"), "--estimate", *extra])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert not (tmp_path / "never").exists()
    return captured.out


def test_batch_estimate_is_the_tokens_at_litellms_batch_prices(demo_tiny, tmp_path, capsys):
    est = json.loads(_estimate(capsys, demo_tiny, tmp_path, "--model", HOSTED, "--batch", "--json"))
    prices = litellm.model_cost[HOSTED.split("/", 1)[1]]
    batch = (est["input_tokens"] * prices["input_cost_per_token_batches"]
             + est["output_tokens"] * prices["output_cost_per_token_batches"])
    online = est["input_tokens"] * prices["input_cost_per_token"] + est["output_tokens"] * prices["output_cost_per_token"]
    assert est["input_tokens"] > 0 and est["output_tokens"] > 0
    assert est["batch_cost_usd"] == pytest.approx(batch, rel=1e-12)
    assert est["cost_usd"] == pytest.approx(online, rel=1e-12)
    assert est["batch_cost_usd"] < est["cost_usd"]
    # the demo cut: three queries of 8 documents; each phase one batch across all of them
    counts = S.schedule_counts(8)
    expected = [("round1", 3 * 2 * counts.round1), ("round2", 3 * 2 * counts.round2)]
    expected += [(f"round3_b{k + 1}", 3 * n) for k, n in enumerate(counts.round3_batches)]
    expected += [("rubric_balanced", 3 * counts.rubric_balanced), ("rubric_stratified", 3 * counts.rubric_stratified)]
    assert [(p["phase"], p["calls"]) for p in est["batch_phases"]] == expected
    assert est["sequential_batches"] == 2 + len(counts.round3_batches) + 2
    assert sum(p["calls"] for p in est["batch_phases"]) == est["calls"]
    text = _estimate(capsys, demo_tiny, tmp_path, "--model", HOSTED, "--batch")
    assert f"${est['cost_usd']:,.2f} online, ${est['batch_cost_usd']:,.2f} at batch prices" in text
    assert f"as batches: {est['sequential_batches']} sequential batches" in text and "re-asks" in text


def test_without_batch_prices_the_estimate_says_so(demo_tiny, tmp_path, capsys):
    est = json.loads(_estimate(capsys, demo_tiny, tmp_path, "--model", "openai/no-such-model", "--batch", "--json",
                               "--input-cost-per-token", "1e-6", "--output-cost-per-token", "2e-6"))
    assert est["batch_cost_usd"] is None
    assert est["cost_usd"] == pytest.approx(est["input_tokens"] * 1e-6 + est["output_tokens"] * 2e-6)
    assert any("no batch price for openai/no-such-model" in n and "online prices" in n for n in est["notes"])
    plain = json.loads(_estimate(capsys, demo_tiny, tmp_path, "--model", HOSTED, "--json"))
    assert plain["batch_cost_usd"] is not None  # both costs are given whenever both are known


def test_batch_phases_take_the_longest_round3_across_queries():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small, large = S.schedule_counts(8), S.schedule_counts(100)
    phases = dict(batch_phases([small, large]))
    assert len(phases) == 2 + max(len(small.round3_batches), len(large.round3_batches)) + 2 == 11
    assert phases["round3_b1"] == small.round3_batches[0] + large.round3_batches[0]
    assert phases["round3_b7"] == large.round3_batches[6]
    assert phases["round1"] == 2 * (small.round1 + large.round1)


def test_the_python_estimate_gives_the_batch_cost(dataset):
    queries, documents, _ = dataset
    q = next(iter(documents))
    windows = [Window(q, "tournament", "round1", 0, tuple(sorted(documents[q]))[:5])]
    est = estimate_cost(windows, judge=LiteLLMJudge(HOSTED), documents=documents, queries=queries)
    prices = litellm.model_cost[HOSTED.split("/", 1)[1]]
    assert est.batch_cost_usd == pytest.approx(est.input_tokens * prices["input_cost_per_token_batches"]
                                               + est.output_tokens * prices["output_cost_per_token_batches"])
    assert "at batch prices" in est.summary()
    own = LiteLLMJudge(HOSTED, input_cost_per_token=1e-6, output_cost_per_token=1e-6)
    assert estimate_cost(windows, judge=own, documents=documents, queries=queries).batch_cost_usd is None


@pytest.fixture()
def dataset():
    from rcp_jax.judging import synthetic_dataset

    return synthetic_dataset(2, 8, seed=3, doc_chars=200)

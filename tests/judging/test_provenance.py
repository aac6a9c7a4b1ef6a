"""Pinned judges and prompt caching: the served model and fingerprint kept per record (over real HTTP against the
fake server, switched mid-store), the floating-alias rule, and cached prompt tokens priced at the cached rate."""

from __future__ import annotations

import json
from types import SimpleNamespace

import litellm
import pytest
from rcp_jax.judging import LiteLLMJudge, judge_windows_sync, read_judgements
from rcp_jax.judging.store.provenance import serving
from rcp_jax.judging.store.records import Judgement, Usage
from rcp_jax.judging.transport.client import cached_prompt_tokens
from rcp_jax.judging.transport.pinning import (
    floating_alias,
    floating_note,
    pinned_snapshots,
)

MODEL = "openai/fake-judge"


def judge_for(server, **kw):
    return LiteLLMJudge(kw.pop("model", MODEL), api_base=server.url, api_key="sk-test", backoff_base=0.001,
                        backoff_max=0.01, **kw)


def test_the_served_model_and_fingerprint_are_kept_and_a_mid_store_switch_is_counted(tmp_path, dataset, windows,
                                                                                       served):
    queries, documents, _ = dataset
    server = served(served_model="fake-judge-2024-07-18", system_fingerprint="fp_a")
    first, rest = windows[:8], windows[8:]
    judge_windows_sync(first, judge=judge_for(server), store=tmp_path, documents=documents, queries=queries)
    server.served_model, server.system_fingerprint = "fake-judge-2025-01-31", "fp_b"  # the alias moved
    judge_windows_sync(rest, judge=judge_for(server), store=tmp_path, documents=documents, queries=queries)
    stored = read_judgements(tmp_path, "tournament") + read_judgements(tmp_path, "rubric")
    assert {r.family.model for r in stored} == {MODEL}  # the family names the requested model string
    by_window = {(r.window.stage, r.window.query_id, r.window.sequence): r for r in stored}
    for w in first:
        assert by_window[(w.stage, w.query_id, w.sequence)].served_model == "fake-judge-2024-07-18"
        assert by_window[(w.stage, w.query_id, w.sequence)].system_fingerprint == "fp_a"
    for w in rest:
        assert by_window[(w.stage, w.query_id, w.sequence)].served_model == "fake-judge-2025-01-31"
    fams = {f.stage: f for f in serving(stored)}
    n_first = {s: sum(w.stage == s for w in first) for s in ("tournament", "rubric")}
    n_rest = {s: sum(w.stage == s for w in rest) for s in ("tournament", "rubric")}
    for stage in ("tournament", "rubric"):
        assert fams[stage].served == {"fake-judge-2024-07-18": n_first[stage], "fake-judge-2025-01-31": n_rest[stage]}
        assert fams[stage].fingerprints == {"fp_a": n_first[stage], "fp_b": n_rest[stage]}
        assert fams[stage].changed and "'fake-judge-2024-07-18' " in fams[stage].describe()
    line = (tmp_path / "tournament.jsonl").read_text().splitlines()[0]
    assert json.loads(line)["served_model"] == "fake-judge-2024-07-18"


def test_a_reply_without_model_fields_and_old_records_keep_their_exact_form(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()  # echoes the request's model, gives no fingerprint
    judge_windows_sync(windows[:2], judge=judge_for(server), store=tmp_path, documents=documents, queries=queries)
    record = read_judgements(tmp_path, "tournament")[0]
    assert record.served_model == "fake-judge" and record.system_fingerprint is None
    # a record as written before these fields existed reads back unchanged and writes back byte for byte
    old = record.to_dict()
    del old["served_model"]
    again = Judgement.from_dict(old)
    assert again.served_model is None and again.system_fingerprint is None
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(old, sort_keys=True)
    assert "cached_tokens" not in again.to_dict()["usage"]
    assert [f.served for f in serving([again])] == [{None: 1}] and not serving([again])[0].changed


def test_only_valid_answers_count_once_per_window(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(served_model="m-2024-01-01")
    judge_windows_sync(windows[:4], judge=judge_for(server), store=tmp_path, documents=documents, queries=queries)
    stored = read_judgements(tmp_path, "tournament")
    invalid = Judgement.from_dict({**stored[0].to_dict(), "valid": False, "served_model": "other-2025-01-01"})
    duplicate = Judgement.from_dict({**stored[0].to_dict(), "served_model": "other-2025-01-01"})
    fam = serving([invalid, *stored, duplicate])[0]
    assert fam.served == {"m-2024-01-01": len(stored)}


@pytest.mark.parametrize("model, api_base, floats", [
    ("openai/gpt-4o-mini", None, True),
    ("gpt-4o-mini", None, True),
    ("anthropic/claude-3-5-sonnet-latest", None, True),
    ("anthropic/claude-sonnet-4-5", None, True),
    ("mistral/mistral-large-latest", None, True),
    ("openai/gpt-4o-mini-2024-07-18", None, False),
    ("anthropic/claude-3-5-sonnet-20241022", None, False),
    ("gpt-4-0613", None, False),
    ("mistral/mistral-large-2411", None, False),
    ("gemini/gemini-1.5-pro-002", None, False),
    ("bedrock/amazon.nova-pro-v1:0", None, False),
    ("hosted_vllm/Qwen/Qwen3-32B", None, False),
    ("ollama_chat/llama3.1", None, False),
    ("azure/my-deployment", None, False),
    ("openai/my-model", "http://gpu1:8000/v1", False),  # the user's own server
    ("simulated", None, False),
])
def test_floating_alias_rule(model, api_base, floats):
    assert (floating_alias(model, api_base=api_base) is not None) is floats


def test_the_floating_note_names_a_dated_snapshot_from_the_cost_map():
    known = ["gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-mini-audio-preview", "gpt-4o-2024-08-06"]
    assert pinned_snapshots("openai/gpt-4o-mini", known) == ["gpt-4o-mini-2024-07-18"]
    note = floating_note("openai/gpt-4o-mini", known=known)
    assert "--model openai/gpt-4o-mini-2024-07-18" in note and "rcp-jax fit" in note
    judge = LiteLLMJudge("openai/gpt-4o-mini")
    assert "gpt-4o-mini-2024-07-18" in judge.floating_alias_note()
    assert LiteLLMJudge("openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1").floating_alias_note() is None
    assert LiteLLMJudge("openai/gpt-4o-mini-2024-07-18").floating_alias_note() is None


# --------------------------------------------------------------------------------------------------
# cached prompt tokens
# --------------------------------------------------------------------------------------------------
def _reply(usage):
    return SimpleNamespace(model="gpt-4o-mini-2024-07-18", usage=usage, _hidden_params={})


def test_cached_prompt_tokens_are_priced_at_the_cached_rate():
    """A fake OpenAI usage block: 1000 prompt tokens, 600 of them cached, 100 completion tokens; the price is
    400 at the input rate + 600 at ``cache_read_input_token_cost`` + 100 at the output rate of litellm's map."""
    rates = litellm.model_cost["gpt-4o-mini-2024-07-18"]
    assert rates["cache_read_input_token_cost"] < rates["input_cost_per_token"]  # the test means something
    judge = LiteLLMJudge("openai/gpt-4o-mini-2024-07-18")
    usage = judge._usage(_reply(SimpleNamespace(prompt_tokens=1000, completion_tokens=100,
                                                prompt_tokens_details=SimpleNamespace(cached_tokens=600))))
    expected = (400 * rates["input_cost_per_token"] + 600 * rates["cache_read_input_token_cost"]
                + 100 * rates["output_cost_per_token"])
    assert usage == Usage(1000, 100, pytest.approx(expected, rel=1e-12), 600)
    uncached = judge._usage(_reply(SimpleNamespace(prompt_tokens=1000, completion_tokens=100)))
    assert uncached.cached_tokens == 0
    assert uncached.cost_usd == pytest.approx(1000 * rates["input_cost_per_token"] + 100 * rates["output_cost_per_token"])
    assert usage.cost_usd < uncached.cost_usd
    # Anthropic's field through litellm (a plain mapping here), and custom prices (no cached rate: input rate)
    assert cached_prompt_tokens({"prompt_tokens": 900, "cache_read_input_tokens": 512}) == 512
    assert cached_prompt_tokens({"prompt_tokens_details": {"cached_tokens": None}}) == 0
    own = LiteLLMJudge("openai/x", input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    priced = own._usage(_reply(SimpleNamespace(prompt_tokens=10, completion_tokens=5, cache_read_input_tokens=4)))
    assert priced == Usage(10, 5, pytest.approx(10e-6 + 10e-6), 4)


def test_cached_tokens_reach_the_record_and_the_ledger_over_http(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served(cached_tokens=64)
    judge = judge_for(server)
    judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries)
    stored = read_judgements(tmp_path, "tournament") + read_judgements(tmp_path, "rubric")
    assert all(r.usage.cached_tokens == 64 for r in stored)
    assert judge.ledger.cached_tokens == 64 * len(stored) == sum(r.usage.cached_tokens for r in stored)
    assert Usage.from_dict(stored[0].usage.to_dict()) == stored[0].usage


def test_a_priced_model_over_http_charges_cached_tokens_at_the_cached_rate(tmp_path, dataset, windows, served):
    """The whole litellm path (its response object and cost): a hosted model's name against the fake server, which
    reports 64 cached prompt tokens per reply; each record's cost is the hand computation from litellm's map."""
    queries, documents, _ = dataset
    server = served(cached_tokens=64, served_model="gpt-4o-mini-2024-07-18")
    judge = judge_for(server, model="openai/gpt-4o-mini-2024-07-18")
    judge_windows_sync(windows[:4], judge=judge, store=tmp_path, documents=documents, queries=queries)
    rates = litellm.model_cost["gpt-4o-mini-2024-07-18"]
    stored = read_judgements(tmp_path, "tournament") + read_judgements(tmp_path, "rubric")
    for r in stored:
        u = r.usage
        assert u.cached_tokens == 64 and r.served_model == "gpt-4o-mini-2024-07-18"
        assert u.cost_usd == pytest.approx((u.prompt_tokens - 64) * rates["input_cost_per_token"]
                                           + 64 * rates["cache_read_input_token_cost"]
                                           + u.completion_tokens * rates["output_cost_per_token"], rel=1e-9)
    assert judge.ledger.cost_usd == pytest.approx(sum(r.usage.cost_usd for r in stored))

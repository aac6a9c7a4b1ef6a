"""Calls spread over worker processes (``judge_windows(..., processes=N)`` / :class:`ProcessJudge`):
the same records, exactly once each, the same families, usage and cost in the ledger, the same
errors, and no key leaked on the way."""

from __future__ import annotations

import logging
import pickle
from collections import Counter

import pytest

from rcp_jax.judging import (
    JudgeAuthError,
    JudgeInputError,
    LiteLLMJudge,
    ProcessJudge,
    SimulatedJudge,
    judge_windows_sync,
    read_judgements,
)

MODEL = "openai/fake-judge"
FAKE_KEY = "sk-test-SECRET456-do-not-leak-2b8e1d"


def judge_for(server, **kw):
    return LiteLLMJudge(MODEL, api_base=server.url, api_key=FAKE_KEY, backoff_base=0.001, backoff_max=0.01, **kw)


def records(folder):
    return read_judgements(folder, "tournament") + read_judgements(folder, "rubric")


def answers(judgements):
    return {(j.record_id, j.window.stage): (j.scores, j.criteria, j.attempts) for j in judgements}


def test_workers_give_exactly_one_valid_record_per_window_and_the_same_answers(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    kw = dict(documents=documents, queries=queries, concurrency=5)
    # malformed answers make windows re-asked, so attempts go through the workers too
    here = SimulatedJudge(latent, seed=11, malformed_rate=0.3)
    there = SimulatedJudge(latent, seed=11, malformed_rate=0.3)
    local = judge_windows_sync(windows, judge=here, store=tmp_path / "local", **kw)
    out = judge_windows_sync(windows, judge=there, store=tmp_path / "procs", processes=2, **kw)
    assert answers(out) == answers(local)
    stored = records(tmp_path / "procs")
    valid = Counter(r.record_id for r in stored if r.valid)
    assert set(valid) == {j.record_id for j in out} and set(valid.values()) == {1}
    assert Counter((r.record_id, r.attempts) for r in stored).most_common(1)[0][1] == 1  # no attempt twice
    assert len(stored) == len(records(tmp_path / "local"))
    # the caller's judge has the workers' ledger
    assert there.ledger == here.ledger
    assert there.ledger.calls == len(stored)
    # running again asks nothing (and starts no worker)
    again = judge_windows_sync(windows, judge=there, store=tmp_path / "procs", processes=2, **kw)
    assert answers(again) == answers(out) and there.ledger.calls == len(stored)


def test_a_process_judge_has_the_inner_family_and_serves_several_runs(tmp_path, dataset, windows, sim):
    queries, documents, _ = dataset
    with ProcessJudge(sim, processes=2) as judge:
        assert judge.started
        for stage in ("tournament", "rubric", "lists"):
            assert judge.family(stage) == sim.family(stage)
        kw = dict(judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=4)
        first = judge_windows_sync(windows[:4], **kw)  # two event loops, the same workers
        second = judge_windows_sync(windows, **kw)
    assert not judge.started
    assert len(first) == 4 and len(second) == len(windows)
    assert sim.ledger.calls == len(windows)


def test_bad_process_counts_are_refused(dataset, windows, sim, tmp_path):
    queries, documents, _ = dataset
    for bad in (0, -1, 1.5, True):
        with pytest.raises(JudgeInputError):
            judge_windows_sync(windows, judge=sim, store=tmp_path, documents=documents, queries=queries, processes=bad)
        with pytest.raises(JudgeInputError):
            ProcessJudge(sim, bad)
    with pytest.raises(JudgeInputError):
        ProcessJudge(ProcessJudge(sim, 1), 1)


def test_litellm_judge_pickles_with_its_family_and_prepare_changes_no_family():
    judge = LiteLLMJudge(MODEL, api_base="http://127.0.0.1:9/v1", api_key=FAKE_KEY, temperature=0.3,
                         input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    before = {s: judge.family(s) for s in ("tournament", "rubric", "lists")}
    judge.prepare()
    copy = pickle.loads(pickle.dumps(judge))
    for s, fam in before.items():
        assert judge.family(s) == fam
        assert copy.family(s) == fam
        assert copy.family(s).family_id == fam.family_id
    assert copy._litellm is None  # rebuilt in the worker
    assert FAKE_KEY not in repr(copy)


def test_usage_and_cost_reach_records_and_the_ledger_through_workers(tmp_path, dataset, windows, served):
    queries, documents, _ = dataset
    server = served()
    judge = judge_for(server, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries,
                             concurrency=6, processes=2)
    assert len(out) == len(windows) and all(j.valid for j in out)
    stored = records(tmp_path)
    assert Counter(r.record_id for r in stored) == Counter(j.record_id for j in out)  # once each
    assert server.status_counts == Counter({200: len(windows)})
    assert all(r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0 for r in stored)
    for r in stored:
        assert r.usage.cost_usd == pytest.approx(r.usage.prompt_tokens * 1e-6 + r.usage.completion_tokens * 2e-6)
    assert judge.ledger.calls == len(windows)
    assert judge.ledger.prompt_tokens == sum(r.usage.prompt_tokens for r in stored)
    assert judge.ledger.completion_tokens == sum(r.usage.completion_tokens for r in stored)
    assert judge.ledger.cost_usd == pytest.approx(sum(r.usage.cost_usd for r in stored))
    assert judge.ledger.unpriced_calls == 0


def test_401_in_a_worker_fails_fast_in_the_caller_never_showing_the_key(
    tmp_path, dataset, windows, served, caplog, capfd
):
    queries, documents, _ = dataset
    server = served(api_key="sk-" + "the-right-key-0000")
    judge = judge_for(server)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(JudgeAuthError) as info:
        judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries,
                           concurrency=2, processes=2)
    message = str(info.value)
    assert MODEL in message and server.url in message and "401" in message
    assert info.value.__cause__ is None
    assert server.status_counts[401] <= 2  # nothing retried
    assert judge.ledger.failed_calls >= 1
    out, errs = capfd.readouterr()
    for secret in (FAKE_KEY, FAKE_KEY[-6:]):
        assert secret not in message
        assert secret not in caplog.text
        assert secret not in out + errs
        assert secret not in "".join(p.read_text() for p in tmp_path.glob("*"))
    assert records(tmp_path) == []


def test_workers_see_a_provider_key_set_in_the_environment_after_earlier_workers(
    tmp_path, dataset, windows, served, monkeypatch, sim
):
    queries, documents, _ = dataset
    with ProcessJudge(sim, processes=1):  # the fork server is up (here or in an earlier test) before the key is set
        pass
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    server = served(api_key=FAKE_KEY)
    judge = LiteLLMJudge(MODEL, api_base=server.url, backoff_base=0.001, backoff_max=0.01)  # key from the env
    out = judge_windows_sync(windows[:4], judge=judge, store=tmp_path, documents=documents, queries=queries,
                             concurrency=2, processes=1)
    assert len(out) == 4 and server.status_counts[401] == 0

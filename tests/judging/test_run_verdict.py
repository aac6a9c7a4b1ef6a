"""A judge that never parses gets a verdict early; resumes ask new windows before failed ones; the run
policy set on a judge reaches every run; invalid answers are summarised by category."""

from __future__ import annotations

import pickle

import pytest

from rcp_jax.judging import (
    BaseJudge,
    InvalidAnswersError,
    JudgeError,
    JudgeInputError,
    JudgeVerdictError,
    SimulatedJudge,
    judge_windows_sync,
    read_judgements,
)
from rcp_jax.judging.answers.verdict import summarise, summarise_store, truncate
from rcp_jax.judging.run import DEFAULT_MAX_ATTEMPTS, DEFAULT_STOP_AFTER_INVALID


def all_records(folder):
    return read_judgements(folder, "tournament") + read_judgements(folder, "rubric")


class Recording(BaseJudge):
    """Wraps a judge and records every request (window label, attempt, previous invalid answer)."""

    def __init__(self, inner):
        super().__init__(inner.model)
        self.inner = inner
        self.prompts = inner.prompts
        self.seen = []
        self._decoding = inner.decoding()  # fixed now: the family stays when the inner judge is changed

    def decoding(self):
        return self._decoding

    async def complete(self, request):
        self.seen.append((request.window.label, request.attempt, request.previous))
        return await self.inner.complete(request)


def test_a_judge_that_never_parses_is_stopped_after_n_answers_with_a_verdict(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    bad = SimulatedJudge(latent, malformed_rate=1.0, seed=5)
    with pytest.raises(JudgeVerdictError) as info:
        judge_windows_sync(windows, judge=bad, store=tmp_path, documents=documents, queries=queries, concurrency=1,
                           max_attempts=3, stop_after_invalid=5)
    assert bad.ledger.calls == 5  # stopped at once, not after 3 attempts x 18 windows
    stored = all_records(tmp_path)
    assert len(stored) == 5 and not any(r.valid for r in stored)  # every answer is kept
    err = info.value
    assert isinstance(err, InvalidAnswersError) and isinstance(err, JudgeError)
    assert not isinstance(err, JudgeInputError)  # a judge failure, not bad input (its own exit code)
    message = str(err)
    summary = summarise(stored)
    assert summary.invalid == 5 and sum(summary.by_category.values()) == 5
    assert err.summary == summary
    assert summary.categories_text() in message  # by category, e.g. "no_json 3, schema 2"
    assert "example" in message and repr(truncate(summary.example["raw"]))[:20] in message
    for hint in ("larger", "--structured-output", "--max-tokens", "--stop-after-invalid 0"):
        assert hint in message
    assert pickle.loads(pickle.dumps(err)).summary == summary


def test_concurrent_calls_stop_soon_after_the_limit(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    bad = SimulatedJudge(latent, malformed_rate=1.0, seed=5)
    with pytest.raises(JudgeVerdictError):
        judge_windows_sync(windows, judge=bad, store=tmp_path, documents=documents, queries=queries, concurrency=4,
                           stop_after_invalid=6)
    assert 6 <= bad.ledger.calls <= 6 + 3


def test_zero_never_stops_and_one_valid_answer_keeps_the_run_going(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    bad = SimulatedJudge(latent, malformed_rate=1.0, seed=5)
    out = judge_windows_sync(windows[:4], judge=bad, store=tmp_path / "a", documents=documents, queries=queries,
                             max_attempts=2, stop_after_invalid=0)
    assert out == [] and bad.ledger.calls == 8
    flaky = SimulatedJudge(latent, malformed_rate=0.5, seed=2)
    out = judge_windows_sync(windows, judge=flaky, store=tmp_path / "b", documents=documents, queries=queries,
                             concurrency=1, stop_after_invalid=3)
    assert out  # some answer among the first three was valid (seeded), so the run went on
    assert flaky.ledger.calls > 3


def test_the_policy_set_on_a_judge_reaches_every_run(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    bad = SimulatedJudge(latent, malformed_rate=1.0, seed=5)
    bad.max_attempts, bad.stop_after_invalid = 1, 0
    out = judge_windows_sync(windows[:5], judge=bad, store=tmp_path, documents=documents, queries=queries)
    assert out == [] and bad.ledger.calls == 5
    bad.stop_after_invalid = 2
    with pytest.raises(JudgeVerdictError):
        judge_windows_sync(windows[5:], judge=bad, store=tmp_path, documents=documents, queries=queries, concurrency=1)
    assert bad.ledger.calls == 7
    assert (DEFAULT_MAX_ATTEMPTS, DEFAULT_STOP_AFTER_INVALID) == (3, 20)
    with pytest.raises(JudgeInputError, match="stop_after_invalid"):
        judge_windows_sync(windows, judge=bad, store=tmp_path, documents=documents, queries=queries,
                           stop_after_invalid=-1)


def test_a_resume_asks_new_windows_before_failed_ones_and_tells_the_judge_what_failed(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    bad = SimulatedJudge(latent, malformed_rate=1.0, seed=5)
    judge_windows_sync(windows[:3], judge=bad, store=tmp_path, documents=documents, queries=queries, max_attempts=1,
                       stop_after_invalid=0)
    stored = {r.window.label: r for r in all_records(tmp_path)}
    good = Recording(SimulatedJudge(latent, malformed_rate=1.0, seed=5))  # the same family as `bad`
    good.inner.malformed_rate = 0.0
    out = judge_windows_sync(windows[:6], judge=good, store=tmp_path, documents=documents, queries=queries,
                             concurrency=1)
    assert len(out) == 6
    order = [label for label, _, _ in good.seen]
    failed = [w.label for w in windows[:3]]
    assert order[:3] == [w.label for w in windows[3:6]]  # the new windows first
    assert sorted(order[3:]) == sorted(failed)
    for label, attempt, previous in good.seen[3:]:
        assert attempt == 2  # numbered across runs
        assert previous == (stored[label].invalid_category, stored[label].invalid_detail)  # from the store
    assert all(previous is None for _, _, previous in good.seen[:3])


def test_summaries_of_a_store(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    assert summarise_store(tmp_path).describe() == "no invalid answers among 0"
    judge = SimulatedJudge(latent, malformed_rate=0.5, seed=3)
    judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, max_attempts=1,
                       stop_after_invalid=0)
    records = all_records(tmp_path)
    s = summarise_store(tmp_path)
    assert s.answers == len(records) and s.invalid == sum(not r.valid for r in records) > 0
    assert s.windows_without_valid == s.invalid  # one attempt each: every invalid answer is a window left
    assert list(s.by_category.values()) == sorted(s.by_category.values(), reverse=True)
    assert s.example["category"] == next(iter(s.by_category))
    assert s.advice() and all(line.split(":")[0] in s.by_category for line in s.advice())
    assert s.to_dict()["invalid"] == s.invalid

"""judge_windows: every window judged once, invalid answers re-asked and kept, resume asks only the missing."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from rcp_jax.judging import (
    JudgeInputError,
    JudgementStore,
    SimulatedJudge,
    Window,
    estimate_cost,
    judge_windows,
    judge_windows_sync,
    read_judgements,
)


def all_records(folder):
    return read_judgements(folder, "tournament") + read_judgements(folder, "rubric")


def test_judges_every_window_and_returns_valid_judgements_in_order(tmp_path, dataset, windows, sim):
    queries, documents, _ = dataset
    seen = []
    out = judge_windows_sync(
        windows, judge=sim, store=tmp_path, documents=documents, queries=queries, concurrency=4, progress=seen.append
    )
    assert [j.window for j in out] == windows
    assert all(j.valid for j in out)
    for j in out:
        if j.window.stage == "tournament":
            assert set(j.scores) == set(j.window.doc_ids) and j.criteria is None
            assert all(-5 <= s <= 5 for s in j.scores.values())
        else:
            assert set(j.criteria) == set(j.window.doc_ids) and all(len(a) == 5 for a in j.criteria.values())
        assert j.usage.prompt_tokens > 0 and j.raw_response
    assert seen[0].done == 0 and seen[-1].done == seen[-1].total == len(windows)
    assert sim.ledger.calls == len(windows)


def test_rerun_asks_nothing_and_returns_the_same(tmp_path, dataset, windows, sim):
    queries, documents, _ = dataset
    first = judge_windows_sync(windows, judge=sim, store=tmp_path, documents=documents, queries=queries)
    calls = sim.ledger.calls
    progress = []
    again = judge_windows_sync(
        windows, judge=sim, store=tmp_path, documents=documents, queries=queries, progress=progress.append
    )
    assert sim.ledger.calls == calls
    assert again == first
    assert progress[-1].cached == len(windows) and progress[-1].calls == 0


def test_resume_asks_only_the_missing_windows(tmp_path, dataset, windows, sim):
    queries, documents, _ = dataset
    judge_windows_sync(windows[:5], judge=sim, store=tmp_path, documents=documents, queries=queries)
    before = sim.ledger.calls
    out = judge_windows_sync(windows, judge=sim, store=tmp_path, documents=documents, queries=queries)
    assert sim.ledger.calls - before == len(windows) - 5
    assert len(out) == len(windows)
    counts = Counter(j.record_id for j in all_records(tmp_path) if j.valid)
    assert set(counts.values()) == {1}


def test_invalid_answers_are_stored_and_reasked_up_to_the_limit(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    judge = SimulatedJudge(latent, malformed_rate=0.4, seed=4)
    out = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, max_attempts=3)
    records = all_records(tmp_path)
    invalid = [r for r in records if not r.valid]
    assert invalid, "a 40% malformed share must produce invalid records"
    assert all(r.invalid_category and r.scores is None and r.criteria is None for r in invalid)
    by_window = {}
    for r in records:
        by_window.setdefault(r.record_id, []).append(r)
    for attempts in by_window.values():
        assert [r.attempts for r in attempts] == list(range(1, len(attempts) + 1))
        assert len(attempts) <= 3
        assert sum(r.valid for r in attempts) <= 1
        assert all(not r.valid for r in attempts[:-1])  # asking stops at the first valid answer
    assert len(out) == sum(any(r.valid for r in a) for a in by_window.values())
    assert judge.ledger.calls == len(records)


def test_a_window_out_of_attempts_is_asked_again_next_run(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    always_bad = SimulatedJudge(latent, malformed_rate=1.0, seed=1)
    out = judge_windows_sync(windows[:2], judge=always_bad, store=tmp_path, documents=documents, queries=queries, max_attempts=2)
    assert out == []
    assert len(all_records(tmp_path)) == 4
    # same family (same settings) but now answering: the windows were not 'done'
    always_bad.malformed_rate = 0.0
    out = judge_windows_sync(windows[:2], judge=always_bad, store=tmp_path, documents=documents, queries=queries)
    assert len(out) == 2


def test_missing_texts_are_refused_before_any_call(tmp_path, dataset, sim):
    queries, documents, _ = dataset
    bad = [Window("q0", "tournament", "p", 0, ("q0-d0", "nope"))]
    with pytest.raises(JudgeInputError, match="nope"):
        judge_windows_sync(bad, judge=sim, store=tmp_path, documents=documents, queries=queries)
    with pytest.raises(JudgeInputError, match="query text"):
        judge_windows_sync([Window("qx", "tournament", "p", 0, ("a",))], judge=sim, store=tmp_path, documents=documents, queries=queries)
    assert sim.ledger.calls == 0


def test_corpus_shaped_documents_and_duplicate_windows(tmp_path, dataset, sim):
    queries, documents, _ = dataset
    corpus = {d: t for per_q in documents.values() for d, t in per_q.items()}
    w = Window("q2", "tournament", "p", 0, ("q2-d1", "q2-d2"))
    out = judge_windows_sync([w, w], judge=sim, store=tmp_path, documents=corpus, queries=queries)
    assert len(out) == 1 and sim.ledger.calls == 1


def test_sync_wrapper_refuses_a_running_loop(tmp_path, dataset, windows, sim):
    queries, documents, _ = dataset

    async def inside():
        judge_windows_sync(windows, judge=sim, store=tmp_path, documents=documents, queries=queries)

    with pytest.raises(JudgeInputError, match="await judge_windows"):
        asyncio.run(inside())


def test_cancellation_keeps_received_answers(tmp_path, dataset, windows):
    queries, documents, latent = dataset
    judge = SimulatedJudge(latent, latency=0.02, seed=3)

    async def cancel_midway():
        task = asyncio.create_task(
            judge_windows(windows, judge=judge, store=tmp_path, documents=documents, queries=queries, concurrency=2)
        )
        while judge.ledger.calls < 4:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    stored = all_records(tmp_path)
    assert judge.ledger.calls >= 4
    assert len(stored) == judge.ledger.calls  # every answer received was stored
    with JudgementStore(tmp_path):
        pass  # the lock was released
    rest = judge_windows_sync(windows, judge=judge, store=tmp_path, documents=documents, queries=queries)
    assert len(rest) == len(windows)


def test_estimate_before_spending(tmp_path, dataset, windows, sim):
    queries, documents, _ = dataset
    est = estimate_cost(windows, judge=sim, documents=documents, queries=queries)
    assert est.calls == len(windows) and est.input_tokens > 0 and est.output_tokens > 0
    assert est.cost_usd == 0.0 and "chars/4" in est.token_method
    assert set(est.per_stage) == {"tournament", "rubric"}
    assert sim.ledger.calls == 0
    judge_windows_sync(windows[:4], judge=sim, store=tmp_path, documents=documents, queries=queries)
    later = estimate_cost(windows, judge=sim, documents=documents, queries=queries, store=tmp_path)
    assert later.calls == len(windows) - 4 and later.skipped_done == 4
    sampled = estimate_cost(windows, judge=sim, documents=documents, queries=queries, max_counted=2)
    assert sampled.sampled == 4 and sampled.calls == len(windows)
    assert abs(sampled.input_tokens - est.input_tokens) < 0.5 * est.input_tokens


def test_the_module_docstring_example_runs(capsys):
    import textwrap

    import rcp_jax.judging.run

    doc = rcp_jax.judging.run.__doc__
    code = textwrap.dedent(doc[doc.index("::") + 2 : doc.index("Swap ")])
    exec(compile(code, "rcp_jax.judging.run example", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("{'a': ") and printed[1].startswith("{'c': (")

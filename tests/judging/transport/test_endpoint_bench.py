"""The bench of several endpoints (rcp_jax.judging.transport.endpoints.EndpointPool), on a clock the test moves: a failing endpoint is
benched, its bench doubles while it keeps failing and clears on an answer, it is probed one try at a time, and the
choice prefers the endpoint with the fewest tries in flight among those not benched and not failed this call."""

from __future__ import annotations

import pytest

from rcp_jax.judging.transport.endpoints import EndpointPool


def fail(pool, i, now, **kw):
    pool.start(i)
    pool.done(i, now, answered=False, **kw)


def test_three_failures_in_a_row_bench_and_the_bench_doubles_until_an_answer():
    pool = EndpointPool(2, fails_to_bench=3, bench_s=1.0, bench_max_s=5.0)
    fail(pool, 0, 0.0)
    fail(pool, 0, 0.0)
    assert not pool.benched(0, 0.0)
    fail(pool, 0, 0.0)
    assert pool.benched(0, 0.5) and not pool.benched(0, 1.0)
    fail(pool, 0, 1.0)  # a failed probe: benched again at once, twice as long
    assert pool.benched(0, 2.9) and not pool.benched(0, 3.0)
    fail(pool, 0, 3.0)
    assert pool.benched(0, 6.9) and not pool.benched(0, 7.0)
    fail(pool, 0, 7.0)
    fail(pool, 0, 12.0)
    assert pool.benched(0, 16.9) and not pool.benched(0, 17.0)  # capped at bench_max_s = 5
    pool.start(0)
    pool.done(0, 17.0, answered=True)
    assert list(pool.bench_counts()) == [0, 0]
    fail(pool, 0, 17.0)
    assert not pool.benched(0, 17.0)  # healthy again: one failure does not bench
    assert pool.stats()[0] == {"answered": 1, "failed": 8, "timeouts": 0}


def test_an_unreachable_endpoint_is_benched_on_its_first_failure_and_a_lone_one_never():
    pool = EndpointPool(2, bench_s=2.0, bench_max_s=8.0)
    fail(pool, 1, 0.0, unreachable=True)
    assert pool.benched(1, 1.9)
    lone = EndpointPool(1)
    for _ in range(10):
        fail(lone, 0, 0.0, unreachable=True)
    assert not lone.benched(0, 0.0) and lone.pick(set(), 0.0) == 0


def test_failures_of_tries_already_out_do_not_lengthen_a_bench():
    pool = EndpointPool(2, bench_s=1.0, bench_max_s=64.0)
    for _ in range(4):
        pool.start(0)
    for _ in range(4):  # four concurrent tries all refused
        pool.done(0, 0.0, answered=False, unreachable=True)
    assert list(pool.bench_counts()) == [1, 0] and not pool.benched(0, 1.0)


def test_a_benched_endpoint_is_passed_over_then_probed_one_try_at_a_time():
    pool = EndpointPool(2, bench_s=1.0, bench_max_s=8.0)
    fail(pool, 0, 0.0, unreachable=True)
    assert [pool.pick(set(), 0.5) for _ in range(3)] == [1, 1, 1]
    pool.start(1)
    assert pool.pick(set(), 1.0) == 0  # its bench is over and it has no try in flight: probed
    pool.start(0)
    pool.start(1)
    assert pool.pick(set(), 1.0) == 1  # one probe at a time, however busy the other endpoint is
    pool.done(0, 1.1, answered=True)
    assert pool.pick(set(), 1.1) == 0  # answered: healthy, and fewest tries in flight


def test_the_choice_skips_endpoints_failed_this_call_and_falls_back_to_the_best_record():
    pool = EndpointPool(3, bench_s=10.0, bench_max_s=10.0)
    assert pool.pick(set(), 0.0) == 0 and pool.pick({0}, 0.0) == 1 and pool.pick({0, 1}, 0.0) == 2
    assert pool.has_fresh({0, 1}, 0.0) and not pool.has_fresh({0, 1, 2}, 0.0)
    assert pool.pick({0, 1, 2}, 0.0) == 0  # failed everywhere this call: back to the least busy
    pool.start(1)
    pool.done(1, 0.0, answered=True)  # 1 has answered
    fail(pool, 0, 0.0, unreachable=True)
    fail(pool, 2, 0.0, unreachable=True)
    assert pool.pick(set(), 0.0) == 1
    for _ in range(3):
        fail(pool, 1, 0.0)
    # all benched: the endpoint that has answered goes first, though its bench ends last
    assert all(pool.benched(i, 5.0) for i in range(3)) and pool.pick(set(), 5.0) == 1


def test_answering_besides_needs_an_answer_and_no_bench():
    pool = EndpointPool(2, bench_s=1.0)
    assert not pool.answering_besides(0, 0.0)
    pool.start(1)
    pool.done(1, 0.0, answered=True)
    assert pool.answering_besides(0, 0.0) and not pool.answering_besides(1, 0.0)
    for _ in range(3):
        fail(pool, 1, 0.0)
    assert not pool.answering_besides(0, 0.5)


@pytest.mark.parametrize("kw", [{"fails_to_bench": 0}, {"bench_s": 0.0}, {"bench_s": 2.0, "bench_max_s": 1.0}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ValueError):
        EndpointPool(2, **kw)

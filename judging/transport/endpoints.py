"""Which of several endpoints of one judge the next try goes to, and which endpoints are benched.

A judge given several servers of the same model keeps one :class:`EndpointPool`. Each try asks it for an
endpoint (:meth:`EndpointPool.pick`), then reports how the try went (:meth:`EndpointPool.done`):

- **Benching.** An endpoint whose last ``fails_to_bench`` tries all failed, or whose one failed try reached
  nothing at all (connection refused, unknown host), is benched: passed over for ``bench_s`` seconds. Each
  time it is benched again without having answered in between, the bench doubles, up to ``bench_max_s``; one
  answer clears it. With a single endpoint nothing is benched (there is nowhere else to go).
- **Probing.** When its bench ends, a benched endpoint gets one try at a time (a probe) until it answers; a
  failed probe benches it again, twice as long.
- **Choice.** A try goes to an endpoint that is neither benched, nor probing with a probe already out, nor
  failed earlier in the same call; among those, the one with the fewest tries in flight, then the fewest
  tries so far. When the call has already failed on every such endpoint, it goes back to one of them (the
  caller backs off first); when every endpoint is benched, to the one with the best record (fewest benches
  since it last answered, then one that has ever answered, then the one whose bench ends first).
- **Free retries.** :meth:`EndpointPool.answering_besides` says whether another endpoint is answering (not
  benched, has answered): a judge then need not count a failed try against the call's retry budget, since
  the next try goes elsewhere (:class:`judging.LiteLLMJudge` does so, at most ``max_transport_retries`` times
  per call).

Times are seconds of a monotonic clock the caller passes in (the event loop's ``time()``), so the rules are
testable without waiting. Nothing here does I/O; counts are per process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Failed tries in a row that bench an endpoint (one is enough when nothing answered at all).
FAILS_TO_BENCH = 3
#: The first bench of an endpoint, in seconds; it doubles with each bench until the endpoint answers again ...
BENCH_S = 2.0
#: ... up to this many seconds.
BENCH_MAX_S = 120.0


@dataclass
class _Health:
    """One endpoint's counts and state."""

    answered: int = 0
    failed: int = 0
    timeouts: int = 0
    streak: int = 0  # failed tries since the last answer
    benches: int = 0  # benches since the last answer (0: healthy)
    bench_until: float = 0.0
    in_flight: int = 0

    @property
    def tries(self) -> int:
        """Tries that ended here (answered + failed), in-flight ones not counted."""
        return self.answered + self.failed


class EndpointPool:
    """Health and choice of ``n`` endpoints (by index); see the module docstring.

    Parameters
    ----------
    n : number of endpoints (>= 1).
    fails_to_bench : failed tries in a row that bench an endpoint.
    bench_s, bench_max_s : first and longest bench, in seconds.
    """

    def __init__(self, n: int, *, fails_to_bench: int = FAILS_TO_BENCH, bench_s: float = BENCH_S,
                 bench_max_s: float = BENCH_MAX_S) -> None:
        if n < 1:
            raise ValueError("an endpoint pool needs at least one endpoint")
        if fails_to_bench < 1 or bench_s <= 0 or bench_max_s < bench_s:
            raise ValueError(f"need fails_to_bench >= 1 and 0 < bench_s <= bench_max_s; got {fails_to_bench}, "
                             f"{bench_s}, {bench_max_s}")
        self.fails_to_bench = int(fails_to_bench)
        self.bench_s = float(bench_s)
        self.bench_max_s = float(bench_max_s)
        self._health = [_Health() for _ in range(n)]

    def __len__(self) -> int:
        return len(self._health)

    def benched(self, i: int, now: float) -> bool:
        """Whether endpoint ``i`` is on the bench at time ``now``."""
        return self._health[i].bench_until > now

    def _usable(self, i: int, now: float) -> bool:
        h = self._health[i]
        return h.bench_until <= now and not (h.benches > 0 and h.in_flight > 0)

    def _order(self, i: int) -> tuple[int, int, int]:
        h = self._health[i]
        return h.in_flight, h.tries, i

    def pick(self, failed_here: set[int], now: float) -> int:
        """The endpoint of the next try of a call that already failed on ``failed_here``."""
        n = len(self._health)
        fresh = [i for i in range(n) if i not in failed_here and self._usable(i, now)]
        if fresh:
            return min(fresh, key=self._order)
        usable = [i for i in range(n) if self._usable(i, now)]
        if usable:
            return min(usable, key=self._order)
        # every endpoint benched: the one with the best record (fewest benches, has answered), back first
        return min(range(n), key=lambda i: (self._health[i].benches, self._health[i].answered == 0,
                                            self._health[i].bench_until, *self._order(i)))

    def has_fresh(self, failed_here: set[int], now: float) -> bool:
        """Whether an endpoint the call has not failed on may take its next try now (then no backoff)."""
        return any(i not in failed_here and self._usable(i, now) for i in range(len(self._health)))

    def answering_besides(self, i: int, now: float) -> bool:
        """Whether an endpoint other than ``i`` is answering: it has answered and is not benched."""
        return any(j != i and h.answered > 0 and h.bench_until <= now for j, h in enumerate(self._health))

    def start(self, i: int) -> None:
        """A try goes out to endpoint ``i``."""
        self._health[i].in_flight += 1

    def release(self, i: int) -> None:
        """The try on endpoint ``i`` was abandoned (cancelled): no longer in flight, counted nowhere."""
        self._health[i].in_flight = max(0, self._health[i].in_flight - 1)

    def done(self, i: int, now: float, *, answered: bool, timeout: bool = False, unreachable: bool = False) -> None:
        """The try on endpoint ``i`` ended at ``now``: ``answered`` (a reply came, usable or not), else failed;
        ``timeout``: it ran past its deadline; ``unreachable``: nothing answered at all (benched at once)."""
        h = self._health[i]
        h.in_flight = max(0, h.in_flight - 1)
        if answered:
            h.answered += 1
            h.streak = h.benches = 0
            h.bench_until = 0.0
            return
        h.failed += 1
        h.timeouts += bool(timeout)
        h.streak += 1
        if len(self._health) < 2 or h.bench_until > now:  # nowhere else to go, or already benched by another try
            return
        if h.benches > 0 or unreachable or h.streak >= self.fails_to_bench:
            h.bench_until = now + min(self.bench_max_s, self.bench_s * 2.0 ** h.benches)
            h.benches += 1

    def stats(self) -> list[dict[str, Any]]:
        """Per endpoint: ``answered``, ``failed`` and ``timeouts`` (of the failed, past the deadline)."""
        return [{"answered": h.answered, "failed": h.failed, "timeouts": h.timeouts} for h in self._health]

    def bench_counts(self) -> Sequence[int]:
        """Per endpoint: benches since its last answer (0: healthy)."""
        return [h.benches for h in self._health]

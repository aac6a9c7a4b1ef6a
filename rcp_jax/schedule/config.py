"""The constants of the judging schedules and the window counts they give a pool of ``n`` documents.

The counting rules are described in :mod:`rcp_jax.schedule` (``k = min(w, n)`` documents per window,
``round(p * n / k)`` windows for ``p`` placements per document, in exact rational arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction


class ScheduleWarning(UserWarning):
    """A query's schedule is degenerate (a pool of 0 or 1 document); the message names the query."""


def _as_fraction(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    return Fraction(float(x)).limit_denominator(10**6)


@dataclass(frozen=True)
class ScheduleConfig:
    """Every constant of the schedules (defaults: the paper at w = 10).

    Attributes:
        w: documents per window (at least 2).
        round1_placements, round2_placements, round3_placements, rubric_placements: windows per
            document of each phase (exact fractions; floats are read as the nearest simple fraction).
        round3_batches: number of adaptive batches (BT refits) in round 3.
        mirror: show every round-1 and round-2 window a second time, reversed.
        tie_replace: round 2 / stratified rubric: probability that a later block of equal coverage
            replaces the incumbent.
        decay: round 3: factor applied to the values of boundaries a chosen window covers.
        depth: round 3: rank only the top ``depth`` documents (None: the whole pool).
    """

    w: int = 10
    round1_placements: Fraction = Fraction(53 * 10, 150)
    round2_placements: Fraction = Fraction(27 * 10, 150)
    round3_placements: Fraction = Fraction(56 * 10, 150)
    round3_batches: int = 7
    rubric_placements: Fraction = Fraction(100 * 10, 150)
    mirror: bool = True
    tie_replace: float = 0.3
    decay: float = 0.3
    depth: int | None = None

    def __post_init__(self) -> None:
        for name in ("round1_placements", "round2_placements", "round3_placements", "rubric_placements"):
            value = _as_fraction(getattr(self, name))
            if value < 0:
                raise ValueError(f"ScheduleConfig.{name} = {value} must be >= 0")
            object.__setattr__(self, name, value)
        if int(self.w) < 2:
            raise ValueError(f"ScheduleConfig.w = {self.w}: a window needs at least 2 documents")
        if int(self.round3_batches) < 1:
            raise ValueError(f"ScheduleConfig.round3_batches = {self.round3_batches} must be >= 1")
        if not 0.0 <= self.tie_replace <= 1.0 or not 0.0 <= self.decay <= 1.0:
            raise ValueError("ScheduleConfig.tie_replace and .decay must lie in [0, 1]")
        if self.depth is not None and int(self.depth) < 2:
            raise ValueError(f"ScheduleConfig.depth = {self.depth} must be >= 2 or None")

    def to_dict(self) -> dict:
        """JSON-able form (fractions as ``"53/15"`` strings), for recording with a run."""
        out = {}
        for k, v in self.__dict__.items():
            out[k] = str(v) if isinstance(v, Fraction) else v
        return out


DEFAULT_CONFIG = ScheduleConfig()


@dataclass(frozen=True)
class ScheduleCounts:
    """Planned numbers of windows for a pool of ``n`` documents.

    Attributes:
        n: pool size. window_size: ``k = min(w, n)`` documents per window.
        round1, round2: windows of rounds 1 and 2 (before mirroring).
        round3_batches: planned windows of each adaptive batch (an upper bound: a batch stops early
            when no boundary has positive value).
        round3: their sum.
        mirror: whether rounds 1-2 are also shown reversed.
        rubric_balanced, rubric_stratified: windows of the two rubric halves.
        note: empty, or why the schedule is degenerate.
    """

    n: int
    window_size: int
    round1: int
    round2: int
    round3_batches: tuple[int, ...]
    mirror: bool
    rubric_balanced: int
    rubric_stratified: int
    note: str = ""
    round3: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "round3", int(sum(self.round3_batches)))

    @property
    def tournament_calls(self) -> int:
        """Judge calls of Stage A: mirrored rounds 1-2 plus round 3."""
        return (self.round1 + self.round2) * (2 if self.mirror else 1) + self.round3

    @property
    def rubric_windows(self) -> int:
        """Judge calls of Stage B."""
        return self.rubric_balanced + self.rubric_stratified

    @property
    def tournament_placements(self) -> float:
        """Mean windows per document in Stage A (14.4 at n = 150)."""
        return self.tournament_calls * self.window_size / self.n if self.n else 0.0

    @property
    def rubric_placements(self) -> float:
        """Mean windows per document in Stage B (6.67 at n = 150)."""
        return self.rubric_windows * self.window_size / self.n if self.n else 0.0

    def as_row(self) -> dict:
        """Flat dict (for a summary table)."""
        return {
            "n": self.n, "window_size": self.window_size, "round1": self.round1, "round2": self.round2,
            "round3": self.round3, "round3_batches": "+".join(map(str, self.round3_batches)),
            "tournament_calls": self.tournament_calls, "tournament_placements": round(self.tournament_placements, 2),
            "rubric_balanced": self.rubric_balanced, "rubric_stratified": self.rubric_stratified,
            "rubric_windows": self.rubric_windows, "rubric_placements": round(self.rubric_placements, 2),
        }


def _phase_windows(placements: Fraction, n: int, k: int) -> int:
    # Python's round() on a Fraction rounds half to even, exactly.
    return int(round(placements * n / k))


def _split(total: int, parts: int) -> tuple[int, ...]:
    parts = min(parts, total)
    if parts == 0:
        return ()
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def schedule_counts(n: int, config: ScheduleConfig = DEFAULT_CONFIG) -> ScheduleCounts:
    """Planned window counts for a pool of ``n`` documents (see the module docstring for the rules).

    >>> schedule_counts(150).as_row()["tournament_calls"], schedule_counts(1).note[:9]
    (216, 'pool of 1')
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"pool size {n} must be >= 0")
    k = min(config.w, n)
    if n == 0:
        return ScheduleCounts(0, 0, 0, 0, (), config.mirror, 0, 0, note="empty pool: nothing to judge")
    rubric_total = max(math.ceil(n / k), _phase_windows(config.rubric_placements, n, k))
    # A pool of <= w documents shows all of them in every window, so only their n! orders differ; the
    # schedule never asks one order twice (schedule.windows._fresh_order), so 2 or 3 documents get fewer windows.
    orders = math.factorial(n) if n <= config.w else None
    if orders is not None:
        rubric_total = min(rubric_total, orders)
    balanced = math.ceil(rubric_total / 2)
    rubric = dict(rubric_balanced=balanced, rubric_stratified=rubric_total - balanced)
    if n == 1:
        return ScheduleCounts(
            1, 1, 0, 0, (), config.mirror, **rubric,
            note="pool of 1 document: nothing to compare, no tournament windows (rubric only)",
        )
    r1 = _phase_windows(config.round1_placements, n, k)
    r2 = _phase_windows(config.round2_placements, n, k)
    if orders is not None:
        per = 2 if config.mirror else 1  # orders a round-1 or round-2 window takes
        r1 = min(r1, orders // per)
        r2 = min(r2, (orders - per * r1) // per)
        batches: tuple[int, ...] = (1,) if orders > per * (r1 + r2) else ()
    else:
        batches = _split(_phase_windows(config.round3_placements, n, k), config.round3_batches)
    return ScheduleCounts(n, k, r1, r2, batches, config.mirror, **rubric)

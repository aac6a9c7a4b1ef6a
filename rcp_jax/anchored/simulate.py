"""A simulated benchmark whose human and judge scores both derive from a known latent relevance.

Each system returns ``k`` documents per query. A document's latent relevance is
``z = difficulty_q + quality_s + interaction_qs + noise`` (the list ranked by z). The human assessor grades
``round(z + assessor noise)`` clipped to 0..3, and the human metric is the list's nDCG-style score of those
grades (DCG of ``2^g - 1`` over the largest possible DCG). The judge's gain is ``skill * z + bias_s +
judge_sd_q * noise`` (its metric the same discounted sum, scaled to 0..1): the judge sees the latent
relevance through its skill, adds a system-specific bias (a style it favours in one system's documents) and
is noisier on some queries than others; ``judge_sd_q`` is what a judge's posterior sd would reveal. So
judge-only differences are biased wherever the biases differ, and the human metric is the truth to recover.

Everything is vectorised over replications: arrays ``[R, S, N]`` (replications, systems, queries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rcp_jax.anchored.active import inclusion_probabilities, pooled_scale, predicted_residual_scale
from rcp_jax.anchored.ppi import anchored_mean, correlation_on_labelled, human_only_mean

#: the default systems: name -> (latent quality, judge bias). A and B are a null pair (equal quality) that the
#: judge separates; C is better than A but the judge understates it; D is best.
SYSTEMS = {"A": (0.0, 0.0), "B": (0.0, 0.25), "C": (0.15, -0.2), "D": (0.35, 0.0)}


@dataclass(frozen=True)
class SimulatedBenchmark:
    """``human``, ``judge``, ``judge_sd``: float[R, S, N]; ``systems``: names; ``pairs``: (a, b) indices."""

    human: np.ndarray
    judge: np.ndarray
    judge_sd: np.ndarray
    systems: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...] = field(default=())

    def differences(self, values: np.ndarray) -> np.ndarray:
        """float[R, P, N]: values[a] - values[b] for each pair."""
        a = np.array([p[0] for p in self.pairs])
        b = np.array([p[1] for p in self.pairs])
        return values[:, a] - values[:, b]

    @property
    def pair_names(self) -> list[str]:
        return [f"{self.systems[a]}-{self.systems[b]}" for a, b in self.pairs]


def simulate_benchmark(rng: np.random.Generator, *, replications: int = 200, queries: int = 200, k: int = 10,
                       skill: float = 1.0, judge_noise: float = 0.35, systems: dict | None = None,
                       interaction: float = 0.3, heterogeneity: float = 0.8,
                       assessor_noise: float = 0.5) -> SimulatedBenchmark:
    """Draw ``replications`` independent benchmarks of ``queries`` queries (see the module docstring).

    ``skill`` 0 gives a judge blind to relevance (judge and human differences uncorrelated); ``judge_noise``
    is the typical judge noise sd per document (each query's sd is it times a log-normal factor).
    """
    systems = SYSTEMS if systems is None else systems
    names = tuple(systems)
    quality = np.array([systems[s][0] for s in names])
    bias = np.array([systems[s][1] for s in names])
    r, s, n = replications, len(names), queries
    difficulty = rng.normal(1.2, 0.6, size=(r, 1, n, 1))
    inter = rng.normal(0.0, interaction, size=(r, s, n, 1))
    z = difficulty + quality[None, :, None, None] + inter + rng.normal(0.0, 0.8, size=(r, s, n, k))
    z = -np.sort(-z, axis=-1)  # each system ranks its documents well
    grades = np.clip(np.rint(z + rng.normal(0.0, assessor_noise, size=z.shape)), 0, 3)
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    human = ((2.0**grades - 1.0) * discount).sum(-1) / (7.0 * discount.sum())
    sd = judge_noise * np.exp(rng.normal(0.0, heterogeneity, size=(r, 1, n, 1)))
    gain = skill * z + bias[None, :, None, None] + sd * rng.normal(size=z.shape)
    judge = (gain * discount).sum(-1) / (3.0 * discount.sum())
    judge_sd = np.broadcast_to(sd[..., 0] * np.sqrt((discount**2).sum()) / (3.0 * discount.sum()), human.shape)
    pairs = tuple((a, b) for a in range(s) for b in range(a + 1, s))
    return SimulatedBenchmark(human=human, judge=judge, judge_sd=np.array(judge_sd), systems=names, pairs=pairs)


def random_labels(rng: np.random.Generator, shape: tuple[int, ...], n: int) -> np.ndarray:
    """bool[*shape]: exactly ``n`` queries labelled per row, a simple random sample."""
    idx = np.argsort(rng.random(shape), axis=-1)[..., :n]
    mask = np.zeros(shape, bool)
    np.put_along_axis(mask, idx, True, axis=-1)
    return mask


@dataclass(frozen=True)
class ReplicatedComparison:
    """One labelling scheme over all replications; arrays float[R, P] (bool for ``covered``/``called``)."""

    truth: np.ndarray          # the benchmark's mean human difference (the inference target)
    judge_only: np.ndarray     # the judge's mean difference (rescaled by nothing: its own units)
    anchored_estimate: np.ndarray
    anchored_width: np.ndarray
    anchored_covered: np.ndarray
    anchored_called: np.ndarray   # interval excludes 0
    human_estimate: np.ndarray
    human_width: np.ndarray
    human_covered: np.ndarray
    human_called: np.ndarray
    correlation: np.ndarray    # judge vs human differences on the labelled queries
    labels: np.ndarray         # float[R]: labels used
    targeted: np.ndarray       # bool[R, P]: the pairs the active round aimed at (undecided after its first round)


def replicate(bench: SimulatedBenchmark, rng: np.random.Generator, fraction: float, *, scheme: str = "random",
              level: float = 0.9, first_share: float = 0.5, uniform_share: float = 0.2,
              use_judge_sd: bool = True, target: str = "benchmark") -> ReplicatedComparison:
    """Label ``fraction`` of the queries in every replication and estimate every pair's human difference.

    ``scheme``: ``random`` (a simple random sample) or ``active`` (``first_share`` of the budget as a simple
    random sample, the rest drawn with :func:`inclusion_probabilities` from the residuals predicted on it).
    ``target``: passed to the estimators; ``truth`` (and ``covered``) stay the benchmark mean.
    """
    y_all = bench.differences(bench.human)
    f = bench.differences(bench.judge)
    r, p, n = y_all.shape
    budget = int(round(fraction * n))
    truth = y_all.mean(-1)
    if scheme == "random":
        mask = random_labels(rng, (r, n), budget)[:, None, :]
        y = np.where(mask, y_all, np.nan)
        anchored = anchored_mean(y, f, level=level, target=target)
        human = human_only_mean(y, level=level, target=target)
        labels = mask[:, 0].sum(-1).astype(float)
        undecided = np.ones((r, p), bool)
    elif scheme == "active":
        n0 = int(round(first_share * budget))
        first = random_labels(rng, (r, n), n0)[:, None, :]
        y0 = np.where(first, y_all, np.nan)
        current = anchored_mean(y0, f, level=level)
        extra = None
        if use_judge_sd:
            sd = bench.judge_sd
            extra = np.sqrt(sd[:, [a for a, _ in bench.pairs]] ** 2 + sd[:, [b for _, b in bench.pairs]] ** 2)
        scale = predicted_residual_scale(y0, f, extra)
        undecided = (current.low <= 0) & (current.high >= 0)
        score = pooled_scale(scale, current.se**2, undecided)
        pi = inclusion_probabilities(score, budget - n0, ~first[:, 0], uniform_share=uniform_share)
        drawn = (rng.random((r, n)) < pi) & ~first[:, 0]
        batch = np.where(first[:, 0], 0, np.where(drawn, 1, -1))[:, None, :]
        y = np.where(batch >= 0, y_all, np.nan)
        pib = np.where(first[:, 0], 1.0, pi)[:, None, :]
        anchored = anchored_mean(y, f, pib, batch=batch, level=level, target=target)
        human = human_only_mean(y, pib, batch=batch, level=level, target=target)
        labels = (batch[:, 0] >= 0).sum(-1).astype(float)
    else:
        raise ValueError(f"unknown scheme {scheme!r}")
    return ReplicatedComparison(
        truth=truth, judge_only=f.mean(-1),
        anchored_estimate=anchored.estimate, anchored_width=anchored.width,
        anchored_covered=(anchored.low <= truth) & (truth <= anchored.high),
        anchored_called=(anchored.low > 0) | (anchored.high < 0),
        human_estimate=human.estimate, human_width=human.width,
        human_covered=(human.low <= truth) & (truth <= human.high),
        human_called=(human.low > 0) | (human.high < 0),
        correlation=correlation_on_labelled(np.where(np.isfinite(y), y_all, np.nan), f), labels=labels,
        targeted=np.where(undecided.any(-1, keepdims=True), undecided, True),
    )

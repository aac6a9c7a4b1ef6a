"""A simulated benchmark whose human and judge scores both derive from a known latent relevance.

Each system returns ``k`` documents per query. A document's latent relevance is
``z = difficulty_q + quality_s + interaction_qs + noise`` (the list ranked by z). The human assessor grades
``round(z + assessor noise)`` clipped to 0..3, and the human metric is the list's nDCG-style score of those
grades (DCG of ``2^g - 1`` over the largest possible DCG). The judge's gain is ``skill * z + bias_s +
judge_sd_q * noise`` (its metric the same discounted sum, scaled to 0..1): the judge sees the latent
relevance through its skill, adds a system-specific bias (a style it favours in one system's documents) and
is noisier on some queries than others (a log-normal factor per query); on a share ``slip_share`` of the
queries it also slips (a per-(system, query) error of sd ``slip_sd`` on its metric: it misreads the query for
that list). So judge-only differences are biased wherever the biases differ, and the human metric is the truth
to recover.

**The judge's own uncertainty** (``judge_sd``, what a posterior sd of RCP-nDCG would report) tracks its true
per-query noise sd *imperfectly*: ``log(reported) = log(true sd) + tau * noise``, with ``tau`` set so that the
log-scale correlation of reported and true sd across queries is ``sd_signal`` (default 0.8; a Pearson
correlation of about 0.65 on the sd scale in the ``informative`` scenario). This is the regime where active
labelling can help, and the assumption behind the active-versus-random ratios the benchmark reports.

Everything is vectorised over replications: arrays ``[R, S, N]`` (replications, systems, queries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rcp_jax.anchored.active import (draw_fixed_size, inclusion_probabilities, judge_signal_scale,
                                     uncertainty_scale)
from rcp_jax.anchored.ppi import anchored_mean, correlation_on_labelled, human_only_mean

#: the default systems: name -> (latent quality, judge bias). A and B are a null pair (equal quality) that the
#: judge separates; C is better than A but the judge understates it; D is best.
SYSTEMS = {"A": (0.0, 0.0), "B": (0.0, 0.25), "C": (0.15, -0.2), "D": (0.35, 0.0)}


@dataclass(frozen=True)
class SimulatedBenchmark:
    """``human``, ``judge``, ``judge_sd`` (the judge's reported sd), ``noise_sd`` (its true noise sd): float[R, S, N];
    ``systems``: names; ``pairs``: (a, b) indices."""

    human: np.ndarray
    judge: np.ndarray
    judge_sd: np.ndarray
    systems: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...] = field(default=())
    noise_sd: np.ndarray | None = None

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
                       assessor_noise: float = 0.5, slip_share: float = 0.0, slip_sd: float = 0.1,
                       sd_signal: float = 0.8) -> SimulatedBenchmark:
    """Draw ``replications`` independent benchmarks of ``queries`` queries (see the module docstring).

    ``skill`` 0 gives a judge blind to relevance (judge and human differences uncorrelated); ``judge_noise``
    is the typical judge noise sd per document (each query's sd is it times a log-normal factor of sd
    ``heterogeneity``); ``slip_share``/``slip_sd``: the share of queries where the judge slips and the sd of the
    slip on its metric; ``sd_signal`` in (0, 1]: how well the reported ``judge_sd`` tracks the true noise sd (1 =
    exactly; see the module docstring).
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
    doc_sd = sd[..., 0] * np.sqrt((discount**2).sum()) / (3.0 * discount.sum())  # float[R, 1, N]
    # on a share of the queries the judge slips: a per-(system, query) error of sd slip_sd on its metric
    slips = rng.random((r, 1, n)) < slip_share
    query_sd = np.where(slips, slip_sd, 0.0)
    judge = judge + query_sd * rng.normal(size=judge.shape)
    true_sd = np.sqrt(doc_sd**2 + query_sd**2)  # the sd of the judge metric's noise on each query
    # what the judge reports: the true sd misjudged by a log-normal factor, so that log(reported) correlates
    # sd_signal with log(true sd) across queries (1: it knows its noise exactly)
    if not 0.0 < sd_signal <= 1.0:
        raise ValueError(f"sd_signal must be in (0, 1]; got {sd_signal}")
    spread = np.log(true_sd).std(-1, keepdims=True)
    tau = spread * np.sqrt(1.0 - sd_signal**2) / sd_signal
    reported = true_sd * np.exp(tau * rng.normal(size=true_sd.shape))
    judge_sd = np.broadcast_to(reported, human.shape)
    pairs = tuple((a, b) for a in range(s) for b in range(a + 1, s))
    return SimulatedBenchmark(human=human, judge=judge, judge_sd=np.array(judge_sd), systems=names, pairs=pairs,
                              noise_sd=np.array(np.broadcast_to(true_sd, human.shape)))


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


def replicate(bench: SimulatedBenchmark, rng: np.random.Generator, fraction: float, *, scheme: str = "random",
              level: float = 0.9, uniform_share: float = 0.2, target: str = "benchmark",
              signals: str = "sd+spread", draw: str = "fixed") -> ReplicatedComparison:
    """Label ``fraction`` of the queries in every replication and estimate every pair's human difference.

    ``scheme``: ``random`` (a simple random sample of exactly ``fraction * N`` queries) or ``active`` (one round:
    each query drawn with probability ``pi_i`` from :func:`inclusion_probabilities` of the predicted residual size,
    the same number of labels; the estimators weight the labels by ``1/pi``). ``signals`` (active): what predicts
    the residual size: ``sd+spread`` (default, :func:`judge_signal_scale` of the judge's differences and reported
    sd), ``spread`` (the differences alone) or ``sd`` (:func:`uncertainty_scale` of the reported sd alone).
    ``draw`` (active): ``fixed`` (default, :func:`draw_fixed_size`: exactly the budget) or ``poisson``
    (independent draws: the budget in expectation). ``target``: passed to the estimators; ``truth`` (and ``covered``)
    stay the benchmark mean.
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
    elif scheme == "active":
        sd = bench.judge_sd
        pair_sd = np.sqrt(sd[:, [a for a, _ in bench.pairs]] ** 2 + sd[:, [b for _, b in bench.pairs]] ** 2)
        if signals == "sd":
            score = uncertainty_scale(pair_sd)
        elif signals == "spread":
            score = judge_signal_scale(f)
        elif signals == "sd+spread":
            score = judge_signal_scale(f, pair_sd)
        else:
            raise ValueError(f"unknown signals {signals!r}")
        pi = inclusion_probabilities(score, budget, np.ones((r, n), bool), uniform_share=uniform_share)
        drawn = draw_fixed_size(rng, pi) if draw == "fixed" else rng.random((r, n)) < pi
        y = np.where(drawn[:, None, :], y_all, np.nan)
        anchored = anchored_mean(y, f, pi[:, None, :], level=level, target=target)
        human = human_only_mean(y, pi[:, None, :], level=level, target=target)
        labels = drawn.sum(-1).astype(float)
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
    )

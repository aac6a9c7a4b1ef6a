"""A generative simulator of an RCP judge with known truth.

Every query j has documents with a latent relevance ``r_i`` on one scale common to all queries: the
calibrated ability of METHOD section 3, so the true gain of a document is ``gain(r_i, gamma, beta)``.

* **Stage A** (tournament). In a window, the judge's score of document i is::

      s_i = clip(round_to(d_j * (r_i + kappa * (r_i - mean_window r)) + shift_j + eps_i, resolution), -c, c)

  with a query-specific decisiveness ``d_j`` (so raw BT scales differ between queries: BT recovers
  ``d_j * r`` up to a constant), a query-specific shift (pushes scores against the clip), a context
  effect ``kappa`` (documents look better beside weaker ones and worse beside stronger ones) and noise
  ``eps ~ N(0, noise^2)``, clipped to the judge's scale ``[-c, c]`` (``c = 5``: METHOD's -5..+5). The exact
  calibration of BT scores is then ``tau_j = 1 / d_j`` and ``alpha_j = mean_j(r)`` up to the context effect and
  clipping.
* **Stage B** (rubric). Each criterion answer of a placement is Bernoulli with
  ``P(yes) = sigmoid(gamma_c (r_i - beta_c))`` - a 2PL with chosen item parameters.

Plain NumPy with explicit ``numpy.random.Generator`` objects, so that the judging layer's simulated
judge and the tests can share it without JAX.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Published NanoBEIR item parameters (judge Qwen3.5-397B): sum(gamma) = 5, mean(beta) = 0.
NANOBEIR_GAMMA = np.array([1.169, 1.047, 0.940, 1.157, 0.687])
NANOBEIR_BETA = np.array([-2.572, -2.002, -0.251, 0.709, 4.116])


def true_gain(relevance: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Gain of latent relevance (same formula as ``rcp_jax.gain``), float64 of relevance's shape."""
    r = np.asarray(relevance, dtype=np.float64)[..., None]
    p = 1.0 / (1.0 + np.exp(-gamma * (r - beta)))
    return (gamma * p).sum(-1) / gamma.sum()


@dataclass(frozen=True)
class JudgeTruth:
    """The true parameters of a simulated collection.

    Attributes:
        relevance: list of float64[n_j], latent relevance of each document of query j.
        decisiveness: float64[Q] judge decisiveness ``d_j`` (Stage A score units per relevance unit).
        shift: float64[Q] judge score shift of each query.
        gamma, beta: float64[C] true rubric item parameters.
        noise: Stage A score noise SD; kappa: context effect; resolution: score rounding step (0 = none);
        clip: end of the score scale (scores are clipped to ``[-clip, clip]``).
    """

    relevance: list[np.ndarray]
    decisiveness: np.ndarray
    shift: np.ndarray
    gamma: np.ndarray = field(default_factory=lambda: NANOBEIR_GAMMA.copy())
    beta: np.ndarray = field(default_factory=lambda: NANOBEIR_BETA.copy())
    noise: float = 1.0
    kappa: float = 0.15
    resolution: float = 1.0
    clip: float = 5.0

    @property
    def n_docs(self) -> np.ndarray:
        return np.array([len(r) for r in self.relevance])

    def gains(self, query: int) -> np.ndarray:
        """True gains float64[n_j] of query ``query``."""
        return true_gain(self.relevance[query], self.gamma, self.beta)


def simulate_truth(
    rng: np.random.Generator,
    n_docs,
    *,
    gamma: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    decisiveness_range: tuple[float, float] = (0.5, 1.6),
    noise: float = 1.0,
    kappa: float = 0.15,
    resolution: float = 1.0,
    clip: float = 5.0,
) -> JudgeTruth:
    """Draw a collection: per query a difficulty, a spread, a decisiveness and a shift.

    Args:
        rng: NumPy generator.
        n_docs: int[Q] pool sizes (or a sequence of ints).
        gamma, beta: true item parameters (default: the published NanoBEIR values).
        decisiveness_range: ``d_j`` is log-uniform in this range (about 3x spread, as the paper's tau).
        noise, kappa, resolution, clip: Stage A judge noise, context effect, score rounding and scale end.

    Relevance: ``r_i = mu_j + sd_j z_i`` with ``mu_j ~ N(0, 1)``, ``sd_j ~ U(1.5, 2.5)``.
    """
    n_docs = np.asarray(n_docs, dtype=np.int64)
    q = len(n_docs)
    mu = rng.normal(0.0, 1.0, q)
    sd = rng.uniform(1.5, 2.5, q)
    relevance = [mu[j] + sd[j] * rng.standard_normal(int(n_docs[j])) for j in range(q)]
    lo, hi = np.log(decisiveness_range[0]), np.log(decisiveness_range[1])
    return JudgeTruth(
        relevance=relevance,
        decisiveness=np.exp(rng.uniform(lo, hi, q)),
        shift=rng.normal(0.0, 1.0, q),
        gamma=NANOBEIR_GAMMA.copy() if gamma is None else np.asarray(gamma, dtype=np.float64),
        beta=NANOBEIR_BETA.copy() if beta is None else np.asarray(beta, dtype=np.float64),
        noise=noise, kappa=kappa, resolution=resolution, clip=clip,
    )


def window_scores(rng: np.random.Generator, truth: JudgeTruth, query: int, docs: np.ndarray) -> np.ndarray:
    """Stage A judge scores float64[w] of documents ``docs`` (indices into query ``query``)."""
    r = truth.relevance[query][np.asarray(docs)]
    raw = truth.decisiveness[query] * (r + truth.kappa * (r - r.mean())) + truth.shift[query]
    raw = raw + rng.normal(0.0, truth.noise, len(r))
    if truth.resolution > 0:
        raw = np.round(raw / truth.resolution) * truth.resolution
    return np.clip(raw, -truth.clip, truth.clip)


def rubric_answers(rng: np.random.Generator, truth: JudgeTruth, query: int, docs: np.ndarray, *,
                   severity: float = 0.0, discrimination: float = 1.0) -> np.ndarray:
    """Stage B answers int8[w, C] (1 = yes) of documents ``docs`` of query ``query``.

    ``severity`` and ``discrimination`` make another judge of the same criteria:
    ``P(yes) = sigmoid(discrimination * gamma_c (r_i - beta_c - severity))`` (a stricter judge has
    severity > 0; the pooled model of :mod:`rcp_jax.models.irt_judges` estimates both).
    """
    r = truth.relevance[query][np.asarray(docs)]
    p = 1.0 / (1.0 + np.exp(-discrimination * truth.gamma * (r[:, None] - truth.beta - severity)))
    return (rng.random(p.shape) < p).astype(np.int8)


def balanced_windows(rng: np.random.Generator, n: int, w: int, placements: float) -> list[np.ndarray]:
    """Random windows in which every document appears about ``placements`` times.

    Each window takes the ``w`` least-shown documents (random tie-break), in shuffled order. A simple
    stand-in for the full RCP schedule, for tests and benchmarks of the fits.

    Returns:
        list of int[min(w, n)] document indices.
    """
    k = min(w, n)
    n_windows = max(1, int(round(placements * n / k)))
    shown = np.zeros(n)
    out = []
    for _ in range(n_windows):
        pick = np.lexsort((rng.random(n), shown))[:k]
        shown[pick] += 1
        out.append(rng.permutation(pick))
    return out


@dataclass(frozen=True)
class SimulatedJudgements:
    """Simulated Stage A and Stage B data of a collection, as flat arrays.

    Attributes:
        truth: the :class:`JudgeTruth` they were drawn from.
        window_docs: int[W, w] document indices (-1 padding); window_scores: float64[W, w];
        window_query: int[W].
        rubric_query, rubric_doc: int[P] query and document of each rubric placement;
        rubric_answers: int8[P, C].
    """

    truth: JudgeTruth
    window_docs: np.ndarray
    window_scores: np.ndarray
    window_query: np.ndarray
    rubric_query: np.ndarray
    rubric_doc: np.ndarray
    rubric_answers: np.ndarray


def simulate_judgements(
    seed: int,
    n_docs,
    *,
    w: int = 10,
    tournament_placements: float = 14.0,
    rubric_placements: float = 6.7,
    truth: JudgeTruth | None = None,
    severity: float = 0.0,
    discrimination: float = 1.0,
    **truth_kwargs,
) -> SimulatedJudgements:
    """Simulate a whole collection's Stage A windows and Stage B placements.

    Args:
        seed: random seed (queries draw from independent streams ``(seed, j)``).
        n_docs: int[Q] pool sizes.
        w: window size.
        tournament_placements, rubric_placements: windows per document in each stage.
        truth: use this truth instead of drawing one (then ``truth_kwargs`` are ignored).
        severity, discrimination: the rubric judge's offset and scale (:func:`rubric_answers`); give the
            same ``truth`` and another ``seed`` to simulate a second judge of the same collection.
        **truth_kwargs: passed to :func:`simulate_truth`.
    """
    n_docs = np.asarray(n_docs, dtype=np.int64)
    if truth is None:
        truth = simulate_truth(np.random.default_rng([seed, 0x5EED]), n_docs, **truth_kwargs)
    docs, scores, wq, rq, rd, ans = [], [], [], [], [], []
    for j, n in enumerate(n_docs):
        rng = np.random.default_rng([seed, int(j)])
        for win in balanced_windows(rng, int(n), w, tournament_placements):
            row = np.full(w, -1)
            row[: len(win)] = win
            sc = np.zeros(w)
            sc[: len(win)] = window_scores(rng, truth, j, win)
            docs.append(row)
            scores.append(sc)
            wq.append(j)
        for win in balanced_windows(rng, int(n), w, rubric_placements):
            rq.extend([j] * len(win))
            rd.extend(win.tolist())
            ans.append(rubric_answers(rng, truth, j, win, severity=severity, discrimination=discrimination))
    return SimulatedJudgements(
        truth=truth,
        window_docs=np.array(docs, dtype=np.int64),
        window_scores=np.array(scores),
        window_query=np.array(wq, dtype=np.int64),
        rubric_query=np.array(rq, dtype=np.int64),
        rubric_doc=np.array(rd, dtype=np.int64),
        rubric_answers=np.concatenate(ans).astype(np.int8),
    )

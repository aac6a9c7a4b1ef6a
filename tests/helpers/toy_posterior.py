"""A toy gain posterior for the budget tests (no fit: random scores and their logistic gains)."""

from __future__ import annotations

import numpy as np

from rcp_jax.budget.gains import GainPosterior


def toy_posterior(rng: np.random.Generator, q: int = 3, n: int = 12, draws: int = 64) -> GainPosterior:
    """A gain posterior of ``q`` queries x ``n`` documents (all present) with random scores, gains their
    logistic, and ``draws`` noisy gain draws (sd 0.03): enough for the budget criterion's pieces."""
    mask = np.ones((q, n), dtype=bool)
    theta = rng.normal(0, 1.5, (q, n))
    gain = 1 / (1 + np.exp(-theta))
    noise = rng.normal(0, 0.03, (draws, q, n))
    return GainPosterior(query_ids=[f"q{i}" for i in range(q)],
                         doc_ids=np.array([[f"q{i}-{j}" for j in range(n)] for i in range(q)], dtype=object),
                         mask=mask, theta=theta, se=np.full((q, n), 0.5), tau=np.ones(q), alpha=np.zeros(q),
                         cov=np.tile(np.eye(2) * 0.01, (q, 1, 1)), gamma=np.ones(5), beta=np.zeros(5), gain=gain,
                         slope=gain * (1 - gain), draws=(gain[None] + noise).astype(np.float32))

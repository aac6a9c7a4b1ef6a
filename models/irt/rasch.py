"""Per-query Rasch model ``sigmoid(theta_i - beta_c)`` (beta centred, ridge), used to stratify Stage B windows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rcp_jax.models._newton import lm_newton
from rcp_jax.models.irt.items import DEFAULT_RIDGE, _binomial_nll


def _rasch_objective(y, passes, trials, ridge):
    """Mean-BCE Rasch objective of one query; ``y = [theta (N), v (C)]``, passes/trials float[N, C]."""
    n = passes.shape[0]
    theta, v = y[:n], y[n:]
    beta = v - v.mean()
    logit = theta[:, None] - beta[None, :]
    total = jnp.maximum(trials.sum(), 1.0)
    return _binomial_nll(logit, passes, trials).sum() / total + 0.5 * ridge * ((theta**2).sum() + (v**2).sum())


def fit_rasch(
    passes: np.ndarray, trials: np.ndarray, *, ridge: float = DEFAULT_RIDGE, dtype=jnp.float32, max_iter: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Per-query Rasch abilities and difficulties.

    Args:
        passes: float[Q, N, C] "yes" answers per document and criterion (pad with 0).
        trials: float[Q, N, C] answers per document and criterion (0 on padding).

    Returns:
        (theta float64[Q, N], beta float64[Q, C]) with beta centred per query.
    """
    passes = np.asarray(passes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    q, n, c = passes.shape
    # padded to few shapes (queries: a power of two, at least 16; documents: a multiple of 16) so that
    # other collections reuse the compiled solver; a padding document or query has no answers, its
    # ability stays 0 and it changes no other estimate
    q_pad, n_pad = max(16, 1 << max(0, int(q - 1).bit_length())), max(16, -(-n // 16) * 16)
    pad = ((0, q_pad - q), (0, n_pad - n), (0, 0))
    passes, trials = np.pad(passes, pad), np.pad(trials, pad)
    x64 = jnp.dtype(dtype) == jnp.float64
    with jax.enable_x64(x64):
        # ridge travels as an argument (not a partial): the compiled solver is reused across calls
        y, _, _ = lm_newton(
            _rasch_objective, jnp.zeros((q_pad, n_pad + c), dtype),
            (jnp.asarray(passes, dtype), jnp.asarray(trials, dtype), jnp.full((q_pad,), ridge, dtype)),
            max_iter=max_iter, tol=1e-10 if x64 else 1e-5,
        )
        y = np.asarray(y, dtype=np.float64)[:q]
    v = y[:, n_pad:]
    return y[:, :n], v - v.mean(axis=1, keepdims=True)

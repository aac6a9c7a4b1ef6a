"""The gain of abilities (:func:`rcp_jax.metrics.gain`), computed in cache-sized blocks with a branch-free
sigmoid, gives the bits of the one-shot float64[n, C] form (special values, scalars, 1 to 12 criteria)."""

from __future__ import annotations

import numpy as np
import pytest

from rcp_jax.metrics import gain


def _reference_gain(theta, gamma, beta):
    z = gamma * (np.asarray(theta, dtype=np.float64)[..., None] - beta)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return (gamma * out).sum(-1) / gamma.sum()


@pytest.mark.parametrize("c", [1, 3, 5, 8, 12])
def test_gain_blocks_match_the_one_shot_form_bit_for_bit(c):
    rng = np.random.default_rng(c)
    theta = rng.normal(size=40_000) * 4.0
    theta[:7] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 800.0, -800.0]
    gamma, beta = rng.uniform(0.2, 2.0, c), rng.normal(size=c) * 2.0
    np.testing.assert_array_equal(gain(theta, gamma, beta), _reference_gain(theta, gamma, beta))
    grid = theta[7:7 + 600].reshape(20, 30)
    np.testing.assert_array_equal(gain(grid, gamma, beta), _reference_gain(grid, gamma, beta))
    one = gain(0.3, gamma, beta)
    assert isinstance(one, np.float64) and one == _reference_gain(0.3, gamma, beta)

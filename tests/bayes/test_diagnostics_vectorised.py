"""The vectorised R-hat and ESS (rcp_jax.bayes.diagnostics) are ArviZ's, element for element: on autocorrelated
chains (Geyer's sequences truncated at every possible place), ties, constant and NaN elements, odd and tiny draw
counts, one chain; and fit_posterior's diagnostics equal ArviZ's on its posterior."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from rcp_jax.models import inference
from rcp_jax.bayes import diagnostics
from rcp_jax.bayes.posterior import _diagnose


def _chains(rng, c: int, s: int, k: int, phi: float) -> np.ndarray:
    """float[c, s, k]: AR(1) chains with coefficient ``phi`` and a small offset per chain."""
    e = rng.normal(size=(c, s, k))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, s):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x + rng.normal(0.0, 0.3, size=(c, 1, k))


def _arviz(x: np.ndarray, method: str, **kw) -> np.ndarray:
    from arviz_stats.base import array_stats

    fun = array_stats.rhat if method == "rank" else array_stats.ess
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "rank":
            return fun(np.moveaxis(x, 2, 0), chain_axis=-2, draw_axis=-1, method="rank")
        return fun(np.moveaxis(x, 2, 0), chain_axis=-2, draw_axis=-1, method=method, **kw)


@pytest.mark.parametrize("chains, draws", [(4, 500), (2, 200), (1, 100), (4, 101), (3, 7), (2, 4), (2, 3)])
@pytest.mark.parametrize("phi", [0.0, 0.5, 0.95, 0.99, -0.4])
def test_rhat_and_ess_equal_arviz_element_for_element(chains, draws, phi, monkeypatch):
    monkeypatch.setattr(diagnostics, "_BLOCK", 7)  # 30 elements in blocks of 7: the last one partial
    rng = np.random.default_rng([int(1000 * abs(phi)), chains, draws])
    x = _chains(rng, chains, draws, 30, phi)
    x[..., 0] = np.round(x[..., 0])  # many ties
    x[..., 1] = 2.0  # a constant element
    x[0, 0, 2] = np.nan  # an element with a NaN draw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ours = {"rank": diagnostics.rank_rhat(x), "bulk": diagnostics.ess_bulk(x),
                "tail": diagnostics.ess_tail(x, 0.05), "tail89": diagnostics.ess_tail(x, 0.89)}
    refs = {"rank": _arviz(x, "rank"), "bulk": _arviz(x, "bulk"), "tail": _arviz(x, "tail", prob=0.05),
            "tail89": _arviz(x, "tail", prob=0.89)}
    for name, ref in refs.items():
        np.testing.assert_allclose(ours[name], ref, rtol=1e-9, equal_nan=True, err_msg=name)
    assert np.isnan(ours["rank"][2]) and np.isnan(ours["bulk"][2])
    if chains >= 2 and draws >= 4:
        assert np.isfinite(ours["rank"][3:]).all()


def test_average_ranks_are_scipys_with_ties():
    rng = np.random.default_rng(3)
    v = rng.integers(0, 5, size=(40, 60)).astype(float)  # rows full of ties
    v[::3] = rng.normal(size=v[::3].shape)  # and rows without
    np.testing.assert_array_equal(diagnostics._average_ranks(v), stats.rankdata(v, method="average", axis=1))


def test_fit_diagnostics_equal_arviz_on_the_posterior():
    """_diagnose (what fit_posterior reports and warns on) against az.rhat / az.ess on the same DataTree. ArviZ's
    dataset path keeps the float32 draws' precision in places, so agreement is to 1e-6."""
    import arviz as az

    rng = np.random.default_rng(5)
    c, s, q, n = 2, 120, 4, 6
    shapes = {"gamma": (5,), "beta": (5,), "tau": (q,), "alpha": (q,), "gain": (q, n)}
    dims = {"gamma": ["criterion"], "beta": ["criterion"], "tau": ["query"], "alpha": ["query"], "gain": ["query", "doc"]}
    values = {k: _chains(rng, c, s, int(np.prod(shape)), 0.6).reshape((c, s) + shape).astype(np.float32)
              for k, shape in shapes.items()}
    values["gain"][:, :, 0, -1] = np.nan  # a padded document
    ds = xr.Dataset({k: (["chain", "draw"] + dims[k], v) for k, v in values.items()})
    dt = xr.DataTree.from_dict({"posterior": ds})
    draws = inference.Draws(samples=values, stats={"diverging": np.zeros((c, s), bool)}, method="nuts")
    got = _diagnose(dt, draws, "frozen")
    params = ["gamma", "beta", "tau", "alpha"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = az.rhat(dt, var_names=params + ["gain"])
        bulk = az.ess(dt, var_names=params + ["gain"], method="bulk")
        tail = az.ess(dt, var_names=params, method="tail")

    def flat(d, names):
        return np.concatenate([np.ravel(d[v].values) for v in names])

    expected = {"max_rhat": np.nanmax(flat(rhat, params)), "min_ess_bulk": np.nanmin(flat(bulk, params)),
                "min_ess_tail": np.nanmin(flat(tail, params)), "max_rhat_gain": np.nanmax(rhat["gain"].values),
                "min_ess_bulk_gain": np.nanmin(bulk["gain"].values)}
    for key, value in expected.items():
        assert got[key] == pytest.approx(float(value), rel=1e-6), key

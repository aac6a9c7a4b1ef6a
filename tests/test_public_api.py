"""The public API of ``rcp_jax``: every name in ``__all__`` resolves (lazily), shows in ``dir()`` and star-imports."""

from __future__ import annotations

import importlib
import types

import pytest

import rcp_jax


def test_every_public_name_resolves():
    assert rcp_jax.__version__ == "0.1.0"
    assert len(rcp_jax.__all__) == len(set(rcp_jax.__all__))
    for name in rcp_jax.__all__:
        value = getattr(rcp_jax, name)
        assert value is not None, name
        assert name in dir(rcp_jax), name
        if name in ("data", "schedule"):
            assert isinstance(value, types.ModuleType) and value.__name__ == f"rcp_jax.{name}"
        elif name != "__version__":
            assert not isinstance(value, types.ModuleType), name
            # the object its defining module exports, not a copy
            assert getattr(importlib.import_module(f"rcp_jax.{rcp_jax._EXPORTS[name]}"), name) is value, name


def test_from_import_and_star_import():
    from rcp_jax import Calibration, DataError, calibrate, evaluate, fit_bradley_terry, posterior_metrics

    assert callable(calibrate) and callable(evaluate) and callable(fit_bradley_terry) and callable(posterior_metrics)
    assert issubclass(DataError, rcp_jax.RcpError) and isinstance(Calibration, type)
    namespace: dict = {}
    exec("from rcp_jax import *", namespace)
    assert set(rcp_jax.__all__) <= set(namespace)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        rcp_jax.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        from rcp_jax import no_such_name  # noqa: F401


def test_a_submodule_does_not_shadow_the_function_of_the_same_name():
    # no module shares a name with a public function any more (posterior_metrics lives in bayes.posterior_ndcg),
    # so importing every submodule, which binds each on its package, leaves every public name as it was
    import pkgutil

    import rcp_jax.bayes.posterior_ndcg as module
    from rcp_jax import posterior_metrics

    for info in pkgutil.walk_packages(rcp_jax.__path__, "rcp_jax."):
        if info.name != "rcp_jax.__main__":
            importlib.import_module(info.name)
    assert rcp_jax.posterior_metrics is module.posterior_metrics is posterior_metrics
    for name in rcp_jax.__all__:
        value = getattr(rcp_jax, name)
        assert isinstance(value, types.ModuleType) == (name in ("data", "schedule")), name

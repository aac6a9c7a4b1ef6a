"""The three packages keep their one-way imports (ARCHITECTURE.md): checked in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _modules_after_import(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _top_level(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


MODELS_MODULES = ["models", "models.bradley_terry", "models.irt", "models.simulate", "models._newton"]


@pytest.mark.parametrize("module", MODELS_MODULES)
def test_models_imports_only_numeric_stack(module):
    top = _top_level(_modules_after_import(f"import {module}"))
    for forbidden in ("pandas", "litellm", "judging", "rcp_jax"):
        assert forbidden not in top, f"{module} imports {forbidden}"


def test_every_models_module_is_covered():
    import pkgutil

    import models

    found = {f"models.{m.name}" for m in pkgutil.iter_modules(models.__path__)}
    extra = sorted(found - set(MODELS_MODULES))
    for module in extra:
        top = _top_level(_modules_after_import(f"import {module}"))
        for forbidden in ("pandas", "litellm", "judging", "rcp_jax"):
            assert forbidden not in top, f"{module} imports {forbidden}"


def test_judging_imports_no_jax():
    import pkgutil

    import judging

    names = ["judging"] + [f"judging.{m.name}" for m in pkgutil.iter_modules(judging.__path__)]
    stmt = "\n".join(f"import {n}" for n in names)
    top = _top_level(_modules_after_import(stmt))
    for forbidden in ("jax", "jaxlib", "numpyro", "optax", "models", "rcp_jax"):
        assert forbidden not in top, f"judging imports {forbidden}"


HEAVY = ("jax", "jaxlib", "numpyro", "optax", "numpy", "pandas", "scipy", "litellm", "matplotlib", "models", "judging")


def test_rcp_jax_imports_cleanly():
    # the public names resolve on first use: importing the package pulls in no numeric stack ...
    top = _top_level(_modules_after_import("import rcp_jax"))
    assert "rcp_jax" in top
    for heavy in HEAVY:
        assert heavy not in top, f"import rcp_jax imports {heavy}"
    # ... and the first use of a fitting function brings in models
    top = _top_level(_modules_after_import("import rcp_jax\nrcp_jax.calibrate"))
    assert "rcp_jax" in top and "models" in top


def test_cli_help_imports_no_numeric_stack():
    stmt = ("import contextlib, io\nfrom rcp_jax.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main([])")
    top = _top_level(_modules_after_import(stmt))
    for heavy in HEAVY:
        assert heavy not in top, f"rcp-jax without a verb imports {heavy}"

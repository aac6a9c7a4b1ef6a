"""judging never imports JAX, NumPyro, models or rcp_jax, and `import judging` does not load litellm."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import judging

FORBIDDEN = ("jax", "jaxlib", "numpyro", "optax", "models", "rcp_jax")


def test_each_module_imports_no_jax_and_judging_is_lazy_about_litellm():
    modules = ["judging"] + [f"judging.{m.name}" for m in pkgutil.iter_modules(judging.__path__)]
    # one fresh interpreter; sys.modules checked after `import judging` and after each module
    code = (
        "import importlib, json, sys\n"
        f"mods = {modules!r}\n"
        "seen = {}\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "    seen[m] = sorted({k.split('.')[0] for k in sys.modules})\n"
        "print(json.dumps(seen))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(seen) == set(modules)
    for module, tops in seen.items():
        bad = sorted(set(tops) & set(FORBIDDEN))
        assert not bad, f"after importing {module}: {bad} are loaded"
        # litellm and aiohttp load only when a judge or the fake server actually runs
        assert "litellm" not in tops, f"{module} imports litellm eagerly"
        assert "aiohttp" not in tops, f"{module} imports aiohttp eagerly"

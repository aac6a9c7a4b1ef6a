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
    """The packages ``mods`` belong to: a third-party top-level name, ``models`` or ``judging`` for the two
    installed under rcp_jax, ``rcp_jax`` for the rest of rcp_jax; the bare facade ``rcp_jax`` (its
    ``__init__`` loads nothing else, tested below) belongs to none, as every rcp_jax.models or
    rcp_jax.judging import runs it."""
    tops = set()
    for m in mods:
        if m == "rcp_jax":
            continue
        for inner in ("models", "judging"):
            if m == f"rcp_jax.{inner}" or m.startswith(f"rcp_jax.{inner}."):
                tops.add(inner)
                break
        else:
            tops.add(m.split(".")[0])
    return tops


MODELS_MODULES = ["rcp_jax.models", "rcp_jax.models.bradley_terry", "rcp_jax.models.irt", "rcp_jax.models.simulate",
                  "rcp_jax.models._newton"]
MODELS_FORBIDDEN = ("pandas", "litellm", "judging", "rcp_jax")


def _packages_after_each(names: list[str]) -> dict[str, set[str]]:
    """The packages (:func:`_top_level`) loaded after importing each of ``names`` in turn, in one fresh
    interpreter.

    The set after module k is the union of the import closures of modules 1..k, so it is free of a package
    exactly when each of those modules alone is, and the first module whose set holds a forbidden package is
    one that imports it: one interpreter does the work of one per module."""
    code = ("import importlib, json, sys\nseen = {}\n"
            f"for m in {names!r}:\n"
            "    importlib.import_module(m)\n"
            "    seen[m] = sorted(sys.modules)\n"
            "print(json.dumps(seen))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m: _top_level(set(mods)) for m, mods in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def _modules_of(package) -> list[str]:
    """Every module of ``package``, its subpackages' modules included."""
    import pkgutil

    return [m.name for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]


@pytest.fixture(scope="module")
def models_imports() -> dict[str, set[str]]:
    """Packages loaded after importing each ``models`` module (the named ones first, then every other)."""
    import rcp_jax.models

    found = set(_modules_of(rcp_jax.models))
    return _packages_after_each(MODELS_MODULES + sorted(found - set(MODELS_MODULES)))


@pytest.mark.parametrize("module", MODELS_MODULES)
def test_models_imports_only_numeric_stack(module, models_imports):
    top = models_imports[module]
    for forbidden in MODELS_FORBIDDEN:
        assert forbidden not in top, f"{module} imports {forbidden}"


def test_every_models_module_is_covered(models_imports):
    import rcp_jax.models

    found = set(_modules_of(rcp_jax.models))
    extra = sorted(found - set(MODELS_MODULES))
    assert set(extra) <= set(models_imports)
    for module in extra:
        top = models_imports[module]
        for forbidden in MODELS_FORBIDDEN:
            assert forbidden not in top, f"{module} imports {forbidden}"


def test_judging_imports_no_jax_and_is_lazy_about_litellm():
    import rcp_jax.judging

    names = ["rcp_jax.judging", *_modules_of(rcp_jax.judging)]
    seen = _packages_after_each(names)
    assert len(seen) == len(names) > 10
    for module in names:
        # litellm and aiohttp load only when a judge actually runs
        bad = seen[module] & {"jax", "jaxlib", "numpyro", "optax", "models", "rcp_jax", "litellm", "aiohttp"}
        assert not bad, f"after importing {module}: {sorted(bad)} are loaded"


HEAVY = ("jax", "jaxlib", "numpyro", "optax", "numpy", "pandas", "scipy", "litellm", "matplotlib", "models", "judging")


def test_rcp_jax_imports_cleanly():
    # the public names resolve on first use: importing the package pulls in no numeric stack ...
    loaded = _modules_after_import("import rcp_jax")
    assert {m for m in loaded if m.split(".")[0] == "rcp_jax"} == {"rcp_jax"}
    top = _top_level(loaded)
    for heavy in HEAVY:
        assert heavy not in top, f"import rcp_jax imports {heavy}"
    # ... and the first use of a fitting function brings in models
    top = _top_level(_modules_after_import("import rcp_jax\nrcp_jax.calibrate"))
    assert "rcp_jax" in top and "models" in top and "judging" not in top


def test_cli_help_imports_no_numeric_stack():
    stmt = ("import contextlib, io\nfrom rcp_jax.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main([])")
    top = _top_level(_modules_after_import(stmt))
    for heavy in HEAVY:
        assert heavy not in top, f"rcp-jax without a verb imports {heavy}"


# --------------------------------------------------------------------------------------------------
# inside rcp_jax: the subpackages' directions, as ARCHITECTURE.md's table states them
# --------------------------------------------------------------------------------------------------
import ast  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "rcp_jax"
# installed package -> repository folder (pyproject.toml's package-dir)
FOLDERS = {"rcp_jax": PKG, "rcp_jax.models": ROOT / "models", "rcp_jax.judging": ROOT / "judging"}


def _module_name(path: Path, package: str, folder: Path) -> str:
    parts = [package, *path.relative_to(folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _rcp_modules() -> dict[str, Path]:
    """Every module of the installed rcp_jax (rcp_jax/, models/ as rcp_jax.models, judging/ as rcp_jax.judging)."""
    return {_module_name(p, package, folder): p for package, folder in FOLDERS.items()
            for p in sorted(folder.rglob("*.py")) if "__pycache__" not in p.parts}


def _unit(module: str) -> str:
    """The unit of ARCHITECTURE.md a module belongs to: its subpackage, or the top-level module itself."""
    return module.split(".")[1] if module.count(".") else "rcp_jax"


def _imports(path: Path, modules: dict[str, Path], typing: bool = False) -> set[str]:
    """rcp_jax modules ``path`` imports anywhere (module level or inside functions; under TYPE_CHECKING only
    when ``typing``).

    ``from rcp_jax.a import b`` counts as importing ``rcp_jax.a.b`` when that is a module, else ``rcp_jax.a``;
    ``from rcp_jax import __version__`` counts as nothing (the version is not a dependency).
    """
    found: set[str] = set()

    def visit(nodes) -> None:
        for node in nodes:
            if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "rcp_jax":
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:
                        found.add(sub)
                    elif not (node.module == "rcp_jax" and alias.name == "__version__"):
                        found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "rcp_jax")
            visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _architecture_table() -> dict[str, set[str] | None]:
    """ARCHITECTURE.md's table ``| unit | job | may import |``: unit -> allowed units (None = any)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+/?)` \|[^|\n]*\| ([^|\n]*) \|$", text, re.M)
    table: dict[str, set[str] | None] = {}
    for unit, allowed in rows:
        name = unit.removesuffix("/").removesuffix(".py")
        table[name] = None if allowed.strip().startswith("any") else {
            a.removesuffix("/").removesuffix(".py") for a in re.findall(r"`([\w./]+)`", allowed)}
    return table


def _units(modules: dict[str, Path]) -> set[str]:
    return {_unit(m) for m in modules} - {"rcp_jax"}


def test_architecture_table_names_every_unit_of_rcp_jax():
    table, units = _architecture_table(), _units(_rcp_modules())
    assert set(table) == units, (f"ARCHITECTURE.md's table lacks {sorted(units - set(table))} and lists "
                                 f"{sorted(set(table) - units)} that do not exist: keep the map true")
    for unit, allowed in table.items():
        assert allowed is None or allowed <= units, f"{unit}: unknown units {sorted(allowed - units)} in the table"


def test_rcp_jax_imports_follow_the_architecture_table():
    modules, table = _rcp_modules(), _architecture_table()
    wrong = []
    for module, path in modules.items():
        unit = _unit(module)
        allowed = table.get(unit, set())
        for target in _imports(path, modules):
            to = _unit(target)
            if to == "rcp_jax":
                wrong.append(f"{module} imports from the facade rcp_jax (import the defining module instead)")
            elif to != unit and allowed is not None and to not in allowed:
                wrong.append(f"{module} ({unit}) imports {target} ({to}): not in ARCHITECTURE.md's table")
    assert not wrong, "\n".join(wrong)


def test_the_table_keeps_the_named_directions():
    table = _architecture_table()
    never = {("data", "cli"), ("stats", "cli"), ("schedule", "bayes"), ("data", "stats"), ("metrics", "stats")}
    above: list[str] = []
    for unit, allowed in table.items():
        if allowed is None:
            assert unit == "cli", f"only the CLI may import any unit, not {unit}"
        else:
            # the rows are layers: a unit imports only units listed above it (so no circle between units)
            assert allowed <= set(above), f"{unit} may import {sorted(allowed - set(above))}, listed below it"
            for a, b in never:
                assert not (unit == a and b in allowed), f"{a} must never import {b}"
            # plots, the demo and the pipeline are leaves: only the CLI uses them
            for leaf in ("plots", "demo", "pipeline", "cli"):
                assert unit == "__main__" or leaf not in allowed, f"{unit} may not import {leaf}: only the CLI does"
        above.append(unit)


def _module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> modules it imports (also lazily, also for type hints) plus the packages (``__init__``) they lie in."""
    graph = {}
    for module, path in modules.items():
        ancestors = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        deps = set()
        for target in _imports(path, modules, typing=True):
            parts = target.split(".")
            deps.add(target)
            deps.update(".".join(parts[:i]) for i in range(2, len(parts)))  # rcp_jax.a of rcp_jax.a.b
        graph[module] = {d for d in deps if d in modules and d not in ancestors and d != module}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycles_among_rcp_jax_modules():
    # imports inside functions and for type hints count too: either still ties two modules together
    cycle = _find_cycle(_module_graph(_rcp_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle(tmp_path):
    # the check above could pass by finding nothing: on a made-up package it must name the cycle, including
    # one through a lazy import and a package __init__
    modules = {"rcp_jax.a.x": tmp_path / "x.py", "rcp_jax.b": tmp_path / "b.py", "rcp_jax.a": tmp_path / "a.py"}
    modules["rcp_jax.a.x"].write_text("def f():\n    from rcp_jax.b import g\n")
    modules["rcp_jax.b"].write_text("from rcp_jax.a.y import h\n")
    modules["rcp_jax.a"].write_text("from rcp_jax.a.x import f\n")
    graph = _module_graph(modules)
    assert graph == {"rcp_jax.a.x": {"rcp_jax.b"}, "rcp_jax.b": {"rcp_jax.a"}, "rcp_jax.a": {"rcp_jax.a.x"}}
    assert _find_cycle(graph) == ["rcp_jax.a", "rcp_jax.a.x", "rcp_jax.b", "rcp_jax.a"]
    modules["rcp_jax.a.x"].write_text("def f():\n    pass\n")
    assert _find_cycle(_module_graph(modules)) is None


def test_no_module_shares_a_name_with_a_public_function():
    import importlib
    import pkgutil
    import types

    import rcp_jax

    clashes = []
    for module, path in _rcp_modules().items():
        leaf = module.rsplit(".", 1)[-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == leaf for n in tree.body):
            clashes.append(f"{module} defines {leaf}()")
    # a package's public names and its submodules' names never meet (importing the submodule would rebind it)
    packages = [rcp_jax] + [importlib.import_module(m.name) for m in pkgutil.walk_packages(rcp_jax.__path__, "rcp_jax.")
                            if m.ispkg]
    for pkg in packages:
        subs = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
        public = getattr(pkg, "__all__", [])
        for name in subs & set(public):
            value = getattr(pkg, name)
            if not (isinstance(value, types.ModuleType) and value.__name__ == f"{pkg.__name__}.{name}"):
                clashes.append(f"{pkg.__name__}.{name} is both a submodule and a public {type(value).__name__}")
    assert not clashes, "\n".join(clashes)


@pytest.mark.parametrize("module, forbidden", [
    ("rcp_jax.data", ("jax", "scipy", "matplotlib", "judging", "models")),
    ("rcp_jax.judging", ("jax", "numpyro", "optax", "scipy", "matplotlib", "litellm", "aiohttp", "models", "rcp_jax")),
    ("rcp_jax.evaluation", ("jax", "scipy", "matplotlib", "judging", "models")),
    ("rcp_jax.schedule", ("jax", "pandas", "scipy", "matplotlib", "models")),
    ("rcp_jax.cli", HEAVY),
])
def test_subpackages_import_only_what_they_need(module, forbidden):
    # a subpackage's __init__ names its surface with plain imports: they must stay as light as the modules
    top = _top_level(_modules_after_import(f"import {module}"))
    for heavy in forbidden:
        assert heavy not in top, f"import {module} imports {heavy}"

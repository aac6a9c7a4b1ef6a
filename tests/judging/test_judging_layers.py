"""judging/'s own units keep the one-way imports of ARCHITECTURE.md's judging table (read from the file)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JUDGING = ROOT / "judging"  # installed as rcp_jax.judging (pyproject.toml's package-dir)
PACKAGE = "rcp_jax.judging"


def _modules(folder: Path) -> dict[str, Path]:
    """Every module under ``folder`` by its installed name (``rcp_jax.judging.store.records``)."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = [PACKAGE, *path.relative_to(folder).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _unit(module: str, folder: Path) -> str:
    """The table's name of the unit ``module`` lies in: ``judging/store/`` for a subpackage's module,
    ``judging/run.py`` for a top-level module, ``judging/__init__.py`` for the package itself."""
    rest = module.split(".")[2:]
    if not rest:
        return "judging/__init__.py"
    return f"judging/{rest[0]}/" if (folder / rest[0]).is_dir() else f"judging/{rest[0]}.py"


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """rcp_jax.judging modules ``path`` imports anywhere: module level, inside functions, for type hints.
    ``from rcp_jax.judging.a import b`` counts as ``rcp_jax.judging.a.b`` when that is a module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; judging imports by the full name")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE))
    return found


def _table(text: str) -> dict[str, set[str] | None]:
    """The judging section's ``| unit | job | may import |`` rows, in order: unit -> allowed units (None = any)."""
    section = text.split("## `judging/`", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(judging/[\w.]+/?)` \|[^|\n]*\| ([^|\n]*) \|$", section, re.M)
    return {unit: None if allowed.strip().startswith("any") else set(re.findall(r"`(judging/[\w./]+)`", allowed))
            for unit, allowed in rows}


def _wrong_imports(folder: Path, table: dict[str, set[str] | None]) -> list[str]:
    modules = _modules(folder)
    wrong = []
    for module, path in modules.items():
        unit = _unit(module, folder)
        allowed = table.get(unit, set())
        for target in _imports(path, modules):
            to = _unit(target, folder)
            if to != unit and allowed is not None and to not in allowed:
                wrong.append(f"{module} ({unit}) imports {target} ({to}): not in ARCHITECTURE.md's judging table")
    return wrong


def _architecture() -> dict[str, set[str] | None]:
    return _table((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))


def test_the_judging_table_names_every_unit_once_and_forms_layers():
    table = _architecture()
    units = {_unit(m, JUDGING) for m in _modules(JUDGING)}
    assert set(table) == units, (f"ARCHITECTURE.md's judging table lacks {sorted(units - set(table))} and lists "
                                 f"{sorted(set(table) - units)} that do not exist: keep the map true")
    above: set[str] = set()
    for unit, allowed in table.items():
        # each row imports only rows above it, so no two units import each other, directly or round a circle
        assert allowed is None or allowed <= above, f"{unit} may import {sorted(allowed - above)}, listed below it"
        above.add(unit)
    assert [u for u, allowed in table.items() if allowed is None] == ["judging/__init__.py"]
    assert list(table)[-1] == "judging/__init__.py" and list(table)[0] == "judging/errors.py"


def test_judging_imports_follow_the_judging_table():
    wrong = _wrong_imports(JUDGING, _architecture())
    assert not wrong, "\n".join(wrong)


def test_subpackage_inits_import_nothing():
    # the public names are in judging/__init__.py only: a subpackage __init__ that imported its modules would
    # load them (and what they import) whenever any one module of the subpackage is imported
    for init in sorted(JUDGING.glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))], f"{init} imports"


def test_the_fake_server_is_not_in_the_package():
    assert not list(JUDGING.rglob("testing_server.py")) and not list(JUDGING.rglob("fake_server.py"))
    assert (ROOT / "benchmarks" / "fixtures" / "fake_server.py").is_file()


def test_the_check_names_an_import_against_the_layers(tmp_path):
    # the checks above could pass by finding nothing: on a made-up judging folder they must name a wrong
    # direction, whether the import is at module level or inside a function
    (tmp_path / "low").mkdir()
    (tmp_path / "__init__.py").write_text("from rcp_jax.judging.top import f\n")
    (tmp_path / "low" / "__init__.py").write_text("")
    (tmp_path / "low" / "a.py").write_text("def g():\n    from rcp_jax.judging.top import f\n")
    (tmp_path / "top.py").write_text("from rcp_jax.judging.low import a\n")
    text = ("## `judging/`: made up\n\n| unit | job | may import |\n|---|---|---|\n"
            "| `judging/low/` | below | nothing |\n| `judging/top.py` | above | `judging/low/` |\n"
            "| `judging/__init__.py` | surface | any unit |\n\n## next\n| `judging/other.py` | elsewhere | nothing |\n")
    table = _table(text)
    assert table == {"judging/low/": set(), "judging/top.py": {"judging/low/"}, "judging/__init__.py": None}
    assert _wrong_imports(tmp_path, table) == [
        "rcp_jax.judging.low.a (judging/low/) imports rcp_jax.judging.top (judging/top.py): "
        "not in ARCHITECTURE.md's judging table"]
    (tmp_path / "low" / "a.py").write_text("def g():\n    pass\n")
    assert _wrong_imports(tmp_path, table) == []

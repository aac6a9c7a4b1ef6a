"""The tests and benchmarks stay organised by concern: no test file named after an issue, no search-path edits
(tests import ``tests.helpers`` and ``benchmarks.fixtures``, benchmarks import ``benchmarks.*``, both from the
repository root), no benchmark importing from ``tests``, no test importing from another test module.

Each check is a plain function over a folder tree, run on the repository and on a small tree holding one
violation of each kind (so a check that finds nothing is known to be able to find something).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A file name that says which issue it came from rather than what it checks (``test_issue20_x.py``).
ISSUE_NAME = re.compile(r"issue[_-]?\d+", re.IGNORECASE)
#: An edit of the import search path: ``sys.path`` inserted into, appended to, extended, sliced or assigned.
PATH_EDIT = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend)\b|\[|\+?=[^=])")
#: Folders never scanned (generated output, caches).
SKIP = {"__pycache__", "out", ".pytest_cache", ".hypothesis"}


def _files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes
                  and not SKIP.intersection(p.relative_to(folder).parts))


def issue_named_files(tests: Path) -> list[str]:
    """Files under ``tests`` whose name holds an issue number."""
    return [str(p.relative_to(tests)) for p in _files(tests, (".py", ".json", ".md")) if ISSUE_NAME.search(p.name)]


def search_path_edits(*folders: Path) -> list[str]:
    """``file:line`` of every edit of ``sys.path`` in the Python and shell files of ``folders``."""
    found = []
    for folder in folders:
        for path in _files(folder, (".py", ".sh")):
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if PATH_EDIT.search(line):
                    found.append(f"{path.relative_to(folder.parent)}:{number}")
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import statement of a Python file, nested ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def benchmark_imports_of_tests(benchmarks: Path) -> list[str]:
    """``file:line module`` of every import of ``tests`` (or a module under it) by a benchmark."""
    return [f"{p.relative_to(benchmarks.parent)}:{line} {module}" for p in _files(benchmarks, (".py",))
            for line, module in _imports(p) if module == "tests" or module.startswith("tests.")]


def imports_of_test_modules(tests: Path) -> list[str]:
    """``file:line module`` of every import of a test module (``test_*``) by another file under ``tests``:
    what two test files share belongs in ``tests/helpers`` (or ``benchmarks/fixtures``)."""
    return [f"{p.relative_to(tests.parent)}:{line} {module}" for p in _files(tests, (".py",))
            for line, module in _imports(p) if module.rsplit(".", 1)[-1].startswith("test_")]


def test_no_test_file_is_named_after_an_issue():
    assert issue_named_files(ROOT / "tests") == []


def test_no_file_of_the_tests_or_benchmarks_edits_the_import_path():
    assert search_path_edits(ROOT / "tests", ROOT / "benchmarks") == []


def test_no_benchmark_imports_from_the_tests():
    assert benchmark_imports_of_tests(ROOT / "benchmarks") == []


def test_no_test_imports_another_test_module():
    assert imports_of_test_modules(ROOT / "tests") == []


def test_each_check_finds_its_violation(tmp_path):
    tests, benchmarks = tmp_path / "tests", tmp_path / "benchmarks"
    (tests / "models").mkdir(parents=True)
    (benchmarks / "fixtures").mkdir(parents=True)
    (tests / "models" / "test_bt_kernel_issue20.py").write_text("")
    (tests / "test_Issue_7_speed.py").write_text("")
    (tests / "models" / "test_bt_kernel.py").write_text("import sys\nsys" + ".path.insert(0, 'x')\n")
    (tests / "test_other.py").write_text("from models.test_bt_kernel import _fit\n")
    (benchmarks / "run.py").write_text("import sys\n\n\ndef f():\n    from tests.helpers.x import y\n"
                                       "    sys" + ".path[:] = []\n")
    (benchmarks / "ok.py").write_text("from benchmarks.fixtures import page_corpus\nprint(sys.path)\n"
                                      "if sys.path == []:\n    pass\n")
    (benchmarks / "run.sh").write_text("python -c 'import sys; sys" + ".path.append(\"tests\")'\n")
    assert issue_named_files(tests) == ["models/test_bt_kernel_issue20.py", "test_Issue_7_speed.py"]
    assert search_path_edits(tests, benchmarks) == ["tests/models/test_bt_kernel.py:2", "benchmarks/run.py:6",
                                                    "benchmarks/run.sh:1"]
    assert benchmark_imports_of_tests(benchmarks) == ["benchmarks/run.py:5 tests.helpers.x"]
    assert imports_of_test_modules(tests) == ["tests/test_other.py:1 models.test_bt_kernel"]

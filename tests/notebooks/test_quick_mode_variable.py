"""One environment variable, ``RCP_JAX_NOTEBOOK_SMALL``, turns on every notebook's quick mode (notebooks, tests
and README name no other)."""

from __future__ import annotations

from pathlib import Path


def test_every_notebook_reads_the_same_quick_mode_variable():
    import re

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"RCP\w*NOTEBOOK\w*")
    seen: dict[str, set[str]] = {}
    for path in [*sorted((root / "notebooks").glob("*.ipynb")), *sorted((root / "tests").rglob("*.py")), root / "README.md"]:
        if path.name == Path(__file__).name:
            continue
        for name in pattern.findall(path.read_text(encoding="utf-8")):
            seen.setdefault(name, set()).add(str(path.relative_to(root)))
    assert set(seen) == {"RCP_JAX_NOTEBOOK_SMALL"}, seen
    notebooks = {p for p in seen["RCP_JAX_NOTEBOOK_SMALL"] if p.endswith(".ipynb")}
    assert notebooks == {str(p.relative_to(root)) for p in (root / "notebooks").glob("*.ipynb")}
    assert "README.md" in seen["RCP_JAX_NOTEBOOK_SMALL"]

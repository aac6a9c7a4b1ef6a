"""What the distribution installs: rcp_jax only, with models/ and judging/ inside it as rcp_jax.models and
rcp_jax.judging, so a user's own ``models`` or ``judging`` package can sit beside a script that uses rcp-jax.

Checked with this checkout's install (editable in development, whatever pip made in CI) and, marked slow,
with a wheel built from the checkout and installed into a fresh virtual environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The script a user runs: their own models/ and judging/ packages are first on sys.path (the script's folder).
USER_SCRIPT = """
import models, judging
assert models.MINE and judging.MINE, "the user's own packages"
import numpy as np
import rcp_jax
from rcp_jax.models.simulate import simulate_judgements
from rcp_jax.judging import builtin_rubric, judge_windows
from rcp_jax.models.bradley_terry import fit_windows
sim = simulate_judgements(0, [6, 7], tournament_placements=4)
fit = fit_windows(sim.window_docs, sim.window_scores, sim.window_query, np.array([6, 7]))
assert np.isfinite(np.asarray(fit.theta)[np.asarray(fit.mask)]).all()
assert len(builtin_rubric().criteria) == 5 and callable(judge_windows)
print("user script ok", rcp_jax.__file__)
"""


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "user_project"
    for name in ("models", "judging"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text("MINE = True\n")
    (folder / "script.py").write_text(USER_SCRIPT)
    return folder


def _run_script(python: str, folder: Path, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([python, "script.py"], cwd=folder, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _declared_packages() -> tuple[list[str], dict[str, str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setuptools["packages"], setuptools["package-dir"]


def test_every_package_folder_is_declared_under_rcp_jax():
    packages, package_dir = _declared_packages()
    assert package_dir == {"rcp_jax.models": "models", "rcp_jax.judging": "judging"}
    assert all(p == "rcp_jax" or p.startswith("rcp_jax.") for p in packages), "a generic top-level name is installed"
    found = set()
    for installed, folder in {"rcp_jax": "rcp_jax", **package_dir}.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((installed, *parts)))
    assert set(packages) == found, (f"pyproject.toml's [tool.setuptools] packages lacks {sorted(found - set(packages))} "
                                    f"and lists {sorted(set(packages) - found)} that do not exist")


def test_a_script_beside_its_own_models_and_judging_packages_uses_rcp_jax(tmp_path):
    out = _run_script(sys.executable, _user_folder(tmp_path))
    assert "user script ok" in out


@pytest.mark.slow
def test_the_built_wheel_installs_only_rcp_jax_and_works_beside_user_packages(tmp_path):
    # built from a copy of what the sdist holds, so the build leaves nothing (build/, *.egg-info) in the checkout
    source, dist = tmp_path / "source", tmp_path / "dist"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("rcp_jax", "models", "judging"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(dist), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel, = dist.glob("rcp_jax-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"rcp_jax"}, f"the wheel installs {sorted(tops)}"
    for needed in ("rcp_jax/models/bradley_terry/__init__.py", "rcp_jax/judging/__init__.py",
                   "rcp_jax/demo/files/corpus.jsonl"):
        assert needed in names
    assert any(n.startswith("rcp_jax/judging/") and n.endswith("rubrics/paper.toml") for n in names)
    assert any(n.startswith("rcp_jax/judging/") and n.endswith("tournament.txt") for n in names)
    assert not any("testing_server" in n or "fake_server" in n for n in names), "a test fixture ships in the wheel"

    # A fresh venv with the wheel; its dependencies come from this environment's site-packages (a path
    # appended by a .pth file: no network, and no editable finder, whose own .pth is not read from there).
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(fresh)
    python = str(fresh / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    here = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "deps_from_test_env.pth").write_text("\n".join(here) + "\n")
    install = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = _run_script(python, _user_folder(tmp_path), env)
    assert f"{site}/rcp_jax/__init__.py" in out, "the script did not import the wheel's rcp_jax"
    cli = subprocess.run([str(fresh / "bin" / "rcp-jax"), "--help"], capture_output=True, text=True, env=env,
                         cwd=tmp_path / "user_project", timeout=300)
    assert cli.returncode == 0 and "demo" in cli.stdout, cli.stderr[-2000:]

"""The README's test command runs in parallel (pytest-xdist), and the grouping that keeps costly fixtures
built once per run holds (the suite under 5 min on 2 cores). In-process checks of the hooks in
``tests/conftest.py`` and of the options in ``pyproject.toml``; no worker is started here.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite(pytestconfig):
    """The module ``tests/conftest.py``, as pytest loaded it."""
    module = pytestconfig.pluginmanager.get_plugin(str(ROOT / "tests" / "conftest.py"))
    assert module is not None, "tests/conftest.py is not loaded"
    return module


def _config(args: list[str], source) -> SimpleNamespace:
    return SimpleNamespace(args=args, args_source=source)


def test_addopts_run_the_suite_on_xdist_workers_by_scope():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    addopts = conf["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "-n" in addopts and addopts[addopts.index("-n") + 1] == "auto"
    assert addopts[addopts.index("--dist") + 1] == "loadscope" and "--no-loadscope-reorder" in addopts
    assert any(d.startswith("pytest-xdist") for d in conf["project"]["optional-dependencies"]["dev"])


def test_auto_workers_one_per_cpu_none_for_named_files(suite, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cpus = len(os.sched_getaffinity(0))
    whole = suite.pytest_xdist_auto_num_workers(_config(["tests"], pytest.Config.ArgsSource.TESTPATHS))
    assert whole == max(1, min(cpus, 8))
    assert suite.pytest_xdist_auto_num_workers(_config(["tests/bayes"], pytest.Config.ArgsSource.ARGS)) == whole
    assert suite.pytest_xdist_auto_num_workers(_config([__file__], pytest.Config.ArgsSource.ARGS)) == 0
    assert suite.pytest_xdist_auto_num_workers(_config([f"{__file__}::test_x", "tests/cli/test_console_script.py"],
                                                       pytest.Config.ArgsSource.ARGS)) == 0
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert suite.pytest_xdist_auto_num_workers(_config([__file__], pytest.Config.ArgsSource.ARGS)) == 3


def test_modules_sharing_a_costly_fixture_share_a_work_unit_and_long_ones_start_first(suite):
    group = suite.suite_group
    joint = group("tests/bayes/test_joint.py::test_joint_posterior_has_latent_theta_and_no_divergences")
    default = group("tests/bayes/test_default_posterior.py::test_decide_calls_only_practically_meaningful_differences")
    assert joint == default and joint[1] == "bayes:noisy_posteriors"
    a, b = group("tests/metrics/test_ndcg.py::test_a"), group("tests/metrics/test_ndcg.py::test_b[x::y]")
    assert a == b and a[1] == "tests/metrics/test_ndcg.py"  # else: the module is the unit
    inference = group("tests/bayes/test_inference.py::test_nuts_50_queries_60_docs_no_divergences_and_rhat_below_1_01")
    assert inference == group("tests/bayes/test_plots.py::t") and inference[1] == "bayes:frozen_posterior"
    demo = group("tests/demo/test_demo_command.py::t")
    assert inference[0] < joint[0] < demo[0] < a[0] == group("tests/pools/test_pools.py::t")[0]
    # the scheduler xdist uses splits test ids by these units
    two = SimpleNamespace(getvalue={"tx": ["popen", "popen"]}.get, getini=lambda name: [],
                          option=SimpleNamespace(loadscopereorder=False, numprocesses=2))
    sched = suite.pytest_xdist_make_scheduler(two, None)
    assert sched.numnodes == 2 and sched._split_scope("tests/bayes/test_notebook.py::test_notebook_runs_in_small_mode") == joint[1]


def test_every_grouped_or_long_module_is_a_test_file(suite):
    """A moved or renamed test file must be renamed in ``SHARED_GROUPS`` / ``LONG_GROUPS`` too (else its costly
    fixture is built on several workers, or it starts last)."""
    paths = [*suite.SHARED_GROUPS, *(g for g in suite.LONG_GROUPS if not g.startswith("bayes:"))]
    assert {g for g in suite.LONG_GROUPS if g.startswith("bayes:")} <= set(suite.SHARED_GROUPS.values())
    missing = [p for p in paths if not (ROOT / p).is_file()]
    assert not missing, f"not test files (moved?): {missing}"

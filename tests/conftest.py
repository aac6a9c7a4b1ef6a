"""Shared fixtures: the project's own published values, the location of ``../shared/data`` and environment
hygiene for every test.

Published figures the tests check (the paper's protocol cases, the release's gain rows) live in
``tests/fixtures/`` and are always there. Third-party data (the Cranfield collection, the RCP authors'
released judge verdicts) lives in ``../shared/data`` beside the checkout (or ``$RCP_JAX_SHARED_DATA``):
a test that needs it takes the ``shared_data`` fixture, which skips the test when the folder is absent
(one reason, printed by ``-ra``), or fails it when ``RCP_JAX_REQUIRE_SHARED=1`` (CI sets it: CI has the data).

Every test, every xdist worker and every ``rcp-jax`` / notebook subprocess a test starts share one
persistent JAX compilation cache, kept between runs in ``~/.cache/rcp-jax/tests-jax`` (or under
``$XDG_CACHE_HOME``; at most 1 GiB, least recently used programs evicted, a file lock between
processes), unless ``JAX_COMPILATION_CACHE_DIR`` is already set: a program compiled once is loaded, not
compiled again, by the next process or run that needs it. It changes no result (the executable is the
same), only the time spent in XLA (about half the CPU of a small NUTS test). A cold run, as on a new
machine: ``JAX_COMPILATION_CACHE_DIR=$(mktemp -d) .venv/bin/python -m pytest -q``.

The README's command runs on pytest-xdist workers; see "Parallel runs" below.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# litellm must never reach for the network from a test.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


#: Size cap of the tests' compilation cache (JAX evicts the least recently used programs beyond it; a cap
#: also makes JAX take a file lock around every read and write, so concurrent workers never see half a file).
TEST_CACHE_MAX_BYTES = 1 << 30


def _test_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rcp-jax" / "tests-jax"


def _share_jax_compilation_cache() -> None:
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    try:
        folder = _test_cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        folder = str(folder)
    except OSError:  # no writable home: one temporary folder for this run
        folder = tempfile.mkdtemp(prefix="rcp-jax-tests-jax-cache-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(TEST_CACHE_MAX_BYTES))
    if "jax" in sys.modules:  # imported before this conftest (a plugin): configure this process too
        import jax

        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        jax.config.update("jax_compilation_cache_max_size", int(os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"]))


_share_jax_compilation_cache()

REPO_ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------
# Parallel runs: pytest-xdist (``-n auto --dist loadscope --no-loadscope-reorder`` in pyproject.toml)
# --------------------------------------------------------------------------------------------------
#: Test modules that share a costly session fixture run on one worker, so it is built once per run:
#: the 50 x 60 NUTS fit (``frozen_posterior``) and the noisy-tournament posteriors (three NUTS fits,
#: ``noisy_posteriors``), both of ``tests/bayes/conftest.py``.
SHARED_GROUPS = {
    "tests/bayes/test_inference.py": "bayes:frozen_posterior",
    "tests/bayes/test_posterior.py": "bayes:frozen_posterior",
    "tests/bayes/test_plots.py": "bayes:frozen_posterior",
    "tests/bayes/test_default_posterior.py": "bayes:noisy_posteriors",
    "tests/bayes/test_joint.py": "bayes:noisy_posteriors",
    "tests/bayes/test_notebook.py": "bayes:noisy_posteriors",
}
#: The longest groups, handed out first, longest first, so that the many short modules fill the workers'
#: tails (longest-processing-time-first scheduling). Cold CPU seconds of each alone (-n 0, a fresh cache,
#: subprocesses included; measured under load, session 7): the two bayes groups ~100-250, the demo command 81,
#: test_cli_posterior 58, test_signals 38, test_own_collection / test_several_judges / bayes test_models 32-33,
#: test_crash_resume 31, the paper notebook 18 (stats/test_diagnostics + calibration/test_rubric_only_degenerate:
#: 15 together, no longer long). Paths are relative to the repository root (tests/test_parallel_suite.py
#: checks that each names a test file).
LONG_GROUPS = ("bayes:frozen_posterior", "bayes:noisy_posteriors", "tests/demo/test_demo_command.py",
               "tests/bayes/test_small_inference.py", "tests/bayes/test_cli_posterior.py",
               "tests/reliability/test_signals.py", "tests/cli/test_own_collection.py",
               "tests/judges/test_several_judges.py", "tests/bayes/test_models.py",
               "tests/reliability/test_crash_resume.py", "tests/notebooks/test_paper_analyses_notebook.py")


def suite_group(nodeid: str) -> tuple[int, str]:
    """(scheduling rank: lower starts earlier, xdist work unit) of a test id: its module, or the
    module's group in ``SHARED_GROUPS``. Every test of a module runs on one worker (module-scoped
    fixtures are built once)."""
    module = nodeid.split("::", 1)[0]
    group = SHARED_GROUPS.get(module, module)
    return (LONG_GROUPS.index(group) if group in LONG_GROUPS else len(LONG_GROUPS)), group


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker per CPU (at most 8), or ``$PYTEST_XDIST_AUTO_NUM_WORKERS``; none (the tests
    run in this process) when the command line names only test files or test ids, the usual way to rerun
    a few tests, where starting workers would cost more than it saves. ``-n 2`` / ``-n 0`` force a count."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if env.strip().isdigit():
        return int(env)
    if config.args_source == pytest.Config.ArgsSource.ARGS and config.args and not any(
            Path(arg.split("::")[0]).is_dir() for arg in config.args):
        return 0
    return max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling with ``suite_group`` as the scope (pytest 9 ignores the test-id suffix
    that xdist's own ``--dist loadgroup`` relies on, so the groups are computed from the ids here)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return suite_group(nodeid)[1]

    return GroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # after every reordering by fixture scope, before xdist sends the collection
def pytest_collection_finish(session) -> None:
    """In an xdist worker: order the collection so the long groups come first (a stable sort: tests keep
    their order within a group); the controller queues the groups in this order (``--no-loadscope-reorder``)."""
    if not hasattr(session.config, "workerinput"):
        return
    ranked = sorted(enumerate(session.items), key=lambda t: (suite_group(t[1].nodeid)[0], t[0]))
    session.items[:] = [item for _, item in ranked]


def shared_data_dir() -> Path:
    """``$RCP_JAX_SHARED_DATA`` or ``<repo>/../shared/data``."""
    return Path(os.environ.get("RCP_JAX_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def published_values() -> dict:
    """``tests/fixtures/published_values.json``: the paper's and the release's numbers the tests check."""
    return json.loads((FIXTURES / "published_values.json").read_text())


def _shared_data_missing(path: Path) -> str | None:
    if (path / "reference").is_dir() and (path / "cranfield").is_dir():
        return None
    return (f"needs ../shared/data (third-party data: the Cranfield collection, the RCP authors' released "
            f"judge verdicts), not found at {path}; set RCP_JAX_SHARED_DATA to its location")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The third-party data folder; the test is skipped without it (failed if ``RCP_JAX_REQUIRE_SHARED=1``)."""
    path = shared_data_dir()
    missing = _shared_data_missing(path)
    if missing is not None:
        if os.environ.get("RCP_JAX_REQUIRE_SHARED", "") not in ("", "0"):
            pytest.fail(f"{missing} (RCP_JAX_REQUIRE_SHARED is set, so this is a failure)", pytrace=False)
        pytest.skip(missing)
    return path


#: The demo queries and systems of the ``demo_tiny`` collection.
DEMO_TINY_QUERIES = ("q01", "q03", "q04")
DEMO_TINY_SYSTEMS = ("bm25", "oracle_noisy")


@pytest.fixture(scope="session")
def demo_tiny(tmp_path_factory) -> dict[str, Path]:
    """A three-query collection cut from the embedded demo, as the files the CLI reads (read-only: write
    stores and reports elsewhere).

    ``rows``: ``rows.jsonl`` (each query with its first 8 pooled documents' texts and its qrels),
    ``runs``: ``runs.csv`` (systems ``bm25`` and ``oracle_noisy`` on those 24 query-document pairs),
    ``qrels``: ``qrels.txt`` (TREC format, every demo qrel of the three queries).
    """
    from rcp_jax.demo import load_demo

    demo = load_demo()
    folder = tmp_path_factory.mktemp("demo_tiny")
    texts = demo.document_texts()
    queries = dict(zip(demo.queries["query_id"], demo.queries["text"]))
    pools = demo.pools.loc[demo.pools["query_id"].isin(DEMO_TINY_QUERIES) & (demo.pools["rank"] <= 8)]
    pools = pools.sort_values(["query_id", "rank"])
    qrels = demo.qrels.loc[demo.qrels["query_id"].isin(DEMO_TINY_QUERIES)]
    with open(folder / "rows.jsonl", "w") as fh:
        for q, pool in pools.groupby("query_id", sort=True):
            docs = pool["doc_id"].tolist()
            graded = {d: int(g) for d, g in zip(qrels["doc_id"], qrels["grade"]) if d in docs and g > 0}
            fh.write(json.dumps({"query_id": q, "query": queries[q], "doc_ids": docs, "docs": [texts[d] for d in docs],
                                 "qrels": graded}) + "\n")
    runs = demo.runs.merge(pools[["query_id", "doc_id"]], on=["query_id", "doc_id"])
    runs.loc[runs["system"].isin(DEMO_TINY_SYSTEMS)].to_csv(folder / "runs.csv", index=False)
    with open(folder / "qrels.txt", "w") as fh:
        for q, d, g in zip(qrels["query_id"], qrels["doc_id"], qrels["grade"]):
            fh.write(f"{q} 0 {d} {int(g)}\n")
    return {"rows": folder / "rows.jsonl", "runs": folder / "runs.csv", "qrels": folder / "qrels.txt"}


@pytest.fixture
def execute_notebook(tmp_path, monkeypatch):
    """Run a notebook top to bottom in a python3 kernel of this very interpreter (the venv, whatever kernels
    the machine has installed), in its small mode (``RCP_JAX_NOTEBOOK_SMALL=1``, Agg backend), and return it
    with its outputs. Raises nbclient's ``CellExecutionError`` on the first failing cell."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (rcp-jax tests)", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("RCP_JAX_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")

    def run(path: Path, *, timeout: int = 300):
        nb = nbformat.read(path, as_version=4)
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}}).execute()
        return nb

    return run


@pytest.fixture
def cli(capfd):
    """``cli(*argv)`` runs one ``rcp-jax`` command in this process: exit code, stdout and stderr as a
    CompletedProcess (a module that needs another shape defines its own ``cli``)."""
    import subprocess

    from rcp_jax.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        capfd.readouterr()  # drop anything printed before
        code = main(list(args))
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["rcp-jax", *args], code, out, err)

    return run

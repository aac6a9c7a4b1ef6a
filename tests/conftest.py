"""Shared fixtures: the location of ``../shared/data`` and environment hygiene for every test.

Every test of a session, and every ``rcp-jax`` / notebook subprocess a test starts, shares one
persistent JAX compilation cache (a temporary folder removed at the end, unless
``JAX_COMPILATION_CACHE_DIR`` is already set): a program compiled once is loaded, not compiled again,
by the next process that needs it. It changes no result (the executable is the same), only the time
the CLI and notebook tests spend in XLA.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# litellm must never reach for the network from a test.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _share_jax_compilation_cache() -> None:
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="rcp-jax-tests-jax-cache-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if "jax" in sys.modules:  # imported before this conftest (a plugin): configure this process too
        import jax

        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


_share_jax_compilation_cache()

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``$RCP_JAX_SHARED_DATA`` or ``<repo>/../shared/data``."""
    return Path(os.environ.get("RCP_JAX_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "reference").is_dir():
        pytest.fail(
            f"shared test data not found at {path}: tests expect the project's ../shared/data beside the "
            "checkout, or set RCP_JAX_SHARED_DATA to its location"
        )
    return path

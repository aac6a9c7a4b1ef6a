"""Shared fixtures: the location of ``../shared/data`` and environment hygiene for every test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# litellm must never reach for the network from a test.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

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

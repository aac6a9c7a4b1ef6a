"""Fixtures of the page-image tests: a tiny generated corpus of page images (tests/pages/page_corpus.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's bundled model map, no network
sys.path.insert(0, str(Path(__file__).resolve().parent))  # page_corpus (also used by benchmarks/page_images.py)

from page_corpus import make_page_corpus  # noqa: E402


@pytest.fixture(scope="session")
def page_corpus(tmp_path_factory):
    """(folder, info) of a 3-query corpus with 6 documents each (page+text, page only, text only)."""
    folder = tmp_path_factory.mktemp("pages")
    return folder, make_page_corpus(folder)

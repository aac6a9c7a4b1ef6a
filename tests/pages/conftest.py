"""Fixtures of the page-image tests: a tiny generated corpus of page images (benchmarks/fixtures/page_corpus.py)."""

from __future__ import annotations

import os

import pytest

from benchmarks.fixtures.page_corpus import make_page_corpus

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's bundled model map, no network


@pytest.fixture(scope="session")
def page_corpus(tmp_path_factory):
    """(folder, info) of a 3-query corpus with 6 documents each (page+text, page only, text only)."""
    folder = tmp_path_factory.mktemp("pages")
    return folder, make_page_corpus(folder)

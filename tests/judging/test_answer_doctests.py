"""The examples in the docstrings of the parser, the renderer and the schemas run as written."""

from __future__ import annotations

import doctest

import pytest

import judging.parse
import judging.render
import judging.schema


@pytest.mark.parametrize("module", [judging.parse, judging.render, judging.schema], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0

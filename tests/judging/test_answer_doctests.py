"""The examples in the docstrings of the parser, the renderer and the schemas run as written."""

from __future__ import annotations

import doctest

import pytest

import rcp_jax.judging.answers.parse
import rcp_jax.judging.prompts.render
import rcp_jax.judging.transport.schema


@pytest.mark.parametrize("module", [rcp_jax.judging.answers.parse, rcp_jax.judging.prompts.render, rcp_jax.judging.transport.schema], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0

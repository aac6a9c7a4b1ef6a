"""JSON schemas of the answers, for endpoints that support structured output (``response_format``).

What the schema says (every form)
---------------------------------
- tournament: ``{"reasoning": str, "ranking": [w ids], "scores": {id: score}}``; every window id is a
  required key of ``scores`` and no other key is allowed; a score is a number in [-5, 5] (the range
  and type the prompt gives: "a score between -5 and +5", fractions allowed); ``ranking`` holds
  exactly w ids of the window;
- rubric: one required entry per window id and no other key, each ``{"reasoning": str, "criteria":
  {"C1": 0|1, ..., "CK": 0|1}}`` (the integers 0 and 1, as the prompt asks);
- lists: ``{"reasoning": str, "better": "A"|"B"}``;
- every object requires all its properties and forbids others (``additionalProperties: false``), and
  ``reasoning`` comes first, so a constrained judge still reasons before it grades.

What JSON Schema cannot say
---------------------------
The prompt asks for a different score per document. JSON Schema has no keyword for "the values of
an object are distinct" (``uniqueItems`` applies to arrays only), so the schema cannot require it.
``uniqueItems`` on ``ranking`` would make it a permutation, but OpenAI's strict mode and vLLM's
xgrammar backend do not accept the keyword, so it is left out too. Distinctness is the parser's job:
a tie is accepted and noted by default (METHOD: a tied pair counts as p = 0.5), or refused with
``distinct=True`` as a ``schema`` error whose detail names the tied ids and value (see
:func:`rcp_jax.judging.answers.parse.parse_tournament`), ready to be quoted in a repair message.

The forms servers accept (:func:`response_format`, ``mode=``)
-------------------------------------------------------------
- ``"json_schema"``: the OpenAI form ``{"type": "json_schema", "json_schema": {"name": ...,
  "schema": ..., "strict": true}}``, for OpenAI, vLLM and SGLang (xgrammar/guidance/outlines
  enforce ``minimum``/``maximum``), recent llama.cpp ``llama-server`` and Ollama's OpenAI endpoint.
  Scores carry ``minimum``/``maximum``.
- ``"json_object_schema"``: llama.cpp's form ``{"type": "json_object", "schema": ...}``, the one
  llama-cpp-python's server reads (it ignores a ``json_schema`` response format) and that
  ``llama-server`` also accepts. llama.cpp turns the schema into a GBNF grammar that ignores
  ``minimum``/``maximum`` on numbers (llama-cpp-python's converter ignores them on integers too), so
  in this form a score is also an ``enum`` of the grid -5, -4.5, ..., 5 (:data:`GRID_STEP`), which
  every grammar converter enforces: this is what keeps a constrained model from answering 547.
- ``"json_object"``: ``{"type": "json_object"}``, any JSON object (no schema).
- ``"off"`` (or ``"none"``): no ``response_format``.

The schema narrows what the model can write; :mod:`rcp_jax.judging.answers.parse` still validates every answer, so a
schema is a help, never a substitute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The score range of the tournament prompt.
SCORE_MIN, SCORE_MAX = -5, 5
#: Step of the score grid written as an ``enum`` in the llama.cpp form (21 values from -5 to 5).
GRID_STEP = 0.5
#: The ``mode`` values :func:`response_format` accepts.
FORMS = ("json_schema", "json_object_schema", "json_object", "off")


def score_grid(step: float = GRID_STEP) -> list[int | float]:
    """The scores -5, -5 + step, ..., 5 (whole ones as integers, so a grammar writes ``2``, not ``2.0``)."""
    if not 0 < step <= SCORE_MAX - SCORE_MIN:
        raise ValueError(f"score_grid: step must be in (0, {SCORE_MAX - SCORE_MIN}], got {step}")
    n = round((SCORE_MAX - SCORE_MIN) / step)
    values = [round(SCORE_MIN + k * step, 6) for k in range(n + 1)]
    if values[-1] != SCORE_MAX:
        values.append(SCORE_MAX)
    return [int(v) if float(v).is_integer() else v for v in values]


def _score_schema(grid: float | None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number", "minimum": SCORE_MIN, "maximum": SCORE_MAX}
    if grid is not None:
        schema["enum"] = score_grid(grid)
    return schema


def tournament_schema(positional: Sequence[str], *, grid: float | None = None) -> dict[str, Any]:
    """Schema of a tournament answer for the window's positional ids ``doc_1 .. doc_w``.

    ``grid``: also restrict each score to the grid -5, -5 + grid, ..., 5 (an ``enum``), for grammar
    engines that ignore ``minimum``/``maximum``; ``None``: the range only.
    """
    ids = list(positional)
    if not ids:
        raise ValueError("tournament_schema: a window needs at least one document")
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "ranking": {
                "type": "array",
                "items": {"type": "string", "enum": ids},
                "minItems": len(ids),
                "maxItems": len(ids),
            },
            "scores": {
                "type": "object",
                "properties": {p: _score_schema(grid) for p in ids},
                "required": ids,
                "additionalProperties": False,
            },
        },
        "required": ["reasoning", "ranking", "scores"],
        "additionalProperties": False,
    }


def rubric_schema(positional: Sequence[str], n_criteria: int) -> dict[str, Any]:
    """Schema of a rubric answer with criteria C1..C``n_criteria`` for ids ``doc_1 .. doc_w``."""
    ids = list(positional)
    if not ids or n_criteria < 1:
        raise ValueError(f"rubric_schema: need documents and n_criteria >= 1 (got {len(ids)}, {n_criteria})")
    names = [f"C{k + 1}" for k in range(n_criteria)]
    entry = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "criteria": {
                "type": "object",
                "properties": {c: {"type": "integer", "enum": [0, 1]} for c in names},
                "required": names,
                "additionalProperties": False,
            },
        },
        "required": ["reasoning", "criteria"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {p: entry for p in ids},
        "required": ids,
        "additionalProperties": False,
    }


def lists_schema() -> dict[str, Any]:
    """Schema of a two-list answer: a reasoning and the better list, ``"A"`` or ``"B"``."""
    return {
        "type": "object",
        "properties": {"reasoning": {"type": "string"}, "better": {"type": "string", "enum": ["A", "B"]}},
        "required": ["reasoning", "better"],
        "additionalProperties": False,
    }


def answer_schema(stage: str, positional: Sequence[str], n_criteria: int, *, grid: float | None = None) -> dict[str, Any]:
    """The bare JSON schema of an answer for ``stage`` (``grid``: see :func:`tournament_schema`)."""
    if stage == "lists":
        return lists_schema()
    if stage == "tournament":
        return tournament_schema(positional, grid=grid)
    if stage == "rubric":
        return rubric_schema(positional, n_criteria)
    raise ValueError(f"answer_schema: unknown stage {stage!r}")


def response_format(stage: str, positional: Sequence[str], n_criteria: int, mode: str) -> dict[str, Any] | None:
    """The ``response_format`` argument for ``mode`` (one of :data:`FORMS`; see the module docstring).

    >>> response_format("lists", (), 0, "json_object_schema")["type"]
    'json_object'
    >>> response_format("tournament", ("doc_1", "doc_2"), 0, "json_schema")["json_schema"]["strict"]
    True
    """
    if mode in ("off", "none"):
        return None
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "json_schema":
        schema = answer_schema(stage, positional, n_criteria)
        return {"type": "json_schema", "json_schema": {"name": f"{stage}_answer", "schema": schema, "strict": True}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": answer_schema(stage, positional, n_criteria, grid=GRID_STEP)}
    raise ValueError(f"response_format: mode must be one of {FORMS}, got {mode!r}")

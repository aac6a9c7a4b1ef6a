"""JSON schemas of the answers, for endpoints that support structured output (``response_format``).

The schema narrows what the model can write; :mod:`judging.parse` still validates every answer, so a
schema is a help, never a substitute (ranges and "each document once" are checked there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def tournament_schema(positional: Sequence[str]) -> dict[str, Any]:
    """Schema of a tournament answer for the window's positional ids ``doc_1 .. doc_w``."""
    ids = list(positional)
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "ranking": {"type": "array", "items": {"type": "string", "enum": ids}},
            "scores": {
                "type": "object",
                "properties": {p: {"type": "number"} for p in ids},
                "required": ids,
                "additionalProperties": False,
            },
        },
        "required": ["reasoning", "ranking", "scores"],
        "additionalProperties": False,
    }


def rubric_schema(positional: Sequence[str], n_criteria: int) -> dict[str, Any]:
    """Schema of a rubric answer with criteria C1..C``n_criteria`` for ids ``doc_1 .. doc_w``."""
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
    ids = list(positional)
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


def response_format(stage: str, positional: Sequence[str], n_criteria: int, mode: str) -> dict[str, Any] | None:
    """The ``response_format`` argument for ``mode`` ``"json_schema"``, ``"json_object"`` or ``"off"``."""
    if mode == "off":
        return None
    if mode == "json_object":
        return {"type": "json_object"}
    if stage == "lists":
        schema = lists_schema()
    elif stage == "tournament":
        schema = tournament_schema(positional)
    else:
        schema = rubric_schema(positional, n_criteria)
    return {"type": "json_schema", "json_schema": {"name": f"{stage}_answer", "schema": schema, "strict": True}}

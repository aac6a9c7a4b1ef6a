"""Structured-output schemas: scores carry the prompt's range (and, in llama.cpp's
form, a grid every grammar converter enforces), every window document is a required key, nothing
else is allowed, rubric answers are 0/1; the forms are the ones OpenAI/vLLM and llama.cpp accept;
whatever a schema accepts, the parser accepts too."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rcp_jax.judging.answers.parse import parse_lists, parse_rubric, parse_tournament
from rcp_jax.judging.prompts.render import positional_ids
from rcp_jax.judging.transport.schema import FORMS, GRID_STEP, answer_schema, response_format, score_grid

jsonschema = pytest.importorskip("jsonschema")

POS = positional_ids(3)


def valid(schema: dict, answer: dict) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(answer)


def tour(scores: dict, ranking=None) -> dict:
    return {"reasoning": "r", "ranking": list(ranking if ranking is not None else scores), "scores": scores}


def rub(values: dict) -> dict:
    return {p: {"reasoning": "r", "criteria": {f"C{k + 1}": v for k, v in enumerate(vals)}} for p, vals in values.items()}


OPENAI = response_format("tournament", POS, 0, "json_schema")["json_schema"]["schema"]
LLAMA = response_format("tournament", POS, 0, "json_object_schema")["schema"]

# (name, answer, accepted by the OpenAI form, accepted by the llama.cpp form)
TOURNAMENT = [
    ("integers in range", tour({"doc_1": 2, "doc_2": -5, "doc_3": 5}), True, True),
    ("half points", tour({"doc_1": 2.5, "doc_2": -4.5, "doc_3": 0}), True, True),
    ("off-grid fraction", tour({"doc_1": 2.25, "doc_2": -1, "doc_3": 0}), True, False),
    ("the 8 a constrained model wrote", tour({"doc_1": 8, "doc_2": -1, "doc_3": 0}), False, False),
    ("547", tour({"doc_1": 547, "doc_2": -1, "doc_3": 0}), False, False),
    ("65043", tour({"doc_1": 1, "doc_2": 65043, "doc_3": 0}), False, False),
    ("below range", tour({"doc_1": 1, "doc_2": -5.5, "doc_3": 0}), False, False),
    ("missing document", tour({"doc_1": 1, "doc_2": 2}, ranking=POS), False, False),
    ("extra document", tour({"doc_1": 1, "doc_2": 2, "doc_3": 0, "doc_4": 1}, ranking=POS), False, False),
    ("score as string", tour({"doc_1": "1", "doc_2": 2, "doc_3": 0}), False, False),
    ("ranking too short", tour({"doc_1": 1, "doc_2": 2, "doc_3": 0}, ranking=["doc_1"]), False, False),
    ("ranking names a stranger", tour({"doc_1": 1, "doc_2": 2, "doc_3": 0}, ranking=["doc_1", "doc_2", "doc_9"]), False, False),
    ("extra top-level key", {**tour({"doc_1": 1, "doc_2": 2, "doc_3": 0}), "note": "x"}, False, False),
    ("no reasoning", {"ranking": list(POS), "scores": {"doc_1": 1, "doc_2": 2, "doc_3": 0}}, False, False),
]


@pytest.mark.parametrize("name,answer,openai_ok,llama_ok", TOURNAMENT, ids=[c[0] for c in TOURNAMENT])
def test_tournament_schema_bounds_and_keys(name, answer, openai_ok, llama_ok):
    assert valid(OPENAI, answer) is openai_ok
    assert valid(LLAMA, answer) is llama_ok
    if openai_ok:  # the parser accepts what the schema accepts
        assert parse_tournament(json.dumps(answer), ["a", "b", "c"]).valid


RUBRIC = [
    ("zeros and ones", rub({"doc_1": [0, 1, 0, 0, 0], "doc_2": [1, 1, 1, 1, 1], "doc_3": [0] * 5}), True),
    ("a 2", rub({"doc_1": [0, 2, 0, 0, 0], "doc_2": [1] * 5, "doc_3": [0] * 5}), False),
    ("a boolean", rub({"doc_1": [True, 0, 0, 0, 0], "doc_2": [1] * 5, "doc_3": [0] * 5}), False),
    ("a string", rub({"doc_1": ["1", 0, 0, 0, 0], "doc_2": [1] * 5, "doc_3": [0] * 5}), False),
    ("missing criterion", rub({"doc_1": [0, 0, 0, 0], "doc_2": [1] * 5, "doc_3": [0] * 5}), False),
    ("sixth criterion", rub({"doc_1": [0] * 6, "doc_2": [1] * 5, "doc_3": [0] * 5}), False),
    ("missing document", rub({"doc_1": [0] * 5, "doc_2": [1] * 5}), False),
    ("extra document", rub({"doc_1": [0] * 5, "doc_2": [1] * 5, "doc_3": [0] * 5, "doc_4": [0] * 5}), False),
]


@pytest.mark.parametrize("mode", ["json_schema", "json_object_schema"])
@pytest.mark.parametrize("name,answer,ok", RUBRIC, ids=[c[0] for c in RUBRIC])
def test_rubric_schema(mode, name, answer, ok):
    rf = response_format("rubric", POS, 5, mode)
    schema = rf["json_schema"]["schema"] if mode == "json_schema" else rf["schema"]
    assert valid(schema, answer) is ok
    if ok:
        assert parse_rubric(json.dumps(answer), ["a", "b", "c"], 5).valid


def test_lists_schema():
    schema = answer_schema("lists", (), 0)
    assert valid(schema, {"reasoning": "r", "better": "B"})
    assert not valid(schema, {"reasoning": "r", "better": "tie"})
    assert not valid(schema, {"reasoning": "r", "better": "A", "confidence": 1})
    assert parse_lists(json.dumps({"reasoning": "r", "better": "B"})).better == "B"


def test_the_forms_servers_accept():
    openai = response_format("tournament", POS, 0, "json_schema")
    assert openai["type"] == "json_schema" and set(openai["json_schema"]) == {"name", "schema", "strict"}
    assert openai["json_schema"]["strict"] is True and openai["json_schema"]["name"] == "tournament_answer"
    llama = response_format("tournament", POS, 0, "json_object_schema")
    assert set(llama) == {"type", "schema"} and llama["type"] == "json_object"
    assert response_format("tournament", POS, 0, "json_object") == {"type": "json_object"}
    assert response_format("tournament", POS, 0, "off") is None
    assert set(FORMS) == {"json_schema", "json_object_schema", "json_object", "off"}
    with pytest.raises(ValueError, match="mode must be one of"):
        response_format("tournament", POS, 0, "auto")
    json.dumps(openai), json.dumps(llama)  # plain JSON, ready for the request body


def test_strict_form_rules_hold_for_every_object():
    """OpenAI's strict mode wants every property required and no additional properties, on every object."""
    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for v in node.values():
                yield from objects(v)
        elif isinstance(node, list):
            for v in node:
                yield from objects(v)

    for stage, k in (("tournament", 0), ("rubric", 5), ("lists", 0)):
        schema = response_format(stage, POS, k, "json_schema")["json_schema"]["schema"]
        found = list(objects(schema))
        assert found
        for obj in found:
            assert obj["additionalProperties"] is False
            assert set(obj["required"]) == set(obj["properties"])
            if "reasoning" in obj["properties"]:
                assert list(obj["properties"])[0] == "reasoning"  # a constrained judge reasons before it grades


def test_score_grid():
    grid = score_grid()
    assert GRID_STEP == 0.5 and len(grid) == 21 and grid[0] == -5 and grid[-1] == 5
    assert all(isinstance(g, int) for g in grid if float(g).is_integer())  # a grammar writes 2, not 2.0
    assert score_grid(1) == list(range(-5, 6))
    assert score_grid(3) == [-5, -2, 1, 4, 5]
    with pytest.raises(ValueError):
        score_grid(0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(score_grid()), min_size=1, max_size=12), st.booleans())
def test_anything_the_schema_accepts_parses(scores, shuffle):
    pos = positional_ids(len(scores))
    answer = tour(dict(zip(pos, scores)), ranking=list(reversed(pos)) if shuffle else pos)
    for mode in ("json_schema", "json_object_schema"):
        rf = response_format("tournament", pos, 0, mode)
        assert valid(rf["json_schema"]["schema"] if mode == "json_schema" else rf["schema"], answer)
    r = parse_tournament(json.dumps(answer), [f"r{i}" for i in range(len(scores))])
    assert r.valid and list(r.scores.values()) == [float(s) for s in scores]

"""Parser: tolerant decoding, strict validation, one invalid category per failure, never a default grade."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rcp_jax.judging.answers.parse import PARSER_VERSION, decode_answer, parse_rubric, parse_tournament, strip_thinking
from rcp_jax.judging.store.records import INVALID_CATEGORIES

IDS = ["a", "b", "c"]  # real ids; the judge saw doc_1, doc_2, doc_3
GOOD_T = '{"reasoning": "r", "ranking": ["doc_1", "doc_3", "doc_2"], "scores": {"doc_1": 2, "doc_2": -1, "doc_3": 0}}'


def crit(*vals):
    return {f"C{k + 1}": v for k, v in enumerate(vals)}


def rubric(entries: dict) -> str:
    return json.dumps({d: {"reasoning": "x", "criteria": c} for d, c in entries.items()})


GOOD_R = {"doc_1": crit(1, 1, 1, 0, 0), "doc_2": crit(0, 0, 0, 0, 0), "doc_3": crit(1, 1, 1, 1, 1)}

# (name, answer text, finish reason, expected category) -- tournament answers for window (a, b, c)
TOURNAMENT_INVALID = [
    ("empty", "", "stop", "no_json"),
    ("none", None, None, "no_json"),
    ("prose only", "The best is doc_1, then doc_3.", "stop", "no_json"),
    ("refusal", "I'm sorry, but I can't help with that.", "stop", "refused"),
    ("content filter", "", "content_filter", "refused"),
    ("truncated by length", '{"reasoning": "r", "scores": {"doc_1": 2, "doc_2": -1', "length", "truncated"),
    ("never closes", '{"scores": {"doc_1": 2, "doc_2": -1, "doc_3": 0}', "stop", "truncated"),
    ("prose then cut JSON", 'Here you go: {"scores": {"doc_1": 1, "doc_2"', "stop", "truncated"),
    ("thinking cut off", "<think>Let me compare doc_1 and doc_2 carefully", "length", "truncated"),
    ("thinking only", "<think>hmm</think>", "stop", "no_json"),
    ("answer only inside thinking", "<think>" + GOOD_T + "</think> I cannot answer.", "stop", "refused"),
    ("missing value", '{"scores": {"doc_1": 2, "doc_2": -1, "doc_3": }}', "stop", "invalid_json"),
    ("python quotes", "{'scores': {'doc_1': 2, 'doc_2': -1, 'doc_3': 0}}", "stop", "invalid_json"),
    ("missing document", '{"scores": {"doc_1": 2, "doc_2": -1}}', "stop", "incomplete"),
    ("extra document", '{"scores": {"doc_1": 2, "doc_2": -1, "doc_3": 0, "doc_4": 1}}', "stop", "schema"),
    ("repeated document", '{"scores": {"doc_1": 2, "doc_1": 3, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("repeated up to case", '{"scores": {"doc_1": 2, "DOC_1": 3, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("real ids instead of positional", '{"scores": {"a": 2, "b": -1, "c": 0}}', "stop", "schema"),
    ("bare numbers as ids", '{"scores": {"1": 2, "2": -1, "3": 0}}', "stop", "schema"),
    ("boolean score", '{"scores": {"doc_1": true, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("null score", '{"scores": {"doc_1": null, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("NaN score", '{"scores": {"doc_1": NaN, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("infinite score", '{"scores": {"doc_1": Infinity, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("above range", '{"scores": {"doc_1": 6, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("below range", '{"scores": {"doc_1": 2, "doc_2": -5.5, "doc_3": 0}}', "stop", "schema"),
    ("word score", '{"scores": {"doc_1": "high", "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("list score", '{"scores": {"doc_1": [2], "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("scores as list", '{"scores": [2, -1, 0]}', "stop", "schema"),
    ("no scores key", '{"ranking": ["doc_1", "doc_2", "doc_3"]}', "stop", "schema"),
    ("empty object", "{}", "stop", "schema"),
    ("ranking names a stranger", '{"ranking": ["doc_9"], "scores": {"doc_1": 2, "doc_2": -1, "doc_3": 0}}', "stop", "schema"),
    ("fake answer inside reasoning", '{"reasoning": "it said {\\"scores\\": {\\"doc_2\\": 5}}", "scores": {"doc_1": 1}}', "stop", "incomplete"),
]

# rubric answers for window (a, b, c), K = 5
RUBRIC_INVALID = [
    ("boolean answer", rubric({**GOOD_R, "doc_1": crit(True, 1, 1, 0, 0)}), "schema"),
    ("float answer", rubric({**GOOD_R, "doc_1": crit(1.0, 1, 1, 0, 0)}), "schema"),
    ("answer 2", rubric({**GOOD_R, "doc_2": crit(0, 2, 0, 0, 0)}), "schema"),
    ("answer yes", rubric({**GOOD_R, "doc_2": crit("yes", 0, 0, 0, 0)}), "schema"),
    ("sixth criterion", rubric({**GOOD_R, "doc_3": {**crit(1, 1, 1, 1, 1), "C6": 1}}), "schema"),
    ("missing criterion", rubric({**GOOD_R, "doc_3": crit(1, 1, 1, 1)}), "schema"),
    ("repeated criterion", '{"doc_1": {"criteria": {"C1": 1, "c1": 0, "C2": 1, "C3": 1, "C4": 0, "C5": 0}}}', "schema"),
    ("missing document", rubric({k: v for k, v in GOOD_R.items() if k != "doc_3"}), "incomplete"),
    ("extra document", rubric({**GOOD_R, "doc_4": crit(0, 0, 0, 0, 0)}), "schema"),
    ("criteria not nested", json.dumps({d: c for d, c in GOOD_R.items()}), "schema"),
    ("criteria as list", json.dumps({d: {"criteria": [1, 1, 0, 0, 0]} for d in GOOD_R}), "schema"),
    ("top-level commentary key", json.dumps({**{d: {"criteria": c} for d, c in GOOD_R.items()}, "summary": "ok"}), "schema"),
]

VALID_TOURNAMENT = [
    ("plain", GOOD_T),
    ("think block first", "<think>doc_2 is off-topic {not json}</think>\n" + GOOD_T),
    ("closing think tag only", "comparing the three...</think>" + GOOD_T),
    ("json code fence", "```json\n" + GOOD_T + "\n```"),
    ("bare code fence", "```\n" + GOOD_T + "\n```"),
    ("prose around", "Sure. Here is my grading:\n" + GOOD_T + "\nHope this helps."),
    ("stray brace before", "Careful with { in prose. " + GOOD_T),
    ("example object first", 'The format is {"x": 1}. Answer: ' + GOOD_T),
    ("latex escapes", GOOD_T.replace('"r"', '"uses \\alpha, \\sum_i x_i and \\mathbb{R}"')),
    ("raw newline in string", GOOD_T.replace('"r"', '"line one\nline two"')),
    ("trailing commas", '{"scores": {"doc_1": 2, "doc_2": -1, "doc_3": 0,},}'),
    ("numeric strings and case", '{"scores": {" Doc_1 ": "2", "doc_2": "-1.0", "DOC_3": 0}}'),
    ("float scores", '{"scores": {"doc_1": 2.0, "doc_2": -1.0, "doc_3": 0.0}}'),
    ("complete despite length stop", GOOD_T),
]


@pytest.mark.parametrize("name,text,finish,expected", TOURNAMENT_INVALID, ids=[c[0] for c in TOURNAMENT_INVALID])
def test_malformed_tournament_answers_are_invalid_with_their_category(name, text, finish, expected):
    r = parse_tournament(text, IDS, finish_reason=finish)
    assert not r.valid
    assert r.category == expected, r.detail
    assert r.scores is None and r.criteria is None  # never a default grade
    assert r.detail


@pytest.mark.parametrize("name,text,expected", RUBRIC_INVALID, ids=[c[0] for c in RUBRIC_INVALID])
def test_malformed_rubric_answers_are_invalid_with_their_category(name, text, expected):
    r = parse_rubric(text, IDS, 5, finish_reason="stop")
    assert not r.valid
    assert r.category == expected, r.detail
    assert r.criteria is None


def test_table_is_large_enough():
    assert len(TOURNAMENT_INVALID) + len(RUBRIC_INVALID) >= 30
    assert {c[-1] for c in TOURNAMENT_INVALID} == set(INVALID_CATEGORIES)


@pytest.mark.parametrize("name,text", VALID_TOURNAMENT, ids=[c[0] for c in VALID_TOURNAMENT])
def test_tolerated_wrappings_decode_to_the_same_scores(name, text):
    finish = "length" if name == "complete despite length stop" else "stop"
    r = parse_tournament(text, IDS, finish_reason=finish)
    assert r.valid, (r.category, r.detail)
    assert r.scores == {"a": 2.0, "b": -1.0, "c": 0.0}  # keyed by the real ids, in window order
    assert list(r.scores) == IDS


def test_rubric_maps_positional_ids_back_and_accepts_string_answers():
    text = json.dumps(
        {
            "doc_2": {"reasoning": "no", "criteria": {"c1": "0", "C2": "0", "C3": 0, "C4": 0, "C5": 0}},
            "doc_1": {"criteria": crit(1, 1, 1, 0, 0)},
            "doc_3": {"reasoning": "yes", "criteria": crit("1", 1, 1, 1, 1)},
        }
    )
    r = parse_rubric("<think>ok</think>```json\n" + text + "\n```", IDS, 5)
    assert r.valid, r.detail
    assert r.criteria == {"a": (1, 1, 1, 0, 0), "b": (0, 0, 0, 0, 0), "c": (1, 1, 1, 1, 1)}


def test_rubric_with_k_criteria():
    text = json.dumps({d: {"criteria": crit(1, 0, 1)} for d in ("doc_1", "doc_2", "doc_3")})
    assert parse_rubric(text, IDS, 3).criteria == {d: (1, 0, 1) for d in IDS}
    assert parse_rubric(text, IDS, 5).category == "schema"  # C4, C5 missing


def test_strip_thinking_variants():
    assert strip_thinking("<think>a</think>B<THINK>c</THINK>D") == "BD"
    assert strip_thinking("hidden</think>shown") == "shown"
    assert strip_thinking("shown<think>never closed") == "shown"


def test_decode_prefers_the_answer_shaped_object():
    obj = decode_answer('{"note": 1} then {"scores": {}}', looks_like=lambda o: "scores" in o)
    assert obj == {"scores": {}}
    assert decode_answer('{"note": 1}', looks_like=lambda o: "scores" in o) == {"note": 1}


def test_parser_version_is_a_string():
    assert isinstance(PARSER_VERSION, str) and PARSER_VERSION


score = st.floats(min_value=-5, max_value=5, allow_nan=False).map(lambda x: round(x, 3))


@settings(max_examples=60, deadline=None)
@given(st.lists(score, min_size=1, max_size=12), st.sampled_from(["", "<think>x</think>", "```json\n"]))
def test_any_in_range_answer_round_trips(scores, prefix):
    ids = [f"real{i}" for i in range(len(scores))]
    body = json.dumps({"scores": {f"doc_{i + 1}": s for i, s in enumerate(scores)}})
    r = parse_tournament(prefix + body, ids)
    assert r.valid, r.detail
    assert r.scores == {d: float(s) for d, s in zip(ids, scores)}


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=8), st.integers(min_value=1, max_value=40))
def test_an_id_outside_the_window_is_never_accepted(w, extra):
    ids = [f"r{i}" for i in range(w)]
    stranger = f"doc_{w + extra}"
    scores = {f"doc_{i + 1}": 0 for i in range(w)} | {stranger: 1}
    assert parse_tournament(json.dumps({"scores": scores}), ids).category == "schema"
    rub = {f"doc_{i + 1}": {"criteria": crit(0, 0, 0, 0, 0)} for i in range(w)} | {stranger: {"criteria": crit(1, 1, 1, 1, 1)}}
    assert parse_rubric(json.dumps(rub), ids, 5).category == "schema"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]":,.\\ abdoc_123TtrueNa<>/think`\n')), max_size=120))
def test_arbitrary_text_never_raises(text):
    for r in (parse_tournament(text, IDS), parse_rubric(text, IDS, 5)):
        assert r.valid or r.category in INVALID_CATEGORIES

"""Rubric files: the built-in rubric is one such file, a K = 3 file drives the prompt, the
schema, the parser and the judge family, and bad files are refused naming the file and the fix."""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from rcp_jax.judging import SimulatedJudge, Window
from rcp_jax.judging.answers.parse import parse_rubric
from rcp_jax.judging.judge import resolve_prompts
from rcp_jax.judging.prompts.render import builtin_template, render_window
from rcp_jax.judging.prompts.rubric import (
    MAX_CRITERIA,
    RubricError,
    builtin_rubric,
    family_rubric,
    judge_rubric,
    load_rubric,
    rubric_from_text,
)
from rcp_jax.judging.store.records import JudgeFamily
from rcp_jax.judging.transport.schema import rubric_schema

ROOT = Path(__file__).resolve().parents[3]

THREE = '''# a support-desk rubric
name = "support"
description = "three criteria"

[[criteria]]
name = "On topic"
question = "is the document about what the query asks?"

[[criteria]]
name = "Useful detail"
question = "does it give specific, usable information for the query?"

[[criteria]]
name = "Complete answer"
question = """does it answer the query completely,
   with nothing important missing?"""
'''


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rubric") / "support.toml"
    path.write_text(THREE, encoding="utf-8")
    return path


def test_the_builtin_rubric_is_a_shipped_file_whose_prompt_is_the_pinned_one():
    rubric = builtin_rubric()
    assert rubric.name == "paper" and rubric.k == 5 and rubric.source == "builtin:paper"
    assert rubric.names == ["Topical relevance", "Information utility", "Entity and detail match", "Direct answer",
                            "Thorough treatment"]
    template = builtin_template("rubric")
    assert template.rubric == rubric and template.n_criteria == 5
    assert template.hash == "07dc99e5298b6e79"  # the prompt judged before rubric files existed (test_stable_ids)
    assert "answer five yes/no questions" in template.text and "{{CRITERIA}}" not in template.text
    assert load_rubric("paper") == rubric  # a shipped rubric's name, with no such file here
    # package data: a non-editable install ships the file
    assert resources.files("rcp_jax.judging.prompts").joinpath("rubrics", "paper.toml").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "rubrics/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["rcp_jax.judging.prompts"]


def test_a_copy_of_the_builtin_file_is_the_builtin_rubric_with_the_same_family(tmp_path):
    copy = tmp_path / "mine.toml"
    copy.write_text(resources.files("rcp_jax.judging.prompts").joinpath("rubrics", "paper.toml").read_text(encoding="utf-8")
                    .replace('name = "paper"', 'name = "my copy"') + "\n# a comment\n", encoding="utf-8")
    rubric = load_rubric(copy)
    assert rubric.name == "my copy" and rubric.builtin and rubric.hash == builtin_rubric().hash
    default, mine = SimulatedJudge({}), SimulatedJudge({}, prompts={"rubric": rubric})
    assert mine.family("rubric").family_id == default.family("rubric").family_id
    assert mine.family("rubric").rubric is None


def test_a_three_criterion_rubric_drives_prompt_schema_parser_and_family(three):
    rubric = load_rubric(three)
    assert rubric.k == 3 and rubric.codes == ["C1", "C2", "C3"] and not rubric.builtin
    assert rubric.criteria[2].question == "does it answer the query completely, with nothing important missing?"
    text = rubric.template().text
    assert "answer three yes/no questions" in text
    assert "C1 On topic: is the document about what the query asks?\nC2 Useful detail:" in text
    assert '"criteria": {"C1": 1, "C2": 1, "C3": 0}' in text and '"C4"' not in text
    judge = SimulatedJudge({"q": {"a": 3.0, "b": -3.0}}, prompts={"rubric": rubric})
    family = judge.family("rubric")
    assert family.n_criteria == 3 and family.rubric["hash"] == rubric.hash
    assert family.rubric["criteria"] == ["On topic", "Useful detail", "Complete answer"]
    assert family.family_id != SimulatedJudge({"q": {}}).family("rubric").family_id
    assert JudgeFamily.from_dict(json.loads(json.dumps(family.to_dict()))) == family  # as the store keeps it
    assert judge.family("tournament") == SimulatedJudge({}).family("tournament")  # the tournament is untouched
    assert judge_rubric(judge)["name"] == "support" and family_rubric(family.to_dict())["hash"] == rubric.hash
    window = Window("q", "rubric", "balanced", 0, ("a", "b"))
    rendered = judge.render(window, "the query", ["text a", "text b"])
    assert rendered.n_criteria == 3 and "C3 Complete answer" in rendered.text
    answer, finish = judge.answer("rubric", "q", ["a", "b"], n_criteria=3)
    parsed = parse_rubric(answer, ["a", "b"], 3, finish_reason=finish)
    assert parsed.valid and set(parsed.criteria) == {"a", "b"} and len(parsed.criteria["a"]) == 3
    assert not parse_rubric(answer, ["a", "b"], 5).valid  # a five-criterion parser refuses a K = 3 answer
    schema = rubric_schema(rendered.positional, 3)
    assert sorted(schema["properties"]["doc_1"]["properties"]["criteria"]["required"]) == ["C1", "C2", "C3"]


def test_the_builtin_family_names_its_rubric_and_a_custom_template_does_not():
    fam = SimulatedJudge({}).family("rubric").to_dict()
    assert "rubric" not in fam and family_rubric(fam)["name"] == "paper"
    custom = resolve_prompts({"rubric": "Judge {{QUERY}} against {{DOCUMENTS}} with C1..C5."})["rubric"]
    assert custom.rubric is None and family_rubric({"prompt_hash": custom.hash}) is None


def test_the_hash_covers_what_the_judge_reads_only(three):
    rubric = load_rubric(three)
    as_json = {"name": "other name", "criteria": [{"name": c.name, "question": c.question} for c in rubric.criteria]}
    path = three.with_name("support.json")
    path.write_text(json.dumps(as_json, indent=2), encoding="utf-8")
    assert load_rubric(path).hash == rubric.hash  # JSON, another name, no description: same criteria
    reworded = rubric_from_text(THREE.replace("usable information", "usable facts"))
    reordered = rubric_from_text(THREE.replace("On topic", "X").replace("Useful detail", "On topic").replace("X", "Useful detail"))
    assert len({rubric.hash, reworded.hash, reordered.hash}) == 3


def test_the_simulated_judge_answers_any_k_with_difficulties_spread_over_the_range():
    latent = {"q": {f"d{i}": x / 10 for i, x in enumerate(range(-60, 61))}}
    judge = SimulatedJudge(latent, seed=3)
    docs = list(latent["q"])
    counts = [0] * 7
    for start in range(0, len(docs), 10):
        window = docs[start:start + 10]
        parsed = parse_rubric(judge.answer("rubric", "q", window, n_criteria=7)[0], window, 7)
        assert parsed.valid
        for answers in parsed.criteria.values():
            for k, v in enumerate(answers):
                counts[k] += v
    assert counts[0] > counts[3] > counts[6]  # easiest to hardest criterion
    gammas, betas = judge._items(7)
    assert betas[0] == judge.beta[0] and betas[-1] == judge.beta[-1] and len(set(gammas)) == 1


def _bad(tmp_path, text: str, suffix: str = ".toml") -> str:
    path = tmp_path / f"bad{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    message = str(info.value)
    assert message.startswith(f"rubric file {path}")
    return message


CRIT = '[[criteria]]\nname = "{name}"\nquestion = "{q}"\n'


@pytest.mark.parametrize("text, expected", [
    (CRIT.format(name="A", q="is it a?"), "has 1 criterion; a rubric needs at least 2"),
    ('name = "x"\n', "has no criteria; add at least two"),
    ("".join(CRIT.format(name=f"N{i}", q="q?") for i in range(MAX_CRITERIA + 1)), f"at most {MAX_CRITERIA}"),
    (CRIT.format(name="Topic", q="a?") + CRIT.format(name="  topic ", q="b?"),
     "line 4: criterion 2 (C2) repeats the name 'topic' of criterion 1; names must be distinct"),
    (CRIT.format(name="A", q="a?") + CRIT.format(name="B", q="   "), "line 4: criterion 2 (C2) has an empty question"),
    (CRIT.format(name="", q="a?") + CRIT.format(name="B", q="b?"), "line 1: criterion 1 (C1) has an empty name"),
    ('wording = "x"\n' + CRIT.format(name="A", q="a?") * 2, "line 1: unknown key 'wording'; a rubric takes only"),
    (CRIT.format(name="A", q="a?") + '[[criteria]]\nname = "B"\nwording = "b?"\n',
     "line 4: criterion 2 (C2): unknown key 'wording'; a criterion takes only name and question"),
    (CRIT.format(name="A", q="a?") + '[[criteria]]\nname = "B"\n', "criterion 2 (C2) has no question"),
    (CRIT.format(name="A", q="a?") + CRIT.format(name="B", q="about {{QUERY}}?"), "would read as a placeholder"),
    (CRIT.format(name="A", q="a?") + '[[criteria]]\nname = 3\nquestion = "b"\n', "name must be text, got int"),
    ("format = 2\n" + CRIT.format(name="A", q="a?") * 2, "line 1: format 2 is not one this rcp-jax reads"),
    ('[[criteria]\nname = "A"\n', "not valid TOML"),
], ids=["one", "none", "too_many", "duplicate", "empty_question", "empty_name", "unknown_top_key",
        "unknown_criterion_key", "no_question", "placeholder", "name_not_text", "format", "syntax"])
def test_bad_rubric_files_are_refused_naming_the_file_line_and_fix(tmp_path, text, expected):
    assert expected in _bad(tmp_path, text)


def test_bad_json_and_missing_files_are_refused(tmp_path):
    assert "line 2: not valid JSON" in _bad(tmp_path, '{"criteria": [\n  {"name": "A",, }]}', ".json")
    with pytest.raises(RubricError, match=r"rubric file .*nothing.toml not found: pass a .toml rubric file to --rubric"):
        load_rubric(tmp_path / "nothing.toml")
    with pytest.raises(RubricError, match="is a folder"):
        load_rubric(tmp_path)


def test_render_fills_only_the_rubric_placeholders_once(three):
    """A criterion mentioning a document tag stays instruction text; documents are still escaped blocks."""
    rubric = rubric_from_text(THREE.replace("what the query asks", "what the <query> block asks"))
    rendered = render_window(rubric.template(), "q {{CRITERIA}}", ["a"], ["doc {{CRITERIA}}"])
    assert rendered.text.count("C1 On topic") == 1 and "q {{CRITERIA}}" in rendered.text

"""Record ids are the store's keys, so they must not drift between versions.

A resumed run asks again every window whose record id it cannot find. If the built-in prompts, the
parser version, the decoding settings recorded in a family or the hashing itself changed silently, an
upgrade would pay for every judgement again. These pins make such a change deliberate: update them in
the same commit that bumps the prompt or parser, and say so in the changelog.
"""

from __future__ import annotations

from rcp_jax.judging import LiteLLMJudge
from rcp_jax.judging.store.records import Window, content_hash, record_id


def test_content_hash_is_pinned():
    assert content_hash({"b": [1, 2.5, "x"], "a": None}) == content_hash({"a": None, "b": [1, 2.5, "x"]})
    assert content_hash({"a": None, "b": [1, 2.5, "x"]}) == "cacedc786abc936f"


def test_default_families_and_a_record_id_are_pinned():
    judge = LiteLLMJudge("openai/gpt-4o-mini", structured_output="json_schema")
    tournament, rubric = judge.family("tournament"), judge.family("rubric")
    assert (tournament.prompt_hash, rubric.prompt_hash) == ("a1b1189d8b8f49d0", "07dc99e5298b6e79")
    assert (tournament.family_id, rubric.family_id) == ("479e52fad4ad9ce2", "9f34078554e4c573")
    window = Window(query_id="q1", stage="tournament", phase="round1", sequence=0, doc_ids=("a", "b", "c"))
    assert record_id(tournament, window) == "98ff7943373a9545"
    reordered = Window(query_id="q1", stage="tournament", phase="round1", sequence=0, doc_ids=("c", "b", "a"))
    assert record_id(tournament, reordered) != record_id(tournament, window)  # order is part of the window

"""Provider prefix caches hit only on an identical prompt prefix: every built-in prompt puts its static part (the
instructions, the scoring rules or the rubric, the answer format) first and the window's own part (query, documents)
last, so all windows of one size share everything before ``<query>``."""

from __future__ import annotations

import os

import pytest
from rcp_jax.judging import SimulatedJudge, Window, synthetic_dataset
from rcp_jax.judging.prompts.render import builtin_template

#: The built-in templates' hashes as released (the family ids of existing stores rest on them): the order checked
#: here is the prompts' own, not bought by rewording them.
HASHES = {"tournament": "a1b1189d8b8f49d0", "rubric": "07dc99e5298b6e79", "lists": "0270a644e3ebb872"}


@pytest.mark.parametrize("stage", ["tournament", "rubric", "lists"])
def test_the_window_part_comes_last_in_every_builtin_prompt(stage):
    text = builtin_template(stage).text
    query, documents = text.index("{{QUERY}}"), text.index("{{DOCUMENTS}}")
    assert query < documents
    head = text[:query]
    for placeholder in ("{{N_DOCS}}", "{{DOC_IDS}}", "{{CRITERIA}}", "{{N_CRITERIA}}", "{{ANSWER_EXAMPLE}}"):
        assert placeholder not in text[query:], placeholder  # nothing static after the query
    assert "ANSWER" in head and text[documents:].strip() == "{{DOCUMENTS}}\n</documents>".strip()


def test_windows_of_one_size_share_the_whole_static_prefix():
    queries, documents, latent = synthetic_dataset(3, 12, seed=2, doc_chars=200)
    judge = SimulatedJudge(latent)
    for stage in ("tournament", "rubric"):
        texts = []
        for i, q in enumerate(sorted(documents)):
            ids = tuple(sorted(documents[q]))[i:i + 6]
            texts.append(judge.render(Window(q, stage, "round1" if stage == "tournament" else "balanced", 0, ids),
                                      queries[q], [documents[q][d] for d in ids]).text)
        shared = os.path.commonprefix(texts)
        static = texts[0][: texts[0].index("<query>\n") + len("<query>\n")]
        assert shared.startswith(static), shared[-60:]  # everything before the query is common to all windows
        assert len(static) > 1500  # the instructions, not a few characters


def test_the_builtin_prompt_hashes_are_unchanged():
    assert HASHES == {"tournament": builtin_template("tournament").hash, "rubric": builtin_template("rubric").hash,
                      "lists": builtin_template("lists").hash}

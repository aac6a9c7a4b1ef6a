"""``fit`` and ``diagnose`` report the answer-quality signals of a store.

A store judged through the fake OpenAI-compatible server by a positional judge (the shape SmolLM2-135M
gave: scores by slot whatever the documents, the template's placeholder as reasoning) gets warning lines
from ``fit`` (and the signals in fit.json) and from ``diagnose --fit``; a store of the simulated judge,
whose scores follow a latent relevance with noise, gets none.
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.fixtures.fake_server import FakeOpenAIServer  # noqa: E402
from rcp_jax.cli import main  # noqa: E402
from rcp_jax.judging import SimulatedJudge  # noqa: E402


class Positional:
    """The fake server's judge: tournament scores by slot (doc_1 lowest), the template's reasoning copied;
    rubric windows answered by a good judge."""

    def __init__(self, good: SimulatedJudge):
        self.good = good

    def answer(self, stage, query_id, doc_ids, n_criteria=5, attempt=1, split=0):
        if stage != "tournament":
            return self.good.answer(stage, query_id, doc_ids, n_criteria, attempt, split)
        pos = [f"doc_{k + 1}" for k in range(len(doc_ids))]
        scores = {p: k - 4 for k, p in enumerate(pos)}
        return json.dumps({"reasoning": "<a few sentences comparing the documents>",
                           "ranking": pos[::-1], "scores": scores}), "stop"



@pytest.fixture(scope="module")
def stores(demo_tiny, tmp_path_factory):
    """{"good": store, "positional": store} of the three-query demo cut."""
    folder = tmp_path_factory.mktemp("quality")
    rows = [json.loads(x) for x in demo_tiny["rows"].read_text().splitlines()]
    queries = {r["query_id"]: r["query"] for r in rows}
    documents = {d: t for r in rows for d, t in zip(r["doc_ids"], r["docs"])}
    latent = {r["query_id"]: {d: 2.0 * r["qrels"].get(d, 0) - 2 for d in r["doc_ids"]} for r in rows}
    out = {}
    assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "good"), "--quiet"]) == 0
    out["good"] = folder / "good"
    os.environ.setdefault("OPENAI_API_KEY", "sk-quality-test")
    with FakeOpenAIServer(Positional(SimulatedJudge(latent, seed=1)), queries=queries, documents=documents) as s:
        rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "positional"), "--quiet",
                   "--model", "openai/fake-judge", "--api-base", s.url, "--structured-output", "json_object"])
    assert rc == 0
    out["positional"] = folder / "positional"
    return out


def _fit(cli, store, out):
    res = cli("fit", "--store", str(store), "--out", str(out), "--method", "map", "--no-plots", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_fit_warns_on_a_positional_store_and_not_on_a_good_one(stores, cli, tmp_path):
    bad = _fit(cli, stores["positional"], tmp_path / "bad")
    failed = {q["name"] for q in bad["answer_quality"] if q["failed"]}
    assert failed == {"position", "repeated", "mirror", "echo"}
    assert any("ignore the documents (position)" in w and "+1.00" in w for w in bad["warnings"])
    assert any("rcp-jax doctor" in w for w in bad["warnings"])
    on_disk = json.loads((tmp_path / "bad" / "fit.json").read_text())
    assert on_disk["answer_quality"] == bad["answer_quality"]
    text = cli("fit", "--store", str(stores["positional"]), "--out", str(tmp_path / "bad2"), "--method", "map", "--no-plots").stdout
    assert "warning: the judge's answers ignore the documents (repeated)" in text

    good = _fit(cli, stores["good"], tmp_path / "good")
    assert not any(q["failed"] for q in good["answer_quality"]) and good["warnings"] == []
    assert {q["name"]: q["decidable"] for q in good["answer_quality"]} == dict.fromkeys(
        ("all_tied", "position", "repeated", "mirror", "echo"), True)


def test_diagnose_reports_the_signals_of_a_fit(stores, cli, tmp_path):
    _fit(cli, stores["positional"], tmp_path / "bad")
    res = cli("diagnose", "--fit", str(tmp_path / "bad"), "--no-plots")
    assert res.returncode == 0, res.stderr
    assert "## Answer quality of the judge" in res.stdout
    assert "FAILED position:" in res.stdout and "FAILED echo:" in res.stdout  # echo from fit.json
    assert "warning: the judge's answers ignore the documents (mirror)" in res.stdout
    payload = json.loads(cli("diagnose", "--fit", str(tmp_path / "bad"), "--no-plots", "--json").stdout)["fit"]
    assert {q["name"] for q in payload["answer_quality"] if q["failed"]} == {"position", "repeated", "mirror", "echo"}
    assert len(payload["warnings"]) == 4

    _fit(cli, stores["good"], tmp_path / "good")
    res = cli("diagnose", "--fit", str(tmp_path / "good"), "--no-plots")
    assert res.returncode == 0 and "## Answer quality of the judge" in res.stdout
    assert "FAILED" not in res.stdout and "warning: the judge's answers" not in res.stdout

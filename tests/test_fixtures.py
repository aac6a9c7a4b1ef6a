"""The project's own fixtures: the published values in ``tests/fixtures/`` and the demo cut ``demo_tiny``.

``published_values.json`` transcribes numbers of the RCP paper and of the authors' release
(cohere-ai/rcp-ndcg) in this project's layout, so the golden tests run on any clone. Where
``../shared/data`` is present (CI), every transcribed number is checked against the reference files.
"""

from __future__ import annotations

import json

import pandas as pd


def test_published_values_say_where_they_come_from(published_values):
    assert "cohere-ai/rcp-ndcg" in published_values["source"] and "arXiv" in published_values["source"]
    gain, cases = published_values["gain"], published_values["protocol_cases"]
    assert len(gain["gamma"]) == len(gain["beta"]) == 5 and len(gain["points"]) == 5
    assert cases["k"] == 10 and len(cases["cases"]) == 7
    assert {c["protocol"] for c in cases["cases"]} == {"nanobeir", "bright", "trecdl", "vidore"}


def test_published_values_equal_the_shared_reference_files(published_values, shared_data):
    ref = json.loads((shared_data / "reference" / "gain_rows.json").read_text())
    gain = published_values["gain"]
    assert gain["gamma"] == ref["item_params"]["gamma"] and gain["beta"] == ref["item_params"]["beta"]
    assert [(p["theta"], p["gain"]) for p in gain["points"]] == [(r["theta"], r["gain"]) for r in ref["rows"]]
    assert [p["where"] for p in gain["points"]] == [f"{r['subset']} query {r['query_id']} doc {r['doc_id']}" for r in ref["rows"]]

    ref = json.loads((shared_data / "reference" / "protocol_cases.json").read_text())
    ours = published_values["protocol_cases"]
    assert ours["k"] == ref["k"] and len(ours["cases"]) == len(ref["queries"])
    for mine, theirs in zip(ours["cases"], ref["queries"]):
        where = theirs["dataset"]
        assert (mine["protocol"], mine["dataset"], mine["query_id"]) == (theirs["suite"], theirs["dataset"], theirs["query_id"])
        assert mine["paper_rcp_ndcg"] == theirs["expected"]["rcp_ndcg"], where
        assert mine["paper_qrel_ndcg"] == theirs["expected"]["qrel_ndcg"], where
        assert mine["rcp_tolerance"] == theirs["rcp_ndcg_tolerance"], where
        assert mine["pool"] == theirs.get("candidates"), where
        for key in ("scores", "gains", "qrels", "excluded"):
            assert mine[key] == theirs[key], (where, key)


def test_demo_tiny_is_a_cut_of_the_demo(demo_tiny):
    rows = [json.loads(line) for line in demo_tiny["rows"].read_text().splitlines()]
    assert [r["query_id"] for r in rows] == ["q01", "q03", "q04"]
    assert all(len(r["doc_ids"]) == len(r["docs"]) == 8 and all(r["docs"]) for r in rows)
    runs = pd.read_csv(demo_tiny["runs"], dtype={"query_id": str, "doc_id": str})
    assert sorted(runs["system"].unique()) == ["bm25", "oracle_noisy"]
    pooled = {(r["query_id"], d) for r in rows for d in r["doc_ids"]}
    for _, run in runs.groupby("system"):
        assert set(zip(run["query_id"], run["doc_id"])) == pooled  # every system scores every pooled document
    graded = {(q, d) for q, _, d, g in (line.split() for line in demo_tiny["qrels"].read_text().splitlines()) if int(g) > 0}
    assert graded and {(r["query_id"], d) for r in rows for d in r["qrels"]} <= graded

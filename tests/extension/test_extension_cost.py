"""What ``extend`` costs per new document: the README's table ("Adding a new reranker later") is
``extension_counts``, and one small measured run (the benchmark's own measurement) makes the calls it plans."""

from __future__ import annotations

from pathlib import Path


def test_extension_cost_per_new_document_matches_the_readme():
    from rcp_jax.schedule import extension_counts

    table = {1: (12, 1), 2: (12, 2), 3: (12, 6), 5: (12, 7), 10: (24, 7), 30: (72, 20)}
    assert {n: extension_counts(n) for n in table} == table
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "| calls per new document | 13 | 7.0 | 6.0 | 3.8 | 3.1 | 3.07 |" in readme
    assert [round(sum(c) / n, 2) for n, c in table.items()] == [13.0, 7.0, 6.0, 3.8, 3.1, 3.07]
    from benchmarks.fixtures.extension_cost import measure  # the benchmark's own measurement, on a small collection

    got = measure(3, queries=2, pool=16, seed=1, malformed=0.0)
    assert (got["new_documents"], got["calls"], got["calls_per_new_document"]) == (6, 36, 6.0)

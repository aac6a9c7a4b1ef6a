"""The undecided pairs of ``judge --budget`` that more judging cannot decide are counted and named, not only
the open ones (the decisions on a toy posterior, and the CLI's round lines, summary and JSON)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rcp_jax.budget import decide_pairs, run_weights
from rcp_jax.cli._budget import reach_lines
from tests.helpers.toy_posterior import toy_posterior


def test_budget_decisions_count_and_name_the_pairs_out_of_reach():
    rng = np.random.default_rng(4)
    post = toy_posterior(rng, q=12, n=12)
    pools = {q: list(post.doc_ids[i]) for i, q in enumerate(post.query_ids)}
    # b and b_twin rank with noise of the same size: their difference is about 0 but varies by query, so the
    # twelve queries alone leave it undecided (outside the ROPE on both sides): out of reach of judging
    noise = {"a": 0.3, "b": 1.3, "b_twin": 1.3, "c": 3.3}
    run = pd.DataFrame([(s, q, d, t + sd * rng.standard_normal())
                        for i, q in enumerate(post.query_ids) for s, sd in noise.items()
                        for d, t in zip(post.doc_ids[i], post.theta[i])], columns=["system", "query_id", "doc_id", "score"])
    dec = decide_pairs(run_weights(run, pools, post.query_ids, k=5), post, k=5, n_bootstrap=400)
    far = dec.out_of_reach
    assert dec.n_decided + dec.n_open + dec.n_out_of_reach == len(dec.pairs) == 6
    assert dec.n_out_of_reach == len(far) >= 1 and not far["reachable"].any() and (far["call"] == "undecided").all()
    assert {frozenset(p) for p in zip(far["system_a"], far["system_b"])} >= {frozenset(("b", "b_twin"))}
    lines = reach_lines(dec)
    assert lines[0].startswith(f"out of reach ({len(far)}:")
    assert any("b vs b_twin" in x or "b_twin vs b" in x for x in lines[1:])
    assert reach_lines(dec, limit=0)[-1].startswith(f"  ... and {len(far)} more")


def test_cli_budget_reports_open_and_out_of_reach(demo_tiny, tmp_path, cli):
    base = ["judge", "--rows", str(demo_tiny["rows"]), "--store", str(tmp_path / "s"), "--runs", str(demo_tiny["runs"]),
            "--budget", "24", "--round-calls", "3"]
    out = cli(*base)
    assert out.returncode == 0, out.stderr
    rounds = [x for x in out.stderr.splitlines() if x.startswith("round ")]
    assert rounds and all(", out of reach " in x for x in rounds)
    summary = next(x for x in out.stdout.splitlines() if x.startswith("pairs decided"))
    assert " open (more judging can decide them), " in summary and summary.endswith(" out of reach")
    payload = json.loads(cli(*base, "--json").stdout)
    assert payload["pairs"] == payload["pairs_decided"] + payload["pairs_open"] + payload["pairs_out_of_reach"]
    assert len(payload["out_of_reach"]) == payload["pairs_out_of_reach"]
    assert all("out_of_reach" in r for r in payload["rounds"])

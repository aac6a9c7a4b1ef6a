"""`rcp-jax fit --method nuts` and `rcp-jax evaluate --posterior` on the shared tiny dataset (in process)."""

from __future__ import annotations

import json

import pandas as pd

from rcp_jax.cli import main


def test_fit_nuts_then_evaluate_posterior(shared_data, tmp_path, capsys):
    tiny = shared_data / "reference" / "tiny"
    runs = []
    for line in (tiny / "systems.jsonl").read_text().splitlines():
        r = json.loads(line)
        runs += [(r["system"], r["query_id"], d, s) for d, s in r["scores"].items()]
    pd.DataFrame(runs, columns=["system", "query_id", "doc_id", "score"]).to_csv(tmp_path / "runs.csv", index=False)
    assert main(["judge", "--rows", str(tiny / "rows.jsonl"), "--store", str(tmp_path / "store")]) == 0
    capsys.readouterr()
    code = main(["fit", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "fit"), "--method", "nuts",
                 "--draws", "200", "--chains", "2", "--json"])
    assert code == 0
    info = json.loads(capsys.readouterr().out)
    assert info["method"] == "nuts" and info["diagnostics"]["num_chains"] == 2
    assert (tmp_path / "fit" / "posterior" / "draws.npz").is_file()
    code = main(["evaluate", "--calibration", str(tmp_path / "fit" / "calibration"), "--runs", str(tmp_path / "runs.csv"),
                 "--k", "5", "--posterior", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    pairs = out["posterior"]["pairs"]
    assert len(pairs) == 1 and {"p_a_better", "p_rope", "call"} <= set(pairs[0])
    assert 0 <= pairs[0]["p_a_better"] <= 1

"""The same inputs and seed give the same gains and metrics, bit for bit, whatever
the order of the queries, pools and rows in the input files, and whatever order the judge's answers
arrived in (another concurrency); the fits alone ignore the order of their input rows.
"""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pandas as pd
import pytest

from rcp_jax.calibration import calibrate
from rcp_jax.tournament import fit_bradley_terry

from .conftest import MALFORMED_RATE, output_files, pipeline_commands


def shuffled_collection(collection, folder):
    """The reference collection with queries, qrels and run rows in another order (pools keep theirs)."""
    folder.mkdir()
    rng = random.Random(11)
    rows = [json.loads(line) for line in collection["rows"].read_text(encoding="utf-8").splitlines()]
    rng.shuffle(rows)
    for r in rows:
        items = list(r["qrels"].items())
        rng.shuffle(items)
        r["qrels"] = dict(items)
    (folder / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    runs = pd.read_csv(collection["runs"], dtype=str)
    runs.sample(frac=1.0, random_state=3).to_csv(folder / "runs.csv", index=False)
    lines = collection["qrels"].read_text().splitlines()
    rng.shuffle(lines)
    (folder / "qrels.txt").write_text("\n".join(lines) + "\n")
    return {"rows": folder / "rows.jsonl", "runs": folder / "runs.csv", "qrels": folder / "qrels.txt"}


@pytest.mark.slow
def test_shuffled_inputs_and_another_concurrency_give_identical_outputs(driver, collection, reference, tmp_path):
    data = shuffled_collection(collection, tmp_path / "data")
    judge, fit, evaluate = pipeline_commands(data)
    spec = {"tag": "shuffled", "commands": [judge + ["--concurrency", "3"], fit, evaluate],
            "malformed_rate": MALFORMED_RATE}
    done = driver.run(tmp_path, spec)
    assert done.returncode == 0, done.stderr[-3000:]
    got = output_files(tmp_path / "out")
    assert set(got) == set(reference.outputs)
    for name in sorted(got):
        assert got[name] == reference.outputs[name], f"{name} differs"


def _table(reference, name):
    return pd.read_csv(io.BytesIO(reference.outputs[name]), dtype={"query_id": str, "doc_id": str, "window_id": str})


def test_fits_ignore_the_order_of_their_input_rows(reference):
    window_scores, answers = _table(reference, "window_scores.csv"), _table(reference, "answers.csv")
    bt = fit_bradley_terry(window_scores)
    cal = calibrate(bt, answers)

    # windows in another order (documents keep their order inside a window), queries reversed
    windows = window_scores[["query_id", "window_id"]].drop_duplicates().sample(frac=1.0, random_state=5)
    ws2 = windows.merge(window_scores, on=["query_id", "window_id"])
    bt2 = fit_bradley_terry(ws2)
    assert bt2.attrs["n_components"].keys() == bt.attrs["n_components"].keys()
    pd.testing.assert_frame_equal(bt2.sort_values(["query_id", "doc_id"]).reset_index(drop=True),
                                  bt.sort_values(["query_id", "doc_id"]).reset_index(drop=True), check_exact=True)
    # output rows follow the input's order of first appearance
    assert list(bt2[["query_id", "doc_id"]].itertuples(index=False)) == list(
        ws2[["query_id", "doc_id"]].drop_duplicates().itertuples(index=False))

    cal2 = calibrate(bt2.sample(frac=1.0, random_state=6), answers.sample(frac=1.0, random_state=7))
    np.testing.assert_array_equal(cal2.gamma, cal.gamma)
    np.testing.assert_array_equal(cal2.beta, cal.beta)
    key = ["query_id", "doc_id"]
    pd.testing.assert_frame_equal(cal2.documents.sort_values(key).reset_index(drop=True),
                                  cal.documents.sort_values(key).reset_index(drop=True), check_exact=True)
    pd.testing.assert_frame_equal(cal2.queries.sort_values("query_id").reset_index(drop=True),
                                  cal.queries.sort_values("query_id").reset_index(drop=True), check_exact=True)

"""Ctrl-C (SIGINT) during ``rcp-jax judge`` with a slow judge stops cleanly: exit
130, a message saying how to resume, no traceback; every answer received before the interrupt is in
the store (whole lines only); the next run asks only the rest and ends where an uninterrupted run ends.
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from rcp_jax.judging import read_judgements

from .conftest import MALFORMED_RATE, output_files, pipeline_commands, read_calls


@pytest.mark.slow
def test_ctrl_c_while_judging_keeps_every_received_answer_and_resumes(driver, collection, reference, tmp_path):
    store, log = tmp_path / "store", tmp_path / "calls.jsonl"
    judge, *rest = pipeline_commands(collection)
    slow = {"tag": "interrupted", "commands": [judge + ["--concurrency", "4"]], "calls_log": str(log),
            "malformed_rate": MALFORMED_RATE, "latency": 0.05}
    proc = driver.start(tmp_path, slow)
    deadline = time.monotonic() + 300  # a guard against a hung process, not a timing assertion
    while len(read_calls(log)) < 12:
        assert proc.poll() is None, f"judge ended before the interrupt: {proc.communicate()}"
        assert time.monotonic() < deadline, "judge made no progress"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "run the same command again to resume" in err
    assert "Traceback" not in err
    received = read_calls(log)
    records = read_judgements(store, "tournament") + read_judgements(store, "rubric")
    assert Counter((r.record_id, r.attempts) for r in records) == Counter((c["record_id"], c["attempt"]) for c in received)
    assert all(p.read_bytes().endswith(b"\n") for p in store.glob("*.jsonl"))  # no torn line on a clean stop
    ref_valid = {r.record_id for stage in ("tournament", "rubric")
                 for r in read_judgements(reference.folder / "store", stage) if r.valid}
    valid = {r.record_id for r in records if r.valid}
    assert valid < ref_valid, "the interrupt landed mid-judging"

    resumed = driver.run(tmp_path, {"tag": "resumed", "commands": [judge, *rest], "calls_log": str(log),
                                    "malformed_rate": MALFORMED_RATE})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    asked_again = {c["record_id"] for c in read_calls(log) if c["tag"] == "resumed"}
    assert not asked_again & valid
    assert output_files(tmp_path / "out") == reference.outputs

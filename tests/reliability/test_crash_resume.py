"""The whole pipeline (judge -> fit -> evaluate, in one process through the CLI)
SIGKILLed at chosen points, again and again, then finished: the final calibration, metrics and every
output file equal an uninterrupted run with the same seed byte for byte; no judgement is asked again
once stored; and no output file is ever half-written.

Each kill point is deterministic (``tests/helpers/crash_driver.py`` kills the process from a hook at the n-th
judge call, BT refit, 2PL fit or file write), so there is no timing in these tests. One chain of processes resumes
from each kill in turn: each resumed run is itself killed further along. (A crash between an output's
complete temp file and its rename is covered in-process by ``test_atomic.py``.)
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from rcp_jax.judging import read_judgements

from .conftest import MALFORMED_RATE, output_files, pipeline_commands, read_calls, temp_files

# (kill spec, what the process was doing, check of the state it left)
KILLS = [
    ("call:*:30", "judging round 1"),
    ("bt:2", "between tournament rounds (the BT refit after round 2)"),
    ("calibrate:1", "fitting the 2PL calibration"),
    ("write:8:half", "half-way through writing calibration/documents.csv"),
]


def stored(store: Path) -> list[tuple[str, int, bool, str]]:
    """(record id, attempt, valid, phase) of every record in the store."""
    if not store.exists():
        return []
    return [(j.record_id, j.attempts, j.valid, j.window.phase)
            for stage in ("tournament", "rubric") for j in read_judgements(store, stage)]


@pytest.mark.slow
def test_sigkill_anywhere_then_resume_equals_an_uninterrupted_run(driver, collection, reference, tmp_path):
    store, out, log = tmp_path / "store", tmp_path / "out", tmp_path / "calls.jsonl"
    ref_records = stored(reference.folder / "store")
    ref_valid_phases = Counter(p for _, _, v, p in ref_records if v)
    spec = {"commands": pipeline_commands(collection), "calls_log": str(log), "malformed_rate": MALFORMED_RATE}

    for i, (kill, what) in enumerate(KILLS):
        valid_before = {rid for rid, _, valid, _ in stored(store) if valid}
        done = driver.run(tmp_path, {**spec, "tag": f"kill{i}", "kill": kill})
        assert done.returncode == -signal.SIGKILL, f"kill while {what} did not land:\n{done.stderr[-3000:]}"
        asked = {c["record_id"] for c in read_calls(log) if c["tag"] == f"kill{i}"}
        assert not asked & valid_before, f"run killed while {what} asked again for windows already stored"
        for name, content in output_files(out).items():  # every finished file is whole and final
            assert content == reference.outputs[name], f"{name} differs after the kill while {what}"

        # the kill landed where it was meant to
        valid_phases = Counter(p for _, _, v, p in stored(store) if v)
        if kill == "call:*:30":
            assert 0 < valid_phases["round1"] + valid_phases["round1_reversed"] < (
                ref_valid_phases["round1"] + ref_valid_phases["round1_reversed"])
        elif kill == "bt:2":
            assert valid_phases["round2"] == ref_valid_phases["round2"] and valid_phases["round3_b1"] == 0
        elif kill == "calibrate:1":
            assert valid_phases == ref_valid_phases  # judging finished; the fit was killed before writing
            assert set(output_files(out)) == {"window_scores.csv", "answers.csv", "bt.csv"}
        elif kill == "write:8:half":
            (tmp,) = temp_files(out / "calibration")
            assert tmp.name.startswith(".documents.csv.")
            assert not (out / "calibration" / "documents.csv").exists()
            full = reference.outputs["calibration/documents.csv"]
            assert 0 < tmp.stat().st_size < len(full) and full.startswith(tmp.read_bytes())

    valid_before = {rid for rid, _, valid, _ in stored(store) if valid}
    done = driver.run(tmp_path, {**spec, "tag": "final"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert not {c["record_id"] for c in read_calls(log) if c["tag"] == "final"} & valid_before

    # outputs: bit for bit the uninterrupted run's (the calibration, the metrics, every table)
    assert output_files(out) == reference.outputs
    # the temp file the kill mid-write left was swept by the next run; outputs get the umask's permissions
    assert temp_files(out) == []
    umask = os.umask(0)
    os.umask(umask)
    assert {p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()} == {0o666 & ~umask}
    # the store: the same answer attempts as the uninterrupted run, each once; one valid record per window
    final_records = stored(store)
    assert Counter(final_records) == Counter(ref_records)
    valid = Counter(rid for rid, _, v, _ in final_records if v)
    assert set(valid.values()) == {1}
    # every call made is stored, except answers in flight at a kill (lost, then asked again)
    logged = Counter((c["record_id"], c["attempt"]) for c in read_calls(log))
    kept = Counter((rid, attempt) for rid, attempt, _, _ in final_records)
    assert not kept - logged
    lost = logged - kept
    assert sum(lost.values()) <= 16 * len(KILLS)  # at most the calls in flight (--concurrency 16) per kill
    assert Counter((c["record_id"], c["attempt"]) for c in reference.calls) == kept

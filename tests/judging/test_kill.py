"""A judging process killed mid-run (SIGKILL) or interrupted (SIGINT) resumes to exactly one valid
record per window: nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rcp_jax.judging import read_judgements, record_id

WORKER = Path(__file__).with_name("_kill_worker.py")
REPO = Path(__file__).resolve().parents[2]


def sigint_default() -> None:
    """In the child before exec: Ctrl-C back to its default. A test run started as a shell's background
    job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt, which these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(store: Path, latency: float, processes: int | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{Path(__file__).parent}"}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(store), str(latency)] + ([str(processes)] if processes else []),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=sigint_default,
    )


def lines(store: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in store.glob("*.jsonl"))


def wait_for_lines(proc: subprocess.Popen, store: Path, n: int) -> None:
    deadline = time.monotonic() + 60  # a guard against a hung worker, not a timing assertion
    while lines(store) < n:
        assert proc.poll() is None, f"worker ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "worker made no progress"
        time.sleep(0.01)


def records(store: Path):
    return read_judgements(store, "tournament") + read_judgements(store, "rubric")


def check_exactly_one_valid_per_window(store: Path) -> None:
    from _kill_worker import plan  # noqa: PLC0415 - the worker's own plan

    from rcp_jax.judging import SimulatedJudge  # noqa: PLC0415

    windows, _, _, latent = plan()
    judge = SimulatedJudge(latent, latency=0.0, malformed_rate=0.25, seed=5)
    expected = {record_id(judge.family(w.stage), w) for w in windows}
    valid = Counter(r.record_id for r in records(store) if r.valid)
    assert set(valid) == expected, "every window has a valid record, and no stranger does"
    assert set(valid.values()) == {1}, "no window has two valid records"


@pytest.fixture(autouse=True)
def _worker_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def test_sigkill_mid_run_then_restart(tmp_path):
    store = tmp_path / "store"
    proc = start(store, latency=0.03)
    wait_for_lines(proc, store, 12)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = {p.name: p.read_bytes() for p in store.glob("*.jsonl")}
    killed_valid = {r.record_id for r in records(store) if r.valid}
    assert 0 < len(killed_valid) < 48, "the kill landed mid-run"
    # as if the kill had also torn a write in half
    with open(store / "tournament.jsonl", "ab") as f:
        f.write(b'{"record_id": "torn-by-the-crash", "fam')

    again = start(store, latency=0.0)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["cached"] == len(killed_valid)  # windows answered before the kill were not asked again
    assert summary["valid"] == summary["windows"] == 48
    check_exactly_one_valid_per_window(store)
    for name, content in before.items():  # nothing stored before the kill was lost
        assert (store / name).read_bytes().startswith(content)
    assert (store / "tournament.jsonl.torn").read_bytes().startswith(b'{"record_id": "torn-by-the-crash"')


@pytest.mark.parametrize("processes", [None, 2], ids=["in-process", "worker-processes"])
def test_ctrl_c_stores_received_answers_and_releases_the_lock(tmp_path, processes):
    store = tmp_path / "store"
    proc = start(store, latency=0.03, processes=processes)
    wait_for_lines(proc, store, 8)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"]
    stored = records(store)
    assert len({r.record_id for r in stored if r.valid}) < 48, "the interrupt landed mid-run"
    if processes:  # answers a worker had sent but the caller had not yet received are not stored (asked again)
        assert len(stored) <= summary["calls"]
    else:  # every answer received before Ctrl-C is in the store
        assert len(stored) == summary["calls"]
    assert all(p.read_bytes().endswith(b"\n") for p in store.glob("*.jsonl"))  # no torn line on a clean stop

    again = start(store, latency=0.0, processes=processes)  # the lock was released
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    check_exactly_one_valid_per_window(store)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_sigkill_with_worker_processes_then_restart(tmp_path):
    """Calls in worker processes: the caller alone writes the store, so a kill of the caller loses
    nothing stored, frees the lock at once, and the workers go away with it."""
    store = tmp_path / "store"
    proc = start(store, latency=0.03, processes=2)
    wait_for_lines(proc, store, 12)
    pids = [int(p) for p in Path(f"{store}.pids").read_text().split()]
    assert len(pids) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.name: p.read_bytes() for p in store.glob("*.jsonl")}
    killed_valid = {r.record_id for r in records(store) if r.valid}
    assert 0 < len(killed_valid) < 48, "the kill landed mid-run"

    again = start(store, latency=0.0, processes=2)  # the lock is free: no worker inherited it
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["cached"] == len(killed_valid)
    assert summary["valid"] == summary["windows"] == 48
    check_exactly_one_valid_per_window(store)
    for name, content in before.items():
        assert (store / name).read_bytes().startswith(content)
    deadline = time.monotonic() + 30  # a guard against workers left behind, not a timing assertion
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, "worker processes outlived the killed caller"
        time.sleep(0.05)

"""Exit codes, plain mistakes without tracebacks, and files left by killed writes.

Exit codes: 0 success, 1 unexpected failure, 2 bad input / usage, 3 the judge failed (authentication,
endpoint, transport, windows still invalid after their attempts, an early-stop verdict), 130 Ctrl-C,
143 SIGTERM (tests in ``test_signals.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rcp_jax.cli.app import EPILOG, main
from rcp_jax.data import atomic as rio
from rcp_jax.judging import SimulatedJudge
from rcp_jax.judging.errors import JudgeAuthError, StoreError
from rcp_jax.judging.store.jsonl import JudgementStore

REPO = Path(__file__).resolve().parents[2]


def test_help_documents_every_exit_code(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert EPILOG.strip() in text
    for code, meaning in (("0", "success"), ("1", "unexpected"), ("2", "bad input"), ("3", "the judge failed"),
                          ("130", "Ctrl-C"), ("143", "SIGTERM")):
        assert any(line.split()[:1] == [code] and meaning in line for line in text.splitlines()), code


# --- folder options naming a file ------------------------------------------------------------------

def folder_cases(tmp: Path, rows: Path) -> list[tuple[str, list[str]]]:
    """(option, argv) for every verb's folder option, with ``{F}`` standing for the path to test."""
    return [
        ("--store", ["judge", "--rows", str(rows), "--store", "{F}"]),
        ("--out", ["judge", "--rows", str(rows), "--store", str(tmp / "s"), "--out", "{F}"]),
        ("--store", ["fit", "--store", "{F}", "--out", str(tmp / "o")]),
        ("--out", ["fit", "--store", str(tmp / "s"), "--out", "{F}"]),
        ("--out", ["evaluate", "--calibration", str(tmp / "c"), "--runs", str(rows), "--out", "{F}"]),
        ("--out", ["demo", "--out", "{F}"]),
        ("--report", ["compare-lists", "--report", "{F}"]),
        ("--store", ["compare-lists", "--store", "{F}"]),
        ("--out", ["compare-lists", "--out", "{F}"]),
        ("--fit", ["diagnose", "--fit", "{F}"]),
        ("--out", ["diagnose", "--fit", str(tmp / "f"), "--out", "{F}"]),
        ("--out", ["meta-evaluate", "--per-query", str(rows), "--out", "{F}"]),
    ]


def test_every_folder_option_naming_a_file_is_a_usage_error(tmp_path, collection, capsys):
    a_file = tmp_path / "results.csv"
    a_file.write_text("not a folder\n")
    cases = folder_cases(tmp_path, collection["rows"])
    verbs = {argv[0] for _, argv in cases}
    assert verbs >= {"judge", "fit", "evaluate", "demo", "compare-lists", "diagnose"}
    for target, says in ((a_file, "is an existing file, not a folder"), (a_file / "sub", f"{a_file} is an existing file")):
        for option, argv in cases:
            with pytest.raises(SystemExit) as done:
                main([a.replace("{F}", str(target)) for a in argv])
            assert done.value.code == 2, (option, argv)
            err = capsys.readouterr().err
            assert f"argument {option}" in err and says in err and "pass a folder path" in err, err
    assert a_file.read_text() == "not a folder\n"


def test_the_console_script_says_so_without_a_traceback(tmp_path):
    a_file = tmp_path / "store"
    a_file.write_text("x")
    done = subprocess.run([sys.executable, "-m", "rcp_jax", "fit", "--store", str(a_file), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and f"{a_file} is an existing file, not a folder" in done.stderr


def test_a_store_path_that_is_a_file_is_a_store_error(tmp_path):
    path = tmp_path / "store"
    path.write_text("x")
    with pytest.raises(StoreError, match="is an existing file, not a folder.*--store"):
        JudgementStore(path).open()
    with pytest.raises(StoreError, match=f"cannot be created: {path} is an existing file"):
        JudgementStore(path / "sub").open()


@pytest.mark.parametrize(("error", "says"), [
    (FileExistsError(17, "File exists", "/x/out"), "/x/out is an existing file where a folder is needed"),
    (NotADirectoryError(20, "Not a directory", "/x/f/out"), "/x/f/out cannot be made: part of it is an existing file"),
    (IsADirectoryError(21, "Is a directory", "/x/d"), "/x/d is a folder where a file is needed"),
])
def test_a_path_of_the_wrong_kind_anywhere_is_exit_2(monkeypatch, capsys, error, says):
    from rcp_jax.cli import compare

    def boom(args):
        raise error

    monkeypatch.setattr(compare, "run", boom)
    assert main(["compare", "x.csv"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


# --- exit 3: the judge failed -------------------------------------------------------------------------

def judge_argv(collection, store: Path) -> list[str]:
    return ["judge", "--rows", str(collection["rows"]), "--name", "exit-codes", "--store", str(store), "--quiet"]


def test_windows_still_invalid_after_their_attempts_exit_3(monkeypatch, collection, tmp_path, capsys):
    original = SimulatedJudge.complete

    async def complete(self, request):
        completion = await original(self, request)
        w = request.window
        if (w.query_id, w.phase, w.sequence) == ("q1", "round1", 0):  # this window never answers usably
            return replace(completion, text="I cannot answer that in JSON, sorry.")
        return completion

    monkeypatch.setattr(SimulatedJudge, "complete", complete)
    store = tmp_path / "store"
    assert main(judge_argv(collection, store)) == 3
    err = capsys.readouterr().err
    assert "rcp-jax judge: judge failed:" in err and "still have no valid answer" in err
    assert "q1/tournament/round1#0" in err and "run the same command again" in err.lower()
    assert "Traceback" not in err
    assert (store / "tournament.jsonl").exists()  # every answer received is stored


def test_an_authentication_failure_exits_3(monkeypatch, collection, tmp_path, capsys):
    async def complete(self, request):
        raise JudgeAuthError("judge model 'simulated': the endpoint refused the credentials (HTTP 401); check the key")

    monkeypatch.setattr(SimulatedJudge, "complete", complete)
    assert main(judge_argv(collection, tmp_path / "store")) == 3
    assert "judge failed: judge model 'simulated': the endpoint refused" in capsys.readouterr().err


def test_bad_input_stays_exit_2(collection, tmp_path, capsys):
    assert main(["judge", "--rows", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "s")]) == 2
    assert "error:" in capsys.readouterr().err


def test_an_interrupt_outside_any_loop_exits_by_its_signal(monkeypatch, capsys):
    from rcp_jax.cli import compare
    from rcp_jax.judging.transport.loop import Interrupted

    before = signal.getsignal(signal.SIGTERM)
    for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        def stop(args, signum=signum):
            raise Interrupted("interrupted", signum)

        monkeypatch.setattr(compare, "run", stop)
        assert main(["compare", "x.csv"]) == code
        assert "run the same command again to resume" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == before  # main put SIGTERM back as it found it


# --- atomic writes: the umask, and temp files left by a kill ---------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_get_the_umask_permissions(tmp_path, umask):
    old = os.umask(umask)
    try:
        path = rio.atomic_write_text(tmp_path / "out" / "table.csv", "a,b\n1,2\n")
        again = rio.atomic_write_text(path, "a,b\n3,4\n")  # a rewrite too
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    assert again.read_text() == "a,b\n3,4\n"


KILL_MID_WRITE = """
import os, signal, sys
import rcp_jax.data.atomic as io
real = os.replace
def die(src, dst):
    os.kill(os.getpid(), signal.SIGKILL)
io.os = type("P", (), {"__getattr__": lambda self, n: getattr(os, n), "replace": staticmethod(die)})()
io.atomic_write_text(sys.argv[1], "partial output\\n")
"""


def test_a_temp_file_left_by_a_killed_write_is_removed_by_the_next_write_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = out / "bt.csv"
    done = subprocess.run([sys.executable, "-c", KILL_MID_WRITE, str(target)], cwd=REPO, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    (left,) = [p for p in out.iterdir() if p.name.endswith(".tmp")]
    assert rio.TEMP_PATTERN.match(left.name) and not target.exists()

    live = out / f".answers.csv.rcp-{os.getpid()}-0123abcd.tmp"  # a write in progress (this process is alive)
    old_recent = out / ".bt.csv.k2j4_x9q.tmp"  # an earlier version's temp file, too recent to be stale
    old_stale = out / ".bt.csv.a1b2c3d4.tmp"  # an earlier version's temp file of an output, hours old
    users = [out / ".notes.tmp", out / "draft.tmp", out / ".bt.csv.rcp-12-nothex00.tmp", out / "bt.csv.bak"]
    for p in [live, old_recent, old_stale, *users]:
        p.write_text("keep?\n")
    target.write_text("previous output\n")
    hours_ago = os.path.getmtime(old_stale) - 3 * 3600
    os.utime(old_stale, (hours_ago, hours_ago))

    rio._cleaned.discard(out.resolve())  # a fresh run (this test process may have written there before)
    rio.atomic_write_text(out / "leaderboard.csv", "system\n")  # any write into the folder sweeps it
    assert not left.exists() and not old_stale.exists()
    assert live.exists() and old_recent.exists() and all(p.exists() for p in users)

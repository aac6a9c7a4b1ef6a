"""The console script exists, reports its version and refuses unknown verbs with a usage error."""

from __future__ import annotations

import subprocess
import sys

import rcp_jax
from rcp_jax.cli import main


def test_version_via_console_entry_point():
    out = subprocess.run([sys.executable, "-m", "rcp_jax", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"rcp-jax {rcp_jax.__version__}"


def test_no_verb_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: rcp-jax" in capsys.readouterr().out


def test_judge_errors_become_exit_codes_not_tracebacks(monkeypatch, capsys):
    from rcp_jax.judging.errors import JudgeAuthError, JudgeInputError
    from rcp_jax.cli import fit

    def boom(_args):
        raise JudgeAuthError("model 'openai/x' at https://example.invalid: authentication failed")

    monkeypatch.setattr(fit, "run", boom)
    assert main(["fit", "--store", "s", "--out", "o"]) == 3  # the judge failed (2 is bad input)
    assert "judge failed: model 'openai/x'" in capsys.readouterr().err

    def bad(_args):
        raise JudgeInputError("window q1/rubric/balanced#0: document 'd9' has no text")

    monkeypatch.setattr(fit, "run", bad)
    assert main(["fit", "--store", "s", "--out", "o"]) == 2
    assert "has no text" in capsys.readouterr().err

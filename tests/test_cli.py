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

"""One ``rcp-jax`` command in this process with its output captured (for modules whose fixtures outlive capsys)."""

from __future__ import annotations

import contextlib
import io

from rcp_jax.cli import main


def cli(*argv) -> tuple[int, str, str]:
    """One ``rcp-jax`` command in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def ok(result: tuple[int, str, str]) -> tuple[str, str]:
    """(stdout, stderr) of a :func:`cli` result that must have succeeded (else its stderr in the failure)."""
    code, out, err = result
    assert code == 0, err
    return out, err
